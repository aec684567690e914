//! `nesquic report PATH`: print what a run recorded, from its qlog traces (a run directory or one
//! `.sqlog` file). Every file is validated strictly; problems name the file and record. With
//! `--html`, the whole run directory is drawn as one page instead (`nesquic-html`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use nesquic_record::qlog::reader::{self, QlogTrace};

/// `nesquic report` arguments.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run directory (with server.sqlog / client.sqlog) or one .sqlog file.
    pub path: PathBuf,
    /// Write one self-contained HTML page instead (plots, flame graphs; no network needed to
    /// view it) to FILE, default RUN/report.html. Needs a run directory (summary.json).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
}

/// Runs `nesquic report`.
pub fn execute(args: &ReportArgs) -> Result<()> {
    if let Some(file) = &args.html {
        let input = crate::html::load_run(&args.path)?;
        let page = nesquic_html::run_page(&input)?;
        let dir = crate::html::run_dir(&args.path)?;
        return crate::html::write(&crate::html::target(file, || dir.join("report.html")), &page, "HTML report");
    }
    if args.path.is_dir() {
        no_repetition_measured(&args.path)?;
    }
    let files = sqlog_files(&args.path)?;
    for file in files {
        // A run directory's traces are read only inside it, never through a link placed there.
        let trace = match (args.path.is_dir(), file.file_name()) {
            (true, Some(name)) => reader::read_in(&args.path, Path::new(name))?,
            _ => reader::read(&file)?,
        };
        print_trace(&file, &trace)?;
    }
    Ok(())
}

/// A run whose first repetition failed has traces without figures: say why, from its record.
fn no_repetition_measured(dir: &Path) -> Result<()> {
    let Ok(record) = nesquic_record::RunRecord::load(&dir.join("summary.json")) else { return Ok(()) };
    if let (None, Some(failed)) = (&record.summary, record.failed_repetitions.first()) {
        bail!("{}: no repetition was measured: {failed}", dir.display());
    }
    Ok(())
}

fn sqlog_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{} does not exist", path.display());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("read {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sqlog"))
        // The library's own qlog files (`--lut-qlog`) are merged into the traces; they are not ours.
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lut-")))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{} holds no .sqlog file: is it a nesquic run directory?", path.display());
    }
    Ok(files)
}

fn print_trace(file: &Path, trace: &QlogTrace) -> Result<()> {
    let invalid = |problem: String| anyhow::anyhow!("{}: {problem}", file.display());
    let started = trace.run_started().map_err(invalid)?;
    let summary = trace
        .run_summary()
        .map_err(invalid)?
        .with_context(|| format!("{} has no nesquic:run_summary event: the run did not finish", file.display()))?;
    let (name, version) = started.as_ref().map_or(("?", "?"), |s| (s.lut.name.as_str(), s.lut.version.as_str()));
    println!(
        "{} — {name} {version} ({}), {} repetition(s) of {} bytes, payload verified: {}",
        trace.vantage(),
        file.display(),
        summary.repetitions,
        summary.size_bytes,
        summary.payload_verified
    );
    for failed in &summary.failed_repetitions {
        println!("NOTE: {failed} (not in these figures)");
    }
    println!("{:<22} {:>12} {:>12} {:>12}", "", "median", "min", "max");
    for (label, v, digits) in [
        ("goodput (Mbit/s)", &summary.goodput_mbps, 1),
        ("transfer (s)", &summary.transfer_s, 3),
        ("handshake (ms)", &summary.handshake_ms, 2),
        ("CPU (s)", &summary.cpu_s, 3),
        ("CPU (%)", &summary.cpu_pct, 1),
    ] {
        println!("{label:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", v.median, v.min, v.max);
    }
    // Testcase runs record their scenario and, with several connections or streams, its figures.
    let testcase = summary.testcase_or_bulk();
    println!("testcase {}: {}", testcase.name, testcase.workload.describe());
    if let Some(w) = &summary.workload {
        for (label, s, digits) in w.rows(testcase.workload.connections) {
            println!("{label:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", s.median, s.min, s.max);
        }
    }
    let snapshots = trace.named("nesquic:metrics_updated").count();
    println!("{snapshots} metrics snapshots in the trace");
    if let Some(metrics) = &summary.probes {
        let cpu: f64 = summary.per_repetition.iter().map(|r| r.cpu_s).sum();
        // A trace of a role nesquic does not know (not ours) has no CPU time to put beside it.
        let cpu_s: HashMap<nesquic_ebpf::Role, f64> = trace.vantage().parse().into_iter().map(|r| (r, cpu)).collect();
        nesquic_render::probes::print_summary(metrics, &cpu_s, "totals over all repetitions");
    }
    println!();
    Ok(())
}
