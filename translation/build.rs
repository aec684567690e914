//! Chooses the code that differs between the library versions this crate builds against
//! (version_cfg.rs says how).

#[path = "version_cfg.rs"]
mod version_cfg;

use version_cfg::VersionCfg;

const CFGS: &[VersionCfg] = &[
    // quinn-proto 0.12 (quinn's main): `Endpoint::new` lost its rng-seed argument (quinn_shim.rs).
    VersionCfg { cfg: "quinn_proto_0_12", krate: "quinn-proto", since: (0, 12, 0), pinned: false },
    // quiche 0.27 added `Connection::stream_recv_buf` (verified in place, no scratch copy).
    VersionCfg { cfg: "quiche_0_27", krate: "quiche", since: (0, 27, 0), pinned: true },
];

fn main() {
    version_cfg::emit(CFGS);
}
