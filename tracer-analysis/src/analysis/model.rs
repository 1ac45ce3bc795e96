//! What the analysis tells a path model: how far each thread's work clock has advanced,
//! which selected procedures it enters and leaves, and which events wait for which. The
//! online engine folds this into path lengths at once; the graph builder
//! (`crate::graph::recorded`) keeps it as a program activity graph. Both see the same
//! calls in the same order, so they describe the same graph.

use tracer_common::EventHeader;

/// Index of a selected procedure in the profile.
pub(crate) type ProcId = usize;

/// The tracked sampled functions a sample's stack is in ([`PathModel::sampled`]): each
/// once (recursion counts once), and the innermost frame's, when tracked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackProcs {
    pub inclusive: Vec<ProcId>,
    pub leaf: Option<ProcId>,
}

/// Where a process's parallel section begins and ends (MPI_Init returns, MPI_Finalize is
/// called): the span the what-if predictions compare, without launch and setup time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Milestone {
    Initialized,
    Finalizing,
}

/// Every work clock of a thread at an event (cpu, awake, wall, and held: time runnable
/// while its CPU ran work outside the program; see
/// [`super::workclock::WorkClock::clocks`]) and the raw clocks they are built on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clocks {
    pub work: [u64; 4],
    pub raw: [u64; 4],
}

impl Clocks {
    /// Adds to `self` (time pending since some event) what the clocks advanced from
    /// `last` to `now`, and moves `last` to `now` (clocks never run backwards).
    pub(crate) fn add_since(&mut self, last: &mut Clocks, now: &Clocks) {
        for k in 0..4 {
            self.work[k] += now.work[k].saturating_sub(last.work[k]);
            self.raw[k] += now.raw[k].saturating_sub(last.raw[k]);
            last.work[k] = last.work[k].max(now.work[k]);
            last.raw[k] = last.raw[k].max(now.raw[k]);
        }
    }
}

/// What the scheduler did with a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sched {
    /// Off CPU, asleep (it waits for something).
    Asleep,
    /// Off CPU but runnable: preempted.
    Preempted,
    /// Off CPU but runnable: it gave the CPU away (sched_yield).
    Yielded,
    /// Back on a CPU.
    Running,
}

pub trait PathModel {
    /// Whether the model wants every clock in [`Self::advance_clocks`] (computing them
    /// costs a little on every event).
    fn all_clocks(&self) -> bool {
        false
    }
    /// What a dependency's source leaves for its target (a path state, or a vertex).
    type Mark: Clone;

    /// Procedures `0..n` exist (they are discovered while tracing).
    fn set_procedures(&mut self, n: usize);
    /// Thread `tid` has done `work` (its work clock) by the event `at`.
    fn advance(&mut self, tid: u32, work: u64, at: &EventHeader);
    /// [`Self::advance`] with every clock (zeros unless [`Self::all_clocks`]).
    fn advance_clocks(&mut self, tid: u32, work: u64, _clocks: &Clocks, at: &EventHeader) {
        self.advance(tid, work, at);
    }
    /// The scheduler switched thread `tid` (an already advanced thread) out or in.
    fn scheduled(&mut self, _tid: u32, _what: Sched) {}
    fn enter(&mut self, tid: u32, p: ProcId);
    fn exit(&mut self, tid: u32, p: ProcId);
    /// Thread `tid` was sampled at its CPU clock `cpu_ns` in the functions `stack` (a
    /// sample is no event: it neither advances the thread nor cuts its work).
    fn sampled(&mut self, _tid: u32, _cpu_ns: u64, _stack: &StackProcs) {}
    /// Whether no path that may still be critical (as [`super::Analyzer`] decides:
    /// `include` and `only_participants`) has time in procedure `p`, so that its column
    /// can go to another sampled function ([`Self::reuse`]).
    fn unused(&self, _p: ProcId, _include: &dyn Fn(u32) -> bool, _only_participants: bool) -> bool {
        false
    }
    /// Procedure `p` starts over as another function: no time in it on any path.
    fn reuse(&mut self, _p: ProcId) {}
    /// The thread's current event is the source of a dependency.
    fn snapshot(&mut self, tid: u32) -> Self::Mark;
    /// The thread's current event waited for `incoming`.
    fn merge(&mut self, tid: u32, incoming: &Self::Mark);
    /// The thread's current event received a message (or took part in a collective) of
    /// `bytes`, when known, that `incoming` sent: a dependency the network carries.
    fn merge_message(&mut self, tid: u32, incoming: &Self::Mark, bytes: Option<u64>) {
        let _ = bytes;
        self.merge(tid, incoming);
    }
    /// The thread's current event is a milestone.
    fn milestone(&mut self, _tid: u32, _m: Milestone) {}
    /// The thread ended; `participant` says whether its process may end the path.
    fn end_thread(&mut self, tid: u32, participant: bool);
    /// Live threads held (for the memory-bound tests).
    fn threads_held(&self) -> usize;
}

/// No path model: for passes that need only the analyzer's call pairing and message
/// matching (the metrics, the table export).
pub(crate) struct NoPaths;

impl PathModel for NoPaths {
    type Mark = ();
    fn set_procedures(&mut self, _: usize) {}
    fn advance(&mut self, _: u32, _: u64, _: &EventHeader) {}
    fn enter(&mut self, _: u32, _: usize) {}
    fn exit(&mut self, _: u32, _: usize) {}
    fn snapshot(&mut self, _: u32) {}
    fn merge(&mut self, _: u32, _: &()) {}
    fn end_thread(&mut self, _: u32, _: bool) {}
    fn threads_held(&self) -> usize {
        0
    }
}
