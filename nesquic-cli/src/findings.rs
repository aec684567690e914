//! `nesquic findings RUN`: what a past run's numbers point to, by today's rules (so a run made
//! before a rule existed gets it too), from its summary.json.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// `nesquic findings` arguments.
#[derive(Debug, clap::Args)]
pub struct FindingsArgs {
    /// A run directory (with summary.json) or a summary.json.
    pub path: PathBuf,
    /// Print them as JSON (the typed findings, as summary.json holds them).
    #[arg(long)]
    pub json: bool,
}

/// Runs `nesquic findings`.
pub fn execute(args: &FindingsArgs) -> Result<()> {
    let file = if args.path.is_dir() { args.path.join("summary.json") } else { args.path.clone() };
    let record = nesquic_record::RunRecord::load(&file)
        .with_context(|| format!("{}: not a nesquic run (give a run directory or its summary.json)", file.display()))?;
    // Said on stderr: with --json, stdout is the findings alone.
    for caveat in record.caveats() {
        eprintln!("nesquic: note: {caveat}");
    }
    let findings = nesquic_record::findings::find(&record);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", nesquic_render::findings::text(&findings));
    }
    Ok(())
}
