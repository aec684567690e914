//! Printing the timing probes' calibration; measuring it is the engine's
//! (`nesquic_engine::calibrate`).

pub use nesquic_engine::calibrate::Calibration;

/// Terminal lines of a calibration.
trait Describe {
    fn describe(&self) -> Vec<String>;
}

impl Describe for Calibration {
    /// One line per kind for the terminal.
    fn describe(&self) -> Vec<String> {
        let agent = self.agent.iter().map(|a| {
            format!(
                "user (inline hook): a counted call costs {:.1} ± {:.1} ns, a timed call {:.1} ± {:.1} ns, of which {:.1} ± {:.1} ns fall inside the measured duration ({} rounds)",
                a.count_ns, a.count_sd_ns, a.time_ns, a.time_sd_ns, a.window_ns, a.window_sd_ns, a.rounds
            )
        });
        self.kinds
            .iter()
            .map(|k| {
                format!(
                    "{:<16} adds {:>6.0} ± {:>4.0} ns to each measured call (a probed call costs the program {:.0} ns more; true {:.0} ns, measured {:.0} ns)",
                    k.kind.label(),
                    k.overhead_ns,
                    k.uncertainty_ns,
                    k.pair_cost_ns,
                    k.true_ns,
                    k.measured_ns
                )
            })
            .chain(agent)
            .collect()
    }
}

/// Prints a calibration on stderr.
pub fn print(c: &Calibration) {
    eprintln!("nesquic: probe calibration ({} rounds, busy-loop workload):", c.rounds_used());
    for line in c.describe() {
        eprintln!("  {line}");
    }
}
