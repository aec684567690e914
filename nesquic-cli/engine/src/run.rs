//! One `nesquic run`, from a resolved plan to its record: probes opened (and calibrated when
//! they time anything), the link built, certificates made, every repetition measured and
//! recorded in the traces, the record assembled, traces finished (the library's own qlog merged)
//! and summary.json written. What to print is the caller's, through [`RunReporter`].

pub mod pair;
mod record_file;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::ValueEnum;
use nesquic_ebpf::Metrics;
use nesquic_link::{Conditions, LinkKind, Topology};
use nesquic_lut_adapters::{tls, IoMode, Lut};
use nesquic_protocol::role::{Role, LUT_ROLES};
use nesquic_record::calibration::Calibration;
use nesquic_record::events::{
    Event, HostInfo, IoPath, LinkConfigured, LutStarted, ProbedFunction, ProbesStarted, RepetitionSummary, RunStarted,
    RunSummary, TestcaseStarted,
};
use nesquic_record::figures::{RepetitionFigures, Summary};
use nesquic_record::recorder::{self as record, Recorder};
use nesquic_record::run::{
    DrivenBy, FailedRepetition, LinkRecord, LutInfo, LutSource, ObservedLoss, QdiscDropsRecord, RunRecord,
};
use nesquic_record::workload::TestcaseInfo;
use nesquic_testcases::Testcase;

use crate::backend::{BackendChoice, KernelNeeds, Probes};
use crate::duty::DutySpec;
use crate::measure::measure;
use crate::repetition::RepetitionSpec;
pub use crate::tool::ToolInfo;
use crate::EngineError;
use record_file::{summary_of, RecordFile};

type Result<T> = std::result::Result<T, EngineError>;

/// Everything one run needs, resolved and checked: no flags, no text to parse.
pub struct RunPlan {
    /// The library under test (the server's, and the client's unless `client` is set).
    pub lut: Box<dyn Lut>,
    /// A pair (docs/pairs.md): the client is this other LUT, with its own executable, I/O path
    /// and settings; `lut`, `binary`, `io` and `lut_options` are then the server's.
    pub client: Option<pair::ClientSide>,
    /// With a build from a local checkout: where from.
    pub lut_source: Option<LutSource>,
    /// The executable probes attach to.
    pub binary: PathBuf,
    /// The I/O path.
    pub io: IoMode,
    /// The scenario, overrides applied.
    pub testcase: Testcase,
    /// The LUT's settings, checked against its descriptor.
    pub lut_options: Vec<nesquic_lut_adapters::LutOpt>,
    /// The probe list, if any.
    pub probe: Option<String>,
    /// Who measures the probes.
    pub probe_backend: BackendChoice,
    /// Duty-cycled function probes.
    pub duty: Option<DutySpec>,
    /// Per-message datagram events in the traces.
    pub qlog_datagrams: bool,
    /// Merge the library's own qlog.
    pub lut_qlog: bool,
    /// Also write a copy of each trace that qvis draws (`<out>/qvis/<role>.sqlog`).
    pub qvis: bool,
    /// The network.
    pub link: LinkKind,
    /// Its conditions.
    pub conditions: Conditions,
    /// Repetitions (at least one).
    pub repeat: u32,
    /// Per repetition.
    pub timeout: Duration,
    /// Period of the traces' snapshots.
    pub interval: Duration,
    /// The run directory (default: a new one under ./nesquic-runs).
    pub out: Option<PathBuf>,
    /// Also write the record here.
    pub json: Option<PathBuf>,
    /// The tool.
    pub tool: ToolInfo,
    /// Roles on other hosts, over SSH (docs/remote.md).
    pub remote: crate::remote::RemoteRoles,
    /// `--pin`: each side on a CPU of its own.
    pub pin: Option<crate::pin::PinnedCpus>,
}

/// What the caller shows while a run goes on. Every method has a silent default.
pub trait RunReporter {
    /// The probes are open (before calibration).
    fn probes_opened(&mut self, _probes: &Probes) {}
    /// Timed probes were calibrated.
    fn calibrated(&mut self, _calibration: &Calibration) {}
    /// The link is up.
    fn link_ready(&mut self, _topology: &Topology) {}
    /// Every remote host answered: each role's host, its facts and clock offset.
    fn hosts_ready(&mut self, _hosts: &[(Role, HostInfo)]) {}
    /// Repetitions start.
    fn starting(&mut self, _plan: &RunPlan) {}
    /// One repetition finished.
    fn repetition(&mut self, _label: &str, _figures: &RepetitionFigures) {}
    /// One repetition failed and the runs go on without it (`--overhead`'s rounds).
    fn repetition_failed(&mut self, _label: &str, _error: &str) {}
    /// Every repetition finished; `merged` are the probes' totals over all of them.
    fn finished(&mut self, _record: &RunRecord, _merged: Option<&Metrics>) {}
    /// The library's own qlog events were merged into a trace.
    fn lut_qlog_merged(&mut self, _events: usize, _trace: &Path) {}
    /// A qvis copy of a trace was written.
    fn qvis_written(&mut self, _copy: &nesquic_record::qlog::qvis::QvisCopy, _path: &Path) {}
    /// The run was written.
    fn written(&mut self, _out_dir: &Path, _json: Option<&Path>) {}
}

/// What every repetition of a run shares: scratch space, the certificates, the link.
pub(crate) struct Stage {
    /// Scratch space (certificates, the agent's plan), removed on drop.
    pub workdir: tempfile::TempDir,
    /// What starts each LUT process (the executable, or `exec`'s launcher); the server's in a pair.
    pub launcher: PathBuf,
    /// What starts the client in a pair.
    pub client_launcher: PathBuf,
    /// What the kernel must measure in spite of the backend choice.
    pub needs: KernelNeeds,
    /// `--link veth`: the namespaces and their link, removed on drop.
    pub topology: Option<Topology>,
    /// The run's certificate and key.
    pub certs: tls::CertFiles,
    /// Roles on other hosts: reached, checked, their facts and clocks.
    pub remote: Option<crate::remote::RemoteStage>,
    /// A stack's own endpoint: the mount points its fixed paths needed, removed on drop (its
    /// files are in `workdir`).
    pub _endpoint_mounts: Option<nesquic_lut_adapters::lut::MountPoints>,
}

impl Stage {
    /// Builds the link (reported) and the certificates.
    pub(crate) fn new(plan: &RunPlan, reporter: &mut dyn RunReporter) -> Result<Self> {
        // The run directory does not exist yet: a verifier log goes next to it.
        let runs = plan.out.as_deref().and_then(Path::parent).unwrap_or(Path::new("nesquic-runs"));
        nesquic_ebpf::verifier::set_log_dir(runs);
        let workdir = crate::leftovers::scratch_dir("run").map_err(EngineError::os("create a temporary directory"))?;
        let launcher = plan.lut.launcher(&plan.binary);
        let client_launcher = plan.client_lut().launcher(plan.client_binary());
        if let Some(pins) = &plan.pin {
            crate::pin::check(pins)?;
        }
        let needs = KernelNeeds {
            duty: plan.duty.is_some(),
            datagram_events: plan.qlog_datagrams,
            launched_by_shell: launcher != plan.binary || client_launcher != plan.client_binary(),
            ..KernelNeeds::default()
        };
        let topology = match plan.link {
            LinkKind::Veth => Some(Topology::create(&plan.conditions, &crate::kernel::TcFilters)?),
            LinkKind::Loopback if plan.conditions.any() => {
                return Err(EngineError::msg(
                    "--rate/--loss/--delay/--jitter/--reorder apply to a link: add --link veth",
                ))
            }
            LinkKind::Loopback => None,
        };
        if let Some(t) = &topology {
            reporter.link_ready(t);
        }
        let certs = tls::generate(workdir.path())?;
        let endpoint = match plan.lut.endpoint() {
            Some(e) => {
                check_endpoint(plan)?;
                Some(e.prepare(&certs, plan.testcase.workload.size)?)
            }
            None => None,
        };
        let remote = if plan.remote.any() {
            check_remote(plan, &launcher)?;
            let inputs = crate::remote::StageInputs {
                lut: pair::remote_lut(plan)?,
                certs: &certs,
                probe: plan.probe.clone(),
                probe_backend: plan.probe_backend,
                tool: &plan.tool,
            };
            let stage = crate::remote::RemoteStage::connect(&plan.remote, inputs)?;
            reporter.hosts_ready(&stage.hosts);
            Some(stage)
        } else {
            None
        };
        Ok(Self { workdir, launcher, client_launcher, needs, topology, certs, remote, _endpoint_mounts: endpoint })
    }

    /// The repetition every one of the run's starts from.
    pub(crate) fn spec<'a>(&'a self, plan: &'a RunPlan, interrupted: &'a AtomicBool) -> RepetitionSpec<'a> {
        RepetitionSpec {
            lut: plan.lut.as_ref(),
            binary: &self.launcher,
            io: plan.io,
            workload: plan.testcase.workload,
            certs: &self.certs,
            timeout: plan.timeout,
            interrupted,
            progress_after: Duration::from_secs(2),
            label: String::new(),
            lut_qlog: None,
            options: &plan.lut_options,
            duty: plan.duty,
            topology: self.topology.as_ref(),
            remote: self.remote.as_ref(),
            pin: plan.pin,
            client: plan.client.as_ref().map(|c| crate::repetition::ClientSideSpec {
                lut: c.lut.as_ref(),
                binary: &self.client_launcher,
                io: c.io,
                options: &c.lut_options,
            }),
        }
    }
}

/// What a stack's own endpoint cannot do yet, refused before anything starts: its server and
/// client are one recipe's, on this host's loopback, one file over one connection.
fn check_endpoint(plan: &RunPlan) -> Result<()> {
    let refuse = |what: &str| Err(EngineError::msg(format!("{}'s own endpoint: {what}", plan.lut.name())));
    if plan.client.as_ref().is_some_and(|c| c.lut.endpoint().is_none() || c.lut.name() != plan.lut.name()) {
        return refuse("its server and client run together (no pairs with other LUTs yet)");
    }
    if plan.link != LinkKind::Loopback {
        return refuse("loopback only (--link veth is not supported yet)");
    }
    if plan.remote.any() {
        return refuse("both sides run here (--server-host/--client-host are not supported)");
    }
    if !plan.testcase.workload.is_single() {
        return refuse("one connection with one stream (testcase bulk)");
    }
    Ok(())
}

/// What remote roles cannot do yet, refused before anything starts.
fn check_remote(plan: &RunPlan, launcher: &Path) -> Result<()> {
    let refuse =
        |what: &str| Err(EngineError::msg(format!("{what} cannot be combined with --server-host/--client-host")));
    if plan.link != LinkKind::Loopback {
        return refuse("--link (the hosts' own network is the link)");
    }
    let client_source = plan.client.as_ref().is_some_and(|c| c.lut_source.is_some());
    if launcher != plan.binary || plan.lut_source.is_some() || client_source {
        return refuse("--lut exec and --lut-path (the remote host runs the LUTs built beside its nesquic)");
    }
    if plan.qlog_datagrams {
        return refuse("--qlog-datagrams (its events are the remote kernel's)");
    }
    if plan.duty.is_some() {
        return refuse("--duty");
    }
    if plan.pin.is_some() {
        return refuse("--pin (it places processes on this machine's CPUs)");
    }
    Ok(())
}

/// Runs `plan`; stops early (killing the LUT processes) once `interrupted` is set.
pub fn execute(plan: &RunPlan, interrupted: &AtomicBool, reporter: &mut dyn RunReporter) -> Result<RunRecord> {
    // Refused before anything is built, unless allowed; then recorded.
    let faults = crate::process::faults::injected()?;
    let lut = plan.lut.as_ref();
    let workload = plan.testcase.workload;
    let probe_plan = match &plan.probe {
        Some(list) => Some(pair::probe_plan(plan, list)?),
        None => None,
    };
    let stage = Stage::new(plan, reporter)?;
    let probes = match &probe_plan {
        Some(p) => {
            Some(Probes::open(p, plan.probe_backend, pair::agent_binary(plan), stage.workdir.path(), stage.needs)?)
        }
        None => None,
    };
    if let Some(p) = &probes {
        reporter.probes_opened(p);
    }
    // Timed probes: measure what they add on this machine first, to subtract it (docs/probes.md).
    let calibration = match &probes {
        Some(p) => crate::calibrate::for_probes(p, interrupted)?,
        None => None,
    };
    if let Some(c) = &calibration {
        reporter.calibrated(c);
    }
    let (mut session, mut user, mut user_profile) = match probes {
        Some(p) => (p.kernel, p.user, p.user_profile),
        None => (None, None, None),
    };
    if plan.qlog_datagrams {
        if !probe_plan.as_ref().is_some_and(|p| p.request.io) {
            return Err(EngineError::msg("--qlog-datagrams records what the io probes see: add --probe io"));
        }
        if let Some(s) = session.as_mut() {
            s.set_datagram_events(true)?;
        }
    }
    let base = stage.spec(plan, interrupted);
    let topology = stage.topology.as_ref();

    reporter.starting(plan);
    let out_dir = match &plan.out {
        Some(dir) => dir.clone(),
        None => record::default_out_dir(&plan.dir_name())?,
    };
    record::prepare_out_dir(&out_dir)?;
    let title = format!("nesquic {} {} {} {}", plan.label(), lut.version(), plan.testcase.name, workload.describe());
    let mut recorder = Recorder::create(&out_dir, &title, plan.interval)?;
    let started = run_started(plan, session.as_ref(), user.as_ref());
    if let Some(t) = topology {
        let link = LinkConfigured {
            link: "veth".into(),
            server: t.server.clone(),
            client: t.client.clone(),
            mechanisms: t.applied.mechanisms.clone(),
        };
        recorder.both(|_| Event::LinkConfigured(link.clone()))?;
    }
    let host_of = |role: Role| stage.remote.as_ref().and_then(|r| r.host(role)).cloned();
    recorder.both(|role| {
        let host = host_of(role).unwrap_or_else(|| started.host.clone());
        Event::RunStarted(Box::new(pair::run_started_for(plan, RunStarted { role, host, ..started.clone() })))
    })?;

    let side_objects = pair::SideObjects::of(plan, user.is_some())?;
    let file = RecordFile::new(&out_dir, plan.json.as_deref());
    let mut report = RunRecord {
        schema_version: nesquic_record::SCHEMA_VERSION,
        nesquic_version: plan.tool.version.into(),
        lut: LutInfo {
            name: lut.name().into(),
            version: lut.version(),
            crypto_backend: lut.descriptor().crypto_backend.into(),
            io: plan.io,
            binary: plan.binary.clone(),
            source: plan.lut_source.clone(),
            driven_by: DrivenBy::of(lut.endpoint().map(|e| e.recipe())),
        },
        client_side: pair::client_record(plan),
        testcase: TestcaseInfo::from(&plan.testcase),
        lut_options: plan.lut_options.iter().map(ToString::to_string).collect(),
        size_bytes: workload.total_bytes(),
        repetitions: Vec::new(),
        summary: None,
        failed_repetitions: Vec::new(),
        unfinished: Vec::new(),
        in_progress: true,
        calibration,
        link: None,
        profile_stacks: Vec::new(),
        hosts: stage.remote.as_ref().map(|r| r.hosts.clone()).unwrap_or_default(),
        pinned_cpus: plan.pin,
        faults,
        crypto_limit: None,
        copy_limit: None,
        findings: Vec::new(),
        run_dir: Some(out_dir.clone()),
    };
    // Written before the first repetition too: an out directory that cannot take it fails now,
    // not after the measuring.
    file.save_progress(&report, "before the first repetition", 0)?;
    let mut failure = None;
    for i in 1..=plan.repeat {
        let label = format!("rep {i}/{}", plan.repeat);
        let spec =
            RepetitionSpec { label: label.clone(), lut_qlog: plan.lut_qlog.then_some((out_dir.as_path(), i)), ..base };
        let sampling = crate::kernel::as_probes(session.as_mut(), user_profile.as_mut());
        let measured = measure(&spec, sampling, user.as_mut(), Some(&mut recorder), i).and_then(|mut figures| {
            if let (Some(c), Some(m)) = (&report.calibration, figures.probes.as_mut()) {
                c.compensate_roles(m, |role| plan.remote.target(role).is_none());
            }
            if let Some(sides) = &side_objects {
                sides.keep_own(&mut figures.agents);
            }
            // The record names the LUT's qlogs relative to the run directory, and only files in
            // it: the path comes from the LUT (or a remote host), which must not make root read
            // others.
            for (_, path, _) in &mut figures.lut_qlogs {
                *path = nesquic_record::files::relative_to(&out_dir, path)?;
            }
            Ok(figures)
        });
        let figures = match measured {
            Ok(figures) => figures,
            Err(e) => {
                // The run stops at the first failure: the LUT or the machine is in no state to
                // measure the next one.
                report.failed_repetitions.push(FailedRepetition { repetition: i, error: e.chain() });
                failure = Some((label, e));
                break;
            }
        };
        reporter.repetition(&label, &figures);
        report.repetitions.push(figures);
        report.summary = summary_of(&report);
        file.save_progress(&report, &format!("after {label}"), i as usize - 1)?;
        // The traces too end with whole records after each repetition; a failure to write them
        // ends the run like a failed record write.
        recorder.flush().map_err(|e| EngineError::Step {
            what: format!(
                "the qlog traces could not be written after {label} ({}); the run stops",
                file.kept(i as usize)
            ),
            source: Box::new(e),
        })?;
    }
    let measured = report.repetitions.len();
    report.summary = summary_of(&report);
    // What goes wrong from here on is recorded, and the other steps still run.
    let mut unfinished: Vec<EngineError> = Vec::new();
    let mut step = |what: &str, result: std::result::Result<(), EngineError>, report: &mut RunRecord| {
        if let Err(e) = result {
            let e = EngineError::Step { what: what.into(), source: Box::new(e) };
            report.unfinished.push(e.chain());
            unfinished.push(e);
        }
    };
    match nesquic_record::stacks::write(&out_dir, &report.repetitions) {
        Ok(stacks) => report.profile_stacks = stacks,
        Err(e) => step("write the profile's folded stacks", Err(e.into()), &mut report),
    }
    report.link = topology.map(|t| LinkRecord {
        kind: "veth".into(),
        mechanisms: t.applied.mechanisms.clone(),
        conditions: plan.conditions.clone(),
        observed_loss: t.observed_loss().map(|(dropped, seen)| ObservedLoss {
            packets: t.observed_packet_loss(),
            ..ObservedLoss::new(dropped, seen)
        }),
        qdisc_drops: match t.qdisc_drops() {
            Ok(qdiscs) => QdiscDropsRecord::PerQdisc(qdiscs),
            Err(e) => QdiscDropsRecord::NotMeasured { not_measured: e.chain() },
        },
        relay: t.relay_stats(),
    });
    if measured > 0 {
        report.crypto_limit = crate::crypto_limit::measure(&report.repetitions);
        report.copy_limit = crate::copy_limit::measure(&report.repetitions);
        report.findings = nesquic_record::findings::find(&report);
    }
    let all: Vec<Metrics> = report.repetitions.iter().filter_map(|r| r.probes.clone()).collect();
    let merged = Metrics::merge(&all);
    // The repetitions are over: what follows is written in the last write only.
    report.in_progress = false;
    if measured > 0 || failure.is_none() {
        reporter.finished(&report, merged.as_ref());
    }
    // Probes detach here, before anything is written.
    drop(session);
    if let Some(s) = &report.summary {
        let summary = recorder
            .both(|role| Event::RunSummary(Box::new(run_summary_event(&report, s, role, merged.as_ref()))))
            .map_err(EngineError::from);
        step("write nesquic:run_summary to the traces", summary, &mut report);
    }
    let epoch = recorder.epoch();
    let unsorted = recorder.unsorted;
    match recorder.finish() {
        Ok(traces) => {
            let traces = finish_traces(plan, &report, &traces, epoch, unsorted, &out_dir, reporter);
            for (what, e) in traces {
                step(&what, Err(e), &mut report);
            }
        }
        Err(e) => step("finish the qlog traces", Err(e.into()), &mut report),
    }
    if let Err(e) = file.save(&report) {
        let what = match &failure {
            Some((label, _)) => format!(
                "{} {label} failed, and the record of it could not be written ({})",
                plan.label(),
                file.kept(measured)
            ),
            None => format!("the run record could not be written at the end of the run ({})", file.kept(measured)),
        };
        return Err(EngineError::Step { what, source: Box::new(e) });
    }
    reporter.written(&out_dir, plan.json.as_deref());
    let record = Box::new(report.clone());
    let summary = file.summary.display();
    if let Some((label, e)) = failure {
        let what = format!(
            "{} {label} failed ({measured} repetition(s) measured before it and this failure are recorded in {summary})",
            plan.label()
        );
        return Err(EngineError::Recorded { what, record, source: Box::new(e) });
    }
    if let Some(e) = unfinished.into_iter().next() {
        let what = format!(
            "the run's {measured} repetition(s) are recorded in {summary}, but a step after them failed (recorded \
             there too)"
        );
        return Err(EngineError::Recorded { what, record, source: Box::new(e) });
    }
    Ok(report)
}

/// The library's qlog merged into the traces (sorting per-message events too), and the qvis
/// copies: each step that failed, with what it was.
fn finish_traces(
    plan: &RunPlan,
    report: &RunRecord,
    traces: &[PathBuf],
    epoch: std::time::SystemTime,
    unsorted: bool,
    out_dir: &Path,
    reporter: &mut dyn RunReporter,
) -> Vec<(String, EngineError)> {
    let mut failed = Vec::new();
    let lut_files: Vec<_> = report.repetitions.iter().flat_map(|r| r.lut_qlogs.iter().cloned()).collect();
    if plan.lut_qlog && lut_files.is_empty() && !report.repetitions.is_empty() {
        let e = EngineError::msg(format!("{} wrote no qlog", plan.lut.name()));
        failed.push(("--lut-qlog".to_string(), e));
    }
    // Merging the library's events and sorting per-message events are one rewrite of each trace.
    if unsorted || (plan.lut_qlog && !lut_files.is_empty()) {
        for (trace, role) in traces.iter().zip(LUT_ROLES) {
            let mine: Vec<_> =
                lut_files.iter().filter(|(r, _, _)| *r == role).map(|(_, p, t)| (p.clone(), *t)).collect();
            match record::merge_lut_qlog(trace, epoch, out_dir, &mine) {
                Ok(merged) if plan.lut_qlog => reporter.lut_qlog_merged(merged, trace),
                Ok(_) => {}
                Err(e) => failed.push((format!("merge the {role}'s qlog into {}", trace.display()), e.into())),
            }
        }
    }
    if plan.qvis {
        let dir = out_dir.join("qvis");
        if let Err(e) = nesquic_record::files::create_dir(&dir) {
            failed.push(("--qlog-compat qvis".into(), EngineError::os(format!("create {}", dir.display()))(e)));
            return failed;
        }
        for (trace, role) in traces.iter().zip(LUT_ROLES) {
            let path = dir.join(format!("{role}.sqlog"));
            match nesquic_record::qlog::qvis::write(trace, &path) {
                Ok(copy) => reporter.qvis_written(&copy, &path),
                Err(e) => failed.push((format!("write the qvis copy {}", path.display()), e.into())),
            }
        }
    }
    failed
}

/// The `nesquic:run_started` data (the role is set per trace).
fn run_started(
    plan: &RunPlan,
    session: Option<&nesquic_ebpf::ProbeSession>,
    user: Option<&crate::backend::UserProbes>,
) -> RunStarted {
    let (lut, testcase, io) = (plan.lut.as_ref(), &plan.testcase, plan.io);
    use nesquic_ebpf::metrics::Mechanism;
    let describe = |f: &nesquic_ebpf::ResolvedFunction, by: Mechanism| ProbedFunction {
        category: f.category.clone(),
        name: f.name.clone(),
        object: f.object.clone(),
        address: f.address,
        mechanism: by,
    };
    let functions = user
        .into_iter()
        .flat_map(|u| u.planned().map(|f| describe(f, Mechanism::InlineHook)))
        .chain(session.into_iter().flat_map(|s| s.functions().iter().map(|f| describe(f, Mechanism::Uprobe))))
        .collect();
    let io_mechanism =
        user.and_then(|u| u.io_mechanism()).map(String::from).or_else(|| session.and_then(|s| s.io_mechanism()));
    RunStarted {
        role: Role::Server,
        lut: LutStarted {
            name: lut.name().into(),
            version: lut.version(),
            crypto_backend: lut.descriptor().crypto_backend.into(),
            binary: plan.binary.clone(),
            source: plan.lut_source.clone(),
        },
        lut_options: plan.lut_options.iter().map(ToString::to_string).collect(),
        testcase: TestcaseStarted {
            info: TestcaseInfo::from(testcase),
            size_bytes: testcase.workload.total_bytes(),
            repetitions: plan.repeat,
            timeout_s: plan.timeout.as_secs_f64(),
        },
        io: IoPath { mode: io, stack: io_stack(io).into() },
        probes: ProbesStarted {
            requested: plan.probe.clone(),
            backend: plan.probe_backend.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default(),
            io_mechanism,
            function_mechanism: session.and_then(|s| s.function_mechanism()),
            functions,
            kprobes_available: nesquic_ebpf::preflight::kprobes_available(),
        },
        nesquic: nesquic_record::events::ToolInfo {
            version: plan.tool.version.into(),
            git_revision: plan.tool.git_revision.into(),
        },
        host: HostInfo::here(),
        snapshot_interval_ms: plan.interval.as_secs_f64() * 1e3,
    }
}

pub(crate) fn io_stack(io: IoMode) -> &'static str {
    match io {
        IoMode::Native => "the LUT's own UDP I/O (quinn: quinn-udp with GSO/GRO)",
        IoMode::Nesquic => "nesquic-io (GSO/GRO + sendmmsg/recvmmsg) via the translation layer",
        IoMode::Plain => "nesquic-io plain loop (one sendto/recvfrom per datagram) via the translation layer",
    }
}

/// The `nesquic:run_summary` data for one role: what the terminal printed.
fn run_summary_event(
    report: &RunRecord,
    s: &Summary,
    role: Role,
    merged: Option<&nesquic_ebpf::Metrics>,
) -> RunSummary {
    let (cpu_s, cpu_pct) = match role {
        Role::Server => (s.server_cpu_s, s.server_cpu_pct),
        _ => (s.client_cpu_s, s.client_cpu_pct),
    };
    let probes = merged.map(|m| {
        let mut m = m.clone();
        m.roles.retain(|r| r.role == role);
        m
    });
    RunSummary {
        role,
        repetitions: s.repetitions,
        failed_repetitions: report.failed_repetitions.clone(),
        size_bytes: report.size_bytes,
        payload_verified: report.repetitions.iter().all(|r| r.payload_verified),
        goodput_mbps: s.goodput_mbps,
        transfer_s: s.transfer_s,
        handshake_ms: s.handshake_ms,
        testcase: report.testcase.clone(),
        workload: s.workload.clone(),
        cpu_s,
        cpu_pct,
        per_repetition: report
            .repetitions
            .iter()
            .map(|r| RepetitionSummary {
                goodput_mbps: r.goodput_mbps,
                transfer_s: r.transfer_s,
                handshake_ms: r.handshake_ms,
                workload: r.workload.clone(),
                cpu_s: if role == Role::Server { r.server.cpu_total_s } else { r.client.cpu_total_s },
            })
            .collect(),
        probes,
        profile: report
            .repetitions
            .iter()
            .filter_map(|r| r.profile.as_ref())
            .map(|p| p.roles.iter().find(|x| x.role == role).cloned())
            .collect(),
    }
}
