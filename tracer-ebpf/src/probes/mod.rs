//! The programs, one file per probe family.

pub mod calls;
pub mod floor;
pub mod futex;
pub mod procedures;
pub mod process;
pub mod sched;
pub mod status;
mod tracepoint;

pub use tracepoint::field;
