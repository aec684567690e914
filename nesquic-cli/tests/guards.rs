//! Input that must neither crash nor silently perturb a run: every duration flag out of range is
//! a usage error (exit 2), never a panic (exit 101); `NESQUIC_FAULT_*` variables in nesquic's
//! environment are refused, unless `NESQUIC_ALLOW_FAULTS=1`, and then recorded.

mod common;

use common::{nesquic, stderr};
use nesquic_record::run::InjectedFault;

#[test]
fn every_duration_flag_rejects_what_the_clock_cannot_hold_with_exit_2() {
    for args in [
        &["run", "--timeout", "99999999999999999999"][..],
        &["run", "--interval", "99999999999999999999"],
        &["run", "--probe", "io", "--duty", "50ms/99999999999999999999"],
        &["trace", "--timeout", "99999999999999999999", "--", "true"],
        &["matrix", "--timeout", "99999999999999999999"],
        &["ab", "--timeout", "99999999999999999999"],
    ] {
        let out = nesquic().args(args).output().expect("run nesquic");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("invalid duration '99999999999999999999': at most a year"), "{args:?}: {err}");
    }
    for (value, why) in [("-5s", "must be positive"), ("NaN", "expected e.g. 30s"), ("0", "must be positive")] {
        let out = nesquic().args(["run", &format!("--timeout={value}")]).output().expect("run nesquic");
        assert_eq!(out.status.code(), Some(2), "--timeout {value}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "--timeout {value}: {}", stderr(&out));
    }
}

#[test]
fn fault_variables_are_refused_without_the_opt_in() {
    let out = nesquic()
        .args(["run", "--size", "1MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .env_remove("NESQUIC_ALLOW_FAULTS")
        .output()
        .expect("run nesquic");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("NESQUIC_FAULT_SERVER_CORRUPT_AT=1234567 set in the environment")
            && err.contains("NESQUIC_ALLOW_FAULTS=1"),
        "{err}"
    );
}

#[test]
fn allowed_faults_are_said_and_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--io", "nesquic", "--size", "1MB", "--json"])
        .arg(&json)
        .arg("--out")
        .arg(dir.path().join("run"))
        .env("NESQUIC_FAULT_DROP_RX", "3")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("WARNING: faults injected on purpose"), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAULTS INJECTED (NESQUIC_ALLOW_FAULTS=1): NESQUIC_FAULT_DROP_RX=3"), "{stdout}");
    let report = common::load_record(&json);
    let fault = InjectedFault { name: "NESQUIC_FAULT_DROP_RX".into(), value: "3".into() };
    assert_eq!(report.faults, [fault]);
}
