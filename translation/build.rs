//! Chooses the code that differs between the library versions this crate builds against.
//! `nesquic run --lut-path` sets NESQUIC_LUT_CRATES to the checkout's crates
//! (`quinn-proto=0.12.0 ...`); unset (Nesquic's own workspace), the pinned versions' code is built.

/// (cfg, crate, the first version that has it, whether Nesquic's lock pins such a version): on
/// when the checkout's crate is that new; for a crate the build does not take from a checkout
/// (Nesquic's own workspace, or the registry's quinn-proto under a quiche checkout), the lock's.
const CFGS: &[(&str, &str, (u64, u64, u64), bool)] = &[
    // quinn-proto 0.12 (quinn's main): renamed and reshaped APIs, see quinn_shim.rs.
    ("quinn_proto_0_12", "quinn-proto", (0, 12, 0), false),
    // quiche 0.27 added `Connection::stream_recv_buf` (verified in place, no scratch copy).
    ("quiche_0_27", "quiche", (0, 27, 0), true),
];

fn main() {
    println!("cargo::rerun-if-env-changed=NESQUIC_LUT_CRATES");
    for (cfg, ..) in CFGS {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }
    let crates = std::env::var("NESQUIC_LUT_CRATES").unwrap_or_default();
    for (cfg, name, since, pinned) in CFGS {
        let version = crates.split_whitespace().find_map(|c| c.strip_prefix(name)?.strip_prefix('='));
        let on = match version {
            Some(v) => parse(v).is_some_and(|v| v >= *since),
            None => *pinned,
        };
        if on {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}

/// `MAJOR.MINOR.PATCH` (a pre-release suffix ignored).
fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}
