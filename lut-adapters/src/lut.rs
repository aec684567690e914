//! The LUT adapter seam under one name: what the orchestrator needs to know about a library
//! under test and how to start its server and client processes. Each item lives in its own
//! module ([`descriptor`](crate::descriptor), [`error`](crate::error), [`launch`](crate::launch),
//! [`registry`](crate::registry), [`buffer`](crate::buffer)); this module keeps the paths other
//! crates use (`lut::find_lut`, `lut::ServerSpec`, ...).

pub use nesquic_protocol::cli::IoMode;
pub use nesquic_protocol::options::{LutOpt, OptionKind};
pub use nesquic_testcases::Workload;

pub use crate::buffer::socket_buffer;
pub use crate::descriptor::{Descriptor, OptionSpec, Refusal, SourceBuild};
pub use crate::error::LutError;
pub use crate::launch::{Builtin, ClientSpec, Collected, Endpoint, Lut, MountPoints, ServerSpec};
pub use crate::registry::{all_luts, find_lut, find_lut_or_exec, DESCRIPTORS};

/// Command-line arguments every LUT executable accepts (the other half of
/// [`Lut::server_args`]/[`Lut::client_args`]): `nesquic-protocol`'s [`cli`](nesquic_protocol::cli).
pub mod args {
    pub use nesquic_protocol::cli::{LutCli, LutCommand};

    /// The old name of [`LutCommand`]; [`Role`](nesquic_protocol::Role) now means server, client or
    /// process everywhere.
    #[deprecated(note = "use LutCommand (the subcommand) or nesquic_protocol::Role (the side)")]
    pub type Role = LutCommand;
}
