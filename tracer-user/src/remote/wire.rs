//! What travels from an agent to its collector, in the types both sides use; the
//! protobuf messages they are carried in are the transport's business.

use tracer_analysis::recording::{FunctionProbe, Trailer};
use tracer_analysis::ProcessInfo;

/// What a collector asks an agent to trace on its node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceRequest {
    /// Every MPI/PVM process of the node, those running already too (`--all`); else only
    /// those that start after the request (the collector's command's job, whose
    /// processes the collector launches once every agent is tracing).
    pub every_process: bool,
    /// Stack samples per second of a thread's CPU time (0: none).
    pub sample_hz: u32,
    /// The ring buffer's size, MiB (None: the agent's default).
    pub buffer_mib: Option<u32>,
    /// The procedures to probe (the collector's `--func` patterns), in each process of
    /// the job as it becomes traced on the agent's node.
    pub funcs: Vec<String>,
    /// The executables the collector's command runs (its program and those among its
    /// arguments), to look the path-less `funcs` up in before any rank starts.
    pub func_files: Vec<String>,
}

/// One piece of a node's stream, in the order the node's session produced them: a
/// process snapshot comes before the records that need it.
#[derive(Clone, Debug, PartialEq)]
pub enum WireItem {
    /// Raw records back to back, each as the recording holds it (its kind gives its
    /// size), in the node's own ids and clock.
    Records(Vec<u8>),
    Process(ProcessInfo),
    Probe(FunctionProbe),
    /// The node's loss and failure counts so far (its final counts in the last batch).
    Counts(Trailer),
}

/// What an agent sends at a time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// 0, 1, 2, ... on one link: a gap is a loss, said loudly.
    pub seq: u64,
    /// The node's CLOCK_MONOTONIC (ns) when the batch was cut: the node's session had
    /// read every record its probes wrote before it (within its reorder window).
    pub watermark_ns: u64,
    pub items: Vec<WireItem>,
    /// The node's session ended: nothing follows this batch.
    pub last: bool,
}
