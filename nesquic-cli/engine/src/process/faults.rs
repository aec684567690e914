//! Faults injected through the environment. The LUT executables obey `NESQUIC_FAULT_*`
//! variables (abort the server after N bytes, corrupt a byte, drop received datagrams): the
//! tests use them to check that nesquic notices. Inherited by accident, they would perturb a
//! measured run in silence, so nesquic starts no LUT process with one set unless
//! `NESQUIC_ALLOW_FAULTS=1` says the faults are meant; then it says so loudly and the run's
//! record lists them.

use std::ffi::OsString;
use std::sync::Once;

use nesquic_record::run::InjectedFault;

use crate::EngineError;

/// What every fault variable's name starts with.
pub const PREFIX: &str = "NESQUIC_FAULT_";
/// Set to `1` to run with fault variables on purpose.
pub const ALLOW: &str = "NESQUIC_ALLOW_FAULTS";

/// Set to `N` (1-based): the server of repetition N only flips payload byte
/// [`CORRUPTED_BYTE`] (through `NESQUIC_FAULT_SERVER_CORRUPT_AT`), so that the repetitions
/// before it are measured and this one fails.
pub const CORRUPT_IN_REPETITION: &str = "NESQUIC_FAULT_CORRUPT_IN_REPETITION";
/// The payload offset [`CORRUPT_IN_REPETITION`] corrupts.
pub const CORRUPTED_BYTE: u64 = 1000;

/// The faults this process's environment injects: none, or those allowed by [`ALLOW`]. An
/// error names them when they are not allowed.
pub fn injected() -> Result<Vec<InjectedFault>, EngineError> {
    let faults = from_vars(std::env::vars_os())?;
    if let Some(value) = std::env::var_os(CORRUPT_IN_REPETITION) {
        if corrupted_repetition(&value).is_none() {
            return Err(EngineError::msg(format!(
                "{CORRUPT_IN_REPETITION}={}: expected a repetition number (1, 2, ...)",
                value.to_string_lossy()
            )));
        }
    }
    if !faults.is_empty() {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            let list: Vec<String> = faults.iter().map(ToString::to_string).collect();
            eprintln!(
                "nesquic: WARNING: faults injected on purpose ({ALLOW}=1): {}; the LUT processes perturb this \
                 run (recorded in summary.json as `faults`)",
                list.join(", ")
            );
        });
    }
    Ok(faults)
}

fn corrupted_repetition(value: &std::ffi::OsStr) -> Option<u32> {
    value.to_str()?.parse().ok().filter(|n| *n > 0)
}

/// What `role`'s LUT process gets in its environment, in repetition `repetition`, from the
/// faults that apply to one repetition ([`CORRUPT_IN_REPETITION`]); checked by [`injected`].
pub(crate) fn for_repetition(role: nesquic_protocol::Role, repetition: u32) -> Vec<(String, OsString)> {
    let chosen = std::env::var_os(CORRUPT_IN_REPETITION).and_then(|v| corrupted_repetition(&v));
    if role == nesquic_protocol::Role::Server && chosen == Some(repetition) {
        return vec![("NESQUIC_FAULT_SERVER_CORRUPT_AT".into(), CORRUPTED_BYTE.to_string().into())];
    }
    Vec::new()
}

/// [`injected`] over the variables given.
pub(crate) fn from_vars(vars: impl Iterator<Item = (OsString, OsString)>) -> Result<Vec<InjectedFault>, EngineError> {
    let mut faults = Vec::new();
    let mut allowed = None;
    for (name, value) in vars {
        let (name, value) = (name.to_string_lossy().into_owned(), value.to_string_lossy().into_owned());
        if name == ALLOW {
            allowed = Some(value);
        } else if name.starts_with(PREFIX) {
            faults.push(InjectedFault { name, value });
        }
    }
    faults.sort_by(|a, b| a.name.cmp(&b.name));
    if faults.is_empty() || allowed.as_deref() == Some("1") {
        return Ok(faults);
    }
    let list: Vec<String> = faults.iter().map(ToString::to_string).collect();
    let given = allowed.map(|v| format!(" ({ALLOW}={v} is not 1)")).unwrap_or_default();
    Err(EngineError::msg(format!(
        "{} set in the environment: the LUT executables would inject {} into the run. Unset {}, or set {ALLOW}=1 \
         to run with {} on purpose (then recorded in the run){given}",
        list.join(", "),
        if faults.len() == 1 { "this fault" } else { "these faults" },
        if faults.len() == 1 { "it" } else { "them" },
        if faults.len() == 1 { "it" } else { "them" },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn fault_variables_are_refused_unless_allowed_and_then_listed() {
        assert_eq!(from_vars(vars(&[("PATH", "/bin"), ("NESQUIC_PROBE", "io")])).expect("no faults"), []);
        let err = from_vars(vars(&[("NESQUIC_FAULT_DROP_RX", "0,200")])).expect_err("refused").to_string();
        assert!(
            err.starts_with("NESQUIC_FAULT_DROP_RX=0,200 set in the environment")
                && err.contains("NESQUIC_ALLOW_FAULTS=1"),
            "{err}"
        );
        let err =
            from_vars(vars(&[("NESQUIC_FAULT_DROP_RX", "0"), (ALLOW, "yes")])).expect_err("only 1 allows").to_string();
        assert!(err.contains("(NESQUIC_ALLOW_FAULTS=yes is not 1)"), "{err}");
        let allowed = from_vars(vars(&[
            ("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567"),
            (ALLOW, "1"),
            ("NESQUIC_FAULT_DROP_RX", "3"),
        ]))
        .expect("allowed");
        assert_eq!(
            allowed.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["NESQUIC_FAULT_DROP_RX=3", "NESQUIC_FAULT_SERVER_CORRUPT_AT=1234567"]
        );
    }
}
