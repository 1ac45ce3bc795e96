//! Everything the tracer computes from records, without root, eBPF or the kernel: the
//! record format and recording files (`format`), the analysis pipeline (`analysis`:
//! matching, work clocks, the online critical path engine), the program activity graph
//! and its analyses (`graph`), metrics, predictions (`predict`), exports and
//! symbolization. Data flows one way: format -> analysis -> graph -> metrics, predict,
//! export. The `tracer` binary (tracer-user) feeds it records from the probes.

// Errors carry io sources by value; they are built once per failed run, never on the
// event path, so their size does not matter.
#![allow(clippy::result_large_err)]

pub mod analysis;
pub mod export;
pub mod format;
pub mod graph;
pub mod metrics;
pub mod predict;
pub mod report;
pub mod symbolize;
pub mod units;
