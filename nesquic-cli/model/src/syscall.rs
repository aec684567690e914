//! The system calls the I/O probes follow and which way each moves data: enums whose JSON form is
//! the name records have always held (`sendmsg`, `send`).

use serde::{Deserialize, Serialize};

/// A system call the I/O probes follow. The JSON form is the call's name (`sendmsg`); a name
/// outside this list is an error, not a silently dropped row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Syscall {
    /// `sendmsg`.
    Sendmsg,
    /// `sendmmsg`.
    Sendmmsg,
    /// `sendto`.
    Sendto,
    /// `recvmsg`.
    Recvmsg,
    /// `recvmmsg`.
    Recvmmsg,
    /// `recvfrom`.
    Recvfrom,
    /// `write` on an IPv4/IPv6 socket (TCP stacks).
    Write,
    /// `writev` on a socket.
    Writev,
    /// `sendfile` to a socket.
    Sendfile,
    /// `read` on a socket.
    Read,
    /// `readv` on a socket.
    Readv,
}

impl Syscall {
    /// Every syscall, in the order of the kernel's `enum nq_syscall` (the map index).
    pub const ALL: [Syscall; 11] = [
        Syscall::Sendmsg,
        Syscall::Sendmmsg,
        Syscall::Sendto,
        Syscall::Recvmsg,
        Syscall::Recvmmsg,
        Syscall::Recvfrom,
        Syscall::Write,
        Syscall::Writev,
        Syscall::Sendfile,
        Syscall::Read,
        Syscall::Readv,
    ];

    /// The call's name, as in the JSON (`sendmsg`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Syscall::Sendmsg => "sendmsg",
            Syscall::Sendmmsg => "sendmmsg",
            Syscall::Sendto => "sendto",
            Syscall::Recvmsg => "recvmsg",
            Syscall::Recvmmsg => "recvmmsg",
            Syscall::Recvfrom => "recvfrom",
            Syscall::Write => "write",
            Syscall::Writev => "writev",
            Syscall::Sendfile => "sendfile",
            Syscall::Read => "read",
            Syscall::Readv => "readv",
        }
    }

    /// The syscall named `name`, if it is one the probes follow.
    pub fn from_name(name: &str) -> Option<Syscall> {
        Syscall::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether it sends or receives.
    pub fn direction(self) -> Direction {
        match self {
            Syscall::Sendmsg
            | Syscall::Sendmmsg
            | Syscall::Sendto
            | Syscall::Write
            | Syscall::Writev
            | Syscall::Sendfile => Direction::Send,
            Syscall::Recvmsg | Syscall::Recvmmsg | Syscall::Recvfrom | Syscall::Read | Syscall::Readv => {
                Direction::Recv
            }
        }
    }
}

impl std::fmt::Display for Syscall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Which way a syscall moves data. JSON: `send` or `recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Sends.
    Send,
    /// Receives.
    Recv,
}

impl Direction {
    /// Both, sends first.
    pub const BOTH: [Direction; 2] = [Direction::Send, Direction::Recv];

    /// `send` or `recv`, as in the JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Recv => "recv",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
