//! `tracer report --html`: the report's page (`Report::html`, in the analysis crate)
//! with the flame graph of the critical path that inferno draws, inline.

use std::io;

use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::sampled::SampledStacks;
use tracer_analysis::stacks::GraphStacks;
use tracer_analysis::{HtmlPage, Report, SampledFlameGraphs};

use super::flame_graph::{inline_flame_graph, inline_sampled_flame_graphs};

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
/// With `sampled` (the recording's sampled stacks, whose section the report has), their
/// critical-path, CPU and difference flame graphs too.
pub fn html_report(
    report: &Report,
    rg: &RecordedGraph,
    sampled: Option<&SampledStacks>,
    traced: &Traced,
) -> Result<String, HtmlReportError> {
    let flame = inline_flame_graph(&GraphStacks::new(rg))?;
    let graphs = sampled
        .map(|s| inline_sampled_flame_graphs(s))
        .transpose()?;
    Ok(report.html(&HtmlPage {
        command: traced.command,
        recording: traced.recording,
        flame_graph_svg: &flame,
        sampled_flame_graphs: graphs.as_ref().map(|g| SampledFlameGraphs {
            critical_path_svg: &g.critical_path,
            cpu_svg: &g.cpu,
            difference_svg: &g.difference,
        }),
    }))
}
