//! The timing probes' calibration as recorded with a run, and how it compensates timed figures:
//! what a probe adds to each duration it measures, per kind of probe site, and the user-space
//! agent's cost per call. How it is measured is the engine's business.

use nesquic_model::sites::SiteKind;
use nesquic_model::Metrics;
use serde::{Deserialize, Serialize};

/// The calibration of one site kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindCalibration {
    /// The site kind.
    pub kind: SiteKind,
    /// True cost per call of the calibration loop (its never-probed twin, median), ns.
    pub true_ns: f64,
    /// What the probes measured per call (median), ns.
    pub measured_ns: f64,
    /// Added to each measured duration: measured - true (median over rounds), ns.
    pub overhead_ns: f64,
    /// Standard deviation of that difference over rounds, ns.
    pub uncertainty_ns: f64,
    /// Everything a probed call costs the program (its own clock, probed - twin), ns.
    pub pair_cost_ns: f64,
}

/// A machine's calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    /// Per kernel uprobe site kind (empty when no kernel uprobe times anything).
    pub kinds: Vec<KindCalibration>,
    /// Rounds behind each figure.
    pub rounds: usize,
    /// The user-space agent's cost per counted and per timed call, when the agent times
    /// functions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<nesquic_model::agent::AgentCost>,
}

impl Calibration {
    /// Rounds behind the figures (the kernel's, else the agent's).
    pub fn rounds_used(&self) -> usize {
        if self.kinds.is_empty() {
            self.agent.map_or(0, |a| a.rounds)
        } else {
            self.rounds
        }
    }

    /// The overhead and its uncertainty for `kind`.
    pub fn for_kind(&self, kind: SiteKind) -> Option<&KindCalibration> {
        self.kinds.iter().find(|k| k.kind == kind)
    }

    /// Fills `compensated_mean_ns` of every timed function in `metrics`: the kernel's per-site
    /// overhead for uprobes, the agent's in-window cost for inline hooks.
    pub fn compensate(&self, metrics: &mut Metrics) {
        self.compensate_roles(metrics, |_| true);
    }

    /// As [`Calibration::compensate`], for the rows of the roles `measured_here` accepts: a
    /// remote role's rows are compensated with its own host's calibration, over there.
    pub fn compensate_roles(&self, metrics: &mut Metrics, measured_here: impl Fn(nesquic_protocol::Role) -> bool) {
        for role in metrics.roles.iter_mut().filter(|r| measured_here(r.role)) {
            for f in &mut role.functions {
                if !f.timed || f.timing.calls == 0 {
                    continue;
                }
                let (overhead, uncertainty) = if f.mechanism == nesquic_model::metrics::Mechanism::InlineHook {
                    let Some(a) = &self.agent else { continue };
                    (a.window_ns, a.window_sd_ns)
                } else {
                    let Some(k) = f.site.and_then(|kind| self.for_kind(kind)) else { continue };
                    (k.overhead_ns, k.uncertainty_ns)
                };
                f.compensated_mean_ns = Some((f.timing.mean_ns() - overhead).max(0.0));
                f.compensation_uncertainty_ns = Some(uncertainty);
            }
        }
    }
}
