//! Helpers for the end-to-end tests of one LUT executable (`lut_*.rs`): where it is, what a run's
//! summary says about it, and running it directly through `--lut exec`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{nesquic, stderr};

/// The directory `nesquic` and the LUT executables are built into.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

/// `nesquic-lut-<name>`, which must have been built (`how` says how).
pub fn lut_binary(name: &str, how: &str) -> PathBuf {
    let path = target_dir().join(format!("nesquic-lut-{name}"));
    assert!(path.exists(), "{} missing: {how}", path.display());
    path
}

/// The first repetition carried `bytes` and its payload was verified.
pub fn verified(report: &Value, bytes: u64) {
    let rep = &report["repetitions"][0];
    assert_eq!((rep["bytes"].as_u64(), rep["payload_verified"].as_bool()), (Some(bytes), Some(true)), "{rep}");
}

/// One side's probe figures (`server` or `client`).
pub fn role<'a>(report: &'a Value, name: &str) -> &'a Value {
    let roles = report["repetitions"][0]["probes"]["roles"].as_array().expect("roles");
    roles.iter().find(|r| r["role"] == name).unwrap_or_else(|| panic!("{name} missing"))
}

/// Calls counted for a crypto category on one side.
pub fn calls(role: &Value, category: &str) -> u64 {
    category_sum(role, category, "calls")
}

/// Bytes recorded for a crypto category on one side (where the catalog names a length argument).
pub fn crypto_bytes(role: &Value, category: &str) -> u64 {
    category_sum(role, category, "bytes")
}

fn category_sum(role: &Value, category: &str, field: &str) -> u64 {
    let functions = role["functions"].as_array().expect("functions");
    functions.iter().filter(|f| f["category"] == category).map(|f| f[field].as_u64().expect(field)).sum()
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

/// The `--server-cmd` that runs `binary` as the server.
pub fn server_cmd(binary: &Path) -> String {
    format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", binary.display())
}

/// The `--client-cmd` that runs `binary` as a client trusting `ca`.
pub fn client_cmd(binary: &Path, ca: &str) -> String {
    format!("{} client --connect $NESQUIC_CONNECT --ca {ca} --size $NESQUIC_SIZE", binary.display())
}

/// A client trusting a certificate the run did not make fails its handshake with `why` in
/// nesquic's error; the run's own certificate passes with the same commands.
pub fn foreign_trust_anchor_fails(binary: &Path, why: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let out = exec_run(&server_cmd(binary), &client_cmd(binary, &other.display().to_string()));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains(why), "{err}");
    let out = exec_run(&server_cmd(binary), &client_cmd(binary, "$NESQUIC_CA"));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// 5 MB over loopback and over veth, payload verified, the LUT's name and a version starting
/// with `version_prefix` in the summary, no namespace left behind.
pub fn bulk_transfers_are_verified_over_loopback_and_veth(lut: &str, version_prefix: &str) {
    for link in ["loopback", "veth"] {
        let report = super::run_json(&["--lut", lut, "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report["lut"]["name"], lut, "{}", report["lut"]);
        assert!(report["lut"]["version"].as_str().is_some_and(|v| v.starts_with(version_prefix)), "{}", report["lut"]);
    }
    assert!(super::our_namespaces().is_empty(), "left {:?}", super::our_namespaces());
}

/// Every testcase shape runs with payloads verified and the shape the summary reports.
pub fn every_workload_shape_runs(lut: &str) {
    for (testcase, size, connections, streams) in
        [("multi-conn", "1MB", 4, 1), ("multi-stream", "500KB", 1, 8), ("handshakes", "1KB", 200, 1)]
    {
        let report = super::run_json(&["--lut", lut, "--testcase", testcase, "--size", size]);
        let per_stream: u64 = size.trim_end_matches("KB").trim_end_matches("MB").parse::<u64>().expect("size")
            * if size.ends_with("MB") { 1_000_000 } else { 1_000 };
        verified(&report, connections * streams * per_stream);
        let w = &report["repetitions"][0]["workload"];
        assert_eq!(
            (w["connections"].as_u64(), w["streams_per_connection"].as_u64()),
            (Some(connections), Some(streams)),
            "{lut} {testcase}: {w}"
        );
    }
}

/// With `--lut-opt OPTION=off` (gso, gro) `side` moves exactly 1 datagram per message of
/// `syscall` (calls that moved data: a receive that found nothing, EAGAIN, carries no message),
/// with `OPTION=on` at least 3.
pub fn offload_off_is_one_datagram_per_syscall_and_on_batches(lut: &str, option: &str, side: &str, syscall_name: &str) {
    let mut per_call = Vec::new();
    for value in ["off", "on"] {
        let report = super::run_json(&[
            "--lut",
            lut,
            "--size",
            "5MB",
            "--probe",
            "io",
            "--lut-opt",
            &format!("{option}={value}"),
        ]);
        verified(&report, 5_000_000);
        let (_, datagrams, messages) = syscall(role(&report, side), syscall_name);
        per_call.push(datagrams as f64 / messages as f64);
    }
    assert_eq!(per_call[0], 1.0, "{lut} {option}=off: {} datagrams per {syscall_name}", per_call[0]);
    assert!(per_call[1] >= 3.0, "{lut} {option}=on: {} datagrams per {syscall_name}", per_call[1]);
}

/// `binary` and quinn's LUT exchange verified payloads with either as the server.
pub fn payloads_agree_with_quinn_in_both_directions(binary: &Path) {
    let quinn = target_dir().join("nesquic-lut-quinn");
    for (server, client) in [(&quinn.as_path(), &binary), (&binary, &quinn.as_path())] {
        let out = exec_run(&server_cmd(server), &client_cmd(client, "$NESQUIC_CA"));
        assert!(out.status.success(), "{} -> {}: {}", server.display(), client.display(), stderr(&out));
    }
}

/// A byte the server flipped is reported at its offset.
pub fn a_corrupted_byte_is_reported_at_its_offset(lut: &str) {
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

/// With `--lut-qlog`, the library's own events are merged into both sides' traces.
pub fn the_library_qlog_is_merged_into_the_traces(lut: &str, min_sent: usize) {
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
        let sent = trace.matches("\"original_name\":\"transport:packet_sent\"").count();
        assert!(sent > min_sent, "{lut} {side}: {sent} packet_sent events merged");
    }
}
