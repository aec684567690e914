//! `--lut-path`: the quinn adapter built against a local copy of the quinn crate (unpacked from
//! the cargo registry), run end to end, with the checkout's revision recorded; a broken checkout
//! fails the build with a clear error (which proves the patch is really used).

use std::path::{Path, PathBuf};
use std::process::Command;

fn registry_quinn() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let version = env!("NESQUIC_TEST_QUINN_VERSION");
    let src = home.join("registry/src");
    std::fs::read_dir(&src)
        .expect("cargo registry sources")
        .flatten()
        .map(|index| index.path().join(format!("quinn-{version}")))
        .find(|p| p.join("Cargo.toml").exists())
        .unwrap_or_else(|| panic!("quinn-{version} not unpacked under {}", src.display()))
}

fn copy_dir(from: &Path, to: &Path) {
    let st = Command::new("cp").arg("-r").arg(from).arg(to).status().expect("cp");
    assert!(st.success());
}

fn nesquic() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nesquic"));
    // Tests ask for the probes they check: `run` turns some on by default as root.
    c.env("NESQUIC_PROBE", "none");
    c.current_dir(env!("CARGO_TARGET_TMPDIR"));
    c
}

#[test]
fn builds_and_runs_against_a_local_quinn_and_records_its_revision() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("quinn");
    copy_dir(&registry_quinn(), &checkout);
    for args in
        [&["init", "-q"][..], &["add", "-A"], &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]]
    {
        assert!(Command::new("git").arg("-C").arg(&checkout).args(args).status().expect("git").success());
    }
    let head = Command::new("git").arg("-C").arg(&checkout).args(["rev-parse", "HEAD"]).output().expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();

    let out_dir = tmp.path().join("run");
    let out = nesquic()
        .args(["run", "--size", "2MB", "--lut-path"])
        .arg(&checkout)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).expect("summary")).expect("json");
    assert_eq!(summary["lut"]["source"]["revision"], head.as_str());
    assert_eq!(summary["repetitions"][0]["bytes"], 2_000_000);
    assert!(summary["lut"]["binary"].as_str().is_some_and(|b| b.contains("lut-builds")), "{}", summary["lut"]);

    // Break the checkout: the build must fail, so the adapter really is built from it.
    let lib = checkout.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("lib.rs");
    std::fs::write(&lib, format!("{text}\ncompile_error!(\"nesquic test: this checkout is broken\");\n"))
        .expect("write");
    let out = nesquic().args(["run", "--size", "1MB", "--lut-path"]).arg(&checkout).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("this checkout is broken") && err.contains("building the quinn adapter"), "{err}");

    let out = nesquic().args(["run", "--lut-path"]).arg(tmp.path().join("nowhere")).output().expect("run");
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no such directory"));
}
