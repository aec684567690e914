//! `--lut-path PATH` and `--lut-rev REV`: build a LUT's adapter against a local checkout of its
//! library (or one commit of it), and prove that the build linked the checkout's code, not the
//! registry's or the pinned copy: a run must never measure other code than the one it names.
//!
//! Rust LUTs get a generated cargo project with `[patch.crates-io]` (`cargo`); other stacks run
//! their LUT's build script (`script`). Everything lives under `target/lut-builds/`: one project
//! per (LUT, checkout, revision), one cargo target directory shared by all of them (each crate
//! compiled once per source), and the git worktrees of `--lut-rev` (`git`). A stack's own interop
//! endpoint is built by its recipe's steps (`endpoint`).

mod cargo;
pub mod endpoint;
mod git;
mod release;
mod script;

pub use script::ScriptReport;

use std::path::{Path, PathBuf};

use nesquic_lut_adapters::descriptor::SourceBuild;
use nesquic_lut_adapters::{Lut, LutError};
use nesquic_record::run::{LinkedComponent, LutSource};

use crate::error::StepExt;
use crate::EngineError;

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// The Nesquic source tree this binary was built from (`--lut-path` builds need its adapters).
const REPO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A LUT whose executable was built against a local checkout.
pub struct CustomBuild {
    inner: Box<dyn Lut>,
    binary: PathBuf,
    version: String,
    /// Where it came from and what proved it (recorded with the run).
    pub source: LutSource,
}

/// What a build produced and proved, whichever tool built it.
struct Built {
    binary: PathBuf,
    /// The library's version as linked (its main crate or package).
    version: String,
    linked: Vec<LinkedComponent>,
    proof: String,
}

/// Builds `lut`'s adapter against the library at `path`, at commit `rev` when given (checked
/// out into a worktree Nesquic manages; without it, the directory as it is, changes included).
pub fn build(lut: Box<dyn Lut>, path: &Path, rev: Option<&str>) -> Result<CustomBuild> {
    build_from(lut, path, rev, None)
}

/// Builds `lut`'s adapter against its published release `version`, fetched from the registry
/// its descriptor names into a checkout-shaped tree (once), then built as a checkout.
pub fn build_release(lut: Box<dyn Lut>, version: &str) -> Result<CustomBuild> {
    let repo = nesquic_tree()?;
    let releases = repo.join("target").join("lut-builds").join("releases");
    std::fs::create_dir_all(&releases).with_step(|| format!("create {}", releases.display()))?;
    // One fetch of a release at a time: a second run waits, then finds it fetched.
    let _lock = lock(&releases.join(format!(".{}-{}.lock", lut.name(), version.replace('/', "_"))))?;
    let fetched = release::fetch(lut.descriptor(), version, &releases, &repo.join("lut-adapters"))
        .map_err(|e| EngineError::Step { what: format!("--lut-version {version}"), source: Box::new(e) })?;
    build_from(lut, &fetched.tree, None, Some(fetched.release))
}

/// The Nesquic source tree this binary was built from (builds from source need its adapters).
fn nesquic_tree() -> Result<PathBuf> {
    Path::new(REPO_DIR).canonicalize().ok().filter(|r| r.join("lut-adapters").is_dir()).ok_or_else(|| {
        EngineError::msg(format!(
            "--lut-path and --lut-version need the Nesquic source tree this nesquic was built from ({REPO_DIR} is gone)"
        ))
    })
}

fn build_from(
    lut: Box<dyn Lut>,
    path: &Path,
    rev: Option<&str>,
    release: Option<nesquic_record::events::LutRelease>,
) -> Result<CustomBuild> {
    let name = lut.name();
    let Some(recipe) = lut.descriptor().source_build else {
        return Err(EngineError::msg(format!(
            "--lut-path: {name} cannot be built from a checkout (use --lut exec with your own commands)"
        )));
    };
    let given = path.canonicalize().with_step(|| format!("--lut-path {}: no such directory", path.display()))?;
    if !given.is_dir() {
        return Err(EngineError::msg(format!("--lut-path {}: not a directory", given.display())));
    }
    let repo = nesquic_tree()?;
    let builds = repo.join("target").join("lut-builds");
    let (checkout, mut source) = match rev {
        Some(rev) => {
            let tree = git::worktree(&given, rev, &builds.join("worktrees"))?;
            let state = git::state(&tree.checkout);
            let source = LutSource {
                path: given,
                revision: tree.commit,
                dirty: state.dirty,
                requested_rev: Some(rev.to_string()),
                worktree: Some(tree.root),
                linked: Vec::new(),
                proof: String::new(),
                release: None,
            };
            (tree.checkout, source)
        }
        None => {
            let state = git::state(&given);
            let source = LutSource {
                path: given.clone(),
                revision: state.revision,
                dirty: state.dirty,
                requested_rev: None,
                worktree: None,
                linked: Vec::new(),
                proof: String::new(),
                release: None,
            };
            (given, source)
        }
    };
    // One project per (LUT, checkout, revision): each commit is built once; a dirty tree
    // shares its commit's project, where cargo's own change check rebuilds what changed.
    let key = fnv1a(format!("{name}\0{}\0{}", checkout.display(), source.revision).as_bytes());
    let project = builds.join(format!("{name}-{key:016x}"));
    std::fs::create_dir_all(&project).with_step(|| format!("create {}", project.display()))?;
    // Two runs building one project at once would overwrite each other's files mid-build.
    let _lock = lock(&project.join(".nesquic-build.lock"))?;
    eprintln!("nesquic: building the {name} adapter against {} ...", source.describe());
    let built = match recipe {
        SourceBuild::Cargo(cargo) => cargo::build(cargo, lut.descriptor(), &checkout, &repo, &project),
        SourceBuild::Script(script) => {
            script::build(&repo.join("lut-adapters").join(script), name, &checkout, &project)
        }
    }
    .map_err(|e| EngineError::Step {
        what: format!("building the {name} adapter against {} failed", checkout.display()),
        source: Box::new(e),
    })?;
    source.linked = built.linked;
    source.proof = built.proof;
    source.release = release;
    eprintln!("nesquic: {name} from the checkout: {}", source.proof);
    Ok(CustomBuild { inner: lut, binary: built.binary, version: built.version, source })
}

/// Holds an exclusive lock on `path` (created if missing) until the file is dropped; says so
/// when another run holds it, then waits.
fn lock(path: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_step(|| format!("open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!("nesquic: another run is building here ({}): waiting for it", path.display());
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(EngineError::Os { what: format!("lock {}", path.display()), source: e });
        }
    }
    file.lock().with_step(|| format!("lock {}", path.display()))?;
    Ok(file)
}

/// FNV-1a: a stable short key (std's hasher is randomly seeded).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

impl Lut for CustomBuild {
    fn descriptor(&self) -> &'static nesquic_lut_adapters::Descriptor {
        self.inner.descriptor()
    }
    fn version(&self) -> String {
        let s = &self.source;
        if let Some(r) = &s.release {
            return format!("{} (release from {})", self.version, r.registry);
        }
        if !s.is_commit() {
            return format!("{} (from {})", self.version, s.path.display());
        }
        let dirty = if s.dirty { " plus changes" } else { "" };
        format!("{} (from {} at {}{dirty})", self.version, s.path.display(), &s.revision[..12])
    }
    fn binary_path(&self, _dir: &Path) -> Result<PathBuf, LutError> {
        Ok(self.binary.clone())
    }
}
