//! The tquic LUT (its own cargo workspace, `lut-adapters/tquic/`, driven over Nesquic's I/O layer
//! like quiche) end to end: bulk transfers over loopback and veth, BoringSSL's seal/open and
//! handshake and ring's header protection counted on both sides with the syscalls (and the I/O
//! layer's own counters agreeing), GSO on and off, the trust anchor really checked, payloads that
//! agree with quinn's in both directions, its qlog merged, and the options it does not honour refused (its workload shapes are in
//! tests/testcases.rs).

mod common;

use std::path::PathBuf;

use common::lut::{
    lut_binary, one_seal_or_open_per_datagram, only_the_runs_certificate_is_trusted, payloads_agree_with_quinn,
    refused_with_the_reason, server_sends, the_library_qlog_is_merged, verified,
};
use common::{run_record, serial};

/// `just build` builds it (scripts/build-own-workspace.sh; needs cmake).
fn tquic() -> PathBuf {
    lut_binary("tquic", "`just build` builds it (scripts/build-own-workspace.sh lut-adapters/tquic)")
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    tquic();
    common::lut::bulk_transfers_are_verified_over_loopback_and_veth("tquic", "1.");
}

#[test]
fn crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    tquic();
    let report = run_record(&["--lut", "tquic", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    // Nesquic's I/O layer: GSO runs batched in sendmmsg, GRO with recvmmsg.
    one_seal_or_open_per_datagram(&report, "sendmmsg", "recvmmsg");
    // The probes and the I/O layer's own counters agree (nesquic checks; a disagreement fails).
    assert_eq!(report.repetitions[0].io_layer_counters.len(), 2, "{report:?}");
}

#[test]
fn gso_off_sends_one_datagram_per_syscall_and_on_batches() {
    let _g = serial();
    tquic();
    // gso=off with mmsg=off: one sendmsg per datagram; gso=on: GSO runs (batched in sendmmsg).
    let (calls, datagrams, _) = server_sends("tquic", &["gso=off", "mmsg=off"], "sendmsg");
    assert_eq!(calls, datagrams, "gso=off, mmsg=off: {datagrams} datagrams in {calls} sendmsg");
    let (_, datagrams, messages) = server_sends("tquic", &["gso=on"], "sendmmsg");
    assert!(datagrams >= 3 * messages, "gso=on: {datagrams} datagrams in {messages} messages");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    only_the_runs_certificate_is_trusted(&tquic(), " --io nesquic", "the handshake failed");
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    payloads_agree_with_quinn(&tquic(), " --io nesquic");
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    tquic();
    common::lut::a_corrupted_byte_is_reported_at_its_offset("tquic");
}

#[test]
fn the_qlog_of_tquic_is_merged_into_the_traces() {
    tquic();
    the_library_qlog_is_merged("tquic", "packet_sent");
}

#[test]
fn options_it_cannot_honour_are_refused_with_the_reason() {
    tquic();
    refused_with_the_reason(
        "tquic",
        &[
            (&["--io", "native"], "does not support --io native"),
            (&["--cipher", "chacha20"], "cannot choose its TLS 1.3 cipher suite"),
            (&["--cc", "newreno"], "does not understand --lut-opt cc=newreno"),
        ],
    );
}
