//! `nesquic-lut-tcp-tls`: the TCP+TLS baseline, what QUIC replaces. The benchmark protocol
//! (docs/protocol.md) over kernel TCP with TLS 1.3 from rustls (ring), the same TLS configuration
//! quinn's LUT uses. One protocol connection is one TCP connection with its TLS handshake; a
//! multi-stream connection is one TCP+TLS connection per stream (TCP has no streams).
//!
//! Blocking sockets, one thread per TCP connection: each side moves data with as few system
//! calls as rustls allows (records gathered into one `sendmsg`, receives into a 256 KiB buffer).

mod client;
mod options;
mod server;
mod socket;
mod tls_io;

use anyhow::{bail, Result};
use clap::Parser;
use nesquic_lut_bins::protocol::{IoMode, LutCli, LutCommand};

fn main() {
    let cli = LutCli::parse();
    if let Err(e) = run(&cli.command) {
        eprintln!("nesquic-lut-tcp-tls: {e:#}");
        std::process::exit(1);
    }
}

fn run(command: &LutCommand) -> Result<()> {
    if command.io() != IoMode::Native {
        bail!("--io {}: the TCP+TLS baseline runs on kernel TCP only (--io native)", command.io());
    }
    if command.qlog().is_some() {
        bail!("--qlog: TCP+TLS has no qlog");
    }
    let options = options::Options::parse(command.opts())?;
    let workload = command.workload();
    match command {
        LutCommand::Server { listen, cert, key, .. } => server::run(*listen, cert, key, &options, workload),
        LutCommand::Client { connect, ca, .. } => client::run(*connect, ca, &options, workload),
    }
}
