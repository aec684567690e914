//! What can go wrong running LUT processes and their probes.

/// Any error the engine passes on from a library it drives (eBPF, the LUT descriptors, the
/// record, the OS), kept whole so its own causes still print.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

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
    /// A LUT process, a probe or a build misbehaved; the text says how.
    #[error("{0}")]
    Process(String),
    /// The eBPF side failed (its error says how).
    #[error(transparent)]
    Ebpf(#[from] nesquic_ebpf::EbpfError),
    /// The user-space probe agent failed (its error says how).
    #[error(transparent)]
    Agent(#[from] nesquic_ebpf::user::UserError),
    /// Writing the run's record or traces failed (its error says how).
    #[error(transparent)]
    Record(#[from] nesquic_record::RecordError),
    /// The emulated link failed (its error says how).
    #[error(transparent)]
    Link(#[from] nesquic_link::LinkError),
    /// The run's certificate could not be made (its error says how).
    #[error(transparent)]
    Tls(#[from] nesquic_lut_adapters::tls::TlsError),
    /// A LUT descriptor refused (its error says how).
    #[error(transparent)]
    Lut(#[from] nesquic_lut_adapters::LutError),
    /// What the caller's observer (`repetition::ProcessObserver`) reported.
    #[error(transparent)]
    Observer(#[from] Cause),
    /// A step failed because a library it uses failed.
    #[error("{what}")]
    Step {
        /// What the engine was doing.
        what: String,
        /// Why.
        source: Cause,
    },
    /// A run failed, and its record says so: every repetition measured before the failure and
    /// the failure itself are in `record`, as written to the run directory's summary.json.
    #[error("{what}")]
    Recorded {
        /// What failed, and where the record is.
        what: String,
        /// The record as written.
        record: Box<nesquic_record::RunRecord>,
        /// Why.
        source: Box<EngineError>,
    },
}

impl EngineError {
    /// An OS error while doing `what`.
    pub(crate) fn os(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Os { what, source }
    }

    /// A failure described by `text`.
    pub(crate) fn msg(text: impl Into<String>) -> Self {
        Self::Process(text.into())
    }

    /// The message and every cause, joined by ": " (what a record keeps of an error).
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            text.push_str(&format!(": {e}"));
            source = e.source();
        }
        text
    }
}

/// `.step("what")` on results from the libraries the engine drives.
pub(crate) trait StepExt<T> {
    /// Names what the engine was doing when it failed.
    fn step(self, what: impl Into<String>) -> Result<T, EngineError>;
    /// As [`StepExt::step`], with the text built only on failure.
    fn with_step(self, what: impl FnOnce() -> String) -> Result<T, EngineError>;
}

impl<T, E: Into<Cause>> StepExt<T> for Result<T, E> {
    fn step(self, what: impl Into<String>) -> Result<T, EngineError> {
        self.map_err(|e| EngineError::Step { what: what.into(), source: e.into() })
    }
    fn with_step(self, what: impl FnOnce() -> String) -> Result<T, EngineError> {
        self.map_err(|e| EngineError::Step { what: what(), source: e.into() })
    }
}
