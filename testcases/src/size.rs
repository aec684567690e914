//! Byte sizes the way people type them (`25MB`, `1GiB`, `4096`), shared by scenario files and
//! the command line.

/// A size that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid size '{text}': {reason}")]
pub struct SizeError {
    text: String,
    reason: String,
}

/// Parses a byte size: `25MB` (10^6), `1GiB` (2^30), `4096`, `1.5GB`, `64k`. Case-insensitive;
/// a bare `K`/`M`/`G` is decimal like `KB`/`MB`/`GB`. At least 1 byte.
pub fn parse(text: &str) -> Result<u64, SizeError> {
    let fail = |reason: String| SizeError { text: text.to_string(), reason };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err(fail("expected a number with an optional unit, e.g. 25MB, 1GiB, 4096".into()));
    }
    let value: f64 = number.parse().map_err(|_| fail(format!("'{number}' is not a number")))?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(fail(format!("unknown unit '{other}' (use B, KB, MB, GB, KiB, MiB or GiB)"))),
    };
    let bytes = value * multiplier;
    // `u64::MAX as f64` is 2^64 itself, one past the largest u64: `>=` keeps `as` from saturating.
    if bytes < 1.0 || bytes.fract() != 0.0 || bytes >= u64::MAX as f64 {
        return Err(fail("must be a whole number of bytes, at least 1".into()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse("25MB").unwrap(), 25_000_000);
        assert_eq!(parse("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse("4096").unwrap(), 4096);
        assert_eq!(parse("1.5gb").unwrap(), 1_500_000_000);
        assert_eq!(parse("64k").unwrap(), 64_000);
        for bad in ["", "MB", "12XB", "-3", "0", "1.5"] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
    }
}
