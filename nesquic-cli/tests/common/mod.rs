//! Helpers the end-to-end test files share (each file is its own crate and uses a subset).
#![allow(dead_code)]

pub mod lut;

use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of one file that share machine state (namespaces, probes).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `nesquic`, run from cargo's scratch directory (run directories land there).
pub fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Network namespaces nesquic created (`nq-<pid>-s|c`).
pub fn our_namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("nq-"))
        .map(String::from)
        .collect()
}

/// `nesquic run ARGS` into a scratch run directory; fails the test unless it succeeds; returns
/// its summary (`--json`).
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json")
}
