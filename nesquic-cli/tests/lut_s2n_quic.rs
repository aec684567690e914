//! The s2n-quic LUT (its own cargo workspace, `lut-adapters/s2n-quic/`) end to end: bulk
//! transfers over loopback and veth, every workload shape, aws-lc's seal/open and s2n-tls's
//! handshake counted on both sides with the syscalls, GSO on and off, the trust anchor really
//! checked, payloads that agree with quinn's in both directions, the options it refuses, and an
//! older release than the pinned one built through `--lut-path` from a checkout-shaped tree.

mod common;

use std::path::PathBuf;

use common::lut::{
    lut_binary, mark_entry, marks, one_seal_or_open_per_datagram, only_the_runs_certificate_is_trusted,
    payloads_agree_with_quinn, refused_with_the_reason, registry_release_as_checkout, role, server_sends, syscall,
    verified,
};
use common::{nesquic, run_record, serial, stderr, Role, RunRecord};

/// An s2n-quic release older than the one Nesquic pins (1.91), at the far end of the range the
/// adapter supports (two years: lut-adapters/src/s2n_quic.rs): its graph reuses the pinned
/// lock's aws-lc and s2n-tls, so only the s2n-quic crates compile again.
const OLDER_RELEASE: &str = "1.52.1";

/// Where the s2n-quic repository keeps the crates Nesquic's descriptor patches.
const REPOSITORY_LAYOUT: &[(&str, &str)] = &[
    ("s2n-quic", "quic/s2n-quic"),
    ("s2n-quic-core", "quic/s2n-quic-core"),
    ("s2n-quic-crypto", "quic/s2n-quic-crypto"),
    ("s2n-quic-platform", "quic/s2n-quic-platform"),
    ("s2n-quic-tls", "quic/s2n-quic-tls"),
    ("s2n-quic-tls-default", "quic/s2n-quic-tls-default"),
    ("s2n-quic-rustls", "quic/s2n-quic-rustls"),
    ("s2n-quic-transport", "quic/s2n-quic-transport"),
    ("s2n-codec", "common/s2n-codec"),
];

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

/// An older release than the pinned one (crates.io's sources laid out as the s2n-quic repository
/// is) builds through `--lut-path` and runs with io and crypto counted: the record links every
/// crate of the repository the graph holds from the checkout at the release's version, and the
/// checkout's own code ran (its `Server::builder` and `Client::builder`, edited to log their
/// role, each called once). The first build compiles aws-lc and s2n-tls for the build projects
/// (minutes, once).
#[test]
fn an_older_release_laid_out_as_a_checkout_runs_its_own_code() {
    let _g = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("s2n-quic");
    let versions = registry_release_as_checkout("s2n-quic", OLDER_RELEASE, REPOSITORY_LAYOUT, &checkout);
    assert_eq!(versions[0], OLDER_RELEASE);
    let log = tmp.path().join("ran");
    let quic = checkout.join("quic/s2n-quic/src");
    mark_entry(&quic.join("server.rs"), "pub fn builder() -> Builder<impl ServerProviders>", &log, "server");
    mark_entry(&quic.join("client.rs"), "pub fn builder() -> Builder<impl ClientProviders>", &log, "client");
    let out_dir = tmp.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", "s2n-quic", "--size", "2MB", "--probe", "io,crypto", "--lut-path"])
        .arg(&checkout)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "--lut-path {}: {}", checkout.display(), stderr(&out));
    let report = RunRecord::load(&out_dir.join("summary.json")).expect("summary.json");
    verified(&report, 2_000_000);
    assert_eq!(marks(&log), ["client", "server"], "one builder call a side, from the checkout's source");
    let source = report.lut.source.as_ref().expect("lut.source");
    assert_eq!((source.linked[0].name.as_str(), source.linked[0].version.as_str()), ("s2n-quic", OLDER_RELEASE));
    for linked in &source.linked {
        let (i, (_, dir)) = REPOSITORY_LAYOUT
            .iter()
            .enumerate()
            .find(|(_, (name, _))| *name == linked.name)
            .unwrap_or_else(|| panic!("linked {linked:?}, not a crate of the repository"));
        assert_eq!(linked.version, versions[i], "{linked:?}");
        assert_eq!(linked.path, checkout.join(dir).canonicalize().expect("canonical"), "{linked:?}");
    }
    // The transport, platform I/O and TLS crates are in every s2n-quic graph on Linux.
    for name in ["s2n-quic-transport", "s2n-quic-platform", "s2n-quic-tls", "s2n-quic-core"] {
        assert!(source.linked.iter().any(|l| l.name == name), "{name} not linked: {:?}", source.linked);
    }
    // Its own platform I/O: GSO runs in sendmmsg, each datagram sealed by aws-lc.
    let server = role(&report, Role::Server);
    let (_, datagrams, messages) = syscall(server, "sendmmsg");
    assert!(datagrams > messages && messages > 0, "server: {datagrams} datagrams in {messages} sendmmsg messages");
    assert!(common::lut::calls(server, "crypto.seal") >= datagrams, "{server:?}");
}
