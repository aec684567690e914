//! A user-space agent that did not start measured nothing in its process: `run`, `matrix` and
//! `ab` must say so on the terminal (before, only `trace` did, and a missing figure read as "not
//! called"), and the record must carry it. The agent is kept out deterministically: nesquic is
//! told its library is libc (`NESQUIC_AGENT_LIB`), which the LUTs preload harmlessly and which
//! never reports in.

mod common;

use std::process::{Command, Output};

use common::{nesquic, stderr};

/// libc's path, from this process's own mappings: a real shared library that is not the agent.
fn not_the_agent() -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|path| path.contains("/libc.so"))
        .expect("libc is mapped")
        .to_string()
}

/// `nesquic ARGS` with user-space io probes whose agent never starts.
fn without_agent(args: &[&str]) -> Output {
    let mut command: Command = nesquic();
    command.args(args).args(["--size", "1MB", "--probe", "io", "--probe-backend", "user"]);
    command.env("NESQUIC_AGENT_LIB", not_the_agent()).output().expect("nesquic")
}

/// Each side's warning is said once a command, however many repetitions had it.
fn warned_once(out: &Output) {
    let err = stderr(out);
    for role in ["server", "client"] {
        let warning = format!("warning: the user-space agent did not start in the {role}");
        assert_eq!(err.matches(&warning).count(), 1, "{role}: {err}");
    }
}

#[test]
fn run_says_the_agent_did_not_start_and_records_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = dir.path().join("run");
    let out = without_agent(&["run", "--repeat", "2", "--out", run_dir.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    warned_once(&out);
    let record = nesquic_record::RunRecord::load(&run_dir.join("summary.json")).expect("a typed run record");
    assert_eq!(record.repetitions.len(), 2);
    for rep in &record.repetitions {
        let ready: Vec<(String, bool)> = rep.agents.iter().map(|a| (a.role.to_string(), a.ready)).collect();
        assert_eq!(ready, [("server".to_string(), false), ("client".to_string(), false)], "{:?}", rep.agents);
    }
}

#[test]
fn matrix_says_the_agent_did_not_start() {
    warned_once(&without_agent(&["matrix", "--lut", "quinn", "--repeat", "2"]));
}

#[test]
fn ab_says_the_agent_did_not_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job");
    let out = without_agent(&["ab", "--rounds", "2", "--out", job.to_str().expect("utf-8")]);
    warned_once(&out);
    // The gate does not judge sides that measured nothing: exit 2, not a pass.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing judged"), "{}", stderr(&out));
}
