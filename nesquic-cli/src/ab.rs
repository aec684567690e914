//! `nesquic ab`: run a base and a head variant in interleaved rounds in one job and judge the
//! paired rounds with the gate of `nesquic compare`. A variant differs from the other by its
//! build (`--base-lut-path`/`--head-lut-path`, or two commits of one repository:
//! `--lut-path REPO --base-rev A --head-rev B`), its commands (`--base-server-cmd`... with
//! `--lut exec`) or its options (`--base-opt`/`--head-opt`); every other `nesquic run` flag
//! applies to both.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use nesquic_engine::ab::{AbPlan, Order};
use nesquic_record::compare::{from_record, Pairing};

use crate::compare::{judge, GateArgs, Outcome};
use crate::run::{default_probes, install_signal_flag, RunArgs, Terminal};

/// Payload per round when neither --size nor a testcase is given: at the bulk testcase's 25 MB
/// the payload sender's sends per MB wobbled by 2.6% a round (paired head/base ratio, quinn, a
/// loaded 2-core VM), at 100 MB by 0.7%, for 23 s a job of 10 rounds instead of 18 s: the size at
/// which the default gate tells a +2% change from wobble in 10 rounds.
pub(crate) const DEFAULT_SIZE: u64 = 100_000_000;

/// [`DEFAULT_SIZE`] for a run that names no size or testcase.
pub(crate) fn default_size(run: &mut RunArgs) {
    let s = &mut run.scenario;
    if s.size.is_none() && s.testcase.is_none() && s.testcase_file.is_none() {
        s.size = Some(DEFAULT_SIZE);
    }
}

/// `nesquic ab` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::compare::GATE_EXIT_STATUS)]
pub struct AbArgs {
    /// Rounds: each runs one repetition of base and one of head. Noisy figures need
    /// --min-samples rounds (5) for a verdict; 10 or more make their intervals useful. Without
    /// --size or --testcase a round moves 100 MB (not the bulk testcase's 25 MB): the sender's
    /// sends per MB wobble 4x less, so 10 rounds tell a +2% change from noise (docs/ci.md).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..))]
    pub rounds: u32,
    /// Order within rounds: abba (AB, BA, AB, ...) or random (drawn per round from --seed).
    #[arg(long, value_enum, default_value_t = OrderChoice::Abba)]
    pub order: OrderChoice,
    /// Seed of --order random (recorded in OUT/ab.json).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Base variant: build the LUT's adapter against this checkout (see run --lut-path).
    #[arg(long, value_name = "PATH")]
    pub base_lut_path: Option<PathBuf>,
    /// Head variant: build the LUT's adapter against this checkout.
    #[arg(long, value_name = "PATH")]
    pub head_lut_path: Option<PathBuf>,
    /// Base variant: this commit (branch, tag, hash) of the --lut-path repository, built from a
    /// worktree Nesquic manages (see run --lut-rev).
    #[arg(long, value_name = "REV")]
    pub base_rev: Option<String>,
    /// Head variant: this commit of the --lut-path repository (HEAD: the checked-out commit,
    /// without uncommitted changes).
    #[arg(long, value_name = "REV")]
    pub head_rev: Option<String>,
    /// Base variant: this published release of the LUT's library (see run --lut-version):
    /// `--base-version 0.11.8 --head-version 0.11.9` answers "which release changed this?".
    #[arg(long, value_name = "VERSION", conflicts_with_all = ["base_lut_path", "base_rev"])]
    pub base_version: Option<String>,
    /// Head variant: this published release of the LUT's library.
    #[arg(long, value_name = "VERSION", conflicts_with_all = ["head_lut_path", "head_rev"])]
    pub head_version: Option<String>,
    /// Base variant with --lut exec: its server command (see run --server-cmd).
    #[arg(long, value_name = "CMD", requires = "base_client_cmd")]
    pub base_server_cmd: Option<String>,
    /// Base variant with --lut exec: its client command.
    #[arg(long, value_name = "CMD", requires = "base_server_cmd")]
    pub base_client_cmd: Option<String>,
    /// Head variant with --lut exec: its server command.
    #[arg(long, value_name = "CMD", requires = "head_client_cmd")]
    pub head_server_cmd: Option<String>,
    /// Head variant with --lut exec: its client command.
    #[arg(long, value_name = "CMD", requires = "head_server_cmd")]
    pub head_client_cmd: Option<String>,
    /// Base variant: a LUT setting KEY=VALUE on top of --lut-opt, repeatable (gso=on).
    #[arg(long = "base-opt", value_name = "KEY=VALUE")]
    pub base_opts: Vec<String>,
    /// Head variant: a LUT setting KEY=VALUE on top of --lut-opt, repeatable (gso=off).
    #[arg(long = "head-opt", value_name = "KEY=VALUE")]
    pub head_opts: Vec<String>,
    /// What both variants share: every `nesquic run` flag. --out is the job's directory
    /// (OUT/base, OUT/head: run directories; OUT/ab.json: the order).
    #[command(flatten)]
    pub run: RunArgs,
    /// The gate.
    #[command(flatten)]
    pub gate: GateArgs,
}

/// `--order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderChoice {
    /// AB, BA, AB, ...
    Abba,
    /// Each round's order drawn from --seed (randomised blocks).
    Random,
}

impl AbArgs {
    /// One side's `nesquic run` flags: the shared ones with the side's variant applied.
    fn side(
        &self,
        (lut_path, rev, version): (&Option<PathBuf>, &Option<String>, &Option<String>),
        cmds: (&Option<String>, &Option<String>),
        opts: &[String],
    ) -> RunArgs {
        let mut run = self.run.clone();
        if lut_path.is_some() {
            run.lut_path.clone_from(lut_path);
        }
        if rev.is_some() {
            run.lut_rev.clone_from(rev);
        }
        if version.is_some() {
            // A side's release replaces the shared checkout, if any.
            (run.lut_path, run.lut_rev) = (None, None);
            run.lut_version.clone_from(version);
        }
        if let (Some(server), Some(client)) = cmds {
            (run.server_cmd, run.client_cmd) = (Some(server.clone()), Some(client.clone()));
        }
        run.lut_opts.extend(opts.iter().cloned());
        run.quiet = true;
        default_size(&mut run);
        run
    }
}

/// What makes a variant: its LUT, its build's source, its options.
fn describe(plan: &nesquic_engine::run::RunPlan) -> String {
    let mut text = format!("{} {}", plan.lut.name(), plan.lut.version());
    if let Some(source) = &plan.lut_source {
        text.push_str(&format!(" from {}", source.describe()));
    }
    if let Some(client) = &plan.client {
        // A pair: the server's LUT above, the client's here.
        text = format!("server {text} x client {} {}", client.lut.name(), client.lut.version());
        if let Some(source) = &client.lut_source {
            text.push_str(&format!(" from {}", source.describe()));
        }
    }
    if !plan.lut_options.is_empty() {
        let options: Vec<String> = plan.lut_options.iter().map(ToString::to_string).collect();
        text.push_str(&format!(" [{}]", options.join(" ")));
    }
    text
}

/// Runs `nesquic ab`; bad input or a failed round is an `Err` (exit 2 in main).
pub fn execute(args: &AbArgs) -> Result<Outcome> {
    if args.run.repeat != 1 || args.run.json.is_some() || args.run.overhead {
        bail!("nesquic ab sets the repetitions itself: give --rounds (not --repeat, --json or --overhead)");
    }
    // Bad limits or rules are found before the rounds run, not after.
    let gate = args.gate.resolve()?;
    crate::run::clear_leftovers();
    let base = args.side(
        (&args.base_lut_path, &args.base_rev, &args.base_version),
        (&args.base_server_cmd, &args.base_client_cmd),
        &args.base_opts,
    );
    let head = args.side(
        (&args.head_lut_path, &args.head_rev, &args.head_version),
        (&args.head_server_cmd, &args.head_client_cmd),
        &args.head_opts,
    );
    for (side, rev, flag) in [(&base, &args.base_rev, "--base-rev"), (&head, &args.head_rev, "--head-rev")] {
        if rev.is_some() && side.lut_path.is_none() {
            bail!("{flag} names a commit of a repository: give it with --lut-path REPO");
        }
    }
    let variant = |r: &RunArgs| {
        (
            r.lut_path.clone(),
            r.lut_rev.clone(),
            r.lut_version.clone(),
            r.server_cmd.clone(),
            r.client_cmd.clone(),
            r.lut_opts.clone(),
        )
    };
    if variant(&base) == variant(&head) {
        eprintln!("nesquic: warning: base and head are the same variant: this is an A/A comparison");
    }
    let out = match &args.run.out {
        Some(dir) => dir.clone(),
        None => nesquic_record::recorder::default_out_dir(&format!("ab-{}", args.run.lut))?,
    };
    let mut plan = AbPlan {
        base: base.plan().context("base variant")?,
        head: head.plan().context("head variant")?,
        rounds: args.rounds,
        order: match args.order {
            OrderChoice::Abba => Order::Abba,
            OrderChoice::Random => Order::Random { seed: args.seed },
        },
        out: out.clone(),
    };
    if args.run.probe.is_none() {
        default_probes_for_both(&mut plan)?;
    }
    if let (Some(b), Some(h)) = (&plan.base.lut_source, &plan.head.lut_source) {
        if b.requested_rev.is_some() && b.worktree == h.worktree && variant(&base) != variant(&head) {
            eprintln!("nesquic: warning: base and head are the same commit {}: this is an A/A comparison", b.revision);
        }
    }
    let order = format!("{:?}", args.order).to_lowercase();
    eprintln!(
        "nesquic: ab: {} rounds of {}, {order} order; base: {}; head: {}",
        plan.rounds,
        plan.base.testcase.workload.describe(),
        describe(&plan.base),
        describe(&plan.head)
    );
    let interrupted = install_signal_flag()?;
    let record = nesquic_engine::ab::execute(&mut plan, &interrupted, &mut Terminal::new(true))?;
    eprintln!("nesquic: rounds written to {} (base/, head/, ab.json)", out.display());
    let names = (out.join("base").display().to_string(), out.join("head").display().to_string());
    judge(
        &from_record(&record.base)?,
        &from_record(&record.head)?,
        (&names.0, &names.1),
        Pairing::Paired,
        (&args.gate, &gate),
        None,
    )
}

/// What `nesquic run` measures by default, for both variants, so that the obvious CI command
/// compares syscall and crypto counts; both get the same set or the gate would refuse.
pub(crate) fn default_probes_for_both(plan: &mut AbPlan) -> Result<()> {
    let (b, h) = (default_probes::choose(&plan.base), default_probes::choose(&plan.head));
    if b != h {
        bail!(
            "the default probes differ between base ({}) and head ({}): give --probe LIST (or --probe none)",
            b.as_deref().unwrap_or("none"),
            h.as_deref().unwrap_or("none")
        );
    }
    (plan.base.probe, plan.head.probe) = (b.clone(), h);
    eprintln!(
        "nesquic: ab measures {} in every round (as nesquic run does by default)",
        b.as_deref().unwrap_or("no probes")
    );
    Ok(())
}
