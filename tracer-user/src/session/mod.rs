//! A recording session: load the probes, pick the targets (running processes, a command
//! we launch, or the whole system), stream what the probes write (per-CPU slots and the
//! ring buffer) to the consumers of the record stream (the recording, the summary, the
//! critical path, the online what-if), and stop cleanly when the targets are gone, at
//! the deadline or on a signal.

mod consumers;
mod context;
mod detach;
mod error;
mod event_loop;
mod finish;
mod funcs;
mod holds;
mod launch;
mod libraries;
mod memory;
mod node_filter;
mod openmp;
mod options;
mod output;
mod probing;
mod processes;
mod record;
mod remote_nodes;
mod run_as;
mod sink;
mod targets;
mod thread_calls;
mod watchdog;

pub use error::SessionError;
pub use memory::default_limit_bytes;
pub use options::{
    Analysis, ClockCorrection, Collecting, CommandStatus, CommandTerminal, Detaching, EventsSoFar,
    LossHook, NodeRole, Probed, ProbedHook, Ready, ReadyHook, RecordOptions, RecordOutcome,
    SampleHook, StopReason, StreamTo, LOSS_CHECK_PERIOD,
};
pub use output::{
    create_private, invoking_user, make_private, make_tree_private, remove_partial,
    sync_if_regular, write_private, PRIVATE_DIR_MODE, PRIVATE_MODE,
};
pub use record::record;
pub use run_as::{RunAs, RunAsError};
pub use watchdog::WatchdogError;
