//! Pictures of what the analysis computed, drawn with crates that the analysis crate does
//! not link (they bring the C library in): the flame graph of the critical path.

pub mod flame_graph;
pub mod otf2;
