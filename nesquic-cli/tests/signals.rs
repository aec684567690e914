//! Every signal that ends a run — `kill` (SIGTERM), a closed terminal (SIGHUP), Ctrl-\
//! (SIGQUIT) — unwinds through its cleanup (root): once nesquic has exited, none of the run's
//! LUT processes, network namespaces, veth ends (with their qdiscs) or BPF programs is left.
//! Ctrl-C (SIGINT) is covered by link.rs. What `kill -9` leaves, the next run removes and names;
//! a signal during a `--lut-path` build leaves none of the build's processes running.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{nesquic, serial};

/// How long the run may take to reach its transfer (link, probes, calibration) and to end.
const READY_WITHIN: Duration = Duration::from_secs(180);
const EXIT_WITHIN: Duration = Duration::from_secs(60);

/// Live LUT processes started for this test (their environment carries `token`; nesquic's own
/// forks carry it too until they exec, so only exec'd LUT executables count).
fn lut_processes(token: &str) -> Vec<u32> {
    let needle = format!("NESQUIC_TEST_TOKEN={token}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("procfs").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if !comm.starts_with("nesquic-lut") || state.contains(") Z") {
            continue;
        }
        let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Ids of the BPF programs `pid` holds open (each program's and link's fd says `prog_id` in its
/// fdinfo; this bpftool cannot name a program's owners).
fn bpf_programs_of(pid: u32) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .flat_map(|info| {
            info.lines().filter_map(|l| l.strip_prefix("prog_id:")?.trim().parse::<u64>().ok()).collect::<Vec<_>>()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Every BPF program id that exists now.
fn bpf_program_ids() -> Vec<u64> {
    let out = Command::new("bpftool").args(["-j", "prog", "show"]).output().expect("bpftool");
    // bpftool's format (one object per program), not nesquic's.
    #[derive(serde::Deserialize)]
    struct Prog {
        id: u64,
    }
    let progs: Vec<Prog> = serde_json::from_slice(&out.stdout).expect("bpftool json");
    progs.into_iter().map(|p| p.id).collect()
}

/// `tc qdisc show` of the run's server veth end, in its namespace (empty once it is gone).
fn server_qdiscs(pid: u32) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &format!("nq-{pid}-s"), "tc", "qdisc", "show", "dev", &format!("nq{pid}s")])
        .output()
        .expect("tc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The run's namespaces (`nq-<pid>-s|c`) still listed.
fn namespaces_of(pid: u32) -> Vec<String> {
    common::our_namespaces().into_iter().filter(|n| n.starts_with(&format!("nq-{pid}-"))).collect()
}

/// The run's veth ends (`nq<pid>s|c`) seen from the root namespace, with their qdiscs.
fn root_namespace_traces_of(pid: u32) -> String {
    let links = Command::new("ip").args(["-o", "link", "show"]).output().expect("ip link");
    let qdiscs = Command::new("tc").args(["qdisc", "show"]).output().expect("tc");
    let name = format!("nq{pid}");
    String::from_utf8_lossy(&links.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&qdiscs.stdout).lines())
        .filter(|l| l.contains(&name))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Polls `ready` every 50 ms until it holds or `within` passes.
fn wait_for(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ready()
}

fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + EXIT_WITHIN;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Starts `nesquic run --lut quinn --link veth ARGS --size 2GB` (mid-transfer for as long as a
/// test needs), its stderr to `log` and its LUT processes tagged with `token`, and waits until its
/// transfer runs: both LUT processes exec'd, the run's BPF programs loaded and `ready_too` true of
/// nesquic's pid. Returns the child and those programs; panics with the log if it never gets there.
fn start_transfer(
    token: &str,
    args: &[&str],
    out: &Path,
    log: &Path,
    ready_too: impl Fn(u32) -> bool,
) -> (Child, Vec<u64>) {
    let mut child = nesquic()
        .args(["run", "--lut", "quinn", "--link", "veth"])
        .args(args)
        .args(["--size", "2GB", "--timeout", "5m", "--out"])
        .arg(out)
        .env("NESQUIC_TEST_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn nesquic");
    let pid = child.id();
    let mut programs = Vec::new();
    let ready = wait_for(READY_WITHIN, || {
        programs = bpf_programs_of(pid);
        lut_processes(token).len() == 2 && !programs.is_empty() && ready_too(pid)
    });
    if !ready {
        let _ = child.kill();
        let text = std::fs::read_to_string(log).unwrap_or_default();
        panic!("{token}: the run did not reach its transfer within {READY_WITHIN:?}: {text}");
    }
    (child, programs)
}

/// Starts a probed run over veth, waits until its transfer runs, sends `signal`, and checks that
/// nesquic exits and leaves nothing of the run behind.
fn a_signalled_run_leaves_nothing(signal: i32, name: &str) {
    let token = format!("signals-{}-{name}", std::process::id());
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("stderr");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    // Ready once tbf is on its veth end too.
    let args = ["--rate", "1gbit", "--probe", "io,crypto", "--probe-backend", "both"];
    let (mut child, programs) =
        start_transfer(&token, &args, &dir.path().join("run"), &log, |pid| server_qdiscs(pid).contains("tbf"));
    let pid = child.id();
    assert_eq!(namespaces_of(pid).len(), 2, "{name}: the run's namespaces");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lut_processes(&token).len(), 2, "{name}: the transfer ended before the signal: {}", log_text());

    // SAFETY: signals our own child.
    unsafe { libc::kill(pid as i32, signal) };
    let Some(status) = wait_exit(&mut child) else {
        let _ = child.kill();
        panic!("{name}: nesquic still runs {EXIT_WITHIN:?} after the signal: {}", log_text());
    };
    assert!(!status.success(), "{name}: an interrupted run must not succeed");
    assert!(log_text().contains("interrupted"), "{name}: nesquic did not unwind ({status}): {}", log_text());
    // Reaped asynchronously by the kernel after PDEATHSIG/SIGKILL: give them a moment.
    assert!(wait_for(Duration::from_secs(5), || lut_processes(&token).is_empty()), "{name}: LUT processes left");
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "{name}: namespaces left");
    assert_eq!(root_namespace_traces_of(pid), "", "{name}: veth ends or qdiscs left");
    let left: Vec<u64> = bpf_program_ids().into_iter().filter(|id| programs.contains(id)).collect();
    assert_eq!(left, Vec::<u64>::new(), "{name}: BPF programs of the run left (of {programs:?})");
}

fn require_root_and_tools() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests need root (network namespaces, BPF)");
    assert!(Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-quinn").exists(), "build the LUTs");
}

#[test]
fn sigterm_ends_a_run_with_its_cleanup() {
    let _g = serial();
    require_root_and_tools();
    a_signalled_run_leaves_nothing(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sighup_from_a_closed_terminal_ends_a_run_with_its_cleanup() {
    let _g = serial();
    require_root_and_tools();
    a_signalled_run_leaves_nothing(libc::SIGHUP, "SIGHUP");
}

#[test]
fn sigquit_ends_a_run_with_its_cleanup() {
    let _g = serial();
    require_root_and_tools();
    a_signalled_run_leaves_nothing(libc::SIGQUIT, "SIGQUIT");
}

/// The run's scratch directories (`nesquic-run-<pid>-…`) in the temporary directory.
fn scratch_dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("nesquic-run-{pid}-");
    let mut dirs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("temporary directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// Tracefs probe events aya would have made for `pid` (`aya_<pid>_…`; kernels before 4.17 only).
fn probe_events_of(pid: u32) -> Vec<String> {
    let name = format!("aya_{pid}_");
    ["uprobe_events", "kprobe_events"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(Path::new("/sys/kernel/tracing").join(f))
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.contains(&name))
        .collect()
}

/// Alive and not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

#[test]
fn what_a_killed_run_leaves_the_next_run_removes_and_names() {
    let _g = serial();
    require_root_and_tools();
    let token = format!("signals-{}-kill9", std::process::id());
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("stderr");
    let args = ["--probe", "io,crypto,profile"];
    let (mut child, programs) =
        start_transfer(&token, &args, &dir.path().join("killed"), &log, |pid| namespaces_of(pid).len() == 2);
    let pid = child.id();
    // SAFETY: signals our own child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let status = child.wait().expect("wait");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));

    // What dies with nesquic: its LUT processes (PR_SET_PDEATHSIG), BPF programs and links, uprobes.
    assert!(wait_for(Duration::from_secs(5), || lut_processes(&token).is_empty()), "LUT processes outlived nesquic");
    let left_programs = || bpf_program_ids().into_iter().filter(|id| programs.contains(id)).collect::<Vec<u64>>();
    assert!(
        wait_for(Duration::from_secs(5), || left_programs().is_empty()),
        "BPF programs left: {:?}",
        left_programs()
    );
    assert_eq!(probe_events_of(pid), Vec::<String>::new(), "tracefs probe events left");
    // What stays (measured): the two namespaces, with the veth ends in them, and the scratch
    // directory holding the run's certificate and key.
    let mut namespaces = namespaces_of(pid);
    namespaces.sort();
    assert_eq!(namespaces, [format!("nq-{pid}-c"), format!("nq-{pid}-s")]);
    assert_eq!(root_namespace_traces_of(pid), "", "veth ends outside the namespaces");
    let scratch = scratch_dirs_of(pid);
    assert_eq!(scratch.len(), 1, "the run's scratch directory, named after its pid: {scratch:?}");
    assert!(scratch[0].join("key.der").exists());

    let next = nesquic()
        .args(["run", "--lut", "quinn", "--link", "veth", "--size", "5MB", "--out"])
        .arg(dir.path().join("next"))
        .output()
        .expect("run nesquic");
    let said = common::stderr(&next);
    assert!(next.status.success(), "{said}");
    for object in [
        format!("netns nq-{pid}-s"),
        format!("netns nq-{pid}-c"),
        format!("scratch directory {}", scratch[0].display()),
    ] {
        let line = format!("nesquic: removed {object} left by a run that died (pid {pid})\n");
        assert!(said.contains(&line), "no {line:?} in: {said}");
    }
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
    assert_eq!(root_namespace_traces_of(pid), "", "veth ends or qdiscs left");
    assert_eq!(scratch_dirs_of(pid), Vec::<std::path::PathBuf>::new(), "scratch directories left");
    assert_eq!(probe_events_of(pid), Vec::<String>::new());
}

/// A stand-in for cargo: it records its pid and its child's, then waits for the child (a long
/// sleep), as cargo waits for rustc.
const FAKE_CARGO: &str =
    "#!/bin/sh\necho $$ >> \"$NESQUIC_TEST_PIDS\"\nsleep 600 &\necho $! >> \"$NESQUIC_TEST_PIDS\"\nwait\n";

#[test]
fn a_signal_during_a_lut_path_build_leaves_no_build_process() {
    let _g = serial();
    require_root_and_tools();
    let builds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/lut-builds");
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGKILL, "SIGKILL")] {
        let dir = tempfile::tempdir().expect("tempdir");
        // A checkout holding the quinn crate at the locked version: enough to reach cargo.
        let checkout = dir.path().join("quinn");
        std::fs::create_dir_all(checkout.join("src")).expect("mkdir");
        std::fs::write(
            checkout.join("Cargo.toml"),
            format!(
                "[package]\nname = \"quinn\"\nversion = \"{}\"\nedition = \"2021\"\n",
                env!("NESQUIC_TEST_QUINN_VERSION")
            ),
        )
        .expect("Cargo.toml");
        let cargo = dir.path().join("cargo");
        std::fs::write(&cargo, FAKE_CARGO).expect("fake cargo");
        std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let pids = dir.path().join("pids");
        let projects_before: Vec<_> =
            std::fs::read_dir(&builds).into_iter().flatten().flatten().map(|e| e.path()).collect();
        let log = dir.path().join("stderr");
        let mut child = nesquic()
            .args(["run", "--lut", "quinn", "--size", "1MB", "--lut-path"])
            .arg(&checkout)
            .arg("--out")
            .arg(dir.path().join("run"))
            .env("CARGO", &cargo)
            .env("NESQUIC_TEST_PIDS", &pids)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn nesquic");
        let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
        let started = || -> Vec<u32> {
            std::fs::read_to_string(&pids).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
        };
        if !wait_for(READY_WITHIN, || started().len() == 2) {
            let _ = child.kill();
            panic!("{name}: the build did not reach cargo within {READY_WITHIN:?}: {}", log_text());
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let Some(status) = wait_exit(&mut child) else {
            let _ = child.kill();
            panic!("{name}: nesquic still runs {EXIT_WITHIN:?} after the signal: {}", log_text());
        };
        assert!(!status.success(), "{name}");
        // The build's processes are killed as nesquic goes (asynchronously): a generous bound.
        let alive_now = || started().into_iter().filter(|p| alive(*p)).collect::<Vec<u32>>();
        let gone = wait_for(Duration::from_secs(10), || alive_now().is_empty());
        for pid in alive_now() {
            // SAFETY: kills what the test's own stand-in started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        assert!(gone, "{name}: the build's processes outlived nesquic: {:?}", started());
        // The build lock died with nesquic: another run can take it at once.
        let new_projects: Vec<_> = std::fs::read_dir(&builds)
            .expect("lut-builds")
            .flatten()
            .map(|e| e.path())
            .filter(|p| !projects_before.contains(p))
            .collect();
        assert_eq!(new_projects.len(), 1, "{name}: the build's project: {new_projects:?}");
        let lock = std::fs::File::open(new_projects[0].join(".nesquic-build.lock")).expect("the build lock");
        assert!(lock.try_lock().is_ok(), "{name}: the build lock is still held");
        drop(lock);
        std::fs::remove_dir_all(&new_projects[0]).expect("remove the project");
    }
}

#[test]
fn doctor_removes_what_dead_runs_left_and_leaves_a_live_runs_alone() {
    let _g = serial();
    require_root_and_tools();
    // No process has a pid above pid_max; this test's own pid stands for a run still going.
    let pid_max: u32 =
        std::fs::read_to_string("/proc/sys/kernel/pid_max").expect("pid_max").trim().parse().expect("a number");
    let (dead, live) = (pid_max + 1, std::process::id());
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().expect("ip").success(), "ip {args:?}");
    let (dead_ns, live_ns) = (format!("nq-{dead}-d"), format!("nq-{live}-d"));
    ip(&["netns", "add", &dead_ns]);
    ip(&["netns", "add", &live_ns]);
    let dead_dir = std::env::temp_dir().join(format!("nesquic-agent-{dead}-doctor{live}"));
    std::fs::create_dir_all(&dead_dir).expect("mkdir");

    let out = nesquic().arg("doctor").output().expect("run nesquic doctor");
    let said = common::stderr(&out);
    let left_ns = common::our_namespaces();
    let _ = Command::new("ip").args(["netns", "del", &live_ns]).status();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("nesquic: removed netns {dead_ns} left by a run that died (pid {dead})\n")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "nesquic: removed scratch directory {} left by a run that died (pid {dead})\n",
            dead_dir.display()
        )),
        "{said}"
    );
    assert!(said.contains(&format!("nesquic: netns {live_ns} belongs to a run still going (pid {live}, ")), "{said}");
    assert!(!left_ns.contains(&dead_ns) && left_ns.contains(&live_ns), "{left_ns:?}");
    assert!(!dead_dir.exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("leftovers") && l.contains("2 removed")), "{stdout}");
}
