//! CPU ns per datagram by component for one configuration over its repetitions (medians): the
//! cross-LUT view `nesquic matrix` prints ("quinn spends X ns per packet on crypto, msquic Y").
//! Each repetition's figure comes from its sampling profile's measured cost
//! (`nesquic_model::packet_cost`): CPU time x the component's share / datagrams.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::figures::RepetitionFigures;
use nesquic_protocol::Role;

/// One side's cost per datagram: the server's per datagram sent, the client's per datagram received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideCost {
    /// `sent` or `received`.
    pub direction: String,
    /// Repetitions that had a per-datagram cost.
    pub repetitions: usize,
    /// CPU ns per datagram over all components (median).
    pub ns_per_datagram: f64,
    /// Per top-level component, CPU ns per datagram (medians; a repetition in which a component
    /// had no sample counts as 0 for it).
    pub components: BTreeMap<String, f64>,
}

/// Both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketCostFigures {
    /// The server, per datagram sent.
    pub server: Option<SideCost>,
    /// The client, per datagram received.
    pub client: Option<SideCost>,
}

impl PacketCostFigures {
    /// The medians over `reps`; `None` when no repetition has a per-datagram cost (no profile,
    /// or no datagram count).
    pub fn of(reps: &[RepetitionFigures]) -> Option<Self> {
        let figures = Self { server: side(reps, Role::Server), client: side(reps, Role::Client) };
        (figures.server.is_some() || figures.client.is_some()).then_some(figures)
    }
}

fn side(reps: &[RepetitionFigures], role: Role) -> Option<SideCost> {
    let costs: Vec<&nesquic_model::packet_cost::PacketCost> = reps
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .filter_map(|p| p.roles.iter().find(|x| x.role == role))
        .filter_map(|r| r.cost.as_ref())
        .collect();
    let first = costs.first()?;
    let names: std::collections::BTreeSet<&str> =
        costs.iter().flat_map(|c| c.components.iter().map(|x| x.name.as_str())).collect();
    let median = |v: Vec<f64>| crate::stats::median(&v).unwrap_or(0.0);
    let components = names
        .into_iter()
        .map(|name| {
            let per_rep = costs
                .iter()
                .map(|c| c.components.iter().find(|x| x.name == name).map_or(0.0, |x| x.ns_per_datagram))
                .collect();
            (name.to_string(), median(per_rep))
        })
        .collect();
    Some(SideCost {
        direction: first.direction.clone(),
        repetitions: costs.len(),
        ns_per_datagram: median(costs.iter().map(|c| c.ns_per_datagram).collect()),
        components,
    })
}
