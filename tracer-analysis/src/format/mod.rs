//! The data the analyses read: decoded probe records, the recording file, process
//! metadata, the call table (and the facts about messages and collectives its columns
//! hold, `call_facts`), the pairing of calls' entries with their exits, the probes'
//! failure counts, the summary of a stream of records, and what a session cost (`cost`).

pub(crate) mod call_facts;
pub mod calls;
pub mod cost;
pub mod demangle;
pub mod failures;
pub mod merge;
pub mod node;
pub mod openmp;
pub(crate) mod pairing;
pub(crate) mod probe_ids;
pub(crate) mod process;
pub(crate) mod read_ahead;
pub mod recording;
pub mod records;
pub mod samples;
pub mod summary;
#[cfg(test)]
pub(crate) mod synth;

pub use process::{Mapping, ProcessInfo};
