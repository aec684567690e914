//! In-kernel packet I/O as measured: the UDP path's functions, counted and timed per role, and
//! the split of a direction's syscall time into exclusive stages. Attaching the probes (fentry,
//! else kprobes) is `nesquic-ebpf`'s (`kernel_io::attach`).

use serde::{Deserialize, Serialize};

use crate::syscall::Direction;
use crate::timing::Timing;
use crate::Role;

/// Kernel functions of the UDP path that are probed (the kernel's `enum nq_kfunc`).
pub const KFUNCS: usize = 8;

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
    /// Functions the mechanism in use could not probe, with the kernel's answer: their stages
    /// are not measured (a missing row means "not called" only for a probed function).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprobed: Vec<Unprobed>,
}

/// A function of the path that is not probed while others are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unprobed {
    /// The kernel function.
    pub function: String,
    /// Why, as the kernel answered.
    pub why: String,
}

/// One direction's packet-I/O time of one role, split by where it went (see
/// [`KernelIo::breakdown`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    /// `send` or `recv`.
    pub direction: Direction,
    /// The syscalls' time, ns (what is split).
    pub syscall_ns: u64,
    /// The exclusive parts, in path order.
    pub parts: Vec<Part>,
    /// GRO coalescing, spent in softirq context outside the syscalls (receive only).
    pub coalescing_outside: Option<Part>,
}

/// One stage of a [`Breakdown`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The stage ("udp", "copy", ...).
    pub stage: String,
    /// Exclusive time, ns; `None`: its function was not probed (`not_measured` says why).
    pub ns: Option<u64>,
    /// Why it is not measured: the function and the kernel's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
    /// Stages below this one that are not measured: their time is inside this part's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<String>,
}

/// A stage of the path as a tree: its function (`None`: the syscalls themselves) and the
/// stages it calls.
struct Node {
    stage: &'static str,
    function: Option<&'static str>,
    children: Vec<Node>,
}

fn node(stage: &'static str, function: &'static str, children: Vec<Node>) -> Node {
    Node { stage, function: Some(function), children }
}

/// Who calls whom on each direction's path (see [`KernelIo::breakdown`]).
fn path(direction: Direction) -> Node {
    let children = if direction == Direction::Send {
        vec![node(
            "udp",
            "udp_sendmsg",
            vec![
                node(
                    "ip",
                    "ip_output",
                    vec![
                        node("device", "dev_hard_start_xmit", Vec::new()),
                        node("segmentation", "__udp_gso_segment", Vec::new()),
                    ],
                ),
                node("copy", "ip_generic_getfrag", Vec::new()),
            ],
        )]
    } else {
        vec![node("udp", "udp_recvmsg", vec![node("copy", "skb_copy_datagram_iter", Vec::new())])]
    };
    Node { stage: "syscall entry/exit", function: None, children }
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
        for u in &other.unprobed {
            if !self.unprobed.iter().any(|mine| mine.function == u.function) {
                self.unprobed.push(u.clone());
            }
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
    ///
    /// A function that is not probed is not 0 ns: its part is "not measured", and its time stays
    /// in its caller's part, which says it includes that stage.
    pub fn breakdown(&self, role: Role, direction: Direction, syscall_ns: u64) -> Option<Breakdown> {
        if !self.rows.iter().any(|r| r.role == role) {
            return None;
        }
        let mut parts = Vec::new();
        self.split(role, &path(direction), syscall_ns, &mut parts);
        let coalescing_outside = (direction != Direction::Send).then(|| match self.why_unprobed("udp_gro_receive") {
            Some(why) => {
                Part { stage: "GRO coalescing".into(), ns: None, not_measured: Some(why), includes: Vec::new() }
            }
            None => Part {
                stage: "GRO coalescing".into(),
                ns: Some(self.ns(role, "udp_gro_receive")),
                not_measured: None,
                includes: Vec::new(),
            },
        });
        Some(Breakdown { direction, syscall_ns, parts, coalescing_outside })
    }

    /// Summed time of `function` in `role` (0: probed and never called).
    fn ns(&self, role: Role, function: &str) -> u64 {
        self.rows.iter().filter(|r| r.role == role && r.function == function).map(|r| r.timing.total_ns).sum()
    }

    /// "`function`: the kernel's answer" when `function` is not probed.
    fn why_unprobed(&self, function: &str) -> Option<String> {
        self.unprobed.iter().find(|u| u.function == function).map(|u| format!("{}: {}", u.function, u.why))
    }

    /// Appends `n`'s part (measured: `total` ns) and then its descendants' parts, in path order.
    fn split(&self, role: Role, n: &Node, total: u64, parts: &mut Vec<Part>) {
        let (mut below, mut includes) = (0, Vec::new());
        self.below(role, n, &mut below, &mut includes);
        parts.push(Part { stage: n.stage.into(), ns: Some(total.saturating_sub(below)), not_measured: None, includes });
        for child in &n.children {
            self.child_parts(role, child, parts);
        }
    }

    /// Sums into `ns` the time of the nearest measured stages below `n`, and lists the stages
    /// in between that are not measured (their time stays in `n`'s remainder).
    fn below(&self, role: Role, n: &Node, ns: &mut u64, includes: &mut Vec<String>) {
        for child in &n.children {
            let Some(function) = child.function else { continue };
            if self.why_unprobed(function).is_some() {
                includes.push(child.stage.into());
                self.below(role, child, ns, includes);
            } else {
                *ns += self.ns(role, function);
            }
        }
    }

    fn child_parts(&self, role: Role, n: &Node, parts: &mut Vec<Part>) {
        match n.function.and_then(|f| self.why_unprobed(f)) {
            Some(why) => {
                parts.push(Part {
                    stage: n.stage.to_string(),
                    ns: None,
                    not_measured: Some(why),
                    includes: Vec::new(),
                });
                for child in &n.children {
                    self.child_parts(role, child, parts);
                }
            }
            None => self.split(role, n, n.function.map_or(0, |f| self.ns(role, f)), parts),
        }
    }

    /// Calls of `function` by `role` (0 when absent).
    pub fn calls(&self, role: Role, function: &str) -> u64 {
        self.rows.iter().filter(|r| r.role == role && r.function == function).map(|r| r.timing.calls).sum()
    }
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

    /// (stage, exclusive ns or None, stages it includes) per part.
    fn parts(b: &Breakdown) -> Vec<(&str, Option<u64>, Vec<&str>)> {
        b.parts.iter().map(|p| (p.stage.as_str(), p.ns, p.includes.iter().map(String::as_str).collect())).collect()
    }

    #[test]
    fn send_time_splits_into_exclusive_parts_that_add_up() {
        let io = KernelIo {
            mechanism: Some(Mechanism::Fentry),
            rows: vec![
                row("udp_sendmsg", 800),
                row("ip_output", 500),
                row("dev_hard_start_xmit", 300),
                row("__udp_gso_segment", 50),
                row("ip_generic_getfrag", 200),
            ],
            ..Default::default()
        };
        let b = io.breakdown(Role::Server, Direction::Send, 1000).expect("rows");
        let none = Vec::<&str>::new;
        assert_eq!(
            parts(&b),
            [
                ("syscall entry/exit", Some(200), none()),
                ("udp", Some(100), none()),
                ("ip", Some(150), none()),
                ("device", Some(300), none()),
                ("segmentation", Some(50), none()),
                ("copy", Some(200), none()),
            ]
        );
        assert_eq!(b.parts.iter().filter_map(|p| p.ns).sum::<u64>(), 1000);
        assert!(b.coalescing_outside.is_none());
        assert!(io.breakdown(Role::Client, Direction::Send, 1000).is_none());
    }
}
