//! Reaching a remote host: the system's OpenSSH client in batch mode (the user's keys, agent,
//! config and known_hosts; never a prompt), the address ssh reaches (`ssh -G`), and what its
//! failures mean.

use std::net::{IpAddr, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::EngineError;

/// How long ssh may take to connect before the host counts as unreachable.
const CONNECT_TIMEOUT_S: u32 = 10;

/// One remote host, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// `[USER@]HOST` (or a `Host` alias of the user's ssh config).
    pub destination: String,
    /// ssh `-o` options (`Port=2222`, `IdentityFile=...`), in order.
    pub options: Vec<String>,
    /// The `nesquic` to run there (default `nesquic`, found on the remote PATH).
    pub remote_nesquic: String,
}

impl SshTarget {
    /// `ssh -o BatchMode=yes ... DESTINATION -- NESQUIC remote-role`, its three streams piped.
    pub fn remote_role(&self) -> Command {
        let mut c = Command::new("ssh");
        c.args(self.base_args())
            .arg("--")
            .arg(&self.destination)
            .arg(format!("{} remote-role", shell_quote(&self.remote_nesquic)));
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// The options every ssh invocation gets: batch mode (a missing key fails instead of
    /// prompting), a connect timeout, keep-alives (a dead peer ends the session in ~6 s), then
    /// the user's.
    fn base_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "BatchMode=yes".to_string(),
            format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
            "ServerAliveInterval=2".into(),
            "ServerAliveCountMax=3".into(),
        ]
        .into_iter()
        .chain(self.options.iter().cloned())
        .flat_map(|o| ["-o".to_string(), o])
        .collect();
        // No pseudo-terminal: the session carries JSON lines, not a terminal.
        args.push("-T".into());
        args
    }

    /// The address ssh connects to: `ssh -G` applies the user's config (aliases, `HostName`).
    pub fn address(&self) -> Result<IpAddr, EngineError> {
        let out = Command::new("ssh")
            .args(self.base_args())
            .arg("-G")
            .arg("--")
            .arg(&self.destination)
            .output()
            .map_err(|e| EngineError::msg(format!("cannot run ssh (install openssh-client): {e}")))?;
        if !out.status.success() {
            return Err(EngineError::msg(format!(
                "ssh -G {}: {}",
                self.destination,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let hostname = text
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .ok_or_else(|| EngineError::msg(format!("ssh -G {} printed no hostname", self.destination)))?;
        let resolved = (hostname.trim(), 22).to_socket_addrs().map_err(|e| {
            EngineError::msg(format!("cannot resolve {} (host of {}): {e}", hostname.trim(), self.destination))
        })?;
        resolved
            .map(|a| a.ip())
            .next()
            .ok_or_else(|| EngineError::msg(format!("{} resolves to no address", hostname.trim())))
    }

    /// What an ssh session that ended with `status` before answering means, from its stderr.
    pub fn failure(&self, status: Option<i32>, stderr: &str) -> EngineError {
        let host = &self.destination;
        let said = stderr.trim();
        let auth = ["Permission denied", "Host key verification failed", "Too many authentication failures"];
        let not_found = said.contains("command not found") || said.contains("No such file") || status == Some(127);
        let msg = if status != Some(255) && not_found {
            format!(
                "{} not found on {host}: install nesquic there or pass --remote-nesquic PATH ({said})",
                self.remote_nesquic
            )
        } else if status == Some(255) && auth.iter().any(|a| said.contains(a)) {
            format!(
                "SSH authentication to {host} failed (batch mode: no password prompt; put your key in \
                 ssh-agent or ~/.ssh/config, or pass --ssh-option IdentityFile=...): {said}"
            )
        } else if status == Some(255) {
            format!("cannot reach {host} over SSH: {said}")
        } else {
            let how = status.map_or("a signal".to_string(), |c| format!("exit code {c}"));
            format!("the remote role on {host} ended with {how}: {said}")
        };
        EngineError::msg(msg)
    }
}

/// Quotes `s` for the remote shell ssh hands the command to.
fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Reads lines from a child's stdout on a thread, so the caller can wait with a timeout.
pub(crate) struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
}

impl Lines {
    /// Starts reading `stream`.
    pub(crate) fn spawn(stream: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // A remote role's replies: one may be a whole qlog.
            for line in crate::lines::bounded(stream, crate::lines::REMOTE_LINE_MAX) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { rx }
    }

    /// The next line; `None` at end of stream or after `limit`.
    pub(crate) fn next(&self, limit: Duration) -> Option<String> {
        self.rx.recv_timeout(limit).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(shell_quote("/usr/bin/nesquic"), "/usr/bin/nesquic");
        assert_eq!(shell_quote("/opt/my tools/nesquic"), "'/opt/my tools/nesquic'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn failures_say_what_to_do() {
        let t = SshTarget { destination: "bob@h".into(), options: vec![], remote_nesquic: "nesquic".into() };
        let auth = t.failure(Some(255), "bob@h: Permission denied (publickey).").to_string();
        assert!(auth.contains("authentication to bob@h failed"), "{auth}");
        let missing = t.failure(Some(127), "bash: line 1: nesquic: command not found").to_string();
        assert!(missing.contains("nesquic not found on bob@h") && missing.contains("--remote-nesquic"), "{missing}");
        let down = t.failure(Some(255), "ssh: connect to host h port 22: No route to host").to_string();
        assert!(down.starts_with("cannot reach bob@h over SSH"), "{down}");
    }
}
