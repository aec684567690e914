//! `nesquic`: run a QUIC library under test through a shared fast UDP I/O layer and say where its
//! time goes. This crate owns the command line, orchestration of LUT processes and reporting; it
//! must not contain protocol logic (lut-adapters), socket code (io-layer) or eBPF (nesquic-ebpf).

use nesquic_engine::backend;
mod calibrate;
mod compare;
mod doctor;
mod duty;
mod html;
mod matrix;
mod perf_classify;
mod probes;
mod report;
mod run;
mod testcase;
mod trace;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Profile QUIC libraries from the outside.
///
/// Examples:
///   nesquic run                          # quinn, 25 MB over loopback
///   nesquic run --lut quinn --size 1GiB --repeat 5 --json out.json
///   nesquic run --probe io,crypto        # + eBPF: syscalls, bytes, datagrams, crypto calls (root)
///   nesquic run --testcase multi-conn --link veth --rate 1gbit   # scenarios: `nesquic testcases`
///   nesquic probes --lut quinn           # what --probe crypto attaches to, without running
///   nesquic trace --probe io -- CMD ARGS # any command under the probes
///   nesquic report nesquic-runs/RUN/     # print a run back from its qlog traces
///   nesquic report nesquic-runs/RUN/ --html   # one self-contained page: plots, flame graphs
///   nesquic compare BASE HEAD            # CI gate: exit 1 on a regression
///   nesquic matrix --lut quinn,quiche --io all --repeat 5 --probe io  # one table, all combinations
///   nesquic luts                         # libraries this build can run
#[derive(Debug, Parser)]
#[command(name = "nesquic", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a LUT's server and client as separate processes, transfer a verified payload, report.
    Run(Box<run::RunArgs>),
    /// List the libraries under test this build knows, with versions and I/O paths.
    Luts,
    /// List the scenarios `nesquic run --testcase NAME` runs.
    Testcases,
    /// Show what a probe list resolves to in a LUT (functions, addresses, objects) and which
    /// patterns matched nothing, without running a transfer.
    Probes(ProbesArgs),
    /// Run any command under the eBPF probes and report what they measured.
    Trace(trace::TraceArgs),
    /// Print what a run recorded, from its qlog traces (run directory or .sqlog file), or draw
    /// it as one self-contained HTML page (--html).
    Report(report::ReportArgs),
    /// Run every combination of LUTs, I/O paths and LUT options in alternating rounds; one table.
    Matrix(matrix::MatrixArgs),
    /// Classify a `perf script` dump into profile components (checks `--probe profile`
    /// against `perf record`; see scripts/perf-agreement.sh).
    #[command(hide = true)]
    PerfClassify(perf_classify::PerfClassifyArgs),
    /// Compare two runs (CI regression gate): exit 0 pass, 1 regression, 2 bad input.
    Compare(compare::CompareArgs),
    /// What this kernel supports (BTF, uprobes, kprobes, fentry, netem, ...) and which mechanism
    /// each probe kind will use here (root: capabilities are tried, not guessed).
    Doctor(doctor::DoctorArgs),
}

/// `nesquic probes` arguments.
#[derive(Debug, clap::Args)]
struct ProbesArgs {
    /// Library under test whose executable is searched.
    #[arg(long, default_value = "quinn")]
    lut: String,
    /// Probe list (see `nesquic run --help`).
    #[arg(long, value_name = "LIST", default_value = "crypto")]
    probe: String,
    /// Search this executable instead of the LUT's.
    #[arg(long)]
    binary: Option<std::path::PathBuf>,
    /// Directory holding the `nesquic-lut-*` executables (default: next to `nesquic`).
    #[arg(long, env = "NESQUIC_LUT_DIR")]
    lut_dir: Option<std::path::PathBuf>,
    /// Which backend `run` would use (auto, user, kernel, both): each target says what would
    /// measure it and why.
    #[arg(long, value_enum, default_value_t = backend::BackendChoice::Auto)]
    probe_backend: backend::BackendChoice,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Luts | Command::Testcases | Command::Probes(_) | Command::Report(_)) {
        // Listing commands end quietly when their reader does (`nesquic probes | head`), as
        // other Unix tools do. Not for run/trace: they write to pipes of processes that may die.
        // SAFETY: restoring the default disposition of a signal has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        Command::Run(args) => run::execute(&args).map(|_| ()),
        Command::Luts => {
            list_luts();
            Ok(())
        }
        Command::Testcases => {
            testcase::list();
            Ok(())
        }
        Command::Probes(args) => list_probes(&args),
        Command::Trace(args) => trace::execute(&args),
        Command::Report(args) => report::execute(&args),
        Command::Matrix(args) => matrix::execute(&args),
        Command::PerfClassify(args) => perf_classify::execute(&args),
        Command::Doctor(args) => doctor::execute(&args),
        Command::Compare(args) => {
            return match compare::execute(&args) {
                Ok(compare::Outcome::Pass) => ExitCode::SUCCESS,
                Ok(compare::Outcome::Regression) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("nesquic: error: {e:#}");
                    ExitCode::from(2)
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nesquic: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn list_probes(args: &ProbesArgs) -> anyhow::Result<()> {
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => {
            let lut = nesquic_lut_adapters::find_lut(&args.lut)?;
            lut.binary_path(&run::lut_dir(args.lut_dir.as_deref())?)?
        }
    };
    probes::list(&args.probe, &binary, args.probe_backend)
}

fn list_luts() {
    let exec: Box<dyn nesquic_lut_adapters::Lut> =
        Box::new(nesquic_lut_adapters::ExecLut { server_cmd: String::new(), client_cmd: String::new() });
    let dir = run::lut_dir(None).ok();
    for lut in nesquic_lut_adapters::all_luts().into_iter().chain([exec]) {
        let io: Vec<String> = lut.io_modes().iter().map(ToString::to_string).collect();
        println!("{:<8} {:<10} io: {:<20} {}", lut.name(), lut.version(), io.join(","), lut.description());
        if let (Some(Err(e)), false) = (dir.as_ref().map(|d| lut.binary_path(d)), lut.runs_user_commands()) {
            println!("{:<8} unavailable: {e}", "");
        }
        for o in lut.options() {
            let io: Vec<String> = o.io.iter().map(ToString::to_string).collect();
            println!("{:<8} --lut-opt {}={}  {} [--io {}]", "", o.key, o.values.join("|"), o.meaning, io.join("|"));
        }
    }
}
