//! In-kernel packet I/O: the UDP path's functions, counted and timed per role by fentry/fexit
//! where the kernel allows it (cheapest), else kprobe/kretprobe, else not at all (the syscall
//! tracepoints still run). The mechanism is found by trying, at run time: a kernel in lockdown
//! refuses fentry with EPERM, a kernel without CONFIG_KPROBES has no kprobe PMU.

use crate::Role;
use aya::programs::{FEntry, FExit, KProbe};
use aya::{Btf, Ebpf};
use serde::{Deserialize, Serialize};

use crate::layout::{NqStats, KFUNCS};
use crate::timing::Timing;

/// The probed functions, in map order (enum nq_kfunc), with the stage of the path each stands for.
/// All exist (BTF and ftrace-able) in Debian 12's 6.1 and in 6.18 (docs/kernels.md).
pub const FUNCTIONS: [(&str, Stage); KFUNCS] = [
    ("udp_sendmsg", Stage::Udp),
    ("udp_recvmsg", Stage::Udp),
    ("__udp_gso_segment", Stage::Segmentation),
    ("udp_gro_receive", Stage::Coalescing),
    ("ip_output", Stage::Ip),
    ("dev_hard_start_xmit", Stage::Device),
    ("ip_generic_getfrag", Stage::Copy),
    ("skb_copy_datagram_iter", Stage::Copy),
];

/// Which part of the kernel's packet path a function belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The UDP socket layer (`udp_sendmsg`, `udp_recvmsg`): includes everything below it.
    Udp,
    /// GSO: one large send split into datagrams.
    Segmentation,
    /// GRO: received datagrams merged into one.
    Coalescing,
    /// IP output.
    Ip,
    /// Handing packets to the device.
    Device,
    /// Copies between user and kernel memory.
    Copy,
}

/// How the kernel functions were probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// BPF trampolines (fentry + fexit).
    Fentry,
    /// kprobe + kretprobe.
    Kprobe,
}

impl Mechanism {
    /// The label printed in rows.
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::Fentry => "fentry/fexit",
            Mechanism::Kprobe => "kprobe/kretprobe",
        }
    }

    fn programs(self, function: &str) -> (String, String) {
        match self {
            Mechanism::Fentry => (format!("nq_fe_{function}"), format!("nq_fx_{function}")),
            Mechanism::Kprobe => (format!("nq_kp_{function}"), format!("nq_kr_{function}")),
        }
    }
}

/// What the kernel-function probes measured, for every role (part of [`crate::Metrics`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KernelIo {
    /// The mechanism in use; `None`: no kernel function is probed (see `note`).
    pub mechanism: Option<Mechanism>,
    /// Why rows are absent (wholly or for some functions), as the kernel answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Per role and function, only those called.
    pub rows: Vec<KernelFunctionMetrics>,
}

/// One direction's packet-I/O time of one role, split by where it went (see
/// [`KernelIo::breakdown`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    /// `send` or `recv`.
    pub direction: String,
    /// The syscalls' time, ns (what is split).
    pub syscall_ns: u64,
    /// (stage, exclusive ns), in path order.
    pub parts: Vec<(String, u64)>,
    /// GRO coalescing time, spent in softirq context outside the syscalls (receive only), ns.
    pub coalescing_outside_ns: u64,
}

/// One kernel function of one role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelFunctionMetrics {
    /// Which process.
    pub role: Role,
    /// Kernel function.
    pub function: String,
    /// Its part of the path.
    pub stage: Stage,
    /// What measured it (`fentry/fexit`, `kprobe/kretprobe`).
    pub mechanism: String,
    /// Calls and time (inclusive of the functions it calls).
    #[serde(flatten)]
    pub timing: Timing,
}

impl KernelIo {
    /// Rows from summed per-(role, function) stats; `stats[i]` is function `i` of `role`.
    pub fn add_role(&mut self, role: Role, stats: &[NqStats]) {
        let Some(mechanism) = self.mechanism else { return };
        for (i, s) in stats.iter().enumerate().filter(|(_, s)| s.calls > 0) {
            let Some((function, stage)) = FUNCTIONS.get(i) else { continue };
            self.rows.push(KernelFunctionMetrics {
                role,
                function: function.to_string(),
                stage: *stage,
                mechanism: mechanism.label().to_string(),
                timing: Timing::from_stats(s),
            });
        }
    }

    /// Sums another window's rows into these.
    pub fn absorb(&mut self, other: &KernelIo) {
        for row in &other.rows {
            match self.rows.iter_mut().find(|r| r.role == row.role && r.function == row.function) {
                Some(mine) => mine.timing.absorb(&row.timing),
                None => self.rows.push(row.clone()),
            }
        }
        if self.mechanism.is_none() {
            self.mechanism = other.mechanism;
        }
    }

    /// Where one role's packet-I/O time went, per direction: the syscalls' time (from the
    /// tracepoints, `syscall_ns`) split into exclusive parts by subtracting each probed kernel
    /// function's time from the one that calls it. `None` without kernel rows for the role.
    ///
    /// Send: syscall entry/exit = syscalls - `udp_sendmsg`; UDP = `udp_sendmsg` - `ip_output` -
    /// copy (`ip_generic_getfrag`); IP = `ip_output` - device (`dev_hard_start_xmit`) -
    /// segmentation (`__udp_gso_segment`, where software GSO runs). Receive: syscall = syscalls -
    /// `udp_recvmsg`; UDP = `udp_recvmsg` - copy (`skb_copy_datagram_iter`). GRO coalescing runs
    /// in softirq context, outside the receiving syscall: reported beside the split, not in it.
    /// Parts clamp at zero (a function can run outside its caller on another CPU).
    pub fn breakdown(&self, role: Role, direction: &str, syscall_ns: u64) -> Option<Breakdown> {
        let ns = |f: &str| {
            self.rows.iter().filter(|r| r.role == role && r.function == f).map(|r| r.timing.total_ns).sum::<u64>()
        };
        if !self.rows.iter().any(|r| r.role == role) {
            return None;
        }
        let minus = |a: u64, parts: &[u64]| a.saturating_sub(parts.iter().sum());
        let parts = if direction == "send" {
            let (udp, ip, dev, seg, copy) = (
                ns("udp_sendmsg"),
                ns("ip_output"),
                ns("dev_hard_start_xmit"),
                ns("__udp_gso_segment"),
                ns("ip_generic_getfrag"),
            );
            vec![
                ("syscall entry/exit", minus(syscall_ns, &[udp])),
                ("udp", minus(udp, &[ip, copy])),
                ("ip", minus(ip, &[dev, seg])),
                ("device", dev),
                ("segmentation", seg),
                ("copy", copy),
            ]
        } else {
            let (udp, copy) = (ns("udp_recvmsg"), ns("skb_copy_datagram_iter"));
            vec![("syscall entry/exit", minus(syscall_ns, &[udp])), ("udp", minus(udp, &[copy])), ("copy", copy)]
        };
        let outside = if direction == "send" { 0 } else { ns("udp_gro_receive") };
        Some(Breakdown {
            direction: direction.to_string(),
            syscall_ns,
            parts: parts.into_iter().map(|(stage, ns)| (stage.to_string(), ns)).collect(),
            coalescing_outside_ns: outside,
        })
    }

    /// Calls of `function` by `role` (0 when absent).
    pub fn calls(&self, role: Role, function: &str) -> u64 {
        self.rows.iter().filter(|r| r.role == role && r.function == function).map(|r| r.timing.calls).sum()
    }
}

/// Attaches the kernel-function probes with the first mechanism that works for at least one
/// function. Returns what is attached (links live in `ebpf`'s programs) and why anything is not.
pub fn attach(ebpf: &mut Ebpf) -> KernelIo {
    let mut notes = Vec::new();
    let btf = match Btf::from_sys_fs() {
        Ok(b) => Some(b),
        Err(e) => {
            notes.push(format!("fentry: no kernel BTF ({e})"));
            None
        }
    };
    for mechanism in [Mechanism::Fentry, Mechanism::Kprobe] {
        if mechanism == Mechanism::Fentry && btf.is_none() {
            continue;
        }
        let mut attached = 0;
        let mut failed = Vec::new();
        for (function, _) in FUNCTIONS {
            match attach_one(ebpf, mechanism, function, btf.as_ref()) {
                Ok(()) => attached += 1,
                Err(e) => failed.push(format!("{function}: {e}")),
            }
        }
        if attached > 0 {
            notes.extend(failed.into_iter().map(|f| format!("{} not probed: {f}", mechanism.label())));
            return KernelIo { mechanism: Some(mechanism), notes, rows: Vec::new() };
        }
        // Nothing attached: say why, in the kernel's words (the first error stands for all).
        notes.push(format!("{} unavailable ({})", mechanism.label(), failed.first().map_or("", String::as_str)));
    }
    KernelIo { mechanism: None, notes, rows: Vec::new() }
}

fn attach_one(ebpf: &mut Ebpf, mechanism: Mechanism, function: &str, btf: Option<&Btf>) -> Result<(), String> {
    let (enter, exit) = mechanism.programs(function);
    // Exit first: a call that enters between the two attaches is then never half-measured.
    for name in [exit, enter] {
        let program = ebpf.program_mut(&name).ok_or_else(|| format!("program {name} missing from the object"))?;
        match mechanism {
            Mechanism::Fentry => {
                let btf = btf.ok_or("no kernel BTF")?;
                if let Ok(p) = <&mut FExit>::try_from(&mut *program) {
                    p.load(function, btf).map_err(short)?;
                    p.attach().map_err(short)?;
                } else {
                    let p: &mut FEntry = program.try_into().map_err(|e| format!("{name}: {e}"))?;
                    p.load(function, btf).map_err(short)?;
                    p.attach().map_err(short)?;
                }
            }
            Mechanism::Kprobe => {
                let p: &mut KProbe = program.try_into().map_err(|e| format!("{name}: {e}"))?;
                p.load().map_err(short)?;
                p.attach(function, 0).map_err(short)?;
            }
        }
    }
    Ok(())
}

/// An aya error as one line: the OS error, without the verifier log.
fn short(e: aya::programs::ProgramError) -> String {
    match e {
        aya::programs::ProgramError::LoadError { io_error, .. } => format!("load: {io_error}"),
        other => {
            // aya's messages name the file; the cause (ENOENT, EPERM) is in the source chain.
            let mut text = other.to_string();
            let mut source = std::error::Error::source(&other);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text.lines().next().unwrap_or_default().to_string()
        }
    }
}

/// Whether `mechanism` works on this kernel, tried for real on `udp_sendmsg` (attached, then
/// detached again): the kernel's answer, e.g. EPERM for fentry under lockdown.
pub fn probe(mechanism: Mechanism) -> Result<(), String> {
    let mut ebpf = Ebpf::load(crate::object::OBJECT).map_err(|e| format!("load the object: {e}"))?;
    let btf = Btf::from_sys_fs().ok();
    attach_one(&mut ebpf, mechanism, FUNCTIONS[0].0, btf.as_ref())
}

#[cfg(test)]
mod breakdown_tests {
    use super::*;

    fn row(function: &str, total_ns: u64) -> KernelFunctionMetrics {
        let stage = FUNCTIONS.iter().find(|(f, _)| *f == function).expect("known function").1;
        KernelFunctionMetrics {
            role: Role::Server,
            function: function.into(),
            stage,
            mechanism: "fentry/fexit".into(),
            timing: Timing { calls: 1, total_ns, p50_le_ns: 0, p99_le_ns: 0, hist: Vec::new() },
        }
    }

    #[test]
    fn send_time_splits_into_exclusive_parts_that_add_up() {
        let io = KernelIo {
            mechanism: Some(Mechanism::Fentry),
            notes: Vec::new(),
            rows: vec![
                row("udp_sendmsg", 800),
                row("ip_output", 500),
                row("dev_hard_start_xmit", 300),
                row("__udp_gso_segment", 50),
                row("ip_generic_getfrag", 200),
            ],
        };
        let b = io.breakdown(Role::Server, "send", 1000).expect("rows");
        let part = |s: &str| b.parts.iter().find(|(n, _)| n == s).expect("part").1;
        assert_eq!(
            (part("syscall entry/exit"), part("udp"), part("ip"), part("device"), part("segmentation"), part("copy")),
            (200, 100, 150, 300, 50, 200)
        );
        assert_eq!(b.parts.iter().map(|(_, ns)| ns).sum::<u64>(), 1000);
        assert!(io.breakdown(Role::Client, "send", 1000).is_none());
    }
}
