//! Loading the eBPF probes into the kernel and attaching them. This is the only module
//! that talks to aya; everything downstream works on decoded records.

mod attach;
pub mod btf;
mod error;
mod holds;
mod load;
mod machine;
mod maps;
pub mod slots;
pub mod tracefs;

pub use attach::{ProbePoint, TakenLinks};
pub use error::{one_line, BtfError, ProbeError, TracefsError};
pub use holds::HeldProcesses;
pub use load::{LinkKind, ProbeOptions, Probes, UprobeLinks};
pub use machine::{default_ring_bytes, machine_memory_bytes, monotonic_ns, this_node, ClockPair};
