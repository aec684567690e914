//! Which side of a benchmark connection a process plays: the one `Role` the LUT command line,
//! the report lines and the orchestrator's per-process bookkeeping share.

use serde::{Deserialize, Serialize};

/// Which side of the connection a process plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The server.
    Server,
    /// The client.
    Client,
    /// Any other command (`nesquic trace`).
    Process,
}

/// The two roles of a LUT run.
pub const LUT_ROLES: [Role; 2] = [Role::Server, Role::Client];

impl Role {
    /// Index of this role in the eBPF maps.
    pub fn index(self) -> u32 {
        match self {
            Role::Server => 0,
            Role::Client => 1,
            Role::Process => 2,
        }
    }

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::Process => "process",
        }
    }

    /// (map index, name), as the probe session's snapshot takes roles.
    pub fn slot(self) -> (u32, &'static str) {
        (self.index(), self.name())
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}; expected server, client or process")]
pub struct UnknownRole(pub String);

impl std::str::FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "server" => Ok(Role::Server),
            "client" => Ok(Role::Client),
            "process" => Ok(Role::Process),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_round_trip_through_display_from_str_and_serde() {
        for role in [Role::Server, Role::Client, Role::Process] {
            assert_eq!(role.to_string().parse::<Role>().unwrap(), role);
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{}\"", role.name()));
            assert_eq!(serde_json::from_str::<Role>(&json).unwrap(), role);
        }
        assert!("nope".parse::<Role>().is_err());
        assert_eq!(LUT_ROLES.map(Role::index), [0, 1]);
    }
}
