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
