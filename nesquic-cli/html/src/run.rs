//! The page of one run: header, summary table, repetitions as distributions, goodput and CPU
//! over time, the profile (components, cost per packet, flame graphs), syscall latency, crypto
//! calls, offload figures and the link as applied.

use nesquic_record::events::RunStarted;
use nesquic_record::RunRecord;

pub use crate::input::RunInput;

use crate::page::{num, Page};
use crate::plot;
use crate::HtmlError;

/// The page of one run.
pub fn run_page(input: &RunInput) -> Result<String, HtmlError> {
    let title = format!("Nesquic run: {}", input.headline());
    let mut page = Page::new(&title);
    page.note(&format!("Run directory: {}", input.name));
    header(&mut page, input);
    summary(&mut page, &input.record);
    crate::findings::section(&mut page, &input.record);
    repetitions(&mut page, &input.record, "")?;
    crate::timeline::section(&mut page, input)?;
    crate::profile::section(&mut page, input)?;
    crate::probes::section(&mut page, &input.record)?;
    link(&mut page, &input.record);
    Ok(page.finish(&title))
}

/// What ran where, and what measured what.
pub(crate) fn header(page: &mut Page, input: &RunInput) {
    let r = &input.record;
    let started = input.started.as_ref();
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut rows: Vec<Vec<String>> = vec![
        vec!["LUT".into(), format!("{} {} (crypto: {})", r.lut.name, r.lut.version, r.lut.crypto_backend)],
        vec!["I/O path".into(), format!("{}: {}", r.lut.io, or_dash(started.map(|s| s.io.stack.clone())))],
    ];
    // A pair (docs/pairs.md): the rows above are the server's.
    if let Some(c) = &r.client_side {
        rows[0][0] = "server LUT".into();
        rows[1][0] = "server I/O path".into();
        rows.push(vec![
            "client LUT".into(),
            format!("{} {} (crypto: {})", c.lut.name, c.lut.version, c.lut.crypto_backend),
        ]);
        rows.push(vec!["client I/O path".into(), c.lut.io.to_string()]);
    }
    rows.extend([
        vec!["testcase".into(), format!("{}: {}", r.testcase.name, r.testcase.workload.describe())],
        vec!["payload per repetition".into(), format!("{} bytes, {} repetition(s)", r.size_bytes, r.repetitions.len())],
        vec![
            "nesquic".into(),
            format!("{} ({})", r.nesquic_version, or_dash(started.map(|s| s.nesquic.git_revision.clone()))),
        ],
        vec!["kernel".into(), or_dash(started.and_then(|s| s.host.kernel.clone()))],
        vec![
            "CPU".into(),
            format!(
                "{} ({} cores)",
                or_dash(started.and_then(|s| s.host.cpu_model.clone())),
                or_dash(started.and_then(|s| s.host.cores.map(|c| c.to_string())))
            ),
        ],
        vec!["probes".into(), or_dash(started.and_then(|s| s.probes.requested.clone()))],
        vec!["packet I/O measured by".into(), or_dash(started.and_then(|s| s.probes.io_mechanism.clone()))],
        vec!["functions measured by".into(), function_mechanisms(started)],
    ]);
    if !r.lut_options.is_empty() {
        rows.push(vec!["LUT options".into(), r.lut_options.join(" ")]);
    }
    page.h2("What ran");
    if let Some(source) = &r.lut.source {
        rows.insert(1, vec!["LUT built from".into(), source.describe()]);
        rows.insert(2, vec!["build proof".into(), source.proof.clone()]);
    }
    page.table(&["", ""], &rows);
    hosts(page, r);
    let functions: Vec<Vec<String>> = started
        .into_iter()
        .flat_map(|s| &s.probes.functions)
        .map(|f| vec![f.category.clone(), f.name.clone(), f.object.display().to_string(), f.mechanism.to_string()])
        .collect();
    if !functions.is_empty() {
        page.h3("Probed functions and the mechanism behind each");
        page.table(&["category", "function", "object", "mechanism"], &functions);
    }
}

/// Roles on other hosts (over SSH): where each role ran, its kernel and CPU, the NIC towards the
/// other host with its offloads, the socket buffers its LUT was granted, the clock offset.
fn hosts(page: &mut Page, r: &RunRecord) {
    if r.hosts.is_empty() {
        return;
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = r
        .hosts
        .iter()
        .map(|(role, h)| {
            let nic = or_dash(h.nic_description().or_else(|| h.nic_note.clone()));
            let buffers = r
                .repetitions
                .first()
                .and_then(|rep| rep.io_settings.iter().find(|(x, _)| x == role))
                .map(|(_, io)| format!("SO_RCVBUF {} B, SO_SNDBUF {} B", io.recv_buffer, io.send_buffer));
            let clock = h.clock.map(|c| c.describe());
            vec![
                role.to_string(),
                or_dash(h.name.clone()),
                or_dash(h.kernel.clone()),
                format!("{} ({} cores)", or_dash(h.cpu_model.clone()), or_dash(h.cores.map(|c| c.to_string()))),
                nic,
                or_dash(buffers),
                or_dash(clock),
            ]
        })
        .collect();
    page.h3("Hosts");
    page.table(&["role", "host", "kernel", "CPU", "NIC and offloads", "socket buffers granted", "clock offset"], &rows);
}

/// The kernel's function mechanism, else the distinct mechanisms of the probed functions (the
/// user-space agent names its own per function).
fn function_mechanisms(started: Option<&RunStarted>) -> String {
    let Some(probes) = started.map(|s| &s.probes) else { return "-".into() };
    if let Some(m) = &probes.function_mechanism {
        return m.clone();
    }
    let mut all: Vec<&str> = probes.functions.iter().map(|f| f.mechanism.as_str()).collect();
    all.sort_unstable();
    all.dedup();
    if all.is_empty() {
        "-".into()
    } else {
        all.join(", ")
    }
}

/// Median, min and max of every figure.
pub(crate) fn summary(page: &mut Page, r: &RunRecord) {
    for caveat in r.caveats() {
        page.note(&format!("Note: {caveat}."));
    }
    let Some(s) = &r.summary else {
        page.h2("No repetition measured");
        return;
    };
    let rows: Vec<Vec<String>> = s
        .rows(r.testcase.workload.connections)
        .into_iter()
        .map(|(label, sp, d)| {
            vec![label.to_string(), num(Some(sp.median), d), num(Some(sp.min), d), num(Some(sp.max), d)]
        })
        .collect();
    let verified = r.repetitions.iter().all(|x| x.payload_verified);
    page.h2(&format!("Summary over {} repetition(s)", s.repetitions));
    page.table(&["", "median", "min", "max"], &rows);
    page.note(&format!("Payload verified in every repetition: {verified}."));
}

/// Each repetition as a dot, the median as a line. `prefix` keeps plot names unique when two
/// runs share a page.
pub(crate) fn repetitions(page: &mut Page, r: &RunRecord, prefix: &str) -> Result<(), HtmlError> {
    page.h2("Repetitions");
    let reps = &r.repetitions;
    if reps.is_empty() {
        page.note("No repetition was measured.");
        return Ok(());
    }
    let plots: [(&str, &str, &str, Vec<f64>); 4] = [
        ("goodput", "Goodput", "Mbit/s", reps.iter().map(|x| x.goodput_mbps).collect()),
        ("handshake", "Handshake", "ms", reps.iter().map(|x| x.handshake_ms).collect()),
        ("server-cpu", "Server CPU", "CPU s", reps.iter().map(|x| x.server.cpu_total_s).collect()),
        ("client-cpu", "Client CPU", "CPU s", reps.iter().map(|x| x.client.cpu_total_s).collect()),
    ];
    for (id, title, unit, values) in plots {
        page.raw(&plot::dots(&format!("{prefix}repetitions-{id}"), title, unit, &values)?);
    }
    Ok(())
}

/// The emulated link: what was asked, what applied it, what it did.
fn link(page: &mut Page, r: &RunRecord) {
    let Some(l) = &r.link else { return };
    page.h2("Link as applied");
    let c = &l.conditions;
    let mut rows = vec![
        vec!["link".into(), l.kind.clone()],
        vec!["mechanisms".into(), l.mechanisms.join("; ")],
        vec!["rate".into(), c.rate.clone().unwrap_or_else(|| "-".into())],
        vec!["loss (%)".into(), num(c.loss_pct, 2)],
        vec!["delay (ms)".into(), num(c.delay_ms, 2)],
        vec!["jitter (ms)".into(), num(c.jitter_ms, 2)],
        vec!["reorder (%)".into(), num(c.reorder_pct, 2)],
        vec!["qdisc drops".into(), l.qdisc_drops.describe()],
    ];
    if let Some(o) = &l.observed_loss {
        rows.push(vec!["loss observed".into(), format!("{} of {} datagrams ({:.3}%)", o.dropped, o.seen, o.pct)]);
    }
    if let Some(relay) = l.relay.as_ref().and_then(|x| serde_json::to_value(x).ok()) {
        for (k, v) in relay.as_object().into_iter().flatten() {
            rows.push(vec![format!("relay {k}"), v.to_string()]);
        }
    }
    page.table(&["", ""], &rows);
}
