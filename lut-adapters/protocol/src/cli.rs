//! The command line every LUT executable accepts (docs/protocol.md): `server` or `client`, the
//! I/O path, and `--opt KEY=VALUE` settings. The orchestrator builds it (`nesquic-lut-adapters`'
//! `Lut::server_args`/`client_args`); adapters parse it with [`LutCli`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::client::Workload;
use crate::role::Role;

/// Which UDP I/O path a LUT runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// The library's own I/O (quinn: quinn-udp with GSO/GRO).
    Native,
    /// Nesquic's I/O layer (GSO/GRO + sendmmsg/recvmmsg).
    Nesquic,
    /// One sendto/recvfrom per datagram.
    Plain,
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Native => "native",
            IoMode::Nesquic => "nesquic",
            IoMode::Plain => "plain",
        })
    }
}

/// A LUT executable's command line.
#[derive(Debug, clap::Parser)]
pub struct LutCli {
    /// Server or client, with its arguments.
    #[command(subcommand)]
    pub command: LutCommand,
}

/// The `server` or `client` subcommand and its arguments ([`LutCommand::role`] says which).
#[derive(Debug, clap::Subcommand)]
pub enum LutCommand {
    /// Serve benchmark connections, then exit.
    Server {
        /// Address to bind.
        #[arg(long)]
        listen: SocketAddr,
        /// Connections to serve before exiting.
        #[arg(long, default_value_t = 1)]
        connections: u32,
        /// Streams per connection the client will open (raises the library's limit).
        #[arg(long, default_value_t = 1)]
        streams: u32,
        /// DER certificate.
        #[arg(long)]
        cert: PathBuf,
        /// DER PKCS#8 key.
        #[arg(long)]
        key: PathBuf,
        /// I/O path.
        #[arg(long, value_enum, default_value_t = IoMode::Native)]
        io: IoMode,
        /// Write the library's own qlog (JSON-SEQ) here.
        #[arg(long)]
        qlog: Option<PathBuf>,
        /// LUT-specific KEY=VALUE settings.
        #[arg(long = "opt")]
        opts: Vec<String>,
    },
    /// Download and verify payloads.
    Client {
        /// Server address.
        #[arg(long)]
        connect: SocketAddr,
        /// DER certificate to trust.
        #[arg(long)]
        ca: PathBuf,
        /// Bytes to request per stream.
        #[arg(long)]
        size: u64,
        /// Connections in total.
        #[arg(long, default_value_t = 1)]
        connections: u32,
        /// Connections open at once.
        #[arg(long, default_value_t = 1)]
        parallel: u32,
        /// Concurrent streams per connection.
        #[arg(long, default_value_t = 1)]
        streams: u32,
        /// I/O path.
        #[arg(long, value_enum, default_value_t = IoMode::Native)]
        io: IoMode,
        /// Write the library's own qlog (JSON-SEQ) here.
        #[arg(long)]
        qlog: Option<PathBuf>,
        /// LUT-specific KEY=VALUE settings.
        #[arg(long = "opt")]
        opts: Vec<String>,
    },
}

impl LutCommand {
    /// Server or client.
    pub fn role(&self) -> Role {
        match self {
            LutCommand::Server { .. } => Role::Server,
            LutCommand::Client { .. } => Role::Client,
        }
    }

    /// The I/O path.
    pub fn io(&self) -> IoMode {
        match self {
            LutCommand::Server { io, .. } | LutCommand::Client { io, .. } => *io,
        }
    }

    /// Where the library writes its own qlog, if asked.
    pub fn qlog(&self) -> Option<&Path> {
        match self {
            LutCommand::Server { qlog, .. } | LutCommand::Client { qlog, .. } => qlog.as_deref(),
        }
    }

    /// The `--opt KEY=VALUE` settings.
    pub fn opts(&self) -> &[String] {
        match self {
            LutCommand::Server { opts, .. } | LutCommand::Client { opts, .. } => opts,
        }
    }

    /// The `--opt` settings, typed.
    pub fn options(&self) -> Result<Vec<crate::options::LutOpt>, crate::options::OptionError> {
        crate::options::LutOpt::parse_all(self.opts())
    }

    /// Connections in total (a server serves this many, then exits).
    pub fn connections(&self) -> u32 {
        match self {
            LutCommand::Server { connections, .. } | LutCommand::Client { connections, .. } => *connections,
        }
    }

    /// Connections open at once (a server: all of them).
    pub fn parallel(&self) -> u32 {
        match self {
            LutCommand::Server { connections, .. } => *connections,
            LutCommand::Client { parallel, .. } => *parallel,
        }
    }

    /// Streams per connection.
    pub fn streams(&self) -> u32 {
        match self {
            LutCommand::Server { streams, .. } | LutCommand::Client { streams, .. } => *streams,
        }
    }

    /// Bytes requested per stream; a server's is 0 (it learns sizes from the requests).
    pub fn size(&self) -> u64 {
        match self {
            LutCommand::Server { .. } => 0,
            LutCommand::Client { size, .. } => *size,
        }
    }

    /// The workload a LUT command asks for; a server's has `size` 0 (it learns sizes from the
    /// requests).
    pub fn workload(&self) -> Workload {
        Workload {
            connections: self.connections(),
            parallel: self.parallel(),
            streams: self.streams(),
            size: self.size(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;

    #[test]
    fn parses_both_roles_and_reports_their_shape() {
        let server = LutCli::try_parse_from([
            "lut",
            "server",
            "--listen",
            "127.0.0.1:0",
            "--cert",
            "c",
            "--key",
            "k",
            "--io",
            "nesquic",
            "--opt",
            "gso=off",
        ])
        .unwrap()
        .command;
        assert_eq!((server.role(), server.io(), server.size()), (Role::Server, IoMode::Nesquic, 0));
        assert_eq!(server.opts(), ["gso=off"]);
        assert!(server.workload().is_single());
        let client = LutCli::try_parse_from([
            "lut",
            "client",
            "--connect",
            "127.0.0.1:4433",
            "--ca",
            "c",
            "--size",
            "10",
            "--connections",
            "4",
            "--parallel",
            "2",
        ])
        .unwrap()
        .command;
        assert_eq!(
            (client.role(), client.io(), client.parallel(), client.size()),
            (Role::Client, IoMode::Native, 2, 10)
        );
        assert_eq!(client.workload(), Workload { connections: 4, parallel: 2, streams: 1, size: 10 });
    }
}
