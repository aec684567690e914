//! Duty-cycled function probes: counting for a window out of every period, and detached in
//! between, so a costly timing probe perturbs only about that share of the run. Counts are
//! extrapolated with the fraction of time they were really counting (measured between the
//! switches, not taken from the setting).

use std::time::{Duration, Instant};

use crate::EngineError;

/// `--duty` as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DutySpec {
    /// Probes attached this long...
    pub window: Duration,
    /// ...at the start of every period this long.
    pub period: Duration,
}

/// The state of one duty-cycled observation (one repetition).
#[derive(Debug)]
pub struct DutyCycle {
    spec: DutySpec,
    /// Start of the current period; `None` until the first process is tracked.
    period_start: Option<Instant>,
    started: Option<Instant>,
    attached_since: Option<Instant>,
    attached_total: Duration,
}

impl DutyCycle {
    /// A cycle that starts with the first tracked process.
    pub fn new(spec: DutySpec) -> Self {
        Self { spec, period_start: None, started: None, attached_since: None, attached_total: Duration::ZERO }
    }

    /// Called right after probes were attached to the first process (a window opens).
    pub fn begin(&mut self, now: Instant) {
        if self.started.is_none() {
            self.started = Some(now);
            self.period_start = Some(now);
            self.attached_since = Some(now);
        }
    }

    /// Opens or closes the window as due. A window counts calls exactly between two switches of
    /// a flag the probes read (one map write each); the probes are attached just before it opens
    /// and detached (in the background: the kernel takes ~0.2 s) after it closes, so between
    /// windows the program runs without breakpoints.
    pub fn tick(&mut self, session: &mut dyn crate::kernel::KernelProbes) -> Result<(), EngineError> {
        let Some(period_start) = self.period_start else { return Ok(()) };
        let in_period = period_start.elapsed();
        if let Some(since) = self.attached_since {
            if in_period >= self.spec.window {
                session.set_functions_counting(false)?;
                self.attached_total += since.elapsed();
                self.attached_since = None;
                session.set_functions_attached(false)?;
            }
        } else if in_period >= self.spec.period && !session.detaching() {
            // (While the last window's probes are still being closed, wait: attaching again
            // now would probe some calls twice.)
            // Next period starts now (late ticks shift it; the fraction is measured anyway).
            self.period_start = Some(Instant::now());
            session.set_functions_attached(true)?;
            session.set_functions_counting(true)?;
            self.attached_since = Some(Instant::now());
        }
        Ok(())
    }

    /// How long until the next toggle is due (for the caller's sleep).
    pub fn next_toggle(&self) -> Duration {
        let Some(period_start) = self.period_start else { return Duration::from_millis(50) };
        let due = if self.attached_since.is_some() { self.spec.window } else { self.spec.period };
        due.saturating_sub(period_start.elapsed())
    }

    /// Ends the observation; returns the fraction of the time the probes were attached.
    pub fn finish(&mut self) -> Option<f64> {
        let started = self.started?;
        let now = Instant::now();
        if let Some(since) = self.attached_since.take() {
            self.attached_total += now.duration_since(since);
        }
        let total = now.duration_since(started).as_secs_f64();
        (total > 0.0).then(|| self.attached_total.as_secs_f64() / total)
    }
}
