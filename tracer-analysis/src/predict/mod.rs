//! What-if predictions for other placements and networks (LBF and NF): a recording is
//! replayed with its processes on other CPUs and/or with message costs from a table.

pub mod network;
pub mod online;
pub mod placement;
mod polling;
mod profile;
mod recorded;
pub mod replay;
mod sim;

pub(crate) use polling::{communication_call, polls};
pub use profile::PathProfile;

pub use recorded::RecordedRun;
pub use sim::DEFAULT_SLICE_NS;
