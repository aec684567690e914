//! The catalog's component rules on stacks captured from real runs (`profile-*.folded`).

use nesquic_ebpf::profile::Classifier;
use nesquic_ebpf::Catalog;

fn classifier() -> Classifier {
    Classifier::new(&Catalog::builtin().expect("builtin catalog").components).expect("catalog rules compile")
}

/// s2n-quic's client (tokio underneath) wakes a worker by writing its eventfd: a runtime
/// hand-off, which `vfs_write` alone had put in `app.file_io` (the harness's share).
#[test]
fn an_eventfd_wakeup_is_the_runtime_not_file_io() {
    let c = classifier();
    // Kernel frames innermost first, as `profile-client.folded` of an s2n-quic run shows them.
    let kernel: Vec<String> = [
        "_raw_spin_unlock_irq",
        "eventfd_write",
        "vfs_write",
        "ksys_write",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(c.classify(&[], &kernel), "runtime.scheduler");
    assert_eq!(c.classify(&[], &kernel[1..]), "runtime.scheduler");
    // A write to a pipe stays file I/O.
    let pipe: Vec<String> = ["anon_pipe_write", "vfs_write", "ksys_write"].map(String::from).to_vec();
    assert_eq!(c.classify(&[], &pipe), "app.file_io");
}

/// quiche's client over the translation layer: the connection-ID lookup inlined in the
/// translation's `handle_datagram` is the receive path's demultiplexing, not the harness; what
/// quiche does under it stays quiche's.
#[test]
fn the_translation_layers_datagram_demultiplexing_is_packet_io() {
    let c = classifier();
    let entry =
        "<nesquic_translation::quiche_shim::QuicheClient as nesquic_translation::driver::Endpoint>::handle_datagram";
    // User frames innermost first, as `profile-client.folded` of a quiche run shows them.
    let user = |leaf: &[&str]| -> Vec<String> {
        leaf.iter()
            .chain(&[entry, "nesquic_translation::driver::run", "nesquic_translation::download", "main"])
            .map(|f| f.to_string())
            .collect()
    };
    assert_eq!(c.classify(&user(&[]), &[]), "packet_io.user");
    assert_eq!(c.classify(&user(&["core::hash::BuildHasher::hash_one"]), &[]), "packet_io.user");
    assert_eq!(c.classify(&user(&["quiche::frame::Frame::from_bytes"]), &[]), "connection.frames");
    // The client's application loop is still the adapter's.
    let app = ["<nesquic_translation::quiche_shim::QuicheClient as nesquic_translation::driver::Endpoint>::drive_app"]
        .map(String::from)
        .to_vec();
    assert_eq!(c.classify(&app, &[]), "app.lut");
}
