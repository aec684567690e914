//! The s2n-quic LUT (its own cargo workspace, `lut-adapters/s2n-quic/`) end to end: bulk
//! transfers over loopback and veth, every workload shape, aws-lc's seal/open and s2n-tls's
//! handshake counted on both sides with the syscalls, GSO on and off, the trust anchor really
//! checked, payloads that agree with quinn's in both directions, and the options it refuses.

mod common;

use std::path::PathBuf;

use common::lut::{
    lut_binary, one_seal_or_open_per_datagram, only_the_runs_certificate_is_trusted, payloads_agree_with_quinn,
    refused_with_the_reason, role, server_sends, verified,
};
use common::{run_record, serial, Role};

/// `just build` builds it (scripts/build-own-workspace.sh).
fn s2n_quic() -> PathBuf {
    lut_binary("s2n-quic", "`just build` builds it (scripts/build-own-workspace.sh lut-adapters/s2n-quic)")
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    s2n_quic();
    common::lut::bulk_transfers_are_verified_over_loopback_and_veth("s2n-quic", "1.");
}

#[test]
fn aws_lc_crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    s2n_quic();
    let report = run_record(&["--lut", "s2n-quic", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    // s2n-quic sends GSO runs batched in sendmmsg and receives GRO runs with recvmmsg (the
    // default 208 KiB receive buffer drops some on loopback: the server seals those again).
    one_seal_or_open_per_datagram(&report, "sendmmsg", "recvmmsg");
    for name in [Role::Server, Role::Client] {
        let functions = &role(&report, name).functions;
        assert!(
            functions.iter().any(|f| f.name.contains("EVP_AEAD_CTX_seal")),
            "{name:?}: aws-lc's versioned EVP_AEAD_CTX_seal* attached: {functions:?}"
        );
    }
}

#[test]
fn gso_off_sends_one_datagram_per_message_and_on_batches() {
    let _g = serial();
    s2n_quic();
    // s2n-quic batches messages with sendmmsg either way; GSO decides how many datagrams one
    // message (one kernel send) carries.
    let (_, datagrams, messages) = server_sends("s2n-quic", &["gso=off"], "sendmmsg");
    assert_eq!(datagrams, messages, "gso=off: {datagrams} datagrams in {messages} messages");
    let (_, datagrams, messages) = server_sends("s2n-quic", &["gso=on"], "sendmmsg");
    assert!(datagrams >= 3 * messages, "gso=on: {datagrams} datagrams in {messages} messages");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    only_the_runs_certificate_is_trusted(&s2n_quic(), "", "Certificate is untrusted");
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    payloads_agree_with_quinn(&s2n_quic(), "");
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    s2n_quic();
    common::lut::a_corrupted_byte_is_reported_at_its_offset("s2n-quic");
}

#[test]
fn qlog_and_a_cipher_choice_are_refused_with_the_reason() {
    s2n_quic();
    refused_with_the_reason(
        "s2n-quic",
        &[
            (&["--lut-qlog"], "s2n-quic writes no qlog"),
            (&["--cipher", "chacha20"], "cannot choose its TLS 1.3 cipher suite"),
            (&["--cc", "newreno"], "does not understand --lut-opt cc=newreno"),
        ],
    );
}
