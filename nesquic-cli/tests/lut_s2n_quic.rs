//! The s2n-quic LUT (its own cargo workspace, `lut-adapters/s2n-quic/`) end to end: bulk
//! transfers over loopback and veth, every workload shape, aws-lc's seal/open and s2n-tls's
//! handshake counted on both sides with the syscalls, GSO on and off, the trust anchor really
//! checked, payloads that agree with quinn's in both directions, and the options it refuses.

mod common;

use std::path::PathBuf;

use common::lut_run::{
    calls, client_cmd, every_workload_shape_runs_on, exec_run, foreign_certificate, lut_binary, role, server_cmd,
    syscall, target_dir, verified,
};
use common::{nesquic, our_namespaces, run_json, serial, stderr};

/// `just build` builds it (scripts/build-own-workspace.sh).
fn s2n_quic() -> PathBuf {
    lut_binary("s2n-quic", "`just build` builds it (scripts/build-own-workspace.sh lut-adapters/s2n-quic)")
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    s2n_quic();
    for link in ["loopback", "veth"] {
        let report = run_json(&["--lut", "s2n-quic", "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report["lut"]["name"], "s2n-quic", "{}", report["lut"]);
        assert!(report["lut"]["version"].as_str().is_some_and(|v| v.starts_with("1.")), "{}", report["lut"]);
    }
    assert!(our_namespaces().is_empty(), "left {:?}", our_namespaces());
}

#[test]
fn every_workload_shape_runs() {
    let _g = serial();
    s2n_quic();
    every_workload_shape_runs_on("s2n-quic");
}

#[test]
fn aws_lc_crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    s2n_quic();
    let report = run_json(&["--lut", "s2n-quic", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    let (server, client) = (role(&report, "server"), role(&report, "client"));
    for (name, r) in [("server", server), ("client", client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name}: no {category}");
        }
        let functions = r["functions"].as_array().expect("functions");
        assert!(
            functions.iter().any(|f| f["name"].as_str().is_some_and(|s| s.contains("EVP_AEAD_CTX_seal"))),
            "{name}: aws-lc's versioned EVP_AEAD_CTX_seal* attached: {functions:?}"
        );
    }
    // s2n-quic sends GSO runs batched in sendmmsg and receives GRO runs with recvmmsg. One seal
    // per packet: one per datagram sent, a few more where handshake packets share a datagram.
    let (_, sent, messages) = syscall(server, "sendmmsg");
    let seals = calls(server, "crypto.seal");
    assert!(seals >= sent && seals <= sent + 16, "server: {seals} seals for {sent} datagrams sent");
    assert!(sent >= 3 * messages, "GSO packs several datagrams per message: {sent} in {messages}");
    // The client opens what it received (the default 208 KiB receive buffer drops some on
    // loopback: those are never opened, and the server seals them again).
    let (_, received, _) = syscall(client, "recvmmsg");
    let opens = calls(client, "crypto.open");
    assert!(opens.abs_diff(received) <= 16, "client: {opens} opens for {received} datagrams received");
    // Header protection once per packet sealed or opened.
    for (name, r) in [("server", server), ("client", client)] {
        let (seal, open, hp) = (calls(r, "crypto.seal"), calls(r, "crypto.open"), calls(r, "crypto.header_protection"));
        assert!(hp.abs_diff(seal + open) <= 16, "{name}: {hp} header protections for {seal} seals + {open} opens");
    }
}

#[test]
fn gso_off_sends_one_datagram_per_message_and_on_batches() {
    let _g = serial();
    s2n_quic();
    // s2n-quic batches messages with sendmmsg either way; GSO decides how many datagrams one
    // message (one kernel send) carries.
    let mut per_message = Vec::new();
    for gso in ["off", "on"] {
        let report =
            run_json(&["--lut", "s2n-quic", "--size", "5MB", "--probe", "io", "--lut-opt", &format!("gso={gso}")]);
        verified(&report, 5_000_000);
        let (_, datagrams, messages) = syscall(role(&report, "server"), "sendmmsg");
        per_message.push(datagrams as f64 / messages as f64);
    }
    assert_eq!(per_message[0], 1.0, "gso=off: {} datagrams per message", per_message[0]);
    assert!(per_message[1] >= 3.0, "gso=on: {} datagrams per message", per_message[1]);
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    let s2n = s2n_quic();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let out = exec_run(&server_cmd(&s2n), &client_cmd(&s2n, &other.display().to_string()));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains("Certificate is untrusted"), "{err}");
    let out = exec_run(&server_cmd(&s2n), &client_cmd(&s2n, "$NESQUIC_CA"));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    let s2n = s2n_quic();
    let quinn = target_dir().join("nesquic-lut-quinn");
    for (server, client) in [(&quinn, &s2n), (&s2n, &quinn)] {
        let out = exec_run(&server_cmd(server), &client_cmd(client, "$NESQUIC_CA"));
        assert!(out.status.success(), "{} -> {}: {}", server.display(), client.display(), stderr(&out));
    }
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    s2n_quic();
    let out = nesquic()
        .args(["run", "--lut", "s2n-quic", "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

#[test]
fn qlog_and_a_cipher_choice_are_refused_with_the_reason() {
    s2n_quic();
    for (args, why) in [
        (&["--lut-qlog"][..], "s2n-quic writes no qlog"),
        (&["--cipher", "chacha20"], "cannot choose its TLS 1.3 cipher suite"),
        (&["--cc", "newreno"], "does not understand --lut-opt cc=newreno"),
    ] {
        let out =
            nesquic().args(["run", "--lut", "s2n-quic", "--size", "1MB"]).args(args).output().expect("run nesquic");
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}
