//! Chooses the code that differs between the library versions a crate builds against: shared by
//! the build scripts of nesquic-translation and nesquic-lut-bins (each `#[path]`-includes it).
//! `nesquic run --lut-path` sets NESQUIC_LUT_CRATES to the checkout's crates
//! (`quinn-proto=0.12.0 ...`); unset (Nesquic's own workspace), the pinned versions' code is built.

/// A cfg on when the checkout's crate is at least `since`; for a crate the build does not take
/// from a checkout (Nesquic's own workspace, or the registry's quinn-proto under a quiche
/// checkout), as Nesquic's lock has it (`pinned`).
pub struct VersionCfg {
    pub cfg: &'static str,
    pub krate: &'static str,
    pub since: (u64, u64, u64),
    pub pinned: bool,
}

/// Declares every cfg of `cfgs` to check-cfg and turns on those the versions call for.
pub fn emit(cfgs: &[VersionCfg]) {
    println!("cargo::rerun-if-env-changed=NESQUIC_LUT_CRATES");
    for c in cfgs {
        println!("cargo::rustc-check-cfg=cfg({})", c.cfg);
    }
    let crates = std::env::var("NESQUIC_LUT_CRATES").unwrap_or_default();
    for c in cfgs {
        let version = crates.split_whitespace().find_map(|k| k.strip_prefix(c.krate)?.strip_prefix('='));
        let on = match version {
            Some(v) => parse(v).is_some_and(|v| v >= c.since),
            None => c.pinned,
        };
        if on {
            println!("cargo::rustc-cfg={}", c.cfg);
        }
    }
}

/// `MAJOR.MINOR.PATCH` (a pre-release suffix ignored).
fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}
