//! LUT executables built the first time a run needs them. A fresh machine's `just run` builds
//! nesquic and the quinn LUT only; `nesquic run --lut quiche` then builds quiche's executable
//! once, with the build's own progress on stderr, through the one script that says how every LUT
//! is built (`scripts/build-lut.sh`, which `just build` uses too). Only where nesquic runs from
//! the source tree it was built in (`target/release/`): an installed nesquic, or an explicit
//! `--lut-dir`, keeps the "not built" error and its hint.

use std::path::{Path, PathBuf};
use std::process::Command;

use nesquic_lut_adapters::{Lut, LutError};

use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// The source tree this engine was compiled in (nesquic-cli/engine is two levels down).
const REPO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The script that builds one LUT, relative to the source tree.
const BUILD_SCRIPT: &str = "scripts/build-lut.sh";

/// `lut`'s executable in `dir`, built first when it is missing and `dir` is the release folder
/// of the source tree's target directory that the running nesquic came from.
pub fn binary_path(lut: &dyn Lut, dir: &Path) -> Result<PathBuf, EngineError> {
    let missing = match lut.binary_path(dir) {
        Err(e @ LutError::NotBuilt { .. }) => e,
        other => return Ok(other?),
    };
    let Some(script) = build_script_for(dir) else { return Err(missing.into()) };
    let name = lut.name();
    eprintln!(
        "nesquic: the {name} LUT is not built yet; building it once ({} {name}; later runs reuse it) ...",
        script.display()
    );
    let target = dir.parent().unwrap_or(dir);
    let status = Command::new(&script)
        .arg(name)
        .env("CARGO_TARGET_DIR", target)
        .tethered_status()
        .with_step(|| format!("run {}", script.display()))?;
    if !status.success() {
        return Err(EngineError::msg(format!(
            "building the {name} LUT failed ({status}; its output is above): {missing}"
        )));
    }
    // The script may skip a LUT whose toolchain is missing (it says so above): then the
    // original "not built" error, with its hint, is still the answer.
    lut.binary_path(dir).map_err(|_| missing.into())
}

/// The build script, when `dir` is `<source tree>/…/release` and holds the running nesquic.
fn build_script_for(dir: &Path) -> Option<PathBuf> {
    let script = Path::new(REPO_DIR).join(BUILD_SCRIPT);
    let exe_dir = std::env::current_exe().ok()?.parent()?.canonicalize().ok()?;
    let dir = dir.canonicalize().ok()?;
    (dir == exe_dir && dir.file_name()? == "release" && script.is_file()).then_some(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_only_into_the_folder_nesquic_runs_from() {
        // A folder other than the running executable's never triggers a build.
        let other = tempfile::tempdir().expect("tempdir");
        assert_eq!(build_script_for(other.path()), None);
        assert!(Path::new(REPO_DIR).join(BUILD_SCRIPT).is_file(), "the build script is part of the tree");
    }
}
