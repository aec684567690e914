//! The compiled eBPF object (nesquic.bpf.c, built by build.rs), embedded in the library: what
//! the probe session and the kernel-path checks load.

/// The compiled eBPF object (built by build.rs).
pub(crate) static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nesquic.bpf.o"));
