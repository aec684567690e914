//! What git says about a checkout (revision, uncommitted changes) and the worktrees `--lut-rev`
//! builds from.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{fnv1a, Result};
use crate::error::StepExt;
use crate::tether::Tethered;
use crate::EngineError;

/// A checkout's revision, as recorded.
pub(super) struct State {
    /// `git rev-parse HEAD`, or why there is none.
    pub revision: String,
    /// `git status --porcelain` (this directory only) listed something.
    pub dirty: bool,
}

/// Runs git in `dir`: its trimmed stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .tethered_output()
        .map_err(|e| format!("cannot run git ({e}); is it installed?"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Whether `dir` is part of a git checkout (a directory a surrounding repository ignores, such as
/// one under its `target/`, is not: that repository's revision says nothing about it).
fn in_repository(dir: &Path) -> bool {
    git(dir, &["rev-parse", "--show-toplevel"]).is_ok() && git(dir, &["check-ignore", "-q", "."]).is_err()
}

/// The revision of `dir` and whether it has uncommitted changes.
pub(super) fn state(dir: &Path) -> State {
    if !in_repository(dir) {
        return State { revision: "not a git checkout".into(), dirty: false };
    }
    let revision = git(dir, &["rev-parse", "HEAD"]).unwrap_or_else(|e| format!("no commit ({e})"));
    // Untracked files count: a new source file changes what builds.
    let dirty =
        git(dir, &["status", "--porcelain", "--untracked-files=normal", "--", "."]).map_or(true, |s| !s.is_empty());
    State { revision, dirty }
}

/// One commit checked out for `--lut-rev`.
pub(super) struct Worktree {
    /// The worktree's root.
    pub root: PathBuf,
    /// The checkout to build in it (the same subdirectory `--lut-path` named in the repository).
    pub checkout: PathBuf,
    /// The full commit hash.
    pub commit: String,
}

/// Checks out `rev` of the repository holding `path` into a worktree under `under` (once per
/// commit: an existing one at that commit is reused).
pub(super) fn worktree(path: &Path, rev: &str, under: &Path) -> Result<Worktree> {
    let top = git(path, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        EngineError::msg(format!("--lut-rev needs --lut-path to be a git repository; {} is not ({e})", path.display()))
    })?;
    if rev.starts_with('-') || rev.is_empty() {
        return Err(EngineError::msg(format!("--lut-rev {rev:?}: not a revision")));
    }
    let prefix = git(path, &["rev-parse", "--show-prefix"]).map_err(EngineError::msg)?;
    let commit = git(path, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")]).map_err(|_| {
        EngineError::msg(format!(
            "--lut-rev {rev}: no such commit in {top} (a branch, tag or hash it has; fetch it first?)"
        ))
    })?;
    let root = under.join(format!("{:016x}-{}", fnv1a(top.as_bytes()), &commit[..commit.len().min(12)]));
    let checkout = root.join(&prefix);
    if git(&root, &["rev-parse", "HEAD"]).is_ok_and(|head| head == commit) {
        eprintln!("nesquic: --lut-rev {rev}: commit {commit} already checked out in {}", root.display());
        return Ok(Worktree { root, checkout, commit });
    }
    if root.exists() {
        // A leftover of an interrupted checkout, in Nesquic's own build directory.
        std::fs::remove_dir_all(&root).with_step(|| format!("remove the stale worktree {}", root.display()))?;
    }
    std::fs::create_dir_all(under).with_step(|| format!("create {}", under.display()))?;
    let top = Path::new(&top);
    // Forget worktrees whose directory is gone (e.g. after `cargo clean`), or `add` refuses.
    git(top, &["worktree", "prune"])
        .map_err(|e| EngineError::msg(format!("git worktree prune in {}: {e}", top.display())))?;
    eprintln!("nesquic: --lut-rev {rev}: checking out commit {commit} into {}", root.display());
    let root_arg = root.to_string_lossy();
    git(top, &["worktree", "add", "--detach", "--quiet", &root_arg, &commit])
        .map_err(|e| EngineError::msg(format!("git worktree add {} {commit}: {e}", root.display())))?;
    if top.join(".gitmodules").exists() {
        git(&root, &["submodule", "update", "--init", "--recursive", "--quiet"]).map_err(|e| {
            EngineError::msg(format!("--lut-rev {rev}: the submodules of {} did not check out: {e}", top.display()))
        })?;
    }
    Ok(Worktree { root, checkout, commit })
}
