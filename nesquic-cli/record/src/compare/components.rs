//! Where a CPU change went: each side's CPU ns per datagram by profile component
//! (`connection.recovery`, `packet_io.kernel`, as the profile's rules name them) and by its
//! hottest functions, base against head, with an interval. The interval is the paired (or
//! unpaired) head/base ratio of `nesquic_stats::RatioEstimate` scaled by base's median: the
//! same statistics as the gate's rows, read as ns. These explain a verdict, they never make
//! one: no limit, no Holm.

use std::collections::{BTreeMap, BTreeSet};

use nesquic_model::profile::{PacketCost, RoleProfile};
use nesquic_protocol::Role;
use serde::{Deserialize, Serialize};

use super::{Pairing, Row, Verdict};
use crate::figures::RepetitionFigures;

/// How many of a side's hottest functions are compared (by the larger of their medians).
const TOP_FUNCTIONS: usize = 5;

/// How many components a CPU verdict names.
const NAMED_IN_VERDICT: usize = 3;

/// What a cost figure is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostOf {
    /// A profile component as the rules name it (`connection.recovery`).
    Component,
    /// An innermost function of the samples (one of the role's top functions).
    Function,
}

/// One side's CPU ns per datagram of one component or function, per repetition: `None` where
/// the repetition has no per-datagram cost for the role (no profile, no datagram count) or,
/// for a function, where it was not among the repetition's top functions.
pub type CostSamples = BTreeMap<(Role, CostOf, String), Vec<Option<f64>>>;

/// The per-datagram costs of a run's repetitions, keyed by role, kind and name.
pub(crate) fn cost_samples(reps: &[RepetitionFigures]) -> CostSamples {
    let mut out = CostSamples::new();
    let profiles: Vec<Vec<(&RoleProfile, &PacketCost)>> = reps
        .iter()
        .map(|r| {
            r.profile
                .iter()
                .flat_map(|p| p.roles.iter())
                .filter_map(|role| role.cost.as_ref().map(|cost| (role, cost)))
                .collect()
        })
        .collect();
    let names: BTreeSet<(Role, CostOf, &str)> = profiles
        .iter()
        .flatten()
        .flat_map(|(role, cost)| {
            let components = cost.split.iter().map(|c| (role.role, CostOf::Component, c.name.as_str()));
            let functions = role.top_functions.iter().map(|f| (role.role, CostOf::Function, f.name.as_str()));
            components.chain(functions)
        })
        .collect();
    for (role, of, name) in names {
        let per_rep = profiles
            .iter()
            .map(|rep| {
                let (profile, cost) = rep.iter().find(|(p, _)| p.role == role)?;
                match of {
                    // The split sums to every sample: a component it lacks had none, 0 ns.
                    CostOf::Component => {
                        Some(cost.split.iter().find(|c| c.name == name).map_or(0.0, |c| c.ns_per_datagram))
                    }
                    // Below the top list is not zero: unknown.
                    CostOf::Function => profile
                        .top_functions
                        .iter()
                        .find(|f| f.name == name)
                        .map(|f| cost.cpu_s * 1e9 * f.share / cost.datagrams as f64),
                }
            })
            .collect();
        out.insert((role, of, name.to_string()), per_rep);
    }
    out
}

/// A component's or function's change in CPU ns per datagram, base to head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentDelta {
    /// The side.
    pub role: Role,
    /// Component or function.
    pub of: CostOf,
    /// `connection.recovery`, or a function's name.
    pub name: String,
    /// `sent` (server) or `received` (client): the datagrams it is per.
    pub per: String,
    /// Median ns per datagram of base.
    pub base_ns: f64,
    /// Median ns per datagram of head.
    pub head_ns: f64,
    /// The change, ns per datagram: base's median times (head/base - 1) of the ratio estimate,
    /// else the difference of the medians (no interval).
    pub delta_ns: f64,
    /// The change's interval, ns per datagram (`None`: too few rounds, a round without the
    /// figure, or a zero that has no ratio).
    pub interval_ns: Option<(f64, f64)>,
    /// Its confidence (0.99).
    pub confidence: f64,
    /// Paired round by round, or not.
    pub pairing: Pairing,
    /// Repetitions with the figure, base and head.
    pub samples: (usize, usize),
}

impl ComponentDelta {
    /// Whether the interval excludes no change: the component moved.
    pub fn moved(&self) -> bool {
        self.interval_ns.is_some_and(|(low, high)| low > 0.0 || high < 0.0)
    }

    /// `connection.recovery +140 ns/dgram [+90, +190]`.
    pub fn short(&self) -> String {
        let interval = self.interval_ns.map_or(String::new(), |(l, h)| format!(" [{l:+.0}, {h:+.0}]"));
        format!("{} {:+.0} ns/dgram{interval}", self.name, self.delta_ns)
    }
}

/// Every component's and the top functions' change for each side both runs have a cost for;
/// sorted by side, kind, then the largest change first. `confidence` is the gate's (1 - alpha).
pub fn component_deltas(
    base: &super::RunSamples,
    head: &super::RunSamples,
    pairing: Pairing,
    confidence: f64,
) -> Vec<ComponentDelta> {
    let empty = Vec::new();
    let keys: BTreeSet<&(Role, CostOf, String)> = base.costs.keys().chain(head.costs.keys()).collect();
    let mut deltas: Vec<ComponentDelta> = keys
        .into_iter()
        .filter_map(|key| {
            let (b, h) = (base.costs.get(key).unwrap_or(&empty), head.costs.get(key).unwrap_or(&empty));
            // A side without any cost for the role (profile off there): nothing to compare.
            let has_cost = |run: &super::RunSamples| run.costs.keys().any(|(r, of, _)| *r == key.0 && *of == key.1);
            if !has_cost(base) || !has_cost(head) {
                return None;
            }
            let present = |v: &[Option<f64>]| -> Vec<f64> { v.iter().flatten().copied().collect() };
            let (bv, hv) = (present(b), present(h));
            delta(key, (b, h), (&bv, &hv), pairing, confidence)
        })
        // A component neither side sampled in most rounds says nothing.
        .filter(|d| d.base_ns > 0.0 || d.head_ns > 0.0)
        .collect();
    keep_top_functions(&mut deltas);
    deltas.sort_by(|a, b| {
        (a.role, a.of)
            .cmp(&(b.role, b.of))
            .then(b.delta_ns.abs().total_cmp(&a.delta_ns.abs()))
            .then(a.name.cmp(&b.name))
    });
    deltas
}

/// One key's delta from its per-repetition values (`all`) and those present (`present`).
fn delta(
    (role, of, name): &(Role, CostOf, String),
    all: (&[Option<f64>], &[Option<f64>]),
    present: (&[f64], &[f64]),
    pairing: Pairing,
    confidence: f64,
) -> Option<ComponentDelta> {
    let median = |v: &[f64]| nesquic_stats::median(v).unwrap_or(0.0);
    let (b, h) = present;
    let (base_ns, head_ns) = (median(b), median(h));
    // Paired needs every round on both sides, else the rounds do not line up.
    let whole = |v: &[Option<f64>]| v.iter().all(Option::is_some);
    let paired = pairing == Pairing::Paired && whole(all.0) && whole(all.1) && b.len() == h.len();
    let estimate = if paired {
        nesquic_stats::RatioEstimate::paired(b, h, confidence)
    } else {
        nesquic_stats::RatioEstimate::unpaired(b, h, confidence)
    };
    let (delta_ns, interval_ns) = match estimate {
        Some(e) if base_ns > 0.0 => {
            (base_ns * (e.ratio - 1.0), Some((base_ns * (e.low - 1.0), base_ns * (e.high - 1.0))))
        }
        _ => (head_ns - base_ns, None),
    };
    Some(ComponentDelta {
        role: *role,
        of: *of,
        name: name.clone(),
        per: if *role == Role::Client { "received" } else { "sent" }.into(),
        base_ns,
        head_ns,
        delta_ns,
        interval_ns,
        confidence,
        pairing: if paired { Pairing::Paired } else { Pairing::Unpaired },
        samples: (b.len(), h.len()),
    })
}

/// Keeps each side's [`TOP_FUNCTIONS`] hottest functions (by the larger median).
fn keep_top_functions(deltas: &mut Vec<ComponentDelta>) {
    let mut hottest: BTreeMap<Role, Vec<(f64, String)>> = BTreeMap::new();
    for d in deltas.iter().filter(|d| d.of == CostOf::Function) {
        hottest.entry(d.role).or_default().push((d.base_ns.max(d.head_ns), d.name.clone()));
    }
    for list in hottest.values_mut() {
        list.sort_by(|a, b| b.0.total_cmp(&a.0));
        list.truncate(TOP_FUNCTIONS);
    }
    deltas.retain(|d| {
        d.of == CostOf::Component || hottest.get(&d.role).is_some_and(|l| l.iter().any(|(_, n)| *n == d.name))
    });
}

/// The CPU verdicts with their causes: for each side's `cpu_s_per_gb` row that is not
/// unchanged, `server cpu_s_per_gb +6.1% [+3.2, +9.0]: connection.recovery +140 ns/dgram
/// [+90, +190]`, naming the components whose interval excludes no change, largest first.
pub fn cpu_verdicts(rows: &[Row], deltas: &[ComponentDelta]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.metric.ends_with(".cpu_s_per_gb") && r.verdict != Verdict::Unchanged)
        .filter_map(|row| {
            let (role, metric) = row.metric.split_once('.')?;
            let components: Vec<&ComponentDelta> =
                deltas.iter().filter(|d| d.of == CostOf::Component && d.role.to_string() == role).collect();
            if components.is_empty() {
                return None;
            }
            let interval = row
                .interval
                .map_or(String::new(), |e| format!(" [{:+.1}, {:+.1}]", 100.0 * (e.low - 1.0), 100.0 * (e.high - 1.0)));
            let mut moved: Vec<&&ComponentDelta> = components.iter().filter(|d| d.moved()).collect();
            moved.sort_by(|a, b| b.delta_ns.abs().total_cmp(&a.delta_ns.abs()));
            let causes = if moved.is_empty() {
                "no component moved beyond its interval".to_string()
            } else {
                moved.iter().take(NAMED_IN_VERDICT).map(|d| d.short()).collect::<Vec<_>>().join(", ")
            };
            Some(format!("{role} {metric} {}{interval}: {causes}", super::format_change_pct(row.change_pct, 1)))
        })
        .collect()
}
