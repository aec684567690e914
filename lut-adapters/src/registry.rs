//! The LUTs this build knows: every adapter's descriptor ([`DESCRIPTORS`]) and resolving a
//! `--lut NAME` ([`find_lut`], [`find_lut_or_exec`]). The one module that names every adapter.

use crate::descriptor::Descriptor;
use crate::error::LutError;
use crate::exec::ExecLut;
use crate::launch::{Builtin, Lut};

/// Every LUT this build knows.
pub fn all_luts() -> Vec<Box<dyn Lut>> {
    DESCRIPTORS.iter().map(|d| Box::new(Builtin(d)) as Box<dyn Lut>).collect()
}

/// The descriptors of every LUT with an executable of its own.
pub static DESCRIPTORS: [&Descriptor; 9] = [
    &crate::quinn::QUINN,
    &crate::quiche::QUICHE,
    &crate::msquic::MSQUIC,
    &crate::quic_go::QUIC_GO,
    &crate::s2n_quic::S2N_QUIC,
    &crate::tquic::TQUIC,
    &crate::tcp_tls::TCP_TLS,
    // Scripted and C stacks (lut-adapters/aioquic, lut-adapters/ngtcp2).
    &crate::aioquic::AIOQUIC,
    &crate::ngtcp2::NGTCP2,
];

/// `--lut NAME`, or `exec` with its two commands (which only `exec` takes).
pub fn find_lut_or_exec(
    name: &str,
    server_cmd: Option<String>,
    client_cmd: Option<String>,
) -> Result<Box<dyn Lut>, LutError> {
    match (name.eq_ignore_ascii_case("exec"), server_cmd, client_cmd) {
        (true, Some(server_cmd), Some(client_cmd)) => Ok(Box::new(ExecLut { server_cmd, client_cmd })),
        (true, _, _) => Err(LutError::ExecWithoutCommands),
        (false, None, None) => find_lut(name),
        (false, _, _) => Err(LutError::CommandsWithoutExec),
    }
}

/// Finds a LUT by name, or lists the known ones.
pub fn find_lut(name: &str) -> Result<Box<dyn Lut>, LutError> {
    let mut luts = all_luts();
    match luts.iter().position(|l| l.name().eq_ignore_ascii_case(name)) {
        Some(i) => Ok(luts.swap_remove(i)),
        None => Err(LutError::Unknown {
            name: name.to_string(),
            known: luts
                .iter()
                .map(|l| l.name())
                .chain(["exec (with --server-cmd/--client-cmd)"])
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_lut_lists_the_known_ones() {
        let err = find_lut("nope").err().unwrap().to_string();
        assert!(err.contains("unknown LUT 'nope'") && err.contains("quinn"), "{err}");
        assert_eq!(find_lut("QUINN").unwrap().name(), "quinn");
    }

    #[test]
    fn quinn_version_comes_from_the_lockfile() {
        let v = find_lut("quinn").unwrap().version();
        assert!(v.starts_with("0.11."), "{v}");
    }
}
