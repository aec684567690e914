//! Each local LUT thread's time on a CPU and waiting for one over the transfer, from the
//! scheduler's own accounting (`/proc/PID/task/TID/schedstat`: ns on a CPU, ns runnable on a run
//! queue). The window opens when the client starts (every thread of both sides read once) and
//! closes at the client's result; between the two, every thread is read each [`READ_EVERY`], so
//! that a process that ends before its result is read keeps its last reading (its window ends
//! there), and a thread started inside the window counts from zero. Per thread, not per process: a
//! multi-threaded stack's process total says nothing of whether one thread was saturated.

use std::collections::BTreeMap;
use std::time::Instant;

use nesquic_model::threads::{SideThreads, ThreadTime};
use nesquic_protocol::Role;
use nesquic_record::figures::ReadCost;

use crate::drops::thread_cpu_ns;

/// How often the threads are read between the window's ends: a reading costs ~20 us per thread
/// (two /proc files each), and only a process that exits before its last reading needs them.
pub const READ_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A thread's counters at one reading.
#[derive(Debug, Clone, Default)]
struct Reading {
    name: String,
    on_cpu_ns: u64,
    runqueue_ns: u64,
}

/// One side's threads.
#[derive(Debug)]
struct Side {
    role: Role,
    pid: i32,
    /// Each thread's counters when the window opened (zero for a thread started later).
    base: BTreeMap<i32, Reading>,
    /// Each thread's last reading.
    latest: BTreeMap<i32, Reading>,
    /// When the side was last read while it ran.
    read_at: Option<Instant>,
}

/// Follows the LUT processes' threads through one repetition's transfer.
#[derive(Debug, Default)]
pub struct ThreadClock {
    sides: Vec<Side>,
    opened: Option<Instant>,
    closed: bool,
    last: Option<Instant>,
    cost: ReadCost,
}

impl ThreadClock {
    /// Follows `pid` in `role`; the client's start opens the window for every side.
    pub fn watch(&mut self, role: Role, pid: i32) {
        self.sides.retain(|s| s.role != role);
        self.sides.push(Side { role, pid, base: BTreeMap::new(), latest: BTreeMap::new(), read_at: None });
        if role == Role::Client && self.opened.is_none() {
            self.opened = Some(Instant::now());
            self.read_all(true);
        }
    }

    /// Reads every thread if [`READ_EVERY`] has passed since the last reading, while the
    /// window is open.
    pub fn tick(&mut self) {
        if self.opened.is_none() || self.closed || self.last.is_some_and(|t| t.elapsed() < READ_EVERY) {
            return;
        }
        self.read_all(false);
    }

    /// The transfer ended (the client reported its result): a last reading closes the window.
    pub fn close(&mut self) {
        if self.opened.is_some() && !self.closed {
            self.read_all(false);
            self.closed = true;
        }
    }

    /// What the readings cost this thread.
    pub fn cost(&self) -> ReadCost {
        self.cost
    }

    /// Each side read at least once after the window opened, its threads busiest first.
    pub fn figures(&self) -> Vec<SideThreads> {
        let Some(opened) = self.opened else { return Vec::new() };
        self.sides
            .iter()
            .filter_map(|side| {
                let read_at = side.read_at?;
                let mut threads: Vec<ThreadTime> = side
                    .latest
                    .iter()
                    .map(|(tid, now)| {
                        let base = side.base.get(tid).cloned().unwrap_or_default();
                        ThreadTime {
                            tid: *tid,
                            name: now.name.clone(),
                            on_cpu_ns: now.on_cpu_ns.saturating_sub(base.on_cpu_ns),
                            runqueue_ns: now.runqueue_ns.saturating_sub(base.runqueue_ns),
                        }
                    })
                    .collect();
                threads.sort_by_key(|t| std::cmp::Reverse(t.busy_ns()));
                let window_ns = u64::try_from(read_at.saturating_duration_since(opened).as_nanos()).unwrap_or(u64::MAX);
                Some(SideThreads { role: side.role, window_ns, threads })
            })
            .collect()
    }

    fn read_all(&mut self, opening: bool) {
        let start = thread_cpu_ns();
        let now = Instant::now();
        for side in &mut self.sides {
            let threads = read_threads(side.pid);
            if threads.is_empty() {
                // Exited (or reaped): its last reading stands.
                continue;
            }
            for (tid, reading) in threads {
                if opening {
                    side.base.insert(tid, reading.clone());
                }
                side.latest.insert(tid, reading);
            }
            side.read_at = Some(now);
        }
        self.last = Some(now);
        self.cost.reads += 1;
        self.cost.cpu_ns += thread_cpu_ns().saturating_sub(start);
    }
}

/// Every live thread of `pid`: empty once the process has exited (a zombie's threads are gone
/// and its main thread no longer runs).
fn read_threads(pid: i32) -> Vec<(i32, Reading)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut threads = Vec::new();
    for tid in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
        let Some((name, state)) = name_and_state(pid, tid) else { continue };
        if state == 'Z' || state == 'X' {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")) else { continue };
        if let Some((on_cpu_ns, runqueue_ns)) = parse_schedstat(&text) {
            threads.push((tid, Reading { name, on_cpu_ns, runqueue_ns }));
        }
    }
    threads
}

/// The thread's `comm` and state letter from its `stat` line.
fn name_and_state(pid: i32, tid: i32) -> Option<(String, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    parse_stat(&text)
}

/// `comm` sits in parentheses and may hold spaces and parentheses itself: it ends at the last
/// `)`, and the state letter follows.
fn parse_stat(text: &str) -> Option<(String, char)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let state = text.get(close + 1..)?.trim_start().chars().next()?;
    Some((name, state))
}

/// `schedstat`: ns on a CPU, ns waiting on a run queue, time slices.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_schedstat_lines_parse() {
        assert_eq!(parse_stat("812 (tokio (rt) w) R 1 2 3"), Some(("tokio (rt) w".to_string(), 'R')));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_schedstat("67718365 72787000 132\n"), Some((67_718_365, 72_787_000)));
        assert_eq!(parse_schedstat("1"), None);
    }

    #[test]
    fn a_spinning_thread_is_saturated_and_a_sleeping_one_is_not() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let spinner = std::thread::Builder::new()
            .name("nq-spin".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .expect("spawn");
        let sleeper = std::thread::Builder::new()
            .name("nq-sleep".into())
            .spawn(|| std::thread::sleep(std::time::Duration::from_millis(400)))
            .expect("spawn");
        let mut clock = ThreadClock::default();
        clock.watch(Role::Client, std::process::id() as i32);
        for _ in 0..10 {
            std::thread::sleep(READ_EVERY);
            clock.tick();
        }
        clock.close();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().expect("join");
        sleeper.join().expect("join");
        let [side] = &clock.figures()[..] else { panic!("one side: {:?}", clock.figures()) };
        let busy = |name: &str| side.threads.iter().find(|t| t.name == name).map(|t| side.share(t.busy_ns()));
        // A spinning thread never blocks: on a CPU or waiting for one, whatever the load (the
        // kernel folds a running slice or a wait in at its end: a few ms off at each end of 1 s).
        assert!(busy("nq-spin").is_some_and(|s| s > 0.9), "{side:?}");
        assert!(busy("nq-sleep").is_some_and(|s| s < 0.05), "{side:?}");
        assert_eq!(side.busiest().map(|t| t.name.as_str()), Some("nq-spin"));
        assert!(clock.cost().reads >= 2);
    }
}
