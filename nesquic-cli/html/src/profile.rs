//! The sampling profile: per side, the share of samples per component with its 95% interval
//! (summed over repetitions), the CPU cost per datagram by component, and a flame graph.

use std::collections::BTreeMap;

use nesquic_model::profile::Share;
use nesquic_model::Role;
use nesquic_record::RunRecord;

use crate::input::RunInput;
use crate::page::{num, Page};
use crate::plot::{self, Bar};
use crate::HtmlError;

/// Per side: component shares over every repetition (samples summed, intervals recomputed).
pub(crate) fn components(r: &RunRecord) -> Vec<(Role, Vec<Share>)> {
    // Keyed by name: the sides come in the same (alphabetical) order as ever.
    let mut counts: BTreeMap<&str, (Role, BTreeMap<String, u64>)> = BTreeMap::new();
    for role in r.repetitions.iter().filter_map(|x| x.profile.as_ref()).flat_map(|p| &p.roles) {
        let (_, side) = counts.entry(role.role.name()).or_insert((role.role, BTreeMap::new()));
        for c in &role.components {
            *side.entry(c.name.clone()).or_default() += c.samples;
        }
    }
    counts
        .into_values()
        .map(|(side, c)| {
            let total: u64 = c.values().sum();
            let mut shares: Vec<Share> = c.into_iter().map(|(name, n)| Share::of(name, n, total)).collect();
            shares.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
            (side, shares)
        })
        .collect()
}

/// Component bars (percent of samples, 95% interval as whiskers).
pub(crate) fn component_bars(id: &str, side: &str, shares: &[Share]) -> Result<String, HtmlError> {
    let total: u64 = shares.iter().map(|s| s.samples).sum();
    let bars: Vec<Bar> = shares
        .iter()
        .map(|s| Bar {
            label: s.name.clone(),
            value: s.share * 100.0,
            interval: Some((s.ci95_low * 100.0, s.ci95_high * 100.0)),
        })
        .collect();
    plot::hbars(id, &format!("{side}: where the CPU goes ({total} samples)"), "% of samples (95% interval)", &bars)
}

/// Components, cost per packet and flame graphs, per side.
pub fn section(page: &mut Page, input: &RunInput) -> Result<(), HtmlError> {
    let r = &input.record;
    let shares = components(r);
    if shares.is_empty() {
        return Ok(());
    }
    page.h2("Where the CPU goes (--probe profile)");
    page.note("CPU-clock samples of each side's user and kernel stacks, classified into components by the catalog's rules; summed over repetitions.");
    for (side, s) in shares.iter().filter(|(_, s)| !s.is_empty()) {
        page.raw(&component_bars(&format!("components-{side}"), side.name(), s)?);
    }
    for (side, _) in &shares {
        cost(page, r, *side)?;
    }
    // A side the sampler never caught running has no graph to draw.
    for (role, stacks) in input.stacks.iter().filter(|(_, s)| !s.is_empty()) {
        page.h3(&format!("Flame graph: {role}"));
        page.note("Click a frame to zoom, Ctrl-F to search; the width of a frame is its share of the samples.");
        page.raw(&crate::flame::flame_graph(
            &format!("flame-{role}"),
            &format!("{role}: {}", input.headline()),
            stacks,
        )?);
    }
    Ok(())
}

/// CPU ns per datagram by component (median over repetitions), where a datagram count exists.
fn cost(page: &mut Page, r: &RunRecord, side: Role) -> Result<(), HtmlError> {
    let costs: Vec<&nesquic_model::packet_cost::PacketCost> = r
        .repetitions
        .iter()
        .filter_map(|x| x.profile.as_ref())
        .flat_map(|p| &p.roles)
        .filter(|x| x.role == side)
        .filter_map(|x| x.cost.as_ref())
        .collect();
    let Some(first) = costs.first().filter(|c| !c.components.is_empty()) else { return Ok(()) };
    let mut per: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for c in &costs {
        for comp in &c.components {
            per.entry(comp.name.as_str()).or_default().push(comp.ns_per_datagram);
        }
    }
    let mut bars: Vec<Bar> = per
        .into_iter()
        .filter_map(|(name, v)| {
            Some(Bar { label: name.to_string(), value: nesquic_record::stats::median(&v)?, interval: None })
        })
        .collect();
    bars.sort_by(|a, b| b.value.total_cmp(&a.value));
    let total = nesquic_record::stats::median(&costs.iter().map(|c| c.ns_per_datagram).collect::<Vec<_>>());
    let title = format!("{side}: CPU ns per datagram {} ({} ns in all)", first.direction, num(total, 0));
    let axis = format!("ns per datagram (median over repetitions; datagrams: {})", first.datagram_source);
    page.raw(&plot::hbars(&format!("cost-{side}"), &title, &axis, &bars)?);
    Ok(())
}
