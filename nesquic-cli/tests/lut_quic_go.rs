//! The quic-go LUT (a Go executable, `lut-adapters/quic-go/`) end to end: bulk transfers over
//! loopback and veth, every workload shape, its Go crypto counted by the kernel probes (Go
//! binaries are static: no user-space agent; no return probes: counting only), GSO on and off,
//! the trust anchor really checked, and payloads that agree with quinn's in both directions; and
//! an older release than the pinned one, from the Go module proxy, built as a checkout.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::lut::{calls, role, syscall, verified};
use common::{nesquic, run_record, serial, stderr, Role};

/// The Go executable; `just build` builds it (CI has Go).
fn quic_go() -> PathBuf {
    common::lut::lut_binary("quic-go", "`just build` builds it when Go is installed (lut-adapters/quic-go/build.sh)")
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    quic_go();
    common::lut::bulk_transfers_are_verified_over_loopback_and_veth("quic-go", "v0.");
}

#[test]
fn go_crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    quic_go();
    let report = run_record(&["--lut", "quic-go", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    let probes = common::probes(&report, 0);
    assert_eq!(
        common::json_name(&probes.io_mechanism),
        "syscall tracepoints (syscalls:sys_enter_*/sys_exit_*)",
        "static Go binary"
    );
    let (server, client) = (role(&report, Role::Server), role(&report, Role::Client));
    for (name, r) in [(Role::Server, server), (Role::Client, client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name:?}: no {category}");
        }
        for f in &r.functions {
            assert_eq!((f.timed, common::function_mechanism(f).as_str()), (false, "uprobe"), "{f:?}");
        }
        // Every packet's header is protected or unprotected once per seal or open (a few
        // handshake-time packets aside: coalesced, or dropped before decryption).
        let (seal, open) = (calls(r, "crypto.seal"), calls(r, "crypto.open"));
        let hp = calls(r, "crypto.header_protection");
        assert!(hp.abs_diff(seal + open) <= 16, "{name:?}: {hp} header protections for {seal} seals + {open} opens");
    }
    // quic-go sends with sendmsg (GSO) and receives with recvmmsg. One seal per packet: at least
    // one per datagram sent, a few more where handshake packets share a datagram.
    let (_, sent, messages) = syscall(server, "sendmsg");
    let seals = calls(server, "crypto.seal");
    assert!(seals >= sent && seals <= sent + 16, "server: {seals} seals for {sent} datagrams sent");
    assert!(sent >= 3 * messages, "GSO packs several datagrams per sendmsg: {sent} in {messages}");
    // The client opens what it received, less what quic-go dropped unopened when its receive
    // queue was full (qlog: packet_dropped, dos_prevention): most of it, never more.
    let (_, received, _) = syscall(client, "recvmmsg");
    let opens = calls(client, "crypto.open");
    assert!(opens <= received + 16 && opens * 2 > received, "client: {opens} opens for {received} datagrams");
    assert!(received >= sent, "loopback loses nothing: client received {received}, server sent {sent}");
}

#[test]
fn timing_go_functions_is_refused_with_the_reason() {
    quic_go();
    for args in [
        &["run", "--lut", "quic-go", "--probe", "crypto.seal:time"][..],
        &["probes", "--lut", "quic-go", "--probe", "crypto:time"],
    ] {
        let out = nesquic().args(args).output().expect("run nesquic");
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("cannot be timed") && err.contains("is a Go program") && err.contains("uretprobe"),
            "{err}"
        );
    }
}

#[test]
fn gso_off_sends_one_datagram_per_syscall_and_on_batches() {
    let _g = serial();
    quic_go();
    common::lut::offload_off_is_one_datagram_per_syscall_and_on_batches("quic-go", "gso", Role::Server, "sendmsg");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    common::lut::only_the_runs_certificate_is_trusted(&quic_go(), "", "certificate signed by unknown authority");
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    common::lut::payloads_agree_with_quinn(&quic_go(), "");
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    quic_go();
    common::lut::a_corrupted_byte_is_reported_at_its_offset("quic-go");
}

#[test]
fn the_qlog_of_quic_go_is_merged_into_the_traces() {
    quic_go();
    common::lut::the_library_qlog_is_merged("quic-go", "\"original_name\":\"transport:packet_sent\"");
}

/// An older quic-go than go.mod pins: before v0.53 (connections are interfaces), v0.55 (no
/// ConnectionStats) and v0.56 (no qlogwriter), so every version-dependent part of the adapter is
/// the other variant.
const OLDER_RELEASE: &str = "v0.52.0";

/// The Go toolchain: where lut-adapters/quic-go's scripts look for it too.
fn go() -> Command {
    let go = if Path::new("/usr/local/go/bin/go").is_file() { "/usr/local/go/bin/go" } else { "go" };
    let mut c = Command::new(go);
    c.env("GOTOOLCHAIN", "local").env("GOFLAGS", "-mod=mod");
    c
}

/// `go mod download` of quic-go `version` from the module proxy (or the module cache), copied
/// writable into `dir` under the module cache's name for it, `quic-go@VERSION`.
fn module_download(version: &str, dir: &Path) -> PathBuf {
    #[derive(serde::Deserialize)]
    struct Download {
        #[serde(rename = "Dir")]
        dir: Option<PathBuf>,
        #[serde(rename = "Error")]
        error: Option<String>,
    }
    let module = format!("github.com/quic-go/quic-go@{version}");
    let out = go().args(["mod", "download", "-json", &module]).current_dir(dir).output().expect("run go");
    let info: Download = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("go mod download {module}: {e}: {}", common::stderr(&out)));
    assert!(info.error.is_none(), "go mod download {module}: {:?}", info.error);
    let from = info.dir.unwrap_or_else(|| panic!("go mod download {module}: no Dir"));
    let copy = dir.join(format!("quic-go@{version}"));
    let cp = Command::new("cp").arg("-r").arg(&from).arg(&copy).status().expect("cp");
    assert!(cp.success(), "copy {}", from.display());
    let chmod = Command::new("chmod").arg("-R").arg("u+w").arg(&copy).status().expect("chmod");
    assert!(chmod.success(), "chmod {}", copy.display());
    copy
}

/// A release older than the pinned one, as the module proxy serves it (no .git), builds through
/// `--lut-path` with the build tags its API needs, records that version as what was linked, turns
/// its missing qlog off with a note instead of failing, and moves a verified payload.
#[test]
fn an_older_release_from_the_module_proxy_builds_and_runs_as_a_checkout() {
    let _g = serial();
    quic_go();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = module_download(OLDER_RELEASE, dir.path());
    let path = src.to_str().expect("UTF-8 path");
    let report = run_record(&["--lut", "quic-go", "--lut-path", path, "--size", "5MB", "--probe", "io"]);
    // Each temporary path is a new build directory under target/lut-builds/: remove it after.
    struct Cleanup(Option<PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(dir) = self.0.take().filter(|d| d.to_string_lossy().contains("/target/lut-builds/")) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    let _cleanup = Cleanup(report.lut.binary.parent().map(Path::to_path_buf));
    verified(&report, 5_000_000);

    let source = src.canonicalize().expect("canonical").display().to_string();
    let checkout = report.lut.source.as_ref().unwrap_or_else(|| panic!("no lut.source: {:?}", report.lut));
    assert_eq!(checkout.path.to_str(), Some(source.as_str()), "{:?}", report.lut);
    let linked: Vec<(&str, &str)> = checkout.linked.iter().map(|c| (c.name.as_str(), c.version.as_str())).collect();
    assert_eq!(linked, [("quic-go", OLDER_RELEASE)], "{checkout:?}");
    // The API the checkout has chose the adapter's code: all three older variants.
    for tag in ["nesquic_connif", "nesquic_nostats", "nesquic_noqlog"] {
        assert!(checkout.proof.contains(tag), "build tag {tag} not used: {}", checkout.proof);
    }
    // Each side's executable says, from its own build information, which quic-go it linked,
    // and that its qlog is off for this version.
    let sides = &report.repetitions[0].io_settings;
    assert_eq!(sides.len(), 2, "{sides:?}");
    for (role, side) in sides {
        let stack = &side.stack;
        assert!(stack.starts_with(&format!("quic-go {OLDER_RELEASE} => {source} ")), "{role:?}: {stack}");
        assert!(stack.contains("qlog off: this quic-go has no qlogwriter package"), "{role:?}: {stack}");
    }
    // The io probe measured that version's sends: GSO batches several datagrams per sendmsg.
    let (_, sent, messages) = syscall(role(&report, Role::Server), "sendmsg");
    assert!(messages > 0 && sent >= 2 * messages, "server: {sent} datagrams in {messages} sendmsg");
}

/// The quic-go go.mod pins (lut-adapters/quic-go/go.mod): the release whose interop endpoint
/// the endpoint test builds.
fn pinned_release() -> String {
    let go_mod = include_str!("../../lut-adapters/quic-go/go.mod");
    let line = go_mod.lines().find(|l| l.trim_start().starts_with("github.com/quic-go/quic-go ")).expect("pinned");
    line.split_whitespace().nth(1).expect("version").to_string()
}

/// quic-go's own interop endpoint (`interop/server`, `interop/client`, the runner's `transfer`
/// test over HTTP/0.9), from the module proxy, driven with `--endpoint` instead of the adapter:
/// built by the recipe, its download checked byte for byte, its Go crypto counted and its
/// packet I/O and CPU profiled on each side's own executable.
#[test]
fn its_own_interop_endpoint_from_the_module_proxy_runs_verified_with_io_crypto_and_profile() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = module_download(&pinned_release(), dir.path());
    let path = src.to_str().expect("UTF-8 path");
    let args = ["--lut", "quic-go", "--endpoint", "--lut-path", path, "--size", "5MB", "--probe", "io,crypto,profile"];
    let report = run_record(&args);
    // Each temporary checkout is a new build directory under target/lut-builds/.
    struct Cleanup(Option<PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(dir) = self.0.take().filter(|d| d.to_string_lossy().contains("/target/lut-builds/endpoint-")) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    let _cleanup = Cleanup(report.lut.binary.parent().map(Path::to_path_buf));
    verified(&report, 5_000_000);
    let driven = serde_json::to_value(&report.lut.driven_by).expect("json");
    assert_eq!(driven, serde_json::json!({"kind": "endpoint", "recipe": "quic-go"}));
    // Two programs: each side's probes resolved against its own executable.
    let client_binary = &report.client_side.as_ref().expect("the client is its own program").lut.binary;
    assert_eq!(
        (report.lut.binary.file_name(), client_binary.file_name()),
        (Some("server".as_ref()), Some("client".as_ref()))
    );
    let (server, client) = (role(&report, Role::Server), role(&report, Role::Client));
    // The server's sends carry the payload (quic-go's datagrams are at most 1,452 bytes; GSO:
    // several per sendmsg), sealed once per packet; the client opens what it receives.
    let (_, sent, messages) = syscall(server, "sendmsg");
    assert!(sent * 1452 > 5_000_000 && sent >= 2 * messages, "server: {sent} datagrams in {messages} sendmsg");
    assert!(
        calls(server, "crypto.seal") >= sent,
        "server: {} seals for {sent} datagrams",
        calls(server, "crypto.seal")
    );
    assert!(calls(client, "crypto.open") > 0, "client: no crypto.open");
    let profile = report.repetitions[0].profile.as_ref().expect("profile");
    for side in [Role::Server, Role::Client] {
        let p = profile.roles.iter().find(|p| p.role == side).unwrap_or_else(|| panic!("{side:?}: no profile"));
        assert!(p.samples > 0 && !p.components.is_empty(), "{side:?}: {p:?}");
    }
}
