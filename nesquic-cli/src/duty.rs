//! `--duty WINDOW/PERIOD` as typed; the duty cycle itself is the engine's
//! (`nesquic_engine::duty`).

use anyhow::{bail, Context, Result};

use crate::units;

pub use nesquic_engine::duty::DutySpec;

/// Parses `50ms/500ms`.
pub fn parse(text: &str) -> Result<DutySpec> {
    let (w, p) = text.split_once('/').context("expected WINDOW/PERIOD, e.g. 50ms/500ms")?;
    let window = units::parse_duration(w)?;
    let period = units::parse_duration(p)?;
    if window.is_zero() || window >= period {
        bail!("--duty {text}: the window must be longer than zero and shorter than the period");
    }
    Ok(DutySpec { window, period })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parses_and_rejects() {
        let d = parse("50ms/500ms").expect("valid");
        assert_eq!((d.window, d.period), (Duration::from_millis(50), Duration::from_millis(500)));
        assert!(parse("500ms/50ms").is_err());
        assert!(parse("0ms/50ms").is_err());
        assert!(parse("50ms").is_err());
    }
}
