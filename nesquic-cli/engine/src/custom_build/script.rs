//! A LUT built from a checkout by its own script (`lut-adapters/<lut>/build-from-source.sh`: Go,
//! Python, C stacks): the script builds, proves what it linked and prints one JSON line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nesquic_record::run::LinkedComponent;
use serde::Deserialize;

use super::{Built, Result};
use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// The script's stdout line (`lut-adapters/source-build.sh`'s `report`).
#[derive(Debug, PartialEq, Deserialize)]
pub struct ScriptReport {
    /// The executable built.
    pub binary: PathBuf,
    /// The library's version as the build found it.
    pub version: String,
    /// The checkout, canonical.
    pub source: PathBuf,
    /// Its git revision, or why there is none ("not a git repository").
    pub revision: String,
    /// Uncommitted changes in the checkout.
    pub dirty: bool,
    /// What proved the executable runs the checkout's library.
    pub proof: String,
}

/// Runs `script --lut-path CHECKOUT --out PROJECT` (progress and errors on stderr, shown).
pub(super) fn build(script: &Path, lut: &str, checkout: &Path, project: &Path) -> Result<Built> {
    if !script.is_file() {
        return Err(EngineError::msg(format!("{} is missing from this Nesquic source tree", script.display())));
    }
    let out = Command::new("bash")
        .arg(script)
        .arg("--lut-path")
        .arg(checkout)
        .arg("--out")
        .arg(project)
        .stderr(Stdio::inherit())
        .tethered_output()
        .with_step(|| format!("run {}", script.display()))?;
    if !out.status.success() {
        return Err(EngineError::msg(format!("{} failed ({}; its output is above)", script.display(), out.status)));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    let report: ScriptReport = serde_json::from_str(line)
        .with_step(|| format!("{} printed no build report (one JSON line) but {line:?}", script.display()))?;
    if !report.binary.is_file() {
        return Err(EngineError::msg(format!(
            "{} reported {}, which is not there",
            script.display(),
            report.binary.display()
        )));
    }
    let linked =
        vec![LinkedComponent { name: lut.to_string(), version: report.version.clone(), path: checkout.to_path_buf() }];
    Ok(Built { binary: report.binary, version: report.version, linked, proof: report.proof })
}
