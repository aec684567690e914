//! Client × server pairs (docs/pairs.md): one LUT's server against another LUT's client, the
//! payload verified and both sides probed; pairs that cannot talk refused before anything runs;
//! a failure that names both sides.

mod common;

use common::lut::{role, syscall, verified};
use common::{
    json_name, load_record, nesquic, qlog_trace, run_record, serial, stderr, Role, RoleMetrics, SyscallMetrics,
};
use nesquic_record::events::RunStarted;
use nesquic_render::pairs::PairCell;

/// Payload per run.
const SIZE: u64 = 5_000_000;

/// Datagrams carrying a payload of SIZE at least: no QUIC datagram on loopback here carries more
/// than 1,500 bytes of UDP payload.
const MIN_DATAGRAMS: u64 = SIZE / 1500;

/// Sum of `field` over a side's packet I/O rows in `direction` ("send" or "recv").
fn io_sum(side: &RoleMetrics, direction: &str, field: fn(&SyscallMetrics) -> u64) -> u64 {
    side.io.iter().filter(|r| common::syscall_name(r).starts_with(direction)).map(field).sum()
}

/// The `run_started` event of a run directory's trace for `role`.
fn run_started(dir: &std::path::Path, role: &str) -> RunStarted {
    let (trace, _) = qlog_trace(&dir.join(format!("{role}.sqlog")));
    trace.run_started().expect("typed events").unwrap_or_else(|| panic!("no run_started in {role}.sqlog"))
}

/// Runs `server` against `client` with the io probes and checks what the data guarantee.
fn pair_is_verified_and_probed_on_both_sides(server: &str, client: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let json = dir.path().join("run.json");
    let out = nesquic()
        .args(["run", "--server-lut", server, "--client-lut", client, "--size", "5MB", "--probe", "io", "--markdown"])
        .arg(dir.path().join("summary.md"))
        .arg("--html")
        .arg(dir.path().join("report.html"))
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&run)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "server {server} x client {client}: {}", stderr(&out));
    let report = load_record(&json);
    // The client verified every byte of the pattern the other library's server sent.
    verified(&report, SIZE);
    // The record says which LUT ran on which side.
    assert_eq!(report.lut.name, server, "{:?}", report.lut);
    assert_eq!(report.client_side.as_ref().map(|c| c.lut.name.as_str()), Some(client), "{:?}", report.client_side);
    // Each side's trace names its own LUT.
    assert_eq!(run_started(&run, "server").lut.name, server);
    assert_eq!(run_started(&run, "client").lut.name, client);
    // Both sides' packet I/O was measured: the payload left the server and reached the client.
    let (s, c) = (role(&report, Role::Server), role(&report, Role::Client));
    for (name, side, direction) in [("server", s, "send"), ("client", c, "recv")] {
        let (bytes, datagrams) = (io_sum(side, direction, |r| r.bytes), io_sum(side, direction, |r| r.datagrams));
        assert!(bytes >= SIZE, "{name} {server} x {client}: {bytes} bytes {direction}");
        assert!(datagrams >= MIN_DATAGRAMS, "{name}: {datagrams} datagrams {direction}");
    }
    // The requests and acknowledgements went the other way, measured on both sides too.
    let calls = |r: &SyscallMetrics| r.timing.calls;
    assert!(io_sum(c, "send", calls) > 0 && io_sum(s, "recv", calls) > 0, "{report:?}");
    let page = std::fs::read_to_string(dir.path().join("report.html")).expect("report.html");
    assert!(page.contains(&format!("client LUT</td><td>{client} ")), "the page names the client's LUT");
    assert!(page.contains(&format!("server LUT</td><td>{server} ")), "the page names the server's LUT");
    let md = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary.md");
    assert!(
        md.contains(&format!("### Nesquic: server {server} ")) && md.contains(&format!(" x client {client} ")),
        "{md}"
    );
}

#[test]
fn quinn_and_msquic_talk_both_ways() {
    let _g = serial();
    pair_is_verified_and_probed_on_both_sides("quinn", "msquic");
    pair_is_verified_and_probed_on_both_sides("msquic", "quinn");
}

#[test]
fn quic_go_and_quiche_talk_both_ways() {
    let _g = serial();
    common::lut::lut_binary("quic-go", "`just build` builds it when Go is installed");
    pair_is_verified_and_probed_on_both_sides("quic-go", "quiche");
    pair_is_verified_and_probed_on_both_sides("quiche", "quic-go");
    // quic-go is a static Go binary: the syscall tracepoints measure both sides alike.
    let report = run_record(&["--server-lut", "quiche", "--client-lut", "quic-go", "--size", "1MB", "--probe", "io"]);
    let mechanism = json_name(&common::probes(&report, 0).io_mechanism);
    assert_eq!(mechanism, "syscall tracepoints (syscalls:sys_enter_*/sys_exit_*)");
    assert!(syscall(role(&report, Role::Client), "recvmmsg").0 > 0, "quic-go receives with recvmmsg");
}

/// `nesquic run ARGS`, expected to be refused before anything runs: its stderr.
fn refused(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nesquic()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(dir.path().join("run"))
        .args(["--size", "1MB", "--probe", "none"])
        .output()
        .expect("run nesquic");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
    assert!(!dir.path().join("run").exists(), "{args:?}: a run directory was made");
    stderr(&out)
}

#[test]
fn pairs_that_cannot_talk_are_refused_with_the_reason() {
    let err = refused(&["--server-lut", "tcp-tls", "--client-lut", "quinn"]);
    assert!(err.contains("the server tcp-tls speaks TLS over kernel TCP, the client quinn QUIC"), "{err}");
    // A setting one side lacks: the side is named.
    let err = refused(&["--server-lut", "quinn", "--client-lut", "quiche", "--cipher", "chacha20"]);
    assert!(err.contains("the client quiche") && err.contains("cannot choose its TLS 1.3 cipher suite"), "{err}");
    let err = refused(&["--server-lut", "quinn", "--client-lut", "msquic", "--cc", "newreno"]);
    assert!(err.contains("the client msquic"), "{err}");
    // Two suites offered alone, one per side: no handshake can succeed.
    let err = refused(&[
        "--server-lut",
        "msquic",
        "--client-lut",
        "quinn",
        "--server-lut-opt",
        "cipher=chacha20",
        "--client-lut-opt",
        "cipher=aes256gcm",
    ]);
    assert!(err.contains("no TLS 1.3 cipher suite in common"), "{err}");
    // A remote host runs one LUT: a pair puts one side there, not both.
    let err = refused(&[
        "--server-lut",
        "quinn",
        "--client-lut",
        "msquic",
        "--server-host",
        "a.invalid",
        "--client-host",
        "b.invalid",
    ]);
    assert!(err.contains("run one side of a pair here (not supported per side yet)"), "{err}");
    // One checkout cannot be both libraries.
    let err = refused(&["--server-lut", "quinn", "--client-lut", "msquic", "--lut-path", "/nonexistent"]);
    assert!(err.contains("--server-lut-path or --client-lut-path"), "{err}");
}

#[test]
fn a_failing_side_is_named_with_both_luts() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nesquic()
        .args(["run", "--server-lut", "quinn", "--client-lut", "msquic", "--size", "5MB", "--probe", "none"])
        .arg("--out")
        .arg(dir.path().join("run"))
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .env("NESQUIC_FAULT_SERVER_ABORT_AFTER_BYTES", "1000000")
        .output()
        .expect("run nesquic");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("server quinn x client msquic rep 1/1 failed") && err.contains("server (quinn)"), "{err}");
}

#[test]
fn the_pair_matrix_puts_clients_in_rows_and_says_why_a_pair_did_not_run() {
    let _g = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("pairs.json");
    let out = nesquic()
        .args(["matrix", "--servers", "quinn,tcp-tls", "--clients", "msquic", "--size", "2MB", "--repeat", "2"])
        .args(["--probe", "none", "--markdown", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(dir.path().join("pairs.html"))
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| client \\ server | quinn | tcp-tls |"), "{text}");
    assert!(text.contains("| msquic | ") && text.contains(" | - [1] |"), "{text}");
    assert!(
        text.contains("[1] server tcp-tls x client msquic: the server tcp-tls speaks TLS over kernel TCP"),
        "{text}"
    );
    let cells: Vec<PairCell> = common::load_json(&json);
    assert_eq!(cells.len(), 2);
    // Two rounds of the pair that runs, none of the other.
    assert_eq!((cells[0].server.as_str(), cells[0].client.as_str()), ("quinn", "msquic"));
    assert_eq!(cells[0].rounds, 2, "{:?}", cells[0]);
    assert_eq!(cells[0].run_dirs.len(), 2);
    assert_eq!(cells[1].rounds, 0);
    // What bound the pair that ran (per-thread times are read whatever the probes); none for the other.
    assert!(text.contains("binding constraint"), "{text}");
    let binding = cells[0].binding.as_deref().expect("binding constraint");
    assert!(["CPU (", "none named"].iter().any(|l| binding.contains(l)), "{binding}");
    assert_eq!(cells[1].binding, None);
    let page = std::fs::read_to_string(dir.path().join("pairs.html")).expect("page");
    assert!(page.contains("<td title=\"server tcp-tls x client msquic: the server tcp-tls"), "heat map cell says why");
}

#[test]
fn each_sides_agent_hooks_its_own_crypto_and_reports_no_foreign_function() {
    let _g = serial();
    let report =
        run_record(&["--server-lut", "quinn", "--client-lut", "msquic", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, SIZE);
    let agents = &report.repetitions[0].agents;
    assert_eq!(agents.len(), 2, "{agents:?}");
    for a in agents {
        let functions = &a.functions;
        // Only the side's own functions, every one hooked (msquic's CxPlat* in the client only).
        assert!(!functions.is_empty() && functions.iter().all(|f| f.patched), "{a:?}");
        let msquic = functions.iter().any(|f| f.name.starts_with("CxPlat"));
        assert_eq!(msquic, a.role == Role::Client, "{a:?}");
    }
    // Every payload packet is sealed by the server and opened by the client.
    let (s, c) = (role(&report, Role::Server), role(&report, Role::Client));
    assert!(common::lut::calls(s, "crypto.seal") >= MIN_DATAGRAMS, "{s:?}");
    assert!(common::lut::calls(c, "crypto.open") >= MIN_DATAGRAMS, "{c:?}");
}
