//! The online critical path (Hollingsworth 1998): no graph is kept. Each thread carries
//! the length of the longest path ending at its latest event and how much of that path
//! each selected procedure accounts for; messages carry a copy from the sender; a
//! receiver adopts the longer of its own path and the incoming one.

use rustc_hash::FxHashMap;

use tracer_common::EventHeader;

use super::model::{PathModel, ProcId};

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
    pub fn merge(&mut self, other: &PathState) {
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
        }
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

    /// The thread did `work` (its work clock) by now: extend its path.
    pub(crate) fn advance(&mut self, tid: u32, work: u64) {
        let n = self.procedures;
        let t = self.thread(tid);
        // A thread's path starts at its first event (tracing may begin mid-run).
        let last = t.last_work.unwrap_or(work);
        let delta = work.saturating_sub(last);
        t.last_work = Some(last.max(work));
        if delta == 0 {
            return;
        }
        t.path.longest += delta;
        t.path.add_thread_time(tid, delta);
        for p in 0..n {
            if t.depth[p] > 0 {
                t.path.inclusive[p] += delta;
            } else {
                t.path.zeroed[p] += delta;
            }
        }
        if let Some(&top) = t.stack.last() {
            t.path.exclusive[top] += delta;
        }
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
        self.thread(tid).path.merge(incoming);
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
    fn advance(&mut self, tid: u32, work: u64, _at: &EventHeader) {
        CriticalPathEngine::advance(self, tid, work)
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
    fn end_thread(&mut self, tid: u32, participant: bool) {
        CriticalPathEngine::end_thread(self, tid, participant)
    }
    fn threads_held(&self) -> usize {
        CriticalPathEngine::threads_held(self)
    }
}
