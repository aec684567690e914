//! Findings end to end, on real quinn runs: the default path reports the capped GSO batch with
//! the `ab` command that tests it; with GSO off that finding is gone and "GSO off" is there
//! instead, with the command that turns it back on; `nesquic findings RUN` prints the same
//! from the run directory. Needs root (io probes).

mod common;

use std::path::Path;

use common::{nesquic, stderr};
use nesquic_protocol::Role;
use nesquic_record::findings::Rule;
use nesquic_record::RunRecord;

/// `nesquic run --lut quinn --probe io --size 25MB EXTRA` into `dir`; its typed record.
fn quinn_run(dir: &Path, extra: &[&str]) -> RunRecord {
    let out = nesquic()
        .args(["run", "--lut", "quinn", "--probe", "io", "--size", "25MB", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("findings"), "the terminal lists the findings: {text}");
    RunRecord::load(&dir.join("summary.json")).expect("typed record")
}

fn rules(r: &RunRecord) -> Vec<(Rule, Role)> {
    r.findings.iter().map(|f| (f.rule, f.role)).collect()
}

#[test]
fn quinn_reports_its_capped_gso_batch_and_gso_off_reports_gso_off() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let default = quinn_run(&tmp.path().join("default"), &[]);
    let capped = default.findings.iter().find(|f| f.rule == Rule::GsoBatchCapped).expect("GSO batch finding");
    assert_eq!(capped.role, Role::Server, "{capped:?}");
    // quinn sends ~9.7 datagrams a sendmsg where 45 of its datagrams fit in 64 KB.
    assert!(capped.seen.contains("its socket allows 4"), "{}", capped.seen);
    assert!(capped.try_this.starts_with("nesquic ab --lut quinn --lut-path"), "{}", capped.try_this);
    assert!(!rules(&default).contains(&(Rule::GsoOff, Role::Server)));

    let off = quinn_run(&tmp.path().join("off"), &["--lut-opt", "gso=off"]);
    assert!(rules(&off).contains(&(Rule::GsoOff, Role::Server)), "{:#?}", off.findings);
    assert!(!rules(&off).iter().any(|(r, _)| *r == Rule::GsoBatchCapped), "{:#?}", off.findings);
    let f = off.findings.iter().find(|f| f.rule == Rule::GsoOff).expect("GSO off");
    assert!(f.try_this.contains("--base-opt gso=off --head-opt gso=on"), "{}", f.try_this);

    // `nesquic findings RUN` reads the same back.
    let out = nesquic().arg("findings").arg(tmp.path().join("default")).output().expect("findings");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("datagrams per send message") && text.contains("try: nesquic ab"), "{text}");
    let out = nesquic().arg("findings").arg(tmp.path().join("nowhere")).output().expect("findings");
    assert!(!out.status.success() && !stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a nesquic run"), "{}", stderr(&out));
}
