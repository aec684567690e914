//! What can go wrong building or impairing the link.

/// Errors of the emulated link.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Conditions out of range or in a combination no mechanism applies.
    #[error("{0}")]
    Condition(String),
    /// Namespaces need root.
    #[error("--link veth creates network namespaces: run as root")]
    NotRoot,
    /// `ip` or `tc` could not be started.
    #[error("run `{program}` (iproute2 is needed for --link veth)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// `ip` or `tc` ran and refused.
    #[error("{command}: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// `tc` answered with something this crate cannot read.
    #[error("{command}: unreadable output ({why})")]
    Unreadable {
        /// The command line.
        command: String,
        /// What was wrong with it.
        why: String,
    },
    /// A tc-bpf filter could not be attached.
    #[error("{what} on {iface}")]
    Filter {
        /// Which filter.
        what: &'static str,
        /// The veth end.
        iface: String,
        /// Why, as the loader said.
        source: crate::BoxError,
    },
    /// The userspace relay could not start.
    #[error("relay: {0}")]
    Relay(String),
    /// A stage of building the link failed.
    #[error("{stage}")]
    During {
        /// The stage.
        stage: &'static str,
        /// Why.
        source: Box<LinkError>,
    },
}

impl LinkError {
    /// `command` ran and failed: its stderr says why.
    pub(crate) fn command(command: &str, out: &std::process::Output) -> Self {
        Self::Command { command: command.to_string(), stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() }
    }

    /// The error and its causes on one line ("a: b: c"), for places that keep it as text.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(&format!(": {c}"));
            cause = c.source();
        }
        text
    }

    /// This error, said to have happened during `stage`.
    pub(crate) fn during(self, stage: &'static str) -> Self {
        Self::During { stage, source: Box::new(self) }
    }
}
