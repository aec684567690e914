//! `nesquic bisect`: the first commit between a good and a bad one of a LUT's repository that
//! regresses. Each step is a paired A/B job (`ab`) of the midpoint against the good commit,
//! judged by the gate (`nesquic_record::compare`); a step the gate cannot decide takes more
//! rounds before it decides (Chromium Pinpoint's UNKNOWN), up to a cap at which the search stops
//! and names the range the culprit lies in: counting an undecided step as good or bad would
//! name a wrong commit. The search assumes one change: commits before it are good, from it on
//! bad. Builds are the `--lut-rev` builds of `custom_build`, cached by revision.

use std::path::Path;
use std::process::Command;

use nesquic_record::compare::{Row, Rule, Verdict};

use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// What one step's A/B job said of its commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepVerdict {
    /// Worse than the good commit beyond the limit: the change is at or before it.
    Regressed,
    /// Within the limit: the change is after it.
    Fine,
    /// Neither, yet: more rounds.
    Inconclusive,
}

/// One step as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The commit measured against the good one.
    pub commit: String,
    /// Rounds of its last A/B job.
    pub rounds: u32,
    /// What it said (an inconclusive step at the cap ends the search).
    pub verdict: StepVerdict,
    /// The gate's headline or the rows that decided.
    pub detail: String,
}

/// Where the first regressing commit is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Culprit {
    /// This commit: every step decided.
    Commit(String),
    /// After `good`, up to and including `bad` (the last commits the steps decided): the step
    /// at `undecided` was still inconclusive at the most rounds allowed.
    Between {
        /// The last commit measured fine (or the given good one).
        good: String,
        /// The first commit known to regress (or the given bad one).
        bad: String,
        /// The commit no step could decide.
        undecided: String,
    },
}

/// What a bisection found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The first bad commit, or the range it lies in.
    pub culprit: Culprit,
    /// Every A/B job, in order (a step that took more rounds appears once per job).
    pub steps: Vec<Step>,
    /// Commits built: the good one and each midpoint (the bad one is taken as given).
    pub built: Vec<String>,
}

/// Rounds per step: the first job's, and the cap an inconclusive step may grow to (doubling).
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    /// Rounds of a step's first job.
    pub first: u32,
    /// Most rounds a step's job may have.
    pub max: u32,
}

/// `good`, then every commit after it up to `bad` in order (`git rev-list --ancestry-path
/// --first-parent`), as full hashes.
pub fn commits_between(repo: &Path, good: &str, bad: &str) -> Result<Vec<String>> {
    let git = |args: &[&str]| -> Result<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .map_err(|e| EngineError::msg(format!("cannot run git in {} ({e})", repo.display())))?;
        if !out.status.success() {
            return Err(EngineError::msg(format!(
                "git {} in {}: {}",
                args.join(" "),
                repo.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let good_hash = git(&["rev-parse", "--verify", &format!("{good}^{{commit}}")])?;
    let bad_hash = git(&["rev-parse", "--verify", &format!("{bad}^{{commit}}")])?;
    let range = format!("{good_hash}..{bad_hash}");
    let after = git(&["rev-list", "--reverse", "--first-parent", "--ancestry-path", &range])?;
    let mut commits = vec![good_hash];
    commits.extend(after.lines().map(str::to_string));
    if commits.len() < 2 {
        return Err(EngineError::msg(format!(
            "--bad {bad} is not a descendant of --good {good} (no commit between them to bisect)"
        )));
    }
    Ok(commits)
}

/// A step's verdict from the gate's rows: with rules, only the rows they name decide; without,
/// the rows that gate by default. A regression decides; else an inconclusive deciding row asks
/// for more rounds.
pub fn step_verdict(rows: &[Row], rules: &[Rule]) -> (StepVerdict, String) {
    let deciding: Vec<&Row> = rows
        .iter()
        .filter(|r| if rules.is_empty() { r.gates } else { rules.iter().any(|x| x.names(&r.metric)) })
        .collect();
    let list = |v: Verdict| -> Vec<String> {
        deciding
            .iter()
            .filter(|r| r.verdict == v)
            .map(|r| format!("{} {}", r.metric, nesquic_record::compare::format_change_pct(r.change_pct, 1)))
            .collect()
    };
    let (regressed, unsure) = (list(Verdict::Regression), list(Verdict::Inconclusive));
    if !regressed.is_empty() {
        (StepVerdict::Regressed, format!("regression: {}", regressed.join(", ")))
    } else if !unsure.is_empty() {
        (StepVerdict::Inconclusive, format!("inconclusive: {}", unsure.join(", ")))
    } else {
        (StepVerdict::Fine, format!("within the limits ({} figures judged)", deciding.len()))
    }
}

/// Bisects `commits` (good first, bad last): `measure(commit, rounds)` runs a paired A/B job of
/// `commit` against `commits[0]` and says what it found; `report` sees each step as it ends.
/// The measurement's own errors pass through (the caller's error type, which takes the engine's).
pub fn bisect<E: From<EngineError>>(
    commits: &[String],
    rounds: Rounds,
    mut measure: impl FnMut(&str, u32) -> std::result::Result<(StepVerdict, String), E>,
    mut report: impl FnMut(&Step),
) -> std::result::Result<Found, E> {
    if commits.len() < 2 {
        return Err(EngineError::msg("bisect needs a good and a later bad commit").into());
    }
    if rounds.first < 2 || rounds.max < rounds.first {
        return Err(EngineError::msg(format!(
            "rounds {} up to {}: give at least 2, and a cap no smaller",
            rounds.first, rounds.max
        ))
        .into());
    }
    let (mut good, mut bad) = (0, commits.len() - 1);
    let mut steps = Vec::new();
    let mut built = vec![commits[0].clone()];
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        let commit = &commits[mid];
        built.push(commit.clone());
        let mut n = rounds.first;
        let verdict = loop {
            let (verdict, detail) = measure(commit, n)?;
            let step = Step { commit: commit.clone(), rounds: n, verdict, detail };
            report(&step);
            steps.push(step);
            if verdict != StepVerdict::Inconclusive || n >= rounds.max {
                break verdict;
            }
            n = (n * 2).min(rounds.max);
        };
        match verdict {
            StepVerdict::Regressed => bad = mid,
            StepVerdict::Fine => good = mid,
            StepVerdict::Inconclusive => {
                let culprit = Culprit::Between {
                    good: commits[good].clone(),
                    bad: commits[bad].clone(),
                    undecided: commit.clone(),
                };
                return Ok(Found { culprit, steps, built });
            }
        }
    }
    Ok(Found { culprit: Culprit::Commit(commits[bad].clone()), steps, built })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(n: usize) -> Vec<String> {
        (0..=n).map(|i| format!("c{i:02}")).collect()
    }

    /// A measurement that knows the answer: commits from `culprit` on are worse; a step is
    /// inconclusive below `sure_at` rounds.
    fn oracle(culprit: usize, sure_at: u32) -> impl FnMut(&str, u32) -> Result<(StepVerdict, String)> {
        undecidable_at(culprit, sure_at, usize::MAX)
    }

    /// As [`oracle`], and the commit at `undecidable` never decides (a change at the limit).
    fn undecidable_at(
        culprit: usize,
        sure_at: u32,
        undecidable: usize,
    ) -> impl FnMut(&str, u32) -> Result<(StepVerdict, String)> {
        move |commit, rounds| {
            let index: usize = commit[1..].parse().expect("cNN");
            let verdict = if rounds < sure_at || index == undecidable {
                StepVerdict::Inconclusive
            } else if index >= culprit {
                StepVerdict::Regressed
            } else {
                StepVerdict::Fine
            };
            Ok((verdict, String::new()))
        }
    }

    #[test]
    fn finds_every_culprit_of_sixteen_commits_in_five_builds() {
        let commits = history(16);
        for culprit in 1..=16 {
            let found = bisect(&commits, Rounds { first: 3, max: 24 }, oracle(culprit, 3), |_| {}).expect("bisect");
            assert_eq!(found.culprit, Culprit::Commit(commits[culprit].clone()), "culprit {culprit}");
            assert!(found.built.len() <= 5, "culprit {culprit}: built {:?}", found.built);
            assert_eq!(found.steps.len(), 4);
        }
    }

    #[test]
    fn an_inconclusive_step_takes_more_rounds_before_it_decides() {
        let commits = history(16);
        let mut seen = Vec::new();
        let found =
            bisect(&commits, Rounds { first: 3, max: 24 }, oracle(11, 10), |s| seen.push((s.rounds, s.verdict)))
                .expect("bisect");
        assert_eq!(found.culprit, Culprit::Commit("c11".into()));
        // 3 and 6 rounds were not enough, 12 were, at every step; builds stay one per commit.
        assert_eq!(
            &seen[..3],
            [(3, StepVerdict::Inconclusive), (6, StepVerdict::Inconclusive), (12, StepVerdict::Fine)]
        );
        assert_eq!((found.steps.len(), found.built.len()), (12, 5));
    }

    /// Issue 51: a step still inconclusive at the cap decides nothing: counted as fine, it named
    /// c16 for a change at c11. The search stops with the range the culprit lies in.
    #[test]
    fn a_step_undecided_at_the_cap_ends_in_a_range() {
        let commits = history(16);
        let between = |good: &str, bad: &str, undecided: &str| Culprit::Between {
            good: good.into(),
            bad: bad.into(),
            undecided: undecided.into(),
        };
        let capped = bisect(&commits, Rounds { first: 3, max: 6 }, oracle(11, 100), |_| {}).expect("bisect");
        assert_eq!(capped.culprit, between("c00", "c16", "c08"));
        assert_eq!(
            capped.steps.iter().map(|s| (s.rounds, s.verdict)).collect::<Vec<_>>(),
            [(3, StepVerdict::Inconclusive), (6, StepVerdict::Inconclusive)]
        );
        // Steps decided before the undecided one narrow the range: c08 fine, c12 regressed,
        // c10 undecided: the change is in c11..=c12.
        let found = bisect(&commits, Rounds { first: 3, max: 6 }, undecidable_at(11, 3, 10), |_| {}).expect("bisect");
        assert_eq!(found.culprit, between("c08", "c12", "c10"));
        // The culprit itself undecided at the cap: its range still holds it.
        let found = bisect(&commits, Rounds { first: 3, max: 6 }, undecidable_at(12, 3, 12), |_| {}).expect("bisect");
        assert_eq!(found.culprit, between("c08", "c16", "c12"));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(bisect(&history(0), Rounds { first: 3, max: 6 }, oracle(1, 0), |_| {}).is_err());
        assert!(bisect(&history(4), Rounds { first: 1, max: 6 }, oracle(1, 0), |_| {}).is_err());
        assert!(bisect(&history(4), Rounds { first: 8, max: 6 }, oracle(1, 0), |_| {}).is_err());
    }

    #[test]
    fn commits_between_lists_good_then_each_later_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .status()
                .expect("git")
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        for i in 0..4 {
            git(&["commit", "-q", "--allow-empty", "-m", &format!("c{i}")]);
        }
        let all = commits_between(dir.path(), "HEAD~3", "HEAD").expect("commits");
        assert_eq!(all.len(), 4);
        assert!(commits_between(dir.path(), "HEAD", "HEAD~3").is_err(), "bad before good");
        assert!(commits_between(dir.path(), "nope", "HEAD").is_err());
    }
}
