//! Flame graphs drawn by `inferno`, each in an `<iframe srcdoc>`: the graph keeps its own
//! script (click to zoom, search) and style without either reaching the rest of the page.

use crate::page::escape;
use crate::HtmlError;

/// Folded stacks (`outer;...;leaf`, count).
pub type Folded = [(String, u64)];

fn options(title: &str) -> inferno::flamegraph::Options<'static> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = "samples".into();
    // Stable colours: a function keeps its colour from page to page.
    opt.hash = true;
    opt.deterministic = true;
    opt.min_width = 0.05;
    opt.image_width = Some(1200);
    opt
}

/// A flame graph of `stacks`; its `#frames` group carries `total_samples`.
pub fn flame_graph(id: &str, title: &str, stacks: &Folded) -> Result<String, HtmlError> {
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut svg = Vec::new();
    let mut opt = options(title);
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| HtmlError::Flame { graph: id.to_string(), reason: e.to_string() })?;
    embed(id, &svg)
}

/// A differential flame graph: `head`'s stacks, coloured by how each frame's share changed from
/// `base` (red grew, blue shrank; `base` is scaled to `head`'s sample count first).
pub fn differential(id: &str, title: &str, base: &Folded, head: &Folded) -> Result<String, HtmlError> {
    let text = |f: &Folded| f.iter().map(|(s, n)| format!("{s} {n}\n")).collect::<String>();
    let (base, head) = (text(base), text(head));
    let mut folded = Vec::new();
    let diff = inferno::differential::Options { normalize: true, strip_hex: false };
    let fail = |e: std::io::Error| HtmlError::Flame { graph: id.to_string(), reason: e.to_string() };
    inferno::differential::from_readers(diff, base.as_bytes(), head.as_bytes(), &mut folded).map_err(fail)?;
    let folded = String::from_utf8_lossy(&folded).into_owned();
    let mut svg = Vec::new();
    let mut opt = options(title);
    inferno::flamegraph::from_lines(&mut opt, folded.lines(), &mut svg).map_err(fail)?;
    embed(id, &svg)
}

/// Strips what an inline document does not need and the page must not hold (XML prologue,
/// DOCTYPE and namespace URLs, comments naming web sites) and wraps the graph in an iframe as
/// tall as the graph.
fn embed(id: &str, svg: &[u8]) -> Result<String, HtmlError> {
    let svg = String::from_utf8_lossy(svg);
    let start = svg
        .find("<svg")
        .ok_or_else(|| HtmlError::Flame { graph: id.into(), reason: "no <svg> in inferno's output".into() })?;
    let mut svg = svg[start..].to_string();
    for ns in [
        " xmlns=\"http://www.w3.org/2000/svg\"",
        " xmlns:xlink=\"http://www.w3.org/1999/xlink\"",
        " xmlns:fg=\"http://github.com/jonhoo/inferno\"",
    ] {
        svg = svg.replace(ns, "");
    }
    while let (Some(a), Some(b)) = (svg.find("<!--"), svg.find("-->")) {
        if b < a {
            break;
        }
        svg.replace_range(a..b + 3, "");
    }
    // What is left names sites only in the script's comments and messages: keep the text, drop
    // the scheme, so nothing in the page is a link to follow.
    let svg = svg.replace("https://", "").replace("http://", "");
    let height = svg
        .split_once("height=\"")
        .and_then(|(_, rest)| rest.split('"').next())
        .and_then(|h| h.parse::<u32>().ok())
        .unwrap_or(600);
    // Inferno keeps the zoom in the URL (`?x=..&y=..`); a frame's document (about:srcdoc) may not
    // change its URL, so that step is left out rather than failing on every click.
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0}} svg{{width:100%}}</style>\
         <script>history.replaceState = function () {{}};</script></head><body>{svg}</body></html>"
    );
    Ok(format!(
        "<figure class=\"flame\" data-flame=\"{}\">\n<iframe title=\"{}\" height=\"{}\" srcdoc=\"{}\"></iframe>\n</figure>\n",
        escape(id),
        escape(id),
        height + 8,
        escape(&doc)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flame_graph_holds_every_sample_and_no_url() {
        let stacks = vec![("main;a".to_string(), 3), ("main;b;c".to_string(), 4)];
        let html = flame_graph("server", "t", &stacks).expect("drawn");
        assert!(html.contains("total_samples=&quot;7&quot;"), "{html}");
        assert!(!html.contains("http://") && !html.contains("https://"));
        let html = differential("d", "t", &stacks, &[("main;a".to_string(), 5)]).expect("drawn");
        assert!(html.contains("total_samples=&quot;5&quot;"), "{html}");
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
