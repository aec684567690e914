//! The measuring tool itself: its version and git revision, recorded in the traces and compared
//! with a remote host's before a role runs there.

/// The measuring tool itself, as recorded in the traces.
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo {
    /// Its version.
    pub version: &'static str,
    /// The git revision it was built from.
    pub git_revision: &'static str,
}
