//! `profile:tick`: sampling on the scheduler tick instead of a timer of our own. Every busy CPU
//! takes a tick interrupt HZ times a second anyway; a program on the tick's hrtimer expiry
//! (`nq_tick_sample`) adds no interrupt. Here that matters: in this VM an extra timer interrupt
//! costs ~16 us (bench/sampler-floor.md), four times the sampling program itself.
//!
//! This module finds what the program needs from the running kernel: the tick's hrtimer callback
//! (compared against in the program), the interrupt-entry symbols whose frames it strips from the
//! kernel stacks (they are the tick's, not the sampled code's), and HZ, the rate.

use std::time::Duration;

use crate::EbpfError;

/// The tick's hrtimer callback across kernels, first found wins: `tick_sched_timer` before 6.10
/// (where `tick_nohz_handler` also exists, as the low-resolution tick's clock-event handler, never
/// an hrtimer's), `tick_nohz_handler` since.
const TICK_CALLBACKS: [&str; 2] = ["tick_sched_timer", "tick_nohz_handler"];

/// What `profile:tick` needs from /proc/kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickSymbols {
    /// Address of the tick's hrtimer callback.
    pub callback: u64,
    /// `[start, end)` of every interrupt-entry stub (`asm_sysvec_*`, `asm_common_interrupt`): the
    /// innermost such frame of a tick sample's kernel stack is where the tick interrupted.
    pub entries: Vec<(u64, u64)>,
}

impl TickSymbols {
    /// Reads /proc/kallsyms (root: addresses are zero otherwise).
    pub fn read() -> Result<Self, EbpfError> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| EbpfError::Io { what: "/proc/kallsyms".into(), source: e })?;
        Self::parse(&text)
    }

    /// From kallsyms text: `ADDRESS TYPE NAME [MODULE]` lines.
    pub fn parse(kallsyms: &str) -> Result<Self, EbpfError> {
        let mut text: Vec<(u64, &str)> = kallsyms
            .lines()
            .filter_map(|line| {
                let mut it = line.split_whitespace();
                let (addr, kind, name) = (it.next()?, it.next()?, it.next()?);
                let text_symbol = matches!(kind, "t" | "T");
                text_symbol.then(|| Some((u64::from_str_radix(addr, 16).ok()?, name))).flatten()
            })
            .collect();
        text.sort_unstable();
        if text.iter().all(|&(addr, _)| addr == 0) {
            return Err(EbpfError::Load(
                "profile:tick: /proc/kallsyms shows no addresses (needs root, kptr_restrict < 2)".into(),
            ));
        }
        let callback = TICK_CALLBACKS
            .iter()
            .find_map(|want| text.iter().find(|(_, name)| name == want).map(|&(addr, _)| addr))
            .ok_or_else(|| {
                EbpfError::Load(format!(
                    "profile:tick: this kernel has none of the tick callbacks {} (use profile:HZ)",
                    TICK_CALLBACKS.join(", ")
                ))
            })?;
        let entries = text
            .iter()
            .enumerate()
            .filter(|(_, (_, name))| name.starts_with("asm_sysvec_") || *name == "asm_common_interrupt")
            .map(|(i, &(start, _))| {
                // A symbol ends where the next higher one starts.
                let end = text[i + 1..].iter().map(|&(a, _)| a).find(|&a| a > start).unwrap_or(start + 1);
                (start, end)
            })
            .collect();
        Ok(Self { callback, entries })
    }

    /// A tick sample's kernel stack (innermost first) without the tick's own frames: everything up
    /// to and including the interrupt entry. Empty when the tick interrupted user space. `None`
    /// when no frame is an interrupt entry (a tick delivered some other way): left as it is.
    pub fn strip<'a>(&self, frames: &'a [u64]) -> Option<&'a [u64]> {
        let entry = frames.iter().position(|&ip| self.entries.iter().any(|&(start, end)| ip >= start && ip < end))?;
        Some(&frames[entry + 1..])
    }
}

/// The kernel's tick rate: CONFIG_HZ from /boot/config-RELEASE, else measured from the jiffies
/// counter in /proc/timer_list over 200 ms (snapped to the usual values: 100, 250, 300, 1000).
pub fn scheduler_hz() -> Result<u64, EbpfError> {
    if let Some(hz) = config_hz() {
        return Ok(hz);
    }
    let (j0, t0) = jiffies_now()?;
    std::thread::sleep(Duration::from_millis(200));
    let (j1, t1) = jiffies_now()?;
    let measured = (j1.saturating_sub(j0)) as f64 * 1e9 / (t1.saturating_sub(t0)).max(1) as f64;
    [100u64, 250, 300, 1000].into_iter().find(|&hz| (measured - hz as f64).abs() <= hz as f64 * 0.1).ok_or_else(|| {
        EbpfError::Load(format!("profile:tick: the tick rate measured {measured:.0} Hz, not a known HZ"))
    })
}

fn config_hz() -> Option<u64> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let config = std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    parse_config_hz(&config)
}

fn parse_config_hz(config: &str) -> Option<u64> {
    config.lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")).and_then(|v| v.trim().parse().ok())
}

/// (jiffies, now in ns) from /proc/timer_list's first lines.
fn jiffies_now() -> Result<(u64, u64), EbpfError> {
    let text = std::fs::read_to_string("/proc/timer_list")
        .map_err(|e| EbpfError::Io { what: "/proc/timer_list".into(), source: e })?;
    parse_timer_list(&text)
        .ok_or_else(|| EbpfError::Load("profile:tick: /proc/timer_list has no `now at` and `jiffies:` lines".into()))
}

fn parse_timer_list(text: &str) -> Option<(u64, u64)> {
    let now = text.lines().find_map(|l| l.strip_prefix("now at "))?.split_whitespace().next()?.parse().ok()?;
    let jiffies = text.lines().find_map(|l| l.trim().strip_prefix("jiffies: "))?.trim().parse().ok()?;
    Some((jiffies, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81001000 T _stext
ffffffff81400000 t tick_nohz_handler
ffffffff81400200 t tick_do_update_jiffies64
ffffffff82000000 T asm_sysvec_apic_timer_interrupt
ffffffff82000020 T asm_sysvec_reschedule_ipi
ffffffff82000040 T asm_common_interrupt
ffffffff82000080 T asm_exc_page_fault
ffffffff83000000 D jiffies
";

    #[test]
    fn finds_the_tick_callback_and_the_interrupt_entries() {
        let s = TickSymbols::parse(KALLSYMS).expect("parse");
        assert_eq!(s.callback, 0xffffffff81400000);
        assert_eq!(
            s.entries,
            vec![
                (0xffffffff82000000, 0xffffffff82000020),
                (0xffffffff82000020, 0xffffffff82000040),
                (0xffffffff82000040, 0xffffffff82000080)
            ]
        );
        // 6.1 has both: the hrtimer's callback is tick_sched_timer.
        let old = format!("{KALLSYMS}ffffffff81400400 t tick_sched_timer\n");
        assert_eq!(TickSymbols::parse(&old).expect("6.1").callback, 0xffffffff81400400);
        let none = KALLSYMS.replace("tick_nohz_handler", "something_else");
        assert!(TickSymbols::parse(&none).expect_err("no tick").to_string().contains("profile:HZ"));
        let hidden = KALLSYMS.lines().map(|l| format!("0000000000000000{}\n", &l[16..])).collect::<String>();
        assert!(TickSymbols::parse(&hidden).expect_err("hidden").to_string().contains("root"));
    }

    #[test]
    fn strips_the_ticks_own_frames() {
        let s = TickSymbols::parse(KALLSYMS).expect("parse");
        // program, hrtimer_interrupt, ..., the entry stub, then the interrupted kernel code.
        let in_kernel =
            [0xffffffffa0000010, 0xffffffff81400100, 0xffffffff82000008, 0xffffffff81700000, 0xffffffff81700100];
        assert_eq!(s.strip(&in_kernel), Some(&in_kernel[3..]));
        let in_user = [0xffffffffa0000010, 0xffffffff81400100, 0xffffffff82000008];
        assert_eq!(s.strip(&in_user), Some(&[][..]));
        // The page-fault entry is not an interrupt's: no entry, left as it is.
        assert_eq!(s.strip(&[0xffffffff81400100, 0xffffffff82000090]), None);
    }

    #[test]
    fn reads_hz_from_the_config_and_jiffies_from_timer_list() {
        assert_eq!(parse_config_hz("# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(parse_config_hz("CONFIG_NO_HZ=y\n"), None);
        let list = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 35983884999464 nsecs\n\ncpu: 0\n jiffies: 4303888205\n";
        assert_eq!(parse_timer_list(list), Some((4303888205, 35983884999464)));
    }
}
