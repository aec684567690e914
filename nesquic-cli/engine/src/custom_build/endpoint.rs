//! A stack's own interop endpoint built from its checkout by its recipe's steps
//! (`lut-adapters/endpoints/NAME.toml`): the tools and Debian packages it names checked first
//! (a missing one is named with the command that installs it), the checkouts it needs besides
//! the stack's (`--lut-dep NAME=PATH`, a TLS library), then each step in the checkout with its
//! output shown. The programs land in one directory per (recipe, checkout, revision) under
//! `target/lut-builds/`, where the build tools' own change checks make a second build quick.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nesquic_lut_adapters::endpoint::{recipe, EndpointLut, Program, Recipe};
use nesquic_lut_adapters::LutError;
use nesquic_record::run::{LinkedComponent, LutSource};

use super::{fnv1a, git, lock, nesquic_tree, Result};
use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// The endpoint's programs, built, and where they came from.
pub struct EndpointBuild {
    /// Starts them.
    pub lut: EndpointLut,
    /// The checkout, its revision, and the programs built.
    pub source: LutSource,
}

/// Builds `recipe`'s server and client from the checkout at `path` (at `rev` when given),
/// with the other checkouts it needs in `deps` (`NAME`, path).
pub fn build(recipe: Recipe, path: &Path, rev: Option<&str>, deps: &[(String, PathBuf)]) -> Result<EndpointBuild> {
    let name = recipe.name.clone();
    let given = path.canonicalize().with_step(|| format!("--lut-path {}: no such directory", path.display()))?;
    if !given.is_dir() {
        return Err(EngineError::msg(format!("--lut-path {}: not a directory", given.display())));
    }
    check_tools(&recipe)?;
    let dep_vars = dependency_vars(&recipe, deps)?;
    let repo = nesquic_tree()?;
    let builds = repo.join("target").join("lut-builds");
    let (checkout, mut source) = match rev {
        Some(rev) => {
            let tree = git::worktree(&given, rev, &builds.join("worktrees"))?;
            let dirty = git::state(&tree.checkout).dirty;
            let source = source(given, tree.commit, dirty, Some(rev.to_string()), Some(tree.root));
            (tree.checkout, source)
        }
        None => {
            let state = git::state(&given);
            (given.clone(), source(given, state.revision, state.dirty, None, None))
        }
    };
    let key = fnv1a(format!("endpoint\0{name}\0{}\0{}", checkout.display(), source.revision).as_bytes());
    let out = builds.join(format!("endpoint-{name}-{key:016x}"));
    std::fs::create_dir_all(&out).with_step(|| format!("create {}", out.display()))?;
    let _lock = lock(&out.join(".nesquic-build.lock"))?;
    eprintln!("nesquic: building {name}'s own endpoint from {} ...", source.describe());
    let mut vars = dep_vars;
    vars.insert("checkout".into(), checkout.display().to_string());
    vars.insert("out".into(), out.display().to_string());
    let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    vars.insert("jobs".into(), jobs.to_string());
    for step in &recipe.build.steps {
        run_step(&name, &recipe::expand(step, &vars).map_err(LutError::from)?, &checkout)?;
    }
    let version = match source.is_commit() {
        true => {
            format!("endpoint from {} at {}", source.path.display(), &source.revision[..12.min(source.revision.len())])
        }
        false => format!("endpoint from {}", source.path.display()),
    };
    let lut = EndpointLut::new(recipe, checkout.clone(), out, version);
    let programs = [Program::Server, Program::Client].map(|p| lut.program(p));
    let [server, client] = programs;
    let (server, client) = (server?, client?);
    source.linked = vec![LinkedComponent { name: name.clone(), version: source.revision.clone(), path: checkout }];
    source.proof = format!(
        "{name}'s own endpoint built from the checkout by its recipe's steps: server {}, client {}",
        server.display(),
        client.display()
    );
    Ok(EndpointBuild { lut, source })
}

fn source(path: PathBuf, revision: String, dirty: bool, rev: Option<String>, worktree: Option<PathBuf>) -> LutSource {
    LutSource {
        path,
        revision,
        dirty,
        requested_rev: rev,
        worktree,
        linked: Vec::new(),
        proof: String::new(),
        release: None,
    }
}

/// Every tool on PATH and every Debian package installed, or one error naming what is missing.
fn check_tools(recipe: &Recipe) -> Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing_tools: Vec<&str> = recipe
        .build
        .tools
        .iter()
        .filter(|t| !std::env::split_paths(&path).any(|d| d.join(t).is_file()))
        .map(String::as_str)
        .collect();
    let missing_packages: Vec<&str> =
        recipe.build.debian.iter().filter(|p| !debian_installed(p)).map(String::as_str).collect();
    let mut why = Vec::new();
    if !missing_tools.is_empty() {
        why.push(format!("{} not on PATH", missing_tools.join(", ")));
    }
    if !missing_packages.is_empty() {
        why.push(format!("Debian packages missing: apt-get install {}", missing_packages.join(" ")));
    }
    match why.is_empty() {
        true => Ok(()),
        false => Err(EngineError::msg(format!("{}'s endpoint recipe needs: {}", recipe.name, why.join("; ")))),
    }
}

/// `dpkg-query` says the package is installed (no dpkg: not Debian, the build will tell).
fn debian_installed(package: &str) -> bool {
    match Command::new("dpkg-query").args(["-W", "-f=${Status}", package]).tethered_output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).contains("install ok installed"),
        Err(_) => true,
    }
}

/// `{dep.NAME}` for each checkout the recipe needs; each must be given, and nothing else.
fn dependency_vars(recipe: &Recipe, deps: &[(String, PathBuf)]) -> Result<BTreeMap<String, String>> {
    let mut vars = BTreeMap::new();
    for (name, path) in deps {
        if !recipe.build.checkouts.iter().any(|c| &c.name == name) {
            return Err(EngineError::msg(format!(
                "--lut-dep {name}: {}'s endpoint needs no such checkout",
                recipe.name
            )));
        }
        let canonical =
            path.canonicalize().with_step(|| format!("--lut-dep {name}={}: no such directory", path.display()))?;
        vars.insert(format!("dep.{name}"), canonical.display().to_string());
    }
    for c in &recipe.build.checkouts {
        if !vars.contains_key(&format!("dep.{}", c.name)) {
            return Err(EngineError::msg(format!(
                "{}'s endpoint is built with a checkout of {} ({}): give it as --lut-dep {}=PATH",
                recipe.name, c.name, c.repository, c.name
            )));
        }
    }
    Ok(vars)
}

/// One build step under `sh -c` in the checkout; its output goes to nesquic's stderr.
fn run_step(name: &str, step: &str, checkout: &Path) -> Result<()> {
    eprintln!("nesquic: {name}: {step}");
    let status = Command::new("/bin/sh")
        .args(["-c", step])
        .current_dir(checkout)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .tethered_status()
        .with_step(|| format!("run {step:?}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(EngineError::msg(format!(
            "building {name}'s endpoint: {step:?} failed ({status}; its output is above)"
        ))),
    }
}
