//! `tracer report`: the offline answers on a recording's graph, as a text report, as
//! JSON (schema: docs/report-json.md) and as an HTML page, with a diagnosis in words.

mod build;
mod csv;
mod diagnosis;
mod html;
mod markup;
mod sampled;
#[cfg(test)]
mod tests;
mod text;
mod timeline;
mod types;

pub(crate) use csv::arc_rows;
pub use csv::{write_arcs_csv, ArcRow};
pub use html::{HtmlPage, SampledFlameGraphs};
pub use types::*;
