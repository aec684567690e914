//! `nesquic-model`: the measurement types every layer shares, what a run measured as data. It
//! owns the [`Role`] of a process, the probe metrics ([`Metrics`]: syscalls, functions, kernel
//! I/O path, timing histograms; [`Syscall`], [`Direction`] and `metrics::Mechanism` are enums
//! with the JSON strings records have always held), the kernel's per-message [`DatagramEvent`], the sampling [`profile::Profile`] with its shares, the CPU cost
//! per packet ([`packet_cost`]), the health counts of the kernel side ([`HealthCounts`]), each LUT thread's time on and waiting for a CPU
//! over the transfer ([`threads`]), the
//! agent's patch outcomes and cost, and their serde forms (the JSON of records and qlog events)
//! with the pure arithmetic on them (merging windows, shares, quantiles of a histogram).
//!
//! It must not know how anything is measured: no aya, no eBPF maps, no `#[repr(C)]` kernel
//! layouts, no I/O. `nesquic-ebpf` and the agent produce these types; the record, its renderers
//! (terminal, HTML) and the engine read them. Its dependencies are serde, thiserror and `nesquic-stats` without
//! its `t` feature (the Wilson interval and histogram quantiles, themselves without dependencies).
#![warn(missing_docs)]

pub mod agent;
pub mod health;
pub mod kernel_io;
pub mod metrics;
pub mod packet_cost;
pub mod profile;
pub mod role;
pub mod sites;
pub mod syscall;
pub mod threads;
pub mod timing;

pub use health::HealthCounts;
pub use metrics::{
    AgentLost, DatagramEvent, Direction, DutyScaled, FunctionMetrics, Metrics, RoleMetrics, Syscall, SyscallMetrics,
};
pub use role::{Role, UnknownRole, LUT_ROLES};
pub use timing::Timing;
