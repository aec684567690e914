//! `--lut-version VERSION`: a published release, fetched from the registry that serves it
//! (crates.io, the Go module proxy, PyPI) into a checkout-shaped tree that is then built like a
//! `--lut-path` checkout, so that the version-dependent adapter code and the proof of what was
//! linked are the same ones. Each release is fetched once into `target/lut-builds/releases/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nesquic_lut_adapters::descriptor::{Descriptor, Releases, SourceBuild};
use nesquic_record::events::LutRelease;
use serde::Deserialize;

use super::Result;
use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// Written last into a fetched tree: a tree without it is an interrupted fetch, never used.
const MARKER: &str = ".nesquic-release.json";

/// A release as a directory to build from, and where it came from.
pub(super) struct Fetched {
    pub tree: PathBuf,
    pub release: LutRelease,
}

/// Fetches `lut`'s release `version` (once; then the cached tree) under `releases`.
pub(super) fn fetch(lut: &Descriptor, version: &str, releases: &Path, adapters: &Path) -> Result<Fetched> {
    let Some(registry) = lut.releases else {
        return Err(EngineError::msg(format!(
            "--lut-version: no registry serves {} releases this Nesquic can fetch; build a checkout with --lut-path \
             (and --lut-rev TAG for a release)",
            lut.name
        )));
    };
    check_version_text(version)?;
    let tree = releases.join(format!("{}-{version}", lut.name));
    if let Ok(text) = std::fs::read_to_string(tree.join(MARKER)) {
        if let Ok(release) = serde_json::from_str::<LutRelease>(&text) {
            eprintln!("nesquic: {} {version} from {} (fetched before: {})", lut.name, release.registry, tree.display());
            return Ok(Fetched { tree, release });
        }
    }
    let part = releases.join(format!("{}-{version}.part-{}", lut.name, std::process::id()));
    // A tree left by an interrupted fetch is not reused: start again.
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(&part).with_step(|| format!("create {}", part.display()))?;
    eprintln!("nesquic: fetching {} {version} ...", lut.name);
    let fetched = match registry {
        Releases::Crates => crates(lut, version, &part),
        Releases::GoModule(module) => go_module(module, version, &part),
        Releases::PyPi(project) => pypi(project, version, &part),
        Releases::DebianSource(script) => debian(&adapters.join(script), lut.name, version, &part),
    };
    let release = match fetched {
        Ok(release) => release,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&part);
            return Err(e);
        }
    };
    let marker = serde_json::to_string_pretty(&release).step("describe the fetched release")?;
    std::fs::write(part.join(MARKER), marker).with_step(|| format!("write {}", part.join(MARKER).display()))?;
    std::fs::rename(&part, &tree).with_step(|| format!("move {} to {}", part.display(), tree.display()))?;
    eprintln!("nesquic: {} {version} from {}: {}", lut.name, release.registry, release.checksum);
    Ok(Fetched { tree, release })
}

/// A version is a path component and a command argument: only what versions are made of.
fn check_version_text(version: &str) -> Result<()> {
    let ok = !version.is_empty()
        && version.len() <= 64
        && version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        && !version.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(EngineError::msg(format!(
            "--lut-version {version:?}: not a version (digits, letters, '.', '-', '+'; e.g. 0.11.9 or v0.62.0)"
        )))
    }
}

/// crates.io: the main crate at `=version`; the library's other crates at the newest versions
/// that release accepts.
fn crates(lut: &Descriptor, version: &str, tree: &Path) -> Result<LutRelease> {
    let Some(SourceBuild::Cargo(recipe)) = lut.source_build else {
        return Err(EngineError::msg(format!("{} is not built with cargo: it has no crates.io releases", lut.name)));
    };
    let main = recipe.crates.first().copied().unwrap_or_default();
    let version = version.strip_prefix('v').unwrap_or(version);
    let project = tree.join(".fetch");
    // The other crates at the newest versions the release accepts, as `cargo add MAIN@=VERSION`
    // builds it. (The minimums its manifest names need not build together: quinn 0.11.9 asks
    // for quinn-proto ^0.11.12, whose qlog feature came in 0.11.13.)
    let graph = resolve_crates(&project, &[(main.to_string(), format!("={version}"))])?;
    if !graph.packages.iter().any(|p| p.name == main && p.version == version) {
        return Err(EngineError::msg(format!("crates.io resolved no {main} {version} (cargo's errors are above)")));
    }
    let lock = std::fs::read_to_string(project.join("Cargo.lock")).step("read the fetch project's Cargo.lock")?;
    let mut checksum = String::new();
    for name in recipe.crates {
        let Some(p) = graph.packages.iter().find(|p| p.name == *name && p.source.is_some()) else { continue };
        let from = p
            .manifest_path
            .parent()
            .ok_or_else(|| EngineError::msg("cargo metadata: a manifest without a directory"))?;
        copy_tree(from, &tree.join(name))?;
        if *name == main {
            checksum = lock_checksum(&lock, name, &p.version).unwrap_or_default();
        }
    }
    let _ = std::fs::remove_dir_all(&project);
    let linked: Vec<String> = recipe
        .crates
        .iter()
        .filter_map(|n| graph.packages.iter().find(|p| p.name == *n && p.source.is_some()))
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    Ok(LutRelease {
        registry: "crates.io".into(),
        version: version.to_string(),
        checksum: format!("sha256:{checksum}"),
        contents: linked.join(", "),
    })
}

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    version: String,
    source: Option<String>,
    manifest_path: PathBuf,
}

/// A throwaway cargo project depending on `deps` (name, requirement): its resolved graph, the
/// crates' sources downloaded into cargo's registry cache.
fn resolve_crates(project: &Path, deps: &[(String, String)]) -> Result<Metadata> {
    std::fs::create_dir_all(project.join("src")).with_step(|| format!("create {}", project.display()))?;
    let lines: Vec<String> = deps.iter().map(|(n, r)| format!("{n} = \"{r}\"")).collect();
    let manifest = format!(
        "[package]\nname = \"nesquic-release-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\n{}\n\n[workspace]\n",
        lines.join("\n")
    );
    std::fs::write(project.join("Cargo.toml"), manifest).step("write the fetch project")?;
    std::fs::write(project.join("src/lib.rs"), "").step("write the fetch project")?;
    let _ = std::fs::remove_file(project.join("Cargo.lock"));
    let out = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .stderr(Stdio::inherit())
        .tethered_output()
        .step("run cargo metadata (is Rust installed?)")?;
    if !out.status.success() {
        let wanted: Vec<String> = deps.iter().map(|(n, r)| format!("{n} {r}")).collect();
        return Err(EngineError::msg(format!(
            "crates.io has no release resolving {} ({}; cargo's errors are above)",
            wanted.join(", "),
            out.status
        )));
    }
    serde_json::from_slice(&out.stdout).step("cargo metadata printed no graph")
}

/// The `checksum` Cargo.lock records for `name` `version`.
fn lock_checksum(lock: &str, name: &str, version: &str) -> Option<String> {
    let lock: toml::Table = toml::from_str(lock).ok()?;
    lock.get("package")?.as_array()?.iter().find_map(|p| {
        (p.get("name")?.as_str()? == name && p.get("version")?.as_str()? == version)
            .then(|| p.get("checksum")?.as_str().map(String::from))?
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GoDownload {
    version: Option<String>,
    dir: Option<String>,
    sum: Option<String>,
    error: Option<String>,
}

/// The Go module proxy: `go mod download -json MODULE@VERSION`, its directory copied writable.
fn go_module(module: &str, version: &str, tree: &Path) -> Result<LutRelease> {
    let version = if version.starts_with('v') { version.to_string() } else { format!("v{version}") };
    let go = if Path::new("/usr/local/go/bin/go").is_file() { "/usr/local/go/bin/go" } else { "go" };
    let out = Command::new(go)
        .args(["mod", "download", "-json", &format!("{module}@{version}")])
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .current_dir(tree)
        .stderr(Stdio::inherit())
        .tethered_output()
        .step("run go mod download (is Go installed?)")?;
    let info: GoDownload = serde_json::from_slice(&out.stdout)
        .with_step(|| format!("go mod download {module}@{version} printed no module ({})", out.status))?;
    if let Some(error) = info.error {
        return Err(EngineError::msg(format!("the Go module proxy has no {module}@{version}: {error}")));
    }
    let (Some(dir), Some(sum)) = (info.dir, info.sum) else {
        return Err(EngineError::msg(format!("go mod download {module}@{version}: no directory or checksum")));
    };
    let dest = tree.join("src");
    copy_tree(Path::new(&dir), &dest)?;
    move_up(&dest, tree)?;
    Ok(LutRelease {
        registry: "proxy.golang.org".into(),
        version: info.version.unwrap_or(version),
        checksum: sum,
        contents: module.to_string(),
    })
}

/// PyPI: the project's source distribution (`pip download --no-binary :all:`), unpacked.
fn pypi(project: &str, version: &str, tree: &Path) -> Result<LutRelease> {
    let download = tree.join(".sdist");
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest"])
        .arg(&download)
        .arg(format!("{project}=={version}"))
        .stdout(Stdio::from(std::io::stderr()))
        .tethered_status()
        .step("run python3 -m pip download (is pip installed?)")?;
    if !status.success() {
        return Err(EngineError::msg(format!(
            "PyPI has no source distribution of {project}=={version} ({status}; pip's errors are above)"
        )));
    }
    let sdist = std::fs::read_dir(&download)
        .with_step(|| format!("read {}", download.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .ok_or_else(|| EngineError::msg(format!("pip downloaded no .tar.gz source of {project}=={version}")))?;
    let sum = Command::new("sha256sum").arg(&sdist).tethered_output().step("run sha256sum")?;
    let checksum = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap_or_default().to_string();
    let unpacked = tree.join(".unpacked");
    std::fs::create_dir_all(&unpacked).with_step(|| format!("create {}", unpacked.display()))?;
    run(Command::new("tar").arg("-xzf").arg(&sdist).arg("-C").arg(&unpacked), "tar -xzf (the sdist)")?;
    // An sdist holds one top directory, `PROJECT-VERSION/`.
    let top = std::fs::read_dir(&unpacked)
        .with_step(|| format!("read {}", unpacked.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .ok_or_else(|| EngineError::msg(format!("the sdist of {project}=={version} holds no directory")))?;
    move_up(&top, tree)?;
    let _ = std::fs::remove_dir_all(&unpacked);
    let _ = std::fs::remove_dir_all(&download);
    Ok(LutRelease {
        registry: "pypi.org".into(),
        version: version.to_string(),
        checksum: format!("sha256:{checksum}"),
        contents: sdist.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    })
}

/// Debian's source package, unpacked by the LUT's own script (patches applied, as Debian
/// builds it); the checksum is the `.dsc`'s, which lists every file's.
fn debian(script: &Path, lut: &str, version: &str, tree: &Path) -> Result<LutRelease> {
    let unpacked = tree.join(".debian");
    let out = Command::new("bash")
        .arg(script)
        .arg(version)
        .arg(&unpacked)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .tethered_output()
        .with_step(|| format!("run {}", script.display()))?;
    let said = String::from_utf8_lossy(&out.stderr);
    eprint!("{said}");
    if !out.status.success() {
        return Err(EngineError::msg(format!(
            "Debian serves no {lut} {version} source ({}; its errors are above)",
            out.status
        )));
    }
    let checksum = said
        .split_whitespace()
        .find_map(|w| w.strip_prefix("sha256:"))
        .map(|h| format!("sha256:{}", h.trim_end_matches(')')))
        .unwrap_or_default();
    let dsc = said.split_whitespace().find(|w| w.ends_with(".dsc")).unwrap_or_default().trim_start_matches('(');
    move_up(&unpacked, tree)?;
    Ok(LutRelease {
        registry: "Debian (source package)".into(),
        version: version.to_string(),
        checksum,
        contents: dsc.to_string(),
    })
}

/// Copies `from` to `to` (`cp -a`, then writable: module caches are read-only).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    run(Command::new("cp").arg("-a").arg(from).arg(to), "cp -a (the release's source)")?;
    run(Command::new("chmod").args(["-R", "u+w"]).arg(to), "chmod -R u+w (the release's source)")
}

/// Moves every entry of `dir` into `to` (its parent) and removes `dir`.
fn move_up(dir: &Path, to: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_step(|| format!("read {}", dir.display()))?.flatten() {
        let dest = to.join(entry.file_name());
        std::fs::rename(entry.path(), &dest).with_step(|| format!("move {}", entry.path().display()))?;
    }
    std::fs::remove_dir(dir).with_step(|| format!("remove {}", dir.display()))
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.tethered_status().with_step(|| format!("run {what}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(EngineError::msg(format!("{what} failed ({status})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_checked_before_they_name_a_path() {
        for bad in ["", "../x", "1.0/..", "-rf", "a b", ".hidden"] {
            assert!(check_version_text(bad).is_err(), "{bad:?}");
        }
        for good in ["0.11.9", "v0.62.0", "2.5.1-beta", "1.0.0+meta"] {
            assert!(check_version_text(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn the_lock_s_checksum_of_the_crate_is_found() {
        let lock =
            "version = 4\n[[package]]\nname = \"quinn\"\nversion = \"0.11.9\"\nsource = \"x\"\nchecksum = \"abc\"\n";
        assert_eq!(lock_checksum(lock, "quinn", "0.11.9").as_deref(), Some("abc"));
        assert_eq!(lock_checksum(lock, "quinn", "0.11.8"), None);
    }
}
