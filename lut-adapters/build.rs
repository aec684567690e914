//! Records the versions of the QUIC libraries this build links, read from the workspace's
//! Cargo.lock (and the quic-go adapter's go.mod, the aioquic adapter's requirements.txt, the
//! system's ngtcp2 through pkg-config), so runs report what was really measured
//! instead of a hand-kept string.

use std::path::PathBuf;

const TRACKED: &[(&str, &str)] = &[
    ("quinn", "NESQUIC_QUINN_VERSION"),
    ("rustls", "NESQUIC_RUSTLS_VERSION"),
    ("ring", "NESQUIC_RING_VERSION"),
    ("quiche", "NESQUIC_QUICHE_VERSION"),
    ("msquic", "NESQUIC_MSQUIC_VERSION"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    // The workspace's lock, then the msquic adapter's own (it is a separate workspace).
    let mut text = String::new();
    for lock in [manifest.join("../Cargo.lock"), manifest.join("msquic/Cargo.lock")] {
        println!("cargo:rerun-if-changed={}", lock.display());
        text.push_str(&std::fs::read_to_string(&lock).unwrap_or_default());
    }
    for (krate, var) in TRACKED {
        println!("cargo:rustc-env={var}={}", locked_version(&text, krate).unwrap_or_else(|| "unknown".into()));
    }
    let go_mod = manifest.join("quic-go/go.mod");
    println!("cargo:rerun-if-changed={}", go_mod.display());
    let go_mod = std::fs::read_to_string(&go_mod).unwrap_or_default();
    let quic_go = go_required_version(&go_mod, "github.com/quic-go/quic-go").unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NESQUIC_QUIC_GO_VERSION={quic_go}");
    scripted_stack_versions(&manifest);
}

/// aioquic: the version lut-adapters/aioquic/requirements.txt pins. ngtcp2: the Debian package's
/// (pkg-config), or a word saying it is missing: the adapter is then skipped by `just build`.
fn scripted_stack_versions(manifest: &std::path::Path) {
    let requirements = manifest.join("aioquic/requirements.txt");
    println!("cargo:rerun-if-changed={}", requirements.display());
    let text = std::fs::read_to_string(&requirements).unwrap_or_default();
    let aioquic = text.lines().find_map(|l| l.trim().strip_prefix("aioquic==")).unwrap_or("unknown");
    println!("cargo:rustc-env=NESQUIC_AIOQUIC_VERSION={aioquic}");
    let ngtcp2 = std::process::Command::new("pkg-config")
        .args(["--modversion", "libngtcp2"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "not installed".into());
    println!("cargo:rustc-env=NESQUIC_NGTCP2_VERSION={ngtcp2}");
}

/// The version a go.mod requires of `module` (`require module vX.Y.Z`, alone or in a block).
fn go_required_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let first = words.next()?;
        let name = if first == "require" { words.next()? } else { first };
        (name == module).then(|| words.next().map(str::to_string)).flatten()
    })
}

/// Finds `version = "..."` right after `name = "<krate>"` in a Cargo.lock.
fn locked_version(lock: &str, krate: &str) -> Option<String> {
    let needle = format!("name = \"{krate}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let end = lock[start..].find('"')? + start;
    Some(lock[start..end].to_string())
}
