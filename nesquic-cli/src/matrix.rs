//! `nesquic matrix`: every combination of LUTs, I/O paths and LUT options, repeated in
//! alternating rounds (so drift on a shared machine hits every combination alike), one table.
//!
//! Each round of each combination is an ordinary `nesquic run` (its own run directory, traces
//! and summary.json); the table summarises all rounds of a combination.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use nesquic_lut_adapters::IoMode;
use nesquic_record::io::IoFigures;
use nesquic_record::packet_cost::PacketCostFigures;
use nesquic_render::matrix::{print_table, versus, Row};

use crate::run::{self, RepetitionFigures, RunArgs, Summary};
use crate::testcase::TestcaseArgs;
use crate::units;
use nesquic_engine::run::RunPlan;

/// `nesquic matrix` arguments.
#[derive(Debug, clap::Args)]
pub struct MatrixArgs {
    /// LUTs, comma-separated (see `nesquic luts`).
    #[arg(long, default_value = "quinn", value_delimiter = ',')]
    pub lut: Vec<String>,
    /// I/O paths, comma-separated: native, nesquic, plain, or `all`. Combinations a LUT cannot
    /// run (quiche has no native I/O) are listed as skipped. Default: each LUT's default.
    #[arg(long, value_delimiter = ',')]
    pub io: Vec<String>,
    /// LUT option sets to compare, each a `+`-joined list of KEY=VALUE (`gso=off+gro=off`);
    /// repeatable. A set a LUT does not accept is skipped for that LUT.
    #[arg(long = "lut-opts", value_name = "SET")]
    pub lut_opts: Vec<String>,
    /// Socket receive buffers to compare, comma-separated (`1x,16x`, `4MB`): a dimension.
    #[arg(long, value_delimiter = ',')]
    pub rcvbuf: Vec<String>,
    /// Link for every run (`nesquic run --link`).
    #[arg(long, value_enum, default_value_t = nesquic_link::LinkKind::Loopback)]
    pub link: nesquic_link::LinkKind,
    /// With --link veth: rate for every run (`nesquic run --rate`).
    #[arg(long)]
    pub rate: Option<String>,
    /// With --link veth: loss percent for every run (`nesquic run --loss`).
    #[arg(long)]
    pub loss: Option<f64>,
    /// Testcases, comma-separated (`nesquic testcases`): a dimension. A testcase a LUT cannot
    /// run on an I/O path is listed as skipped.
    #[arg(long, default_value = "bulk", value_delimiter = ',')]
    pub testcase: Vec<String>,
    /// Payload per stream for every testcase (default: each testcase's own).
    #[arg(long, value_parser = units::parse_size)]
    pub size: Option<u64>,
    /// Rounds: every combination runs once per round, in rotating order.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Probes for every run, as in `nesquic run`; `io` fills the syscall columns.
    #[arg(long, value_name = "LIST")]
    pub probe: Option<String>,
    /// Who measures the probes, as in `nesquic run` (auto: the user-space agent where it can hook).
    #[arg(long, value_enum, default_value_t = crate::backend::BackendChoice::Auto)]
    pub probe_backend: crate::backend::BackendChoice,
    /// Time limit per transfer: 30s, 2m, 500ms.
    #[arg(long, default_value = "5m", value_parser = units::parse_duration)]
    pub timeout: std::time::Duration,
    /// Parent directory for the runs (default: ./nesquic-runs/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the table as Markdown (for docs).
    #[arg(long)]
    pub markdown: bool,
    /// The reference row each configuration is compared with (goodput and CPU per byte as
    /// ratios, same testcase and buffers). Default: tcp-tls when it is among --lut.
    #[arg(long, value_name = "LUT")]
    pub baseline: Option<String>,
    /// Also write every combination's figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write one self-contained HTML page (grouped bars across LUTs and I/O paths, the
    /// table) to FILE, default the matrix's directory/matrix.html.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
    /// Roles on other hosts, for every run (as in `nesquic run`).
    #[command(flatten)]
    pub hosts: crate::remote::HostArgs,
    /// A client x server matrix (docs/pairs.md): these servers (comma-separated, or `all`), each
    /// against every client of --clients (default: the same list); --lut is then unused. Pairs
    /// that cannot talk are listed with the reason.
    #[arg(long, value_delimiter = ',', value_name = "LUTS")]
    pub servers: Vec<String>,
    /// The clients of a client x server matrix (rows of its table; default: --servers).
    #[arg(long, value_delimiter = ',', value_name = "LUTS")]
    pub clients: Vec<String>,
}

/// One cell of the matrix.
#[derive(Debug, Clone)]
struct Combination {
    lut: String,
    io: IoMode,
    options: Vec<String>,
    rcvbuf: Option<String>,
    testcase: String,
}

impl Combination {
    fn label(&self) -> String {
        let mut s = format!("{} --io {} --testcase {}", self.lut, self.io, self.testcase);
        if !self.options.is_empty() {
            s.push_str(&format!(" {}", self.options.join(" ")));
        }
        if let Some(r) = &self.rcvbuf {
            s.push_str(&format!(" --rcvbuf {r}"));
        }
        s
    }
}

/// `nesquic run`'s flags at their defaults, the base every combination's run starts from.
#[derive(Debug, Parser)]
struct RunCommand {
    #[command(flatten)]
    run: RunArgs,
}

/// The run of one combination, resolved and checked like `nesquic run`'s.
fn plan(args: &MatrixArgs, c: &Combination, defaults: &RunArgs) -> Result<RunPlan> {
    let run = RunArgs {
        lut: c.lut.clone(),
        io: Some(c.io),
        lut_opts: c.options.clone(),
        rcvbuf: c.rcvbuf.clone(),
        ..shared_run_args(args, &c.testcase, defaults)
    };
    run.plan().with_context(|| c.label())
}

/// What every run of the matrix shares: its testcase, size, link, probes and hosts, quiet.
fn shared_run_args(args: &MatrixArgs, testcase: &str, defaults: &RunArgs) -> RunArgs {
    RunArgs {
        scenario: TestcaseArgs { testcase: Some(testcase.to_string()), size: args.size, ..TestcaseArgs::default() },
        timeout: args.timeout,
        link: args.link,
        rate: args.rate.clone(),
        loss: args.loss,
        probe: args.probe.clone(),
        probe_backend: args.probe_backend,
        hosts: args.hosts.clone(),
        quiet: true,
        ..defaults.clone()
    }
}

/// Runs the matrix.
pub fn execute(args: &MatrixArgs) -> Result<()> {
    run::clear_leftovers();
    if !args.servers.is_empty() || !args.clients.is_empty() {
        return execute_pairs(args);
    }
    let (combinations, skipped) = combinations(args)?;
    if combinations.is_empty() {
        bail!("no combination can run: {}", skipped.join("; "));
    }
    // Every combination is resolved before the first transfer: a bad one fails at once.
    let defaults = RunCommand::try_parse_from(["run"]).context("nesquic run's defaults")?.run;
    let mut plans: Vec<RunPlan> = combinations.iter().map(|c| plan(args, c, &defaults)).collect::<Result<_>>()?;
    let interrupted = run::install_signal_flag()?;
    let base = args.out.clone().unwrap_or_else(|| PathBuf::from("nesquic-runs"));
    let stamp = nesquic_record::qlog::time_stamp(std::time::SystemTime::now());
    let mut reports: Vec<Vec<run::RunReport>> = combinations.iter().map(|_| Vec::new()).collect();
    let mut dirs: Vec<Vec<PathBuf>> = combinations.iter().map(|_| Vec::new()).collect();
    // One reporter a combination across rounds: each of its agent problems is said once.
    let mut terminals: Vec<run::Terminal> = combinations.iter().map(|_| run::Terminal::new(true)).collect();
    // A failed round is named and the matrix goes on: one broken cell must not cost the others'
    // hours. A signal ends it.
    let mut failed: Vec<String> = Vec::new();
    for round in 0..args.repeat as usize {
        for k in 0..combinations.len() {
            // Rotate the start so no combination always runs first (warm caches, thermal state).
            let i = (k + round) % combinations.len();
            let c = &combinations[i];
            let dir = base.join(format!("{stamp}-matrix")).join(format!("{}-{}-{}-r{}", i + 1, c.lut, c.io, round + 1));
            eprintln!("nesquic matrix: round {}/{}: {}", round + 1, args.repeat, c.label());
            let plan = &mut plans[i];
            plan.out = Some(dir.clone());
            match nesquic_engine::run::execute(plan, &interrupted, &mut terminals[i]) {
                Ok(report) => {
                    reports[i].push(report);
                    dirs[i].push(dir);
                }
                Err(e) if interrupted.load(std::sync::atomic::Ordering::Relaxed) => {
                    return Err(e).context(format!("{} (round {})", c.label(), round + 1))
                }
                Err(e) => {
                    let why = format!("{} round {}: {}", c.label(), round + 1, first_line(&format!("{e:#}")));
                    eprintln!("nesquic matrix: failed: {why}");
                    failed.push(why);
                }
            }
        }
    }
    let rows: Vec<Row> = combinations
        .iter()
        .zip(reports)
        .zip(dirs)
        .filter(|((_, reports), _)| !reports.is_empty())
        .map(|((c, reports), dirs)| row(c, reports, dirs))
        .collect::<Result<Vec<Row>>>()?;
    let baseline = args.baseline.as_deref().or(args.lut.iter().map(String::as_str).find(|l| *l == "tcp-tls"));
    let versus: Vec<_> = rows.iter().map(|r| versus(&rows, r, baseline?)).collect();
    let rows: Vec<Row> = rows.into_iter().zip(versus).map(|(r, versus)| Row { versus, ..r }).collect();
    let backend = clap::ValueEnum::to_possible_value(&args.probe_backend).map(|v| v.get_name().to_string());
    print_table(&rows, args.repeat, backend.as_deref().unwrap_or_default(), args.markdown, &skipped, &failed);
    if let Some(file) = &args.html {
        let entries: Vec<nesquic_html::MatrixEntry> = rows.iter().map(|r| html_entry(r, &combinations)).collect();
        let default = || base.join(format!("{stamp}-matrix")).join("matrix.html");
        crate::html::write(&crate::html::target(file, default), &nesquic_html::matrix_page(&entries)?, "HTML matrix")?;
    }
    if let Some(path) = &args.json {
        nesquic_record::files::write(path, serde_json::to_string_pretty(&rows)?.as_bytes())
            .with_context(|| format!("write {}", path.display()))?;
        eprintln!("nesquic: JSON written to {}", path.display());
    }
    // The table and files hold what was measured; the exit status says not everything was.
    if !failed.is_empty() {
        bail!(
            "{} of {} run(s) failed (each named above under \"failed:\"); the table holds the rest",
            failed.len(),
            args.repeat as usize * combinations.len()
        );
    }
    Ok(())
}

/// Expands the lists; returns the runnable combinations and why others were skipped.
fn combinations(args: &MatrixArgs) -> Result<(Vec<Combination>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let option_sets: Vec<Vec<String>> = if args.lut_opts.is_empty() {
        vec![Vec::new()]
    } else {
        args.lut_opts.iter().map(|s| s.split('+').map(str::to_string).collect()).collect()
    };
    // Resolved up front, so an unknown name fails before anything runs.
    let testcases: Vec<(String, nesquic_testcases::Workload)> = args
        .testcase
        .iter()
        .map(|name| {
            let scenario =
                crate::testcase::TestcaseArgs { testcase: Some(name.clone()), size: args.size, ..Default::default() };
            Ok((name.clone(), scenario.resolve()?.workload))
        })
        .collect::<Result<_>>()?;
    for name in &args.lut {
        let lut = nesquic_lut_adapters::find_lut(name)?;
        let ios: Vec<IoMode> = if args.io.is_empty() {
            vec![lut.descriptor().io_modes[0]]
        } else if args.io.iter().any(|s| s == "all") {
            lut.descriptor().io_modes.to_vec()
        } else {
            args.io
                .iter()
                .map(|s| <IoMode as clap::ValueEnum>::from_str(s, true).map_err(|e| anyhow::anyhow!("--io {s}: {e}")))
                .collect::<Result<_>>()?
        };
        for io in ios {
            if let Err(e) = lut.descriptor().check_io(io) {
                skipped.push(e.to_string());
                continue;
            }
            for options in &option_sets {
                if let Err(e) = lut.descriptor().parse_options(io, options) {
                    skipped.push(e.to_string());
                    continue;
                }
                let buffers: Vec<Option<String>> =
                    if args.rcvbuf.is_empty() { vec![None] } else { args.rcvbuf.iter().cloned().map(Some).collect() };
                for rcvbuf in buffers {
                    // A LUT that cannot set its socket buffer is skipped for this dimension.
                    let rcvbuf_ok =
                        lut.descriptor().check_options(io, &[nesquic_lut_adapters::LutOpt::RcvBuf(1)]).is_ok();
                    if rcvbuf.is_some() && !rcvbuf_ok {
                        skipped.push(format!("{} --io {io} cannot set --rcvbuf", lut.name()));
                        continue;
                    }
                    for (name, workload) in &testcases {
                        if let Err(e) = lut.descriptor().check_workload(io, workload) {
                            skipped.push(format!("testcase {name}: {e}"));
                            continue;
                        }
                        out.push(Combination {
                            lut: lut.name().to_string(),
                            io,
                            options: options.clone(),
                            rcvbuf: rcvbuf.clone(),
                            testcase: name.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok((out, skipped))
}

fn row(c: &Combination, reports: Vec<run::RunReport>, run_dirs: Vec<PathBuf>) -> Result<Row> {
    let version = reports.first().map(|r| r.lut.version.clone()).unwrap_or_default();
    let testcase = reports.first().map(|r| r.testcase.clone()).context("no runs")?;
    let size = testcase.workload.total_bytes();
    let binding = binding_label(&reports);
    let reps: Vec<RepetitionFigures> = reports.into_iter().flat_map(|r| r.repetitions).collect();
    let summary = Summary::of(&reps).context("no repetitions")?;
    Ok(Row {
        lut: c.lut.clone(),
        version,
        io: c.io,
        options: c.options.clone(),
        rcvbuf: c.rcvbuf.clone(),
        testcase,
        rounds: reps.len(),
        summary,
        figures: IoFigures::of(&reps, size),
        versus: None,
        packet_cost: PacketCostFigures::of(&reps),
        binding,
        run_dirs,
    })
}

/// The binding constraint of a combination's runs: one label where they agree, else each with
/// its count ("client CPU (shared) 3, link rate 2"); `None` where no run could name one.
fn binding_label(reports: &[run::RunReport]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for label in reports.iter().filter_map(nesquic_record::findings::constraint).map(|c| c.label()) {
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    match &counts[..] {
        [] => None,
        [(label, _)] => Some(label.clone()),
        _ => {
            counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
            Some(counts.iter().map(|(l, n)| format!("{l} {n}")).collect::<Vec<_>>().join(", "))
        }
    }
}

/// One bar group member of the HTML page: the LUT, and what else makes the combination (the
/// testcase only when the matrix has several).
fn html_entry(r: &Row, all: &[Combination]) -> nesquic_html::MatrixEntry {
    let mut variant = vec![format!("--io {}", r.io)];
    variant.extend(r.options.iter().cloned());
    variant.extend(r.rcvbuf.iter().map(|b| format!("rcvbuf {b}")));
    if all.iter().any(|c| c.testcase != r.testcase.name) {
        variant.push(r.testcase.name.clone());
    }
    let gb = r.testcase.workload.total_bytes() as f64 / 1e9;
    nesquic_html::MatrixEntry {
        lut: format!("{} {}", r.lut, r.version),
        variant: variant.join(" "),
        goodput_mbps: r.summary.goodput_mbps,
        cpu_s_per_gb: (r.summary.server_cpu_s.median + r.summary.client_cpu_s.median) / gb,
        rounds: r.rounds,
    }
}

/// `all`, or the names as given (each checked).
fn lut_names(list: &[String]) -> Result<Vec<String>> {
    if list.iter().any(|n| n == "all") {
        return Ok(nesquic_lut_adapters::lut::DESCRIPTORS.iter().map(|d| d.name.to_string()).collect());
    }
    list.iter().map(|n| Ok(nesquic_lut_adapters::find_lut(n)?.name().to_string())).collect()
}

/// One client x server cell while the rounds run.
struct PairRun {
    server: String,
    client: String,
    plan: Option<RunPlan>,
    why_not: Vec<String>,
    reports: Vec<run::RunReport>,
    dirs: Vec<PathBuf>,
}

/// `--servers`/`--clients`: every client against every server, in alternating rounds; a pair
/// that cannot be planned or fails a round says why in its cell, and the others go on.
fn execute_pairs(args: &MatrixArgs) -> Result<()> {
    let servers = lut_names(if args.servers.is_empty() { &args.clients } else { &args.servers })?;
    let clients = lut_names(if args.clients.is_empty() { &args.servers } else { &args.clients })?;
    anyhow::ensure!(
        args.io.is_empty() && args.lut_opts.is_empty() && args.rcvbuf.is_empty() && args.baseline.is_none(),
        "--servers/--clients: --io, --lut-opts, --rcvbuf and --baseline are not dimensions of the client x server matrix \
         (each side runs its LUT's default I/O path and settings)"
    );
    let [testcase] = args.testcase.as_slice() else {
        anyhow::bail!("--servers/--clients: one testcase at a time");
    };
    let defaults = RunCommand::try_parse_from(["run"]).context("nesquic run's defaults")?.run;
    let mut cells: Vec<PairRun> = Vec::new();
    for c in &clients {
        for s in &servers {
            let run = RunArgs {
                server_lut: Some(s.clone()),
                client_lut: Some(c.clone()),
                ..shared_run_args(args, testcase, &defaults)
            };
            let (plan, why_not) = match run.plan() {
                Ok(p) => (Some(p), Vec::new()),
                Err(e) => (None, vec![format!("{e:#}")]),
            };
            cells.push(PairRun {
                server: s.clone(),
                client: c.clone(),
                plan,
                why_not,
                reports: Vec::new(),
                dirs: Vec::new(),
            });
        }
    }
    let runnable: Vec<usize> = (0..cells.len()).filter(|&i| cells[i].plan.is_some()).collect();
    if runnable.is_empty() {
        let why: Vec<String> = cells
            .iter()
            .flat_map(|c| c.why_not.iter().map(move |w| format!("server {} x client {}: {w}", c.server, c.client)))
            .collect();
        bail!("no pair can run:\n{}", why.join("\n"));
    }
    let interrupted = run::install_signal_flag()?;
    let base = args.out.clone().unwrap_or_else(|| PathBuf::from("nesquic-runs"));
    let stamp = nesquic_record::qlog::time_stamp(std::time::SystemTime::now());
    let matrix_dir = base.join(format!("{stamp}-pairs"));
    let mut terminals: Vec<run::Terminal> = cells.iter().map(|_| run::Terminal::new(true)).collect();
    for round in 0..args.repeat as usize {
        for k in 0..runnable.len() {
            // Rotate the start so no pair always runs first (warm caches, thermal state).
            let i = runnable[(k + round) % runnable.len()];
            let cell = &mut cells[i];
            let label = format!("server {} x client {}", cell.server, cell.client);
            eprintln!("nesquic matrix: round {}/{}: {label}", round + 1, args.repeat);
            let dir = matrix_dir.join(format!("{}-{}-x-{}-r{}", i + 1, cell.server, cell.client, round + 1));
            let Some(plan) = cell.plan.as_mut() else { continue };
            plan.out = Some(dir.clone());
            match nesquic_engine::run::execute(plan, &interrupted, &mut terminals[i]) {
                Ok(report) => {
                    cell.reports.push(report);
                    cell.dirs.push(dir);
                }
                Err(e) if interrupted.load(std::sync::atomic::Ordering::Relaxed) => {
                    return Err(e).context(format!("{label} (round {})", round + 1))
                }
                Err(e) => {
                    let why = format!("round {} failed: {e:#}", round + 1);
                    eprintln!("nesquic matrix: {label}: {why}");
                    cell.why_not.push(why);
                }
            }
        }
    }
    let gb = |r: &run::RunReport| r.size_bytes as f64 / 1e9;
    let out: Vec<nesquic_render::pairs::PairCell> = cells
        .into_iter()
        .map(|c| {
            let size_gb = c.reports.first().map(gb).unwrap_or(1.0);
            let versions = c.reports.first().map(|r| (r.lut.version.clone(), r.client_lut().version.clone()));
            let binding = binding_label(&c.reports);
            let reps: Vec<RepetitionFigures> = c.reports.into_iter().flat_map(|r| r.repetitions).collect();
            let summary = Summary::of(&reps);
            nesquic_render::pairs::PairCell {
                server: c.server,
                client: c.client,
                versions,
                rounds: reps.len(),
                server_cpu_s_per_gb: summary.as_ref().map(|s| s.server_cpu_s.median / size_gb),
                client_cpu_s_per_gb: summary.as_ref().map(|s| s.client_cpu_s.median / size_gb),
                packet_cost: PacketCostFigures::of(&reps),
                summary,
                // One line: the first reason (a failure repeats itself round after round).
                binding,
                why_not: c.why_not.first().map(|w| first_line(w)),
                run_dirs: c.dirs,
            }
        })
        .collect();
    print!("{}", nesquic_render::pairs::text(&out, &servers, &clients, args.repeat, args.markdown));
    if let Some(file) = &args.html {
        let entries: Vec<nesquic_html::PairEntry> = out
            .iter()
            .map(|c| nesquic_html::PairEntry {
                server: c.server.clone(),
                client: c.client.clone(),
                goodput_mbps: c.summary.as_ref().map(|s| s.goodput_mbps.median),
                server_cpu_s_per_gb: c.server_cpu_s_per_gb,
                client_cpu_s_per_gb: c.client_cpu_s_per_gb,
                rounds: c.rounds,
                why_not: c.why_not.clone(),
                binding: c.binding.clone(),
            })
            .collect();
        let default = || matrix_dir.join("pairs.html");
        crate::html::write(
            &crate::html::target(file, default),
            &nesquic_html::pairs_page(&servers, &clients, &entries),
            "HTML matrix",
        )?;
    }
    if let Some(path) = &args.json {
        nesquic_record::files::write(path, serde_json::to_string_pretty(&out)?.as_bytes())
            .with_context(|| format!("write {}", path.display()))?;
        eprintln!("nesquic: JSON written to {}", path.display());
    }
    Ok(())
}

/// A failure's text up to its LUT's output (the cell says what happened; the run directory and
/// the terminal hold the rest).
fn first_line(why: &str) -> String {
    let line = why.lines().next().unwrap_or_default();
    line.split("; its last output:").next().unwrap_or(line).to_string()
}
