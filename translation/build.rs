//! Chooses the code that differs between the library versions this crate builds against.
//! `nesquic run --lut-path` sets NESQUIC_LUT_CRATES to the checkout's crates
//! (`quinn-proto=0.12.0 ...`); unset (Nesquic's own workspace), the pinned versions' code is built.

/// A cfg on when the checkout's crate is at least `since`; for a crate the build does not take
/// from a checkout (Nesquic's own workspace, or the registry's quinn-proto under a quiche
/// checkout), as Nesquic's lock has it (`pinned`).
struct VersionCfg {
    cfg: &'static str,
    krate: &'static str,
    since: (u64, u64, u64),
    pinned: bool,
}

const CFGS: &[VersionCfg] = &[
    // quinn-proto 0.12 (quinn's main): `Endpoint::new` lost its rng-seed argument (quinn_shim.rs).
    VersionCfg { cfg: "quinn_proto_0_12", krate: "quinn-proto", since: (0, 12, 0), pinned: false },
    // quiche 0.27 added `Connection::stream_recv_buf` (verified in place, no scratch copy).
    VersionCfg { cfg: "quiche_0_27", krate: "quiche", since: (0, 27, 0), pinned: true },
];

fn main() {
    println!("cargo::rerun-if-env-changed=NESQUIC_LUT_CRATES");
    for c in CFGS {
        println!("cargo::rustc-check-cfg=cfg({})", c.cfg);
    }
    let crates = std::env::var("NESQUIC_LUT_CRATES").unwrap_or_default();
    for c in CFGS {
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
