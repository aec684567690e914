//! The files a stack's own endpoint works on, below the [`Lut`](crate::Lut) seam: the run's
//! directories (`www`, `downloads`, `logs`, `qlog`, `certs` beside the run's certificate, in its
//! private 0700 scratch directory), the payload file the server serves (the protocol's pattern,
//! so the download is checked by the same [`Verifier`] every adapter's client runs), the mount
//! points a recipe's fixed paths need (removed again when the run ends), and the check of what
//! the client downloaded.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nesquic_protocol::payload::{fill_pattern, Verifier, VerifyError};

use crate::error::EndpointError;

/// The payload file's name under `www` (and `downloads`).
pub const PAYLOAD_FILE: &str = "nesquic-payload";

/// The run's endpoint directories under `dir` (the run's scratch directory).
#[derive(Debug, Clone)]
pub struct Layout {
    /// What the server serves.
    pub www: PathBuf,
    /// Where the client downloads.
    pub downloads: PathBuf,
    /// The programs' own logs (interop endpoints write /logs/log.txt).
    pub logs: PathBuf,
    /// Their qlog, if a recipe asks for one.
    pub qlog: PathBuf,
    /// The certificate and key as PEM.
    pub certs: PathBuf,
}

impl Layout {
    /// The directories under `dir`.
    pub fn under(dir: &Path) -> Self {
        let root = dir.join("endpoint");
        Self {
            www: root.join("www"),
            downloads: root.join("downloads"),
            logs: root.join("logs"),
            qlog: root.join("qlog"),
            certs: root.join("certs"),
        }
    }

    /// Creates them, and the payload file of `size` bytes.
    pub fn create(&self, size: u64) -> Result<(), EndpointError> {
        for d in [&self.www, &self.downloads, &self.logs, &self.qlog, &self.certs] {
            std::fs::create_dir_all(d).map_err(io("create", d))?;
        }
        write_payload(&self.www.join(PAYLOAD_FILE), size)
    }
}

/// Writes `size` bytes of the payload pattern to `path`.
fn write_payload(path: &Path, size: u64) -> Result<(), EndpointError> {
    let file = std::fs::File::create(path).map_err(io("create", path))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    while offset < size {
        // At most the buffer's length, so the cast cannot truncate.
        let n = (size - offset).min(buf.len() as u64) as usize;
        fill_pattern(offset, &mut buf[..n]);
        out.write_all(&buf[..n]).map_err(io("write", path))?;
        offset += n as u64;
    }
    out.flush().map_err(io("write", path))
}

/// Checks a downloaded file against the pattern, byte for byte; returns its length.
pub fn verify_download(path: &Path, expected: u64) -> Result<u64, EndpointError> {
    let mut file = std::fs::File::open(path).map_err(|e| EndpointError::Mismatch {
        path: path.into(),
        why: format!("the client wrote no file there ({e})"),
    })?;
    let mut verifier = Verifier::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io("read", path))?;
        if n == 0 {
            break;
        }
        verifier.update(&buf[..n]).map_err(|e| mismatch(path, e))?;
    }
    verifier.finish(expected).map_err(|e| mismatch(path, e))?;
    Ok(verifier.received())
}

fn mismatch(path: &Path, e: VerifyError) -> EndpointError {
    EndpointError::Mismatch { path: path.into(), why: e.to_string() }
}

/// What an endpoint's client transferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collected {
    /// Payload bytes.
    pub bytes: u64,
    /// Whether they were checked byte for byte (a perf protocol's are only counted).
    pub verified: bool,
}

/// Directories made as mount points for a recipe's fixed paths (`/www`), removed when dropped if
/// still empty: outside the endpoint's private mount namespace they are never used.
#[derive(Debug, Default)]
pub struct MountPoints {
    created: Vec<PathBuf>,
}

impl MountPoints {
    /// Makes each missing directory of `targets`.
    pub fn ensure<'a>(targets: impl IntoIterator<Item = &'a str>) -> Result<Self, EndpointError> {
        let mut made = Self::default();
        for t in targets {
            let path = PathBuf::from(t);
            if !path.is_dir() {
                std::fs::create_dir_all(&path).map_err(io("create the mount point", &path))?;
                made.created.push(path);
            }
        }
        Ok(made)
    }
}

impl Drop for MountPoints {
    fn drop(&mut self) {
        for p in self.created.iter().rev() {
            // Only an empty directory goes: anything put there since is someone's.
            let _ = std::fs::remove_dir(p);
        }
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> EndpointError + 'a {
    move |source| EndpointError::Io { what, path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_file_verifies_and_a_flipped_byte_or_a_short_file_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::under(dir.path());
        let size = 3 * 1024 * 1024 + 17;
        layout.create(size).expect("create");
        let served = layout.www.join(PAYLOAD_FILE);
        assert_eq!(verify_download(&served, size).expect("verifies"), size);
        let mut bytes = std::fs::read(&served).expect("read");
        bytes[2_000_001] ^= 1;
        let copy = layout.downloads.join(PAYLOAD_FILE);
        std::fs::write(&copy, &bytes).expect("write");
        let err = verify_download(&copy, size).expect_err("flipped").to_string();
        assert!(err.contains("offset 2000001"), "{err}");
        bytes[2_000_001] ^= 1;
        std::fs::write(&copy, &bytes[..bytes.len() - 1]).expect("write");
        let err = verify_download(&copy, size).expect_err("short").to_string();
        assert!(err.contains("length"), "{err}");
        std::fs::remove_file(&copy).expect("rm");
        let err = verify_download(&copy, size).expect_err("missing").to_string();
        assert!(err.contains("wrote no file"), "{err}");
    }
}
