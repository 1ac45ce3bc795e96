//! Pictures of what the analysis computed, drawn with crates that the analysis crate does
//! not link (they bring the C library in): the flame graph of the critical path (alone,
//! and in the HTML report's page), the Parquet tables, and the OTF2 archive (written by
//! the OTF2 C library).

pub(crate) mod flame_graph;
pub(crate) mod html_report;
pub(crate) mod otf2;
pub(crate) mod parquet;
