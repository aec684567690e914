//! `nesquic`: run a QUIC library under test through a shared fast UDP I/O layer and say where its
//! time goes. This crate owns the command line, orchestration of LUT processes and reporting; it
//! must not contain protocol logic (lut-adapters), socket code (io-layer) or eBPF (nesquic-ebpf).

mod run;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Profile QUIC libraries from the outside.
///
/// Examples:
///   nesquic run                          # quinn, 25 MB over loopback
///   nesquic run --lut quinn --size 1GiB --repeat 5 --json out.json
///   nesquic luts                         # libraries this build can run
#[derive(Debug, Parser)]
#[command(name = "nesquic", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a LUT's server and client as separate processes, transfer a verified payload, report.
    Run(run::RunArgs),
    /// List the libraries under test this build knows, with versions and I/O paths.
    Luts,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::execute(&args).map(|_| ()),
        Command::Luts => {
            list_luts();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nesquic: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn list_luts() {
    for lut in nesquic_lut_adapters::all_luts() {
        let io: Vec<String> = lut.io_modes().iter().map(ToString::to_string).collect();
        println!("{:<8} {:<10} io: {:<20} {}", lut.name(), lut.version(), io.join(","), lut.description());
    }
}
