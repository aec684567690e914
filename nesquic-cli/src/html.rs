//! `--html [FILE]` and `--markdown [FILE]` of `run`, `report`, `compare` and `matrix`: loading
//! what a page shows from a run directory and writing the page. Drawing is `nesquic-html`'s.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use nesquic_html::RunInput;
use nesquic_protocol::Role;
use nesquic_record::events::Event;
use nesquic_record::qlog::reader;
use nesquic_record::RunRecord;

/// A run directory, or its summary.json, as the directory.
pub fn run_dir(path: &Path) -> Result<PathBuf> {
    let dir =
        if path.is_file() { path.parent().map(Path::to_path_buf).unwrap_or_default() } else { path.to_path_buf() };
    anyhow::ensure!(
        dir.join("summary.json").is_file(),
        "{} is not a run directory (no summary.json): the HTML report needs a whole run, not one trace",
        path.display()
    );
    Ok(dir)
}

/// Loads everything one run's page shows: summary.json, both traces' typed events (checked
/// against their types), the folded stacks.
pub fn load_run(path: &Path) -> Result<RunInput> {
    let dir = run_dir(path)?;
    let record = RunRecord::load(&dir.join("summary.json"))?;
    let (mut started, mut snapshots) = (None, Vec::new());
    for role in [Role::Server, Role::Client] {
        let name = PathBuf::from(format!("{role}.sqlog"));
        let file = dir.join(&name);
        if file.symlink_metadata().is_err() {
            continue;
        }
        let events = reader::read_in(&dir, &name)?.nesquic_events().map_err(|p| anyhow!("{}: {p}", file.display()))?;
        for event in events {
            match event {
                Event::RunStarted(s) if started.is_none() => started = Some(*s),
                Event::MetricsUpdated(m) => snapshots.push((role, *m)),
                _ => {}
            }
        }
    }
    let mut stacks = Vec::new();
    for file in &record.profile_stacks {
        stacks.push((file.role, nesquic_record::stacks::read(&dir, file)?));
    }
    Ok(RunInput { name: dir.display().to_string(), record, started, snapshots, stacks })
}

/// Writes a page (or Markdown) to `path`, saying where; never through a link (a run directory
/// from elsewhere may hold one named report.html).
pub fn write(path: &Path, text: &str, what: &str) -> Result<()> {
    nesquic_record::files::write(path, text.as_bytes()).with_context(|| format!("write {}", path.display()))?;
    eprintln!("nesquic: {what} written to {}", path.display());
    Ok(())
}

/// The file a `--html`/`--markdown` flag names, or `default` when given without one.
pub fn target(flag: &Option<PathBuf>, default: impl FnOnce() -> PathBuf) -> PathBuf {
    flag.clone().unwrap_or_else(default)
}
