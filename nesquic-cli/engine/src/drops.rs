//! Datagrams the kernel dropped at each LUT socket. The LUT's UDP sockets (`/proc/<pid>/fd` ->
//! `socket:[inode]`) are duplicated into nesquic with pidfd_getfd(2) as soon as they exist, so
//! their counts (`SO_MEMINFO`'s drops, the `drops` column of /proc/net/udp) can be read after
//! the process exited: the figure is exact, and a read costs a getsockopt, not a walk of the
//! kernel's whole UDP table (~0.4 ms a read here). Where pidfd_getfd is refused, the counts are
//! sampled from `/proc/<pid>/net/udp{,6}` while the process lives ([`SAMPLE_EVERY`]), a lower
//! bound by what the final interval dropped. Local roles only (a remote host's /proc is not here).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nesquic_protocol::Role;

/// How often the processes' sockets are looked for (and, in the fallback, their counts read).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// `SO_MEMINFO` (asm-generic/socket.h; not in the libc crate): an array of `SK_MEMINFO_*`.
const SO_MEMINFO: libc::c_int = 55;

/// The drop counts of one process's sockets.
#[derive(Debug, Default)]
struct Watched {
    pid: i32,
    /// pidfd_open(2) of the process, while it is followed; `None` once pidfd_getfd is refused.
    pidfd: Option<OwnedFd>,
    /// The process's UDP sockets, duplicated into this process: inode -> fd.
    held: BTreeMap<u64, OwnedFd>,
    /// Socket inodes that are not UDP (not duplicated again).
    skipped: BTreeSet<u64>,
    /// Fallback: inode -> the kernel's drop count at the last /proc/net/udp sample.
    sockets: BTreeMap<u64, u64>,
    /// Whether a sample found the process's sockets at least once (fallback).
    measured: bool,
    /// The fallback's table sampling is in use.
    sampling: bool,
    /// Looks since the last listing of the process's fds.
    since_listing: u32,
}

/// Once a process's UDP socket is held, its fds are listed again only every this many looks
/// (sockets are opened at start; a listing costs ~0.1 ms of readdir and readlink).
const LIST_AGAIN_EVERY: u32 = 25;

/// Follows the LUT processes' receive-buffer drops through a repetition.
#[derive(Debug, Default)]
pub struct RcvbufDrops {
    roles: Vec<(Role, Watched)>,
    last: Option<Instant>,
    /// What following the sockets cost nesquic: measured, as every probe's cost is.
    cost: ReadCost,
}

pub use nesquic_record::figures::ReadCost;

impl RcvbufDrops {
    /// Starts following `pid` in `role`.
    pub fn watch(&mut self, role: Role, pid: i32) {
        self.roles.retain(|(r, _)| *r != role);
        // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // Invariant: a successful pidfd_open returns a new fd that nothing else owns.
        let pidfd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as i32) });
        let sampling = pidfd.is_none();
        self.roles.push((role, Watched { pid, pidfd, sampling, ..Watched::default() }));
    }

    /// Looks for new sockets (or, in the fallback, reads the counts) if [`SAMPLE_EVERY`] has
    /// passed since the last look.
    pub fn tick(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < SAMPLE_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let start = thread_cpu_ns();
        for (_, w) in &mut self.roles {
            if w.sampling {
                sample(w);
            } else {
                hold_new_sockets(w);
            }
        }
        self.cost.reads += 1;
        self.cost.cpu_ns += thread_cpu_ns().saturating_sub(start);
    }

    /// How many times the sockets were looked for, and the CPU time that took.
    pub fn cost(&self) -> ReadCost {
        self.cost
    }

    /// Per role, the datagrams dropped at its sockets; roles never measured are left out (not
    /// measured, not 0).
    pub fn figures(&self) -> Vec<(Role, u64)> {
        self.roles
            .iter()
            .filter_map(|(r, w)| {
                if w.sampling {
                    w.measured.then(|| (*r, w.sockets.values().sum()))
                } else {
                    let counts: Vec<u64> = w.held.values().filter_map(drops_of).collect();
                    (!counts.is_empty()).then(|| (*r, counts.iter().sum()))
                }
            })
            .collect()
    }
}

/// Duplicates the process's UDP sockets not held yet; on a refusal, falls back to sampling.
fn hold_new_sockets(w: &mut Watched) {
    let Some(pidfd) = &w.pidfd else { return };
    w.since_listing += 1;
    if !w.held.is_empty() && w.since_listing < LIST_AGAIN_EVERY {
        return;
    }
    w.since_listing = 0;
    for (fd, inode) in socket_fds(w.pid) {
        if w.held.contains_key(&inode) || w.skipped.contains(&inode) {
            continue;
        }
        // SAFETY: pidfd_getfd takes a pidfd, the target's fd number and flags; it returns a
        // new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if raw < 0 {
            let err = std::io::Error::last_os_error();
            // The fd was closed between the listing and now: look again next time.
            if err.raw_os_error() == Some(libc::EBADF) {
                continue;
            }
            w.sampling = true;
            sample(w);
            return;
        }
        // Invariant: a successful pidfd_getfd returns a new fd that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        if is_udp(&owned) {
            w.held.insert(inode, owned);
        } else {
            w.skipped.insert(inode);
        }
    }
}

/// Whether a socket is a UDP socket.
fn is_udp(fd: &OwnedFd) -> bool {
    let get = |option| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an int-sized option read into an int.
        let ret = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (ret == 0).then_some(value)
    };
    get(libc::SO_TYPE) == Some(libc::SOCK_DGRAM) && get(libc::SO_PROTOCOL) == Some(libc::IPPROTO_UDP)
}

/// The kernel's count of datagrams a socket dropped (`SK_MEMINFO_DROPS`).
fn drops_of(fd: &OwnedFd) -> Option<u64> {
    let mut info = [0u32; 9];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes of u32s into `info`.
    let ret =
        unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr().cast(), &mut len) };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (ret == 0 && len as usize >= (drops + 1) * 4).then(|| u64::from(info[drops]))
}

/// This thread's CPU time: the looks run on the run loop's thread, between its other work.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a timespec on the stack.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// One read of a process's sockets, kept only if the process still ran after it (fallback).
fn sample(w: &mut Watched) {
    let inodes: Vec<u64> = socket_fds(w.pid).into_iter().map(|(_, inode)| inode).collect();
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

/// (fd number, inode) of the sockets among the process's open files.
fn socket_fds(pid: i32) -> Vec<(i32, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd = e.file_name().to_str()?.parse().ok()?;
        let link = std::fs::read_link(e.path()).ok()?;
        let inode = link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()?;
        Some((fd, inode))
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

    /// A socket that overflows drops exactly what it could not queue, and the count is still
    /// read after its owner closed it (the duplicate keeps the socket).
    #[test]
    fn the_exact_drop_count_outlives_the_owner_s_socket() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let size: libc::c_int = 4096;
        // SAFETY: an int option written from an int.
        let ret = unsafe {
            libc::setsockopt(
                receiver.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(ret, 0, "SO_RCVBUF");
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let mut drops = RcvbufDrops::default();
        drops.watch(Role::Client, i32::try_from(std::process::id()).expect("pid fits"));
        drops.tick();
        let sent = 200;
        for _ in 0..sent {
            sender.send_to(&[7u8; 1000], receiver.local_addr().expect("addr")).expect("send");
        }
        receiver.set_nonblocking(true).expect("nonblocking");
        let mut received = 0;
        let mut buf = [0u8; 2048];
        while receiver.recv(&mut buf).is_ok() {
            received += 1;
        }
        assert!(received > 0 && received < sent, "a 4 KiB buffer holds a few of {sent}: {received}");
        drop(receiver);
        assert_eq!(drops.figures(), [(Role::Client, sent - received)]);
    }
}
