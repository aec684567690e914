//! Nesquic's text renderings, from typed records: what `nesquic run`, `trace`, `report`,
//! `compare`, `ab` and `matrix` print on a terminal (aligned tables; colour through anstream,
//! which drops it where it does not belong), and the Markdown forms for a pull-request comment.
//! The HTML page is `nesquic-html`'s; this crate is its plain-text sibling, as ripgrep's
//! `grep-printer` is beside its searcher.
//!
//! Must not know the command line, files, processes or probes: it receives what was measured
//! (`nesquic_record`, `nesquic_model`'s metrics) and writes text to stdout/stderr or returns it.

pub mod compare;
pub mod findings;
pub mod markdown;
pub mod matrix;
pub mod pairs;
pub mod probes;
pub mod profile;
pub mod run;
pub mod text;
