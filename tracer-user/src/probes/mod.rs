//! Loading the eBPF probes into the kernel and attaching them. This is the only module
//! that talks to aya; everything downstream works on decoded records.

mod attach;
pub(crate) mod btf;
mod error;
mod holds;
mod load;
mod machine;
mod maps;
mod run_stats;
pub(crate) mod slots;
pub(crate) mod tracefs;

pub(crate) use attach::{ProbePoint, TakenLinks};
pub(crate) use error::{one_line, BtfError, ProbeError, TracefsError};
pub(crate) use holds::HeldProcesses;
pub use load::UprobeLinks;
pub(crate) use load::{LinkKind, ProbeOptions, Probes};
pub use machine::{machine_memory_bytes, this_node_now, MAX_RING_MIB};
pub(crate) use machine::{monotonic_ns, this_node, ClockPair};
