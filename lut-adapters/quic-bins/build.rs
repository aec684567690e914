//! Chooses the code that differs between the library versions this crate builds against
//! (translation/version_cfg.rs says how).

#[path = "../../translation/version_cfg.rs"]
mod version_cfg;

use version_cfg::VersionCfg;

const CFGS: &[VersionCfg] = &[
    // quinn 0.12 (its main branch): see src/bin/quinn.rs.
    VersionCfg { cfg: "quinn_0_12", krate: "quinn", since: (0, 12, 0), pinned: false },
];

fn main() {
    // A `--lut-path` build's package declares only the features it turns on (a quinn without
    // qlog); the adapter's source names these either way.
    println!("cargo::rustc-check-cfg=cfg(feature, values(\"qlog\", \"quiche\"))");
    version_cfg::emit(CFGS);
}
