//! DER to PEM, for libraries that only load PEM files (quiche, MsQuic over quictls). Nesquic hands LUTs DER files
//! (docs/protocol.md); the PEM copies live next to them only while the library loads them.

use std::path::{Path, PathBuf};

use crate::tls::FileError;

/// A PEM file removed when dropped.
#[derive(Debug)]
pub struct TempPem {
    path: PathBuf,
}

impl TempPem {
    /// The path as the `&str` quiche's loaders want.
    pub fn path_str(&self) -> Result<String, FileError> {
        self.path.to_str().map(str::to_string).ok_or_else(|| FileError {
            path: self.path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path is not UTF-8"),
        })
    }
}

impl Drop for TempPem {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Converts a DER certificate and a DER PKCS#8 key.
pub fn der_files_to_pem(cert: &Path, key: &Path) -> Result<(TempPem, TempPem), FileError> {
    Ok((der_file_to_pem(cert, "CERTIFICATE")?, der_file_to_pem(key, "PRIVATE KEY")?))
}

/// Writes `<der>.<pid>-<n>.pem` holding `der`'s bytes under a `label` armour (unique per call:
/// a server and a client in one process may convert the same file at once).
pub fn der_file_to_pem(der: &Path, label: &str) -> Result<TempPem, FileError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let bytes = std::fs::read(der).map_err(|source| FileError { path: der.into(), source })?;
    let mut name = der.as_os_str().to_owned();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    name.push(format!(".{}-{n}.pem", std::process::id()));
    let path = PathBuf::from(name);
    std::fs::write(&path, encode(label, &bytes)).map_err(|source| FileError { path: path.clone(), source })?;
    Ok(TempPem { path })
}

/// RFC 7468 textual encoding: base64 in 64-column lines between BEGIN/END lines.
pub fn encode(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                b64.push(ALPHABET[(n >> shift) as usize & 63] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (input, expected) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            let pem = encode("X", input.as_bytes());
            let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
            assert_eq!(body, expected, "{input:?}");
        }
        let long = encode("CERTIFICATE", &[0u8; 100]);
        assert!(long.starts_with("-----BEGIN CERTIFICATE-----\n") && long.ends_with("-----END CERTIFICATE-----\n"));
        assert!(long.lines().all(|l| l.len() <= 64 || l.starts_with("-----")));
    }
}
