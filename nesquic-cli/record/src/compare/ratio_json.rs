//! The JSON form of a head/base ratio with its interval (`nesquic_stats::RatioEstimate`, whose
//! crate knows no serde): its printed figures `ratio`, `low`, `high`, `confidence`, `df`, in
//! that order. For an `Option<RatioEstimate>` field:
//! `#[serde(default, with = "nesquic_record::compare::ratio_json")]`.

use nesquic_stats::RatioEstimate;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a report stores of an estimate.
#[derive(Serialize, Deserialize)]
struct Printed {
    ratio: f64,
    low: f64,
    high: f64,
    confidence: f64,
    df: f64,
}

/// Writes the estimate's printed figures, or `null`.
pub fn serialize<S: Serializer>(estimate: &Option<RatioEstimate>, s: S) -> Result<S::Ok, S::Error> {
    estimate
        .map(|e| Printed { ratio: e.ratio, low: e.low, high: e.high, confidence: e.confidence, df: e.df })
        .serialize(s)
}

/// Reads what [`serialize`] wrote.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RatioEstimate>, D::Error> {
    Ok(Option::<Printed>::deserialize(d)?
        .map(|p| RatioEstimate::from_printed(p.ratio, p.low, p.high, p.confidence, p.df)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Row {
        #[serde(default, with = "super")]
        interval: Option<RatioEstimate>,
    }

    #[test]
    fn the_json_form_is_the_printed_figures_in_order_and_reads_back() {
        let e = RatioEstimate::paired(&[100.0; 3], &[102.0, 104.0, 106.0], 0.99).expect("estimate");
        let text = serde_json::to_string(&Row { interval: Some(e) }).expect("json");
        let want = format!(
            "{{\"interval\":{{\"ratio\":{},\"low\":{},\"high\":{},\"confidence\":0.99,\"df\":2.0}}}}",
            serde_json::to_string(&e.ratio).expect("f64"),
            serde_json::to_string(&e.low).expect("f64"),
            serde_json::to_string(&e.high).expect("f64")
        );
        assert_eq!(text, want);
        let back: Row = serde_json::from_str(&text).expect("read back");
        let b = back.interval.expect("an interval");
        // serde_json's default float parsing may miss the last bit: equal to 1e-12.
        for (x, y) in [(b.ratio, e.ratio), (b.low, e.low), (b.high, e.high), (b.confidence, e.confidence), (b.df, e.df)]
        {
            assert!((x - y).abs() < 1e-12, "{b:?} vs {e:?}");
        }
        assert!((b.p_above(1.01) - e.p_above(1.01)).abs() < 1e-9);
        assert_eq!(serde_json::to_string(&Row { interval: None }).expect("json"), "{\"interval\":null}");
        assert!(serde_json::from_str::<Row>("{}").expect("missing is none").interval.is_none());
    }
}
