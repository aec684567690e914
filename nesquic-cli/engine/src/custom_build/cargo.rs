//! A Rust LUT built against a checkout: a generated cargo project (the adapter's own source, its
//! lock file as the start) with the library's crates in `[patch.crates-io]`. Cargo leaves a patch
//! unused when the lock pins another version than the checkout's (the warning is easy to miss, and
//! the registry's code runs instead), so after resolving, the lock is moved to the checkout's
//! versions, and the build counts only if the lock has no unused patch and `cargo metadata`
//! resolves every patched crate to the checkout's directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nesquic_lut_adapters::descriptor::{CargoAdapter, CargoBuild, Descriptor};
use nesquic_record::run::LinkedComponent;
use serde::Deserialize;

use super::{Built, Result};
use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// One of the library's crates, found in the checkout.
#[derive(Debug, Clone)]
struct Crate {
    name: String,
    /// Its directory (canonical).
    dir: PathBuf,
    /// Its `[package] version` (`None`: inherited from a workspace that did not say).
    version: Option<String>,
}

/// Builds the adapter `lut` describes in `project` with `recipe`'s crates from `checkout`.
pub(super) fn build(
    recipe: &CargoBuild,
    lut: &Descriptor,
    checkout: &Path,
    repo: &Path,
    project: &Path,
) -> Result<Built> {
    let found = find_crates(checkout, recipe.crates)?;
    let executable = lut.executable_name();
    let (mut manifest, base_lock) = match &recipe.adapter {
        CargoAdapter::QuicBins { source, dependencies, .. } => {
            quic_bins_manifest(&repo.join("lut-adapters/quic-bins"), &executable, source, dependencies)?
        }
        CargoAdapter::OwnWorkspace(dir) => own_workspace_manifest(&repo.join("lut-adapters").join(dir), &executable)?,
    };
    // Patch only what the adapter links: an unused patch must mean a mismatch, nothing else.
    let locked = lock_packages(&read_toml(&base_lock)?);
    let patched: Vec<Crate> = found.into_iter().filter(|c| locked.iter().any(|(n, _, _)| *n == c.name)).collect();
    let main = recipe.crates.first().copied().unwrap_or_default();
    let Some(main_crate) = patched.first().filter(|c| c.name == main).cloned() else {
        return Err(EngineError::msg(format!(
            "the adapter's Cargo.lock ({}) has no {main} crate",
            base_lock.display()
        )));
    };
    pin_direct_dependencies(&mut manifest, &patched);
    let mut notes = Vec::new();
    if let CargoAdapter::QuicBins { features, .. } = &recipe.adapter {
        for off in adapter_features(&mut manifest, features, &main_crate.dir) {
            let version = main_crate.version.as_deref().unwrap_or("?");
            notes.push(format!("{off} off ({main} {version} has no {off} feature)"));
        }
    }
    for note in &notes {
        eprintln!("nesquic: {note}");
    }
    let lock = project.join("Cargo.lock");
    if !lock.exists() {
        // The adapter's own lock: only the patched crates move (and most of it is cached offline).
        std::fs::copy(&base_lock, &lock).with_step(|| format!("copy {}", base_lock.display()))?;
    }
    let mut cargo = Cargo::new(project, repo)?;
    // The adapters' build scripts choose version-dependent code from these (quic-bins/build.rs).
    cargo.library = patched.iter().map(|c| format!("{}={}", c.name, c.version.as_deref().unwrap_or("?"))).collect();

    // Checked before compiling too: a wrong graph fails in seconds, not after the build.
    write_manifest(project, &manifest, &patched)?;
    let mut resolved = resolve(&cargo, &patched)?;
    let mut patched = patched;
    if !resolved.absent.is_empty() {
        // Crates of the checkout this release's graph does not use (e.g. a backend crate an older
        // release did not have yet): not patched, so the lock keeps no unused patch; recorded.
        patched.retain(|c| !resolved.absent.iter().any(|(name, _)| *name == c.name));
        write_manifest(project, &manifest, &patched)?;
        let absent = std::mem::take(&mut resolved.absent);
        resolved = resolve(&cargo, &patched)?;
        resolved.absent = absent;
    }
    linked_from_checkout(&resolved.metadata, &patched).map_err(|e| resolved.explain(e))?;
    eprintln!("nesquic: compiling (cargo's output follows; the first build of a library takes minutes) ...");
    let status = cargo
        .command(&["build", "--release", "--locked"])
        // Keep nesquic's stdout for its own output (--json -, Markdown).
        .stdout(Stdio::from(std::io::stderr()))
        .tethered_status()
        .step("run cargo (is Rust installed?)")?;
    if !status.success() {
        return Err(EngineError::msg(format!(
            "cargo build failed ({status}; its errors are above): cargo build --release --manifest-path {}",
            cargo.manifest.display()
        )));
    }
    let linked = verify(&cargo, &patched)?;
    let binary = project.join(&executable);
    install(&cargo.target.join("release").join(&executable), &binary)?;
    let version = linked.first().map(|c| c.version.clone()).unwrap_or_default();
    let names: Vec<String> = linked.iter().map(|c| format!("{} {}", c.name, c.version)).collect();
    let mut proof =
        format!("cargo resolved {} to the checkout (no unused [patch] in {})", names.join(", "), lock.display());
    if !resolved.absent.is_empty() {
        let absent: Vec<String> = resolved.absent.iter().map(|(n, v)| format!("{n} {v}")).collect();
        proof.push_str(&format!("; not linked (in the checkout, not in this graph): {}", absent.join(", ")));
    }
    for note in &notes {
        proof.push_str(&format!("; {note}"));
    }
    Ok(Built { binary, version, linked, proof })
}

/// The generated Cargo.toml: the adapter's manifest with `patched` in `[patch.crates-io]`.
fn write_manifest(project: &Path, manifest: &toml::Table, patched: &[Crate]) -> Result<()> {
    let mut manifest = manifest.clone();
    let mut patch = toml::Table::new();
    for c in patched {
        let mut entry = toml::Table::new();
        entry.insert("path".into(), c.dir.to_string_lossy().into_owned().into());
        patch.insert(c.name.clone(), entry.into());
    }
    let mut patches = toml::Table::new();
    patches.insert("crates-io".into(), patch.into());
    manifest.insert("patch".into(), patches.into());
    let text = toml::to_string(&manifest).step("write the generated Cargo.toml")?;
    write_if_changed(&project.join("Cargo.toml"), &format!("# Generated by nesquic --lut-path.\n{text}"))
}

/// quic-bins features named after a feature of the library's main crate (its qlog): on when the
/// checkout's crate has that feature, left out (the adapter compiles without that part and says
/// so) when the release predates it (quinn before 0.11.9).
const LIBRARY_FEATURES: &[&str] = &["qlog"];

/// The generated package's features: the recipe's and the library features the checkout has,
/// each forwarded to quic-bins and on by default, so `cfg(feature = ...)` in the adapter's
/// source reads the same here as in Nesquic's own workspace. Only those: cargo resolves a lock
/// with every feature of the package on, so a declared `qlog` would require quinn's. Returns the
/// library features left out.
fn adapter_features(manifest: &mut toml::Table, recipe: &[&str], main_crate: &Path) -> Vec<&'static str> {
    let declared = read_toml(&main_crate.join("Cargo.toml")).ok();
    let declared = declared.as_ref().and_then(|m| m.get("features")).and_then(|f| f.as_table());
    let (library, off): (Vec<&'static str>, Vec<&'static str>) =
        LIBRARY_FEATURES.iter().copied().partition(|f| declared.is_some_and(|t| t.contains_key(*f)));
    let on: Vec<&str> = recipe.iter().copied().chain(library).collect();
    let mut features = toml::Table::new();
    for f in &on {
        features.insert((*f).into(), vec![toml::Value::from(format!("nesquic-lut-bins/{f}"))].into());
    }
    features.insert("default".into(), on.iter().map(|f| toml::Value::from(*f)).collect::<Vec<_>>().into());
    manifest.insert("features".into(), features.into());
    off
}

/// The graph after [`resolve`], and what it found on the way.
struct Resolved {
    metadata: Metadata,
    /// Patched crates no package of the graph uses at all (name, the checkout's version).
    absent: Vec<(String, String)>,
    /// Registry copies cargo refused to move to the checkout, with its reason.
    refused: Vec<String>,
}

impl Resolved {
    /// `err` with the moves cargo refused (the cause of a second copy).
    fn explain(&self, err: EngineError) -> EngineError {
        if self.refused.is_empty() {
            return err;
        }
        EngineError::msg(format!("{err}; cargo refused to move the lock: {}", self.refused.join("; ")))
    }
}

/// Makes the lock use the checkout's crates, one copy of each: every registry copy of a patched
/// crate in the lock, older or newer than the checkout's (the lock's quinn-proto 0.11.19 beside
/// the 0.11.16 of quinn's 0.11.x branch: both meet `^0.11.15`, so cargo keeps the locked one for
/// the registry's dependents and the checkout's for its own path dependents), is moved to the
/// checkout's version with `cargo update -p NAME@VERSION --precise CHECKOUT_VERSION`, which only
/// the patch offers. A patch still unused afterwards is an error naming the requirement the
/// checkout does not meet, unless no package of the graph uses that crate at all (not the main
/// crate): then it is returned in `absent`.
fn resolve(cargo: &Cargo, patched: &[Crate]) -> Result<Resolved> {
    let mut metadata = cargo.metadata(false)?;
    let mut refused = Vec::new();
    let mut moved = false;
    for c in patched {
        let lock = cargo.lock()?;
        for (name, have, _) in lock_packages(&lock).into_iter().filter(|(n, _, reg)| *reg && *n == c.name) {
            let spec = format!("{name}@{have}");
            let result = match &c.version {
                Some(want) if *want == have => continue,
                Some(want) => {
                    eprintln!(
                        "nesquic: the lock holds the registry's {name} {have}: moving it to the checkout's {want}"
                    );
                    cargo.update(&["-p", &spec, "--precise", want])
                }
                // A version cargo knows but Nesquic could not read: unlocked, the patch is its candidate.
                None => cargo.update(&["-p", &spec]),
            };
            match result {
                Ok(()) => moved = true,
                Err(why) => {
                    refused.push(format!("{spec} -> {}: {why}", c.version.as_deref().unwrap_or("the checkout")))
                }
            }
        }
    }
    if moved {
        metadata = cargo.metadata(false)?;
    }
    let in_graph = graph_names(&metadata);
    let main = patched.first().map(|c| c.name.as_str()).unwrap_or_default();
    let (absent, unused): (Vec<_>, Vec<_>) =
        unused_patches(&cargo.lock()?).into_iter().partition(|(name, _)| name != main && !in_graph.contains(name));
    if unused.is_empty() {
        return Ok(Resolved { metadata, absent, refused });
    }
    let why: Vec<String> = unused
        .iter()
        .map(|(name, version)| {
            let wanted = requirements(&metadata, name);
            let wanted = if wanted.is_empty() { "nothing in the graph".into() } else { wanted.join(", ") };
            format!("the checkout's {name} {version} does not meet {wanted}{}", major_note(version, &metadata, name))
        })
        .collect();
    let refused = if refused.is_empty() { String::new() } else { format!("; cargo refused: {}", refused.join("; ")) };
    Err(EngineError::msg(format!(
        "cargo left the checkout unused, it would build the registry's code instead: {}{refused}",
        why.join("; ")
    )))
}

/// The names of the packages in the resolved graph.
fn graph_names(metadata: &Metadata) -> Vec<String> {
    let Some(resolve) = &metadata.resolve else { return Vec::new() };
    metadata.packages.iter().filter(|p| resolve.nodes.iter().any(|n| n.id == p.id)).map(|p| p.name.clone()).collect()
}

/// " (another major version: ...)" when `version` is semver-incompatible with every requirement
/// of `name` in the graph (an adapter written for that version is needed), else nothing.
fn major_note(version: &str, metadata: &Metadata, name: &str) -> String {
    let reqs: Vec<&str> = metadata
        .packages
        .iter()
        .flat_map(|p| &p.dependencies)
        .filter(|d| d.name == name)
        .map(|d| d.req.as_str())
        .collect();
    let other =
        !reqs.is_empty() && reqs.iter().all(|r| !same_major(version, r.trim_start_matches(['^', '=', '~', ' '])));
    if other {
        format!(" (another major version: an adapter written for {name} {version} is needed)")
    } else {
        String::new()
    }
}

/// Whether two versions are semver-compatible (same major; same minor below 1.0; same patch
/// below 0.1). A requirement (`^0.11.15`, `~1.2`, `>=0.11, <0.13`) is compared by its lower bound.
fn same_major(a: &str, b: &str) -> bool {
    fn key(v: &str) -> Vec<u64> {
        let v = v.trim_start_matches(['>', '<', '=', '^', '~', ' ']);
        let parts: Vec<u64> = v.split(['.', '-', '+', ',']).take(3).map_while(|p| p.trim().parse().ok()).collect();
        let significant = parts.iter().position(|n| *n != 0).unwrap_or(parts.len().saturating_sub(1));
        parts.into_iter().take(significant + 1).collect()
    }
    key(a) == key(b)
}

/// Proves the built graph: no unused patch, and every package of a patched crate's name comes
/// from the checkout's directory. Returns those packages, the main crate first.
fn verify(cargo: &Cargo, patched: &[Crate]) -> Result<Vec<LinkedComponent>> {
    let unused = unused_patches(&cargo.lock()?);
    if !unused.is_empty() {
        let names: Vec<String> = unused.iter().map(|(n, v)| format!("{n} {v}")).collect();
        return Err(EngineError::msg(format!("cargo left these patches unused: {}", names.join(", "))));
    }
    linked_from_checkout(&cargo.metadata(true)?, patched)
}

/// Every package of a patched crate's name in `metadata`'s graph, checked to come from the
/// checkout (a second copy from the registry, e.g. for a dependency that requires another
/// version, is an error naming that requirement).
fn linked_from_checkout(metadata: &Metadata, patched: &[Crate]) -> Result<Vec<LinkedComponent>> {
    let in_graph: Vec<&Package> = match &metadata.resolve {
        Some(resolve) => metadata.packages.iter().filter(|p| resolve.nodes.iter().any(|n| n.id == p.id)).collect(),
        None => Vec::new(),
    };
    let mut linked = Vec::new();
    for c in patched {
        let packages: Vec<&&Package> = in_graph.iter().filter(|p| p.name == c.name).collect();
        if packages.is_empty() {
            // Only the main crate must be there; another one this platform's graph does not use
            // (a crate of the checkout for another OS) is simply not linked.
            if patched.first().is_some_and(|m| m.name == c.name) {
                return Err(EngineError::msg(format!("cargo's resolved graph has no {} at all", c.name)));
            }
            continue;
        }
        for p in packages {
            let dir = p.manifest_path.parent().map(Path::to_path_buf).unwrap_or_default();
            let from_checkout = p.source.is_none() && dir.canonicalize().is_ok_and(|d| d == c.dir);
            if !from_checkout {
                let from = p.source.clone().unwrap_or_else(|| dir.display().to_string());
                let theirs = c.version.as_deref().unwrap_or("?");
                let major = if same_major(&p.version, theirs) {
                    String::new()
                } else {
                    format!("; the checkout's {theirs} is another major version: it needs an adapter written for it")
                };
                return Err(EngineError::msg(format!(
                    "cargo's graph holds {} {} from {from} beside the checkout's {theirs} at {} ({}{major})",
                    p.name,
                    p.version,
                    c.dir.display(),
                    requirements(metadata, &c.name).join(", ")
                )));
            }
            linked.push(LinkedComponent { name: p.name.clone(), version: p.version.clone(), path: c.dir.clone() });
        }
    }
    Ok(linked)
}

/// The manifest of a `lut-adapters/quic-bins` adapter built on its own, and the lock it starts
/// from (the main workspace's).
fn quic_bins_manifest(
    bins: &Path,
    executable: &str,
    source: &str,
    dependencies: &str,
) -> Result<(toml::Table, PathBuf)> {
    let bins = bins.canonicalize().with_step(|| format!("the LUT adapters ({}) are gone", bins.display()))?;
    let main = bins.join(source);
    // quic-bins' build script: the same version cfgs for the adapter's source built here.
    let build = bins.join("build.rs");
    // Features: `adapter_features`.
    let text = format!(
        "[package]\nname = \"{executable}-custom\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\
         build = {build:?}\n\n\
         [[bin]]\nname = \"{executable}\"\npath = {main:?}\n\n[dependencies]\n\
         nesquic-lut-bins = {{ path = {bins:?}, default-features = false }}\n{dependencies}\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n[workspace]\n"
    );
    let manifest =
        toml::from_str(&text).step("the generated Cargo.toml does not parse (a descriptor's dependencies)")?;
    // Invariant: quic-bins is lut-adapters/quic-bins, two levels under the repository.
    let repo = bins.ancestors().nth(2).unwrap_or(&bins);
    Ok((manifest, repo.join("Cargo.lock")))
}

/// The manifest of an adapter that is a workspace of its own, with its relative paths made
/// absolute, and its lock.
fn own_workspace_manifest(dir: &Path, executable: &str) -> Result<(toml::Table, PathBuf)> {
    let dir = dir.canonicalize().with_step(|| format!("the LUT adapter {} is gone", dir.display()))?;
    let mut manifest = read_toml(&dir.join("Cargo.toml"))?;
    // Tests are not built here; their dependencies need not resolve.
    manifest.remove("dev-dependencies");
    let absolute = |v: &mut toml::Value| {
        if let Some(path) = v.get("path").and_then(|p| p.as_str()) {
            let joined = dir.join(path);
            let path = joined.canonicalize().unwrap_or(joined).to_string_lossy().into_owned();
            if let Some(t) = v.as_table_mut() {
                t.insert("path".into(), path.into());
            }
        }
    };
    for section in ["dependencies", "build-dependencies"] {
        if let Some(deps) = manifest.get_mut(section).and_then(|d| d.as_table_mut()) {
            deps.iter_mut().for_each(|(_, v)| absolute(v));
        }
    }
    if let Some(targets) = manifest.get_mut("target").and_then(|t| t.as_table_mut()) {
        for target in targets.iter_mut().filter_map(|(_, t)| t.as_table_mut()) {
            for section in ["dependencies", "build-dependencies"] {
                if let Some(deps) = target.get_mut(section).and_then(|d| d.as_table_mut()) {
                    deps.iter_mut().for_each(|(_, v)| absolute(v));
                }
            }
        }
    }
    if let Some(package) = manifest.get_mut("package").and_then(|p| p.as_table_mut()) {
        if let Some(build) = package.get("build").and_then(|b| b.as_str()) {
            let build = dir.join(build).to_string_lossy().into_owned();
            package.insert("build".into(), build.into());
        }
    }
    let mut bin = toml::Table::new();
    bin.insert("name".into(), executable.into());
    bin.insert("path".into(), dir.join("src/main.rs").to_string_lossy().into_owned().into());
    if let Some(bins) = manifest.get_mut("bin").and_then(|b| b.as_array_mut()) {
        bins.iter_mut().for_each(absolute);
    } else {
        manifest.insert("bin".into(), vec![toml::Value::from(bin)].into());
    }
    Ok((manifest, dir.join("Cargo.lock")))
}

/// The adapter's own dependency on a patched crate asks for exactly the checkout's version, so a
/// pin such as msquic's `=2.5.1-beta` does not leave a newer checkout unused.
fn pin_direct_dependencies(manifest: &mut toml::Table, patched: &[Crate]) {
    let Some(deps) = manifest.get_mut("dependencies").and_then(|d| d.as_table_mut()) else {
        return;
    };
    for c in patched {
        let (Some(dep), Some(version)) = (deps.get_mut(&c.name), &c.version) else {
            continue;
        };
        let pinned = toml::Value::from(format!("={version}"));
        match dep.as_table_mut() {
            Some(t) => {
                t.insert("version".into(), pinned);
            }
            None => *dep = pinned,
        }
    }
}

/// Every crate of `names` in `checkout`: the checkout itself when it is one (e.g. unpacked from
/// the registry), or any directory up to three levels down in a workspace checkout (the
/// shallowest wins). The first of `names` must be there.
fn find_crates(checkout: &Path, names: &[&str]) -> Result<Vec<Crate>> {
    let mut found: Vec<Crate> = Vec::new();
    let mut level = vec![checkout.to_path_buf()];
    for _depth in 0..4 {
        let mut next = Vec::new();
        for dir in level {
            if let Some((name, version)) = package_of(&dir.join("Cargo.toml"), checkout) {
                if names.contains(&name.as_str()) && !found.iter().any(|c| c.name == name) {
                    found.push(Crate { name, dir: dir.clone(), version });
                }
            }
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            let mut subdirs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.') && e.file_name() != "target")
                .map(|e| e.path())
                .collect();
            subdirs.sort();
            next.extend(subdirs);
        }
        level = next;
    }
    let main = names.first().copied().unwrap_or_default();
    let Some(first) = found.iter().position(|c| c.name == main) else {
        return Err(EngineError::msg(format!(
            "{} holds no {main} crate (a Cargo.toml of package {main}, there or up to three directories down)",
            checkout.display()
        )));
    };
    found.swap(0, first);
    Ok(found)
}

/// A manifest's package name and version (a `version.workspace = true` from the nearest
/// workspace manifest inside `checkout`).
fn package_of(manifest: &Path, checkout: &Path) -> Option<(String, Option<String>)> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let toml: toml::Table = toml::from_str(&text).ok()?;
    let package = toml.get("package")?;
    let name = package.get("name")?.as_str()?.to_string();
    let version = match package.get("version") {
        Some(toml::Value::String(v)) => Some(v.clone()),
        Some(_) => manifest.ancestors().skip(2).take_while(|d| d.starts_with(checkout)).find_map(|d| {
            let text = std::fs::read_to_string(d.join("Cargo.toml")).ok()?;
            let toml: toml::Table = toml::from_str(&text).ok()?;
            toml.get("workspace")?.get("package")?.get("version")?.as_str().map(String::from)
        }),
        // Cargo's default for a manifest without one.
        None => Some("0.0.0".into()),
    };
    Some((name, version))
}

fn read_toml(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_step(|| format!("read {}", path.display()))?;
    toml::from_str(&text).with_step(|| format!("{} is not valid TOML", path.display()))
}

/// (name, version, from a registry) of every package in a Cargo.lock.
fn lock_packages(lock: &toml::Table) -> Vec<(String, String, bool)> {
    let packages = lock.get("package").and_then(|p| p.as_array()).map(Vec::as_slice).unwrap_or_default();
    packages
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?.to_string();
            let version = p.get("version")?.as_str()?.to_string();
            let registry = p.get("source").and_then(|s| s.as_str()).is_some_and(|s| s.starts_with("registry+"));
            Some((name, version, registry))
        })
        .collect()
}

/// The `[[patch.unused]]` entries cargo wrote into a lock: (name, version).
fn unused_patches(lock: &toml::Table) -> Vec<(String, String)> {
    let unused = lock.get("patch").and_then(|p| p.get("unused")).and_then(|u| u.as_array());
    unused
        .map(|u| {
            u.iter()
                .map(|p| {
                    let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
                    (field("name"), field("version"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What the graph's packages require of `name` ("quinn-proto requires quinn-udp ^0.5").
fn requirements(metadata: &Metadata, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in &metadata.packages {
        for d in p.dependencies.iter().filter(|d| d.name == name) {
            let text = format!("{} {}'s requirement {name} {}", p.name, p.version, d.req);
            if !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// Writes `text` unless the file already holds it (cargo then sees no change).
fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).with_step(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// Copies the built executable beside the project: by rename, so a run still using the previous
/// one keeps it (overwriting a running executable fails).
fn install(from: &Path, to: &Path) -> Result<()> {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).with_step(|| format!("copy the built adapter {}", from.display()))?;
    std::fs::rename(&tmp, to).with_step(|| format!("install {}", to.display()))
}

/// `cargo metadata --format-version 1`, the parts used.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    resolve: Option<Resolve>,
}

#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    name: String,
    version: String,
    /// `None` for a path dependency.
    source: Option<String>,
    manifest_path: PathBuf,
    dependencies: Vec<Dependency>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    name: String,
    req: String,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
}

/// Cargo run on the generated project, with the shared target directory.
struct Cargo {
    program: std::ffi::OsString,
    manifest: PathBuf,
    lock: PathBuf,
    target: PathBuf,
    /// `rustc -vV`'s host: `cargo metadata` then needs only this platform's crates (cached).
    host: String,
    /// The checkout's crates as `NAME=VERSION`, given to the build scripts as `LIBRARY_ENV`.
    library: Vec<String>,
}

/// The library's crates and versions in a `--lut-path` build (`quinn=0.12.0 quinn-proto=0.12.0`):
/// the adapters' build scripts derive their version cfgs from it; unset in Nesquic's workspace.
const LIBRARY_ENV: &str = "NESQUIC_LUT_CRATES";

impl Cargo {
    fn new(project: &Path, repo: &Path) -> Result<Self> {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let out = Command::new(rustc).arg("-vV").tethered_output().step("run rustc -vV (is Rust installed?)")?;
        let info = String::from_utf8_lossy(&out.stdout);
        let host = info.lines().find_map(|l| l.strip_prefix("host: ")).unwrap_or_default().trim().to_string();
        Ok(Self {
            program: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            manifest: project.join("Cargo.toml"),
            lock: project.join("Cargo.lock"),
            target: repo.join("target").join("lut-builds").join("target"),
            host,
            library: Vec::new(),
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.program);
        c.args(args).arg("--manifest-path").arg(&self.manifest).env("CARGO_TARGET_DIR", &self.target);
        c.env(LIBRARY_ENV, self.library.join(" "));
        c
    }

    /// `cargo update ARGS`, offline first: on failure, cargo's reason (its last error lines).
    fn update(&self, args: &[&str]) -> Result<(), String> {
        let mut last = String::new();
        for offline in [true, false] {
            let mut all = vec!["update"];
            all.extend_from_slice(args);
            let mut c = self.command(&all);
            if offline {
                c.arg("--offline");
            }
            let out = c.tethered_output().map_err(|e| format!("cannot run cargo: {e}"))?;
            if out.status.success() {
                return Ok(());
            }
            let err = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = err.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            last = lines[lines.len().saturating_sub(6)..].join(" ");
        }
        Err(last)
    }

    fn lock(&self) -> Result<toml::Table> {
        read_toml(&self.lock)
    }

    /// Runs `args` offline (most crates are cached; registries may be unreachable), and online
    /// when that fails: its stdout; the online attempt's errors reach the user.
    fn offline_first(&self, args: &[&str], what: &str) -> Result<Vec<u8>> {
        let mut offline = self.command(args);
        offline.arg("--offline");
        let out = offline.tethered_output().with_step(|| format!("run {what} (is Rust installed?)"))?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let out = self
            .command(args)
            .stderr(Stdio::inherit())
            .tethered_output()
            .with_step(|| format!("run {what} (is Rust installed?)"))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(EngineError::msg(format!("{what} failed ({}; cargo's errors are above)", out.status)))
        }
    }

    /// The resolved graph (`locked`: the lock must not change).
    fn metadata(&self, locked: bool) -> Result<Metadata> {
        let mut args = vec!["metadata", "--format-version", "1"];
        if !self.host.is_empty() {
            args.extend(["--filter-platform", self.host.as_str()]);
        }
        if locked {
            args.push("--locked");
        }
        let stdout = self.offline_first(&args, "cargo metadata")?;
        serde_json::from_slice(&stdout).step("cargo metadata printed no graph")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn unused_patches_and_locked_packages_come_from_the_lock() {
        let lock: toml::Table = toml::from_str(
            "version = 4\n[[package]]\nname = \"quinn\"\nversion = \"0.11.12\"\n\
             source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
             [[package]]\nname = \"quinn-udp\"\nversion = \"0.5.16\"\n\
             [[patch.unused]]\nname = \"quinn\"\nversion = \"0.11.11\"\n",
        )
        .unwrap();
        assert_eq!(unused_patches(&lock), [("quinn".to_string(), "0.11.11".to_string())]);
        assert_eq!(
            lock_packages(&lock),
            [
                ("quinn".to_string(), "0.11.12".to_string(), true),
                ("quinn-udp".to_string(), "0.5.16".to_string(), false)
            ]
        );
        assert!(unused_patches(&toml::from_str("version = 4\n").unwrap()).is_empty());
    }

    #[test]
    fn crates_are_found_in_a_workspace_with_inherited_versions() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            &root.join("Cargo.toml"),
            "[workspace]\nmembers = [\"quinn\", \"deep/a/quinn-udp\"]\n[workspace.package]\nversion = \"0.12.0-dev\"\n",
        );
        write(&root.join("quinn/Cargo.toml"), "[package]\nname = \"quinn\"\nversion.workspace = true\n");
        write(&root.join("deep/a/quinn-udp/Cargo.toml"), "[package]\nname = \"quinn-udp\"\nversion = \"0.6.0\"\n");
        // Past three levels down, and in target/: not looked at.
        write(&root.join("a/b/c/d/quinn-proto/Cargo.toml"), "[package]\nname = \"quinn-proto\"\nversion = \"1.0.0\"\n");
        write(&root.join("target/quinn-proto/Cargo.toml"), "[package]\nname = \"quinn-proto\"\nversion = \"1.0.0\"\n");
        let found = find_crates(root, &["quinn", "quinn-proto", "quinn-udp"]).unwrap();
        let found: Vec<(&str, Option<&str>)> = found.iter().map(|c| (c.name.as_str(), c.version.as_deref())).collect();
        assert_eq!(found, [("quinn", Some("0.12.0-dev")), ("quinn-udp", Some("0.6.0"))]);
        let err = find_crates(&root.join("deep"), &["quinn"]).err().unwrap().to_string();
        assert!(err.contains("holds no quinn crate"), "{err}");
    }

    #[test]
    fn versions_are_compared_by_their_semver_compatible_range() {
        assert!(same_major("0.11.16", "0.11.19"));
        assert!(same_major("0.11.16", "^0.11.15"));
        assert!(same_major("0.11.0", ">=0.11, <0.13"));
        assert!(!same_major("0.12.0", "0.11.12"));
        assert!(same_major("1.88.0", "1.91.0"));
        assert!(!same_major("2.0.0", "1.91.0"));
        assert!(!same_major("0.0.3", "0.0.4"));
        assert!(same_major("0.12.0-dev", "0.12.0"));
    }

    #[test]
    fn a_library_feature_is_declared_only_when_the_checkout_has_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
        write(&old.join("Cargo.toml"), "[package]\nname = \"quinn\"\n[features]\nlog = []\n");
        write(&new.join("Cargo.toml"), "[package]\nname = \"quinn\"\n[features]\nqlog = [\"proto/qlog\"]\n");
        let mut manifest = toml::Table::new();
        assert_eq!(adapter_features(&mut manifest, &["quiche"], &old), ["qlog"]);
        let features = manifest["features"].as_table().unwrap();
        let mut keys: Vec<&String> = features.keys().collect();
        keys.sort();
        assert_eq!(keys, ["default", "quiche"]);
        assert_eq!(features["quiche"][0].as_str(), Some("nesquic-lut-bins/quiche"));
        assert!(adapter_features(&mut manifest, &[], &new).is_empty());
        let features = manifest["features"].as_table().unwrap();
        assert_eq!(features["default"][0].as_str(), Some("qlog"));
        assert_eq!(features["qlog"][0].as_str(), Some("nesquic-lut-bins/qlog"));
    }

    #[test]
    fn the_adapters_own_dependency_asks_for_the_checkouts_version() {
        let mut manifest: toml::Table = toml::from_str(
            "[dependencies]\nmsquic = { version = \"=2.5.1-beta\", features = [\"src\"] }\nquinn = \"0.11\"\nanyhow = \"1\"\n",
        )
        .unwrap();
        let c =
            |name: &str, version: &str| Crate { name: name.into(), dir: PathBuf::new(), version: Some(version.into()) };
        pin_direct_dependencies(&mut manifest, &[c("msquic", "2.6.0"), c("quinn", "0.11.11")]);
        let deps = &manifest["dependencies"];
        assert_eq!(deps["msquic"]["version"].as_str(), Some("=2.6.0"));
        assert_eq!(deps["msquic"]["features"][0].as_str(), Some("src"));
        assert_eq!(deps["quinn"].as_str(), Some("=0.11.11"));
        assert_eq!(deps["anyhow"].as_str(), Some("1"));
    }
}
