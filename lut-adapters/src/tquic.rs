//! tquic (Tencent, Rust, vendored BoringSSL): no I/O of its own, driven over Nesquic's I/O layer
//! like quiche, in an executable built from `lut-adapters/tquic/` (its own cargo workspace,
//! Cargo.lock names the version).

use crate::lut::{
    IoMode, Lut, LutOption, NESQUIC_IO_GRO, NESQUIC_IO_GSO, NESQUIC_IO_MMSG, RCVBUF_NESQUIC, SNDBUF_NESQUIC,
};

/// tquic through the translation layer, every workload shape.
#[derive(Debug, Default)]
pub struct TquicLut;

impl Lut for TquicLut {
    fn name(&self) -> &'static str {
        "tquic"
    }
    fn version(&self) -> String {
        env!("NESQUIC_TQUIC_VERSION").to_string()
    }
    fn description(&self) -> &'static str {
        "tquic (Rust, BoringSSL + ring header protection) driven by Nesquic's translation layer; it has no I/O of its own"
    }
    fn crypto_backend(&self) -> &'static str {
        "boringssl (tquic's own)"
    }
    fn io_modes(&self) -> &'static [IoMode] {
        &[IoMode::Nesquic, IoMode::Plain]
    }
    fn multi_workload_io(&self) -> &'static [IoMode] {
        &[IoMode::Nesquic, IoMode::Plain]
    }
    fn options(&self) -> &'static [LutOption] {
        &[
            NESQUIC_IO_GSO,
            NESQUIC_IO_GRO,
            NESQUIC_IO_MMSG,
            RCVBUF_NESQUIC,
            SNDBUF_NESQUIC,
            LutOption {
                key: "cc",
                values: &["cubic", "bbr", "bbr3", "copa"],
                meaning: "congestion control (default cubic here, tquic's own default is bbr; no NewReno; also --cc)",
                io: &[IoMode::Nesquic, IoMode::Plain],
            },
        ]
    }
    fn build_hint(&self) -> &'static str {
        "it is its own cargo workspace (tquic vendors BoringSSL, built with cmake): `just build` builds it, \
         or `cargo build --release --manifest-path lut-adapters/tquic/Cargo.toml --target-dir target`"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_its_lock_file_and_unsupported_options_are_refused() {
        let v = TquicLut.version();
        assert!(v.starts_with("1.") && v.matches('.').count() == 2, "{v}");
        for refused in ["cipher=chacha20", "cc=newreno", "pacing=off"] {
            let err = TquicLut.check_options(IoMode::Nesquic, &[refused.into()]).unwrap_err().to_string();
            assert!(err.contains("tquic") && err.contains(refused), "{err}");
        }
        assert!(TquicLut.check_options(IoMode::Nesquic, &["gso=off".into(), "cc=copa".into()]).is_ok());
        assert!(TquicLut.check_io(IoMode::Native).is_err());
        let missing = TquicLut.binary_path(std::path::Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains("lut-adapters/tquic/Cargo.toml"), "{missing}");
    }
}
