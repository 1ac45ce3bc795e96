//! Metrics by level, after IPS (Miller and Yang, 1987): a user starts at the whole
//! program and descends to machines, processes, threads and procedures. At each level:
//! elapsed, CPU and work time, time blocked by cause, CPU wait (runnable, not running),
//! parallelism, response ratio, utilization and load factor; for the program, message
//! traffic matrices per pair of processes and machines; and latency distributions
//! (message latency, time blocked per call kind and per call site, procedure
//! durations) as percentiles. Definitions: docs/metrics.md.
//!
//! Everything comes from what the probes already record, fed in timestamp order through
//! the same reorder window as the critical-path analysis, so the matcher pairs the same
//! messages. Use [`Metrics::from_items`] on a recording in memory, [`Metrics::from_reader`]
//! to stream one, or feed a [`MetricsBuilder`] yourself.

mod blocking;
mod builder;
mod dist;
mod levels;
mod read;
mod sites;
mod text;
mod thread;
mod traffic;
mod types;

#[cfg(test)]
mod tests;

pub(crate) use dist::Distribution;
pub use thread::Cause;
pub use types::*;
