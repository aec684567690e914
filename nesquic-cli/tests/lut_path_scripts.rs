//! The LUTs that are not cargo crates, built from a checkout of their library
//! (`lut-adapters/<lut>/build-from-source.sh`, what `--lut-path` runs for them): the pinned
//! version's source, fetched from its registry (`pinned-source.sh`) and edited so that the library
//! records every process that loads it, is what a transfer runs (the pinned build records
//! nothing); a second call with nothing changed does not rebuild; a checkout that does not compile
//! fails with the compiler's own error and leaves no executable behind; a directory that is not
//! the library is refused by name.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::lut::{client_cmd, exec_run, server_cmd};
use common::{serial, stderr, RunRecord};
use nesquic_engine::custom_build::ScriptReport;

fn adapters() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lut-adapters")
}

fn script(lut: &str, name: &str) -> PathBuf {
    adapters().join(lut).join(name)
}

/// `pinned-source.sh`: the source of the version the pinned LUT links, writable, in `dir`/src.
fn pinned_source(lut: &str, dir: &Path) -> PathBuf {
    let dest = dir.join("src");
    let out = Command::new(script(lut, "pinned-source.sh")).arg(&dest).output().expect("run pinned-source.sh");
    assert!(out.status.success(), "{lut} pinned-source.sh: {}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(Path::new(&printed), dest.canonicalize().expect("source unpacked"), "{lut}");
    dest
}

fn build(lut: &str, checkout: &Path, out_dir: &Path) -> Output {
    Command::new(script(lut, "build-from-source.sh"))
        .arg("--lut-path")
        .arg(checkout)
        .arg("--out")
        .arg(out_dir)
        .output()
        .expect("run build-from-source.sh")
}

/// The one JSON line of a build that succeeded, and its stderr.
fn built(lut: &str, checkout: &Path, out_dir: &Path) -> (ScriptReport, String) {
    let out = build(lut, checkout, out_dir);
    assert!(out.status.success(), "{lut}: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{lut}: stdout is one JSON line: {stdout}");
    (serde_json::from_str(stdout.trim()).expect("a JSON line"), stderr(&out))
}

fn append(file: &Path, text: &str) {
    let mut old = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    old.push_str(text);
    std::fs::write(file, old).expect("write the checkout");
}

/// Edits the library in `checkout` so that each process that loads it appends its role (its
/// first argument: `server` or `client`) to `log`, at start-up (Go `init`, Python import, an ELF
/// constructor in libngtcp2).
fn mark(lut: &str, checkout: &Path, log: &Path) {
    let log = format!("{:?}", log.to_str().expect("a UTF-8 temporary path"));
    match lut {
        "quic-go" => std::fs::write(
            checkout.join("nesquic_test_marker.go"),
            format!(
                "package quic\n\nimport \"os\"\n\nfunc init() {{\n\trole := \"-\"\n\tif len(os.Args) > 1 {{\n\t\t\
                 role = os.Args[1]\n\t}}\n\tif f, err := os.OpenFile({log}, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); \
                 err == nil {{\n\t\tf.WriteString(role + \"\\n\")\n\t\tf.Close()\n\t}}\n}}\n"
            ),
        )
        .expect("write the marker"),
        "aioquic" => append(
            &checkout.join("src/aioquic/__init__.py"),
            &format!(
                "\nimport sys as _nq_sys\nwith open({log}, \"a\") as _nq_f:\n    \
                 _nq_f.write((_nq_sys.argv[1] if len(_nq_sys.argv) > 1 else \"-\") + \"\\n\")\n"
            ),
        ),
        "ngtcp2" => append(
            &checkout.join("lib/ngtcp2_conn.c"),
            &format!(
                "\n#include <stdio.h>\n__attribute__((constructor)) static void nq_test_marker(int argc, char **argv) {{\n  \
                 FILE *f = fopen({log}, \"a\");\n  if (f) {{\n    fprintf(f, \"%s\\n\", argc > 1 ? argv[1] : \"-\");\n    \
                 fclose(f);\n  }}\n}}\n"
            ),
        ),
        _ => unreachable!("{lut}"),
    }
}

/// Breaks the library in `checkout`; returns what the compiler's error says.
fn break_it(lut: &str, checkout: &Path) -> [&'static str; 2] {
    match lut {
        "quic-go" => {
            std::fs::write(checkout.join("nesquic_broken.go"), "package quic\n\nfunc broken( {\n}\n").expect("write");
            ["nesquic_broken.go:3:", "syntax error"]
        }
        "aioquic" => {
            append(&checkout.join("src/aioquic/_buffer.c"), "\nint broken(\n");
            ["src/aioquic/_buffer.c:", "error: expected declaration specifiers"]
        }
        "ngtcp2" => {
            append(&checkout.join("lib/ngtcp2_conn.c"), "\nint broken(\n");
            ["lib/ngtcp2_conn.c:", "error: expected declaration specifiers"]
        }
        _ => unreachable!("{lut}"),
    }
}

/// The version the pinned LUT names, as the build from its unedited source must report it.
fn pinned_version(lut: &str) -> String {
    let read = |f: &str| std::fs::read_to_string(adapters().join(f)).expect("adapter file");
    match lut {
        // No version in a non-git checkout of a Go module: Go's (devel), and the one go.mod requires.
        "quic-go" => format!("devel, replacing {}", quic_go_required()),
        "aioquic" => {
            let req = read("aioquic/requirements.txt");
            req.lines().find_map(|l| l.strip_prefix("aioquic==")).expect("pin").to_string()
        }
        // Debian's source package: the upstream version pkg-config names.
        "ngtcp2" => {
            let out = Command::new("pkg-config").args(["--modversion", "libngtcp2"]).output().expect("pkg-config");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
        _ => unreachable!("{lut}"),
    }
}

/// The quic-go version the adapter's go.mod requires.
fn quic_go_required() -> String {
    let go_mod = std::fs::read_to_string(adapters().join("quic-go/go.mod")).expect("go.mod");
    let line = go_mod.lines().find(|l| l.trim_start().starts_with("github.com/quic-go/quic-go ")).expect("pin");
    line.split_whitespace().nth(1).expect("version").to_string()
}

/// The roles of the processes that loaded the marked library, sorted.
fn loaded_by(log: &Path) -> Vec<String> {
    let mut roles: Vec<String> = std::fs::read_to_string(log).unwrap_or_default().lines().map(String::from).collect();
    roles.sort();
    roles
}

/// The whole story for one LUT: a marked copy of the pinned source is what a transfer runs
/// (both processes load it, and the build says where it came from and what it proved); nothing
/// changed, nothing rebuilt; broken, the compiler's error and no executable left.
fn a_checkout_is_what_runs_and_a_broken_one_fails(lut: &str, proof: &[&str]) {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = pinned_source(lut, dir.path());
    let log = dir.path().join("loaded-by");
    mark(lut, &src, &log);
    let out_dir = dir.path().join("out");
    let (info, _) = built(lut, &src, &out_dir);
    let source = src.canonicalize().expect("canonical").display().to_string();
    let binary = out_dir.canonicalize().expect("out").join(format!("nesquic-lut-{lut}"));
    assert_eq!(info.binary, binary, "{info:?}");
    assert_eq!(info.source.to_str(), Some(source.as_str()), "{info:?}");
    assert_eq!(info.version, pinned_version(lut), "{info:?}");
    assert_eq!((info.revision.as_str(), info.dirty), ("not a git repository", false));
    let said = &info.proof;
    for words in proof.iter().chain([&source.as_str()]) {
        assert!(said.contains(words), "{lut}: proof lacks {words:?}: {said}");
    }

    // After one transfer, the server and the client loaded the library, once each. (The aioquic
    // build imports it to prove where it loads from: those lines go first.)
    if log.exists() {
        std::fs::remove_file(&log).expect("clear the log");
    }
    let out = exec_run(&server_cmd(&binary), &client_cmd(&binary, "$NESQUIC_CA"));
    assert!(out.status.success(), "{lut} built from {source}: {}", stderr(&out));
    assert_eq!(loaded_by(&log), ["client", "server"], "{lut}: the processes that ran the checkout's library");

    let (again, err) = built(lut, &src, &out_dir);
    assert_eq!(again, info, "{lut}: the cached build's line");
    assert!(err.contains("up to date"), "{lut}: rebuilt with nothing changed: {err}");

    let [place, message] = break_it(lut, &src);
    let out = build(lut, &src, &out_dir);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{lut}: {err}");
    assert!(err.contains(place) && err.contains(message), "{lut}: the compiler's error is not shown: {err}");
    assert!(out.stdout.is_empty(), "{lut}: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!binary.exists(), "{lut}: the previous build's executable is still there to be run by mistake");
}

#[test]
fn quic_go_checkout_is_what_runs_and_a_broken_one_fails() {
    a_checkout_is_what_runs_and_a_broken_one_fails("quic-go", &["replaced by", "go version -m", "=>"]);
}

#[test]
fn aioquic_checkout_is_what_runs_and_a_broken_one_fails() {
    a_checkout_is_what_runs_and_a_broken_one_fails("aioquic", &["import from", "direct_url.json", "identical"]);
}

#[test]
fn ngtcp2_checkout_is_what_runs_and_a_broken_one_fails() {
    a_checkout_is_what_runs_and_a_broken_one_fails(
        "ngtcp2",
        &["libngtcp2.so", "libngtcp2_crypto_gnutls.so", "symbols"],
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=nesquic", "-c", "user.email=nesquic@localhost", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The pinned source of `lut` under `dir`, as a git repository with one commit ("pinned").
fn pinned_git_checkout(lut: &str, dir: &Path) -> PathBuf {
    let src = pinned_source(lut, dir);
    git(&src, &["init", "-q"]);
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "pinned"]);
    src
}

/// A git checkout: its HEAD and whether the tree is dirty are reported, and an edit rebuilds.
#[test]
fn a_git_checkouts_revision_and_dirty_tree_are_reported_and_an_edit_rebuilds() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = pinned_git_checkout("quic-go", dir.path());
    let head = git(&src, &["rev-parse", "HEAD"]);
    let out_dir = dir.path().join("out");
    let (clean, _) = built("quic-go", &src, &out_dir);
    assert_eq!((clean.revision.as_str(), clean.dirty), (head.as_str(), false), "{clean:?}");
    assert_eq!(clean.version, head[..7], "git describe --always: no tag, the short hash");

    let log = dir.path().join("loaded-by");
    mark("quic-go", &src, &log);
    let (dirty, err) = built("quic-go", &src, &out_dir);
    assert!(!err.contains("up to date"), "an edit must rebuild: {err}");
    assert_eq!((dirty.revision.as_str(), dirty.dirty), (head.as_str(), true), "{dirty:?}");
    let run = Command::new(&dirty.binary).arg("server").output().expect("run it");
    assert!(!run.status.success(), "no --listen: a usage error");
    assert_eq!(loaded_by(&log), ["server"], "the edit is in the rebuilt executable");
}

/// Directories that are not the library: refused with what they are, exit 1, nothing on stdout.
#[test]
fn a_directory_that_is_not_the_library_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("go.mod"), "module example.com/other\n\ngo 1.22\n").expect("write");
    std::fs::write(other.join("CMakeLists.txt"), "project(other C)\n").expect("write");
    std::fs::write(other.join("pyproject.toml"), "[project]\nname = \"other\"\n").expect("write");
    for (lut, why) in [
        ("quic-go", "go.mod declares module 'example.com/other', not github.com/quic-go/quic-go"),
        ("aioquic", "neither src/aioquic/__init__.py nor aioquic/__init__.py: not an aioquic checkout"),
        ("ngtcp2", "does not declare project(ngtcp2 ...): not an ngtcp2 checkout"),
    ] {
        let out = build(lut, &other, &dir.path().join(lut));
        assert_eq!(out.status.code(), Some(1), "{lut}");
        assert!(stderr(&out).contains(why), "{lut}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{lut}");
    }
    let out = build("quic-go", &dir.path().join("missing"), &dir.path().join("out"));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("missing: no such directory"), "{}", stderr(&out));
    // Builds never write into the checkout: an --out inside it is refused before anything is created.
    let inside = other.join("out");
    let out = build("ngtcp2", &other, &inside);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is inside the checkout"), "{}", stderr(&out));
    assert!(!inside.exists(), "created {}", inside.display());
    let usage = Command::new(script("ngtcp2", "build-from-source.sh")).output().expect("run");
    assert_eq!(usage.status.code(), Some(2), "no arguments: usage");
}

/// What a `nesquic run --lut-path` of a temporary checkout left under target/lut-builds/ (its
/// build directory, and its worktree with `--lut-rev`), removed when the test is done with it:
/// each temporary path is a new key there (an aioquic build holds a 50 MB venv).
struct Cleanup(Vec<PathBuf>);

impl Cleanup {
    fn of(report: &RunRecord) -> Cleanup {
        let lut = &report.lut;
        let build = lut.binary.parent().map(Path::to_path_buf);
        let worktree = lut.source.as_ref().and_then(|s| s.worktree.clone());
        Cleanup(
            build.into_iter().chain(worktree).filter(|p| p.to_string_lossy().contains("/target/lut-builds/")).collect(),
        )
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Through `nesquic run --lut LUT --lut-path CHECKOUT` (the engine runs the script): both sides
/// of the transfer run the marked checkout's library, and the record names the checkout, the
/// executable built from it and what proved it.
#[test]
fn nesquic_run_lut_path_runs_the_checkout_of_every_script_built_lut() {
    let _g = serial();
    for (lut, proof) in [("quic-go", "replaced by"), ("aioquic", "direct_url.json"), ("ngtcp2", "configured from")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = pinned_source(lut, dir.path());
        let log = dir.path().join("loaded-by");
        mark(lut, &src, &log);
        let path = src.to_str().expect("UTF-8 path");
        let report = common::run_record(&["--lut", lut, "--lut-path", path, "--size", "2MB"]);
        let _cleanup = Cleanup::of(&report);
        common::lut::verified(&report, 2_000_000);
        // The aioquic build imports the library itself (to prove where it loads from), with
        // other first arguments: only the LUT processes write a role.
        let roles: Vec<String> = loaded_by(&log).into_iter().filter(|r| r == "server" || r == "client").collect();
        assert_eq!(roles, ["client", "server"], "{lut}: the processes that ran the checkout's library");
        let source = src.canonicalize().expect("canonical").display().to_string();
        let record = &report.lut;
        let checkout = record.source.as_ref().unwrap_or_else(|| panic!("no lut.source: {record:?}"));
        assert_eq!(checkout.path.to_str(), Some(source.as_str()), "{record:?}");
        let said = &checkout.proof;
        assert!(said.contains(proof) && said.contains(&source), "{lut}: {said}");
        let binary = record.binary.to_str().expect("UTF-8 binary path");
        assert!(binary.contains("/target/lut-builds/") && binary.ends_with(&format!("/nesquic-lut-{lut}")), "{binary}");
        // Each side's own account of its stack names what it linked (quic-go: the replace, not
        // the version go.mod asks for).
        let sides = &report.repetitions[0].io_settings;
        assert_eq!(sides.len(), 2, "{sides:?}");
        for (_, side) in sides {
            let stack = &side.stack;
            let named = match lut {
                "quic-go" => format!("quic-go {} => {source} ", quic_go_required()),
                "aioquic" => format!("aioquic {} ", pinned_version(lut)),
                _ => format!("ngtcp2 {} ", pinned_version(lut)),
            };
            assert!(stack.starts_with(&named), "{lut}: {stack}");
        }
    }
}

/// `--lut-rev` with a script-built LUT: each commit of a git checkout is built from a worktree
/// and runs its own code (the marker is in the second commit only), the record naming the commit.
#[test]
fn lut_rev_runs_each_commit_of_a_script_built_lut() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = pinned_git_checkout("quic-go", dir.path());
    let log = dir.path().join("loaded-by");
    mark("quic-go", &src, &log);
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "marked"]);
    let path = src.to_str().expect("UTF-8 path");
    for (rev, roles) in [("HEAD~1", Vec::<&str>::new()), ("HEAD", vec!["client", "server"])] {
        let commit = git(&src, &["rev-parse", rev]);
        let report = common::run_record(&["--lut", "quic-go", "--lut-path", path, "--lut-rev", rev, "--size", "2MB"]);
        let _cleanup = Cleanup::of(&report);
        common::lut::verified(&report, 2_000_000);
        assert_eq!(loaded_by(&log), roles, "{rev}: the processes that ran the marker");
        let checkout = report.lut.source.as_ref().unwrap_or_else(|| panic!("no lut.source: {:?}", report.lut));
        assert_eq!((checkout.revision.as_str(), checkout.dirty), (commit.as_str(), false), "{:?}", report.lut);
    }
}

/// `--lut-version`: a release older than the pinned one, from each kind of registry (PyPI, the
/// Go module proxy, crates.io), fetched into a checkout-shaped tree, built and run through the
/// checkout path: the record names the registry, the version and the registry's checksum, the
/// build linked that version, and the payload moved verified. A version no registry has fails
/// with the registry's answer, before any build.
#[test]
fn lut_version_builds_and_runs_an_older_release_from_each_kind_of_registry() {
    let _g = serial();
    for (lut, version, registry, checksum) in [
        ("aioquic", "1.2.0", "pypi.org", "sha256:"),
        ("quic-go", "v0.64.0", "proxy.golang.org", "h1:"),
        ("quinn", "0.11.9", "crates.io", "sha256:"),
    ] {
        let report = common::run_record(&["--lut", lut, "--lut-version", version, "--probe", "io", "--size", "2MB"]);
        let _cleanup = Cleanup::of(&report);
        common::lut::verified(&report, 2_000_000);
        let source = report.lut.source.as_ref().unwrap_or_else(|| panic!("{lut}: no lut.source: {:?}", report.lut));
        let release = source.release.as_ref().unwrap_or_else(|| panic!("{lut}: no release: {source:?}"));
        assert_eq!((release.registry.as_str(), release.version.as_str()), (registry, version), "{release:?}");
        assert!(release.checksum.starts_with(checksum) && release.checksum.len() > checksum.len() + 20, "{release:?}");
        let main = source.linked.first().unwrap_or_else(|| panic!("{lut}: nothing linked: {source:?}"));
        assert_eq!(main.version.trim_start_matches('v'), version.trim_start_matches('v'), "{lut}: {source:?}");
        assert!(main.path.starts_with(&source.path), "{lut}: linked from the fetched tree: {source:?}");
        let sent = common::sent(common::role_metrics(&report, common::Role::Server), |s| s.datagrams);
        assert!(sent * 1500 >= 2_000_000, "{lut}: the server sent {sent} datagrams for 2 MB");
    }
    let out = common::nesquic().args(["run", "--lut", "quinn", "--lut-version", "0.0.1-nope"]).output().expect("run");
    // An error, not a usage error (exit 1: the message says which), and nothing was built.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("crates.io has no release resolving quinn =0.0.1-nope"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("building the quinn adapter"), "{}", stderr(&out));
}
