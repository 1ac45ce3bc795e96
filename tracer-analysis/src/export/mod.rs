//! Exports of a recording to other tools' formats (`tracer export`).
//!
//! An exporter reads the recording twice: once through the analysis, which builds the
//! program activity graph (messages matched, critical path computed), and once as a
//! stream of events for the timeline. Memory then holds the graph, never the events,
//! and the output is written as it is produced. The Parquet tables (`tables`) need
//! one pass: their rows come out of the pass that builds the graph.

pub mod chrome;
pub mod flame;
pub mod hatchet;
mod items;
pub mod otf2;
pub mod perfetto;
pub mod pprof;
mod protowire;
pub mod sampled;
pub mod stack_source;
pub mod stacks;
pub mod tables;
pub mod timeline;
pub mod write_behind;
pub mod written;

pub use items::{recording_items, ExportError};
