//! Datagrams the kernel dropped at each LUT socket: the `drops` column of `/proc/<pid>/net/udp`
//! and `udp6` (the process's own network namespace, so `--link veth` runs read theirs) for the
//! UDP sockets the process holds (`/proc/<pid>/fd` -> `socket:[inode]`). A socket's row goes
//! with the socket when the process exits, so the count is sampled while the process lives
//! ([`SAMPLE_EVERY`]) and a sample counts only if the process was still running after it was
//! read: the figure is the kernel's count at the last sample, a lower bound by what the final
//! interval before the exit dropped. Local roles only (a remote host's /proc is not here).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nesquic_protocol::Role;

/// How often the counts are read while the processes run.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The drop counts of one process's sockets.
#[derive(Debug, Default)]
struct Watched {
    pid: i32,
    /// inode -> the kernel's drop count at the last sample: a socket closed early keeps its count.
    sockets: BTreeMap<u64, u64>,
    /// Whether a sample found the process's sockets at least once.
    measured: bool,
}

/// Follows the LUT processes' receive-buffer drops through a repetition.
#[derive(Debug, Default)]
pub struct RcvbufDrops {
    roles: Vec<(Role, Watched)>,
    last: Option<Instant>,
}

impl RcvbufDrops {
    /// Starts following `pid` in `role`.
    pub fn watch(&mut self, role: Role, pid: i32) {
        self.roles.retain(|(r, _)| *r != role);
        self.roles.push((role, Watched { pid, ..Watched::default() }));
    }

    /// Reads the counts if [`SAMPLE_EVERY`] has passed since the last read.
    pub fn tick(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < SAMPLE_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        for (_, w) in &mut self.roles {
            sample(w);
        }
    }

    /// Per role, the datagrams dropped at its sockets; roles never sampled are left out (not
    /// measured, not 0).
    pub fn figures(&self) -> Vec<(Role, u64)> {
        self.roles.iter().filter(|(_, w)| w.measured).map(|(r, w)| (*r, w.sockets.values().sum())).collect()
    }
}

/// One read of a process's sockets, kept only if the process still ran after it.
fn sample(w: &mut Watched) {
    let inodes = socket_inodes(w.pid);
    if inodes.is_empty() {
        return;
    }
    let mut found = BTreeMap::new();
    for table in ["udp", "udp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/net/{table}", w.pid)) else { continue };
        for (inode, drops) in parse_udp_table(&text) {
            if inodes.contains(&inode) {
                found.insert(inode, drops);
            }
        }
    }
    // An exited process (zombie, or reaped and its pid gone) has closed its sockets: what was
    // read may already be another process's or none.
    if found.is_empty() || !running(w.pid) {
        return;
    }
    w.measured = true;
    w.sockets.extend(found);
}

/// Inodes of the sockets among the process's open files.
fn socket_inodes(pid: i32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    dir.filter_map(|e| {
        let link = std::fs::read_link(e.ok()?.path()).ok()?;
        let text = link.to_str()?;
        text.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
    })
    .collect()
}

/// Whether the process is alive and not a zombie.
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|s| s != "Z" && s != "X")
}

/// `(inode, drops)` of each row of a `/proc/net/udp` or `udp6` table.
pub fn parse_udp_table(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops
            Some((f.get(9)?.parse().ok()?, f.get(12)?.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inode_and_drops_of_each_row() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          123: 0100007F:A1B2 00000000:0000 07 00000000:00034000 00:00000000 00000000     0        0 81234 2 ffff8881 517\n\
          124: 0100007F:A1B3 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 81235 2 ffff8882 0\n";
        assert_eq!(parse_udp_table(table), [(81234, 517), (81235, 0)]);
    }

    #[test]
    fn this_process_s_socket_is_found_with_no_drops() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let mut drops = RcvbufDrops::default();
        let pid = i32::try_from(std::process::id()).expect("pid fits");
        drops.watch(Role::Client, pid);
        drops.tick();
        assert_eq!(drops.figures(), [(Role::Client, 0)]);
        drop(socket);
    }
}
