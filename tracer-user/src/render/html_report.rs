//! `tracer report --html`: the report's page (`Report::html`, in the analysis crate)
//! with the flame graph of the critical path that inferno draws, inline.

use std::io;

use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::stacks::GraphStacks;
use tracer_analysis::{HtmlPage, Report};

use super::flame_graph::inline_flame_graph;

/// Why the page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HtmlReportError {
    #[error("drawing the flame graph")]
    FlameGraph(#[from] io::Error),
}

/// What the page is about: the traced command and the recording's name.
pub struct Traced<'a> {
    pub command: &'a str,
    pub recording: &'a str,
}

/// The HTML page of `report` on the graph `rg` it was computed from.
pub fn html_report(
    report: &Report,
    rg: &RecordedGraph,
    traced: &Traced,
) -> Result<String, HtmlReportError> {
    let flame = inline_flame_graph(&GraphStacks::new(rg))?;
    Ok(report.html(&HtmlPage {
        command: traced.command,
        recording: traced.recording,
        flame_graph_svg: &flame,
    }))
}
