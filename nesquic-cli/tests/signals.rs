//! Every signal that ends a run — `kill` (SIGTERM), a closed terminal (SIGHUP), Ctrl-\
//! (SIGQUIT) — unwinds through its cleanup (root): once nesquic has exited, none of the run's
//! LUT processes, network namespaces, veth ends (with their qdiscs) or BPF programs is left.
//! Ctrl-C (SIGINT) is covered by link.rs.

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

/// Starts a probed run over veth, waits until its transfer runs, sends `signal`, and checks that
/// nesquic exits and leaves nothing of the run behind.
fn a_signalled_run_leaves_nothing(signal: i32, name: &str) {
    let token = format!("signals-{}-{name}", std::process::id());
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("stderr");
    let mut child = nesquic()
        .args(["run", "--lut", "quinn", "--link", "veth", "--rate", "1gbit"])
        .args(["--probe", "io,crypto", "--probe-backend", "both", "--size", "2GB", "--timeout", "5m", "--out"])
        .arg(dir.path().join("run"))
        .env("NESQUIC_TEST_TOKEN", &token)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn nesquic");
    let pid = child.id();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // Ready: both LUT processes exec'd (the transfer runs), the run's BPF programs loaded, tbf on
    // its veth end.
    let mut programs = Vec::new();
    let ready = wait_for(READY_WITHIN, || {
        programs = bpf_programs_of(pid);
        lut_processes(&token).len() == 2 && !programs.is_empty() && server_qdiscs(pid).contains("tbf")
    });
    if !ready {
        let _ = child.kill();
        panic!("{name}: the run did not reach its transfer within {READY_WITHIN:?}: {}", log_text());
    }
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
