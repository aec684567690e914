//! TLS material generated at run time: a self-signed certificate for [`SERVER_NAME`] that clients
//! verify as their only trust anchor (no "accept any certificate"). The file names and reading
//! them are `nesquic-protocol`'s ([`CertFiles`]); generating them (rcgen) stays here.

use std::path::{Path, PathBuf};

use nesquic_protocol::payload::SERVER_NAME;
pub use nesquic_protocol::tls::CertFiles;

/// Errors creating or reading TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen failed.
    #[error("cannot generate certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Generates a fresh certificate and key into `dir`.
pub fn generate(dir: &Path) -> Result<CertFiles, TlsError> {
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])?;
    let files = CertFiles { cert: dir.join("cert.der"), key: dir.join("key.der") };
    write(&files.cert, certified.cert.der())?;
    write(&files.key, certified.key_pair.serialize_der().as_slice())?;
    Ok(files)
}

/// Reads a DER file.
pub fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    Ok(nesquic_protocol::tls::read(path)?)
}

impl From<nesquic_protocol::tls::FileError> for TlsError {
    fn from(e: nesquic_protocol::tls::FileError) -> Self {
        TlsError::Io { path: e.path, source: e.source }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    std::fs::write(path, bytes).map_err(|source| TlsError::Io { path: path.to_path_buf(), source })
}
