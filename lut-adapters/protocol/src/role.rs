//! Which side of a benchmark connection a process plays: the one `Role` the LUT command line,
//! the report lines and the orchestrator's per-process bookkeeping share. It lives in
//! `nesquic-model` (below every crate that measures or records) and is re-exported here.

pub use nesquic_model::role::{Role, UnknownRole, LUT_ROLES};
