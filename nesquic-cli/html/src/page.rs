//! The page itself: skeleton, CSS, headings, tables, escaping. Everything inline.

use std::fmt::Write;

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1250px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.8em; } h3 { margin-bottom: .3em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
figure.plot { display: inline-block; margin: .4em; vertical-align: top; }
figure.flame iframe { width: 100%; border: 1px solid #ddd; }
.columns { display: flex; gap: 1.5em; } .columns > div { flex: 1; min-width: 0; }
.note { color: #666; font-size: .9em; }
.regression { color: #b00; font-weight: bold; } .improvement { color: #070; }
";

/// An HTML page being written.
pub struct Page {
    body: String,
}

impl Page {
    /// A page with a `<h1>`.
    pub fn new(title: &str) -> Self {
        let mut page = Self { body: String::new() };
        page.raw(&format!("<h1>{}</h1>\n", escape(title)));
        page
    }

    /// Appends markup as is.
    pub fn raw(&mut self, html: &str) {
        self.body.push_str(html);
    }

    /// A section heading, with an id to link to (`Over time` -> `#over-time`).
    pub fn h2(&mut self, text: &str) {
        let id: String = text
            .to_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("-");
        self.raw(&format!("<h2 id=\"{}\">{}</h2>\n", escape(&id), escape(text)));
    }

    /// A sub-heading.
    pub fn h3(&mut self, text: &str) {
        self.raw(&format!("<h3>{}</h3>\n", escape(text)));
    }

    /// A paragraph of explanation.
    pub fn note(&mut self, text: &str) {
        self.raw(&format!("<p class=\"note\">{}</p>\n", escape(text)));
    }

    /// A table; cells are text (escaped).
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) {
        self.raw(&table(header, rows));
    }

    /// The markup so far, without the `<h1>` (to nest one page's sections in another).
    pub fn body(&self) -> String {
        self.body.split_once("</h1>\n").map_or(self.body.clone(), |(_, rest)| rest.to_string())
    }

    /// The whole document.
    pub fn finish(self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape(title),
            self.body
        )
    }
}

/// A table as markup; cells are text (escaped). A cell starting with `!` gets its class from
/// the text before the next `!` (`!regression!REGRESSION`).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table>\n");
    // A key/value table has no header row.
    if header.iter().any(|h| !h.is_empty()) {
        out.push_str("<tr>");
        for h in header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
    }
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            match cell.strip_prefix('!').and_then(|c| c.split_once('!')) {
                Some((class, text)) => {
                    let _ = write!(out, "<td class=\"{}\">{}</td>", escape(class), escape(text));
                }
                // Figures align on the right, text on the left.
                None if is_figure(cell) => {
                    let _ = write!(out, "<td class=\"n\">{}</td>", escape(cell));
                }
                None => {
                    let _ = write!(out, "<td>{}</td>", escape(cell));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// A number, possibly signed or a percentage (`+1.5%`), or `-` for none.
fn is_figure(cell: &str) -> bool {
    cell == "-" || cell.trim_start_matches('+').trim_end_matches('%').parse::<f64>().is_ok()
}

/// `x` with `digits` decimals, or `-` for a missing or non-finite figure.
pub fn num(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_classes_apply() {
        let t = table(&["a<b"], &[vec!["<x & y>".into()], vec!["!regression!worse".into()]]);
        assert!(t.contains("<th>a&lt;b</th>"), "{t}");
        assert!(t.contains("<td>&lt;x &amp; y&gt;</td>"), "{t}");
        assert!(t.contains("<td class=\"regression\">worse</td>"), "{t}");
        let t = table(&["", ""], &[vec!["goodput".into(), "+1.5%".into()]]);
        assert!(!t.contains("<th>") && t.contains("<td class=\"n\">+1.5%</td>"), "{t}");
    }
}
