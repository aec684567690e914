//! A test "remote host" (root): a network namespace joined to this one by a veth pair, with
//! Debian's `sshd` inside it on a high port, a throwaway host key and a throwaway client key.
//! The namespace shares the filesystem, so the remote `nesquic` is the binary under test.
//! Everything (sshd, the namespace, the keys) goes on drop, even when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Addresses of the pair: this side (the "local host") and the namespace's (the "remote host").
const LOCAL_IP: &str = "10.79.0.1";
const REMOTE_IP: &str = "10.79.0.2";
const PORT: u16 = 42022;

/// sshd in its own namespace, reachable from here at [`SshHost::ip`].
pub struct SshHost {
    /// The namespace's name (`ip netns exec NAME ...`).
    pub netns: String,
    /// Keys, known_hosts, authorized_keys.
    pub dir: tempfile::TempDir,
    sshd: Option<Child>,
    local_iface: String,
}

impl SshHost {
    /// Creates the namespace, the veth pair and starts sshd; panics with the reason if it cannot.
    pub fn start() -> Self {
        let pid = std::process::id();
        let netns = format!("nqssh-{pid}");
        let local_iface = format!("nqssh{pid}a");
        let remote_iface = format!("nqssh{pid}b");
        let dir = tempfile::tempdir().expect("tempdir");
        // From here on, Drop removes whatever exists.
        let mut host = Self { netns: netns.clone(), dir, sshd: None, local_iface: local_iface.clone() };
        ip(&["netns", "add", &netns]);
        ip(&["link", "add", &local_iface, "type", "veth", "peer", "name", &remote_iface]);
        ip(&["link", "set", &remote_iface, "netns", &netns]);
        ip(&["addr", "add", &format!("{LOCAL_IP}/24"), "dev", &local_iface]);
        ip(&["link", "set", &local_iface, "up"]);
        ip(&["-n", &netns, "addr", "add", &format!("{REMOTE_IP}/24"), "dev", &remote_iface]);
        ip(&["-n", &netns, "link", "set", &remote_iface, "up"]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        let d = host.dir.path().to_path_buf();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).expect("authorized_keys");
        // sshd's privilege separation directory.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let sshd = Command::new("ip")
            .args(["netns", "exec", &netns, "/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null"])
            .arg("-h")
            .arg(d.join("host_key"))
            .args(["-p", &PORT.to_string(), "-o", &format!("ListenAddress={REMOTE_IP}")])
            .arg("-o")
            .arg(format!("AuthorizedKeysFile={}", d.join("authorized_keys").display()))
            .args(["-o", "StrictModes=no", "-o", "PermitRootLogin=prohibit-password", "-o", "UsePAM=no"])
            .args(["-o", "PidFile=none", "-o", "LogLevel=ERROR"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).expect("sshd.log"))
            .spawn()
            .expect("start sshd");
        host.sshd = Some(sshd);
        host.wait_listening();
        host
    }

    /// The address ssh reaches the host at.
    pub fn ip(&self) -> &'static str {
        REMOTE_IP
    }

    /// `root@IP`.
    pub fn target(&self) -> String {
        format!("root@{REMOTE_IP}")
    }

    /// The `--ssh-option` flags (ssh's `-o` options) that reach this host non-interactively with
    /// the throwaway key.
    pub fn ssh_args(&self) -> Vec<String> {
        self.ssh_args_with_key(&self.dir.path().join("client_key"))
    }

    /// As [`SshHost::ssh_args`], offering only `key`.
    pub fn ssh_args_with_key(&self, key: &Path) -> Vec<String> {
        [
            format!("Port={PORT}"),
            format!("IdentityFile={}", key.display()),
            format!("UserKnownHostsFile={}", self.dir.path().join("known_hosts").display()),
            "StrictHostKeyChecking=accept-new".to_string(),
            "IdentitiesOnly=yes".to_string(),
        ]
        .into_iter()
        .flat_map(|o| ["--ssh-option".to_string(), o])
        .collect()
    }

    /// Pids of processes whose executable is `name` inside the namespace.
    pub fn processes_named(&self, name: &str) -> Vec<u32> {
        let out = Command::new("ip").args(["netns", "pids", &self.netns]).output().expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim().starts_with(name))
            })
            .collect()
    }

    /// sshd's own log (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    fn wait_listening(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        let addr = std::net::SocketAddr::from(([10, 79, 0, 2], PORT));
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < until, "sshd did not listen within 10 s: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for SshHost {
    fn drop(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        // Whatever still runs in the namespace (a session's children) goes with it.
        for pid in self.processes_named("") {
            // SAFETY: plain syscall on a pid listed in our own test namespace.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        let _ = Command::new("ip").args(["link", "del", &self.local_iface]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.netns]).output();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "nesquic-test", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
}

/// Where the binary under test lives (the remote host runs the same one).
pub fn nesquic_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nesquic"))
}
