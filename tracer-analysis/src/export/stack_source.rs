//! Weighted stacks, whatever measured them: what the stack exports (folded stacks, the
//! SVG flame graph, pprof, Hatchet) read, and all they read. Today the one source is the
//! activity graph's procedure stacks ([`super::stacks::GraphStacks`]); sampled call
//! stacks would be another [`StackSource`], and every stack export would draw them
//! unchanged.

use crate::analysis::workclock::ClockKind;
use crate::graph::recorded::ProcessLabel;

/// What one stack weighs, in nanoseconds: its own time, not its callees'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackWeights {
    /// Time of this stack on the critical path (critical-path time); the stacks' sum is
    /// the path's length. 0 for a source that knows no critical path.
    pub critical_path_ns: u64,
    /// All time of this stack on the source's work clock ([`SourceSummary::clock`]:
    /// CPU time for `cpu`, elapsed time for `wall`), on the path or not.
    pub work_ns: u64,
}

/// One thread's time in one stack of frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedStack {
    pub pid: u32,
    pub tid: u32,
    /// Frames, outermost first; never empty (a profile needs a frame to hang a weight on).
    pub frames: Vec<String>,
    pub weights: StackWeights,
}

/// What the critical path gets shorter by if a procedure took no time (callees
/// included). A procedure's weight, not a stack's: two procedures' gains do not add up,
/// so no stack could carry them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureZeroing {
    /// A procedure (a frame name of the stacks).
    pub procedure: String,
    /// Its symbol as the binary has it (mangled for C++ and Rust); none for a frame that
    /// is no selected procedure.
    pub symbol: Option<String>,
    pub zeroing_ns: u64,
}

/// What the weights were measured on and over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceSummary {
    /// The work clock of [`StackWeights::work_ns`].
    pub clock: ClockKind,
    pub critical_path_ns: u64,
    /// First to last analysed event (probe clock).
    pub elapsed_ns: u64,
    /// Events in the recording and events the probes dropped.
    pub events_recorded: u64,
    pub events_lost: u64,
}

/// Where the stack exports take their stacks from.
pub trait StackSource {
    fn summary(&self) -> &SourceSummary;
    /// Stacks with some weight, sorted by process, thread and frames, each once.
    fn stacks(&self) -> &[WeightedStack];
    /// The procedures' zeroing gains, in the source's order of procedures; empty for a
    /// source that cannot recompute the path.
    fn zeroing(&self) -> &[ProcedureZeroing];
    /// The command and MPI rank of a process, if the source knows them.
    fn process(&self, pid: u32) -> Option<&ProcessLabel>;

    /// A process's MPI rank, if it has one.
    fn rank(&self, pid: u32) -> Option<i32> {
        self.process(pid).and_then(|p| p.rank)
    }
}
