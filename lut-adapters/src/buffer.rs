//! Socket buffer requests (`--rcvbuf`, `--sndbuf`): a size or a multiple of the kernel's default.

use crate::error::LutError;

/// Bytes for a socket buffer request: a size (`4MB`) or a multiple of the kernel's default
/// (`16x`, read from /proc/sys/net/core/`sysctl`, e.g. `rmem_default`).
pub fn socket_buffer(text: &str, sysctl: &str) -> Result<u64, LutError> {
    let bad = |why: String| LutError::BadBuffer { text: text.to_string(), why };
    let Some(factor) = text.strip_suffix('x') else {
        return nesquic_testcases::size::parse(text).map_err(|e| bad(e.to_string()));
    };
    let factor: f64 = factor.parse().map_err(|_| bad("expected SIZE or Nx (16x)".into()))?;
    if factor <= 0.0 || !factor.is_finite() {
        return Err(bad("the multiple must be positive".into()));
    }
    let path = format!("/proc/sys/net/core/{sysctl}");
    let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("read {path}: {e}")))?;
    let default: u64 = text.trim().parse().map_err(|_| bad(format!("{path} holds {:?}", text.trim())))?;
    Ok((default as f64 * factor) as u64)
}
