//! Which findings changed between base and head: appeared, went away (the poster's fix reads
//! "gone: gso_batch_capped"), or changed severity. Findings are keyed by rule and side; their
//! numbers stay in each run's own report.

use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};

use crate::finding::{Rule, Severity};

/// One finding of one run, as the comparison keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingKey {
    /// The rule that fired.
    pub rule: Rule,
    /// The side it is about.
    pub role: Role,
    /// How much was at stake.
    pub severity: Severity,
}

/// A finding that is not the same in both runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingChange {
    /// The rule.
    pub rule: Rule,
    /// The side.
    pub role: Role,
    /// Its severity in base (`None`: base did not have it).
    pub base: Option<Severity>,
    /// Its severity in head (`None`: head does not have it: gone, likely fixed).
    pub head: Option<Severity>,
}

impl FindingChange {
    /// `gone`, `new` or `changed`.
    pub fn kind(&self) -> &'static str {
        match (self.base, self.head) {
            (Some(_), None) => "gone",
            (None, Some(_)) => "new",
            _ => "changed",
        }
    }
}

impl std::fmt::Display for FindingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rule = serde_json::to_value(self.rule).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let sev = |s: Option<Severity>| s.map_or("none".to_string(), |s| format!("{s:?}").to_lowercase());
        match (self.base, self.head) {
            (Some(b), None) => write!(f, "gone: {rule} ({}, was {})", self.role, sev(Some(b))),
            (None, Some(h)) => write!(f, "new: {rule} ({}, {})", self.role, sev(Some(h))),
            (b, h) => write!(f, "changed: {rule} ({}, {} -> {})", self.role, sev(b), sev(h)),
        }
    }
}

/// The findings of `base` and `head` that differ, in rule order (a rule and side found in
/// several repetitions counts once, at its highest severity).
pub fn findings_changed(base: &[FindingKey], head: &[FindingKey]) -> Vec<FindingChange> {
    let top = |all: &[FindingKey], rule: Rule, role: Role| {
        all.iter().filter(|k| k.rule == rule && k.role == role).map(|k| k.severity).max()
    };
    let mut changes = Vec::new();
    for rule in Rule::ALL {
        for role in [Role::Server, Role::Client] {
            let (b, h) = (top(base, rule, role), top(head, rule, role));
            if b != h {
                changes.push(FindingChange { rule, role, base: b, head: h });
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rule: Rule, role: Role, severity: Severity) -> FindingKey {
        FindingKey { rule, role, severity }
    }

    /// The poster's GSO fix: the capped-batch finding goes away, the rest stays.
    #[test]
    fn a_fixed_finding_is_gone_a_new_one_new_and_a_shift_changed() {
        let base = [
            key(Rule::GsoBatchCapped, Role::Server, Severity::High),
            key(Rule::RcvbufDrops, Role::Client, Severity::Low),
            key(Rule::AckHeavy, Role::Client, Severity::Low),
        ];
        let head = [
            key(Rule::RcvbufDrops, Role::Client, Severity::Medium),
            key(Rule::AckHeavy, Role::Client, Severity::Low),
            key(Rule::GroIneffective, Role::Client, Severity::Low),
        ];
        let changes: Vec<String> = findings_changed(&base, &head).iter().map(ToString::to_string).collect();
        assert_eq!(
            changes,
            [
                "gone: gso_batch_capped (server, was high)",
                "new: gro_ineffective (client, low)",
                "changed: rcvbuf_drops (client, low -> medium)"
            ]
        );
        assert!(findings_changed(&base, &base).is_empty());
    }
}
