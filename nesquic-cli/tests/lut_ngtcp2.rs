//! The ngtcp2 LUT (a C adapter over Debian's ngtcp2 + GnuTLS, `lut-adapters/ngtcp2/`) end to
//! end: bulk transfers over loopback and veth, every workload shape, ngtcp2's crypto helpers and
//! syscalls counted on both sides, GSO and GRO off and on, the trust anchor really checked, and payloads
//! that agree with quinn's in both directions; and a published 1.x release (Debian's source)
//! built through `--lut-path` with the adapter's 1.x API branch.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::lut::{calls, crypto_bytes, role, syscall, verified};
use common::{run_record, serial, stderr, Role};

/// The C executable; `just build` builds it when Debian's packages are installed.
fn ngtcp2() -> PathBuf {
    common::lut::lut_binary(
        "ngtcp2",
        "`just build` builds it when libngtcp2-dev, libngtcp2-crypto-gnutls-dev and libgnutls28-dev are installed (lut-adapters/ngtcp2/build.sh)",
    )
}

#[test]
fn bulk_transfers_are_verified_over_loopback_and_veth() {
    let _g = serial();
    ngtcp2();
    // The version reported is the one the system's package provides.
    let out =
        std::process::Command::new("pkg-config").args(["--modversion", "libngtcp2"]).output().expect("pkg-config");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(version.contains('.'), "pkg-config --modversion libngtcp2: {version:?}");
    common::lut::bulk_transfers_are_verified_over_loopback_and_veth("ngtcp2", &version);
}

#[test]
fn crypto_and_syscalls_are_counted_on_both_sides() {
    let _g = serial();
    ngtcp2();
    let report = run_record(&["--lut", "ngtcp2", "--size", "5MB", "--probe", "io,crypto"]);
    verified(&report, 5_000_000);
    for name in [Role::Server, Role::Client] {
        let r = role(&report, name);
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name:?}: no {category}");
        }
        let (seal, open, hp) = (calls(r, "crypto.seal"), calls(r, "crypto.open"), calls(r, "crypto.header_protection"));
        assert!(hp.abs_diff(seal + open) <= 16, "{name:?}: {hp} header protections for {seal} seals + {open} opens");
        // One seal per packet, one packet per datagram (the first flights coalesce a few).
        let (_, sent, _) = syscall(r, "sendmsg");
        assert!(seal >= sent && seal <= sent + 8, "{name:?}: {seal} seals for {sent} datagrams sent");
    }
    // The server's seals carry the payload (ngtcp2_crypto_encrypt's plaintext length), every
    // byte at least once: a retransmission (a PTO on a busy machine) seals it again, so the
    // upper bound comes from what was sent. Two mechanisms agree here: the wire bytes
    // sendmsg counted are each packet's plaintext, its 16-byte AEAD tag and its header (at
    // least 2 bytes: flags, packet number; at most a long header's ~60).
    let server = role(&report, Role::Server);
    let (sealed, seals) = (crypto_bytes(server, "crypto.seal"), calls(server, "crypto.seal"));
    assert!(sealed > 5_000_000, "server sealed {sealed} bytes for 5 MB");
    let wire = common::find_syscall(server, "sendmsg").expect("the server's sendmsg row").bytes;
    let headers = wire.checked_sub(sealed + 16 * seals);
    assert!(
        headers.is_some_and(|h| h >= 2 * seals && h <= 60 * seals),
        "server: {wire} B sent for {sealed} B sealed in {seals} packets (headers {headers:?})"
    );
    let (_, received, _) = syscall(role(&report, Role::Client), "recvmsg");
    let opens = calls(role(&report, Role::Client), "crypto.open");
    assert!(opens >= received && opens <= received + 8, "client: {opens} opens for {received} datagrams received");
}

#[test]
fn gso_off_sends_one_datagram_per_syscall_and_on_batches() {
    let _g = serial();
    ngtcp2();
    common::lut::offload_off_is_one_datagram_per_syscall_and_on_batches("ngtcp2", "gso", Role::Server, "sendmsg");
}

#[test]
fn gro_off_receives_one_datagram_per_syscall_and_on_batches() {
    let _g = serial();
    ngtcp2();
    common::lut::offload_off_is_one_datagram_per_syscall_and_on_batches("ngtcp2", "gro", Role::Client, "recvmsg");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_the_handshake() {
    common::lut::only_the_runs_certificate_is_trusted(&ngtcp2(), "", "certificate verification failed");
}

#[test]
fn options_it_has_run() {
    ngtcp2();
    for (cc, cipher) in [("bbr", "chacha20"), ("newreno", "aes256gcm")] {
        let report = run_record(&["--lut", "ngtcp2", "--size", "2MB", "--cc", cc, "--cipher", cipher]);
        verified(&report, 2_000_000);
    }
}

#[test]
fn payloads_agree_with_quinn_in_both_directions() {
    common::lut::payloads_agree_with_quinn(&ngtcp2(), "");
}

#[test]
fn a_corrupted_byte_is_reported_at_its_offset() {
    ngtcp2();
    common::lut::a_corrupted_byte_is_reported_at_its_offset("ngtcp2");
}

#[test]
fn the_qlog_of_ngtcp2_is_merged_into_the_traces() {
    ngtcp2();
    common::lut::the_library_qlog_is_merged("ngtcp2", "\"original_name\":\"transport:packet_sent\"");
}

/// A published ngtcp2 1.x release, the newest whose source Debian serves (Debian 12 ships 0.12.1,
/// its newer suites 1.x; `release-source.sh`), built through `nesquic run --lut-path` with the
/// adapter's 1.x API branch (compat.h): a verified payload, the release's version in the record
/// and in each side's own account of its stack, its crypto helpers and syscalls counted.
#[test]
fn a_published_1x_release_builds_from_its_debian_source_and_runs() {
    let _g = serial();
    ngtcp2();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lut-adapters/ngtcp2/release-source.sh");
    let out = Command::new(script).arg("newest-1.x").arg(tmp.path().join("src")).output().expect("release-source.sh");
    assert!(out.status.success(), "release-source.sh newest-1.x: {}", stderr(&out));
    let src = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let path = src.to_str().expect("UTF-8 path");
    let report = run_record(&["--lut", "ngtcp2", "--lut-path", path, "--size", "5MB", "--probe", "io,crypto"]);
    // Its build directory under target/lut-builds/ is keyed by this temporary path: not reused.
    let build = report.lut.binary.parent().map(Path::to_path_buf);
    let _cleanup = DirGuard(build.filter(|b| b.to_string_lossy().contains("/target/lut-builds/")));
    verified(&report, 5_000_000);
    let source = report.lut.source.as_ref().expect("lut.source");
    assert!(source.proof.contains("adapter API 1.x") && source.proof.contains(path), "{}", source.proof);
    // The version the build linked (version.h of the release), also at the head of lut.version.
    let version = &source.linked.first().expect("lut.source.linked").version;
    assert!(version.starts_with("1.") && report.lut.version.starts_with(version.as_str()), "{:?}", report.lut);
    for (_, side) in &report.repetitions[0].io_settings {
        assert!(side.stack.starts_with(&format!("ngtcp2 {version} + GnuTLS")), "{}", side.stack);
    }
    for name in [Role::Server, Role::Client] {
        let r = role(&report, name);
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection"] {
            assert!(calls(r, category) > 0, "{name:?}: no {category}");
        }
        let (_, sent, _) = syscall(r, "sendmsg");
        let seals = calls(r, "crypto.seal");
        assert!(seals >= sent, "{name:?}: {seals} seals for {sent} datagrams sent");
    }
}

/// Removes a directory when dropped.
struct DirGuard(Option<PathBuf>);

impl Drop for DirGuard {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
