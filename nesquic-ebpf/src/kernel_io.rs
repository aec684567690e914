//! In-kernel packet I/O: the UDP path's functions, counted and timed per role by fentry/fexit
//! where the kernel allows it (cheapest), else kprobe/kretprobe, else not at all (the syscall
//! tracepoints still run). The mechanism is found by trying, at run time: a kernel in lockdown
//! refuses fentry with EPERM, a kernel without CONFIG_KPROBES has no kprobe PMU. The measured
//! types are `nesquic-model`'s (re-exported here).

use crate::Role;
use aya::programs::{FEntry, FExit, KProbe};
use aya::{Btf, Ebpf};

use crate::layout::{NqStats, KFUNCS};
pub use nesquic_model::kernel_io::{
    Breakdown, KernelFunctionMetrics, KernelIo, Mechanism, Part, Stage, Unprobed, FUNCTIONS,
};

const _: () = assert!(KFUNCS == nesquic_model::kernel_io::KFUNCS);

/// The (entry, exit) program names of `function` under `mechanism`.
fn programs(mechanism: Mechanism, function: &str) -> (String, String) {
    match mechanism {
        Mechanism::Fentry => (format!("nq_fe_{function}"), format!("nq_fx_{function}")),
        Mechanism::Kprobe => (format!("nq_kp_{function}"), format!("nq_kr_{function}")),
    }
}

/// Adds `role`'s rows from summed per-function stats; `stats[i]` is function `i` of `role`.
pub fn add_role(io: &mut KernelIo, role: Role, stats: &[NqStats]) {
    let Some(mechanism) = io.mechanism else { return };
    for (i, s) in stats.iter().enumerate().filter(|(_, s)| s.calls > 0) {
        let Some((function, stage)) = FUNCTIONS.get(i) else { continue };
        io.rows.push(KernelFunctionMetrics {
            role,
            function: function.to_string(),
            stage: *stage,
            mechanism: mechanism.label().to_string(),
            timing: crate::timing::from_stats(s),
        });
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
        match from_attempts(mechanism, attempts, notes) {
            Ok(io) => return io,
            Err(back) => notes = back,
        }
    }
    KernelIo { mechanism: None, notes, rows: Vec::new(), unprobed: Vec::new() }
}

fn attach_one(ebpf: &mut Ebpf, mechanism: Mechanism, function: &str, btf: Option<&Btf>) -> Result<(), String> {
    let (enter, exit) = programs(mechanism, function);
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
mod attach_tests {
    use super::*;

    fn row(function: &str, total_ns: u64) -> KernelFunctionMetrics {
        let stage = FUNCTIONS.iter().find(|(f, _)| *f == function).expect("known function").1;
        KernelFunctionMetrics {
            role: Role::Server,
            function: function.into(),
            stage,
            mechanism: "fentry/fexit".into(),
            timing: nesquic_model::Timing { calls: 1, total_ns, p50_le_ns: 0, p99_le_ns: 0, hist: Vec::new() },
        }
    }

    /// (stage, exclusive ns or None, stages it includes) per part.
    fn parts(b: &Breakdown) -> Vec<(&str, Option<u64>, Vec<&str>)> {
        b.parts.iter().map(|p| (p.stage.as_str(), p.ns, p.includes.iter().map(String::as_str).collect())).collect()
    }

    /// What `attach` builds when fentry attaches every function but the ones in `failed`.
    fn attached_but(failed: &[&str]) -> KernelIo {
        let attempts = FUNCTIONS
            .iter()
            .map(|(f, _)| {
                (*f, if failed.contains(f) { Err("load: Invalid argument (os error 22)".into()) } else { Ok(()) })
            })
            .collect();
        from_attempts(Mechanism::Fentry, attempts, Vec::new()).expect("some functions attached")
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
        add_role(&mut io, Role::Server, &stats);

        let send = io.breakdown(Role::Server, nesquic_model::Direction::Send, 1000).expect("rows");
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

        let recv = io.breakdown(Role::Server, nesquic_model::Direction::Recv, 700).expect("rows");
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
        let b = io.breakdown(Role::Server, nesquic_model::Direction::Send, 1000).expect("rows");
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
        let notes = from_attempts(Mechanism::Fentry, attempts, Vec::new()).expect_err("nothing attached");
        assert_eq!(notes, ["fentry/fexit unavailable (udp_sendmsg: attach: Operation not permitted)"]);
    }
}
