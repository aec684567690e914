//! The benchmark's rustls configuration (ring provider, TLS 1.3 only, ALPN `nesquic`, the run's
//! certificate), shared by quinn, quinn-proto and the TCP+TLS baseline so all three offer exactly
//! the same TLS: only the transport around it differs.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use nesquic_protocol::options::Cipher;

use crate::protocol::ALPN;
use crate::TranslationError;

/// The rustls suite of each TLS 1.3 cipher `--cipher` chooses from.
fn suite(cipher: Cipher) -> rustls::CipherSuite {
    match cipher {
        Cipher::Aes128Gcm => rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
        Cipher::Aes256Gcm => rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
        Cipher::Chacha20 => rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    }
}

/// rustls on ring, its cipher suites limited to `cipher` (`None`: all, rustls' preference order).
pub fn provider(cipher: Option<Cipher>) -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(cipher) = cipher {
        provider.cipher_suites.retain(|s| s.suite() == suite(cipher));
    }
    Arc::new(provider)
}

/// The server side: TLS 1.3 only, ALPN `nesquic`, the DER certificate and PKCS#8 key at `cert`
/// and `key`, suites limited to `cipher` if given.
pub fn server(cert: &Path, key: &Path, cipher: Option<Cipher>) -> Result<rustls::ServerConfig, TranslationError> {
    let cert = CertificateDer::from(read(cert)?);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(read(key)?));
    let mut tls = rustls::ServerConfig::builder_with_provider(provider(cipher))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    Ok(tls)
}

/// The client side: TLS 1.3 only, ALPN `nesquic`, trusting exactly the DER certificate at `ca`,
/// suites limited to `cipher` if given.
pub fn client(ca: &Path, cipher: Option<Cipher>) -> Result<rustls::ClientConfig, TranslationError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(read(ca)?))?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider(cipher))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    Ok(tls)
}

fn read(path: &Path) -> Result<Vec<u8>, TranslationError> {
    std::fs::read(path).map_err(|source| TranslationError::File { path: path.into(), source })
}
