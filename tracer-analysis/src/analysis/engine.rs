//! The online critical path (Hollingsworth 1998): no graph is kept. Each thread carries
//! the length of the longest path ending at its latest event and how much of that path
//! each selected procedure accounts for; messages carry a copy from the sender; a
//! receiver adopts the longer of its own path and the incoming one.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use tracer_common::EventHeader;

use super::model::{PathModel, ProcId, StackProcs};

/// The critical path so far: the thread it ends in and the path itself.
#[derive(Clone, Debug, Default)]
pub struct CriticalEnd {
    pub tid: u32,
    pub path: PathState,
}

/// What a thread knows about the longest path ending at its latest event. A send stores
/// a copy with the message; a receive merges it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathState {
    pub longest: u64,
    /// Per procedure: time of the path spent inside it (callees included).
    pub inclusive: Vec<u64>,
    /// Per procedure: time of the path spent inside it and not in a selected callee.
    pub exclusive: Vec<u64>,
    /// Per procedure: length of the longest path if that procedure took no time.
    pub zeroed: Vec<u64>,
    /// Per thread the path runs through: its time on the path. The thread whose path
    /// this is keeps its own entry last, so that extending the path finds it at once.
    pub by_thread: Vec<ThreadShare>,
}

/// A thread's time on a path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadShare {
    pub tid: u32,
    pub ns: u64,
}

impl PathState {
    fn zeroed_at(&self, p: ProcId) -> u64 {
        // A procedure first seen later never ran on this path: zeroing it changes nothing.
        self.zeroed.get(p).copied().unwrap_or(self.longest)
    }

    /// Adds `ns` of thread `tid`'s work to the path.
    fn add_thread_time(&mut self, tid: u32, ns: u64) {
        match self.by_thread.last_mut() {
            Some(last) if last.tid == tid => last.ns += ns,
            _ => {
                match self.by_thread.iter().position(|s| s.tid == tid) {
                    Some(i) => {
                        let own = self.by_thread.remove(i);
                        self.by_thread.push(own);
                    }
                    None => self.by_thread.push(ThreadShare { tid, ns: 0 }),
                }
                if let Some(last) = self.by_thread.last_mut() {
                    last.ns += ns;
                }
            }
        }
    }

    fn grow(&mut self, n: usize) {
        while self.zeroed.len() < n {
            self.zeroed.push(self.longest);
        }
        self.inclusive.resize(n.max(self.inclusive.len()), 0);
        self.exclusive.resize(n.max(self.exclusive.len()), 0);
    }

    /// Merges a path that ends at the same event: the longer one wins (ties keep ours);
    /// each zeroed length is compared on its own, since zeroing one procedure can make
    /// the other path the longer one.
    /// Returns whether `other` replaced the path.
    pub fn merge(&mut self, other: &PathState) -> bool {
        let n = self.zeroed.len().max(other.zeroed.len());
        self.grow(n);
        for p in 0..n {
            self.zeroed[p] = self.zeroed[p].max(other.zeroed_at(p));
        }
        if other.longest > self.longest {
            self.longest = other.longest;
            self.inclusive.clear();
            self.inclusive.extend_from_slice(&other.inclusive);
            self.exclusive.clear();
            self.exclusive.extend_from_slice(&other.exclusive);
            self.inclusive.resize(n, 0);
            self.exclusive.resize(n, 0);
            self.by_thread.clear();
            self.by_thread.extend_from_slice(&other.by_thread);
            return true;
        }
        false
    }

    /// Procedure `p` starts over: no time in it, and the path no shorter without it.
    fn clear(&mut self, p: ProcId) {
        if let Some(cp) = self.inclusive.get_mut(p) {
            *cp = 0;
        }
        if let Some(cp) = self.exclusive.get_mut(p) {
            *cp = 0;
        }
        if let Some(z) = self.zeroed.get_mut(p) {
            *z = self.longest;
        }
    }

    /// `work` of the path was spent in the sampled functions `stack`.
    fn add_sampled(&mut self, stack: &StackProcs, work: u64) {
        if work == 0 {
            return;
        }
        for &p in &stack.inclusive {
            if let Some(cp) = self.inclusive.get_mut(p) {
                *cp += work;
            }
            if let Some(z) = self.zeroed.get_mut(p) {
                *z = z.saturating_sub(work);
            }
        }
        if let Some(cp) = stack.leaf.and_then(|p| self.exclusive.get_mut(p)) {
            *cp += work;
        }
    }
}

/// Samples waiting for the work they stand for, per thread: at most this many (a thread
/// computing for longer than this many sampling periods without an event lets the
/// oldest go, their time going to the next one).
const MAX_PENDING_SAMPLES: usize = 64;

/// Where a thread's samples put its work on its path (docs/sampled-attribution.md,
/// "Live"). A sample at CPU clock `at` stands for the thread's CPU time since its
/// previous sample; the work the engine adds between two events is spread evenly over
/// their CPU interval, so each sample takes the work of the part of its interval the
/// thread has reached, when that work comes (`pending`: samples later than the latest
/// event). Work past the latest sample goes at once to that sample's stack (`held`), the
/// code the thread was last seen in: a message sent before the next sample carries the
/// path with all its work attributed (left for the next sample, the work of every
/// stretch between a sample and a send would be missing from the receiver's path).
#[derive(Clone, Debug, Default)]
struct SampleSpans {
    /// CPU clock at the thread's latest advance (None before its first).
    advanced_cpu: Option<u64>,
    /// Work on the thread's path before its first sample, for that sample.
    carry: u64,
    /// Samples later than `advanced_cpu`, oldest first.
    pending: VecDeque<PendingSample>,
    /// The stack of the latest sample whose interval the thread has passed.
    held: Option<StackProcs>,
}

#[derive(Clone, Debug)]
struct PendingSample {
    at: u64,
    stack: StackProcs,
}

impl SampleSpans {
    /// The thread added `work` to `path` over its CPU clock from `advanced_cpu` to `cpu`.
    fn spread(&mut self, path: &mut PathState, cpu: u64, work: u64) {
        let from = self.advanced_cpu.unwrap_or(cpu);
        let to = cpu.max(from);
        self.advanced_cpu = Some(to);
        let span = to - from;
        let mut at = from;
        let mut left = work;
        while let Some(p) = self.pending.front() {
            if p.at > to {
                break;
            }
            let part = match span {
                0 => left,
                _ => ((work as u128 * (p.at.max(at) - at) as u128) / span as u128) as u64,
            }
            .min(left);
            path.add_sampled(&p.stack, part);
            left -= part;
            at = p.at.max(at);
            self.held = self.pending.pop_front().map(|p| p.stack);
        }
        // The rest of the interval: inside the next sample's, or after the latest one.
        match (self.pending.front(), &self.held) {
            (Some(p), _) => path.add_sampled(&p.stack, left),
            (None, Some(held)) => path.add_sampled(held, left),
            (None, None) => self.carry += left,
        }
    }

    /// A sample at CPU clock `at`.
    fn sample(&mut self, path: &mut PathState, at: u64, stack: &StackProcs) {
        path.add_sampled(stack, std::mem::take(&mut self.carry));
        if self.advanced_cpu.is_some_and(|c| at <= c) {
            self.held = Some(stack.clone());
            return;
        }
        if self.pending.len() == MAX_PENDING_SAMPLES {
            self.pending.pop_front();
        }
        self.pending.push_back(PendingSample {
            at,
            stack: stack.clone(),
        });
    }
}

#[derive(Clone, Debug, Default)]
struct ThreadPath {
    path: PathState,
    /// Work clock at the latest event (None before the first).
    last_work: Option<u64>,
    /// Active depth per procedure (recursion counts once).
    depth: Vec<u32>,
    /// Selected procedures in call order, innermost last (for exclusive time).
    stack: Vec<ProcId>,
    samples: SampleSpans,
}

impl ThreadPath {
    /// Adds `delta` of thread `tid`'s work to its path (`n` procedures).
    fn extend(&mut self, tid: u32, delta: u64, n: usize) {
        self.path.longest += delta;
        self.path.add_thread_time(tid, delta);
        for p in 0..n {
            if self.depth[p] > 0 {
                self.path.inclusive[p] += delta;
            } else {
                self.path.zeroed[p] += delta;
            }
        }
        if let Some(&top) = self.stack.last() {
            self.path.exclusive[top] += delta;
        }
    }
}

#[derive(Default)]
pub struct CriticalPathEngine {
    procedures: usize,
    threads: FxHashMap<u32, ThreadPath>,
    /// Threads that ended, folded into one path each for participants and for the rest
    /// (the longest, with every zeroed length).
    ended: [Option<CriticalEnd>; 2],
}

/// A path that may be the critical one: the thread it ends in and the path.
struct Candidate<'a> {
    tid: u32,
    path: &'a PathState,
}

impl CriticalPathEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes room for procedures up to `n` (they are discovered while tracing).
    pub(crate) fn set_procedures(&mut self, n: usize) {
        self.procedures = self.procedures.max(n);
    }

    fn thread(&mut self, tid: u32) -> &mut ThreadPath {
        let n = self.procedures;
        let t = self.threads.entry(tid).or_default();
        if t.depth.len() < n {
            t.depth.resize(n, 0);
            t.path.grow(n);
        }
        t
    }

    /// The thread did `work` (its work clock) by now, its CPU clock at `cpu`: extend its
    /// path.
    pub(crate) fn advance(&mut self, tid: u32, work: u64, cpu: u64) {
        let n = self.procedures;
        let t = self.thread(tid);
        // A thread's path starts at its first event (tracing may begin mid-run).
        let last = t.last_work.unwrap_or(work);
        let delta = work.saturating_sub(last);
        t.last_work = Some(last.max(work));
        if delta > 0 {
            t.extend(tid, delta, n);
        }
        // After the path grew: the samples take their part of what it grew by.
        t.samples.spread(&mut t.path, cpu, delta);
    }

    pub fn enter(&mut self, tid: u32, p: ProcId) {
        let t = self.thread(tid);
        t.depth[p] += 1;
        t.stack.push(p);
    }

    pub fn exit(&mut self, tid: u32, p: ProcId) {
        let t = self.thread(tid);
        // A procedure entered before tracing began exits without an entry: ignore it.
        if let Some(i) = t.stack.iter().rposition(|&q| q == p) {
            t.stack.remove(i);
            t.depth[p] -= 1;
        }
    }

    pub fn snapshot(&mut self, tid: u32) -> PathState {
        self.thread(tid).path.clone()
    }

    pub fn merge(&mut self, tid: u32, incoming: &PathState) {
        let t = self.thread(tid);
        if t.path.merge(incoming) {
            // The thread's work before its first sample is no longer on its path.
            t.samples.carry = 0;
        }
    }

    /// Thread `tid` was sampled at CPU clock `cpu_ns` in the tracked functions `stack`.
    pub(crate) fn sampled(&mut self, tid: u32, cpu_ns: u64, stack: &StackProcs) {
        let t = self.thread(tid);
        t.samples.sample(&mut t.path, cpu_ns, stack);
    }

    /// A thread exited: its path still counts, but its state is no longer needed.
    /// `participant` says which group it belongs to (see [`Self::critical`]).
    pub(crate) fn end_thread(&mut self, tid: u32, participant: bool) {
        let Some(t) = self.threads.remove(&tid) else {
            return;
        };
        match &mut self.ended[participant as usize] {
            slot @ None => *slot = Some(CriticalEnd { tid, path: t.path }),
            Some(e) => {
                if t.path.longest > e.path.longest {
                    e.tid = tid;
                }
                e.path.merge(&t.path);
            }
        }
    }

    /// Paths that count: live threads for which `include` holds, and the ended group(s).
    fn candidates<'a>(
        &'a self,
        include: &'a dyn Fn(u32) -> bool,
        only_participants: bool,
    ) -> impl Iterator<Item = Candidate<'a>> + 'a {
        let live = self
            .threads
            .iter()
            .filter(move |(tid, _)| include(**tid))
            .map(|(tid, t)| Candidate {
                tid: *tid,
                path: &t.path,
            });
        let ended = self
            .ended
            .iter()
            .enumerate()
            .filter(move |(i, _)| !only_participants || *i == 1)
            .filter_map(|(_, e)| {
                e.as_ref().map(|e| Candidate {
                    tid: e.tid,
                    path: &e.path,
                })
            });
        live.chain(ended)
    }

    /// The longest path and the thread it ends in. With `only_participants`, only threads
    /// for which `include` holds (and ended participant threads) count.
    pub fn critical(
        &self,
        include: &dyn Fn(u32) -> bool,
        only_participants: bool,
    ) -> Option<CriticalEnd> {
        self.candidates(include, only_participants)
            .max_by_key(|c| (c.path.longest, std::cmp::Reverse(c.tid)))
            .map(|c| CriticalEnd {
                tid: c.tid,
                path: c.path.clone(),
            })
    }

    /// Length of the longest path with procedure `p` taking no time (same candidates).
    pub fn zeroed_length(
        &self,
        p: ProcId,
        include: &dyn Fn(u32) -> bool,
        only_participants: bool,
    ) -> u64 {
        self.candidates(include, only_participants)
            .map(|c| c.path.zeroed_at(p))
            .max()
            .unwrap_or(0)
    }

    /// Whether no path that may still be critical (as [`Self::critical`] takes them) has
    /// time in procedure `p`.
    pub(crate) fn unused(
        &self,
        p: ProcId,
        include: &dyn Fn(u32) -> bool,
        only_participants: bool,
    ) -> bool {
        self.candidates(include, only_participants)
            .all(|c| c.path.inclusive.get(p).is_none_or(|&cp| cp == 0))
    }

    /// Procedure `p` starts over as another function (a sampled function's column given
    /// to another: [`super::sampled`]). A path state a message in flight still carries
    /// keeps its old figures, which a receive may adopt: the column is reused only while
    /// no path that may still be critical has time in it ([`Self::unused`]).
    pub(crate) fn reuse(&mut self, p: ProcId) {
        for t in self.threads.values_mut() {
            t.path.clear(p);
            let held = t.samples.held.iter_mut();
            for stack in t
                .samples
                .pending
                .iter_mut()
                .map(|s| &mut s.stack)
                .chain(held)
            {
                stack.inclusive.retain(|&q| q != p);
                if stack.leaf == Some(p) {
                    stack.leaf = None;
                }
            }
        }
        for e in self.ended.iter_mut().flatten() {
            e.path.clear(p);
        }
    }

    /// Entries held (threads), for the memory-bound tests.
    pub(crate) fn threads_held(&self) -> usize {
        self.threads.len()
    }
}

impl PathModel for CriticalPathEngine {
    type Mark = PathState;

    fn set_procedures(&mut self, n: usize) {
        CriticalPathEngine::set_procedures(self, n)
    }
    fn advance(&mut self, tid: u32, work: u64, at: &EventHeader) {
        CriticalPathEngine::advance(self, tid, work, at.cpu_ns)
    }
    fn enter(&mut self, tid: u32, p: ProcId) {
        CriticalPathEngine::enter(self, tid, p)
    }
    fn exit(&mut self, tid: u32, p: ProcId) {
        CriticalPathEngine::exit(self, tid, p)
    }
    fn snapshot(&mut self, tid: u32) -> PathState {
        CriticalPathEngine::snapshot(self, tid)
    }
    fn merge(&mut self, tid: u32, incoming: &PathState) {
        CriticalPathEngine::merge(self, tid, incoming)
    }
    fn sampled(&mut self, tid: u32, cpu_ns: u64, stack: &StackProcs) {
        CriticalPathEngine::sampled(self, tid, cpu_ns, stack)
    }
    fn unused(&self, p: ProcId, include: &dyn Fn(u32) -> bool, only_participants: bool) -> bool {
        CriticalPathEngine::unused(self, p, include, only_participants)
    }
    fn reuse(&mut self, p: ProcId) {
        CriticalPathEngine::reuse(self, p)
    }
    fn end_thread(&mut self, tid: u32, participant: bool) {
        CriticalPathEngine::end_thread(self, tid, participant)
    }
    fn threads_held(&self) -> usize {
        CriticalPathEngine::threads_held(self)
    }
}

#[cfg(test)]
mod tests {
    use super::{CriticalPathEngine, StackProcs};

    fn stack(p: usize) -> StackProcs {
        StackProcs {
            inclusive: vec![p],
            leaf: Some(p),
        }
    }

    /// Samples that arrive before the work they stand for take it when it comes, split
    /// at their CPU clocks; work before a sample and after the previous one is its own.
    #[test]
    fn samples_take_the_work_of_their_cpu_interval() {
        let mut e = CriticalPathEngine::new();
        e.set_procedures(2);
        e.advance(1, 0, 1_000);
        e.sampled(1, 1_040, &stack(0));
        e.sampled(1, 1_100, &stack(1));
        e.advance(1, 100, 1_100);
        let p = e.snapshot(1);
        assert_eq!((p.inclusive[0], p.inclusive[1]), (40, 60));
        assert_eq!((p.exclusive[0], p.exclusive[1]), (40, 60));
        assert_eq!((p.zeroed[0], p.zeroed[1]), (60, 40));
        // Work past the latest sample goes to its stack at once (10 to procedure 1); a
        // later sample takes the part of its interval the next event brings (20 of 90),
        // and holds the rest (70).
        e.advance(1, 110, 1_110);
        assert_eq!(e.snapshot(1).inclusive[1], 70);
        e.sampled(1, 1_130, &stack(0));
        e.advance(1, 200, 1_200);
        let p = e.snapshot(1);
        assert_eq!((p.inclusive[0], p.inclusive[1]), (40 + 20 + 70, 70));
        assert_eq!(p.zeroed[0], 200 - 130);
    }

    /// A longer path that replaces the thread's drops the thread's work since its last
    /// sample from it: the next sample does not count that work as on the path.
    #[test]
    fn a_replaced_path_keeps_no_work_of_the_samples_before() {
        let mut e = CriticalPathEngine::new();
        e.set_procedures(1);
        e.advance(2, 0, 0);
        e.advance(2, 1_000, 1_000);
        let longer = e.snapshot(2);
        e.advance(1, 0, 0);
        e.advance(1, 150, 150);
        e.merge(1, &longer);
        e.sampled(1, 160, &stack(0));
        assert_eq!(e.snapshot(1).inclusive[0], 0);
        e.advance(1, 170, 170);
        let p = e.snapshot(1);
        assert_eq!(p.longest, 1_020);
        assert_eq!(
            p.inclusive[0], 20,
            "the 20 after the merge: 10 in the sample's interval, 10 held after it"
        );
    }
}
