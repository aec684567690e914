//! What one run's page is drawn from, loaded by the caller: the record, the traces' events and
//! the folded stacks. Every section of a run page (and both sides of a comparison) reads it.

use nesquic_protocol::Role;
use nesquic_record::events::{MetricsUpdated, RunStarted};
use nesquic_record::RunRecord;

/// Everything one run's page shows, loaded by the caller.
pub struct RunInput {
    /// What the run is called on the page (its directory).
    pub name: String,
    /// summary.json.
    pub record: RunRecord,
    /// The traces' `nesquic:run_started` (the first trace's).
    pub started: Option<RunStarted>,
    /// Every `nesquic:metrics_updated` of the traces, with the trace's role, in file order.
    pub snapshots: Vec<(Role, MetricsUpdated)>,
    /// Each side's folded profile stacks (empty without `--probe profile`).
    pub stacks: Vec<(Role, Vec<(String, u64)>)>,
}

impl RunInput {
    /// A one-line description: LUT, version, I/O path, testcase.
    pub(crate) fn headline(&self) -> String {
        let r = &self.record;
        format!("{} (--io {}), {} {}", r.lut_label(), r.lut.io, r.testcase.name, r.testcase.workload.describe())
    }
}
