//! `nesquic-lut-s2n-quic`: AWS s2n-quic (s2n-tls over aws-lc, its own tokio platform I/O with
//! GSO and GRO) speaking the benchmark protocol (docs/protocol.md) with every workload shape.
//! Started by `nesquic run --lut s2n-quic`.
//!
//! Its own cargo workspace, like msquic's: aws-lc and s2n-tls are C libraries built from source
//! (minutes on a cold build), and keeping them out of the main workspace keeps `cargo test
//! --workspace` and clippy from building them twice, and their lock file from constraining the
//! other LUTs' dependencies. It depends on nothing of Nesquic but `nesquic-protocol`.

mod client;
mod options;
mod server;
mod socket;

use anyhow::{bail, Context, Result};
use clap::Parser;
use nesquic_protocol::cli::{IoMode, LutCli, LutCommand};

fn main() {
    let cli = LutCli::parse();
    if let Err(e) = run(cli.command) {
        eprintln!("nesquic-lut-s2n-quic: {e:#}");
        std::process::exit(1);
    }
}

fn run(command: LutCommand) -> Result<()> {
    if command.io() != IoMode::Native {
        bail!("--io {}: s2n-quic runs on its own platform I/O only (--io native)", command.io());
    }
    if command.qlog().is_some() {
        bail!("--lut-qlog: s2n-quic writes no qlog (its event providers are tracing and console counters)");
    }
    let options = options::Options::parse(&command.options().context("--opt")?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start tokio")?;
    runtime.block_on(async {
        match &command {
            LutCommand::Server { listen, cert, key, .. } => {
                server::run(*listen, cert, key, &options, command.connections(), command.streams()).await
            }
            LutCommand::Client { connect, ca, .. } => client::run(*connect, ca, &options, &command).await,
        }
    })
}
