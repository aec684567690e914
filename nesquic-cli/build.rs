//! Records the git revision nesquic was built from (run metadata), "unknown" outside a checkout,
//! and the locked versions of the crates the `--lut-path` tests copy from the registry.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/index");
    let rev = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    let rev = if dirty && rev != "unknown" { format!("{rev}-dirty") } else { rev };
    println!("cargo:rustc-env=NESQUIC_GIT_REVISION={rev}");
    // The locked versions of the crates the --lut-path tests unpack from the registry.
    println!("cargo:rerun-if-changed=../Cargo.lock");
    let lock = std::fs::read_to_string("../Cargo.lock").unwrap_or_default();
    for (name, var) in
        [("quinn", "QUINN"), ("quinn-proto", "QUINN_PROTO"), ("quinn-udp", "QUINN_UDP"), ("quiche", "QUICHE")]
    {
        let needle = format!("name = \"{name}\"\nversion = \"");
        let version = lock
            .find(&needle)
            .map(|i| &lock[i + needle.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("unknown");
        println!("cargo:rustc-env=NESQUIC_TEST_{var}_VERSION={version}");
    }
}
