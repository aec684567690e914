//! What can go wrong running LUT processes.

/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A system call or thread the engine needs failed.
    #[error("{what}")]
    Os {
        /// What the engine was doing.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A LUT process could not be started.
    #[error("cannot start {binary}")]
    Start {
        /// The executable.
        binary: String,
        /// Why.
        source: Box<EngineError>,
    },
    /// A LUT process misbehaved while starting.
    #[error("{0}")]
    Process(String),
}

impl EngineError {
    /// An OS error while doing `what`.
    pub(crate) fn os(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Os { what, source }
    }
}
