//! Parsing sizes and durations the way people type them.

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Parses a byte size: `25MB` (10^6), `1GiB` (2^30), `4096` (see `nesquic_testcases::size`).
pub fn parse_size(text: &str) -> Result<u64> {
    Ok(nesquic_testcases::size::parse(text)?)
}

/// The longest duration any flag takes: a year (a longer timeout is a typo, and a deadline that
/// far would overflow the clock's arithmetic).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration: `30s`, `500ms`, `2m`, or bare seconds `30`; more than zero, at most
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() && t.starts_with('-') {
        bail!("invalid duration '{text}': must be positive");
    }
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
    // Compared in f64 first: Duration::from_secs_f64 panics past u64::MAX seconds.
    if seconds > MAX_DURATION.as_secs_f64() {
        bail!("invalid duration '{text}': at most a year ({}s)", MAX_DURATION.as_secs());
    }
    let duration = Duration::try_from_secs_f64(seconds).with_context(|| format!("invalid duration '{text}'"))?;
    if duration.is_zero() {
        bail!("invalid duration '{text}': shorter than a nanosecond");
    }
    Ok(duration)
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

    #[test]
    fn durations_out_of_range_are_errors_not_panics() {
        let err = |text: &str| parse_duration(text).expect_err(text).to_string();
        assert_eq!(err("99999999999999999999"), "invalid duration '99999999999999999999': at most a year (31536000s)");
        assert_eq!(err("1e30s"), "invalid duration '1e30s': unknown unit 'e30s' (use ms, s or m)");
        assert_eq!(err("366d"), "invalid duration '366d': unknown unit 'd' (use ms, s or m)");
        assert_eq!(err("525601m"), "invalid duration '525601m': at most a year (31536000s)");
        assert_eq!(err("-5s"), "invalid duration '-5s': must be positive");
        assert_eq!(err("NaN"), "invalid duration 'NaN': expected e.g. 30s, 500ms, 2m");
        assert_eq!(err("inf"), "invalid duration 'inf': expected e.g. 30s, 500ms, 2m");
        assert_eq!(err("0.0000000001"), "invalid duration '0.0000000001': shorter than a nanosecond");
        assert_eq!(err("1.2.3s"), "invalid duration '1.2.3s': expected e.g. 30s, 500ms, 2m");
        // The bound itself is fine.
        assert_eq!(parse_duration("525600m").unwrap(), MAX_DURATION);
        assert_eq!(parse_duration("31536000").unwrap(), MAX_DURATION);
    }
}
