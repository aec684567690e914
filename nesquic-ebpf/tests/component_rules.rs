//! The catalog's component rules on stacks captured from real runs (`profile-*.folded`).

use nesquic_ebpf::profile::Classifier;
use nesquic_ebpf::symbols::PerfMap;
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

/// The translation layer's loop, where the sample's leaf is in it (its receive-batch split and
/// send flush are inlined there), is the sans-IO stack's packet I/O loop; the adapter's own
/// calls under it stay app.lut, the verifier app.harness (stacks from a quiche client run).
#[test]
fn the_translation_loop_itself_is_packet_io_not_the_adapter() {
    let c = classifier();
    let under_loop = |leaf: &[&str]| -> Vec<String> {
        leaf.iter()
            .chain(&["nesquic_translation::driver::run", "nesquic_translation::download", "main"])
            .map(|f| f.to_string())
            .collect()
    };
    assert_eq!(c.classify(&under_loop(&[]), &[]), "packet_io.user");
    let drive_app =
        "<nesquic_translation::quiche_shim::QuicheClient as nesquic_translation::driver::Endpoint>::drive_app";
    assert_eq!(c.classify(&under_loop(&["intrusive_collections::rbtree::remove", drive_app]), &[]), "app.lut");
    let verify = ["nesquic_protocol::payload::equal_avx512", "nesquic_protocol::stream::ClientStream::on_payload"];
    assert_eq!(c.classify(&under_loop(&[verify[0], verify[1], drive_app]), &[]), "app.harness");
}

/// The ngtcp2 adapter's event loop and its per-datagram calls into ngtcp2 are the sans-IO
/// stack's I/O loop, its `nq_now` the clock; the verifier stays the harness, ngtcp2's frames
/// ngtcp2's (stacks from an ngtcp2 client run).
#[test]
fn the_ngtcp2_adapters_loop_is_packet_io_and_its_verifier_the_harness() {
    let c = classifier();
    let stack = |frames: &[&str]| -> Vec<String> {
        frames.iter().chain(&["main", "__libc_start_call_main"]).map(|f| f.to_string()).collect()
    };
    assert_eq!(c.classify(&stack(&["nq_run_client"]), &[]), "packet_io.user");
    assert_eq!(c.classify(&stack(&["nq_conn_read", "nq_run_client"]), &[]), "packet_io.user");
    assert_eq!(c.classify(&stack(&["nq_now", "nq_conn_read", "nq_run_client"]), &[]), "runtime.clock");
    let verify = stack(&[
        "__memcmp_evex_movbe",
        "nq_payload_verify",
        "stream_data",
        "recv_stream_data",
        "conn_recv_pkt",
        "ngtcp2_conn_read_pkt_versioned",
        "nq_conn_read",
        "nq_run_client",
    ]);
    assert_eq!(c.classify(&verify, &[]), "app.harness");
    // Without the verifier, the stream-data callback under ngtcp2's receive path is ngtcp2's.
    assert!(c.classify(&verify[2..], &[]).starts_with("connection"));
}

/// Lines of a perf map CPython 3.13 (frame pointers, `sys.activate_stack_trampoline("perf")`)
/// wrote during an aioquic client run, the venv's and the interpreter's paths put under
/// `{ROOT}`.
const AIOQUIC_PERF_MAP: &str = "\
7f8e733e1b10 b py::EpollSelector.select:{ROOT}/lib/python3.13/selectors.py
7f8e733e24e0 b py::QuicConnection.datagrams_to_send:{ROOT}/site-packages/aioquic/quic/connection.py
7f8e733e2550 b py::QuicPacketBuilder.start_packet:{ROOT}/site-packages/aioquic/quic/packet_builder.py
7f8e733e27b0 b py::_SelectorDatagramTransport._read_ready:{ROOT}/lib/python3.13/asyncio/selector_events.py
7f8e733e27d0 b py::QuicConnection.receive_datagram:{ROOT}/site-packages/aioquic/quic/connection.py
7f8e733e2850 b py::CryptoContext.decrypt_packet:{ROOT}/site-packages/aioquic/quic/crypto.py
7f8e733e2860 b py::HeaderProtection.remove:{ROOT}/site-packages/aioquic/_crypto.py
7f8e733e3320 b py::QuicConnection._handle_stream_frame:{ROOT}/site-packages/aioquic/quic/connection.py
7f8e733e3360 b py::Verifier.update:{ROOT}/adapter/nesquic_aioquic/payload.py
";

#[test]
fn python_functions_of_a_captured_perf_map_land_in_their_components() {
    let root = std::env::temp_dir().join(format!("nesquic-aioquic-map-{}", std::process::id()));
    for package in
        ["site-packages/aioquic", "site-packages/aioquic/quic", "lib/python3.13/asyncio", "adapter/nesquic_aioquic"]
    {
        std::fs::create_dir_all(root.join(package)).expect("temp dir");
        std::fs::write(root.join(package).join("__init__.py"), "").expect("__init__.py");
    }
    let map = PerfMap::parse(&AIOQUIC_PERF_MAP.replace("{ROOT}", &root.display().to_string()));
    std::fs::remove_dir_all(&root).expect("clean up");
    let classifier = classifier();
    // Stacks as sampled (innermost first): the interpreter's C frames, and a trampoline's
    // return address (inside its 11 bytes) for each Python call.
    let named = |frame: &str| -> String {
        match u64::from_str_radix(frame, 16) {
            Ok(ip) => map.lookup(ip + 5).expect("a trampoline of the map").to_string(),
            Err(_) => frame.to_string(),
        }
    };
    let cases: [(&[&str], &str); 6] = [
        (
            &["_PyEval_EvalFrameDefault", "7f8e733e2860", "PyObject_Vectorcall", "7f8e733e2850", "7f8e733e27d0"],
            "crypto.header_protection",
        ),
        (&["_PyObject_Malloc", "_PyEval_EvalFrameDefault", "7f8e733e2550", "7f8e733e24e0"], "connection.frames"),
        (&["_PyEval_EvalFrameDefault", "7f8e733e3320", "7f8e733e27d0", "7f8e733e27b0"], "connection"),
        (&["_PyEval_EvalFrameDefault", "7f8e733e27b0"], "packet_io.user"),
        (&["_PyEval_EvalFrameDefault", "7f8e733e1b10"], "runtime.poll"),
        (&["_PyEval_EvalFrameDefault", "7f8e733e3360"], "app.harness"),
    ];
    for (stack, component) in cases {
        let user: Vec<String> = stack.iter().map(|f| named(f)).collect();
        assert_eq!(classifier.classify(&user, &[]), component, "{user:?}");
    }
    assert_eq!(
        named("7f8e733e2860"),
        "py::aioquic._crypto::HeaderProtection.remove",
        "the module is found from the packages' __init__.py files"
    );
}
