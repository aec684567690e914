//! `nesquic-lut-quiche`: Cloudflare quiche (BoringSSL) speaking the benchmark protocol over
//! Nesquic's I/O layer (quiche has no I/O of its own). Started by `nesquic run`; see
//! docs/protocol.md.

use clap::Parser;
use nesquic_lut_bins::protocol::LutCli;
use nesquic_lut_bins::translation::quiche_shim::Quiche;

fn main() {
    let cli = LutCli::parse();
    if let Err(e) = nesquic_lut_bins::translated::run::<Quiche>(cli.command) {
        eprintln!("nesquic-lut-quiche: {e:#}");
        std::process::exit(1);
    }
}
