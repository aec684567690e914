//! The page of a matrix: grouped bars across LUTs and I/O paths (goodput with its spread, CPU
//! per gigabyte), and the table.

use nesquic_record::figures::Spread;

use crate::page::{num, Page};
use crate::plot;
use crate::HtmlError;

/// One combination of the matrix, over its rounds.
pub struct MatrixEntry {
    /// The LUT (with version).
    pub lut: String,
    /// The I/O path, options, buffers and testcase that make this combination.
    pub variant: String,
    /// Goodput over rounds, Mbit/s.
    pub goodput_mbps: Spread,
    /// Median CPU seconds, server + client, per payload gigabyte.
    pub cpu_s_per_gb: f64,
    /// Rounds.
    pub rounds: usize,
}

/// The matrix page.
pub fn matrix_page(entries: &[MatrixEntry]) -> Result<String, HtmlError> {
    let title = "Nesquic matrix";
    let mut page = Page::new(title);
    let mut luts: Vec<String> = Vec::new();
    let mut variants: Vec<String> = Vec::new();
    for e in entries {
        if !luts.contains(&e.lut) {
            luts.push(e.lut.clone());
        }
        if !variants.contains(&e.variant) {
            variants.push(e.variant.clone());
        }
    }
    let series = |f: &dyn Fn(&MatrixEntry) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
        variants
            .iter()
            .map(|v| {
                let values =
                    luts.iter().map(|l| entries.iter().find(|e| &e.lut == l && &e.variant == v).map(f)).collect();
                (v.clone(), values)
            })
            .collect()
    };
    page.h2("Goodput and CPU per LUT and I/O path");
    page.note("Bars: medians over rounds, one colour per I/O path (and options); the table gives the spread.");
    page.raw(&plot::grouped(
        "matrix-goodput",
        "Goodput (median over rounds)",
        "Mbit/s",
        &luts,
        &series(&|e| e.goodput_mbps.median),
    )?);
    page.raw(&plot::grouped(
        "matrix-cpu",
        "CPU per GB, server + client",
        "CPU s per GB",
        &luts,
        &series(&|e| e.cpu_s_per_gb),
    )?);
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let g = &e.goodput_mbps;
            vec![
                e.lut.clone(),
                e.variant.clone(),
                e.rounds.to_string(),
                num(Some(g.median), 0),
                format!("{:.0}-{:.0}", g.min, g.max),
                num(Some(e.cpu_s_per_gb), 3),
            ]
        })
        .collect();
    page.table(&["LUT", "variant", "rounds", "goodput Mbit/s", "min-max", "CPU s per GB"], &rows);
    Ok(page.finish(title))
}
