//! The userspace side of the tracer. Data flows one way:
//! probes (aya) -> records (decode) -> recording / summary -> analyses and reports.
//! Only `probes` and `session` touch the kernel; everything else works on decoded
//! records, so it is tested without root on recordings and synthetic streams.

// Errors carry aya/io sources by value; they are built once per failed session, never
// on the event path, so their size does not matter.
#![allow(clippy::result_large_err)]

pub mod analysis;
pub mod calls;
pub mod candidates;
pub mod export;
pub mod funcs;
pub mod graph;
pub mod libraries;
pub mod metrics;
pub mod openmp;
pub mod predict;
pub mod probes;
pub mod procfs;
pub mod recording;
pub mod records;
pub mod session;
pub mod summary;
pub mod symbolize;
pub mod symbols;
#[cfg(test)]
pub(crate) mod synth;
