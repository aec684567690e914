//! `nesquic`: run a QUIC library under test through a shared fast UDP I/O layer and say where its
//! time goes. This crate owns the command line, orchestration of LUT processes and reporting; it
//! must not contain protocol logic (lut-adapters), socket code (io-layer) or eBPF (nesquic-ebpf).

use nesquic_engine::backend;
mod ab;
mod bisect;
mod compare;
mod doctor;
mod duty;
mod findings;
mod html;
mod matrix;
mod perf_classify;
mod pipe;
mod probes;
mod remote;
mod report;
mod run;
mod testcase;
mod trace;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nesquic_lut_adapters::descriptor::Releases;

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
///   nesquic ab --head-opt gso=off --probe io  # CI gate on interleaved rounds of two variants
///   nesquic matrix --lut quinn,quiche --io all --repeat 5 --probe io  # one table, all combinations
///   nesquic luts                         # libraries this build can run
#[derive(Debug, Parser)]
#[command(name = "nesquic", version, verbatim_doc_comment, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Exit status of every command but the gates (compare, ab: see their --help).
const EXIT_STATUS: &str = "Exit status: 0 success; 1 an error (the message says which); 2 a usage error. \
compare and ab: 0 no regression, 1 a regression, 2 bad input. Every command ends quietly when the reader of its \
output goes away (`nesquic luts | head -1`). Colour only on a terminal, never under NO_COLOR.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a LUT's server and client as separate processes, transfer a verified payload, report.
    #[command(after_help = EXIT_STATUS)]
    Run(Box<run::RunArgs>),
    /// List the libraries under test this build knows, with versions and I/O paths.
    #[command(after_help = EXIT_STATUS)]
    Luts,
    /// List the scenarios `nesquic run --testcase NAME` runs.
    #[command(after_help = EXIT_STATUS)]
    Testcases,
    /// Show what a probe list resolves to in a LUT (functions, addresses, objects) and which
    /// patterns matched nothing, without running a transfer.
    #[command(after_help = EXIT_STATUS)]
    Probes(ProbesArgs),
    /// Run any command under the probes, with every program it starts, and report what they
    /// measured.
    #[command(after_help = EXIT_STATUS)]
    Trace(trace::TraceArgs),
    /// Print what a run recorded, from its qlog traces (run directory or .sqlog file), or draw
    /// it as one self-contained HTML page (--html).
    #[command(after_help = EXIT_STATUS)]
    Report(report::ReportArgs),
    /// What a run's numbers point to: each finding with its evidence, the likely cause and the
    /// command that tests the remedy (docs/findings.md lists the rules).
    #[command(after_help = EXIT_STATUS)]
    Findings(findings::FindingsArgs),
    /// Run every combination of LUTs, I/O paths and LUT options in alternating rounds; one table.
    #[command(after_help = EXIT_STATUS)]
    Matrix(Box<matrix::MatrixArgs>),
    /// Classify a `perf script` dump into profile components (checks `--probe profile`
    /// against `perf record`; see scripts/perf-agreement.sh).
    #[command(hide = true, after_help = EXIT_STATUS)]
    PerfClassify(perf_classify::PerfClassifyArgs),
    /// Compare two runs (CI regression gate): exit 0 pass, 1 regression, 2 bad input.
    Compare(compare::CompareArgs),
    /// Run a base and a head variant in interleaved rounds and compare the pairs (CI gate):
    /// exit 0 pass, 1 regression, 2 bad input or a failed round.
    ///
    /// Rounds run base and head once each, in ABBA order, so drift on a shared machine hits
    /// both alike; the gate then judges each round's pair. Counters fail beyond --tolerance;
    /// noisy figures (goodput, CPU) only report unless a --fail-on rule names them.
    ///
    /// Examples:
    ///   nesquic ab --head-opt gso=off --probe io                  # two option sets
    ///   nesquic ab --base-lut-path ../quinn-main --head-lut-path ../quinn-pr --probe io \
    ///       --size 25MB --rounds 20 --fail-on 'cpu_s>+5%' --format markdown
    ///   nesquic ab --lut exec --base-server-cmd ... --base-client-cmd ... \
    ///       --head-server-cmd ... --head-client-cmd ...           # your own perf binaries
    #[command(verbatim_doc_comment)]
    Ab(Box<ab::AbArgs>),
    /// The first commit of a LUT's repository between a good and a bad one that regresses: each
    /// step an A/B job of the midpoint against the good commit (builds cached by commit); an
    /// inconclusive step takes more rounds before it decides.
    ///
    /// Example:
    ///   nesquic bisect --lut quinn --lut-path ../quinn --good v0.11.8 --bad main \
    ///       --probe io --size 25MB --fail-on 'server.send_syscalls>+2%'
    #[command(verbatim_doc_comment)]
    Bisect(Box<bisect::BisectArgs>),
    /// What this kernel supports (BTF, uprobes, kprobes, fentry, netem, ...) and which mechanism
    /// each probe kind will use here (root: capabilities are tried, not guessed).
    #[command(after_help = EXIT_STATUS)]
    Doctor(doctor::DoctorArgs),
    /// The remote side of --server-host/--client-host: started by another nesquic over SSH,
    /// speaks JSON lines on stdin/stdout (docs/remote.md).
    #[command(hide = true)]
    RemoteRole,
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
    if cli.command.holds_resources() {
        pipe::end_quietly_after_cleanup();
    } else {
        pipe::end_quietly();
    }
    let outcome = pipe::catch_closed_stdout(|| cli.command.execute());
    match outcome {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("nesquic: error: {e:#}");
            ExitCode::FAILURE
        }
        Err(pipe::StdoutClosed) => pipe::die_of_sigpipe(),
    }
}

/// How a gate command's outcome maps to the exit status: 0 pass, 1 regression, 2 bad input.
fn gate_status(result: anyhow::Result<compare::Outcome>) -> ExitCode {
    match result {
        Ok(compare::Outcome::Pass) => ExitCode::SUCCESS,
        Ok(compare::Outcome::Regression) => ExitCode::from(1),
        Err(e) => {
            eprintln!("nesquic: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

impl Command {
    /// Commands that own LUT processes, probes or namespaces while they print: a closed stdout
    /// must unwind through their cleanup rather than kill them on the spot.
    fn holds_resources(&self) -> bool {
        matches!(
            self,
            Command::Run(_)
                | Command::Trace(_)
                | Command::Matrix(_)
                | Command::Ab(_)
                | Command::Bisect(_)
                | Command::Doctor(_)
                | Command::RemoteRole
        )
    }

    fn execute(self) -> anyhow::Result<ExitCode> {
        let result = match self {
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
            Command::Findings(args) => findings::execute(&args),
            Command::Matrix(args) => matrix::execute(&args),
            Command::PerfClassify(args) => perf_classify::execute(&args),
            Command::Doctor(args) => doctor::execute(&args),
            Command::RemoteRole => remote::serve(&run::TOOL),
            Command::Compare(args) => return Ok(gate_status(compare::execute(&args))),
            Command::Ab(args) => return Ok(gate_status(ab::execute(&args))),
            Command::Bisect(args) => bisect::execute(&args),
        };
        result.map(|()| ExitCode::SUCCESS)
    }
}

fn list_probes(args: &ProbesArgs) -> anyhow::Result<()> {
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => {
            let lut = nesquic_lut_adapters::find_lut(&args.lut)?;
            nesquic_engine::on_demand::binary_path(lut.as_ref(), &run::lut_dir(args.lut_dir.as_deref())?)?
        }
    };
    probes::list(&args.probe, &binary, args.probe_backend)
}

fn list_luts() {
    let exec: Box<dyn nesquic_lut_adapters::Lut> =
        Box::new(nesquic_lut_adapters::ExecLut { server_cmd: String::new(), client_cmd: String::new() });
    let dir = run::lut_dir(None).ok();
    for lut in nesquic_lut_adapters::all_luts().into_iter().chain([exec]) {
        let d = lut.descriptor();
        let io: Vec<String> = d.io_modes.iter().map(ToString::to_string).collect();
        println!("{:<8} {:<10} io: {:<20} {}", lut.name(), lut.version(), io.join(","), d.description);
        if let (Some(Err(e)), false) = (dir.as_ref().map(|dir| lut.binary_path(dir)), lut.runs_user_commands()) {
            println!("{:<8} unavailable: {e}", "");
        }
        for o in d.options {
            let io: Vec<String> = o.io.iter().map(ToString::to_string).collect();
            println!("{:<8} --lut-opt {}={}  {} [--io {}]", "", o.kind.key(), o.values(), o.meaning, io.join("|"));
        }
        for r in d.refuses {
            println!("{:<8} no {}: {}", "", r.kind.key(), r.why);
        }
        if d.source_build.is_some() {
            let from = match d.releases {
                Some(Releases::Crates) => "; --lut-version VERSION: a crates.io release".to_string(),
                Some(Releases::GoModule(m)) => format!("; --lut-version VERSION: {m} from the Go module proxy"),
                Some(Releases::PyPi(p)) => format!("; --lut-version VERSION: {p} from PyPI"),
                Some(Releases::DebianSource(_)) => "; --lut-version VERSION: Debian's source package".to_string(),
                None => String::new(),
            };
            println!("{:<8} --lut-path: {}{from}", "", d.supported_versions);
        }
    }
    list_endpoints();
}

/// The stacks' own endpoints Nesquic has recipes for (`lut-adapters/endpoints/`).
fn list_endpoints() {
    use nesquic_lut_adapters::endpoint::recipe::{Recipe, BUILTIN};
    println!("\nown endpoints: --lut NAME --lut-path CHECKOUT (--endpoint where an adapter exists too; docs/luts.md)");
    for (file, text) in BUILTIN {
        match Recipe::parse(text, file) {
            Ok(r) => {
                println!("{:<8} {:<10} {} ({})", r.name, "endpoint", r.description, r.repository);
                for dep in &r.build.checkouts {
                    println!("{:<8} --lut-dep {}=PATH: a checkout of {}", "", dep.name, dep.repository);
                }
                if !r.notes.is_empty() {
                    println!("{:<8} note: {}", "", r.notes);
                }
            }
            Err(e) => println!("{:<8} {e}", ""),
        }
    }
}
