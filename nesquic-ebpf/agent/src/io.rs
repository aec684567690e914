//! libc I/O interposition: the agent's `sendmsg`, `recvmmsg`, ... come first in symbol lookup
//! (LD_PRELOAD), call the next definition (`dlsym(RTLD_NEXT)`, libc's) and add what the syscall
//! tracepoints compute: calls, bytes from the return value (`msg_len` per message of an mmsg
//! call), datagrams (a `UDP_SEGMENT` send or `UDP_GRO` receive is split by its segment size),
//! messages, segmented messages, EAGAIN, errors and a log2 latency histogram.
//!
//! `send`/`recv` are counted on any fd, like the `sendto`/`recvfrom` system calls they are and
//! the tracepoints count (so TCP sockets' I/O is counted too); `write`/`read` only on IPv4/IPv6
//! sockets, TCP or UDP, as the kernel backend's `write`/`read` tracepoints: on other fds they are
//! files, pipes and Unix sockets. On a stream socket (TCP) every call adds calls and bytes but no
//! datagrams or messages, as in the eBPF program: the kernel segments the stream below the call.
//! What an fd is, is asked once (`getsockopt`), cached, and forgotten where an fd number is
//! closed or handed out again: `close`, `dup2`, `dup3`, `close_range`, `closefrom`, and the
//! calls that create sockets (`socket`, `accept`, `accept4`, `socketpair`). The last four keep
//! the cache right even when the number's previous holder was closed where no wrapper sees it
//! (`fclose`, libc's own closes, a raw system call).
//! `writev`/`readv`/`sendfile` are not interposed (the kernel backend counts them).
//! The hot path allocates nothing, takes no lock and keeps
//! `errno` as the real call left it. The exported symbols are naked front doors: while the
//! wrappers are off (a run with function probes only still has them interposed), each is a tail
//! jump into libc through the resolved pointer, with no frame of the agent's on the way back.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t, timespec};

use crate::abi::{Stats, IO_CALLS};
use crate::{counters, tsc};

static ON: AtomicBool = AtomicBool::new(false);

/// Starts counting (the wrappers always forward; they count only when on).
pub fn enable() {
    for (i, r) in REAL.iter().enumerate() {
        resolve(r, NAMES[i]);
    }
    crate::hook::dlopen::resolve();
    ON.store(true, Ordering::Release);
}

// Slots in `IO_CALLS` order.
const SENDMSG: usize = 0;
const SENDMMSG: usize = 1;
const SENDTO: usize = 2;
const SEND: usize = 3;
const WRITE: usize = 4;
const RECVMSG: usize = 5;
const RECVMMSG: usize = 6;
const RECVFROM: usize = 7;
const RECV: usize = 8;
const READ: usize = 9;
const CLOSE: usize = 10;
const DUP2: usize = 11;
const DUP3: usize = 12;
const CLOSE_RANGE: usize = 13;
const CLOSEFROM: usize = 14;
const SOCKET: usize = 15;
const ACCEPT: usize = 16;
const ACCEPT4: usize = 17;
const SOCKETPAIR: usize = 18;

const NAMES: [&std::ffi::CStr; 19] = [
    c"sendmsg",
    c"sendmmsg",
    c"sendto",
    c"send",
    c"write",
    c"recvmsg",
    c"recvmmsg",
    c"recvfrom",
    c"recv",
    c"read",
    c"close",
    c"dup2",
    c"dup3",
    c"close_range",
    c"closefrom",
    c"socket",
    c"accept",
    c"accept4",
    c"socketpair",
];
const _: () = assert!(IO_CALLS.len() == CLOSE);

/// The next definitions (libc's), resolved at init or on first use.
static REAL: [AtomicUsize; 19] = [const { AtomicUsize::new(0) }; 19];

pub(crate) fn resolve(cell: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let mut p = cell.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: dlsym with a valid NUL-terminated name.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        cell.store(p, Ordering::Relaxed);
    }
    p
}

/// libc's function `$i` as type `$t`.
macro_rules! real {
    ($i:expr, $t:ty) => {
        next_libc_fn!(REAL, NAMES, $i, $t)
    };
}

pub(crate) fn missing_symbol() -> ! {
    let msg = b"nesquic agent: libc function not found (dlsym RTLD_NEXT)\n";
    // SAFETY: write(2) of a static buffer, then abort.
    unsafe {
        libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
        libc::abort();
    }
}

// ---- what is this fd? ----

const CACHED_FDS: usize = 65536;
/// Not looked at yet (or forgotten: closed, or the number handed out again).
const UNKNOWN: u8 = 0;
/// Looked at: bit set below or not.
const KNOWN: u8 = 1;
/// An IPv4/IPv6 socket (TCP or UDP).
const INET: u8 = 2;
/// A stream socket (TCP, a Unix stream): its calls move bytes, not datagrams.
const STREAM: u8 = 4;
static FD_KIND: [AtomicU8; CACHED_FDS] = [const { AtomicU8::new(UNKNOWN) }; CACHED_FDS];
/// The highest fd ever cached: a bulk close forgets up to here, not the whole cache (a
/// `close_range(3, ~0)` before each exec would otherwise clear 64 Ki entries, ~22 us).
static HIGHEST_CACHED: AtomicUsize = AtomicUsize::new(0);

/// What `fd` is (`KNOWN` plus `INET`/`STREAM` bits), asked of the kernel once per fd (two
/// `getsockopt` calls) and cached until it is closed or replaced; fds past the cache are asked
/// every time.
fn fd_kind(fd: c_int) -> u8 {
    let cached = usize::try_from(fd).ok().and_then(|i| FD_KIND.get(i));
    if let Some(k) = cached {
        let kind = k.load(Ordering::Relaxed);
        if kind != UNKNOWN {
            return kind;
        }
    }
    let option = |name: c_int| -> Option<c_int> {
        let mut value: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: getsockopt with valid out pointers.
        let ok = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, name, (&mut value as *mut c_int).cast(), &mut len) };
        (ok == 0).then_some(value)
    };
    // SAFETY: this thread's errno, restored after the lookups (the caller's call sets its own).
    let errno = unsafe { *libc::__errno_location() };
    let mut kind = KNOWN;
    if let Some(domain) = option(libc::SO_DOMAIN) {
        if domain == libc::AF_INET || domain == libc::AF_INET6 {
            kind |= INET;
        }
        if option(libc::SO_TYPE) == Some(libc::SOCK_STREAM) {
            kind |= STREAM;
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    if let Some(k) = cached {
        k.store(kind, Ordering::Relaxed);
        HIGHEST_CACHED.fetch_max(fd as usize, Ordering::Relaxed);
    }
    kind
}

fn is_inet_socket(fd: c_int) -> bool {
    fd_kind(fd) & INET != 0
}

fn is_stream(fd: c_int) -> bool {
    fd_kind(fd) & STREAM != 0
}

fn forget_fd(fd: c_int) {
    if let Some(k) = usize::try_from(fd).ok().and_then(|i| FD_KIND.get(i)) {
        k.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// Forgets every cached fd from `first` to `last` (inclusive; `c_uint::MAX` means all).
fn forget_fds(first: c_uint, last: c_uint) {
    let (first, last) = (first as usize, (last as usize).min(HIGHEST_CACHED.load(Ordering::Relaxed)));
    for k in FD_KIND.iter().take(last + 1).skip(first) {
        k.store(UNKNOWN, Ordering::Relaxed);
    }
}

// ---- recording ----

/// Adds one finished call: calls, time and the outcome; `moved` adds bytes, datagrams and
/// messages when it succeeded.
#[inline(always)]
fn record(kind: usize, ret: isize, start: u64, moved: impl FnOnce(*mut Stats)) {
    let ticks = tsc::now().wrapping_sub(start);
    // SAFETY: this thread's errno.
    let errno = unsafe { *libc::__errno_location() };
    let s = counters::io_slot(kind);
    if s.is_null() {
        return;
    }
    // SAFETY: `s` is a slot of the live mapping; fields are 8-byte aligned.
    unsafe {
        let ns = tsc::to_ns(ticks);
        counters::add(&raw mut (*s).calls, 1);
        counters::add(&raw mut (*s).total_ns, ns);
        counters::add(&raw mut (*s).hist[counters::bucket(ns)], 1);
        if ret < 0 {
            if errno == libc::EAGAIN {
                counters::add(&raw mut (*s).eagain, 1);
            } else {
                counters::add(&raw mut (*s).errors, 1);
            }
            return;
        }
    }
    moved(s);
}

/// One message of `len` bytes split in units of `unit` (0: not segmented); on a stream socket
/// (`stream`) bytes only: a TCP send is no datagram, and the kernel segments it below the call.
#[inline(always)]
fn add_message(s: *mut Stats, len: u64, unit: u64, stream: bool) {
    // SAFETY: `s` is a slot of the live mapping (checked by `record`).
    unsafe { counters::add(&raw mut (*s).bytes, len) };
    if stream {
        return;
    }
    let datagrams = if len == 0 || unit == 0 || unit >= len { 1 } else { len.div_ceil(unit) };
    // SAFETY: as above.
    unsafe {
        counters::add(&raw mut (*s).datagrams, datagrams);
        counters::add(&raw mut (*s).messages, 1);
        counters::add(&raw mut (*s).segmented, u64::from(datagrams > 1));
    }
}

/// The `UDP_SEGMENT` (send) or `UDP_GRO` (receive) value in a message's control data, 0 if
/// absent; the first 4 control messages are looked at, as in the eBPF program.
///
/// # Safety
/// `m` must be a valid msghdr whose control buffer is readable for `msg_controllen` bytes.
unsafe fn udp_cmsg_value(m: *const msghdr, send: bool) -> u64 {
    const MAX_CMSGS: usize = 4;
    const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
    // SAFETY: guaranteed by the caller.
    let (control, len) = unsafe { ((*m).msg_control as *const u8, (*m).msg_controllen) };
    let mut off = 0usize;
    for _ in 0..MAX_CMSGS {
        if control.is_null() || off + HDR > len {
            break;
        }
        // SAFETY: the header lies within the control buffer (checked above).
        let c = unsafe { std::ptr::read_unaligned(control.add(off).cast::<libc::cmsghdr>()) };
        if c.cmsg_len < HDR {
            break;
        }
        let data = off + HDR;
        if c.cmsg_level == libc::SOL_UDP {
            // SAFETY (both reads): the kernel and the sender lay the value right after the header.
            if send && c.cmsg_type == libc::UDP_SEGMENT && data + 2 <= len {
                return u64::from(unsafe { std::ptr::read_unaligned(control.add(data).cast::<u16>()) });
            }
            if !send && c.cmsg_type == libc::UDP_GRO && data + 4 <= len {
                let stride = unsafe { std::ptr::read_unaligned(control.add(data).cast::<c_int>()) };
                return u64::try_from(stride).unwrap_or(0);
            }
        }
        off += (c.cmsg_len + 7) & !7;
    }
    0
}

/// Whether the wrappers count.
#[inline(always)]
fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

// ---- the wrappers ----

/// `sendmsg` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let real = real!(SENDMSG, unsafe extern "C" fn(c_int, *const msghdr, c_int) -> ssize_t);
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, msg, flags) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, msg, flags) };
    // SAFETY: the call succeeded, so `msg` was a valid msghdr.
    record(SENDMSG, ret, start, |s| {
        let stream = is_stream(fd);
        add_message(s, ret as u64, if stream { 0 } else { unsafe { udp_cmsg_value(msg, true) } }, stream)
    });
    ret
}

/// `recvmsg` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let real = real!(RECVMSG, unsafe extern "C" fn(c_int, *mut msghdr, c_int) -> ssize_t);
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, msg, flags) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, msg, flags) };
    // SAFETY: the call succeeded, so `msg` is a valid msghdr the kernel filled.
    record(RECVMSG, ret, start, |s| {
        let stream = is_stream(fd);
        add_message(s, ret as u64, if stream { 0 } else { unsafe { udp_cmsg_value(msg, false) } }, stream)
    });
    ret
}

/// Every message of a successful mmsg call (`ret` of them).
///
/// # Safety
/// `v` must hold at least `ret` valid mmsghdrs.
unsafe fn add_batch(s: *mut Stats, v: *const mmsghdr, ret: c_int, send: bool, stream: bool) {
    for i in 0..usize::try_from(ret).unwrap_or(0) {
        // SAFETY: guaranteed by the caller.
        let m = unsafe { &*v.add(i) };
        // SAFETY: as above.
        let unit = if stream { 0 } else { unsafe { udp_cmsg_value(&m.msg_hdr, send) } };
        add_message(s, u64::from(m.msg_len), unit, stream);
    }
}

/// `sendmmsg` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    let real = real!(SENDMMSG, unsafe extern "C" fn(c_int, *mut mmsghdr, c_uint, c_int) -> c_int);
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, v, n, flags) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, v, n, flags) };
    // SAFETY: the kernel sent `ret` of the caller's messages.
    record(SENDMMSG, ret as isize, start, |s| unsafe { add_batch(s, v, ret, true, is_stream(fd)) });
    ret
}

/// `recvmmsg` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_recvmmsg(
    fd: c_int,
    v: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    timeout: *mut timespec,
) -> c_int {
    let real = real!(RECVMMSG, unsafe extern "C" fn(c_int, *mut mmsghdr, c_uint, c_int, *mut timespec) -> c_int);
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, v, n, flags, timeout) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, v, n, flags, timeout) };
    // SAFETY: the kernel filled `ret` of the caller's messages.
    record(RECVMMSG, ret as isize, start, |s| unsafe { add_batch(s, v, ret, false, is_stream(fd)) });
    ret
}

/// `sendto` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    let real =
        real!(SENDTO, unsafe extern "C" fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t);
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, buf, len, flags, addr, addrlen) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, buf, len, flags, addr, addrlen) };
    record(SENDTO, ret, start, |s| add_message(s, ret as u64, 0, is_stream(fd)));
    ret
}

/// `recvfrom` behind its front door: counts when on; forwards (resolving libc's first) when off.
///
/// # Safety
/// Same contract as libc's.
unsafe extern "C" fn counted_recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    let real = real!(
        RECVFROM,
        unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t
    );
    if !on() {
        // SAFETY: forwarding unchanged.
        return unsafe { real(fd, buf, len, flags, addr, addrlen) };
    }
    let start = tsc::now();
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(fd, buf, len, flags, addr, addrlen) };
    record(RECVFROM, ret, start, |s| add_message(s, ret as u64, 0, is_stream(fd)));
    ret
}

/// `send`/`recv`/`write`/`read`: one message per call, counted where `$counted(fd)` says.
macro_rules! plain_io {
    ($name:ident, $slot:expr, $counted:expr, ($($arg:ident: $ty:ty),*)) => {
        #[doc = concat!("`", stringify!($name), "` behind its front door (counted where `", stringify!($counted), "`).")]
        ///
        /// # Safety
        /// Same contract as libc's.
        unsafe extern "C" fn $name(fd: c_int, $($arg: $ty),*) -> ssize_t {
            let real = real!($slot, unsafe extern "C" fn(c_int, $($ty),*) -> ssize_t);
            if !on() || !$counted(fd) {
                // SAFETY: forwarding unchanged.
                return unsafe { real(fd, $($arg),*) };
            }
            let start = tsc::now();
            // SAFETY: forwarding unchanged.
            let ret = unsafe { real(fd, $($arg),*) };
            record($slot, ret, start, |s| add_message(s, ret as u64, 0, is_stream(fd)));
            ret
        }
    };
}

/// `send`/`recv` are the `sendto`/`recvfrom` system calls, which the tracepoints count on every fd.
fn any_fd(_fd: c_int) -> bool {
    true
}

plain_io!(counted_send, SEND, any_fd, (buf: *const c_void, len: size_t, flags: c_int));
plain_io!(counted_recv, RECV, any_fd, (buf: *mut c_void, len: size_t, flags: c_int));
plain_io!(counted_write, WRITE, is_inet_socket, (buf: *const c_void, len: size_t));
plain_io!(counted_read, READ, is_inet_socket, (buf: *mut c_void, len: size_t));

// ---- the front doors ----

/// The exported symbol: while the wrappers are off (a run that asked for no packet I/O, only
/// function probes), a tail jump to libc's function through the resolved pointer, with no frame
/// and no return through the agent; otherwise (counting, or libc's pointer not resolved yet) a
/// tail jump to the Rust body. Only r11 is used: a scratch register that carries no argument at
/// a SysV entry (lazy-binding PLT stubs clobber it too).
macro_rules! front_door {
    ($name:ident, $slot:expr, $body:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[doc = concat!("Interposed `", stringify!($name), "`: see [`", stringify!($body), "`].")]
        ///
        /// # Safety
        /// Same contract as libc's.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            core::arch::naked_asm!(
                "cmp byte ptr [rip + {on}], 0",
                "jne {body}",
                "mov r11, qword ptr [rip + {real} + {offset}]",
                "test r11, r11",
                "jz {body}",
                "jmp r11",
                on = sym ON,
                real = sym REAL,
                offset = const $slot * std::mem::size_of::<AtomicUsize>(),
                body = sym $body,
            )
        }
    };
}

front_door!(sendmsg, SENDMSG, counted_sendmsg, (fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t);
front_door!(recvmsg, RECVMSG, counted_recvmsg, (fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t);
front_door!(sendmmsg, SENDMMSG, counted_sendmmsg, (fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int);
front_door!(
    recvmmsg,
    RECVMMSG,
    counted_recvmmsg,
    (fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, timeout: *mut timespec) -> c_int
);
front_door!(
    sendto,
    SENDTO,
    counted_sendto,
    (fd: c_int, buf: *const c_void, len: size_t, flags: c_int, addr: *const sockaddr, addrlen: socklen_t) -> ssize_t
);
front_door!(
    recvfrom,
    RECVFROM,
    counted_recvfrom,
    (fd: c_int, buf: *mut c_void, len: size_t, flags: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> ssize_t
);
front_door!(send, SEND, counted_send, (fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t);
front_door!(recv, RECV, counted_recv, (fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t);
front_door!(write, WRITE, counted_write, (fd: c_int, buf: *const c_void, len: size_t) -> ssize_t);
front_door!(read, READ, counted_read, (fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t);

/// Interposed `close`: forgets the fd's cached socket kind.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let real = real!(CLOSE, unsafe extern "C" fn(c_int) -> c_int);
    forget_fd(fd);
    // SAFETY: forwarding unchanged.
    unsafe { real(fd) }
}

/// Interposed `dup2`: forgets the target fd's cached socket kind.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let real = real!(DUP2, unsafe extern "C" fn(c_int, c_int) -> c_int);
    forget_fd(new);
    // SAFETY: forwarding unchanged.
    unsafe { real(old, new) }
}

/// Interposed `dup3`: forgets the target fd's cached socket kind.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let real = real!(DUP3, unsafe extern "C" fn(c_int, c_int, c_int) -> c_int);
    forget_fd(new);
    // SAFETY: forwarding unchanged.
    unsafe { real(old, new, flags) }
}

/// Interposed `close_range`: forgets the range's cached socket kinds.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let real = real!(CLOSE_RANGE, unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int);
    forget_fds(first, last);
    // SAFETY: forwarding unchanged.
    unsafe { real(first, last, flags) }
}

/// Interposed `closefrom`: forgets the cached socket kinds from `low` up.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let real = real!(CLOSEFROM, unsafe extern "C" fn(c_int));
    forget_fds(c_uint::try_from(low).unwrap_or(0), c_uint::MAX);
    // SAFETY: forwarding unchanged.
    unsafe { real(low) }
}

/// Forgets what a new fd number was before: it names a new socket now.
fn fresh(fd: c_int) -> c_int {
    forget_fd(fd);
    fd
}

/// Interposed `socket`: the new fd's number may have been cached as something else.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    let real = real!(SOCKET, unsafe extern "C" fn(c_int, c_int, c_int) -> c_int);
    // SAFETY: forwarding unchanged.
    fresh(unsafe { real(domain, kind, protocol) })
}

/// Interposed `accept`: the new fd's number may have been cached as something else.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let real = real!(ACCEPT, unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int);
    // SAFETY: forwarding unchanged.
    fresh(unsafe { real(fd, addr, len) })
}

/// Interposed `accept4`: the new fd's number may have been cached as something else.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    let real = real!(ACCEPT4, unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int);
    // SAFETY: forwarding unchanged.
    fresh(unsafe { real(fd, addr, len, flags) })
}

/// Interposed `socketpair`: both new fds' numbers may have been cached as something else.
///
/// # Safety
/// Same contract as libc's.
#[no_mangle]
pub unsafe extern "C" fn socketpair(domain: c_int, kind: c_int, protocol: c_int, fds: *mut c_int) -> c_int {
    let real = real!(SOCKETPAIR, unsafe extern "C" fn(c_int, c_int, c_int, *mut c_int) -> c_int);
    // SAFETY: forwarding unchanged.
    let ret = unsafe { real(domain, kind, protocol, fds) };
    if ret == 0 {
        for i in 0..2 {
            // SAFETY: on success the kernel wrote two fds to the caller's array.
            forget_fd(unsafe { *fds.add(i) });
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};

    /// The instructions a front door runs while the wrappers are off, up to its jump into libc.
    fn off_path(entry: *const u8) -> Vec<iced_x86::Instruction> {
        // SAFETY: a function's first 64 bytes are mapped code (the front doors are ~30 bytes and
        // the text goes on behind them).
        let code = unsafe { std::slice::from_raw_parts(entry, 64) };
        let mut d = Decoder::with_ip(64, code, entry as u64, DecoderOptions::NONE);
        let mut path = Vec::new();
        while d.can_decode() && path.len() < 12 {
            let i = d.decode();
            path.push(i);
            if i.mnemonic() == Mnemonic::Jmp && i.op0_kind() == OpKind::Register {
                break;
            }
        }
        path
    }

    #[test]
    fn with_io_off_each_wrapper_jumps_to_libc_without_a_frame() {
        let doors: [(&str, *const u8); 10] = [
            ("sendmsg", sendmsg as *const u8),
            ("recvmsg", recvmsg as *const u8),
            ("sendmmsg", sendmmsg as *const u8),
            ("recvmmsg", recvmmsg as *const u8),
            ("sendto", sendto as *const u8),
            ("recvfrom", recvfrom as *const u8),
            ("send", send as *const u8),
            ("recv", recv as *const u8),
            ("write", write as *const u8),
            ("read", read as *const u8),
        ];
        for (name, entry) in doors {
            let path = off_path(entry);
            let mnemonics: Vec<Mnemonic> = path.iter().map(|i| i.mnemonic()).collect();
            // No push, call or store: nothing of the agent is left on the stack or between libc's
            // return and the caller.
            assert_eq!(
                mnemonics,
                [Mnemonic::Cmp, Mnemonic::Jne, Mnemonic::Mov, Mnemonic::Test, Mnemonic::Je, Mnemonic::Jmp],
                "{name}"
            );
            let last = path.last().expect("six instructions");
            assert_eq!(last.op0_register(), Register::R11, "{name} jumps through r11");
            assert_eq!(path[2].op0_register(), Register::R11, "{name} loads libc's address into r11");
        }
    }

    #[test]
    fn with_io_off_the_wrappers_forward_every_byte() {
        assert!(!on(), "nothing enables the wrappers in a unit test");
        let mut fds = [0 as c_int; 2];
        // SAFETY: socketpair writes two fds into the array.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) }, 0);
        let msg = b"nesquic front door";
        let mut buf = [0u8; 64];
        // SAFETY: valid buffers and fds, through the exported front doors; twice, so the second
        // call takes the resolved pointer.
        unsafe {
            for _ in 0..2 {
                assert_eq!(write(fds[0], msg.as_ptr().cast(), msg.len()), msg.len() as ssize_t);
                assert_eq!(read(fds[1], buf.as_mut_ptr().cast(), buf.len()), msg.len() as ssize_t);
                assert_eq!(&buf[..msg.len()], msg);
                assert_eq!(send(fds[1], msg.as_ptr().cast(), 5, 0), 5);
                assert_eq!(recv(fds[0], buf.as_mut_ptr().cast(), buf.len(), 0), 5);
                let mut iov = libc::iovec { iov_base: msg.as_ptr() as *mut c_void, iov_len: 7 };
                let mut m: msghdr = std::mem::zeroed();
                m.msg_iov = &mut iov;
                m.msg_iovlen = 1;
                assert_eq!(sendmsg(fds[0], &m, 0), 7);
                let mut riov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
                let mut r: msghdr = std::mem::zeroed();
                r.msg_iov = &mut riov;
                r.msg_iovlen = 1;
                assert_eq!(recvmsg(fds[1], &mut r, 0), 7);
                assert_eq!(&buf[..7], &msg[..7]);
            }
            assert_ne!(REAL[WRITE].load(Ordering::Relaxed), 0, "resolved on first use");
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
