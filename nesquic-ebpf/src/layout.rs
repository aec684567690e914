//! Rust mirrors of `bpf/nesquic.h`: the map value layouts and limits. Both sides assert the same
//! sizes at compile time, so a change on one side without the other fails the build.

use nesquic_model::{DatagramEvent, Direction, Role, Syscall};

/// Roles the maps have room for.
pub const MAX_ROLES: u32 = 4;
/// log2 latency buckets per aggregate (the model's histogram length; `nesquic.h` must agree).
pub const HIST_BUCKETS: usize = nesquic_model::timing::HIST_BUCKETS;
/// Probed functions per session (attach cookies 0..MAX_FUNCS).
pub const MAX_FUNCS: u32 = 256;

/// Kernel functions of the UDP path (enum nq_kfunc; named in [`crate::kernel_io::FUNCTIONS`]).
pub const KFUNCS: usize = 8;

/// Syscalls the I/O probes follow, in the order of `enum nq_syscall`: the socket calls, then the
/// file calls counted when their fd is an IPv4/IPv6 socket (TCP stacks' `write`/`read`).
pub const SYSCALLS: [&str; 11] = [
    "sendmsg", "sendmmsg", "sendto", "recvmsg", "recvmmsg", "recvfrom", "write", "writev", "sendfile", "read", "readv",
];

/// The syscall [`SYSCALLS`]`[kind]` as the model's type (`Syscall::ALL` has the same order,
/// checked below).
pub fn syscall(kind: usize) -> Option<Syscall> {
    Syscall::ALL.get(kind).copied()
}

/// Whether [`SYSCALLS`]`[kind]` sends (the others receive).
pub fn is_send(kind: usize) -> bool {
    syscall(kind).is_some_and(|s| s.direction() == Direction::Send)
}

/// The kernel's tracepoint name for [`SYSCALLS`]`[kind]` (`sys_enter_<name>`): x86-64's sendfile
/// is the `sendfile64` system call.
pub fn tracepoint_name(syscall: &str) -> &str {
    match syscall {
        "sendfile" => "sendfile64",
        other => other,
    }
}

/// `struct nq_stats`: one aggregate, per CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NqStats {
    /// Calls completed.
    pub calls: u64,
    /// Failed calls other than EAGAIN.
    pub errors: u64,
    /// Calls that returned EAGAIN.
    pub eagain: u64,
    /// Bytes moved (syscalls) or taken from an argument (functions).
    pub bytes: u64,
    /// Datagrams (syscalls).
    pub datagrams: u64,
    /// Messages (msghdrs) moved (syscalls).
    pub messages: u64,
    /// Messages that carried more than one datagram: GSO (send) or GRO (receive) in use.
    pub segmented: u64,
    /// Sum of durations.
    pub total_ns: u64,
    /// `hist[b]` counts durations with `floor(log2(ns)) == b`.
    pub hist: [u64; HIST_BUCKETS],
}

impl Default for NqStats {
    fn default() -> Self {
        Self {
            calls: 0,
            errors: 0,
            eagain: 0,
            bytes: 0,
            datagrams: 0,
            messages: 0,
            segmented: 0,
            total_ns: 0,
            hist: [0; HIST_BUCKETS],
        }
    }
}

impl NqStats {
    /// Adds another CPU's aggregate.
    pub fn add(&mut self, other: &NqStats) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.eagain += other.eagain;
        self.bytes += other.bytes;
        self.messages += other.messages;
        self.segmented += other.segmented;
        self.datagrams += other.datagrams;
        self.total_ns += other.total_ns;
        for (a, b) in self.hist.iter_mut().zip(other.hist.iter()) {
            *a += b;
        }
    }
}

/// `struct nq_func_config`, indexed by attach cookie.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NqFuncConfig {
    /// 1-6: argument register, 7-8: stack argument, holding a byte count; 0: none.
    pub bytes_arg: u32,
    /// 1: no return probe; the entry probe counts calls and bytes itself.
    pub count_only: u32,
}

/// `struct nq_health`: what the kernel side could not measure, per CPU. Records hold its serde
/// form, [`nesquic_model::HealthCounts`] (`From` below), never this layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NqHealth {
    /// Entries not recorded because an in-flight map was full.
    pub inflight_full: u64,
    /// Returns seen without their entry.
    pub exit_without_entry: u64,
    /// Re-entered functions whose outer call was lost.
    pub nested_overwrites: u64,
    /// User memory that could not be read.
    pub user_read_failures: u64,
    /// mmsg batches larger than the parsed maximum.
    pub truncated_batches: u64,
    /// Per-message events the ring buffer had no room for (`--qlog-datagrams`).
    pub events_dropped: u64,
    /// Sampled user or kernel stacks lost to a stack-map bucket that held another stack (the
    /// profile keeps such a sample's user leaf).
    pub stack_collisions: u64,
}

/// `struct nq_datagram_event`: one message of a send/receive syscall.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NqDatagramEvent {
    /// CLOCK_MONOTONIC at syscall exit, ns.
    pub ts_ns: u64,
    /// Bytes of the message.
    pub bytes: u64,
    /// Role index.
    pub role: u32,
    /// Index into [`SYSCALLS`].
    pub kind: u32,
    /// Datagrams in the message.
    pub datagrams: u32,
    /// Datagram size (the last may be shorter).
    pub segment: u32,
}

impl NqDatagramEvent {
    /// The event as the model has it; `None` for a role or syscall index outside the known ones.
    pub fn to_model(&self) -> Option<DatagramEvent> {
        let role = [Role::Server, Role::Client, Role::Process].into_iter().find(|r| r.index() == self.role)?;
        Some(DatagramEvent {
            ts_ns: self.ts_ns,
            bytes: self.bytes,
            role,
            syscall: syscall(self.kind as usize)?,
            datagrams: self.datagrams,
            segment: self.segment,
        })
    }
}

/// `struct nq_sample_key`: one sampled (process, user stack, kernel stack).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NqSampleKey {
    /// Process.
    pub tgid: u32,
    /// Role index.
    pub role: u32,
    /// Stack id of the user stack (< 0: none).
    pub user_stack: i32,
    /// Stack id of the kernel stack (< 0: none).
    pub kernel_stack: i32,
    /// The word at the user stack pointer (0: unreadable): a frameless leaf's return address.
    /// When `user_stack < 0` (lost to a collision): the user leaf's instruction pointer.
    pub sp_word: u64,
}

/// `struct nq_settings`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NqSettings {
    /// 1: emit an [`NqDatagramEvent`] per message.
    pub datagram_events: u32,
    /// 1: function probes record no new call (duty cycle: outside a counting window).
    pub functions_paused: u32,
    /// Duty cycle: start of the current window (CLOCK_MONOTONIC ns); calls in flight that
    /// entered before it were cut off by a detach and are dropped, not counted as lost.
    pub window_start_ns: u64,
}

impl From<NqHealth> for nesquic_model::HealthCounts {
    fn from(h: NqHealth) -> Self {
        Self {
            inflight_full: h.inflight_full,
            exit_without_entry: h.exit_without_entry,
            nested_overwrites: h.nested_overwrites,
            user_read_failures: h.user_read_failures,
            truncated_batches: h.truncated_batches,
            events_dropped: h.events_dropped,
            stack_collisions: h.stack_collisions,
        }
    }
}

// SAFETY: plain `repr(C)` structs of integers without padding (sizes asserted below).
unsafe impl aya::Pod for NqStats {}
// SAFETY: as above.
unsafe impl aya::Pod for NqFuncConfig {}
// SAFETY: as above.
unsafe impl aya::Pod for NqHealth {}
// SAFETY: as above.
unsafe impl aya::Pod for NqSettings {}
// SAFETY: as above.
unsafe impl aya::Pod for NqSampleKey {}

const _: () = assert!(std::mem::size_of::<NqStats>() == 384);
const _: () = assert!(std::mem::size_of::<NqFuncConfig>() == 8);
const _: () = assert!(std::mem::size_of::<NqHealth>() == 56);
const _: () = assert!(std::mem::size_of::<NqDatagramEvent>() == 32);
const _: () = assert!(std::mem::size_of::<NqSettings>() == 16);
const _: () = assert!(std::mem::size_of::<NqSampleKey>() == 24);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_names_the_syscalls_in_map_order() {
        assert_eq!(Syscall::ALL.map(Syscall::as_str), SYSCALLS);
        assert_eq!((0..SYSCALLS.len()).filter(|&k| is_send(k)).count(), 6);
        let e = NqDatagramEvent { ts_ns: 5, bytes: 2904, role: 1, kind: 4, datagrams: 2, segment: 1452 };
        let m = e.to_model().expect("known role and syscall");
        assert_eq!((m.role, m.syscall, m.bytes, m.datagrams), (Role::Client, Syscall::Recvmmsg, 2904, 2));
        assert_eq!(NqDatagramEvent { kind: 11, ..e }.to_model(), None);
    }
}
