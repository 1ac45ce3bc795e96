//! `tracer report`: the offline answers on a recording's graph, as a text report and as
//! JSON (schema: docs/report-json.md), with a diagnosis in words.

mod build;
mod csv;
mod diagnosis;
#[cfg(test)]
mod tests;
mod text;
mod types;

pub use csv::{arc_rows, write_arcs_csv, ArcRow};
pub use types::*;
