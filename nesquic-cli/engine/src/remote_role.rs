//! `nesquic remote-role`: the remote side of a session. It answers the hello and clock pings,
//! then runs one role's LUT under this host's probes, relaying the LUT's report lines, its exit
//! and the probes' totals. It ends, killing its LUT, when its input closes (ssh went away), on
//! SIGHUP/SIGTERM/SIGINT, or when its parent dies.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nesquic_lut_adapters::lut::{ClientSpec, ServerSpec};
use nesquic_lut_adapters::report::LutEvent;
use nesquic_lut_adapters::tls::CertFiles;
use nesquic_protocol::Role;

use crate::backend::{KernelNeeds, Probes};
use crate::error::Cause;
use crate::lifecycle::{start, Launch, ProbeTracker, ProcessObserver, Supervisor};
use crate::plan::ProbePlan;
use crate::remote::{facts, version_of};
use crate::tool::ToolInfo;
use crate::wire::{self, RemoteExit, Reply, Request, RolePlan, RoleTotals};
use crate::EngineError;

/// How long the LUT's last report lines may trail its exit.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// Serves one session on stdin/stdout.
pub fn serve(tool: &ToolInfo) -> Result<(), EngineError> {
    // Our parent is the ssh session: if it goes, so do we (and our LUT, through its own
    // PR_SET_PDEATHSIG).
    // SAFETY: plain prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    // SIGHUP (the SSH channel closing) is among the stop signals.
    let stop = crate::process::install_signal_flag()?;
    let requests = read_requests(stop.clone());
    let mut out = std::io::stdout().lock();
    let send = |out: &mut std::io::StdoutLock<'_>, reply: &Reply| {
        wire::send(out, reply).map_err(|e| EngineError::msg(format!("write to the SSH channel: {e}")))
    };
    while let Ok(request) = requests.recv() {
        match request {
            Request::Hello { version, peer, .. } => {
                let host = facts::here(peer);
                let mine = version_of(tool);
                send(&mut out, &Reply::Hello { wire: wire::WIRE_VERSION, version: mine.clone(), host })?;
                if version != mine {
                    // The local side reports the mismatch; nothing more to do here.
                    return Ok(());
                }
            }
            Request::Clock { sent_ns } => send(&mut out, &Reply::Clock { sent_ns, remote_ns: wire::now_ns() })?,
            Request::Run(plan) => {
                return match run_role(&plan, &stop, &mut out) {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        let _ = send(&mut out, &Reply::Error { message: e.to_string() });
                        Err(e)
                    }
                };
            }
        }
    }
    Ok(())
}

/// Parses stdin on a thread; end of input (or a line that is not a request) sets `stop`.
fn read_requests(stop: Arc<AtomicBool>) -> std::sync::mpsc::Receiver<Request> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            match serde_json::from_str::<Request>(&line) {
                Ok(r) => {
                    if tx.send(r).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    eprintln!("nesquic remote-role: not a request ({e}): {line}");
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    rx
}

/// Runs the role's LUT once, under this host's probes.
fn run_role(plan: &RolePlan, stop: &AtomicBool, out: &mut impl Write) -> Result<(), EngineError> {
    let lut = nesquic_lut_adapters::lut::find_lut(&plan.lut)?;
    // The plan names a LUT, not a source: this host runs its own installed build of it (a
    // `--lut-path` build exists on the local host only).
    let binary = lut.binary_path(&crate::process::lut_dir(None)?)?;
    let workdir = crate::leftovers::scratch_dir("remote").map_err(EngineError::os("create a temporary directory"))?;
    let certs = CertFiles { cert: workdir.path().join("cert.der"), key: workdir.path().join("key.der") };
    for (path, bytes) in [(&certs.cert, &plan.cert), (&certs.key, &plan.key)] {
        std::fs::write(path, bytes).map_err(EngineError::os(format!("write {}", path.display())))?;
    }
    let qlog = plan.lut_qlog.then(|| workdir.path().join(format!("lut-{}.sqlog", plan.role)));
    let args = match plan.role {
        Role::Server => lut.server_args(&ServerSpec {
            listen: plan.addr,
            workload: plan.workload,
            certs: &certs,
            io: plan.io,
            qlog: qlog.as_deref(),
            options: &plan.options,
        }),
        _ => lut.client_args(&ClientSpec {
            connect: plan.addr,
            certs: &certs,
            workload: plan.workload,
            io: plan.io,
            qlog: qlog.as_deref(),
            options: &plan.options,
        }),
    };
    let probe_plan = match &plan.probe {
        Some(list) => Some(ProbePlan::new(list, &binary)?),
        None => None,
    };
    let probes = match &probe_plan {
        Some(p) => Some(Probes::open(p, plan.probe_backend, &binary, workdir.path(), KernelNeeds::default())?),
        None => None,
    };
    // Timed probes are compensated with what they add on this host, not on the local one.
    let calibration = match &probes {
        Some(p) => crate::calibrate::for_probes(p, stop)?,
        None => None,
    };
    let (mut session, mut user, mut user_profile) =
        probes.map_or((None, None, None), |p| (p.kernel, p.user, p.user_profile));
    let kernel = crate::kernel::as_probes(session.as_mut(), user_profile.as_mut());
    let mut relay = Relay { probes: ProbeTracker::new(kernel, user.as_mut(), None), out, qlog: None };
    let (tx, rx) = channel();
    let mut watch = Supervisor::new(rx, plan.timeout, stop, "the remote LUT process");
    let launch =
        Launch { role: plan.role, binary: &binary, args: &args, netns: None, inherit_output: false, cpu: None };
    let mut process = start(&launch, tx, &mut relay)?;
    let exit = watch.until_exit(&mut process, &mut relay)?;
    // Lines the LUT wrote just before exiting may trail its exit through the reader thread.
    let until = Instant::now() + OUTPUT_GRACE;
    loop {
        let finished = process.stdout_finished();
        while let Some((role, e)) = watch.try_next() {
            relay.lut_event(role, &e)?;
        }
        if finished || Instant::now() >= until {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if !exit.success() {
        // ssh relays our stderr: the local side shows it with the failure.
        eprintln!("{} {} on this host ended with {}:\n{}", plan.lut, plan.role, exit.describe(), process.stderr_tail());
    }
    let reported = RemoteExit {
        status: exit.status,
        user: exit.user,
        system: exit.system,
        wall: exit.wall,
        max_rss_kib: exit.max_rss_kib,
    };
    wire::send(relay.out, &Reply::Exited(reported)).map_err(EngineError::os("write to the SSH channel"))?;
    if let Some((path, start_unix_ns)) = relay.qlog.take() {
        let text = std::fs::read_to_string(&path).map_err(EngineError::os(format!("read {}", path.display())))?;
        wire::send(relay.out, &Reply::LutQlog { start_unix_ns, text })
            .map_err(EngineError::os("write to the SSH channel"))?;
    }
    let mut probed = relay.probes.collect(exit.success(), &[plan.role])?;
    if let (Some(c), Some(m)) = (&calibration, probed.metrics.as_mut()) {
        c.compensate(m);
    }
    let totals = RoleTotals { metrics: probed.metrics, agents: probed.agents, profile: probed.profile, calibration };
    wire::send(relay.out, &Reply::Totals(Box::new(totals))).map_err(EngineError::os("write to the SSH channel"))?;
    Ok(())
}

/// The probes follow the LUT; its report lines go to the local side as they come.
struct Relay<'a, W: Write> {
    probes: ProbeTracker<'a>,
    out: &'a mut W,
    /// The LUT's own qlog: its file here and its time zero, sent back after the exit.
    qlog: Option<(std::path::PathBuf, u64)>,
}

impl<W: Write> ProcessObserver for Relay<'_, W> {
    fn environment(&mut self, role: Role) -> Result<Vec<(String, std::ffi::OsString)>, Cause> {
        self.probes.environment(role)
    }

    fn spawned(&mut self, role: Role, pid: i32) -> Result<(), Cause> {
        self.probes.spawned(role, pid)
    }

    fn tick(&mut self, progress_bytes: u64) -> Result<(), Cause> {
        self.probes.tick(progress_bytes)
    }

    fn lut_event(&mut self, _role: Role, event: &LutEvent) -> Result<(), Cause> {
        if let LutEvent::Qlog { path, start_unix_ns } = event {
            // A path on this host means nothing to the local side: the file follows the exit.
            self.qlog = Some((path.clone(), *start_unix_ns));
            return Ok(());
        }
        Ok(wire::send(self.out, &Reply::Lut(event.clone()))?)
    }

    fn next_tick(&self) -> Option<Duration> {
        self.probes.next_tick()
    }
}
