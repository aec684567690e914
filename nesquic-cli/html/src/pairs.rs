//! The page of a client × server matrix (docs/pairs.md): a heat map of goodput with clients as
//! rows and servers as columns, each side's CPU per gigabyte, and why a cell did not run.

use crate::page::{escape, num, Page};

/// One client × server cell.
pub struct PairEntry {
    /// The server's LUT.
    pub server: String,
    /// The client's LUT.
    pub client: String,
    /// Median goodput over rounds, Mbit/s; `None` when the pair did not run.
    pub goodput_mbps: Option<f64>,
    /// The server's median CPU seconds per payload gigabyte.
    pub server_cpu_s_per_gb: Option<f64>,
    /// The client's.
    pub client_cpu_s_per_gb: Option<f64>,
    /// Rounds that ran.
    pub rounds: usize,
    /// Why the pair did not run (or why some of its rounds failed).
    pub why_not: Option<String>,
    /// What bound its goodput (the binding-constraint finding's label), shown on hover.
    pub binding: Option<String>,
}

/// The heat map's colour for `value` out of `max`: white to green, as an HSL lightness.
fn shade(value: f64, max: f64) -> String {
    let share = if max > 0.0 { (value / max).clamp(0.0, 1.0) } else { 0.0 };
    format!("hsl(130, 55%, {:.0}%)", 95.0 - 55.0 * share)
}

/// The pairs page: `servers` as columns, `clients` as rows, in the order given.
pub fn pairs_page(servers: &[String], clients: &[String], entries: &[PairEntry]) -> String {
    let title = "Nesquic client x server matrix";
    let mut page = Page::new(title);
    let find = |s: &str, c: &str| entries.iter().find(|e| e.server == s && e.client == c);
    let max = entries.iter().filter_map(|e| e.goodput_mbps).fold(0.0, f64::max);
    page.h2("Goodput");
    page.note(
        "Median goodput over rounds, Mbit/s; rows are clients, columns servers; darker is faster. \
         Below each figure: server / client CPU seconds per payload GB. A dash: the pair did not run (hover for why).",
    );
    let mut html = String::from("<table>\n<tr><th>client \\ server</th>");
    for s in servers {
        html.push_str(&format!("<th>{}</th>", escape(s)));
    }
    html.push_str("</tr>\n");
    for c in clients {
        html.push_str(&format!("<tr><th>{}</th>", escape(c)));
        for s in servers {
            match find(s, c) {
                Some(e) if e.goodput_mbps.is_some() => {
                    let g = e.goodput_mbps.unwrap_or_default();
                    html.push_str(&format!(
                        "<td style=\"background:{}\" title=\"{}\">{}<br><small>{} / {}</small></td>",
                        shade(g, max),
                        escape(&format!(
                            "{} rounds{}{}",
                            e.rounds,
                            e.binding.as_deref().map(|b| format!("; binding constraint: {b}")).unwrap_or_default(),
                            e.why_not.as_deref().map(|w| format!("; {w}")).unwrap_or_default()
                        )),
                        num(Some(g), 0),
                        num(e.server_cpu_s_per_gb, 2),
                        num(e.client_cpu_s_per_gb, 2)
                    ));
                }
                Some(e) => html
                    .push_str(&format!("<td title=\"{}\">-</td>", escape(e.why_not.as_deref().unwrap_or("not run")))),
                None => html.push_str("<td>-</td>"),
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
    page.raw(&html);
    let why: Vec<Vec<String>> =
        entries.iter().filter_map(|e| Some(vec![e.server.clone(), e.client.clone(), e.why_not.clone()?])).collect();
    if !why.is_empty() {
        page.h2("Pairs that did not run");
        page.table(&["server", "client", "why"], &why);
    }
    page.finish(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_shaded_by_goodput_and_a_missing_pair_says_why() {
        let entry = |server: &str, client: &str, g: Option<f64>, why: Option<&str>| PairEntry {
            server: server.into(),
            client: client.into(),
            goodput_mbps: g,
            server_cpu_s_per_gb: g.map(|_| 1.5),
            client_cpu_s_per_gb: g.map(|_| 2.25),
            rounds: 1,
            why_not: why.map(String::from),
            binding: g.map(|_| "client CPU (cost per packet)".into()),
        };
        let entries = [
            entry("quinn", "quinn", Some(4000.0), None),
            entry("tcp-tls", "quinn", None, Some("tcp-tls pairs only with itself")),
        ];
        let page = pairs_page(&["quinn".into(), "tcp-tls".into()], &["quinn".into()], &entries);
        assert!(page.contains(&format!("background:{}", shade(4000.0, 4000.0))), "{page}");
        assert!(page.contains("4000<br><small>1.50 / 2.25</small>"), "{page}");
        assert!(page.contains("title=\"1 rounds; binding constraint: client CPU (cost per packet)\""), "{page}");
        assert!(page.contains("<td title=\"tcp-tls pairs only with itself\">-</td>"), "{page}");
        assert_eq!(shade(4000.0, 4000.0), "hsl(130, 55%, 40%)");
    }
}
