//! The tquic LUT (its own cargo workspace, `lut-adapters/tquic/`, driven over Nesquic's I/O layer
//! like quiche) end to end: bulk transfers over loopback and veth, BoringSSL's seal/open and
//! handshake and ring's header protection counted on both sides with the syscalls (and the I/O
//! layer's own counters agreeing), GSO on and off, the trust anchor really checked, payloads that
//! agree with quinn's in both directions, its qlog merged, and the shapes it does not run refused.

mod common;

use std::path::PathBuf;

use common::lut_run::{calls, client_cmd, exec_run, foreign_certificate, lut_binary, role, server_cmd, syscall, target_dir, verified};
use common::{nesquic, our_namespaces, run_json, serial, stderr};

/// `just build` builds it (scripts/build-own-workspace.sh; needs cmake).
fn tquic() -> PathBuf {
    lut_binary("tquic", "`just build` builds it (scripts/build-own-workspace.sh lut-adapters/tquic)")
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    tquic();
    for link in ["loopback", "veth"] {
        let report = run_json(&["--lut", "tquic", "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report["lut"]["name"], "tquic", "{}", report["lut"]);
        assert!(report["lut"]["version"].as_str().is_some_and(|v| v.starts_with("1.")), "{}", report["lut"]);
    }
    assert!(our_namespaces().is_empty(), "left {:?}", our_namespaces());
}

#[test]
fn crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    tquic();
    let report = run_json(&["--lut", "tquic", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    let (server, client) = (role(&report, "server"), role(&report, "client"));
    for (name, r) in [("server", server), ("client", client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name}: no {category}");
        }
        let (seal, open, hp) = (calls(r, "crypto.seal"), calls(r, "crypto.open"), calls(r, "crypto.header_protection"));
        assert!(hp.abs_diff(seal + open) <= 16, "{name}: {hp} header protections for {seal} seals + {open} opens");
    }
    // Nesquic's I/O layer: GSO runs batched in sendmmsg, GRO with recvmmsg; one seal per packet.
    let (_, sent, messages) = syscall(server, "sendmmsg");
    let seals = calls(server, "crypto.seal");
    assert!(seals >= sent && seals <= sent + 16, "server: {seals} seals for {sent} datagrams sent");
    assert!(sent >= 3 * messages, "GSO packs several datagrams per message: {sent} in {messages}");
    let (_, received, _) = syscall(client, "recvmmsg");
    let opens = calls(client, "crypto.open");
    assert!(opens.abs_diff(received) <= 16, "client: {opens} opens for {received} datagrams received");
    // The probes and the I/O layer's own counters agree (nesquic checks; a disagreement fails).
    assert!(report["repetitions"][0]["io_layer_counters"].as_array().is_some_and(|c| c.len() == 2), "{report}");
}

#[test]
fn gso_off_sends_one_datagram_per_syscall_and_on_batches() {
    let _g = serial();
    tquic();
    // gso=off with mmsg=off: one sendmsg per datagram. gso=on: GSO runs.
    let off = run_json(&["--lut", "tquic", "--size", "5MB", "--probe", "io", "--lut-opt", "gso=off", "--lut-opt", "mmsg=off"]);
    verified(&off, 5_000_000);
    let (calls_off, datagrams_off, _) = syscall(role(&off, "server"), "sendmsg");
    assert_eq!(calls_off, datagrams_off, "gso=off, mmsg=off: {datagrams_off} datagrams in {calls_off} sendmsg");
    let on = run_json(&["--lut", "tquic", "--size", "5MB", "--probe", "io", "--lut-opt", "gso=on"]);
    verified(&on, 5_000_000);
    let (_, datagrams_on, messages_on) = syscall(role(&on, "server"), "sendmmsg");
    assert!(datagrams_on >= 3 * messages_on, "gso=on: {datagrams_on} datagrams in {messages_on} messages");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    let tq = tquic();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let io = " --io nesquic";
    let out = exec_run(&(server_cmd(&tq) + io), &(client_cmd(&tq, &other.display().to_string()) + io));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains("the handshake failed"), "{err}");
    let out = exec_run(&(server_cmd(&tq) + io), &(client_cmd(&tq, "$NESQUIC_CA") + io));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    let tq = tquic();
    let quinn = target_dir().join("nesquic-lut-quinn");
    let with_io = |cmd: String, binary: &PathBuf| if *binary == tq { cmd + " --io nesquic" } else { cmd };
    for (server, client) in [(&quinn, &tq), (&tq, &quinn)] {
        let out = exec_run(
            &with_io(server_cmd(server), server),
            &with_io(client_cmd(client, "$NESQUIC_CA"), client),
        );
        assert!(out.status.success(), "{} -> {}: {}", server.display(), client.display(), stderr(&out));
    }
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    tquic();
    let out = nesquic()
        .args(["run", "--lut", "tquic", "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

#[test]
fn the_qlog_of_tquic_is_merged_into_the_traces() {
    tquic();
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", "tquic", "--size", "2MB", "--lut-qlog", "--out"])
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    for side in ["server", "client"] {
        let trace = std::fs::read_to_string(out_dir.join(format!("{side}.sqlog"))).expect("trace");
        let sent = trace.matches("packet_sent").count();
        assert!(sent > 10, "{side}: {sent} tquic packet_sent events merged");
    }
}

#[test]
fn shapes_and_options_it_cannot_run_are_refused_with_the_reason() {
    tquic();
    for (args, why) in [
        (&["--testcase", "multi-conn"][..], "runs one connection with one stream"),
        (&["--io", "native"], "does not support --io native"),
        (&["--cipher", "chacha20"], "cannot choose its TLS 1.3 cipher suite"),
        (&["--cc", "newreno"], "does not understand --lut-opt cc=newreno"),
    ] {
        let out = nesquic().args(["run", "--lut", "tquic", "--size", "1MB"]).args(args).output().expect("run nesquic");
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}
