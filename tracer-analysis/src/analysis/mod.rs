//! The analysis pipeline over decoded records: per-thread call pairing and work clock,
//! message matching, and the online critical path engine. The same code runs live
//! inside `tracer record` and offline in `tracer analyze` on a recording.

mod analyzer;
pub(crate) mod directory;
pub(crate) mod engine;
pub(crate) mod faults;
mod late;
pub mod live_merge;
pub(crate) mod matcher;
pub(crate) mod model;
pub(crate) mod ordered;
mod path_values;
mod pipeline;
pub mod profile;
pub(crate) mod reorder;
mod sampled;
pub(crate) mod sync;
pub mod workclock;

#[cfg(test)]
mod tests;

pub(crate) use analyzer::{makes_participant, poll_loop_went_on};
pub(crate) use analyzer::{Analyzer, Procedures};
pub(crate) use model::{Clocks, Milestone, NoPaths, PathModel, Sched};
pub use path_values::{simulate_path_values, PathValueTraffic};
pub use pipeline::{analyze, Pipeline};
pub(crate) use reorder::REORDER_WINDOW_NS;
pub use tracer_common::futex_waits;
