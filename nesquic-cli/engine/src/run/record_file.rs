//! The run's record on disk while the run goes on. summary.json (and `--json`) is rewritten whole
//! and atomically before the first repetition and after each one, so that whatever ends the run
//! early (a failed repetition, a failed qlog merge, a full disk, a kill) leaves a record of every
//! repetition measured before it; the last write adds what is derived from all of them.

use std::path::{Path, PathBuf};

use nesquic_record::figures::Summary;
use nesquic_record::run::RunRecord;

use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// Where the record goes.
pub(crate) struct RecordFile<'a> {
    /// The run directory's summary.json.
    pub summary: PathBuf,
    /// `--json`: a copy.
    pub json: Option<&'a Path>,
}

impl<'a> RecordFile<'a> {
    /// The record in the run directory `out_dir`, and a copy at `json`.
    pub(crate) fn new(out_dir: &Path, json: Option<&'a Path>) -> Self {
        RecordFile { summary: out_dir.join("summary.json"), json }
    }

    /// Replaces the record on disk with `record` (each file whole, or not at all).
    pub(crate) fn save(&self, record: &RunRecord) -> Result<()> {
        let text = serde_json::to_string_pretty(record)
            .map_err(|e| EngineError::msg(format!("serialise the run record: {e}")))?;
        nesquic_record::files::write_atomic(&self.summary, text.as_bytes())?;
        if let Some(path) = self.json {
            nesquic_record::files::write_atomic(path, text.as_bytes())?;
        }
        Ok(())
    }

    /// [`RecordFile::save`] while the repetitions go on: a failure ends the run, saying what
    /// the file on disk still holds (`kept`, the repetitions of the last write that worked).
    pub(crate) fn save_progress(&self, record: &RunRecord, after: &str, kept: usize) -> Result<()> {
        self.save(record).map_err(|e| EngineError::Step {
            what: format!("the run record could not be written {after} ({}); the run stops", self.kept(kept)),
            source: Box::new(e),
        })
    }

    /// What the record on disk holds after a write failed.
    pub(crate) fn kept(&self, repetitions: usize) -> String {
        format!("{} keeps the {repetitions} repetition(s) recorded before", self.summary.display())
    }
}

/// The record's summary over its measured repetitions, with how many failed; `None` when none
/// was measured.
pub(crate) fn summary_of(record: &RunRecord) -> Option<Summary> {
    let mut summary = Summary::of(&record.repetitions)?;
    summary.failed_repetitions = record.failed_repetitions.len();
    Some(summary)
}
