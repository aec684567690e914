//! Small formatting pieces every table shares: durations, shares, ratios, truncation, and an
//! aligned or Markdown table.

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// `ns` as a percentage of `cpu_ns` (one decimal), "-" without CPU time.
pub fn share(ns: f64, cpu_ns: f64) -> String {
    if cpu_ns > 0.0 {
        format!("{:.1}", 100.0 * ns / cpu_ns)
    } else {
        "-".into()
    }
}

/// `s` cut to `n` characters, the last one an ellipsis when cut.
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// 1.23s, 4.5ms, 12.3us, 870ns.
pub fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

/// Prints [`table`].
pub fn print_lines(header: &[String], lines: &[Vec<String>], markdown: bool) {
    print!("{}", table(header, lines, markdown));
}

/// A table: columns aligned for a terminal (two spaces apart, no trailing blanks), or Markdown.
pub fn table(header: &[String], lines: &[Vec<String>], markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str(&format!("| {} |\n", header.join(" | ")));
        out.push_str(&format!("|{}|\n", header.iter().map(|_| "---").collect::<Vec<_>>().join("|")));
        for l in lines {
            out.push_str(&format!("| {} |\n", l.join(" | ")));
        }
        return out;
    }
    // Width in characters, not bytes: cells hold "±" and "…".
    let width = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| lines.iter().map(|l| width(&l[i])).chain([width(&header[i])]).max().unwrap_or(0))
        .collect();
    let fmt = |cells: &[String]| -> String {
        let line = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ");
        line.trim_end().to_string()
    };
    for l in std::iter::once(header).chain(lines.iter().map(Vec::as_slice)) {
        out.push_str(&fmt(l));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_their_unit() {
        assert_eq!(duration(870.0), "870ns");
        assert_eq!(duration(12_340.0), "12.3us");
        assert_eq!(duration(4_500_000.0), "4.50ms");
        assert_eq!(duration(1_234_000_000.0), "1.23s");
    }

    #[test]
    fn shares_and_ratios_survive_a_zero_denominator() {
        assert_eq!(share(250.0, 1000.0), "25.0");
        assert_eq!(share(250.0, 0.0), "-");
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert_eq!(ratio(3.0, 0.0), 0.0);
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }

    #[test]
    fn tables_align_by_characters_or_become_markdown() {
        let header = vec!["LUT".to_string(), "ns".to_string()];
        let lines = vec![vec!["quinn".to_string(), "5 ± 1".to_string()], vec!["ms…".to_string(), "12".to_string()]];
        assert_eq!(table(&header, &lines, false), "LUT    ns\nquinn  5 ± 1\nms…    12\n");
        assert_eq!(table(&header, &lines, true), "| LUT | ns |\n|---|---|\n| quinn | 5 ± 1 |\n| ms… | 12 |\n");
    }
}
