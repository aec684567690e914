//! Nesquic's HTML report: one self-contained page per run, comparison or matrix, with every plot
//! inline (SVG drawn by `plotters`), flame graphs drawn by `inferno`, a little CSS and no
//! external reference (no `http://` or `https://` anywhere in a page, so it opens offline and
//! from a CI artifact). It receives typed records ([`nesquic_record::RunRecord`]), the traces' typed
//! events ([`nesquic_record::events`]) and folded stacks, and returns a `String`.
//!
//! Must not know the command line, processes, probes or files: callers load what a page shows
//! and write the page wherever they like.

mod compare;
mod findings;
mod flame;
mod input;
mod matrix;
mod page;
mod pairs;
mod plot;
mod probes;
mod profile;
mod run;
mod timeline;

pub use compare::{compare_page, CompareInput};
pub use matrix::{matrix_page, MatrixEntry};
pub use pairs::{pairs_page, PairEntry};
pub use run::{run_page, RunInput};

/// What can go wrong drawing a page.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// A plot could not be drawn.
    #[error("drawing the plot '{plot}': {reason}")]
    Plot {
        /// Which plot.
        plot: String,
        /// Why.
        reason: String,
    },
    /// A flame graph could not be drawn.
    #[error("drawing the flame graph '{graph}': {reason}")]
    Flame {
        /// Which graph.
        graph: String,
        /// Why.
        reason: String,
    },
}
