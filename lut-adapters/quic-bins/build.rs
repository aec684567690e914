//! Chooses the code that differs between the library versions this crate builds against.
//! `nesquic run --lut-path` sets NESQUIC_LUT_CRATES to the checkout's crates
//! (`quinn-proto=0.12.0 ...`); unset (Nesquic's own workspace), the pinned versions' code is built.

/// (cfg, crate, the first version that has it, whether Nesquic's lock pins such a version): on
/// when the checkout's crate is that new; for a crate the build does not take from a checkout
/// (Nesquic's own workspace), the lock's.
const CFGS: &[(&str, &str, (u64, u64, u64), bool)] = &[
    // quinn 0.12 (its main branch): see src/bin/quinn.rs.
    ("quinn_0_12", "quinn", (0, 12, 0), false),
];

fn main() {
    println!("cargo::rerun-if-env-changed=NESQUIC_LUT_CRATES");
    // A `--lut-path` build's package declares only the features it turns on (a quinn without
    // qlog); the adapter's source names these either way.
    println!("cargo::rustc-check-cfg=cfg(feature, values(\"qlog\", \"quiche\"))");
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
