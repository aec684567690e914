//! The quic-go LUT (a Go executable, `lut-adapters/quic-go/`) end to end: bulk transfers over
//! loopback and veth, every workload shape, its Go crypto counted by the kernel probes (Go
//! binaries are static: no user-space agent; no return probes: counting only), GSO on and off,
//! the trust anchor really checked, and payloads that agree with quinn's in both directions.

mod common;

use std::path::PathBuf;

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
