//! Parsing sizes and durations the way people type them.

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Parses a byte size: `25MB` (10^6), `1GiB` (2^30), `4096`, `1.5GB`, `64k`. Case-insensitive;
/// a bare `K`/`M`/`G` is decimal like `KB`/`MB`/`GB`.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        bail!("invalid size '{text}': expected a number with an optional unit, e.g. 25MB, 1GiB, 4096");
    }
    let value: f64 = number.parse().with_context(|| format!("invalid size '{text}': '{number}' is not a number"))?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => bail!("invalid size '{text}': unknown unit '{other}' (use B, KB, MB, GB, KiB, MiB or GiB)"),
    };
    let bytes = value * multiplier;
    if bytes < 1.0 || bytes.fract() != 0.0 || bytes > u64::MAX as f64 {
        bail!("invalid size '{text}': must be a whole number of bytes, at least 1");
    }
    Ok(bytes as u64)
}

/// Parses a duration: `30s`, `500ms`, `2m`, or bare seconds `30`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 =
        number.parse().with_context(|| format!("invalid duration '{text}': expected e.g. 30s, 500ms, 2m"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" | "min" => value * 60.0,
        other => bail!("invalid duration '{text}': unknown unit '{other}' (use ms, s or m)"),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        bail!("invalid duration '{text}': must be positive");
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("25MB").unwrap(), 25_000_000);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5gb").unwrap(), 1_500_000_000);
        assert_eq!(parse_size("64k").unwrap(), 64_000);
        for bad in ["", "MB", "12XB", "-3", "0", "1.5"] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0").is_err());
    }
}
