//! `nesquic report PATH`: print what a run recorded, from its qlog traces (a run directory or one
//! `.sqlog` file). Every file is validated strictly; problems name the file and record. With
//! `--html`, the whole run directory is drawn as one page instead (`nesquic-html`).

use std::collections::BTreeMap;
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
    let files = sqlog_files(&args.path)?;
    for file in files {
        let trace = reader::read(&file)?;
        print_trace(&file, &trace)?;
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
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{} holds no .sqlog file: is it a nesquic run directory?", path.display());
    }
    Ok(files)
}

fn print_trace(file: &Path, trace: &QlogTrace) -> Result<()> {
    let started = trace.named("nesquic:run_started").next();
    let summary = trace
        .named("nesquic:run_summary")
        .next()
        .with_context(|| format!("{} has no nesquic:run_summary event: the run did not finish", file.display()))?;
    let data = &summary["data"];
    let lut = started.map(|s| &s["data"]["lut"]);
    println!(
        "{} — {} {} ({}), {} repetition(s) of {} bytes, payload verified: {}",
        trace.vantage(),
        lut.and_then(|l| l["name"].as_str()).unwrap_or("?"),
        lut.and_then(|l| l["version"].as_str()).unwrap_or("?"),
        file.display(),
        data["repetitions"],
        data["size_bytes"],
        data["payload_verified"]
    );
    println!("{:<22} {:>12} {:>12} {:>12}", "", "median", "min", "max");
    for (label, key, digits) in [
        ("goodput (Mbit/s)", "goodput_mbps", 1),
        ("transfer (s)", "transfer_s", 3),
        ("handshake (ms)", "handshake_ms", 2),
        ("CPU (s)", "cpu_s", 3),
        ("CPU (%)", "cpu_pct", 1),
    ] {
        let v = &data[key];
        let f = |k: &str| v[k].as_f64().with_context(|| format!("{}: run_summary.{key}.{k} missing", file.display()));
        println!("{label:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", f("median")?, f("min")?, f("max")?);
    }
    // Testcase runs record their scenario and, with several connections or streams, its figures.
    if let Ok(w) = serde_json::from_value::<nesquic_testcases::Workload>(data["testcase"]["workload"].clone()) {
        println!("testcase {}: {}", data["testcase"]["name"].as_str().unwrap_or("?"), w.describe());
        if let Ok(summary) = serde_json::from_value::<crate::run::WorkloadSummary>(data["workload"].clone()) {
            for (label, s, digits) in summary.rows(w.connections) {
                println!("{label:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", s.median, s.min, s.max);
            }
        }
    }
    let snapshots = trace.named("nesquic:metrics_updated").count();
    println!("{snapshots} metrics snapshots in the trace");
    if let Some(probes) = data.get("probes").filter(|p| !p.is_null()) {
        let metrics: nesquic_ebpf::Metrics = serde_json::from_value(probes.clone())
            .with_context(|| format!("{}: probes figures malformed", file.display()))?;
        let cpu: f64 = data["per_repetition"]
            .as_array()
            .map(|reps| reps.iter().filter_map(|r| r["cpu_s"].as_f64()).sum())
            .unwrap_or(0.0);
        let role = trace.vantage().to_string();
        crate::probes::print_summary(&metrics, &BTreeMap::from([(role, cpu)]), "totals over all repetitions");
    }
    println!();
    Ok(())
}
