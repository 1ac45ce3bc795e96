//! The `tracer` binary's library: finding targets (`target`), loading and attaching the
//! eBPF probes (`probes`), running a tracing session (`session`), resolving addresses
//! (`symbolize`) and drawing flame graphs (`render`). Data flows one way:
//! probes -> session -> the analysis crate (`tracer_analysis`: decode, recording,
//! analyses, reports), which needs neither root nor eBPF.

// Errors carry aya/io sources by value; they are built once per failed session, never
// on the event path, so their size does not matter.
#![allow(clippy::result_large_err)]

pub mod probes;
pub mod render;
pub mod session;
pub mod symbolize;
pub mod target;
