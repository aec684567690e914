//! Choosing the scenario of a run (`--testcase`, `--testcase-file`, overrides) and listing the
//! built-in ones. The figures a multi-connection run yields live in `nesquic_record::workload`.

use std::path::PathBuf;

use anyhow::Result;
use nesquic_testcases::Testcase;

/// The scenario flags `run` and `matrix` share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TestcaseArgs {
    /// Scenario (`nesquic testcases` lists them): bulk (default), multi-conn, handshakes,
    /// multi-stream.
    #[arg(long, value_name = "NAME", conflicts_with = "testcase_file")]
    pub testcase: Option<String>,
    /// A scenario of your own, as a TOML file like those in testcases/scenarios/.
    #[arg(long, value_name = "FILE")]
    pub testcase_file: Option<PathBuf>,
    /// Payload per stream: 25MB (10^6), 1GiB (2^30), 4096. Default: the testcase's (bulk: 25MB).
    #[arg(long, value_parser = crate::units::parse_size)]
    pub size: Option<u64>,
    /// Connections in total (default: the testcase's).
    #[arg(long, value_name = "N")]
    pub connections: Option<u32>,
    /// Connections open at once (default: the testcase's; never more than --connections).
    #[arg(long, value_name = "N")]
    pub parallel: Option<u32>,
    /// Concurrent streams per connection (default: the testcase's).
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
}

impl TestcaseArgs {
    /// The scenario with the command line's overrides applied and checked.
    pub fn resolve(&self) -> Result<Testcase> {
        let mut t = match (&self.testcase_file, &self.testcase) {
            (Some(path), _) => Testcase::load(path)?,
            (None, Some(name)) => nesquic_testcases::find(name)?,
            (None, None) => nesquic_testcases::find(nesquic_testcases::DEFAULT_TESTCASE)?,
        };
        let w = &mut t.workload;
        w.size = self.size.unwrap_or(w.size);
        if let Some(n) = self.connections {
            w.connections = n;
            // Fewer connections than the scenario runs at once: all of them at once.
            w.parallel = w.parallel.min(n);
        }
        w.parallel = self.parallel.unwrap_or(w.parallel);
        w.streams = self.streams.unwrap_or(w.streams);
        w.validate(&format!("{} with --connections/--parallel/--streams", t.name))?;
        Ok(t)
    }
}

/// `nesquic testcases`: the built-in scenarios.
pub fn list() {
    println!("{:<14} {:>11} {:>8} {:>7} {:>9}  description", "testcase", "connections", "parallel", "streams", "size");
    for t in nesquic_testcases::builtin() {
        let w = t.workload;
        println!(
            "{:<14} {:>11} {:>8} {:>7} {:>9}  {}",
            t.name,
            w.connections,
            w.parallel,
            w.streams,
            human_bytes(w.size),
            t.description
        );
    }
    println!();
    println!("nesquic run --testcase NAME [--size S] [--connections N] [--parallel N] [--streams N]");
    println!("nesquic run --testcase-file my.toml   (fields: name, description, connections, parallel, streams, size)");
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 && n % 1_000_000_000 == 0 => format!("{}GB", n / 1_000_000_000),
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}MB", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}KB", n / 1_000),
        n => format!("{n}B"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn overrides_apply_and_are_checked() {
        let args = TestcaseArgs { testcase: Some("multi-conn".into()), connections: Some(2), ..Default::default() };
        let w = args.resolve().unwrap().workload;
        assert_eq!((w.connections, w.parallel, w.size), (2, 2, 10_000_000));
        let bad = TestcaseArgs { parallel: Some(3), ..Default::default() };
        assert!(bad.resolve().unwrap_err().to_string().contains("parallel = 3 exceeds connections = 1"));
    }
}
