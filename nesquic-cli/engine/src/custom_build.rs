//! `--lut-path PATH`: build a Rust LUT's adapter against a local checkout of the library (cargo
//! `[patch]`), so CI can profile any commit. The build is a generated cargo project that reuses
//! the adapter's source and Nesquic's Cargo.lock, with a target directory shared between builds.

use std::path::{Path, PathBuf};
use std::process::Command;

use nesquic_lut_adapters::{Lut, LutError};

use crate::error::StepExt;
use crate::EngineError;

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Where the Rust LUT executables' package (`nesquic-lut-bins`) lives (this binary must run from a
/// Nesquic source tree for `--lut-path`).
const BINS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../lut-adapters/quic-bins");

/// A LUT whose executable was built against a local checkout.
pub struct CustomBuild {
    inner: Box<dyn Lut>,
    binary: PathBuf,
    version: String,
    /// The checkout.
    pub source: PathBuf,
    /// Its git revision, or why there is none.
    pub revision: String,
}

/// Builds `lut`'s adapter against the library at `path`.
pub fn build(lut: Box<dyn Lut>, path: &Path) -> Result<CustomBuild> {
    let Some(recipe) = lut.descriptor().source_build else {
        return Err(EngineError::msg(format!(
            "--lut-path builds Rust LUTs from source; {} is not one (use --lut exec for other stacks)",
            lut.name()
        )));
    };
    let name = lut.name();
    let source = path.canonicalize().with_step(|| format!("--lut-path {}: no such directory", path.display()))?;
    let patches = find_crates(&source, recipe.crates)?;
    let version = crate_version(&patches[0].1.join("Cargo.toml"))?;
    let revision = git_revision(&source);
    let bins = Path::new(BINS_DIR).canonicalize().step(
        "--lut-path needs the Nesquic source tree this nesquic was built from (lut-adapters/quic-bins/ is gone)",
    )?;
    // Invariant: BINS_DIR is lut-adapters/quic-bins under the repository, two levels down.
    let repo = bins.ancestors().nth(2).unwrap_or(&bins).to_path_buf();
    let key = format!("{:016x}", fnv1a(source.to_string_lossy().as_bytes()));
    let dir = repo.join("target").join("lut-builds").join(format!("{name}-{key}"));
    std::fs::create_dir_all(dir.join("src")).with_step(|| format!("create {}", dir.display()))?;

    let executable = lut.descriptor().executable_name();
    let mut manifest = format!(
        "[package]\nname = \"{executable}-custom\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [[bin]]\nname = \"{executable}\"\npath = \"src/main.rs\"\n\n[dependencies]\n\
         nesquic-lut-bins = {{ path = {bins:?}, default-features = false }}\n{}\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n[workspace]\n\n[patch.crates-io]\n",
        recipe.dependencies
    );
    for (name, dir) in &patches {
        manifest.push_str(&format!("{name} = {{ path = {:?} }}\n", dir));
    }
    write_if_changed(&dir.join("Cargo.toml"), &manifest)?;
    let main = std::fs::read_to_string(bins.join(recipe.adapter_source))
        .with_step(|| format!("read the {name} adapter source"))?;
    write_if_changed(&dir.join("src/main.rs"), &main)?;
    if !dir.join("Cargo.lock").exists() {
        // Start from Nesquic's lock so only the patched crates move (and it works offline).
        std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).step("copy Cargo.lock")?;
    }
    eprintln!("nesquic: building the {name} adapter against {} ({version}, {revision}) ...", source.display());
    let target = repo.join("target").join("lut-builds").join("target");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .step("run cargo (is Rust installed?)")?;
    if !status.success() {
        return Err(EngineError::msg(format!(
            "building the {name} adapter against {} failed (cargo output above)",
            source.display()
        )));
    }
    let binary = dir.join(&executable);
    std::fs::copy(target.join("release").join(&executable), &binary).step("copy the built adapter")?;
    Ok(CustomBuild { inner: lut, binary, version, source, revision })
}

/// (crate name, directory) for every one of `crates` found at `source`: a single crate directory
/// (e.g. unpacked from the registry) or a workspace checkout with one directory per crate. The
/// first of `crates` must be there; it comes first.
fn find_crates(source: &Path, crates: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    if let Ok(name) = crate_name(&source.join("Cargo.toml")) {
        if crates.contains(&name.as_str()) {
            found.push((name, source.to_path_buf()));
        }
    }
    for name in crates {
        let dir = source.join(name);
        if crate_name(&dir.join("Cargo.toml")).is_ok_and(|n| n == *name) {
            found.push((name.to_string(), dir));
        }
    }
    // The main crate first: its version is the one reported.
    let main = crates.first().copied().unwrap_or_default();
    found.sort_by_key(|(n, _)| n != main);
    if found.first().map(|(n, _)| n.as_str()) != Some(main) {
        return Err(EngineError::msg(format!(
            "{} holds no {main} crate (expected a Cargo.toml of package {main}, or a {main}/ directory)",
            source.display()
        )));
    }
    Ok(found)
}

fn manifest_package(path: &Path) -> Result<toml::Value> {
    let text = std::fs::read_to_string(path).with_step(|| format!("read {}", path.display()))?;
    let v: toml::Value = toml::from_str(&text).with_step(|| format!("{} is not valid TOML", path.display()))?;
    v.get("package").cloned().ok_or_else(|| EngineError::msg(format!("{} has no [package]", path.display())))
}

fn crate_name(path: &Path) -> Result<String> {
    manifest_package(path)?
        .get("name")
        .and_then(|n| n.as_str())
        .map(String::from)
        .ok_or_else(|| EngineError::msg(format!("{}: package without name", path.display())))
}

fn crate_version(path: &Path) -> Result<String> {
    let package = manifest_package(path)?;
    Ok(package.get("version").and_then(|v| v.as_str()).unwrap_or("workspace version").to_string())
}

fn git_revision(dir: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "not a git checkout".into())
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).with_step(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// FNV-1a: a stable short key for a path (std's hasher is randomly seeded).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

impl Lut for CustomBuild {
    fn descriptor(&self) -> &'static nesquic_lut_adapters::Descriptor {
        self.inner.descriptor()
    }
    fn version(&self) -> String {
        format!("{} (from {})", self.version, self.source.display())
    }
    fn binary_path(&self, _dir: &Path) -> Result<PathBuf, LutError> {
        Ok(self.binary.clone())
    }
}
