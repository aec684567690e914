//! `nesquic run`: run a LUT's server and client as separate processes, repeat, and report.

mod custom_build;
mod overhead;
pub(crate) mod process;
mod record;
pub(crate) mod repetition;
mod results;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nesquic_lut_adapters::{find_lut, tls, IoMode};
use serde::Serialize;
use serde_json::json;

use process::{Role, LUT_ROLES};
use repetition::{run_repetition, ProcessObserver, RepetitionSpec};
pub(crate) use results::{RepetitionFigures, Spread, Summary, WorkloadSummary};

use crate::units;

/// `nesquic run` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Library under test (see `nesquic luts`); `exec` runs --server-cmd/--client-cmd.
    #[arg(long, default_value = "quinn")]
    pub lut: String,
    /// Build the LUT's adapter against this local checkout of the library (a cargo patch):
    /// a quinn crate directory or a quinn workspace checkout. Its git revision is recorded.
    #[arg(long, value_name = "PATH")]
    pub lut_path: Option<PathBuf>,
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
    /// Run directory for server.sqlog, client.sqlog and summary.json; must not hold files yet.
    /// Default: ./nesquic-runs/UTCTIME-LUT/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// LUT-specific setting KEY=VALUE, repeatable (quinn: gso=on|off). `nesquic luts` lists them.
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
    /// The only TLS 1.3 cipher suite offered (same as --lut-opt cipher=...): quinn (rustls) and
    /// msquic can; quiche's BoringSSL cannot and refuses. Initial packets stay AES-128-GCM.
    #[arg(long, value_parser = ["aes128gcm", "aes256gcm", "chacha20"])]
    pub cipher: Option<String>,
    /// MsQuic's execution profile (same as --lut-opt profile=...); only with --lut msquic.
    #[arg(long, value_name = "PROFILE", value_parser = ["max-throughput", "low-latency"])]
    pub msquic_profile: Option<String>,
    /// Also turn on the library's own qlog and merge its events (renamed into the `quic:`
    /// namespace) into the role's trace, on Nesquic's clock. The raw files stay as lut-*.sqlog.
    #[arg(long)]
    pub lut_qlog: bool,
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
    /// eBPF probes (root), comma-separated: io (syscalls), profile (CPU sampling by component;
    /// profile:HZ sets the rate per CPU, default 999),
    /// crypto or crypto.seal, crypto.open, crypto.header_protection, crypto.handshake (counted;
    /// append :time for durations), all, uprobe:GLOB, uprobe:BINARY:GLOB (timed).
    /// `nesquic probes --lut NAME --probe LIST` shows what a list resolves to.
    #[arg(long, value_name = "LIST")]
    pub probe: Option<String>,
    /// Who measures the probes: auto (user space where the agent can hook: dynamically linked
    /// LUTs, safe function entries; the kernel for the rest), user (the agent; no root unless an
    /// entry is refused), kernel (eBPF uprobes and tracepoints; root), both (as auto, and packet
    /// I/O by both the agent and the tracepoints, compared). The sampling profile is always eBPF.
    #[arg(long, value_enum, default_value_t = crate::backend::BackendChoice::Auto)]
    pub probe_backend: crate::backend::BackendChoice,
    /// Measure the probes' cost instead: per round, run without probes, with each item of
    /// --probe alone and with all of them, in rotating order; report goodput and CPU ratios.
    /// --repeat sets the rounds.
    #[arg(long, requires = "probe")]
    pub overhead: bool,
    /// Duty-cycle the function probes: attached WINDOW out of every PERIOD (e.g. 50ms/500ms), so
    /// timing probes perturb only that share of the run; counts are extrapolated with the
    /// measured attached fraction and reported raw and scaled. I/O probes stay on.
    #[arg(long, value_name = "WINDOW/PERIOD", value_parser = crate::duty::parse, requires = "probe")]
    pub duty: Option<crate::duty::DutySpec>,
    /// Network between client and server: loopback, or veth (two network namespaces joined by
    /// a veth pair, created and removed by nesquic; root).
    #[arg(long, value_enum, default_value_t = crate::link::LinkKind::Loopback)]
    pub link: crate::link::LinkKind,
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
    /// Set by `nesquic matrix`: no per-run summary tables, repetition lines on stderr.
    #[arg(skip)]
    pub quiet: bool,
}

/// Everything a run produced, as written to `--json`.
#[derive(Debug, Serialize)]
pub struct RunReport {
    /// Nesquic's version.
    pub nesquic_version: &'static str,
    /// The LUT.
    pub lut: LutInfo,
    /// The scenario.
    pub testcase: crate::testcase::TestcaseInfo,
    /// LUT-specific settings used (`--lut-opt`).
    pub lut_options: Vec<String>,
    /// Payload bytes per repetition (all connections and streams).
    pub size_bytes: u64,
    /// One entry per repetition.
    pub repetitions: Vec<RepetitionFigures>,
    /// Median/min/max over repetitions.
    pub summary: Summary,
    /// The timing probes' calibration, when timed probes ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibrate::Calibration>,
    /// `--link veth`: the link, what was applied by which mechanism, and what was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<serde_json::Value>,
}

/// What was run.
#[derive(Debug, Serialize)]
pub struct LutInfo {
    /// Adapter name.
    pub name: &'static str,
    /// Library version.
    pub version: String,
    /// Crypto backend.
    pub crypto_backend: &'static str,
    /// I/O path.
    pub io: IoMode,
    /// Executable that ran (and that probes attach to).
    pub binary: PathBuf,
    /// With --lut-path: the checkout it was built from and its git revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// Runs `nesquic run`; `None` when `--overhead` produced its own report instead.
pub fn execute(args: &RunArgs) -> Result<Option<RunReport>> {
    let mut lut = choose_lut(args)?;
    let mut lut_source = None;
    if let Some(path) = &args.lut_path {
        let built = custom_build::build(lut, path)?;
        lut_source = Some(json!({"path": built.source, "revision": built.revision}));
        lut = Box::new(built);
    }
    let io = args.io.unwrap_or(lut.io_modes()[0]);
    lut.check_io(io)?;
    let testcase = args.scenario.resolve()?;
    let workload = testcase.workload;
    lut.check_workload(io, &workload).with_context(|| format!("testcase {}", testcase.name))?;
    if args.cipher.is_some() && !lut.options().iter().any(|o| o.key == "cipher") {
        anyhow::bail!(
            "--cipher: LUT '{}' cannot choose its TLS 1.3 cipher suite ({} exposes no such setting); quinn and msquic can",
            lut.name(),
            lut.crypto_backend()
        );
    }
    let mut lut_opts = args.lut_opts.clone();
    for (key, value) in
        [("gso", &args.gso), ("gro", &args.gro), ("mmsg", &args.mmsg), ("cc", &args.cc), ("cipher", &args.cipher)]
    {
        if let Some(v) = value {
            lut_opts.push(format!("{key}={v}"));
        }
    }
    if let Some(v) = &args.rcvbuf {
        lut_opts.push(format!("rcvbuf={}", socket_buffer(v, "rmem_default").context("--rcvbuf")?));
    }
    if let Some(v) = &args.sndbuf {
        lut_opts.push(format!("sndbuf={}", socket_buffer(v, "wmem_default").context("--sndbuf")?));
    }
    if let Some(profile) = &args.msquic_profile {
        anyhow::ensure!(lut.name() == "msquic", "--msquic-profile only applies to --lut msquic (not {})", lut.name());
        lut_opts.push(format!("profile={profile}"));
    }
    lut.check_options(io, &lut_opts)?;
    let args = &RunArgs { lut_opts, ..args.clone() };
    let binary = lut.binary_path(&lut_dir(args.lut_dir.as_deref())?)?;
    // Signals first: once probes are attached, Ctrl-C must unwind through their cleanup.
    let interrupted = install_signal_flag()?;
    let plan = match &args.probe {
        // With --overhead each probe set gets its own session, opened only for its repetitions.
        Some(list) if !args.overhead => Some(crate::probes::ProbePlan::new(list, &binary)?),
        _ => None,
    };
    // The run directory does not exist yet: a verifier log goes next to it.
    let runs = args.out.as_deref().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new("nesquic-runs"));
    nesquic_ebpf::verifier::set_log_dir(runs);
    let workdir = tempfile::Builder::new().prefix("nesquic-run-").tempdir().context("create a temporary directory")?;
    let launcher = lut.launcher(&binary);
    let needs = crate::backend::KernelNeeds {
        duty: args.duty.is_some(),
        datagram_events: args.qlog_datagrams,
        launched_by_shell: launcher != binary,
    };
    let probes = match &plan {
        Some(p) => Some(crate::backend::Probes::open(p, args.probe_backend, &binary, workdir.path(), needs)?),
        None => None,
    };
    if let (Some(p), false) = (&probes, args.quiet) {
        for line in p.describe() {
            eprintln!("nesquic: probes: {line}");
        }
    }
    // Timed probes: measure what they add on this machine first, to subtract it (docs/probes.md).
    let calibration = match &probes {
        Some(p) => crate::calibrate::for_probes(p, args.quiet)?,
        None => None,
    };
    let (mut session, mut user) = match probes {
        Some(p) => (p.kernel, p.user),
        None => (None, None),
    };
    if args.qlog_datagrams {
        let catalog = nesquic_ebpf::Catalog::builtin()?;
        let has_io = match &args.probe {
            Some(list) => nesquic_ebpf::ProbeRequest::parse(list, &catalog)?.io,
            None => false,
        };
        anyhow::ensure!(has_io, "--qlog-datagrams records what the io probes see: add --probe io");
        if let Some(s) = session.as_mut() {
            s.set_datagram_events(true)?;
        }
    }
    let conditions = crate::link::Conditions {
        rate: args.rate.clone(),
        loss_pct: args.loss,
        delay_ms: args.delay,
        jitter_ms: args.jitter,
        reorder_pct: args.reorder,
    };
    let topology = match args.link {
        crate::link::LinkKind::Veth => Some(crate::link::Topology::create(&conditions)?),
        crate::link::LinkKind::Loopback if conditions.any() => {
            anyhow::bail!("--rate/--loss/--delay/--jitter/--reorder apply to a link: add --link veth")
        }
        crate::link::LinkKind::Loopback => None,
    };
    if let (Some(t), false) = (&topology, args.quiet) {
        eprintln!("nesquic: link: {}", t.applied.mechanisms.join("; "));
    }
    let certs = tls::generate(workdir.path())?;
    let base = RepetitionSpec {
        lut: lut.as_ref(),
        binary: &launcher,
        io,
        workload,
        certs: &certs,
        timeout: args.timeout,
        interrupted: &interrupted,
        progress_after: Duration::from_secs(2),
        label: String::new(),
        lut_qlog: None,
        options: &args.lut_opts,
        duty: args.duty,
        topology: topology.as_ref(),
    };
    if args.overhead {
        let list = args.probe.as_deref().context("--overhead compares probe sets: give them with --probe")?;
        overhead::execute(&base, list, args.probe_backend, needs, args.repeat, args.json.as_deref())?;
        return Ok(None);
    }

    if !args.quiet {
        eprintln!(
            "nesquic: {} {} ({}), io {io}, testcase {}: {} x {} repetition(s)",
            lut.name(),
            lut.version(),
            lut.crypto_backend(),
            testcase.name,
            workload.describe(),
            args.repeat
        );
    }
    let out_dir = match &args.out {
        Some(dir) => dir.clone(),
        None => record::default_out_dir(lut.name())?,
    };
    record::prepare_out_dir(&out_dir)?;
    let title = format!("nesquic {} {} {} {}", lut.name(), lut.version(), testcase.name, workload.describe());
    let mut recorder = record::Recorder::create(&out_dir, &title, args.interval)?;
    let mut started = run_started(args, &testcase, lut.as_ref(), &binary, io, session.as_ref(), user.as_ref());
    started["lut"]["source"] = lut_source.clone().unwrap_or(serde_json::Value::Null);
    if let Some(t) = &topology {
        let data = json!({"link": "veth", "server": t.server, "client": t.client, "mechanisms": t.applied.mechanisms});
        recorder.both("nesquic:link_configured", |_| data.clone())?;
    }
    recorder.both("nesquic:run_started", |role| {
        let mut data = started.clone();
        data["role"] = json!(role.to_string());
        data
    })?;

    let mut reps = Vec::new();
    for i in 1..=args.repeat {
        let label = format!("rep {i}/{}", args.repeat);
        let spec =
            RepetitionSpec { label: label.clone(), lut_qlog: args.lut_qlog.then_some((out_dir.as_path(), i)), ..base };
        let mut figures = measure(&spec, session.as_mut(), user.as_mut(), Some(&mut recorder), i)
            .with_context(|| format!("{} {label} failed (partial traces in {})", lut.name(), out_dir.display()))?;
        if let (Some(c), Some(m)) = (&calibration, figures.probes.as_mut()) {
            c.compensate(m);
        }
        if args.quiet {
            eprintln!("  {}", repetition_line(&label, &figures));
        } else {
            println!("{}", repetition_line(&label, &figures));
        }
        reps.push(figures);
    }
    // Invariant: repeat >= 1 (clap range), so there is at least one repetition here.
    let summary = Summary::of(&reps).context("no repetitions")?;
    let link = topology.as_ref().map(|t| {
        let loss = t.observed_loss();
        json!({
            "kind": "veth",
            "mechanisms": t.applied.mechanisms,
            "conditions": conditions,
            "observed_loss": loss.map(|(dropped, seen)| json!({
                "dropped": dropped, "seen": seen,
                "pct": if seen > 0 { dropped as f64 * 100.0 / seen as f64 } else { 0.0 },
            })),
            "qdisc_drops": t.qdisc_drops(),
            "relay": t.relay_stats(),
        })
    });
    let report = RunReport {
        nesquic_version: env!("CARGO_PKG_VERSION"),
        lut: LutInfo {
            name: lut.name(),
            version: lut.version(),
            crypto_backend: lut.crypto_backend(),
            io,
            binary,
            source: lut_source,
        },
        testcase: crate::testcase::TestcaseInfo::from(&testcase),
        lut_options: args.lut_opts.clone(),
        size_bytes: workload.total_bytes(),
        repetitions: reps,
        summary,
        calibration: calibration.clone(),
        link,
    };
    let merged = if args.quiet {
        let all: Vec<nesquic_ebpf::Metrics> = report.repetitions.iter().filter_map(|r| r.probes.clone()).collect();
        nesquic_ebpf::Metrics::merge(&all)
    } else {
        print_summary(&report);
        let merged = print_probe_summary(&report);
        if let (Some(c), Some(m)) = (&calibration, merged.as_ref()) {
            crate::probes::print_compensated(m, c);
        }
        for (i, rep) in report.repetitions.iter().enumerate() {
            if let Some(p) = &rep.profile {
                crate::probes::print_profile(
                    p,
                    &format!("repetition {}", i + 1),
                    rep.server.cpu_total_s + rep.client.cpu_total_s,
                );
            }
        }
        merged
    };
    // Probes detach here, before anything is written.
    drop(session);
    recorder.both("nesquic:run_summary", |role| run_summary_event(&report, role, merged.as_ref()))?;
    let epoch = recorder.epoch();
    let unsorted = recorder.unsorted;
    let traces = recorder.finish()?;
    let lut_files: Vec<_> = report.repetitions.iter().flat_map(|r| r.lut_qlogs.iter().cloned()).collect();
    anyhow::ensure!(!args.lut_qlog || !lut_files.is_empty(), "--lut-qlog: {} wrote no qlog", lut.name());
    // Merging the library's events and sorting per-message events are one rewrite of each trace.
    if unsorted || args.lut_qlog {
        for (trace, role) in traces.iter().zip(LUT_ROLES) {
            let mine: Vec<_> =
                lut_files.iter().filter(|(r, _, _)| *r == role).map(|(_, p, t)| (p.clone(), *t)).collect();
            let merged = record::merge_lut_qlog(trace, epoch, &mine)?;
            if args.lut_qlog {
                eprintln!("nesquic: merged {merged} {} qlog events into {}", lut.name(), trace.display());
            }
        }
    }
    let text = serde_json::to_string_pretty(&report)?;
    let summary_path = out_dir.join("summary.json");
    std::fs::write(&summary_path, &text).with_context(|| format!("write {}", summary_path.display()))?;
    if let Some(path) = &args.json {
        std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
        eprintln!("nesquic: JSON written to {}", path.display());
    }
    if !args.quiet {
        eprintln!("nesquic: run written to {} (server.sqlog, client.sqlog, summary.json)", out_dir.display());
    }
    Ok(Some(report))
}

/// Bytes for `--rcvbuf/--sndbuf`: a size (`4MB`) or a multiple of the kernel's default
/// (`16x`, read from /proc/sys/net/core/`sysctl`).
fn socket_buffer(text: &str, sysctl: &str) -> Result<u64> {
    if let Some(factor) = text.strip_suffix('x') {
        let factor: f64 = factor.parse().with_context(|| format!("{text}: expected SIZE or Nx (16x)"))?;
        let path = format!("/proc/sys/net/core/{sysctl}");
        let default: u64 = std::fs::read_to_string(&path)
            .with_context(|| format!("read {path}"))?
            .trim()
            .parse()
            .with_context(|| format!("parse {path}"))?;
        anyhow::ensure!(factor > 0.0, "{text}: the multiple must be positive");
        return Ok((default as f64 * factor) as u64);
    }
    units::parse_size(text)
}

fn choose_lut(args: &RunArgs) -> Result<Box<dyn nesquic_lut_adapters::Lut>> {
    if args.lut.eq_ignore_ascii_case("exec") {
        let (Some(server_cmd), Some(client_cmd)) = (&args.server_cmd, &args.client_cmd) else {
            return Err(nesquic_lut_adapters::LutError::ExecWithoutCommands.into());
        };
        return Ok(Box::new(nesquic_lut_adapters::ExecLut {
            server_cmd: server_cmd.clone(),
            client_cmd: client_cmd.clone(),
        }));
    }
    anyhow::ensure!(args.server_cmd.is_none(), "--server-cmd/--client-cmd only apply to --lut exec");
    Ok(find_lut(&args.lut)?)
}

/// Runs one repetition, with probes if a session is given (left clean for the next one) and
/// qlog snapshots if a recorder is given.
pub(crate) fn measure(
    spec: &RepetitionSpec<'_>,
    mut session: Option<&mut nesquic_ebpf::ProbeSession>,
    user: Option<&mut crate::backend::UserProbes>,
    recorder: Option<&mut record::Recorder>,
    repetition: u32,
) -> Result<RepetitionFigures> {
    let now = Instant::now();
    let mut observer = RunObserver {
        session: session.as_deref_mut(),
        user,
        recorder,
        pids: Vec::new(),
        started: now,
        last: now,
        repetition,
        io_settings: Vec::new(),
        io_layer_counters: Vec::new(),
        maps: nesquic_ebpf::profile::MapsCache::default(),
        duty: spec.duty.map(crate::duty::DutyCycle::new),
    };
    let outcome = run_repetition(spec, &mut observer);
    let io_settings = std::mem::take(&mut observer.io_settings);
    let io_layer_counters = std::mem::take(&mut observer.io_layer_counters);
    let pids = observer.pids.clone();
    let duty_fraction = observer.duty.as_mut().and_then(|d| d.finish());
    let kernel_metrics = match (&outcome, observer.session.as_deref()) {
        (Ok(_), Some(session)) => {
            let mut m = session.snapshot(&LUT_ROLES.map(Role::slot))?;
            if let Some(fraction) = duty_fraction {
                m.apply_duty(fraction);
            }
            Some(m)
        }
        _ => None,
    };
    let probes = match (&outcome, observer.user.as_deref()) {
        (Ok(_), Some(user)) => Some(user.merge_into(kernel_metrics)),
        _ => kernel_metrics,
    };
    let agents = observer.user.as_deref_mut().map(|u| u.finish_repetition()).unwrap_or_default();
    if let (Some(recorder), Some(session)) = (observer.recorder.as_deref_mut(), observer.session.as_deref_mut()) {
        recorder.datagram_events(&session.drain_datagram_events())?;
    }
    if let (Ok(o), Some(recorder)) = (&outcome, observer.recorder.as_deref_mut()) {
        for role in LUT_ROLES {
            let progress = (role == Role::Client).then_some(o.client_result.bytes);
            let event = record::snapshot_event(role, repetition, now, None, progress, probes.as_ref(), true);
            recorder.trace(role).event("nesquic:metrics_updated", &event)?;
        }
    }
    let maps = std::mem::take(&mut observer.maps.maps);
    let mut profile = None;
    if let Some(session) = session {
        if outcome.is_ok() && session.is_profiling() {
            profile = Some(crate::probes::build_profile(session, &maps, &LUT_ROLES.map(Role::slot))?);
        }
        session.untrack_all()?;
        session.reset()?;
        session.reset_profile()?;
    }
    let outcome = outcome?;
    let mut figures = RepetitionFigures::from(&outcome);
    figures.workload = crate::testcase::WorkloadFigures::of(&outcome.client_result, &spec.workload)?;
    figures.probes = probes;
    figures.agents = agents;
    figures.profile = profile;
    if let Some(p) = figures.profile.as_mut() {
        let (server_cpu, client_cpu) = (figures.server.cpu_total_s, figures.client.cpu_total_s);
        let (probes, counters) = (&figures.probes, &figures.io_layer_counters);
        let datagrams = |role: &str, direction: &str| {
            let probed = probes.as_ref().and_then(|m| nesquic_ebpf::packet_cost::datagrams_probed(m, role, direction));
            probed.map(|n| (n, "io probes".to_string())).or_else(|| {
                let (_, c) = counters.iter().find(|(r, _)| r.to_string() == role)?;
                let n = if direction == "send" { c.send.datagrams } else { c.recv.datagrams };
                Some((n, "the LUT's I/O counters".to_string()))
            })
        };
        let cpu = |role: &str| if role == "client" { client_cpu } else { server_cpu };
        nesquic_ebpf::packet_cost::attach(p, cpu, datagrams, figures.bytes);
    }
    figures.io_settings = io_settings;
    figures.io_layer_counters = io_layer_counters;
    figures.pids = pids;
    Ok(figures)
}

/// Registers each LUT process with the probes while it is held before `exec`, and writes
/// periodic qlog snapshots while the transfer runs.
struct RunObserver<'a> {
    session: Option<&'a mut nesquic_ebpf::ProbeSession>,
    user: Option<&'a mut crate::backend::UserProbes>,
    recorder: Option<&'a mut record::Recorder>,
    pids: Vec<(Role, i32)>,
    started: Instant,
    last: Instant,
    repetition: u32,
    io_settings: Vec<(Role, nesquic_lut_adapters::report::IoSettings)>,
    io_layer_counters: Vec<(Role, nesquic_io::Counters)>,
    duty: Option<crate::duty::DutyCycle>,
    /// Memory maps of the LUT processes, for symbolising profile samples after they exit.
    maps: nesquic_ebpf::profile::MapsCache,
}

impl ProcessObserver for RunObserver<'_> {
    fn environment(&mut self, role: Role) -> Result<Vec<(String, std::ffi::OsString)>> {
        match self.user.as_deref_mut() {
            Some(user) => user.environment(role),
            None => Ok(Vec::new()),
        }
    }

    fn spawned(&mut self, role: Role, pid: i32) -> Result<()> {
        self.pids.push((role, pid));
        let Some(session) = self.session.as_deref_mut() else { return Ok(()) };
        let pid = u32::try_from(pid).context("negative pid")?;
        session.track(pid, role.index()).with_context(|| format!("attach probes to the {role} (pid {pid})"))?;
        if let Some(duty) = self.duty.as_mut() {
            duty.begin(Instant::now());
        }
        Ok(())
    }

    fn lut_event(&mut self, role: Role, event: &nesquic_lut_adapters::report::LutEvent) -> Result<()> {
        use nesquic_lut_adapters::report::LutEvent;
        match event {
            LutEvent::Io(settings) => {
                if let Some(recorder) = self.recorder.as_deref_mut() {
                    let data = json!({"repetition": self.repetition, "settings": settings});
                    recorder.trace(role).event("nesquic:io_configured", &data)?;
                }
                self.io_settings.push((role, settings.clone()));
            }
            LutEvent::IoCounters(counters) => {
                if let Some(recorder) = self.recorder.as_deref_mut() {
                    let data = json!({"repetition": self.repetition, "send": counters.send, "recv": counters.recv});
                    recorder.trace(role).event("nesquic:io_layer_counters", &data)?;
                }
                self.io_layer_counters.push((role, *counters));
            }
            _ => {}
        }
        Ok(())
    }

    fn next_tick(&self) -> Option<Duration> {
        self.duty.as_ref().map(|d| d.next_toggle())
    }

    fn tick(&mut self, progress_bytes: u64) -> Result<()> {
        if let (Some(duty), Some(session)) = (self.duty.as_mut(), self.session.as_deref_mut()) {
            duty.tick(session).context("duty-cycle the function probes")?;
        }
        if self.session.as_deref().is_some_and(|s| s.is_profiling()) {
            self.maps.refresh(self.pids.iter().filter_map(|&(_, pid)| u32::try_from(pid).ok()));
        }
        let Some(recorder) = self.recorder.as_deref_mut() else { return Ok(()) };
        if self.last.elapsed() < recorder.interval {
            return Ok(());
        }
        self.last = Instant::now();
        let kernel = match self.session.as_deref_mut() {
            Some(s) => {
                recorder.datagram_events(&s.drain_datagram_events())?;
                Some(s.snapshot(&LUT_ROLES.map(Role::slot))?)
            }
            None => None,
        };
        // The agents' counters are shared memory: read live, no syscall in the LUT.
        let metrics = match self.user.as_deref() {
            Some(user) => Some(user.merge_into(kernel)),
            None => kernel,
        };
        for &(role, pid) in &self.pids {
            let progress = (role == Role::Client).then_some(progress_bytes);
            let event = record::snapshot_event(
                role,
                self.repetition,
                self.started,
                Some(pid),
                progress,
                metrics.as_ref(),
                false,
            );
            recorder.trace(role).event("nesquic:metrics_updated", &event)?;
        }
        Ok(())
    }
}

/// The `nesquic:run_started` data (the role is added per trace).
fn run_started(
    args: &RunArgs,
    testcase: &nesquic_testcases::Testcase,
    lut: &dyn nesquic_lut_adapters::Lut,
    binary: &std::path::Path,
    io: IoMode,
    session: Option<&nesquic_ebpf::ProbeSession>,
    user: Option<&crate::backend::UserProbes>,
) -> serde_json::Value {
    use nesquic_ebpf::metrics::{MECHANISM_INLINE_HOOK, MECHANISM_UPROBE};
    let describe = |f: &nesquic_ebpf::ResolvedFunction, by: &str| json!({"category": f.category, "name": f.name, "object": f.object, "address": f.address, "mechanism": by});
    let functions: Vec<serde_json::Value> = user
        .into_iter()
        .flat_map(|u| u.planned().map(|f| describe(f, MECHANISM_INLINE_HOOK)))
        .chain(session.into_iter().flat_map(|s| s.functions().iter().map(|f| describe(f, MECHANISM_UPROBE))))
        .collect();
    let io_mechanism =
        user.and_then(|u| u.io_mechanism()).map(String::from).or_else(|| session.and_then(|s| s.io_mechanism()));
    json!({
        "lut": {"name": lut.name(), "version": lut.version(), "crypto_backend": lut.crypto_backend(), "binary": binary},
        "lut_options": args.lut_opts,
        "testcase": {
            "name": testcase.name,
            "origin": testcase.origin,
            "workload": testcase.workload,
            "size_bytes": testcase.workload.total_bytes(),
            "repetitions": args.repeat,
            "timeout_s": args.timeout.as_secs_f64(),
        },
        "io": {"mode": io, "stack": io_stack(io)},
        "probes": {
            "requested": args.probe,
            "backend": args.probe_backend,
            "io_mechanism": io_mechanism,
            "function_mechanism": session.and_then(|s| s.function_mechanism()),
            "functions": functions,
            "kprobes_available": nesquic_ebpf::preflight::kprobes_available(),
        },
        "nesquic": {"version": env!("CARGO_PKG_VERSION"), "git_revision": env!("NESQUIC_GIT_REVISION")},
        "host": record::host(),
        "snapshot_interval_ms": args.interval.as_secs_f64() * 1e3,
    })
}

fn io_stack(io: IoMode) -> &'static str {
    match io {
        IoMode::Native => "the LUT's own UDP I/O (quinn: quinn-udp with GSO/GRO)",
        IoMode::Nesquic => "nesquic-io (GSO/GRO + sendmmsg/recvmmsg) via the translation layer",
        IoMode::Plain => "nesquic-io plain loop (one sendto/recvfrom per datagram) via the translation layer",
    }
}

/// The `nesquic:run_summary` data for one role: what the terminal printed.
fn run_summary_event(report: &RunReport, role: Role, merged: Option<&nesquic_ebpf::Metrics>) -> serde_json::Value {
    let s = &report.summary;
    let (cpu_s, cpu_pct) = match role {
        Role::Server => (&s.server_cpu_s, &s.server_cpu_pct),
        _ => (&s.client_cpu_s, &s.client_cpu_pct),
    };
    let probes = merged.map(|m| {
        let mut m = m.clone();
        m.roles.retain(|r| r.role == role.to_string());
        m
    });
    json!({
        "role": role.to_string(),
        "repetitions": s.repetitions,
        "size_bytes": report.size_bytes,
        "payload_verified": report.repetitions.iter().all(|r| r.payload_verified),
        "goodput_mbps": s.goodput_mbps,
        "transfer_s": s.transfer_s,
        "handshake_ms": s.handshake_ms,
        "testcase": report.testcase,
        "workload": s.workload,
        "cpu_s": cpu_s,
        "cpu_pct": cpu_pct,
        "per_repetition": report.repetitions.iter().map(|r| json!({
            "goodput_mbps": r.goodput_mbps,
            "transfer_s": r.transfer_s,
            "handshake_ms": r.handshake_ms,
            "workload": r.workload,
            "cpu_s": if role == Role::Server { r.server.cpu_total_s } else { r.client.cpu_total_s },
        })).collect::<Vec<_>>(),
        "probes": probes,
        "profile": report.repetitions.iter().filter_map(|r| r.profile.as_ref()).map(|p| {
            p.roles.iter().find(|x| x.role == role.to_string()).cloned()
        }).collect::<Vec<_>>(),
    })
}

/// Prints the probe tables (totals over repetitions) and returns the merged metrics.
fn print_probe_summary(report: &RunReport) -> Option<nesquic_ebpf::Metrics> {
    let all: Vec<nesquic_ebpf::Metrics> = report.repetitions.iter().filter_map(|r| r.probes.clone()).collect();
    let merged = nesquic_ebpf::Metrics::merge(&all)?;
    let mut cpu = std::collections::BTreeMap::new();
    cpu.insert("server".to_string(), report.repetitions.iter().map(|r| r.server.cpu_total_s).sum());
    cpu.insert("client".to_string(), report.repetitions.iter().map(|r| r.client.cpu_total_s).sum());
    let window = format!("totals over {} repetition(s); %CPU = time inside / the process's CPU time", all.len());
    crate::probes::print_summary(&merged, &cpu, &window);
    crate::probes::print_duty(&merged);
    Some(merged)
}

/// Where the LUT executables are: `--lut-dir`, else the directory of the running `nesquic`.
pub(crate) fn lut_dir(explicit: Option<&std::path::Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let exe = std::env::current_exe().context("locate the nesquic executable")?;
    Ok(exe.parent().map(PathBuf::from).unwrap_or_default())
}

/// SIGINT/SIGTERM set a flag; the run loop sees it, kills the LUT processes and unwinds, so
/// everything attached is dropped (and detached) on the way out.
pub(crate) fn install_signal_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag.clone()).context("install signal handler")?;
    }
    Ok(flag)
}

fn repetition_line(label: &str, r: &RepetitionFigures) -> String {
    let mut line = repetition_figures(label, r);
    for extra in r.workload.iter().flat_map(|w| w.describe()) {
        line.push_str(&format!("\n  {extra}"));
    }
    line
}

fn repetition_figures(label: &str, r: &RepetitionFigures) -> String {
    format!(
        "{label}: goodput {:.1} Mbit/s, transfer {:.3} s, handshake {:.2} ms, server CPU {:.3} s ({:.0}%), client CPU {:.3} s ({:.0}%)",
        r.goodput_mbps,
        r.transfer_s,
        r.handshake_ms,
        r.server.cpu_total_s,
        r.server.cpu_utilisation_pct,
        r.client.cpu_total_s,
        r.client.cpu_utilisation_pct
    )
}

fn print_summary(report: &RunReport) {
    let s = &report.summary;
    println!();
    println!(
        "{} {} — testcase {}: {} repetition(s) of {}, payload verified",
        report.lut.name,
        report.lut.version,
        report.testcase.name,
        s.repetitions,
        report.testcase.workload.describe()
    );
    println!("{:<22} {:>12} {:>12} {:>12}", "", "median", "min", "max");
    let row = |name: &str, sp: &Spread, digits: usize| {
        println!("{name:<22} {:>12.digits$} {:>12.digits$} {:>12.digits$}", sp.median, sp.min, sp.max);
    };
    row("goodput (Mbit/s)", &s.goodput_mbps, 1);
    row("transfer (s)", &s.transfer_s, 3);
    row("handshake (ms)", &s.handshake_ms, 2);
    row("server CPU (s)", &s.server_cpu_s, 3);
    row("server CPU (%)", &s.server_cpu_pct, 1);
    row("client CPU (s)", &s.client_cpu_s, 3);
    row("client CPU (%)", &s.client_cpu_pct, 1);
    for (label, spread, digits) in s.workload.iter().flat_map(|w| w.rows(report.testcase.workload.connections)) {
        row(label, &spread, digits);
    }
    println!("CPU % is user+sys over each process's lifetime, per core (100% = one core busy).");
    if let Some(first) = report.repetitions.first() {
        for (role, io) in &first.io_settings {
            println!(
                "{role} I/O: {}; GSO up to {} segments, GRO up to {}, sendmmsg {}, recvmmsg {}; SO_RCVBUF {} B, SO_SNDBUF {} B (granted)",
                io.stack,
                io.gso_max_segments,
                io.gro_segments,
                if io.send_mmsg { "yes" } else { "no" },
                if io.recv_mmsg { "yes" } else { "no" },
                io.recv_buffer,
                io.send_buffer
            );
        }
    }
    print_io_layer_counters(report);
    if let Some(link) = &report.link {
        let mechanisms: Vec<&str> =
            link["mechanisms"].as_array().into_iter().flatten().filter_map(|m| m.as_str()).collect();
        println!("link: {}", mechanisms.join("; "));
        if let Some(l) = link["observed_loss"].as_object() {
            println!(
                "link loss measured by the tc-bpf filters: {} of {} datagrams dropped ({:.2}%)",
                l["dropped"],
                l["seen"],
                l["pct"].as_f64().unwrap_or(0.0)
            );
        }
        println!("qdisc drops (tbf queue overflow): {}", link["qdisc_drops"]);
        if let Ok(stats) = serde_json::from_value::<crate::link::relay::RelayStats>(link["relay"].clone()) {
            for (name, d) in [("client->server", &stats.up), ("server->client", &stats.down)] {
                println!(
                    "relay {name}: {} datagrams held {:.2} ms on average (min {:.2}, max {:.2}; drawn {:.2}-{:.2}, relay late {:.3} ms on average, {:.2} at worst); {} ({:.2}%) left out of order, {} sent undelayed, {} send errors",
                    d.datagrams,
                    d.mean_held_ms(),
                    d.held_ns_min as f64 / 1e6,
                    d.held_ns_max as f64 / 1e6,
                    d.drawn_ns_min as f64 / 1e6,
                    d.drawn_ns_max as f64 / 1e6,
                    d.late_ns_sum as f64 / d.datagrams.max(1) as f64 / 1e6,
                    d.late_ns_max as f64 / 1e6,
                    d.reordered,
                    d.reordered_pct(),
                    d.undelayed,
                    d.send_errors
                );
            }
        }
    }
}

/// The I/O layer's own counts (median over repetitions) and, with `--probe io`, whether the
/// probes saw the same syscalls and datagrams in every repetition.
fn print_io_layer_counters(report: &RunReport) {
    for role in LUT_ROLES {
        let per_rep: Vec<(&nesquic_io::Counters, Option<&nesquic_ebpf::Metrics>)> = report
            .repetitions
            .iter()
            .filter_map(|r| r.io_layer_counters.iter().find(|(x, _)| *x == role).map(|(_, c)| (c, r.probes.as_ref())))
            .collect();
        if per_rep.is_empty() {
            continue;
        }
        let median = |f: &dyn Fn(&nesquic_io::Counters) -> u64| {
            let v: Vec<f64> = per_rep.iter().map(|(c, _)| f(c) as f64).collect();
            Spread::of(v).map_or(0.0, |s| s.median)
        };
        println!(
            "{role} I/O layer counters (median): send {:.0} syscalls / {:.0} datagrams, recv {:.0} syscalls / {:.0} datagrams",
            median(&|c| c.send.syscalls),
            median(&|c| c.send.datagrams),
            median(&|c| c.recv.syscalls),
            median(&|c| c.recv.datagrams)
        );
        let checked: Vec<Vec<String>> = per_rep
            .iter()
            // Only where I/O was probed: a profile-only session has no I/O figures to compare.
            .filter_map(|(c, m)| m.filter(|m| m.io_mechanism.is_some()).map(|m| probe_disagreements(role, c, m)))
            .collect();
        if checked.is_empty() {
            continue;
        }
        let by = per_rep.iter().find_map(|(_, m)| m.and_then(|m| m.io_mechanism.clone())).unwrap_or_default();
        match checked.iter().find(|d| !d.is_empty()) {
            None => println!("  I/O probes ({by}) agree exactly in all {} repetition(s)", checked.len()),
            Some(d) => println!("  I/O probes ({by}) DISAGREE: {}", d.join("; ")),
        }
    }
}

/// Where the probes' per-direction totals differ from the I/O layer's counters.
pub(crate) fn probe_disagreements(
    role: Role,
    layer: &nesquic_io::Counters,
    probes: &nesquic_ebpf::Metrics,
) -> Vec<String> {
    let Some(m) = probes.roles.iter().find(|r| r.role == role.name()) else {
        return vec!["no probe figures for this role".into()];
    };
    let mut out = Vec::new();
    for (direction, own) in [("send", &layer.send), ("recv", &layer.recv)] {
        let calls: u64 = m.io.iter().filter(|s| s.direction == direction).map(|s| s.timing.calls).sum();
        let datagrams: u64 = m.io.iter().filter(|s| s.direction == direction).map(|s| s.datagrams).sum();
        let bytes: u64 = m.io.iter().filter(|s| s.direction == direction).map(|s| s.bytes).sum();
        for (what, layer_value, probe_value) in
            [("syscalls", own.syscalls, calls), ("datagrams", own.datagrams, datagrams), ("bytes", own.bytes, bytes)]
        {
            if layer_value != probe_value {
                out.push(format!("{direction} {what}: I/O layer {layer_value}, probes {probe_value}"));
            }
        }
    }
    out
}
