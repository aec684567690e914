//! The CI gate end to end: `nesquic ab` on real quinn runs (A/A passes, GSO off fails on a
//! counter), the report formats, and CLI hygiene every command shares (a closed stdout ends it
//! quietly, colour only where asked for, exit status in --help). Needs root (io probes).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;

use common::{nesquic, stderr};
use nesquic_record::compare::{Pairing, Row, Unjudged, Verdict};
use nesquic_render::compare::{RefusedReport, Report};

fn as_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "gate tests use the eBPF io probes: run them as root");
}

/// `nesquic ab` on quinn, 5 MB, 6 rounds, io probes, into a fresh job directory; JSON report.
fn ab(name: &str, extra: &[&str]) -> (PathBuf, Output) {
    as_root();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = nesquic()
        .args(["ab", "--size", "5MB", "--rounds", "6", "--probe", "io", "--format", "json", "--out"])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("run nesquic ab");
    (dir, out)
}

fn report(out: &Output) -> Report<'static> {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)))
}

/// One metric's row of a report.
fn row<'a>(report: &'a Report<'_>, metric: &str) -> &'a Row {
    report.rows.iter().find(|r| r.metric == metric).unwrap_or_else(|| panic!("no {metric} row"))
}

/// Three A/A jobs of unchanged quinn, shared by the tests of this file.
fn a_a_jobs() -> &'static Vec<(PathBuf, Output)> {
    static JOBS: OnceLock<Vec<(PathBuf, Output)>> = OnceLock::new();
    JOBS.get_or_init(|| (1..=3).map(|i| ab(&format!("aa{i}"), &[])).collect())
}

#[test]
fn three_a_a_comparisons_of_real_runs_pass() {
    for (dir, out) in a_a_jobs() {
        assert_eq!(out.status.code(), Some(0), "{}: {}", dir.display(), String::from_utf8_lossy(&out.stdout));
        let r = report(out);
        assert_eq!((r.report_version, r.verdict.as_ref()), (4, "pass"));
        assert_eq!(r.pairing, Pairing::Paired);
        // Every noisy figure got an interval from the six pairs; counters carry their limit.
        let cpu = row(&r, "server.cpu_s");
        let interval = cpu.interval.expect("server.cpu_s interval");
        assert!(interval.low <= interval.high);
        assert!(!cpu.gates, "noisy figures report unless a rule names them");
        // The default gating set: each side's own data path (the server sends the payload, the
        // client receives it) and CPU per GB; the ACK path, the sums and the per-call ratios
        // (the peer drives half of them) report.
        let gates = |m: &str| r.rows.iter().find(|x| x.metric == m).map(|x| x.gates);
        assert_eq!((gates("server.sends_per_mb"), gates("client.data_recvs_per_mb")), (Some(true), Some(true)));
        assert_eq!((gates("client.sends_per_mb"), gates("server.data_recvs_per_mb")), (Some(false), Some(false)));
        for side in ["server", "client"] {
            assert_eq!(gates(&format!("{side}.syscalls_per_mb")), Some(false));
            assert_eq!(gates(&format!("{side}.cpu_s_per_gb")), Some(true));
            assert_eq!(gates(&format!("{side}.datagrams_per_recv")), Some(false));
        }
        // Each side is a run directory of its own, with one directory per round.
        for side in ["base", "head"] {
            let summary = nesquic_record::RunRecord::load(&dir.join(side).join("summary.json")).expect("summary");
            assert_eq!(summary.repetitions.len(), 6);
            assert!(dir.join(side).join("round-006").join("server.sqlog").is_file());
        }
    }
}

#[test]
fn gso_off_fails_on_a_counter() {
    let (_, out) = ab("gso", &["--head-opt", "gso=off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = report(&out);
    assert_eq!(r.verdict, "fail");
    // quinn sends ~9.5 datagrams per sendmsg with GSO, one without: the server's sends per MB
    // multiply, which gates; the ratio that explains it reports.
    let per_mb = row(&r, "server.sends_per_mb");
    assert_eq!(per_mb.verdict, Verdict::Regression, "{per_mb:?}");
    assert!(per_mb.change_pct > 100.0, "{per_mb:?}");
    let per_send = row(&r, "server.datagrams_per_send");
    assert_eq!((per_send.verdict, per_send.head), (Verdict::Worse, 1.0), "{per_send:?}");
    // Only the default gating set failed: without a rule, nothing else does.
    let failed: Vec<&Row> = r.rows.iter().filter(|x| x.verdict == Verdict::Regression).collect();
    let default_set =
        |m: &str| ["server.sends_per_mb", "client.data_recvs_per_mb"].contains(&m) || m.ends_with(".cpu_s_per_gb");
    assert!(failed.iter().all(|x| default_set(&x.metric)), "{failed:?}");
}

/// A copy of an A/A job's head run with `edit` applied to its typed record, in a fresh directory.
fn edited_head(name: &str, edit: impl Fn(&mut nesquic_record::RunRecord)) -> PathBuf {
    let (job, _) = &a_a_jobs()[0];
    let mut record = nesquic_record::RunRecord::load(&job.join("head").join("summary.json")).expect("head record");
    edit(&mut record);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&record).expect("json")).expect("write");
    dir
}

#[test]
fn a_figure_one_side_did_not_measure_is_not_judged() {
    let (job, _) = &a_a_jobs()[0];
    let base = job.join("base");
    // The server's io probes saw nothing in head's second round: before, the gate skipped the
    // metrics head lacked and passed.
    let lost = edited_head("lost", |r| {
        let probes = r.repetitions[1].probes.as_mut().expect("probes");
        probes.roles.iter_mut().filter(|x| x.role.to_string() == "server").for_each(|x| x.io.clear());
    });
    let out = compare(&base, &lost).args(["--format", "json"]).output().expect("compare");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("head has no server.send_syscalls in repetition 2 of 6: its io probes measured nothing"),
        "{err}"
    );
    let r: RefusedReport = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(r.verdict, "refused", "{r:?}");
    assert!(matches!(r.reasons.first(), Some(Unjudged::Partial { .. })), "{r:?}");
    // Every round lost: one line names the io metrics.
    let gone = edited_head("gone", |r| {
        for rep in &mut r.repetitions {
            let probes = rep.probes.as_mut().expect("probes");
            probes.roles.iter_mut().filter(|x| x.role.to_string() == "server").for_each(|x| x.io.clear());
        }
    });
    let out = compare(&base, &gone).output().expect("compare");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("head has no server.send_syscalls, server.recv_syscalls"), "{}", stderr(&out));
    // A rule that names nothing measured (no crypto probes ran) is bad input, not a pass.
    let out =
        compare(&base, &job.join("head")).args(["--fail-on", "seal_calls_per_packet>+2%"]).output().expect("compare");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("rule seal_calls_per_packet>+2%: no such metric in these runs"), "{}", stderr(&out));
    // An agent that did not start: that side is refused, whatever it measured.
    let unready = edited_head("unready", |r| {
        for agent in r.repetitions.iter_mut().flat_map(|rep| rep.agents.iter_mut()) {
            agent.ready = false;
        }
        r.repetitions[0]
            .agents
            .push(serde_json::from_str(r#"{"role":"server","ready":false,"functions":[]}"#).expect("agent"));
    });
    let out = compare(&base, &unready).args(["--format", "markdown"]).output().expect("compare");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("head: the user-space agent did not start in the server"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing judged"), "the PR comment says why");
}

/// `nesquic compare BASE HEAD`, to add flags to.
fn compare(base: &Path, head: &Path) -> std::process::Command {
    let mut c = nesquic();
    c.arg("compare").arg(base).arg(head);
    c
}

#[test]
fn compare_pairs_an_ab_job_and_warns_on_separate_runs() {
    let jobs = a_a_jobs();
    let (first, second) = (&jobs[0].0, &jobs[1].0);
    let out = compare(&first.join("base"), &first.join("head")).args(["--format", "json"]).output().expect("compare");
    assert_eq!(report(&out).pairing, Pairing::Paired, "{}", stderr(&out));
    assert!(!stderr(&out).contains("drift"), "{}", stderr(&out));
    let out =
        compare(&first.join("base"), &second.join("head")).args(["--format", "markdown"]).output().expect("compare");
    let text = String::from_utf8_lossy(&out.stdout);
    let first_line = text.lines().next().unwrap_or_default();
    assert!(first_line.contains("PASS") || first_line.contains("FAIL"), "the verdict comes first: {text}");
    assert!(first_line.contains("unpaired") && text.contains("drift"), "{text}");
    assert!(stderr(&out).contains("warning") && stderr(&out).contains("drift"), "{}", stderr(&out));
}

/// Runs `nesquic ARGS` with its stdout a pipe whose reader is gone before it starts.
fn with_closed_stdout(args: &[&str], dir: &Path) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    nesquic().args(args).current_dir(dir).stdout(Stdio::from(writer)).output().expect("run nesquic")
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let (job, _) = &a_a_jobs()[0];
    let (base, head, round) = (job.join("base"), job.join("head"), job.join("base").join("round-001"));
    let (base, head, round) =
        (base.to_str().expect("utf-8"), head.to_str().expect("utf-8"), round.to_str().expect("utf-8"));
    let scratch = tempfile::tempdir().expect("tempdir");
    let run_dir = scratch.path().join("run");
    let commands: Vec<Vec<&str>> = vec![
        vec!["luts"],
        vec!["testcases"],
        vec!["probes", "--lut", "quinn"],
        vec!["compare", base, head],
        vec!["report", round],
        // Holds LUT processes and probes while it prints: it unwinds through their cleanup.
        vec!["run", "--size", "1MB", "--probe", "io", "--out", run_dir.to_str().expect("utf-8")],
    ];
    for args in commands {
        let out = with_closed_stdout(&args, scratch.path());
        let err = stderr(&out);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?} ends as Unix tools do: {:?} {err}", out.status);
    }
    // The everyday form.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} compare {base} {head} | head -1", env!("CARGO_BIN_EXE_nesquic")))
        .output()
        .expect("sh");
    assert!(out.status.success() && !stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn colour_only_on_request_and_never_under_no_color() {
    let (job, _) = &a_a_jobs()[0];
    let text = |env: &[(&str, &str)]| {
        let mut c = compare(&job.join("base"), &job.join("head"));
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").envs(env.iter().copied());
        String::from_utf8_lossy(&c.output().expect("compare").stdout).into_owned()
    };
    assert!(!text(&[]).contains('\x1b'), "a pipe is not a terminal: no colour");
    assert!(text(&[("CLICOLOR_FORCE", "1")]).contains('\x1b'), "colour where forced");
    assert!(!text(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]).contains('\x1b'), "NO_COLOR wins");
}

#[test]
fn every_help_documents_the_exit_status() {
    for command in ["run", "luts", "testcases", "probes", "trace", "report", "matrix", "compare", "ab", "doctor"] {
        let out = nesquic().args([command, "--help"]).env("NO_COLOR", "1").output().expect("help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("Exit status: 0"), "{command} --help: {text}");
    }
    let out = nesquic().args(["ab", "--help"]).output().expect("help");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 at least one regression"));
}

#[test]
fn ab_refuses_what_it_cannot_do() {
    let out = nesquic().args(["ab", "--repeat", "5"]).output().expect("ab");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--rounds"), "{}", stderr(&out));
    let out = nesquic().args(["ab", "--rounds", "1"]).output().expect("ab");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = nesquic().args(["ab", "--head-opt", "speed=max"]).output().expect("ab");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("head variant"), "{}", stderr(&out));
}

/// Issue 51: a limit that cannot judge (NaN, infinite, negative) or a rule with one is an error
/// before anything runs: `ab` ran every round first and refused only then.
#[test]
fn limits_that_cannot_judge_are_refused_before_any_round() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // (flag, value, what the error names)
    for (i, [flag, value, named]) in [
        ["--tolerance", "nan", "--tolerance NaN"],
        ["--tolerance", "inf", "--tolerance inf"],
        ["--noisy-tolerance=-1", "", "--noisy-tolerance -1"],
        ["--noisy-tolerance", "NaN", "--noisy-tolerance NaN"],
        ["--fail-on", "cpu_s>nan%", "cpu_s>nan%"],
        ["--fail-on", "cpu_s>-2%", "cpu_s>-2%"],
    ]
    .into_iter()
    .enumerate()
    {
        let bad: Vec<&str> = [flag, value].into_iter().filter(|a| !a.is_empty()).collect();
        let out_dir = tmp.path().join(format!("job-{i}"));
        let out = nesquic()
            .args(["ab", "--size", "1MB", "--rounds", "2", "--probe", "none", "--out"])
            .arg(&out_dir)
            .args(&bad)
            .output()
            .expect("ab");
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{bad:?}: {}", stderr(&out));
        assert!(!out_dir.exists(), "{bad:?}: rounds ran before the limits were checked");
        let compare = nesquic().args(["compare", "no-base", "no-head"]).args(&bad).output().expect("compare");
        assert_eq!(compare.status.code(), Some(2));
        assert!(stderr(&compare).contains(named), "{bad:?}: checked after loading: {}", stderr(&compare));
    }
}

#[test]
fn exec_command_pairs_are_variants() {
    // Two command pairs of one executable, head's server without GSO, with the io probes
    // (tracepoints: the shell launcher does not hide the LUT from them). It asserts what GSO
    // off makes certain: one datagram per sendmsg, many more syscalls per MB (CPU time, which
    // it once asserted, moved by > 10% in only 3 of 5 runs).
    let quinn = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-lut-quinn");
    let server = format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", quinn.display());
    let client = format!("{} client --connect $NESQUIC_CONNECT --ca $NESQUIC_CA --size $NESQUIC_SIZE", quinn.display());
    let head_server = format!("{server} --opt gso=off");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nesquic()
        .args(["ab", "--lut", "exec", "--size", "5MB", "--rounds", "5", "--probe", "io", "--format", "json"])
        .args(["--base-server-cmd", &server, "--base-client-cmd", &client])
        .args(["--head-server-cmd", &head_server, "--head-client-cmd", &client, "--out"])
        .arg(dir.path().join("job"))
        .output()
        .expect("run nesquic ab");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = report(&out);
    assert_eq!(row(&r, "server.sends_per_mb").verdict, Verdict::Regression, "{r:?}");
    let per_send = row(&r, "server.datagrams_per_send");
    assert_eq!(per_send.head, 1.0, "GSO off: one datagram per sendmsg: {per_send:?}");
    assert!(per_send.base > 4.0, "quinn batches ~9.5 with GSO: {per_send:?}");
    assert!(!row(&r, "client.cpu_s").gates, "no rule names CPU seconds");
    let rounds = std::fs::read_dir(dir.path().join("job").join("head")).expect("head").count();
    assert_eq!(rounds, 6, "5 round directories and summary.json");
}

/// A `--json` path that is a link (one another user placed in /tmp for root to follow) is refused,
/// and the file it points at is untouched; a plain path is written.
#[test]
fn json_output_never_follows_a_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").expect("write");
    let link = dir.path().join("doctor.json");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    let out = nesquic().args(["doctor", "--json"]).arg(&link).output().expect("doctor");
    assert!(!out.status.success(), "wrote through a link");
    assert!(stderr(&out).contains("is a symbolic link"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    let plain = dir.path().join("plain.json");
    let out = nesquic().args(["doctor", "--json"]).arg(&plain).output().expect("doctor");
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&plain).expect("read")).expect("JSON");
    assert!(written.get("checks").is_some(), "{}: {written}", stderr(&out));
}

/// With the profile on, `ab` and `compare` give each side's CPU ns per datagram by component and
/// top function, base to head, in the JSON, the table and the PR comment; the PR comment points
/// at the differential flame graphs (the page `compare --html` wrote, else how to write it).
#[test]
fn component_deltas_appear_in_every_format() {
    as_root();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gate-components-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = nesquic()
        .args(["ab", "--size", "50MB", "--rounds", "3", "--probe", "io,profile:999", "--format", "json", "--out"])
        .arg(&dir)
        .output()
        .expect("run nesquic ab");
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let r = report(&out);
    for (role, per) in [(nesquic_protocol::Role::Server, "sent"), (nesquic_protocol::Role::Client, "received")] {
        let side: Vec<_> = r.component_deltas.iter().filter(|d| d.role == role).collect();
        // quinn's every datagram crosses the kernel: that component has a cost on each side (at
        // 999 Hz over 50 MB, dozens of samples a round).
        let kernel = side.iter().find(|d| d.name == "packet_io.kernel").unwrap_or_else(|| panic!("{side:#?}"));
        assert!(kernel.base_ns > 0.0 && kernel.head_ns > 0.0, "{kernel:?}");
        assert!(side.iter().all(|d| d.per == per && d.samples.0 <= 3 && d.delta_ns.is_finite()), "{side:#?}");
        assert!(side.iter().any(|d| d.of == nesquic_record::compare::components::CostOf::Function), "{side:#?}");
    }
    let (base, head) = (dir.join("base"), dir.join("head"));
    let text = compare(&base, &head).output().expect("compare");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains("CPU ns per datagram by component and top function"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("server  component packet_io.kernel")), "{text}");
    let page = dir.join("compare.html");
    let md = compare(&base, &head).args(["--format", "markdown", "--html"]).arg(&page).output().expect("compare");
    let md = String::from_utf8_lossy(&md.stdout).to_string();
    assert!(md.contains("| server | component | `packet_io.kernel` |"), "{md}");
    assert!(md.contains(&format!("Differential flame graphs: [{0}]({0})", page.display())), "{md}");
    assert!(page.is_file());
    // ab wrote no page: its comment says how to get one.
    let md = compare(&base, &head).args(["--format", "markdown"]).output().expect("compare");
    let md = String::from_utf8_lossy(&md.stdout).to_string();
    assert!(md.contains("--html` writes them"), "{md}");
}
