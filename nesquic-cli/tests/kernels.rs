//! The kernel matrix's checks (`just test-kernels` runs them here and in QEMU on Debian 12's 6.1,
//! docs/kernels.md): what `nesquic doctor` finds on this kernel, and that every mechanism it names
//! measures what it should: the kernel UDP-path rows, quinn with io + crypto probes, a veth link
//! with loss and delay. Expectations follow doctor's findings; `NESQUIC_EXPECT_CAPS` (set by the
//! matrix for stock kernels) pins capabilities that must be found, so a detection that breaks
//! fails rather than quietly taking the fallback path.

mod common;

use std::path::Path;

use serde_json::Value;

use common::{
    category_calls, find_syscall, function_mechanism, io_mechanism, json_name, load_json, nesquic, our_namespaces,
    run_record, serial, stderr, trace_json,
};
use nesquic_engine::trace::TraceReport;

/// `nesquic doctor --json`: its findings (also kept where NESQUIC_DOCTOR_OUT says, for the
/// matrix to compare kernels).
fn doctor() -> (Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = std::env::var_os("NESQUIC_DOCTOR_OUT").map_or_else(|| dir.path().join("doctor.json"), Into::into);
    let out = nesquic().arg("doctor").arg("--json").arg(&path).output().expect("run nesquic doctor");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&std::fs::read(&path).expect("doctor json")).expect("json");
    (json, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn has(doctor: &Value, capability: &str) -> bool {
    doctor["capabilities"][capability].as_bool().unwrap_or_else(|| panic!("doctor lists no {capability}: {doctor}"))
}

#[test]
fn doctor_reports_what_this_kernel_has() {
    let _g = serial();
    let (d, text) = doctor();
    assert_eq!(has(&d, "btf"), Path::new("/sys/kernel/btf/vmlinux").exists());
    assert_eq!(has(&d, "uprobes"), Path::new("/sys/bus/event_source/devices/uprobe").exists());
    // kprobes were attached for real; they cannot work without the kprobe PMU.
    if !Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        assert!(!has(&d, "kprobes"), "{d}");
    }
    for name in ["tracefs", "fentry", "no_lockdown", "netem", "tbf", "clsact", "memlock", "perf_events", "tick"] {
        has(&d, name);
    }
    let expected = std::env::var("NESQUIC_EXPECT_CAPS").unwrap_or_default();
    for name in expected.split(',').filter(|n| !n.is_empty()) {
        assert!(has(&d, name), "{name} expected on this kernel: {text}");
    }
    // Every missing capability comes with what to do about it.
    let missing: Vec<&str> = d["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    for name in &missing {
        assert!(text.contains("what to do:") && text.lines().any(|l| l.trim_start().starts_with(name)), "{text}");
    }
    assert!(text.contains(&format!(
        "kernel {}",
        std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("release").trim()
    )));
}

#[test]
fn kernel_udp_path_rows_agree_with_the_syscall_tracepoints() {
    let _g = serial();
    let (d, _) = doctor();
    let expected = if has(&d, "fentry") {
        Some("fentry")
    } else if has(&d, "kprobes") {
        Some("kprobe")
    } else {
        None
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (json, report) = (dir.path().join("trace.json"), dir.path().join("workload.json"));
    let workload = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-workload");
    let out = nesquic()
        .args(["trace", "--probe", "io,uprobe:nesquic_workload_*", "--probe-backend", "kernel", "--json"])
        .arg(&json)
        .arg("--")
        .arg(&workload)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run nesquic trace");
    assert!(out.status.success(), "{}", stderr(&out));
    let traced: TraceReport = load_json(&json);
    // The syscall tracepoints and uprobes are exact on every kernel (what the workload is built to do).
    let role = &traced.probes.roles[0];
    for (name, calls, bytes, datagrams) in
        [("sendmsg", 7, 7000, 7), ("sendmmsg", 3, 36000, 30), ("sendto", 6, 3000, 4), ("recvfrom", 4, 2000, 4)]
    {
        let s = find_syscall(role, name).unwrap_or_else(|| panic!("no {name} in {role:?}"));
        assert_eq!(
            (s.timing.calls, s.bytes, s.datagrams, io_mechanism(s).as_str()),
            (calls, bytes, datagrams, "tracepoint"),
            "{name}: {s:?}"
        );
    }
    let function = |name: &str| -> u64 {
        let f = common::function(role, name);
        assert_eq!(function_mechanism(f), "uprobe", "{f:?}");
        f.timing.calls
    };
    assert_eq!((function("nesquic_workload_tick"), function("nesquic_workload_sleep_1ms")), (50, 5));
    let kernel = &traced.probes.kernel_io;
    assert_eq!(kernel.mechanism.as_ref().map(json_name).as_deref(), expected, "{kernel:?}");
    let rows = &kernel.rows;
    let Some(mechanism) = expected else {
        // Absent, and the report says why.
        assert!(rows.is_empty(), "{kernel:?}");
        assert!(!kernel.notes.is_empty(), "{kernel:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("kernel UDP path: not measured here"), "{text}");
        return;
    };
    let calls = |function: &str| -> u64 {
        rows.iter().filter(|r| r.role == role.role && r.function == function).map(|r| r.timing.calls).sum()
    };
    for r in rows {
        assert!(json_name(&r.mechanism).starts_with(mechanism), "{r:?}");
    }
    // Every message a send syscall moved went through udp_sendmsg once: 7 + 3x2 + 4.
    let messages_of =
        |names: [&str; 3]| -> u64 { names.iter().map(|s| find_syscall(role, s).map_or(0, |s| s.messages)).sum() };
    let messages = messages_of(["sendmsg", "sendmmsg", "sendto"]);
    assert_eq!(messages, 17, "{role:?}");
    assert_eq!(calls("udp_sendmsg"), messages, "{kernel:?}");
    // Each UDP message leaves as one IP packet (a GSO message is one skb until segmented) and
    // is copied in by at least one getfrag call (a large GSO message takes several). The
    // workload's TCP connection (write/writev/sendfile, handshake, ACKs) leaves through
    // ip_output too, so it sees at least the UDP messages.
    assert!(calls("ip_output") >= messages, "{kernel:?}");
    assert!(calls("ip_generic_getfrag") >= messages, "{kernel:?}");
    // Every receive syscall asks udp_recvmsg at least once per message it returns.
    let received = messages_of(["recvmsg", "recvmmsg", "recvfrom"]);
    assert!(received > 0 && calls("udp_recvmsg") >= received, "{received} received: {kernel:?}");
    assert!(calls("skb_copy_datagram_iter") > 0, "{kernel:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("udp_sendmsg") && text.contains(mechanism), "{text}");
    // packet_io split into exclusive parts of the path, both directions.
    for direction in ["send", "recv"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("packet I/O split ({direction}")))
            .unwrap_or_else(|| panic!("no {direction} split in:\n{text}"));
        for stage in ["syscall entry/exit", "udp", "copy"] {
            assert!(line.contains(stage), "{line}");
        }
    }
}

#[test]
fn quinn_2mb_with_io_and_crypto_probes() {
    let _g = serial();
    let report = run_record(&["--lut", "quinn", "--size", "2MB", "--probe", "io,crypto", "--probe-backend", "kernel"]);
    let rep = &report.repetitions[0];
    assert_eq!((rep.bytes, rep.payload_verified), (2_000_000, true));
    for role in &common::probes(&report, 0).roles {
        let calls = |category: &str| category_calls(role, category);
        assert!(calls("crypto.seal") > 0 && calls("crypto.open") > 0, "{role:?}");
        assert!(find_syscall(role, "sendmsg").map_or(0, |s| s.timing.calls) > 0, "{role:?}");
    }
}

#[test]
fn veth_loss_and_delay_use_netem_where_present_and_loss_is_measured() {
    let _g = serial();
    let (d, _) = doctor();
    let report = run_record(&["--lut", "quinn", "--link", "veth", "--loss", "5", "--delay", "10", "--size", "4MB"]);
    assert!(report.repetitions[0].payload_verified);
    let link = report.link.as_ref().expect("link");
    let mechanisms = &link.mechanisms;
    let used = |prefix: &str| mechanisms.iter().any(|m| m.starts_with(prefix));
    assert_eq!(used("netem "), has(&d, "netem"), "{mechanisms:?}");
    assert_eq!(used("userspace relay"), !has(&d, "netem"), "{mechanisms:?}");
    let loss = link.observed_loss.unwrap_or_else(|| panic!("loss not measured: {link:?}"));
    // The loss is drawn once per packet (skb), and a GSO batch is one packet: a dropped batch
    // takes all its datagrams, so the datagram share swings widely (0.89% for 5% once, on 6.1
    // under QEMU). The packet count is Binomial(offered, 5%): within 4.5 standard deviations
    // fails about once in 10^5 runs.
    let (dropped, offered) = loss.packets.unwrap_or_else(|| panic!("packet loss not measured: {loss:?}"));
    assert!(offered >= 200, "too few packets to test a 5% loss: {loss:?}");
    let (mean, sd) = (0.05 * offered as f64, (offered as f64 * 0.05 * 0.95).sqrt());
    assert!(dropped > 0 && (dropped as f64 - mean).abs() <= 4.5 * sd + 1.0, "{dropped} of {offered} packets: {loss:?}");
    // Each dropped packet held at least one datagram.
    assert!(loss.dropped >= dropped && loss.seen >= offered, "{loss:?}");
    // The 10 ms each way was applied: a 1-RTT handshake takes at least 20 ms.
    let handshake = report.repetitions[0].handshake_ms;
    assert!(handshake >= 20.0, "handshake {handshake} ms");
    assert!(our_namespaces().is_empty(), "left {:?}", our_namespaces());
}

/// `profile:tick` samples a busy thread HZ times a second on every kernel of the matrix, without
/// the tick's own interrupt frames: were they left in, every sample's innermost frame would be the
/// tick's and the workload's functions would have no share.
///
/// What the data guarantee on a loaded machine: a tick samples the thread only while it is on a
/// CPU, so each run's samples lie between HZ x its CPU time (less: the kernel leaves a VM's steal
/// time out of CPU time, the tick does not) and HZ x its wall time. Runs of a 4 s spin are pooled
/// until 900 samples (at most 6 runs): the hot/cold ratio is then within ~7% (10% at ~500 samples,
/// measured on 6.1 under QEMU: 2.19-3.00 in 8 runs).
#[test]
fn the_tick_profile_samples_the_busy_thread_without_the_ticks_own_frames() {
    let _g = serial();
    let (mut samples, mut hot, mut cold, mut walks, mut runs) = (0u64, 0u64, 0u64, 0u64, 0);
    while samples < 900 && runs < 6 {
        let (traced, err) = trace_on_the_tick(&["--spin", "4000"]);
        runs += 1;
        let profile = traced.profile.as_ref().expect("profile");
        let hz = profile.frequency_hz as f64;
        assert!([100.0, 250.0, 300.0, 1000.0].contains(&hz), "HZ {hz}");
        let role = &profile.roles[0];
        let cpu_s = traced.cpu_user_s + traced.cpu_system_s;
        let (low, high) = (0.6 * cpu_s * hz - 5.0, 1.05 * traced.wall_s * hz + 5.0);
        let n = role.samples as f64;
        assert!(
            (low..=high).contains(&n),
            "{n} samples at {hz} Hz, {cpu_s:.2} s CPU, {:.2} s wall: {err}",
            traced.wall_s
        );
        let tick_frames: Vec<_> = role
            .top_functions
            .iter()
            .filter(|f| f.name.contains("hrtimer") || f.name.contains("sysvec") || f.name.starts_with("bpf_"))
            .collect();
        assert!(tick_frames.is_empty(), "the tick's own frames left in: {tick_frames:?}");
        let of = |name: &str| role.top_functions.iter().find(|f| f.name == name).map_or(0, |f| f.samples);
        (hot, cold) = (hot + of("nesquic_workload_hot"), cold + of("nesquic_workload_cold"));
        samples += role.samples;
        walks += kernel_walks(profile);
    }
    assert!(samples >= 500, "{samples} samples in {runs} runs: too few to judge");
    // The spin gives `_hot` 5 iterations of the same loop for every 2 of `_cold` (2.5x).
    let ratio = hot as f64 / cold.max(1) as f64;
    assert!(hot * 5 > samples && (1.8..=3.5).contains(&ratio), "hot {hot}, cold {cold} of {samples} samples");
    // Most ticks interrupt the spin's user code, and those skip the kernel-stack walk.
    assert!(walks < samples / 2, "{walks} kernel walks of {samples} samples");
}

/// The other half of the user-mode shortcut: a tick that interrupts kernel code walks its kernel
/// stack. A process that spends nearly all its time clearing user memory in `read` of /dev/zero
/// is sampled in those kernel functions, every such sample walked.
#[test]
fn the_tick_profile_walks_the_kernel_stack_of_a_thread_in_the_kernel() {
    let _g = serial();
    let (traced, err) = trace_on_the_tick(&["--spin-read", "1500"]);
    let profile = traced.profile.as_ref().expect("profile");
    let role = &profile.roles[0];
    assert!(role.samples >= 50, "{} samples: {err}", role.samples);
    // Not all: the process's start-up (the dynamic loader, ~10^5 relocations, emulated under TCG)
    // and the loop's own code are user mode. Debian 12's 6.1 under TCG walked 380 of 483 (79%);
    // a user-mode spin walks under half (the test above), so 60% still tells them apart.
    let walks = kernel_walks(profile);
    assert!(walks * 10 >= role.samples * 6, "{walks} kernel walks of {} samples", role.samples);
    // The page clearing behind /dev/zero, by whichever name this kernel gives it.
    let in_zeroing: f64 = role
        .top_functions
        .iter()
        .filter(|f| ["zero", "clear_user", "stos"].iter().any(|n| f.name.contains(n)))
        .map(|f| f.share)
        .sum();
    assert!(in_zeroing >= 0.5, "{in_zeroing} in the kernel's zeroing: {:?}", role.top_functions);
}

/// With kernel uprobes attached the shortcut is off: a uprobe's handlers run in the kernel on the
/// way back to user code, where a tick looks like one in user code, and their cost must stay in
/// the profile. Every sample of the same user-mode spin then walks its kernel stack.
#[test]
fn with_kernel_uprobes_every_tick_walks_the_kernel_stack() {
    let _g = serial();
    let probes = ["--probe", "profile:tick,uprobe:nesquic_workload_cold", "--probe-backend", "kernel"];
    // Runs until 50 samples (a loaded machine gives the spin ~40 a run): every one walked.
    let (mut samples, mut runs) = (0, 0);
    while samples < 50 && runs < 5 {
        let (traced, err) = trace_workload(&probes, &["--spin", "1000"]);
        let profile = traced.profile.as_ref().expect("profile");
        let role = &profile.roles[0];
        assert_eq!(kernel_walks(profile), role.samples, "{err}");
        samples += role.samples;
        runs += 1;
    }
    assert!(samples >= 50, "{samples} samples in {runs} runs");
}

/// The default profile has no fixed phase (issue 53). `nesquic-workload --phases` spins in
/// `nesquic_workload_phase_a` for the first 2 ms of every 4 ms window of CLOCK_MONOTONIC and in
/// `_phase_b` for the other 2 ms, with the windows as they are and shifted by 2 ms: the scheduler
/// tick, which fires at fixed 4 ms boundaries of that clock (HZ=250), gave one function ~95% of
/// the samples and the other ~0% (`the_tick_profile_aliases_with_work_in_step_with_it`). The
/// default profile must give each its share of the CPU within 5 points.
///
/// What the data guarantee: the workload adds up the thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
/// the clock a CPU-clock sampler samples) in each function; preemption by other processes moves
/// wall-clock phases but not this. (The chunks of work each ran are not it under QEMU TCG with the
/// host busy: 39.7% of the chunks were 54.8% of the samples.) The profile's share of phase_a
/// among the two functions' samples estimates that CPU share. At 251 Hz the samples sweep the 4 ms window evenly (16 us a sample);
/// preemption makes which of them land in the workload random, at worst a binomial error:
/// samples are pooled over runs until 2,500 (the error's sd then is at most 1.0 point at 50%, so
/// 5 points is 5 sd), at most 8 runs of 6 s (a busy loop beside the workload on this 2-CPU VM
/// halves its samples).
#[test]
fn the_default_profile_sees_both_halves_of_work_in_step_with_the_tick() {
    let _g = serial();
    // Not in the QEMU matrix (test-kernels sets NESQUIC_EXPECT_CAPS there): under TCG with the
    // host loaded the guest's samples and its threads' CPU time part by more than 5 points (one
    // pass, one fail in two runs here), a property of the emulation, not of the sampler (the
    // tick's aliasing, below, blurs there too).
    if std::env::var_os("NESQUIC_EXPECT_CAPS").is_some() {
        eprintln!("phase fidelity: checked on the native kernel only (QEMU TCG timing is not faithful)");
        return;
    }
    for shift_us in [0, 2000] {
        let mut pooled = Phases::default();
        let mut runs = 0;
        while pooled.samples() < 2500 && runs < 8 {
            let run = phases(&["--probe", "profile"], shift_us, 6000);
            assert_eq!(run.clock, nesquic_ebpf::profile::SampleClock::CpuClock, "{}", run.err);
            pooled.add(&run);
            runs += 1;
        }
        let (profile, truth) = (pooled.share_a(), pooled.truth_a());
        let what = format!(
            "windows shifted {shift_us} us, {runs} runs: phase_a {:.1}% of {} samples, {:.1}% of the thread's CPU \
             time ({} of {} chunks of work); last run: {}",
            100.0 * profile,
            pooled.samples(),
            100.0 * truth,
            pooled.chunks_a,
            pooled.chunks_a + pooled.chunks_b,
            pooled.err
        );
        eprintln!("{}", what.lines().next().unwrap_or_default());
        assert!(pooled.samples() >= 1500, "too few samples to judge: {what}");
        assert!((profile - truth).abs() <= 0.05, "{what}");
        // The workload did alternate: each function had a real share (quiet: 50%; 77.6% for
        // phase_a once with the machine's two CPUs loaded ~4x, its samples 77.1%).
        assert!((0.1..=0.9).contains(&truth), "{what}");
    }
}

/// Why the test above matters: the tick samples the same workload at a fixed phase and misses
/// one half of it by far more than the 5 points allowed, at one shift of the windows or the other.
#[test]
fn the_tick_profile_aliases_with_work_in_step_with_it() {
    let _g = serial();
    // Native only, as the test above: under QEMU TCG with the host loaded the guest's tick is
    // jittered by the emulation (the tick missed by only 8 and 17 points there once, 95 natively).
    if std::env::var_os("NESQUIC_EXPECT_CAPS").is_some() {
        eprintln!("tick aliasing: checked on the native kernel only (QEMU TCG timing is not faithful)");
        return;
    }
    let misses: Vec<f64> = [0, 2000]
        .into_iter()
        .map(|shift_us| {
            // ~750 samples a run quiet, ~380 beside a busy loop, 30 with the machine loaded ~4x:
            // runs are pooled until 100 (a 50-point miss shows in 100).
            let (mut one, mut runs) = (Phases::default(), 0);
            while one.samples() < 100 && runs < 8 {
                let run = phases(&["--probe", "profile:tick"], shift_us, 3000);
                assert_eq!(run.clock, nesquic_ebpf::profile::SampleClock::SchedulerTick, "{}", run.err);
                assert!(run.err.contains("fixed phase"), "profile:tick says it can alias: {}", run.err);
                one.add(&run);
                runs += 1;
            }
            assert!(one.samples() >= 100, "{} samples in {runs} runs: {}", one.samples(), one.err);
            eprintln!(
                "tick, windows shifted {shift_us} us: phase_a {:.1}% of {} samples, {:.1}% of the CPU",
                100.0 * one.share_a(),
                one.samples(),
                100.0 * one.truth_a()
            );
            (one.share_a() - one.truth_a()).abs()
        })
        .collect();
    assert!(misses.iter().any(|&m| m > 0.2), "the tick missed by {misses:?}: the workload no longer tests phase");
}

/// Pooled results of `nesquic-workload --phases` runs.
#[derive(Default)]
struct Phases {
    samples_a: u64,
    samples_b: u64,
    chunks_a: u64,
    chunks_b: u64,
    cpu_ns_a: u64,
    cpu_ns_b: u64,
    clock: nesquic_ebpf::profile::SampleClock,
    err: String,
}

impl Phases {
    fn add(&mut self, run: &Phases) {
        self.samples_a += run.samples_a;
        self.samples_b += run.samples_b;
        self.chunks_a += run.chunks_a;
        self.chunks_b += run.chunks_b;
        self.cpu_ns_a += run.cpu_ns_a;
        self.cpu_ns_b += run.cpu_ns_b;
        self.clock = run.clock;
        self.err.clone_from(&run.err);
    }

    /// The two functions' samples.
    fn samples(&self) -> u64 {
        self.samples_a + self.samples_b
    }

    /// phase_a's share of them.
    fn share_a(&self) -> f64 {
        self.samples_a as f64 / self.samples().max(1) as f64
    }

    /// phase_a's share of the two functions' CPU, by the workload's own count.
    fn truth_a(&self) -> f64 {
        self.cpu_ns_a as f64 / (self.cpu_ns_a + self.cpu_ns_b).max(1) as f64
    }
}

/// `nesquic trace OPTIONS -- nesquic-workload --phases MS SHIFT_US`: each function's samples and
/// the workload's own count of what it ran.
fn phases(options: &[&str], shift_us: u64, ms: u64) -> Phases {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("phases.json");
    let out = out.to_str().expect("utf-8 path");
    let (traced, err) = trace_workload(options, &["--phases", &ms.to_string(), &shift_us.to_string(), out]);
    let counts: Value = load_json(Path::new(out));
    let profile = traced.profile.as_ref().unwrap_or_else(|| panic!("no profile: {err}"));
    let role = profile.roles.first().unwrap_or_else(|| panic!("no samples: {err}"));
    let samples = |name: &str| role.top_functions.iter().find(|f| f.name == name).map_or(0, |f| f.samples);
    Phases {
        samples_a: samples("nesquic_workload_phase_a"),
        samples_b: samples("nesquic_workload_phase_b"),
        chunks_a: counts["chunks_a"].as_u64().expect("chunks_a"),
        chunks_b: counts["chunks_b"].as_u64().expect("chunks_b"),
        cpu_ns_a: counts["cpu_ns_a"].as_u64().expect("cpu_ns_a"),
        cpu_ns_b: counts["cpu_ns_b"].as_u64().expect("cpu_ns_b"),
        clock: profile.clock,
        err,
    }
}

/// The samples whose kernel stack the sampler walked (the tick's own count).
fn kernel_walks(profile: &nesquic_ebpf::profile::Profile) -> u64 {
    profile.sampler.and_then(|c| c.kernel_walks).expect("the sampler counts its kernel walks")
}

/// `nesquic trace --probe profile:tick` of nesquic-workload with `args`, checked to have sampled
/// on the tick: the report and stderr.
fn trace_on_the_tick(args: &[&str]) -> (TraceReport, String) {
    let (traced, err) = trace_workload(&["--probe", "profile:tick"], args);
    let clock = traced.profile.as_ref().map(|p| p.clock);
    assert_eq!(clock, Some(nesquic_ebpf::profile::SampleClock::SchedulerTick), "{err}");
    (traced, err)
}

/// `nesquic trace OPTIONS --json` of nesquic-workload with `args`: the report and stderr.
fn trace_workload(options: &[&str], args: &[&str]) -> (TraceReport, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = Path::new(env!("CARGO_BIN_EXE_nesquic")).with_file_name("nesquic-workload");
    let command: Vec<&std::ffi::OsStr> =
        std::iter::once(workload.as_os_str()).chain(args.iter().map(std::ffi::OsStr::new)).collect();
    trace_json(dir.path(), options, &command)
}
