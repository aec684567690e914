//! The quic-go LUT (a Go executable, `lut-adapters/quic-go/`) end to end: bulk transfers over
//! loopback and veth (every workload shape is in testcases.rs with every other LUT), its Go crypto counted by the kernel probes (Go
//! binaries are static: no user-space agent; no return probes: counting only), GSO on and off,
//! the trust anchor really checked, and payloads that agree with quinn's in both directions.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{nesquic, our_namespaces, run_json, serial, stderr};

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

/// The Go executable; `just build` builds it (CI has Go).
fn quic_go() -> PathBuf {
    let path = target_dir().join("nesquic-lut-quic-go");
    assert!(
        path.exists(),
        "{} missing: `just build` builds it when Go is installed (lut-adapters/quic-go/build.sh)",
        path.display()
    );
    path
}

fn verified(report: &Value, bytes: u64) {
    let rep = &report["repetitions"][0];
    assert_eq!((rep["bytes"].as_u64(), rep["payload_verified"].as_bool()), (Some(bytes), Some(true)), "{rep}");
}

fn role<'a>(report: &'a Value, name: &str) -> &'a Value {
    let roles = report["repetitions"][0]["probes"]["roles"].as_array().expect("roles");
    roles.iter().find(|r| r["role"] == name).unwrap_or_else(|| panic!("{name} missing"))
}

fn calls(role: &Value, category: &str) -> u64 {
    let functions = role["functions"].as_array().expect("functions");
    functions.iter().filter(|f| f["category"] == category).map(|f| f["calls"].as_u64().expect("calls")).sum()
}

/// (calls, datagrams, messages) of one syscall row.
fn syscall(role: &Value, name: &str) -> (u64, u64, u64) {
    let rows = role["io"].as_array().expect("io");
    let s = rows.iter().find(|s| s["syscall"] == name).unwrap_or_else(|| panic!("no {name} in {role}"));
    let n = |f: &str| s[f].as_u64().unwrap_or_else(|| panic!("{f} in {s}"));
    (n("calls"), n("datagrams"), n("messages"))
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    quic_go();
    for link in ["loopback", "veth"] {
        let report = run_json(&["--lut", "quic-go", "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report["lut"]["name"], "quic-go", "{}", report["lut"]);
        assert!(report["lut"]["version"].as_str().is_some_and(|v| v.starts_with("v0.")), "{}", report["lut"]);
    }
    assert!(our_namespaces().is_empty(), "left {:?}", our_namespaces());
}

#[test]
fn go_crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    quic_go();
    let report = run_json(&["--lut", "quic-go", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    let probes = &report["repetitions"][0]["probes"];
    assert_eq!(probes["io_mechanism"], "syscall tracepoints (syscalls:sys_enter_*/sys_exit_*)", "static Go binary");
    let (server, client) = (role(&report, "server"), role(&report, "client"));
    for (name, r) in [("server", server), ("client", client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name}: no {category}");
        }
        for f in r["functions"].as_array().expect("functions") {
            assert_eq!((f["timed"].as_bool(), f["mechanism"].as_str()), (Some(false), Some("uprobe")), "{f}");
        }
        // Every packet's header is protected or unprotected once per seal or open (a few
        // handshake-time packets aside: coalesced, or dropped before decryption).
        let (seal, open) = (calls(r, "crypto.seal"), calls(r, "crypto.open"));
        let hp = calls(r, "crypto.header_protection");
        assert!(hp.abs_diff(seal + open) <= 16, "{name}: {hp} header protections for {seal} seals + {open} opens");
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
    let mut per_call = Vec::new();
    for gso in ["off", "on"] {
        let report =
            run_json(&["--lut", "quic-go", "--size", "5MB", "--probe", "io", "--lut-opt", &format!("gso={gso}")]);
        verified(&report, 5_000_000);
        let (calls, datagrams, _) = syscall(role(&report, "server"), "sendmsg");
        per_call.push(datagrams as f64 / calls as f64);
    }
    assert_eq!(per_call[0], 1.0, "gso=off: {} datagrams per sendmsg", per_call[0]);
    assert!(per_call[1] >= 3.0, "gso=on: {} datagrams per sendmsg", per_call[1]);
}

/// A self-signed DER certificate for `localhost` that the run did not generate.
fn foreign_certificate(dir: &Path) -> PathBuf {
    let (key, cert) = (dir.join("key.pem"), dir.join("other.der"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-outform", "DER", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(out.status.success(), "{}", stderr(&out));
    cert
}

/// `nesquic run --lut exec` with these two commands (NESQUIC_* variables as docs/protocol.md says).
fn exec_run(server: &str, client: &str) -> std::process::Output {
    nesquic()
        .args(["run", "--lut", "exec", "--size", "2MB", "--server-cmd", server, "--client-cmd", client])
        .output()
        .expect("run nesquic")
}

fn server_cmd(binary: &Path) -> String {
    format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", binary.display())
}

fn client_cmd(binary: &Path, ca: &str) -> String {
    format!("{} client --connect $NESQUIC_CONNECT --ca {ca} --size $NESQUIC_SIZE", binary.display())
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    let go = quic_go();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let out = exec_run(&server_cmd(&go), &client_cmd(&go, &other.display().to_string()));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains("certificate signed by unknown authority"), "{err}");
    // The run's own certificate passes with the same commands.
    let out = exec_run(&server_cmd(&go), &client_cmd(&go, "$NESQUIC_CA"));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    let go = quic_go();
    let quinn = target_dir().join("nesquic-lut-quinn");
    for (server, client) in [(&quinn, &go), (&go, &quinn)] {
        let out = exec_run(&server_cmd(server), &client_cmd(client, "$NESQUIC_CA"));
        assert!(out.status.success(), "{} -> {}: {}", server.display(), client.display(), stderr(&out));
    }
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    quic_go();
    let out = nesquic()
        .args(["run", "--lut", "quic-go", "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

#[test]
fn the_qlog_of_quic_go_is_merged_into_the_traces() {
    quic_go();
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", "quic-go", "--size", "2MB", "--lut-qlog", "--out"])
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    for side in ["server", "client"] {
        let trace = std::fs::read_to_string(out_dir.join(format!("{side}.sqlog"))).expect("trace");
        let sent = trace.matches("\"original_name\":\"transport:packet_sent\"").count();
        assert!(sent > 10, "{side}: {sent} quic-go packet_sent events merged");
    }
}
