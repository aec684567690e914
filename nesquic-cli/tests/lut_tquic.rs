//! The tquic LUT (its own cargo workspace, `lut-adapters/tquic/`, driven over Nesquic's I/O layer
//! like quiche) end to end: bulk transfers over loopback and veth, BoringSSL's seal/open and
//! handshake and ring's header protection counted on both sides with the syscalls (and the I/O
//! layer's own counters agreeing), GSO on and off, the trust anchor really checked, payloads that
//! agree with quinn's in both directions, its qlog merged, and the options it does not honour refused (its workload shapes are in
//! tests/testcases.rs), and an older release than the pinned one built through `--lut-path`.

mod common;

use std::path::PathBuf;

use common::lut::{
    lut_binary, mark_entry, marks, one_seal_or_open_per_datagram, only_the_runs_certificate_is_trusted,
    payloads_agree_with_quinn, refused_with_the_reason, registry_release_as_checkout, role, server_sends, syscall,
    the_library_qlog_is_merged, verified,
};
use common::{nesquic, run_record, serial, stderr, Role, RunRecord};

/// A tquic release older than the one Nesquic pins (1.6.0), the oldest the adapter supports
/// (lut-adapters/src/tquic.rs); its crate carries BoringSSL's sources (the repository's
/// deps/boringssl submodule), built once for the build projects (minutes).
const OLDER_RELEASE: &str = "1.5.0";

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

/// An older release than the pinned one (crates.io's source, the repository's root crate with its
/// BoringSSL) builds through `--lut-path` and runs with io and crypto counted: the record links
/// tquic at that version from the checkout, and the checkout's own code ran (its
/// `Endpoint::new`, edited to log a word, called once by each side).
#[test]
fn an_older_release_laid_out_as_a_checkout_runs_its_own_code() {
    let _g = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("tquic");
    let versions = registry_release_as_checkout("tquic", OLDER_RELEASE, &[("tquic", "")], &checkout);
    assert_eq!(versions, [OLDER_RELEASE]);
    let log = tmp.path().join("ran");
    mark_entry(&checkout.join("src/endpoint.rs"), "pub fn new(\n        config: Box<crate::Config>,", &log, "endpoint");
    let out_dir = tmp.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", "tquic", "--size", "2MB", "--probe", "io,crypto", "--lut-path"])
        .arg(&checkout)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "--lut-path {}: {}", checkout.display(), stderr(&out));
    let report = RunRecord::load(&out_dir.join("summary.json")).expect("summary.json");
    verified(&report, 2_000_000);
    assert_eq!(marks(&log), ["endpoint", "endpoint"], "one endpoint a side, from the checkout's source");
    let source = report.lut.source.as_ref().expect("lut.source");
    let linked: Vec<(&str, &str)> = source.linked.iter().map(|l| (l.name.as_str(), l.version.as_str())).collect();
    assert_eq!(linked, [("tquic", OLDER_RELEASE)]);
    assert_eq!(source.linked[0].path, checkout.canonicalize().expect("canonical"));
    // Nesquic's I/O layer sends its GSO runs in sendmmsg; tquic seals each datagram.
    let server = role(&report, Role::Server);
    let (_, datagrams, messages) = syscall(server, "sendmmsg");
    assert!(datagrams > messages && messages > 0, "server: {datagrams} datagrams in {messages} sendmmsg messages");
    assert!(common::lut::calls(server, "crypto.seal") >= datagrams, "{server:?}");
}
