//! The flags that put roles on other hosts (`--server-host`, `--client-host`, docs/remote.md),
//! and the hidden `nesquic remote-role` those hosts run.

use std::net::IpAddr;

use anyhow::{Context, Result};
use nesquic_engine::remote::{RemoteRoles, SshTarget};

/// Where the roles run: shared by `run` and `matrix`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HostArgs {
    /// Run the server on this host over SSH (HOST, USER@HOST or a Host of your ssh config): your
    /// keys, agent, config and known_hosts, batch mode (no prompts). The host needs the same
    /// nesquic build (checked) with its LUTs beside it; probes attach there. docs/remote.md.
    #[arg(long, value_name = "[USER@]HOST")]
    pub server_host: Option<String>,
    /// Run the client on this host, over SSH (as --server-host).
    #[arg(long, value_name = "[USER@]HOST")]
    pub client_host: Option<String>,
    /// An ssh option for every remote host, as ssh's -o takes it (Port=2222,
    /// IdentityFile=~/.ssh/lab, ProxyJump=gw); repeatable.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    pub ssh_options: Vec<String>,
    /// The nesquic to run on the remote hosts (default: `nesquic` on their PATH).
    #[arg(long, value_name = "PATH", default_value = "nesquic")]
    pub remote_nesquic: String,
    /// The address the server listens on and the client connects to (default: the address
    /// SSH reaches the server's host at; with only --client-host, this host's address on the
    /// route to the client's host). Use it to pick the test NIC when SSH goes over another.
    #[arg(long, value_name = "IP")]
    pub server_addr: Option<IpAddr>,
}

impl HostArgs {
    /// The roles' hosts, checked.
    pub fn roles(&self) -> Result<RemoteRoles> {
        let target = |host: &Option<String>, flag: &str| -> Result<Option<SshTarget>> {
            let Some(host) = host else { return Ok(None) };
            anyhow::ensure!(
                !host.is_empty() && !host.starts_with('-'),
                "{flag} {host:?}: expected [USER@]HOST (ssh options go in --ssh-option)"
            );
            Ok(Some(SshTarget {
                destination: host.clone(),
                options: self.ssh_options.clone(),
                remote_nesquic: self.remote_nesquic.clone(),
            }))
        };
        let roles = RemoteRoles {
            server: target(&self.server_host, "--server-host")?,
            client: target(&self.client_host, "--client-host")?,
            server_addr: self.server_addr,
        };
        anyhow::ensure!(
            roles.any() || (self.server_addr.is_none() && self.ssh_options.is_empty()),
            "--server-addr and --ssh-option apply to remote roles: add --server-host or --client-host"
        );
        Ok(roles)
    }
}

/// `nesquic remote-role`: one session's remote side (started by another nesquic over SSH).
pub fn serve(tool: &nesquic_engine::run::ToolInfo) -> Result<()> {
    nesquic_engine::remote_role::serve(tool).context("nesquic remote-role")
}
