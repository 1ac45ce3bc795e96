//! The `tracer` binary's library: finding targets (`target`), loading and attaching the
//! eBPF probes (`probes`), running a tracing session (`session`), resolving addresses
//! (`symbolize`) and drawing flame graphs (`render`). Data flows one way:
//! probes -> session -> the analysis crate (`tracer_analysis`: decode, recording,
//! analyses, reports), which needs neither root nor eBPF.

// Errors carry aya/io sources by value; they are built once per failed session, never
// on the event path, so their size does not matter.
#![allow(clippy::result_large_err)]

mod probes;
pub mod remote;
mod render;
pub mod session;
mod symbolize;
mod target;
mod unwind;

// The surface the `tracer` binary (`cli/`) and the integration tests use: the session
// (its own curated `pub use` list), and these. Everything else is the crate's own.
pub use probes::{machine_memory_bytes, this_node_now, UprobeLinks, MAX_RING_MIB};
pub use render::flame_graph::write_flame_graph;
pub use render::html_report::{html_report, Traced};
pub use render::otf2::{write_otf2, Otf2Error};
pub use render::parquet::{ParquetExport, ParquetStats};
pub use symbolize::Symbolizer;
pub use target::candidates;
