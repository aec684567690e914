//! `--lut-path` and `--lut-rev`: LUT adapters built against local copies of their library
//! (unpacked from the cargo registry, edited), proven to run the copy's code: a changed constant
//! shows in the measured figures, a broken copy fails the build (also when its version differs
//! from Nesquic's lock, where cargo used to leave the patch unused and build the registry's code),
//! and the record names the checkout, its revision and whether it had uncommitted changes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{nesquic, serial, stderr};
use nesquic_record::io::IoFigures;
use nesquic_record::RunRecord;

/// The registry's unpacked source of `name` at the version Nesquic's lock pins.
fn registry_crate(name: &str, version: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let src = home.join("registry/src");
    std::fs::read_dir(&src)
        .expect("cargo registry sources")
        .flatten()
        .map(|index| index.path().join(format!("{name}-{version}")))
        .find(|p| p.join("Cargo.toml").exists())
        .unwrap_or_else(|| panic!("{name}-{version} not unpacked under {}", src.display()))
}

/// The registry's unpacked source of `name` `version`, downloaded from crates.io first when this
/// machine has not unpacked it (a throwaway project depending on exactly it, `cargo fetch`).
fn fetched_crate(name: &str, version: &str) -> PathBuf {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(tmp.path().join("src")).expect("mkdir");
    std::fs::write(tmp.path().join("src/lib.rs"), "").expect("lib.rs");
    std::fs::write(
        tmp.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             [dependencies]\n{name} = \"={version}\"\n[workspace]\n"
        ),
    )
    .expect("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo).arg("fetch").current_dir(tmp.path()).output().expect("cargo fetch");
    assert!(out.status.success(), "cargo fetch {name} {version}: {}", stderr(&out));
    registry_crate(name, version)
}

/// A checkout shaped like quinn's repository (quinn, quinn-proto and quinn-udp side by side, quinn
/// depending on the other two by path) from the registry's sources of one older release.
fn quinn_repository(dir: &Path, quinn: &str, proto: &str, udp: &str) {
    std::fs::create_dir(dir).expect("mkdir");
    for (name, version) in [("quinn", quinn), ("quinn-proto", proto), ("quinn-udp", udp)] {
        copy_dir(&fetched_crate(name, version), &dir.join(name));
    }
    // The registry's manifest names them by version only; the repository's by path.
    let manifest = dir.join("quinn/Cargo.toml");
    edit(&manifest, "[dependencies.proto]\n", "[dependencies.proto]\npath = \"../quinn-proto\"\n");
    edit(&manifest, "[dependencies.udp]\n", "[dependencies.udp]\npath = \"../quinn-udp\"\n");
}

fn registry_quinn() -> PathBuf {
    registry_crate("quinn", env!("NESQUIC_TEST_QUINN_VERSION"))
}

fn copy_dir(from: &Path, to: &Path) {
    let st = Command::new("cp").arg("-r").arg(from).arg(to).status().expect("cp");
    assert!(st.success());
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn commit_all(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// Replaces `from` (which must be there) by `to` in `file`, the first time only.
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    assert!(text.contains(from), "{} has no {from:?}", file.display());
    std::fs::write(file, text.replacen(from, to, 1)).expect("write");
}

/// Sets a registry crate copy's package version (the first `version = ` line is `[package]`'s).
fn set_version(dir: &Path, to: &str) {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("Cargo.toml");
    let at = text.find("\nversion = \"").expect("package version") + 1;
    let end = at + text[at..].find('\n').expect("line end");
    std::fs::write(&manifest, format!("{}version = \"{to}\"{}", &text[..at], &text[end..])).expect("write");
}

/// quinn's cap on datagrams per GSO batch, raised (10 in every quinn 0.11).
fn raise_gso_batch(quinn: &Path) {
    edit(
        &quinn.join("src/connection.rs"),
        "const MAX_TRANSMIT_SEGMENTS: usize = 10;",
        "const MAX_TRANSMIT_SEGMENTS: usize = 44;",
    );
}

fn break_crate(dir: &Path) {
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("lib.rs");
    std::fs::write(&lib, format!("{text}\ncompile_error!(\"nesquic test: this checkout is broken\");\n"))
        .expect("write");
}

fn record(dir: &Path) -> RunRecord {
    RunRecord::load(&dir.join("summary.json")).expect("summary.json")
}

/// Server datagrams per sendmsg (the probes' median over repetitions).
/// `nesquic run ARGS --lut-path CHECKOUT --out OUT_DIR`; fails the test unless it succeeds;
/// returns its record.
fn run_checkout(args: &[&str], checkout: &Path, out_dir: &Path) -> RunRecord {
    let out = nesquic()
        .arg("run")
        .args(args)
        .arg("--lut-path")
        .arg(checkout)
        .arg("--out")
        .arg(out_dir)
        .output()
        .expect("run");
    assert!(out.status.success(), "run {args:?} --lut-path {}: {}", checkout.display(), stderr(&out));
    record(out_dir)
}

fn datagrams_per_send(r: &RunRecord) -> f64 {
    IoFigures::of(&r.repetitions, r.size_bytes).server_datagrams_per_send.expect("--probe io figures")
}

/// A version not in Nesquic's lock, as in the real case (a 0.11.11 checkout, 0.11.12 locked).
fn other_version(locked: &str) -> String {
    let (head, patch) = locked.rsplit_once('.').expect("x.y.z");
    let patch: u32 = patch.parse().expect("patch number");
    format!("{head}.{}", if patch > 0 { patch - 1 } else { patch + 1 })
}

#[test]
fn builds_and_runs_against_a_local_quinn_and_records_its_revision() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("quinn");
    copy_dir(&registry_quinn(), &checkout);
    git(&checkout, &["init", "-q"]);
    let head = commit_all(&checkout, "x");

    let out_dir = tmp.path().join("run");
    let r = run_checkout(&["--size", "2MB"], &checkout, &out_dir);
    let source = r.lut.source.as_ref().expect("lut.source");
    assert_eq!(source.revision, head);
    assert!(!source.dirty);
    assert_eq!(source.linked[0].name, "quinn");
    assert_eq!(source.linked[0].version, env!("NESQUIC_TEST_QUINN_VERSION"));
    assert_eq!(source.linked[0].path, checkout.canonicalize().expect("canonical"));
    assert_eq!(r.repetitions[0].bytes, 2_000_000);
    assert!(r.lut.binary.to_string_lossy().contains("lut-builds"), "{:?}", r.lut.binary);

    // Break the checkout: the build must fail, so the adapter really is built from it.
    break_crate(&checkout);
    let out = nesquic().args(["run", "--size", "1MB", "--lut-path"]).arg(&checkout).output().expect("run");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("this checkout is broken") && err.contains("building the quinn adapter"), "{err}");

    let out = nesquic().args(["run", "--lut-path"]).arg(tmp.path().join("nowhere")).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("no such directory"));
}

/// The issue's case: a quinn checkout whose version differs from Nesquic's lock, with quinn's GSO
/// batch cap raised 10 -> 44. Before, cargo left the patch unused and the registry's quinn ran
/// (~9.7 datagrams per sendmsg, labelled as the checkout); now the checkout's code runs.
#[test]
fn a_checkout_of_another_version_runs_its_own_code() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("quinn");
    copy_dir(&registry_quinn(), &checkout);
    let version = other_version(env!("NESQUIC_TEST_QUINN_VERSION"));
    set_version(&checkout, &version);
    raise_gso_batch(&checkout);

    let out_dir = tmp.path().join("run");
    // Syscall tracepoints: exact counts whatever the user-space agent can hook.
    let r = run_checkout(&["--probe", "io", "--probe-backend", "kernel", "--size", "25MB"], &checkout, &out_dir);
    let per_send = datagrams_per_send(&r);
    assert!(per_send > 20.0, "server datagrams per sendmsg {per_send}: not the checkout's quinn");
    let source = r.lut.source.as_ref().expect("lut.source");
    assert_eq!(source.linked[0].version, version);
    assert_eq!(source.revision, "not a git checkout");
    assert!(source.proof.contains("no unused [patch]"), "{}", source.proof);
    assert!(r.lut.version.starts_with(&version), "{}", r.lut.version);

    // Broken and of another version: it must fail, never fall back to the registry's quinn.
    break_crate(&checkout);
    let out = nesquic().args(["run", "--size", "1MB", "--lut-path"]).arg(&checkout).output().expect("run");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("this checkout is broken") && err.contains("building the quinn adapter"), "{err}");
}

/// A checkout the adapter cannot use (quinn 0.13, past the adapter's `quinn >=0.11, <0.13`):
/// refused by name before compiling, never the registry's quinn in its place (the old code built
/// and ran the registry's), the error naming the requirement and the other major version.
#[test]
fn a_checkout_of_another_major_version_is_refused_before_building() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("quinn");
    copy_dir(&registry_quinn(), &checkout);
    set_version(&checkout, "0.13.0");
    let out = nesquic().args(["run", "--size", "1MB", "--lut-path"]).arg(&checkout).output().expect("run");
    assert!(!out.status.success());
    let err = stderr(&out);
    let registry = format!("holds quinn {} from registry", env!("NESQUIC_TEST_QUINN_VERSION"));
    assert!(err.contains(&registry) && err.contains("beside the checkout's 0.13.0"), "{err}");
    assert!(err.contains("requirement quinn >=0.11, <0.13") && err.contains("another major version"), "{err}");
    assert!(!err.contains("Compiling"), "{err}");
}

/// quinn's 0.11.x branch as a developer has it: a repository of quinn, quinn-proto and quinn-udp,
/// all older than Nesquic's lock (here the quinn 0.11.8 release: quinn-proto 0.11.12 where the
/// lock has a newer one). The lock's registry quinn-proto used to stay beside the checkout's
/// (both meet quinn's `^0.11.12`: two copies, refused); now it is moved to the checkout's, one
/// copy of each crate links, the checkout's raised GSO batch shows in the datagrams per send,
/// and the release's missing qlog is turned off with a note, not a failed build.
#[test]
fn an_older_release_with_crates_below_the_lock_runs_one_copy_of_each() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("quinn-repo");
    quinn_repository(&repo, "0.11.8", "0.11.12", "0.5.12");
    raise_gso_batch(&repo.join("quinn"));
    let out_dir = tmp.path().join("run");
    let r = run_checkout(&["--probe", "io", "--probe-backend", "kernel", "--size", "25MB"], &repo, &out_dir);
    let source = r.lut.source.as_ref().expect("lut.source");
    let linked: Vec<(&str, &str)> = source.linked.iter().map(|c| (c.name.as_str(), c.version.as_str())).collect();
    assert_eq!(linked, [("quinn", "0.11.8"), ("quinn-proto", "0.11.12"), ("quinn-udp", "0.5.12")]);
    assert_eq!(source.linked[1].path, repo.join("quinn-proto").canonicalize().expect("canonical"));
    assert!(source.proof.contains("qlog off (quinn 0.11.8 has no qlog feature)"), "{}", source.proof);
    let per_send = datagrams_per_send(&r);
    assert!(per_send > 20.0, "server datagrams per sendmsg {per_send}: not the checkout's quinn");
    assert_eq!(r.repetitions[0].bytes, 25_000_000);
}

/// `ab --lut-path REPO --base-rev A --head-rev B`: two commits of one repository (quinn and
/// quinn-udp side by side, quinn of another version than the lock), B raising the GSO batch cap;
/// then the working tree with an uncommitted change is recorded as dirty.
#[test]
fn ab_compares_two_commits_of_one_repository() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, version) = quinn_and_udp_repository(tmp.path());
    let base = commit_all(&repo, "base");
    raise_gso_batch(&repo.join("quinn"));
    let head = commit_all(&repo, "head");

    let out_dir = tmp.path().join("ab");
    let out = nesquic()
        .args(["ab", "--rounds", "2", "--probe", "io", "--probe-backend", "kernel", "--size", "25MB"])
        .args(["--base-rev", "HEAD~1", "--head-rev"])
        .arg(&head)
        .arg("--lut-path")
        .arg(&repo)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("ab");
    // 0 pass or 1 regression are verdicts; 2 is a failed build or run.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let (b, h) = (record(&out_dir.join("base")), record(&out_dir.join("head")));
    let (bs, hs) = (b.lut.source.as_ref().expect("base source"), h.lut.source.as_ref().expect("head source"));
    assert_eq!((bs.revision.as_str(), hs.revision.as_str()), (base.as_str(), head.as_str()));
    assert_eq!(bs.requested_rev.as_deref(), Some("HEAD~1"));
    assert!(!bs.dirty && !hs.dirty);
    assert_eq!(bs.path, repo.canonicalize().expect("canonical"));
    assert_ne!(bs.worktree, hs.worktree);
    let names: Vec<(&str, &str)> = hs.linked.iter().map(|c| (c.name.as_str(), c.version.as_str())).collect();
    assert_eq!(names, [("quinn", version.as_str()), ("quinn-udp", env!("NESQUIC_TEST_QUINN_UDP_VERSION"))]);
    let (per_send_base, per_send_head) = (datagrams_per_send(&b), datagrams_per_send(&h));
    assert!(per_send_base <= 10.0 && per_send_head > 20.0, "datagrams per sendmsg {per_send_base} -> {per_send_head}");

    // The working tree itself, with a change not committed: recorded as dirty.
    edit(&repo.join("quinn/src/lib.rs"), "", "// an uncommitted change\n");
    let run_dir = tmp.path().join("dirty");
    let source = run_checkout(&["--size", "1MB"], &repo, &run_dir).lut.source.expect("lut.source");
    assert!(source.dirty && source.revision == head && source.requested_rev.is_none(), "{source:?}");

    // Revisions that are not there, and a directory that is no repository.
    let out = nesquic().args(["run", "--lut-rev", "no-such-branch", "--lut-path"]).arg(&repo).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("no such commit"), "{}", stderr(&out));
    let plain = tmp.path().join("plain");
    copy_dir(&registry_quinn(), &plain);
    let out = nesquic().args(["run", "--lut-rev", "HEAD", "--lut-path"]).arg(&plain).output().expect("run");
    assert!(!out.status.success() && stderr(&out).contains("not a git repository"), "{}", stderr(&out));
}

/// `pinned-source.sh` of a scripted LUT: its pinned library's source, writable, in `dir`/src.
fn pinned_source(lut: &str, dir: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lut-adapters").join(lut).join("pinned-source.sh");
    let out = Command::new(script).arg(dir.join("src")).output().expect("pinned-source.sh");
    assert!(out.status.success(), "{lut}: {}", stderr(&out));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The stacks built by their own script (`SourceBuild::Script`), through `nesquic run
/// --lut-path`: the checkout is edited so that every process loading the library writes its role
/// to a log; the pinned build writes nothing, so the log proves the checkout's code ran.
#[test]
fn scripted_luts_run_the_checkout_through_nesquic() {
    let _serial = serial();
    for lut in ["quic-go", "aioquic"] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let checkout = pinned_source(lut, tmp.path());
        let log = tmp.path().join("loaded-by");
        let quoted = format!("{:?}", log.to_str().expect("UTF-8 path"));
        match lut {
            "quic-go" => std::fs::write(
                checkout.join("nesquic_test_marker.go"),
                format!(
                    "package quic\n\nimport \"os\"\n\nfunc init() {{\n\trole := \"-\"\n\tif len(os.Args) > 1 {{\n\t\trole = \
                     os.Args[1]\n\t}}\n\tif f, err := os.OpenFile({quoted}, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); \
                     err == nil {{\n\t\tf.WriteString(role + \"\\n\")\n\t\tf.Close()\n\t}}\n}}\n"
                ),
            )
            .expect("marker"),
            _ => {
                let init = checkout.join("src/aioquic/__init__.py");
                let text = std::fs::read_to_string(&init).expect("__init__.py");
                let marker = format!(
                    "\nimport sys as _s\nwith open({quoted}, \"a\") as _f:\n    _f.write((_s.argv[1] if len(_s.argv) > 1 else \"-\") + \"\\n\")\n"
                );
                std::fs::write(&init, text + &marker).expect("marker");
            }
        }
        let out_dir = tmp.path().join("run");
        let run = run_checkout(&["--lut", lut, "--size", "1MB"], &checkout, &out_dir);
        let roles = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(roles.lines().any(|l| l == "server") && roles.lines().any(|l| l == "client"), "{lut}: {roles:?}");
        let source = run.lut.source.expect("lut.source");
        assert!(source.proof.contains(checkout.to_str().expect("UTF-8")), "{lut}: {}", source.proof);
        assert_eq!(source.path, checkout.canonicalize().expect("canonical"));
    }
}

/// A second cargo LUT: quiche (main workspace, over Nesquic's I/O layer), from the registry's
/// source edited so that `accept` and `connect` write their role to a log; the pinned build
/// writes nothing. The first build compiles BoringSSL (minutes), once for every checkout.
#[test]
fn quiche_runs_the_checkout_through_a_cargo_patch() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("quiche");
    copy_dir(&registry_crate("quiche", env!("NESQUIC_TEST_QUICHE_VERSION")), &checkout);
    let log = tmp.path().join("loaded-by");
    let mark = |role: &str| {
        format!(
            "    {{\n        use std::io::Write as _;\n        if let Ok(mut f) = \
             std::fs::OpenOptions::new().create(true).append(true).open({:?}) {{\n            \
             let _ = writeln!(f, \"{role}\");\n        }}\n    }}\n",
            log.to_str().expect("UTF-8 path")
        )
    };
    let lib = checkout.join("src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).expect("lib.rs");
    for (function, role) in [("\npub fn accept(\n", "server"), ("\npub fn connect(\n", "client")] {
        // The first statement of the function's body.
        let at = text.find(function).expect(function);
        let body = at + text[at..].find("{\n").expect("body") + 2;
        text.insert_str(body, &mark(role));
    }
    std::fs::write(&lib, text).expect("write lib.rs");
    let out_dir = tmp.path().join("run");
    let run = run_checkout(&["--lut", "quiche", "--size", "1MB"], &checkout, &out_dir);
    let roles = std::fs::read_to_string(&log).unwrap_or_default();
    let mut roles: Vec<&str> = roles.lines().collect();
    roles.sort_unstable();
    // One connection: one connect in the client, one accept in the server.
    assert_eq!(roles, ["client", "server"]);
    let source = run.lut.source.expect("lut.source");
    assert_eq!(source.linked[0].name, "quiche");
    assert_eq!(source.linked[0].path, checkout.canonicalize().expect("canonical"));
}

/// docs/ci.md's GitHub Actions step, as written there, on a local repository with a base and a
/// head commit of quinn (scripts/ci-recipe-check.sh): a Markdown verdict, and each side's record
/// names its commit.
#[test]
fn the_ci_recipe_of_the_docs_runs_on_a_local_repository() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci-recipe-check.sh");
    let out = Command::new(script)
        .arg(tmp.path())
        .env("NESQUIC_BIN", env!("CARGO_BIN_EXE_nesquic"))
        .output()
        .expect("ci-recipe-check.sh");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("ci-recipe-check: PASS"), "{}", stderr(&out));
    let base = record(&tmp.path().join("stack/nesquic-runs/base"));
    let head = record(&tmp.path().join("stack/nesquic-runs/head"));
    let (b, h) = (base.lut.source.expect("base source"), head.lut.source.expect("head source"));
    assert_ne!(b.revision, h.revision);
    assert_eq!(h.requested_rev.as_deref(), Some("HEAD"));
}

/// `bisect` over a constructed 16-commit history of quinn (quinn and quinn-udp from the
/// registry, laid out as a repository): commit 11 lowers quinn's GSO batch cap from 10 to 9
/// datagrams (about 10% more send syscalls), the others touch a README. It finds commit 11 in
/// four steps, building five commits (the good one and four midpoints). Slow: five quinn builds
/// and six or more A/B jobs: 360 s and 650 s on two cores shared with other builds (2026-12-07). At 6
/// rounds the +9% at commit 11 was still inconclusive (Holm over every counter tested) and
/// counted as not regressed: the cap is 12 here.
///
/// Not in `just test` (CI's 90 minutes hold the rest of the suite with little to spare): `just
/// test-slow` runs it.
#[test]
#[ignore = "6-11 minutes: `just test-slow` runs it"]
fn bisect_finds_the_commit_that_adds_sends() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, _) = quinn_and_udp_repository(tmp.path());
    let mut commits = vec![commit_all(&repo, "good")];
    for i in 1..=16 {
        if i == 11 {
            edit(
                &repo.join("quinn/src/connection.rs"),
                "const MAX_TRANSMIT_SEGMENTS: usize = 10;",
                "const MAX_TRANSMIT_SEGMENTS: usize = 9;",
            );
        } else {
            std::fs::write(repo.join("README.md"), format!("commit {i}\n")).expect("README");
        }
        commits.push(commit_all(&repo, &format!("commit {i}")));
    }
    let out = nesquic()
        .args(["bisect", "--good", "HEAD~16", "--bad", "HEAD", "--rounds", "3", "--max-rounds", "12"])
        .args(["--probe", "io", "--probe-backend", "kernel", "--size", "10MB"])
        .args(["--fail-on", "server.send_syscalls>+3%", "--lut-path"])
        .arg(&repo)
        .arg("--out")
        .arg(tmp.path().join("bisect"))
        .output()
        .expect("bisect");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    assert!(stdout.contains(&format!("first bad commit: {} (5 commits built", commits[11])), "{stdout}");
    // Each step is printed: 8, then 12, 10 and 11 (16 commits after the good one); an
    // inconclusive one again with more rounds.
    let mut measured: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("step: "))
        .filter_map(|l| l.split_once("(commit ").and_then(|(_, rest)| rest.split_once(' ')).map(|(n, _)| n))
        .collect();
    measured.dedup();
    assert_eq!(measured, ["8", "12", "10", "11"], "{stdout}");
}

/// A git repository (nothing committed yet) under `dir` shaped like quinn's: the registry's quinn
/// and quinn-udp side by side, quinn at another version than the lock's (returned).
fn quinn_and_udp_repository(dir: &Path) -> (PathBuf, String) {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    copy_dir(&registry_quinn(), &repo.join("quinn"));
    copy_dir(&registry_crate("quinn-udp", env!("NESQUIC_TEST_QUINN_UDP_VERSION")), &repo.join("quinn-udp"));
    let version = other_version(env!("NESQUIC_TEST_QUINN_VERSION"));
    set_version(&repo.join("quinn"), &version);
    git(&repo, &["init", "-q"]);
    (repo, version)
}

/// A stand-in for a stack's own interop endpoint, no QUIC in it: the server binds its UDP port
/// and waits (interop servers never exit), the client copies the served file into the download
/// directory, seen through a fixed path (`/nesquic-endpoint-test`, as interop clients write
/// `/downloads`), flipping byte 1000 with `corrupt`. It drives the whole endpoint harness: the
/// build step, the port watched, the mount namespace, the server stopped, the download checked.
fn copy_endpoint(dir: &Path, corrupt: bool) -> (PathBuf, PathBuf) {
    let checkout = dir.join("copycat");
    std::fs::create_dir_all(&checkout).expect("mkdir");
    let server = "#!/bin/sh\nexec python3 -c 'import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind((\"127.0.0.1\",int(sys.argv[1])))\ntime.sleep(600)' \"$1\"\n";
    let flip = if corrupt { "printf X | dd of=\"$2\" bs=1 seek=1000 conv=notrunc 2>/dev/null\n" } else { "" };
    let client = format!("#!/bin/sh\nset -e\ncp \"$1\" \"$2\"\n{flip}");
    for (name, text) in [("server.sh", server), ("client.sh", client.as_str())] {
        std::fs::write(checkout.join(name), text).expect("write");
    }
    let recipe = dir.join("copycat.toml");
    std::fs::write(
        &recipe,
        r#"name = "copycat"
description = "test stand-in: the client copies the served file"
repository = "none"
tls = "none"
[build]
steps = ["cp {checkout}/server.sh {checkout}/client.sh {out}/ && chmod +x {out}/server.sh {out}/client.sh"]
[server]
program = "{out}/server.sh"
args = ["{port}"]
cert = "{certs}/cert.pem"
key = "{certs}/key.pem"
[client]
program = "{out}/client.sh"
args = ["{www}/{file}", "/nesquic-endpoint-test/{file}"]
mounts = { "/nesquic-endpoint-test" = "{downloads}" }
download = "{downloads}/{file}"
"#,
    )
    .expect("write recipe");
    (checkout, recipe)
}

/// An endpoint run records how the stack was driven and that the download was checked; the
/// mount point it made is gone afterwards.
#[test]
fn an_endpoint_download_is_verified_and_the_record_says_it_was_driven_by_its_endpoint() {
    // One endpoint run at a time: the mount point made by one run is removed when it ends.
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let (checkout, recipe) = copy_endpoint(dir.path(), false);
    let (checkout, recipe) = (checkout.to_str().expect("UTF-8"), recipe.to_str().expect("UTF-8"));
    let args = ["--lut", "copycat", "--endpoint-recipe", recipe, "--lut-path", checkout, "--size", "3MB"];
    let report = common::run_record(&args);
    // Each temporary checkout builds into a new directory under target/lut-builds/.
    if let Some(out) =
        report.lut.binary.parent().filter(|d| d.to_string_lossy().contains("/lut-builds/endpoint-copycat-"))
    {
        let _ = std::fs::remove_dir_all(out);
    }
    let rep = &report.repetitions[0];
    assert_eq!((rep.bytes, rep.payload_verified), (3_000_000, true), "{rep:?}");
    let kind = serde_json::to_value(&report.lut.driven_by).expect("json");
    assert_eq!(kind, serde_json::json!({"kind": "endpoint", "recipe": "copycat"}));
    assert!(report.lut.source.is_some(), "{:?}", report.lut);
    assert!(rep.transfer_s > 0.0 && rep.goodput_mbps > 0.0, "{rep:?}");
    assert!(!Path::new("/nesquic-endpoint-test").exists(), "the mount point made for the run is left");
}

/// A download that differs from the payload served fails the run, naming the offset.
#[test]
fn an_endpoint_download_that_differs_fails_the_run_at_its_offset() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let (checkout, recipe) = copy_endpoint(dir.path(), true);
    let out = nesquic()
        .args(["run", "--lut", "copycat", "--endpoint-recipe"])
        .arg(&recipe)
        .arg("--lut-path")
        .arg(&checkout)
        .args(["--size", "3MB"])
        .output()
        .expect("run nesquic");
    let err = stderr(&out);
    // The build step's line names the temporary checkout's build directory: remove it.
    let built = err.split_whitespace().find(|w| w.contains("/lut-builds/endpoint-copycat-"));
    if let Some(out_dir) = built.and_then(|w| w.split("/lut-builds/").nth(1)).and_then(|r| r.split('/').next()) {
        let root = built.and_then(|w| w.split("/lut-builds/").next()).unwrap_or_default();
        let _ = std::fs::remove_dir_all(Path::new(&format!("{root}/lut-builds/{out_dir}")));
    }
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("differs from the payload served") && err.contains("offset 1000"), "{err}");
}
