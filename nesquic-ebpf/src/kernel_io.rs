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
    pub direction: String,
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
fn path(direction: &str) -> Node {
    let children = if direction == "send" {
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
    pub fn breakdown(&self, role: Role, direction: &str, syscall_ns: u64) -> Option<Breakdown> {
        if !self.rows.iter().any(|r| r.role == role) {
            return None;
        }
        let mut parts = Vec::new();
        self.split(role, &path(direction), syscall_ns, &mut parts);
        let coalescing_outside = (direction != "send").then(|| match self.why_unprobed("udp_gro_receive") {
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
        Some(Breakdown { direction: direction.to_string(), syscall_ns, parts, coalescing_outside })
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

    /// What one mechanism's attempts (one per function of [`FUNCTIONS`]) amount to: that
    /// mechanism, with every function it failed on listed as unprobed, when at least one
    /// attached; else `Err(notes)` with why it is unavailable (the first error stands for all),
    /// for the next mechanism to try.
    fn from_attempts(
        mechanism: Mechanism,
        attempts: Vec<(&str, Result<(), String>)>,
        mut notes: Vec<String>,
    ) -> Result<KernelIo, Vec<String>> {
        let mut unprobed = Vec::new();
        for (function, result) in &attempts {
            if let Err(why) = result {
                unprobed.push(Unprobed { function: function.to_string(), why: why.clone() });
            }
        }
        if unprobed.len() < attempts.len() {
            return Ok(KernelIo { mechanism: Some(mechanism), notes, rows: Vec::new(), unprobed });
        }
        let first = unprobed.first().map(|u| format!("{}: {}", u.function, u.why)).unwrap_or_default();
        notes.push(format!("{} unavailable ({first})", mechanism.label()));
        Err(notes)
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
        let attempts: Vec<_> = FUNCTIONS
            .iter()
            .map(|(function, _)| (*function, attach_one(ebpf, mechanism, function, btf.as_ref())))
            .collect();
        match KernelIo::from_attempts(mechanism, attempts, notes) {
            Ok(io) => return io,
            Err(back) => notes = back,
        }
    }
    KernelIo { mechanism: None, notes, rows: Vec::new(), unprobed: Vec::new() }
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
        let b = io.breakdown(Role::Server, "send", 1000).expect("rows");
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
        assert!(io.breakdown(Role::Client, "send", 1000).is_none());
    }

    /// What `attach` builds when fentry attaches every function but the ones in `failed`.
    fn attached_but(failed: &[&str]) -> KernelIo {
        let attempts = FUNCTIONS
            .iter()
            .map(|(f, _)| {
                (*f, if failed.contains(f) { Err("load: Invalid argument (os error 22)".into()) } else { Ok(()) })
            })
            .collect();
        KernelIo::from_attempts(Mechanism::Fentry, attempts, Vec::new()).expect("some functions attached")
    }

    #[test]
    fn a_function_that_did_not_attach_is_not_measured_and_its_caller_says_it_includes_it() {
        // ip_generic_getfrag (the send copy) and udp_gro_receive failed to attach; the rest ran.
        let mut io = attached_but(&["ip_generic_getfrag", "udp_gro_receive"]);
        assert_eq!(io.mechanism, Some(Mechanism::Fentry));
        assert_eq!(
            io.unprobed.iter().map(|u| u.function.as_str()).collect::<Vec<_>>(),
            ["udp_gro_receive", "ip_generic_getfrag"]
        );
        let mut stats = [NqStats::default(); KFUNCS];
        for (function, ns) in [
            ("udp_sendmsg", 800),
            ("ip_output", 500),
            ("dev_hard_start_xmit", 300),
            ("__udp_gso_segment", 50),
            ("udp_recvmsg", 600),
            ("skb_copy_datagram_iter", 400),
        ] {
            let i = FUNCTIONS.iter().position(|(f, _)| *f == function).expect("known function");
            stats[i] = NqStats { calls: 1, total_ns: ns, ..NqStats::default() };
        }
        io.add_role(Role::Server, &stats);

        let send = io.breakdown(Role::Server, "send", 1000).expect("rows");
        let copy = send.parts.iter().find(|p| p.stage == "copy").expect("copy part");
        assert_eq!(copy.ns, None);
        assert_eq!(copy.not_measured.as_deref(), Some("ip_generic_getfrag: load: Invalid argument (os error 22)"));
        // udp is udp_sendmsg - ip_output = 300 ns, copy's time in it, and says so (not 300 ns of
        // "udp" beside a 0 ns copy).
        let none = Vec::<&str>::new;
        assert_eq!(
            parts(&send),
            [
                ("syscall entry/exit", Some(200), none()),
                ("udp", Some(300), vec!["copy"]),
                ("ip", Some(150), none()),
                ("device", Some(300), none()),
                ("segmentation", Some(50), none()),
                ("copy", None, none()),
            ]
        );

        let recv = io.breakdown(Role::Server, "recv", 700).expect("rows");
        assert_eq!(
            parts(&recv),
            [("syscall entry/exit", Some(100), none()), ("udp", Some(200), none()), ("copy", Some(400), none())]
        );
        let gro = recv.coalescing_outside.expect("receive reports coalescing");
        assert_eq!(
            (gro.ns, gro.not_measured.as_deref()),
            (None, Some("udp_gro_receive: load: Invalid argument (os error 22)"))
        );
    }

    #[test]
    fn an_unprobed_stage_between_measured_ones_moves_their_time_up_not_out() {
        // ip_output unprobed: udp keeps ip's exclusive time (and says so); device and
        // segmentation, still measured, are taken out of udp's remainder.
        let mut io = attached_but(&["ip_output"]);
        io.rows = vec![
            row("udp_sendmsg", 800),
            row("dev_hard_start_xmit", 300),
            row("__udp_gso_segment", 50),
            row("ip_generic_getfrag", 200),
        ];
        let b = io.breakdown(Role::Server, "send", 1000).expect("rows");
        let none = Vec::<&str>::new;
        assert_eq!(
            parts(&b),
            [
                ("syscall entry/exit", Some(200), none()),
                ("udp", Some(250), vec!["ip"]),
                ("ip", None, none()),
                ("device", Some(300), none()),
                ("segmentation", Some(50), none()),
                ("copy", Some(200), none()),
            ]
        );
        assert_eq!(b.parts.iter().filter_map(|p| p.ns).sum::<u64>(), 1000);
    }

    #[test]
    fn nothing_attached_falls_through_with_the_reason() {
        let attempts =
            FUNCTIONS.iter().map(|(f, _)| (*f, Err("attach: Operation not permitted".to_string()))).collect();
        let notes = KernelIo::from_attempts(Mechanism::Fentry, attempts, Vec::new()).expect_err("nothing attached");
        assert_eq!(notes, ["fentry/fexit unavailable (udp_sendmsg: attach: Operation not permitted)"]);
    }
}
