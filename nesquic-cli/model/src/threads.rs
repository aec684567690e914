//! Per-thread time over a transfer: how long each LUT thread ran and how long it was runnable
//! but waiting for a CPU (the scheduler's own accounting, `/proc/PID/task/TID/schedstat`). A
//! thread that ran or waited to run for (nearly) the whole transfer never waited for anything
//! else, the socket, a timer or a lock: its side is CPU-bound there. Per thread, not per
//! process: a multi-threaded stack's process total can be 150% with no thread saturated.

use serde::{Deserialize, Serialize};

use crate::role::Role;

/// A side is CPU-bound when its busiest thread ran or waited for a CPU this share of the
/// transfer (or more): it never blocked for long on the network, a timer or a lock.
pub const SATURATED: f64 = 0.95;
/// A side is held back by other tasks when its threads waited for a CPU this share of the
/// transfer (summed over threads) or more, and longer than they ran.
pub const CONTENDED: f64 = 0.25;

/// One thread's time inside the transfer's window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTime {
    /// Its thread id.
    pub tid: i32,
    /// Its name (`comm`), as the stack set it.
    pub name: String,
    /// Time on a CPU, ns.
    pub on_cpu_ns: u64,
    /// Time runnable but waiting for a CPU another task held, ns.
    pub runqueue_ns: u64,
}

impl ThreadTime {
    /// On a CPU or waiting for one: the time it did not block, ns.
    pub fn busy_ns(&self) -> u64 {
        self.on_cpu_ns + self.runqueue_ns
    }
}

/// Every thread of one side over the transfer's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideThreads {
    /// Which side.
    pub role: Role,
    /// The window: from the first reading (the client's start) to the side's last reading
    /// before the transfer ended, ns.
    pub window_ns: u64,
    /// Each thread seen in the window, busiest first.
    pub threads: Vec<ThreadTime>,
}

impl SideThreads {
    /// The thread that ran or waited to run the longest.
    pub fn busiest(&self) -> Option<&ThreadTime> {
        self.threads.iter().max_by_key(|t| t.busy_ns())
    }

    /// `ns` as a share of the window.
    pub fn share(&self, ns: u64) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        ns as f64 / self.window_ns as f64
    }

    /// The busiest thread's busy share of the window (0 without threads).
    pub fn busiest_share(&self) -> f64 {
        self.busiest().map_or(0.0, |t| self.share(t.busy_ns()))
    }

    /// Whether the side's busiest thread never blocked for long: [`SATURATED`] of the window.
    pub fn saturated(&self) -> bool {
        self.busiest_share() >= SATURATED
    }

    /// On a CPU, over every thread, ns.
    pub fn on_cpu_ns(&self) -> u64 {
        self.threads.iter().map(|t| t.on_cpu_ns).sum()
    }

    /// Waiting for a CPU, over every thread, ns.
    pub fn runqueue_ns(&self) -> u64 {
        self.threads.iter().map(|t| t.runqueue_ns).sum()
    }

    /// Whether the side's threads together waited for a CPU at least [`CONTENDED`] of the
    /// window, and longer than they ran: whatever the stack spreads over its threads, and however
    /// often they block, CPUs held by other tasks delayed it more than its own work did.
    pub fn contended(&self) -> bool {
        let waiting = self.runqueue_ns();
        self.share(waiting) >= CONTENDED && waiting >= self.on_cpu_ns()
    }

    /// "busiest thread `quinn-client` (tid 812) on CPU 48% + waiting for a CPU 51% of 2.41 s;
    /// 3 threads, 102% on CPU in all".
    pub fn describe(&self) -> String {
        let Some(t) = self.busiest() else {
            return format!("no thread read in a {:.2} s window", self.window_ns as f64 / 1e9);
        };
        format!(
            "busiest thread {:?} (tid {}) on CPU {:.0}% + waiting for a CPU {:.0}% of {:.2} s; {} thread{}, {:.0}% on CPU \
             and {:.0}% waiting in all",
            t.name,
            t.tid,
            100.0 * self.share(t.on_cpu_ns),
            100.0 * self.share(t.runqueue_ns),
            self.window_ns as f64 / 1e9,
            self.threads.len(),
            if self.threads.len() == 1 { "" } else { "s" },
            100.0 * self.share(self.on_cpu_ns()),
            100.0 * self.share(self.runqueue_ns())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: i32, on_cpu_ns: u64, runqueue_ns: u64) -> ThreadTime {
        ThreadTime { tid, name: format!("t{tid}"), on_cpu_ns, runqueue_ns }
    }

    #[test]
    fn the_busiest_thread_counts_its_wait_for_a_cpu_and_saturates_at_95_percent() {
        // Two threads at 60% on CPU each (120% for the process) and none saturated.
        let side =
            SideThreads { role: Role::Client, window_ns: 1_000, threads: vec![thread(1, 600, 0), thread(2, 600, 10)] };
        assert_eq!(side.busiest().map(|t| t.tid), Some(2));
        assert!(!side.saturated(), "{}", side.describe());
        assert!(!side.contended(), "ran more than it waited");
        // Two workers at 12% on a CPU and 52% waiting for one each: no thread saturated, but
        // they waited 4x as long as they ran.
        let spread = SideThreads {
            role: Role::Server,
            window_ns: 1_000,
            threads: vec![thread(1, 120, 520), thread(2, 120, 520)],
        };
        assert!(!spread.saturated() && spread.contended());
        // Waiting longer than running, but 20% of the window: mostly blocked on something else.
        let idle = SideThreads { role: Role::Server, window_ns: 1_000, threads: vec![thread(1, 10, 200)] };
        assert!(!idle.contended());
        // On CPU half the time and runnable the other half: CPU-bound on a shared CPU.
        let shared = SideThreads { role: Role::Client, window_ns: 1_000, threads: vec![thread(1, 500, 460)] };
        assert!(shared.saturated());
        assert_eq!(
            shared.describe(),
            "busiest thread \"t1\" (tid 1) on CPU 50% + waiting for a CPU 46% of 0.00 s; 1 thread, 50% on CPU and 46% \
             waiting in all"
        );
        let empty = SideThreads { role: Role::Server, window_ns: 0, threads: vec![] };
        assert!(!empty.saturated());
        assert_eq!(empty.busiest_share(), 0.0);
    }
}
