//! TLS files as LUTs receive them (docs/protocol.md): a DER certificate for
//! [`SERVER_NAME`](crate::payload::SERVER_NAME), which clients verify as their only trust anchor,
//! and its DER PKCS#8 key. Generating them needs a crypto library and is the orchestrator's
//! business (`nesquic-lut-adapters`' `tls::generate`); this module only names and reads them.

use std::path::{Path, PathBuf};

/// Where a run's certificate and key live.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// DER certificate (also the client's trust anchor).
    pub cert: PathBuf,
    /// DER PKCS#8 private key.
    pub key: PathBuf,
}

/// Reading or writing a TLS file failed.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

/// Reads a DER file.
pub fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    std::fs::read(path).map_err(|source| FileError { path: path.to_path_buf(), source })
}
