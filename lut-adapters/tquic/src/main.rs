//! `nesquic-lut-tquic`: Tencent tquic (its vendored BoringSSL) speaking the benchmark protocol
//! over Nesquic's I/O layer (tquic has no I/O of its own), in every workload shape (N
//! connections x M streams, `parallel` at a time), like the quiche LUT. Started by
//! `nesquic run --lut tquic`; see docs/protocol.md.
//!
//! Its own cargo workspace: in the main one, cargo's feature unification would build
//! `nesquic-lut-bins` with quiche for every binary, and quiche's BoringSSL and tquic's define the
//! same C symbols. It reuses the main workspace's driving code through path dependencies
//! (`nesquic-lut-bins` without quiche); [`shim`] adapts tquic's callbacks to the translation
//! layer's `Endpoint`.

mod shim;

use clap::Parser;
use nesquic_lut_bins::protocol::LutCli;

fn main() {
    let cli = LutCli::parse();
    if let Err(e) = nesquic_lut_bins::translated::run::<shim::Tquic>(cli.command) {
        eprintln!("nesquic-lut-tquic: {e:#}");
        std::process::exit(1);
    }
}
