//! CPU cost per packet by component: a role's CPU time times each component's share of its
//! samples, divided by the datagrams it sent (server) or received (client), and by the payload
//! bytes. The datagram count is measured (the io probes or the LUT's own I/O counters) and named;
//! without one there is no per-packet figure, never an estimate.

use crate::Role;

pub use crate::profile::{ComponentCost, PacketCost};
use crate::profile::{RoleProfile, Share};
use crate::syscall::Direction;

impl PacketCost {
    /// The cost of `profile`'s components given the role's CPU time and datagram count; `None`
    /// without datagrams.
    pub fn of(
        profile: &RoleProfile,
        cpu_s: f64,
        direction: &str,
        datagrams: u64,
        datagram_source: &str,
        payload_bytes: u64,
    ) -> Option<Self> {
        if datagrams == 0 {
            return None;
        }
        let cpu_ns = cpu_s * 1e9;
        let per = |s: &Share| ComponentCost {
            name: s.name.clone(),
            ns_per_datagram: cpu_ns * s.share / datagrams as f64,
            ns_per_datagram_ci95_low: cpu_ns * s.ci95_low / datagrams as f64,
            ns_per_datagram_ci95_high: cpu_ns * s.ci95_high / datagrams as f64,
            ns_per_byte: if payload_bytes == 0 { 0.0 } else { cpu_ns * s.share / payload_bytes as f64 },
        };
        Some(Self {
            direction: direction.to_string(),
            datagrams,
            datagram_source: datagram_source.to_string(),
            payload_bytes,
            cpu_s,
            ns_per_datagram: cpu_ns / datagrams as f64,
            components: profile.components.iter().map(per).collect(),
            split: profile.split.iter().map(per).collect(),
        })
    }
}

/// Datagrams `role` moved in `direction` by the io probes' syscall rows; `None` when the probes
/// saw no such row (io not probed).
pub fn datagrams_probed(metrics: &crate::metrics::Metrics, role: Role, direction: Direction) -> Option<u64> {
    let rows: Vec<_> = metrics
        .roles
        .iter()
        .filter(|r| r.role == role)
        .flat_map(|r| r.io.iter())
        .filter(|io| io.direction == direction)
        .collect();
    (!rows.is_empty()).then(|| rows.iter().map(|io| io.datagrams).sum())
}

/// Fills in each role's [`PacketCost`] of `profile`: the server per datagram sent, the client per
/// datagram received. `cpu_s(role)` is the role's CPU time; `datagrams(role, direction)` a
/// measured count and its source.
pub fn attach(
    profile: &mut crate::profile::Profile,
    cpu_s: impl Fn(Role) -> f64,
    datagrams: impl Fn(Role, Direction) -> Option<(u64, String)>,
    payload_bytes: u64,
) {
    for role in &mut profile.roles {
        let (direction, label) =
            if role.role == Role::Client { (Direction::Recv, "received") } else { (Direction::Send, "sent") };
        role.cost = datagrams(role.role, direction)
            .and_then(|(n, source)| PacketCost::of(role, cpu_s(role.role), label, n, &source, payload_bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_datagram_figures_times_datagrams_give_back_the_cpu_time() {
        let shares = [("crypto.aead", 30), ("packet_io.kernel", 50), ("other", 20)];
        let total = 100;
        let share = |(n, k): (&str, u64)| Share {
            name: n.into(),
            samples: k,
            share: k as f64 / total as f64,
            ci95_low: 0.0,
            ci95_high: 1.0,
        };
        let profile = RoleProfile {
            role: Role::Server,
            samples: total,
            split: shares.iter().copied().map(share).collect(),
            components: [("crypto", 30), ("packet_io", 50), ("other", 20)].into_iter().map(share).collect(),
            top_functions: Vec::new(),
            unknown_leaves: Vec::new(),
            unclassified_leaves: Vec::new(),
            frameless_callers: 0,
            rep_movsb_leaves: 0,
            lost_stacks: 0,
            cost: None,
            folded: Vec::new(),
        };
        let cost = PacketCost::of(&profile, 0.5, "sent", 100_000, "test", 1_000_000).expect("datagrams");
        let crypto = cost.components.iter().find(|c| c.name == "crypto").expect("crypto");
        assert!((crypto.ns_per_datagram - 1500.0).abs() < 1e-9, "{crypto:?}");
        assert!((crypto.ns_per_byte - 150.0).abs() < 1e-9, "{crypto:?}");
        let back: f64 = cost.split.iter().map(|c| c.ns_per_datagram * cost.datagrams as f64).sum::<f64>() / 1e9;
        assert!((back - 0.5).abs() < 1e-9, "{back}");
        assert!(PacketCost::of(&profile, 0.5, "sent", 0, "test", 1).is_none());
    }
}
