//! The program activity graph of a recording and the offline analyses on it.
//!
//! Vertices are events; arcs are program order inside a thread (weighted by the work
//! clock) and the dependencies the matcher finds (messages, collectives), weighted 0
//! (an infinitely fast network, as online). Vertex ids are handed out in the order the
//! events are analysed, and every arc goes from an older vertex to a newer one, so id
//! order is a topological order: every pass below is a single sweep.
//!
//! A finished graph has one virtual source (vertex 0, with an arc to every vertex that
//! has no other incoming arc) and one virtual sink (the last vertex, with an arc from
//! the last event of every thread that may end the critical path). Paths are the
//! source-to-sink paths.

pub mod attribution;
pub mod cpm;
pub mod kpaths;
pub mod mbm;
pub mod path;
pub(crate) mod phases;
pub mod recorded;
pub mod whatif;

mod builder;
mod types;

#[cfg(test)]
mod testgraphs;

pub use builder::GraphBuilder;
pub use types::*;
