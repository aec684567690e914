//! `nesquic bisect --lut L --lut-path REPO --good A --bad B`: the first commit of REPO between A
//! and B that regresses, each step a paired A/B job of the midpoint against A under the gate
//! (`--fail-on` rules decide alone when given). The search and the step's verdict are
//! `nesquic_engine::bisect`'s; this module resolves the flags into each step's two run plans.

use anyhow::{bail, Context, Result};
use nesquic_engine::ab::{AbPlan, Order};
use nesquic_engine::bisect::{bisect, commits_between, step_verdict, Culprit, Rounds, StepVerdict};
use nesquic_record::compare::{compare, from_record, Pairing, Rule, Thresholds};

use crate::run::{install_signal_flag, RunArgs, Terminal};

/// `nesquic bisect` arguments.
#[derive(Debug, clap::Args)]
pub struct BisectArgs {
    /// A commit (branch, tag, hash) of the --lut-path repository without the regression.
    #[arg(long, value_name = "REV")]
    pub good: String,
    /// A later commit with it.
    #[arg(long, value_name = "REV")]
    pub bad: String,
    /// Rounds of a step's first A/B job; an inconclusive step doubles them, up to --max-rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..))]
    pub rounds: u32,
    /// Most rounds a step may take; a step still inconclusive there ends the search, which then
    /// names the range the first bad commit lies in.
    #[arg(long, default_value_t = 20)]
    pub max_rounds: u32,
    /// The metric and limit that decide, repeatable (METRIC>+N%, as `compare --fail-on`);
    /// without one, the gate's default verdict decides.
    #[arg(long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Limit for counters, percent (as `compare --tolerance`).
    #[arg(long, default_value_t = Thresholds::DEFAULT.tolerance)]
    pub tolerance: f64,
    /// Family-wise false-alarm rate (as `compare --alpha`).
    #[arg(long, default_value_t = Thresholds::DEFAULT.alpha)]
    pub alpha: f64,
    /// Every `nesquic run` flag both sides share; --lut-path is the repository, --out the
    /// bisection's directory (one A/B job directory per step).
    #[command(flatten)]
    pub run: RunArgs,
}

/// Runs `nesquic bisect`: prints each step and the first bad commit.
pub fn execute(args: &BisectArgs) -> Result<()> {
    let repo = args.run.lut_path.clone().context("nesquic bisect needs --lut-path REPO (the repository to bisect)")?;
    if args.run.lut_rev.is_some() || args.run.repeat != 1 || args.run.json.is_some() {
        bail!(
            "nesquic bisect chooses the commits and rounds itself: give --good/--bad (not --lut-rev, --repeat, --json)"
        );
    }
    let rules = args.fail_on.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>()?;
    let thresholds = Thresholds { tolerance: args.tolerance, alpha: args.alpha, ..Thresholds::DEFAULT }.checked()?;
    let commits = commits_between(&repo, &args.good, &args.bad)?;
    let out = match &args.run.out {
        Some(dir) => dir.clone(),
        None => nesquic_record::recorder::default_out_dir(&format!("bisect-{}", args.run.lut))?,
    };
    eprintln!(
        "nesquic: bisect: {} commits after {}; at most {} steps, each an A/B job against it",
        commits.len() - 1,
        short(&commits[0]),
        (commits.len() as f64).log2().ceil()
    );
    let interrupted = install_signal_flag()?;
    let mut job = 0;
    let mut measure = |commit: &str, rounds: u32| -> Result<(StepVerdict, String)> {
        job += 1;
        let side = |rev: &str| {
            let mut run = args.run.clone();
            (run.lut_rev, run.out, run.quiet) = (Some(rev.to_string()), None, true);
            crate::ab::default_size(&mut run);
            run
        };
        let mut plan = AbPlan {
            base: side(&commits[0]).plan().context("the good commit")?,
            head: side(commit).plan().with_context(|| format!("commit {}", short(commit)))?,
            rounds,
            order: Order::Abba,
            out: out.join(format!("step-{job:02}-{}", short(commit))),
        };
        if args.run.probe.is_none() {
            crate::ab::default_probes_for_both(&mut plan)?;
        }
        let record = nesquic_engine::ab::execute(&mut plan, &interrupted, &mut Terminal::new(true))?;
        let rows =
            compare(&from_record(&record.base)?, &from_record(&record.head)?, &rules, &thresholds, Pairing::Paired)?;
        Ok(step_verdict(&rows, &rules))
    };
    let found =
        bisect(&commits, Rounds { first: args.rounds, max: args.max_rounds.max(args.rounds) }, &mut measure, |step| {
            let index = commits.iter().position(|c| *c == step.commit).unwrap_or(0);
            println!(
                "step: {} (commit {index} of {}) {} rounds: {:?}: {}",
                short(&step.commit),
                commits.len() - 1,
                step.rounds,
                step.verdict,
                step.detail
            );
        })?;
    let work = format!(
        "{} commits built, {} A/B jobs; job directories in {}",
        found.built.len(),
        found.steps.len(),
        out.display()
    );
    match &found.culprit {
        Culprit::Commit(commit) => println!("first bad commit: {commit} ({work})"),
        Culprit::Between { good, bad, undecided } => println!(
            "first bad commit: after {good}, up to and including {bad}: the step at {} stayed inconclusive at \
             {} rounds (a change near the limit; give --max-rounds more to decide it) ({work})",
            short(undecided),
            args.max_rounds.max(args.rounds)
        ),
    }
    Ok(())
}

/// A hash as printed: its first 10 characters.
fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}
