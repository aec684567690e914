//! Parsing sizes and durations the way people type them.

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Parses a byte size: `25MB` (10^6), `1GiB` (2^30), `4096` (see `nesquic_testcases::size`).
pub fn parse_size(text: &str) -> Result<u64> {
    Ok(nesquic_testcases::size::parse(text)?)
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
    fn sizes_come_from_the_testcases_parser() {
        assert_eq!(parse_size("25MB").unwrap(), 25_000_000);
        assert!(parse_size("0").is_err());
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
