//! Checks the end-to-end tests of each LUT share (quic-go, s2n-quic, ...): where the executables
//! are, what a run's summary says (payload verified, probe rows per role), certificates the run
//! did not generate, and `--lut exec` runs of an executable's own server and client.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{nesquic, run_json, stderr};

/// Where `nesquic` and the LUT executables are.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

/// `nesquic-lut-<name>`, which must be built (`how` says how).
pub fn lut_binary(name: &str, how: &str) -> PathBuf {
    let path = target_dir().join(format!("nesquic-lut-{name}"));
    assert!(path.exists(), "{} missing: {how}", path.display());
    path
}

/// The first repetition moved `bytes` payload bytes and verified them.
pub fn verified(report: &Value, bytes: u64) {
    let rep = &report["repetitions"][0];
    assert_eq!((rep["bytes"].as_u64(), rep["payload_verified"].as_bool()), (Some(bytes), Some(true)), "{rep}");
}

/// The probe results of one role (`server`, `client`).
pub fn role<'a>(report: &'a Value, name: &str) -> &'a Value {
    let roles = report["repetitions"][0]["probes"]["roles"].as_array().expect("roles");
    roles.iter().find(|r| r["role"] == name).unwrap_or_else(|| panic!("{name} missing"))
}

/// Calls counted for every function of `category` (`crypto.seal`, ...).
pub fn calls(role: &Value, category: &str) -> u64 {
    let functions = role["functions"].as_array().expect("functions");
    functions.iter().filter(|f| f["category"] == category).map(|f| f["calls"].as_u64().expect("calls")).sum()
}

/// (calls, datagrams, messages) of one syscall row.
pub fn syscall(role: &Value, name: &str) -> (u64, u64, u64) {
    let rows = role["io"].as_array().expect("io");
    let s = rows.iter().find(|s| s["syscall"] == name).unwrap_or_else(|| panic!("no {name} in {role}"));
    let n = |f: &str| s[f].as_u64().unwrap_or_else(|| panic!("{f} in {s}"));
    (n("calls"), n("datagrams"), n("messages"))
}

/// A self-signed DER certificate for `localhost` that the run did not generate.
pub fn foreign_certificate(dir: &Path) -> PathBuf {
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
pub fn exec_run(server: &str, client: &str) -> std::process::Output {
    nesquic()
        .args(["run", "--lut", "exec", "--size", "2MB", "--server-cmd", server, "--client-cmd", client])
        .output()
        .expect("run nesquic")
}

/// A LUT executable's server, as an `exec` command.
pub fn server_cmd(binary: &Path) -> String {
    format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", binary.display())
}

/// A LUT executable's client trusting `ca`, as an `exec` command.
pub fn client_cmd(binary: &Path, ca: &str) -> String {
    format!("{} client --connect $NESQUIC_CONNECT --ca {ca} --size $NESQUIC_SIZE", binary.display())
}

/// `multi-conn`, `multi-stream` and `handshakes` on `lut` over loopback, small sizes: every byte
/// of every connection and stream verified, the workload recorded as asked.
pub fn every_workload_shape_runs_on(lut: &str) {
    for (testcase, size, connections, streams) in
        [("multi-conn", 1_000_000u64, 4u64, 1u64), ("multi-stream", 500_000, 1, 8), ("handshakes", 1_000, 200, 1)]
    {
        let report = run_json(&["--lut", lut, "--testcase", testcase, "--size", &size.to_string()]);
        verified(&report, connections * streams * size);
        let w = &report["repetitions"][0]["workload"];
        assert_eq!(
            (w["connections"].as_u64(), w["streams_per_connection"].as_u64()),
            (Some(connections), Some(streams)),
            "{lut} {testcase}: {w}"
        );
    }
}

/// `lut` moves 5 MB over loopback and over veth, verified; the summary names it and a version
/// starting with `version_prefix`; no namespace is left behind.
pub fn bulk_over_loopback_and_veth(lut: &str, version_prefix: &str) {
    for link in ["loopback", "veth"] {
        let report = run_json(&["--lut", lut, "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report["lut"]["name"], lut, "{}", report["lut"]);
        let version = report["lut"]["version"].as_str();
        assert!(version.is_some_and(|v| v.starts_with(version_prefix)), "{}", report["lut"]);
    }
    assert!(super::our_namespaces().is_empty(), "left {:?}", super::our_namespaces());
}

/// The server's (calls, datagrams, messages) on `syscall` in a 5 MB `--probe io` run of `lut`
/// with these `--lut-opt` settings.
pub fn server_sends(lut: &str, opts: &[&str], syscall_name: &str) -> (u64, u64, u64) {
    let mut args = vec!["--lut", lut, "--size", "5MB", "--probe", "io"];
    for o in opts {
        args.extend(["--lut-opt", o]);
    }
    let report = run_json(&args);
    verified(&report, 5_000_000);
    syscall(role(&report, "server"), syscall_name)
}

/// `binary`'s client refuses a certificate the run did not generate (its error says `why`) and
/// accepts the run's own, with the same commands (`extra` appended to both).
pub fn only_the_runs_certificate_is_trusted(binary: &Path, extra: &str, why: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let server = server_cmd(binary) + extra;
    let out = exec_run(&server, &(client_cmd(binary, &other.display().to_string()) + extra));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains(why), "{err}");
    let out = exec_run(&server, &(client_cmd(binary, "$NESQUIC_CA") + extra));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// quinn's server feeds `binary`'s client and `binary`'s server feeds quinn's client (`extra`
/// appended to `binary`'s commands): the payload protocol is the same on both.
pub fn payloads_agree_with_quinn(binary: &Path, extra: &str) {
    let quinn = target_dir().join("nesquic-lut-quinn");
    let out = exec_run(&server_cmd(&quinn), &(client_cmd(binary, "$NESQUIC_CA") + extra));
    assert!(out.status.success(), "quinn -> {}: {}", binary.display(), stderr(&out));
    let out = exec_run(&(server_cmd(binary) + extra), &client_cmd(&quinn, "$NESQUIC_CA"));
    assert!(out.status.success(), "{} -> quinn: {}", binary.display(), stderr(&out));
}

/// A byte the server flips (NESQUIC_FAULT_SERVER_CORRUPT_AT) is reported at its offset.
pub fn a_corrupted_byte_is_reported(lut: &str) {
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

/// With `--lut-qlog`, each side's trace holds more than 10 occurrences of `marker` (the
/// library's own packet_sent events, merged).
pub fn the_library_qlog_is_merged(lut: &str, marker: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "2MB", "--lut-qlog", "--out"])
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    for side in ["server", "client"] {
        let trace = std::fs::read_to_string(out_dir.join(format!("{side}.sqlog"))).expect("trace");
        let sent = trace.matches(marker).count();
        assert!(sent > 10, "{lut} {side}: {sent} of the library's {marker} events merged");
    }
}

/// `nesquic run --lut LUT --size 1MB ARGS` fails, saying `why`, for each pair.
pub fn refused_with_the_reason(lut: &str, cases: &[(&[&str], &str)]) {
    for (args, why) in cases {
        let out = nesquic().args(["run", "--lut", lut, "--size", "1MB"]).args(*args).output().expect("run nesquic");
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// The packet crypto of a `--probe io,crypto` run of a stack that seals and opens each packet
/// once: seal, open, header protection and handshake counted on both sides; one header
/// protection per seal or open; one seal per datagram the server sent on `send` (GSO runs, several
/// per message) and one open per datagram the client received on `recv`, give or take the
/// handshake packets that share a datagram. Datagrams a full receive buffer dropped are neither
/// received nor opened, so this holds with loss too.
pub fn one_seal_or_open_per_datagram(report: &Value, send: &str, recv: &str) {
    let (server, client) = (role(report, "server"), role(report, "client"));
    for (name, r) in [("server", server), ("client", client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name}: no {category}");
        }
        let (seal, open, hp) = (calls(r, "crypto.seal"), calls(r, "crypto.open"), calls(r, "crypto.header_protection"));
        assert!(hp.abs_diff(seal + open) <= 16, "{name}: {hp} header protections for {seal} seals + {open} opens");
    }
    let (_, sent, messages) = syscall(server, send);
    let seals = calls(server, "crypto.seal");
    assert!(seals >= sent && seals <= sent + 16, "server: {seals} seals for {sent} datagrams sent");
    assert!(sent >= 3 * messages, "GSO packs several datagrams per message: {sent} in {messages}");
    let (_, received, _) = syscall(client, recv);
    let opens = calls(client, "crypto.open");
    assert!(opens.abs_diff(received) <= 16, "client: {opens} opens for {received} datagrams received");
}
