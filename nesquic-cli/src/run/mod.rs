//! `nesquic run`: run a LUT's server and client as separate processes, repeat, and report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nesquic_engine::custom_build;
use nesquic_engine::pair::ClientSide;
pub(crate) use nesquic_engine::process::{install_signal_flag, lut_dir};
use nesquic_engine::run::{RunPlan, RunReporter, ToolInfo};
use nesquic_lut_adapters::descriptor::Descriptor;
use nesquic_lut_adapters::lut::{socket_buffer, DESCRIPTORS};
use nesquic_lut_adapters::{IoMode, LutOpt, OptionKind};
pub(crate) use nesquic_record::calibration::Calibration;
pub(crate) use nesquic_record::figures::{RepetitionFigures, Summary};

use crate::units;

pub(crate) mod default_probes;
mod endpoint;

/// This build, as recorded in runs and checked against remote hosts.
pub const TOOL: ToolInfo = ToolInfo { version: env!("CARGO_PKG_VERSION"), git_revision: env!("NESQUIC_GIT_REVISION") };

/// `nesquic run` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Library under test (see `nesquic luts`); `exec` runs --server-cmd/--client-cmd.
    #[arg(long, default_value = "quinn")]
    pub lut: String,
    /// The server's library, when the client is another one (a pair: docs/pairs.md); default
    /// --lut. Each side keeps its own executable, I/O path, settings and probes.
    #[arg(long, value_name = "LUT")]
    pub server_lut: Option<String>,
    /// The client's library (a pair: docs/pairs.md); default --lut.
    #[arg(long, value_name = "LUT")]
    pub client_lut: Option<String>,
    /// A pair's server I/O path (default --io, else its LUT's first).
    #[arg(long, value_enum, value_name = "IO")]
    pub server_io: Option<IoMode>,
    /// A pair's client I/O path (default --io, else its LUT's first).
    #[arg(long, value_enum, value_name = "IO")]
    pub client_io: Option<IoMode>,
    /// A setting for the server alone, KEY=VALUE, repeatable (as --lut-opt, which both sides get).
    #[arg(long = "server-lut-opt", value_name = "KEY=VALUE")]
    pub server_lut_opts: Vec<String>,
    /// A setting for the client alone, KEY=VALUE, repeatable.
    #[arg(long = "client-lut-opt", value_name = "KEY=VALUE")]
    pub client_lut_opts: Vec<String>,
    /// Build the server's adapter against this checkout (as --lut-path, for the server alone).
    #[arg(long, value_name = "PATH", conflicts_with = "lut_path")]
    pub server_lut_path: Option<PathBuf>,
    /// Build the client's adapter against this checkout (as --lut-path, for the client alone).
    #[arg(long, value_name = "PATH", conflicts_with = "lut_path")]
    pub client_lut_path: Option<PathBuf>,
    /// Build the LUT's adapter against this local checkout of its library (Rust stacks: a cargo
    /// patch of its crates; others: the LUT's build script), and prove the build linked it. Its
    /// path, git revision and uncommitted changes are recorded. Builds are cached in
    /// target/lut-builds/.
    #[arg(long, value_name = "PATH")]
    pub lut_path: Option<PathBuf>,
    /// With --lut-path: build this commit (branch, tag or hash) of its git repository instead of
    /// the directory as it is, from a worktree Nesquic checks it out into (once per commit).
    #[arg(long, value_name = "REV")]
    pub lut_rev: Option<String>,
    /// Build the LUT's adapter against this published release of its library, fetched from its
    /// registry (crates.io for the Rust stacks, the Go module proxy for quic-go, PyPI for
    /// aioquic) into target/lut-builds/releases/ once, then built and proven like a --lut-path
    /// checkout; the record names the registry, version and checksum. `nesquic luts` lists the
    /// versions each adapter supports.
    #[arg(long, value_name = "VERSION", conflicts_with_all = ["lut_path", "lut_rev", "server_lut_path", "client_lut_path"])]
    pub lut_version: Option<String>,
    /// Drive the stack through its own interop endpoint (its checkout's server and client,
    /// lut-adapters/endpoints/NAME.toml) even where Nesquic has an adapter for it; needs
    /// --lut-path. A stack without an adapter (picoquic) is driven so without this flag.
    #[arg(long, conflicts_with_all = ["lut_version", "server_cmd"])]
    pub endpoint: bool,
    /// Drive the stack through the endpoint this recipe file describes (the format of
    /// lut-adapters/endpoints/*.toml; its name must be --lut's); needs --lut-path.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["lut_version", "server_cmd"])]
    pub endpoint_recipe: Option<PathBuf>,
    /// Another checkout an endpoint's build needs, NAME=PATH (picoquic: --lut-dep picotls=PATH),
    /// repeatable.
    #[arg(long = "lut-dep", value_name = "NAME=PATH")]
    pub lut_deps: Vec<String>,
    /// With --lut exec: the server command (sh syntax). It gets NESQUIC_LISTEN, NESQUIC_CERT,
    /// NESQUIC_KEY and prints the report lines of docs/protocol.md on stdout.
    #[arg(long, value_name = "CMD", requires = "client_cmd")]
    pub server_cmd: Option<String>,
    /// With --lut exec: the client command. It gets NESQUIC_CONNECT, NESQUIC_CA, NESQUIC_SIZE.
    #[arg(long, value_name = "CMD", requires = "server_cmd")]
    pub client_cmd: Option<String>,
    /// The scenario and its sizes.
    #[command(flatten)]
    pub scenario: crate::testcase::TestcaseArgs,
    /// Repetitions; figures are reported per repetition and as median/min/max.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Time limit for each repetition: 30s, 2m, 500ms.
    #[arg(long, default_value = "5m", value_parser = units::parse_duration)]
    pub timeout: Duration,
    /// UDP I/O path. native: the LUT's own (quinn: quinn-udp, GSO capped at 10 datagrams);
    /// nesquic: Nesquic's I/O layer, GSO/GRO + sendmmsg/recvmmsg (quinn runs quinn-proto over it);
    /// plain: one sendto/recvfrom per datagram, the naive baseline. Default: the LUT's first
    /// (`nesquic luts` lists them).
    #[arg(long, value_enum)]
    pub io: Option<IoMode>,
    /// Also write every figure as JSON to this file (the run directory always gets summary.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write one self-contained HTML page of the run (plots, flame graphs with --probe
    /// profile; no network needed to view it) to FILE, default RUN_DIR/report.html.
    #[arg(long, value_name = "FILE", num_args = 0..=1, conflicts_with = "overhead")]
    pub html: Option<Option<PathBuf>>,
    /// Also write a Markdown summary (for a pull-request comment) to FILE, default
    /// RUN_DIR/summary.md.
    #[arg(long, value_name = "FILE", num_args = 0..=1, conflicts_with = "overhead")]
    pub markdown: Option<Option<PathBuf>>,
    /// Run directory for server.sqlog, client.sqlog and summary.json; must not hold files yet.
    /// Default: ./nesquic-runs/UTCTIME-LUT/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// LUT setting KEY=VALUE, repeatable (gso=off, cc=bbr, pacing=off...); `nesquic luts` lists what each LUT accepts on each --io path, and what it refuses and why.
    #[arg(long = "lut-opt", value_name = "KEY=VALUE")]
    pub lut_opts: Vec<String>,
    /// Socket receive buffer to request: bytes (4MB, 8388608) or a multiple of the kernel default
    /// (16x = 16 x net.core.rmem_default). Same as --lut-opt rcvbuf=BYTES; a LUT that cannot set it
    /// (msquic) refuses.
    #[arg(long, value_name = "SIZE|Nx")]
    pub rcvbuf: Option<String>,
    /// Socket send buffer, like --rcvbuf (multiples of net.core.wmem_default).
    #[arg(long, value_name = "SIZE|Nx")]
    pub sndbuf: Option<String>,
    /// UDP GSO on or off (same as --lut-opt gso=...).
    #[arg(long, value_parser = ["on", "off"])]
    pub gso: Option<String>,
    /// UDP GRO on or off, Nesquic I/O (same as --lut-opt gro=...).
    #[arg(long, value_parser = ["on", "off"])]
    pub gro: Option<String>,
    /// sendmmsg/recvmmsg batching on or off, Nesquic I/O (same as --lut-opt mmsg=...).
    #[arg(long, value_parser = ["on", "off"])]
    pub mmsg: Option<String>,
    /// Congestion control: cubic, newreno, bbr (same as --lut-opt cc=...); a LUT without it
    /// refuses (msquic has no NewReno).
    #[arg(long, value_parser = ["cubic", "newreno", "bbr"])]
    pub cc: Option<String>,
    /// The only TLS 1.3 cipher suite offered (same as --lut-opt cipher=...); a LUT that cannot
    /// choose one refuses with the reason (`nesquic luts` says which). Initial packets stay
    /// AES-128-GCM.
    #[arg(long, value_parser = ["aes128gcm", "aes256gcm", "chacha20"])]
    pub cipher: Option<String>,
    /// MsQuic's execution profile (same as --lut-opt profile=...); only with --lut msquic.
    #[arg(long, value_name = "PROFILE", value_parser = ["max-throughput", "low-latency"])]
    pub msquic_profile: Option<String>,
    /// Also turn on the library's own qlog and merge its events (renamed into the `quic:`
    /// namespace) into the role's trace, on Nesquic's clock. The raw files stay as lut-*.sqlog.
    #[arg(long)]
    pub lut_qlog: bool,
    /// Also write each trace in a form a viewer draws: `qvis` writes `<out>/qvis/<role>.sqlog`
    /// with qlog draft-02 names (`transport:packet_sent`, `recovery:metrics_updated`) that qvis's
    /// sequence diagram and congestion graph read, and Nesquic's totals renamed
    /// `nesquic:probe_totals`. Needs --lut-qlog (the packets are the library's events).
    #[arg(long, value_name = "VIEWER", value_parser = ["qvis"])]
    pub qlog_compat: Option<String>,
    /// Also record every send/receive syscall message as `quic:udp_datagrams_sent`/`_received`
    /// (count and sizes) in the traces. Needs `--probe io`; costs a ring-buffer record per message.
    #[arg(long)]
    pub qlog_datagrams: bool,
    /// Period of the `nesquic:metrics_updated` qlog snapshots: 100ms, 1s, ...
    #[arg(long, default_value = "100ms", value_parser = units::parse_duration)]
    pub interval: Duration,
    /// Directory holding the `nesquic-lut-*` executables (default: next to `nesquic`).
    #[arg(long, env = "NESQUIC_LUT_DIR")]
    pub lut_dir: Option<PathBuf>,
    /// Probes, comma-separated: io (syscalls), profile (CPU sampling by component: 251 samples a second
    /// per busy CPU on a CPU-clock perf event, a prime rate that shares no phase with the scheduler
    /// tick or a workload's millisecond timers; profile:HZ another rate, as `perf record -F HZ -g`
    /// does, e.g. more samples from a short run; profile:~HZ HZ on average, period and phase redrawn at
    /// random every 10-30 ms; profile:tick on the scheduler tick, no interrupt of its own but it can
    /// alias with timer-driven work, docs/probes.md),
    /// crypto or crypto.seal, crypto.open, crypto.header_protection, crypto.handshake (counted;
    /// append :time for durations), all, uprobe:GLOB, uprobe:BINARY:GLOB (timed), none.
    /// Not given: `nesquic run` turns on profile,io,crypto, each measured near its cost floor
    /// (docs/probe-overhead.md), when it can load eBPF (root); crypto is left out where the
    /// user-space agent cannot count it (a static binary such as quic-go's). Without root:
    /// io,crypto, counted by the agent, where it can count both sides; none otherwise.
    /// `nesquic probes --lut NAME --probe LIST` shows what a list resolves to.
    #[arg(long, value_name = "LIST", env = "NESQUIC_PROBE")]
    pub probe: Option<String>,
    /// Who measures the probes: auto (user space where the agent can hook: dynamically linked
    /// LUTs, safe function entries; the kernel for the rest), user (the agent; no root unless an
    /// entry is refused), kernel (eBPF uprobes and tracepoints; root), both (as auto, and packet
    /// I/O by both the agent and the tracepoints, compared). The sampling profile is always eBPF.
    #[arg(long, value_enum, default_value_t = crate::backend::BackendChoice::Auto)]
    pub probe_backend: crate::backend::BackendChoice,
    /// Measure the probes' cost instead: per round, run without probes, with each item of
    /// --probe alone and with all of them, in rotating order; report goodput and CPU ratios,
    /// of medians and paired round by round. Without --probe: the probes `nesquic run` turns on
    /// by default, as one set against none. --repeat sets the rounds (on a noisy machine a 2%
    /// cost needs ~150).
    #[arg(long)]
    pub overhead: bool,
    /// With --overhead, which probe sets run besides none: each (each item of the list alone,
    /// then all of them; the default with --probe) or together (only all of them: two runs a
    /// round instead of items + 2, so more pairs in the same time; the default without --probe).
    #[arg(long, value_enum, value_name = "SETS", requires = "overhead")]
    pub overhead_sets: Option<OverheadSets>,
    /// Duty-cycle the function probes: attached WINDOW out of every PERIOD (e.g. 50ms/500ms), so
    /// timing probes perturb only that share of the run; counts are extrapolated with the
    /// measured attached fraction and reported raw and scaled. I/O probes stay on.
    #[arg(long, value_name = "WINDOW/PERIOD", value_parser = crate::duty::parse, requires = "probe")]
    pub duty: Option<crate::duty::DutySpec>,
    /// Run the server on one CPU and the client on another (SERVER,CLIENT; 0,1 when given
    /// alone). On a small machine the scheduler otherwise moves the two sides between CPUs and
    /// sometimes onto one: pinned, rounds scatter less and A/B or --overhead ratios need fewer
    /// rounds. Only for sides on this machine.
    #[arg(long, value_name = "SERVER,CLIENT", num_args = 0..=1, default_missing_value = "0,1", value_parser = nesquic_engine::pin::parse)]
    pub pin: Option<nesquic_engine::pin::PinnedCpus>,
    /// Network between client and server: loopback, or veth (two network namespaces joined by
    /// a veth pair, created and removed by nesquic; root).
    #[arg(long, value_enum, default_value_t = nesquic_link::LinkKind::Loopback)]
    pub link: nesquic_link::LinkKind,
    /// With --link veth: rate limit each direction (tbf), as tc spells it: 100mbit, 1gbit.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// With --link veth: random loss each direction, percent (netem, else a tc-bpf filter that
    /// also measures what it dropped).
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<f64>,
    /// With --link veth: one-way delay in ms, each direction (netem; without netem Nesquic's
    /// userspace relay, which measures the delay it added).
    #[arg(long, value_name = "MS")]
    pub delay: Option<f64>,
    /// With --link veth and --delay: uniform jitter of ±MS around the delay (reorders, as
    /// netem's does).
    #[arg(long, value_name = "MS", requires = "delay")]
    pub jitter: Option<f64>,
    /// With --link veth and --delay: this percentage of packets skips the delay, so it
    /// overtakes earlier ones (netem's `reorder`).
    #[arg(long, value_name = "PERCENT")]
    pub reorder: Option<f64>,
    /// Roles on other hosts.
    #[command(flatten)]
    pub hosts: crate::remote::HostArgs,
    /// Set by `nesquic matrix`: no per-run summary tables, repetition lines on stderr.
    #[arg(skip)]
    pub quiet: bool,
}

pub use nesquic_record::run::RunRecord as RunReport;

/// `--overhead-sets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OverheadSets {
    /// Each probe item alone, then all of them.
    Each,
    /// Only all of them together.
    Together,
}

/// Runs `nesquic run`; `None` when `--overhead` produced its own report instead.
pub fn execute(args: &RunArgs) -> Result<Option<RunReport>> {
    // Before anything is built or made: a dead run's namespaces would block nothing, but its
    // scratch directories (a private key among them) and namespaces pile up run after run.
    clear_leftovers();
    let mut plan = args.plan()?;
    if args.probe.is_none() && !args.overhead {
        plan.probe = default_probes::choose(&plan);
    }
    // Signals first: once probes are attached, Ctrl-C must unwind through their cleanup.
    let interrupted = install_signal_flag()?;
    let mut reporter = Terminal::new(args.quiet);
    if args.overhead {
        if args.probe.is_none() {
            plan.probe = Some(default_probes::choose(&plan).context(
                "--overhead without --probe measures the default probes, and they cannot run here (above); \
                 give --probe LIST to measure others",
            )?);
        }
        let sets = args.overhead_sets.unwrap_or(if args.probe.is_some() {
            OverheadSets::Each
        } else {
            OverheadSets::Together
        });
        let choice = match sets {
            OverheadSets::Each => nesquic_engine::overhead::SetChoice::EachAndAll,
            OverheadSets::Together => nesquic_engine::overhead::SetChoice::Together,
        };
        let report = nesquic_engine::overhead::execute(&plan, choice, &interrupted, &mut reporter)?;
        print_overhead(&report);
        if let Some(p) = &plan.pin {
            println!("pinned (--pin): {p}");
        }
        if let Some(path) = &args.json {
            nesquic_record::files::write(path, serde_json::to_string_pretty(&report)?.as_bytes())
                .with_context(|| format!("write {}", path.display()))?;
            eprintln!("nesquic: JSON written to {}", path.display());
        }
        // The rounds that completed are printed and written; the exit status still says some did not.
        if report.interrupted {
            bail!("interrupted after {} complete round(s) of {}: the table holds those", report.rounds, plan.repeat);
        }
        if !report.failed_rounds.is_empty() {
            bail!(
                "{} of {} round(s) failed (the table holds the {} that completed): {}",
                report.failed_rounds.len(),
                plan.repeat,
                report.rounds,
                report.failed_rounds.iter().map(|f| format!("round {}", f.round)).collect::<Vec<_>>().join(", ")
            );
        }
        return Ok(None);
    }
    let pages = args.html.is_some() || args.markdown.is_some();
    if pages && plan.out.is_none() {
        // The pages are written into the run directory: choose it here rather than in the engine.
        plan.out = Some(nesquic_record::recorder::default_out_dir(&plan.dir_name())?);
    }
    let record = nesquic_engine::run::execute(&plan, &interrupted, &mut reporter)?;
    if let Some(dir) = plan.out.as_deref().filter(|_| pages) {
        if let Some(file) = &args.markdown {
            crate::html::write(
                &crate::html::target(file, || dir.join("summary.md")),
                &nesquic_render::markdown::summary(&record),
                "Markdown summary",
            )?;
        }
        if let Some(file) = &args.html {
            let page = nesquic_html::run_page(&crate::html::load_run(dir)?)?;
            crate::html::write(&crate::html::target(file, || dir.join("report.html")), &page, "HTML report")?;
        }
    }
    Ok(Some(record))
}

/// Removes what runs that died without their cleanup (`kill -9`) left, one line each on stderr,
/// and says what runs still going hold (left alone).
pub(crate) fn clear_leftovers() {
    for found in nesquic_engine::leftovers::sweep() {
        eprintln!("nesquic: {found}");
    }
}

impl RunArgs {
    /// Resolves the flags into a checked plan: the LUT (built from `--lut-path` if given), its
    /// I/O path, testcase and options, the executable, the link conditions.
    pub fn plan(&self) -> Result<RunPlan> {
        let no_probes = self.probe.as_deref() == Some(default_probes::NONE);
        anyhow::ensure!(
            !no_probes || (!self.overhead && self.duty.is_none()),
            "--probe none: --overhead and --duty need probes to measure"
        );
        anyhow::ensure!(
            self.qlog_compat.is_none() || self.lut_qlog,
            "--qlog-compat qvis draws the library's packet and recovery events: add --lut-qlog"
        );
        anyhow::ensure!(
            self.lut_rev.is_none()
                || self.lut_path.is_some()
                || self.server_lut_path.is_some()
                || self.client_lut_path.is_some(),
            "--lut-rev picks a commit of a checkout: add --lut-path (or --server-lut-path/--client-lut-path)"
        );
        let testcase = self.scenario.resolve()?;
        let (server_name, client_name) =
            (self.server_lut.as_deref().unwrap_or(&self.lut), self.client_lut.as_deref().unwrap_or(&self.lut));
        let pair = server_name != client_name
            || self.server_io.is_some()
            || self.client_io.is_some()
            || !self.server_lut_opts.is_empty()
            || !self.client_lut_opts.is_empty()
            || self.server_lut_path.is_some()
            || self.client_lut_path.is_some();
        if pair {
            anyhow::ensure!(
                self.lut_version.is_none() || server_name == client_name,
                "--lut-version is a release of one library; server {server_name} x client {client_name} are two"
            );
            anyhow::ensure!(
                self.lut_path.is_none() || server_name == client_name,
                "--lut-path builds one library from a checkout; server {server_name} x client {client_name} are two: \
                 say which side with --server-lut-path or --client-lut-path"
            );
            anyhow::ensure!(
                self.msquic_profile.is_none(),
                "--msquic-profile: give it to the msquic side as --server-lut-opt/--client-lut-opt profile=..."
            );
        }
        let endpoint = endpoint::resolve(self, server_name, &testcase)?;
        anyhow::ensure!(
            endpoint.is_none() || !pair,
            "{server_name}'s own endpoint runs its server with its client (no pairs with endpoints yet)"
        );
        let (server, endpoint_client) = match endpoint {
            Some((server, client)) => (Ok(server), client),
            None => (
                self.side(server_name, self.server_lut_path.as_ref(), self.server_io, &self.server_lut_opts, &testcase),
                None,
            ),
        };
        let server = if pair { server.with_context(|| format!("the server {server_name}"))? } else { server? };
        let client = if let Some(c) = endpoint_client {
            Some(c)
        } else if pair {
            let side = self
                .side(client_name, self.client_lut_path.as_ref(), self.client_io, &self.client_lut_opts, &testcase)
                .with_context(|| format!("the client {client_name}"))?;
            nesquic_engine::pair::check(server.lut.as_ref(), side.lut.as_ref())?;
            let cipher = |o: &[LutOpt]| o.iter().copied().find(|o| o.kind() == OptionKind::Cipher);
            if let (Some(a), Some(b)) = (cipher(&server.lut_options), cipher(&side.lut_options)) {
                anyhow::ensure!(
                    a == b,
                    "server {server_name} x client {client_name}: the server offers only {a}, the client only {b}: \
                     no TLS 1.3 cipher suite in common, the handshake would fail"
                );
            }
            Some(side)
        } else {
            None
        };
        let ClientSide { lut, lut_source, binary, io, lut_options } = server;
        Ok(RunPlan {
            lut,
            client,
            lut_source,
            binary,
            io,
            testcase,
            lut_options,
            probe: self.probe.clone().filter(|p| p != default_probes::NONE),
            probe_backend: self.probe_backend,
            duty: self.duty,
            qlog_datagrams: self.qlog_datagrams,
            lut_qlog: self.lut_qlog,
            qvis: self.qlog_compat.is_some(),
            link: self.link,
            conditions: nesquic_link::Conditions {
                rate: self.rate.clone(),
                loss_pct: self.loss,
                delay_ms: self.delay,
                jitter_ms: self.jitter,
                reorder_pct: self.reorder,
            },
            repeat: self.repeat,
            timeout: self.timeout,
            interval: self.interval,
            out: self.out.clone(),
            json: if self.overhead { None } else { self.json.clone() },
            tool: TOOL,
            remote: self.hosts.roles()?,
            pin: self.pin,
        })
    }

    /// One side: the LUT `name` (built from `path` or `--lut-path`), its I/O path (`io`, else
    /// `--io`, else its first), checked against the testcase, and its settings (`--lut-opt`, the
    /// setting flags and this side's own `extra`).
    fn side(
        &self,
        name: &str,
        path: Option<&PathBuf>,
        io: Option<IoMode>,
        extra: &[String],
        testcase: &nesquic_testcases::Testcase,
    ) -> Result<ClientSide> {
        let mut lut =
            nesquic_lut_adapters::lut::find_lut_or_exec(name, self.server_cmd.clone(), self.client_cmd.clone())?;
        let mut lut_source = None;
        if let Some(path) = path.or(self.lut_path.as_ref()) {
            let built = custom_build::build(lut, path, self.lut_rev.as_deref())?;
            lut_source = Some(built.source.clone());
            lut = Box::new(built);
        } else if let Some(version) = &self.lut_version {
            let built = custom_build::build_release(lut, version)?;
            lut_source = Some(built.source.clone());
            lut = Box::new(built);
        }
        let descriptor = lut.descriptor();
        let io = io.or(self.io).unwrap_or(descriptor.io_modes[0]);
        descriptor.check_io(io)?;
        descriptor.check_workload(io, &testcase.workload).with_context(|| format!("testcase {}", testcase.name))?;
        let lut_options = self.lut_options(descriptor, io, extra)?;
        let binary = nesquic_engine::on_demand::binary_path(lut.as_ref(), &lut_dir(self.lut_dir.as_deref())?)?;
        Ok(ClientSide { lut, lut_source, binary, io, lut_options })
    }

    /// `--lut-opt` and the flags that are settings (`--gso`, `--cc`, `--rcvbuf`...), typed and
    /// checked against what the LUT accepts on `io`, then this side's `extra` settings.
    fn lut_options(&self, descriptor: &Descriptor, io: IoMode, extra: &[String]) -> Result<Vec<LutOpt>> {
        if self.cipher.is_some() && !descriptor.offers(OptionKind::Cipher) {
            let why = descriptor.refuses.iter().find(|r| r.kind == OptionKind::Cipher).map_or_else(
                || format!("{} exposes no such setting", descriptor.crypto_backend),
                |r| r.why.to_string(),
            );
            let can: Vec<&str> = DESCRIPTORS.iter().filter(|d| d.offers(OptionKind::Cipher)).map(|d| d.name).collect();
            anyhow::bail!(
                "--cipher: LUT '{}' cannot choose its TLS 1.3 cipher suite ({why}); {} can",
                descriptor.name,
                can.join(", ")
            );
        }
        if self.msquic_profile.is_some() {
            anyhow::ensure!(
                descriptor.offers(OptionKind::Profile),
                "--msquic-profile only applies to --lut msquic ({} has no execution profile)",
                descriptor.name
            );
        }
        let mut options = descriptor.parse_options(io, &self.lut_opts)?;
        options.extend(descriptor.parse_options(io, extra)?);
        let flags = [
            (OptionKind::Gso, &self.gso),
            (OptionKind::Gro, &self.gro),
            (OptionKind::Mmsg, &self.mmsg),
            (OptionKind::Cc, &self.cc),
            (OptionKind::Cipher, &self.cipher),
            (OptionKind::Profile, &self.msquic_profile),
        ];
        for (kind, value) in flags {
            if let Some(v) = value {
                options.push(kind.with_value(v).with_context(|| format!("--{}", kind.key()))?);
            }
        }
        for (kind, value, sysctl) in
            [(OptionKind::RcvBuf, &self.rcvbuf, "rmem_default"), (OptionKind::SndBuf, &self.sndbuf, "wmem_default")]
        {
            if let Some(v) = value {
                let flag = format!("--{}", kind.key());
                let bytes = socket_buffer(v, sysctl).context(flag.clone())?;
                options.push(kind.with_value(&bytes.to_string()).context(flag)?);
            }
        }
        descriptor.check_options(io, &options)?;
        Ok(options)
    }
}

/// What `nesquic run` shows while the engine works: progress on stderr, figures on stdout
/// (repetition lines on stderr and no tables when `quiet`, as `matrix` wants).
pub(crate) struct Terminal {
    /// Matrix mode: repetition lines on stderr, no tables.
    pub quiet: bool,
    /// Agent problems already shown: each is printed once, in quiet mode too (a missing
    /// measurement must never pass unsaid, whichever command ran).
    agent_problems_shown: std::collections::BTreeSet<String>,
}

impl Terminal {
    /// A reporter; `quiet` as `matrix` and `ab` want it (repetition lines on stderr, no tables).
    pub(crate) fn new(quiet: bool) -> Self {
        Self { quiet, agent_problems_shown: Default::default() }
    }

    /// The agent problems of a repetition not shown yet (`run`, `matrix`, `ab` and `trace` all
    /// report through here, so none of them can leave an unmeasured process unsaid).
    fn new_agent_problems(&mut self, agents: &[nesquic_record::run::AgentReport]) -> Vec<String> {
        nesquic_render::probes::agent_problems(agents)
            .into_iter()
            .filter(|problem| self.agent_problems_shown.insert(problem.clone()))
            .collect()
    }
}

impl RunReporter for Terminal {
    fn probes_opened(&mut self, probes: &crate::backend::Probes) {
        if !self.quiet {
            for line in probes.describe() {
                eprintln!("nesquic: probes: {line}");
            }
        }
    }

    fn calibrated(&mut self, calibration: &Calibration) {
        if !self.quiet {
            nesquic_render::run::print_calibration(calibration);
        }
    }

    fn hosts_ready(&mut self, hosts: &[(nesquic_protocol::Role, nesquic_record::events::HostInfo)]) {
        if !self.quiet {
            for line in nesquic_render::run::describe_hosts(hosts) {
                eprintln!("nesquic: {line}");
            }
        }
    }

    fn link_ready(&mut self, topology: &nesquic_link::Topology) {
        if !self.quiet {
            eprintln!("nesquic: link: {}", topology.applied.mechanisms.join("; "));
        }
    }

    fn starting(&mut self, plan: &RunPlan) {
        if !self.quiet {
            let t = &plan.testcase;
            let side = |lut: &dyn nesquic_lut_adapters::Lut, io: IoMode| {
                format!("{} {} ({}), io {io}", lut.name(), lut.version(), lut.descriptor().crypto_backend)
            };
            let luts = match &plan.client {
                Some(c) => {
                    format!("server {} x client {}", side(plan.lut.as_ref(), plan.io), side(c.lut.as_ref(), c.io))
                }
                None => side(plan.lut.as_ref(), plan.io),
            };
            eprintln!(
                "nesquic: {luts}, testcase {}: {} x {} repetition(s)",
                t.name,
                t.workload.describe(),
                plan.repeat
            );
        }
    }

    fn repetition(&mut self, label: &str, figures: &RepetitionFigures) {
        for problem in self.new_agent_problems(&figures.agents) {
            eprintln!("nesquic: warning: {problem} (first in {label})");
        }
        if self.quiet {
            eprintln!("  {}", nesquic_render::run::repetition_line(label, figures));
        } else {
            println!("{}", nesquic_render::run::repetition_line(label, figures));
        }
    }

    fn repetition_failed(&mut self, label: &str, error: &str) {
        eprintln!("nesquic: {label} failed (the round is left out, the next one runs): {error}");
    }

    fn finished(&mut self, report: &RunReport, merged: Option<&nesquic_ebpf::Metrics>) {
        if !self.quiet {
            nesquic_render::run::print_run(report, merged);
            println!();
            print!("{}", nesquic_render::findings::text(&report.findings));
        }
    }

    fn lut_qlog_merged(&mut self, events: usize, trace: &std::path::Path) {
        eprintln!("nesquic: merged {events} LUT qlog events into {}", trace.display());
    }

    fn qvis_written(&mut self, copy: &nesquic_record::qlog::qvis::QvisCopy, path: &std::path::Path) {
        eprintln!(
            "nesquic: qvis copy {} ({} events, {} of them the library's)",
            path.display(),
            copy.events,
            copy.library_events
        );
    }

    fn written(&mut self, out_dir: &std::path::Path, json: Option<&std::path::Path>) {
        if let Some(path) = json {
            eprintln!("nesquic: JSON written to {}", path.display());
        }
        if !self.quiet {
            eprintln!("nesquic: run written to {} (server.sqlog, client.sqlog, summary.json)", out_dir.display());
        }
    }
}

/// The `--overhead` table.
fn print_overhead(report: &nesquic_engine::overhead::OverheadReport) {
    println!();
    println!(
        "probe overhead, {} round(s) of {} bytes; ratios against no probes: of medians, and paired round by round (95% interval)",
        report.rounds, report.size_bytes
    );
    for f in &report.failed_rounds {
        let set = if f.probes.is_empty() { "no probes" } else { f.probes.as_str() };
        println!(
            "round {} left out: its run with {set} failed: {}",
            f.round,
            f.error.lines().next().unwrap_or_default()
        );
    }
    println!(
        "{:<34} {:>14} {:>7} {:>21} {:>10} {:>7} {:>21}",
        "probes", "goodput Mbit/s", "ratio", "paired", "CPU s/GB", "ratio", "paired"
    );
    let paired = |e: Option<nesquic_record::compare::RatioEstimate>| {
        e.map_or("-".to_string(), |e| format!("{:.3} ({:.3}-{:.3})", e.ratio, e.low, e.high))
    };
    for r in &report.sets {
        let name = if r.probes.is_empty() { "(none)" } else { r.probes.as_str() };
        println!(
            "{name:<34} {:>14.1} {:>7.3} {:>21} {:>10.2} {:>7.3} {:>21}",
            r.goodput_mbps.median,
            r.goodput_ratio,
            paired(r.goodput_paired),
            r.cpu_s_per_gb.median,
            r.cpu_ratio,
            paired(r.cpu_paired)
        );
    }
    // Part of the CPU above, paid once per process before the LUT's `main`.
    for r in &report.sets {
        if let Some(cost) = nesquic_render::run::agent_startup(&r.repetitions) {
            println!("user-space agent start-up with {} (its CPU before main, median): {cost}", r.probes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nesquic_ebpf::user::PatchStatus;
    use nesquic_record::run::AgentReport;

    fn agent(role: nesquic_protocol::Role, ready: bool, patched: bool) -> AgentReport {
        let function = PatchStatus {
            name: "aes_gcm_seal".into(),
            object: "nesquic-lut-quinn".into(),
            patched,
            reason: if patched { "patched" } else { "prologue too short" }.into(),
        };
        AgentReport {
            role,
            ready,
            functions: vec![function],
            startup_cpu_ns: None,
            processes: vec![],
            processes_unlisted: 0,
            processes_unlisted_without_agent: 0,
        }
    }

    #[test]
    fn every_agent_problem_is_said_once_per_command() {
        use nesquic_protocol::Role::{Client, Server};
        let mut terminal = Terminal::new(true);
        let first = terminal.new_agent_problems(&[agent(Server, false, false), agent(Client, true, false)]);
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(first[0].contains("did not start in the server"), "{first:?}");
        assert!(first[1].contains("client: aes_gcm_seal not hooked") && first[1].contains("prologue"), "{first:?}");
        // The next repetition has the same problems: already said.
        assert!(terminal.new_agent_problems(&[agent(Server, false, false), agent(Client, true, false)]).is_empty());
        // A healthy agent says nothing.
        assert!(Terminal::new(false).new_agent_problems(&[agent(Client, true, true)]).is_empty());
    }
}
