//! Everything the tracer computes from records, without root, eBPF or the kernel: the
//! record format and recording files (`format`), the analysis pipeline (`analysis`:
//! matching, work clocks, the online critical path engine), the program activity graph
//! and its analyses (`graph`), metrics, predictions (`predict`), exports and
//! symbolization. Data flows one way: format -> analysis -> graph -> metrics, predict,
//! export. The `tracer` binary (tracer-user) feeds it records from the probes.

// Errors carry io sources by value; they are built once per failed run, never on the
// event path, so their size does not matter.
#![allow(clippy::result_large_err)]

mod analysis;
mod export;
mod format;
mod graph;
mod metrics;
mod predict;
mod report;
mod symbolize;
mod units;

// The surface other crates use: the binary, the tests, the fuzz targets and examples.
pub use analysis::{
    analyze, futex_waits, live_merge, profile, simulate_path_values, workclock, PathValueTraffic,
    Pipeline,
};
pub use export::{
    chrome, flame, hatchet, otf2, perfetto, pprof, recording_items, sampled, stack_source, stacks,
    tables, timeline, write_behind, written, ExportError,
};
pub use format::{
    calls, cost, demangle, failures, merge, node, openmp, recording, records, samples, summary,
    Mapping, ProcessInfo,
};
pub use graph::{
    attribution, cpm, kpaths, mbm, path, recorded, whatif, ArcKind, Graph, GraphBuilder, Vertex,
    VertexId, NO_PROCEDURE,
};
pub use metrics::{Cause, Measures, Metrics, ProcedureMetrics, ProcessMetrics};
pub use predict::{network, online, placement, replay, PathProfile, RecordedRun, DEFAULT_SLICE_NS};
pub use report::{
    write_arcs_csv, ArcRow, HtmlPage, ProcedureRow, Report, ReportOptions, SampledFlameGraphs,
    SampledFunctionRow, SampledSection,
};
pub use symbolize::{base_vaddr, CodeLocation, CodeLocator, ElfLayout};
pub use units::{ms, ms_tenths, ms_text};
