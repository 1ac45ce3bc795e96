//! Shared-memory dependencies: which event of one thread another thread waited for.
//!
//! - **Wakeups.** A thread blocked in a futex wait resumes because another thread woke
//!   it: the waker's event (inside a futex wake call, or its exit, which wakes a joiner
//!   through the thread-id futex) is what the woken thread's resume depends on. Lock
//!   hand-offs, condition variables, barriers and joins all reduce to this when they
//!   block. Wakeups from anything else (an interrupt, a timer, a signal) carry no
//!   dependency.
//! - **Creation.** A new thread's first event depends on its creator's clone.
//! - **Joins** (uprobes on pthread_create and the joins, always): a successful join's
//!   return depends on the joined thread's last event, also when it did not block (the
//!   thread had exited already, or a try-join found it done), which no futex shows.
//! - **Locks** (`--locks`, uprobes on the pthread calls): the n-th acquisition of a lock
//!   depends on the (n-1)-th release even when no thread blocked; a condition wait's
//!   return depends on the latest signal after it began (a signal before it is seen
//!   through the mutex: the waiter then finds its condition true under the lock); a
//!   semaphore wait that took a token depends on the post that gave it, oldest first,
//!   after the tokens sem_init gave (which depend on nothing).
//!
//! The tracker keeps only the latest mark per lock, per condition variable and per
//! blocked thread, and one entry per thread not joined yet (glibc reuses the pthread_t
//! of a detached thread that ended, which replaces its entry): memory is bounded by the
//! program's threads and locks.

use std::collections::VecDeque;

use crate::format::openmp::RegionKey;
use rustc_hash::FxHashMap;

/// futex(2) operations that wake waiters (FUTEX_WAKE, FUTEX_REQUEUE,
/// FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_UNLOCK_PI, FUTEX_WAKE_BITSET,
/// FUTEX_CMP_REQUEUE_PI), without the private/clock flags.
pub(crate) fn futex_wakes(op: u32) -> bool {
    matches!(op & 0x7f, 1 | 3 | 4 | 5 | 7 | 10 | 12)
}

/// How many exited threads' last events are kept for the wakeups their exit causes
/// (a joiner's wakeup follows the exit at once; this only bounds memory).
const EXITED_KEPT: usize = 4096;

pub struct SyncTracker<M> {
    /// New thread id -> (creator's process, creator's mark at the clone).
    created: FxHashMap<u32, (u32, M)>,
    /// Last event of threads that exited, oldest first.
    exited: FxHashMap<u32, M>,
    exit_order: VecDeque<u32>,
    /// Blocked thread -> what woke it, merged when its wait returns.
    woken: FxHashMap<u32, Wake<M>>,
    /// Threads made by pthread_create, by (process, pthread_t), until they are joined.
    joinable: FxHashMap<(u32, u64), Joinable<M>>,
    /// Thread id -> its key in `joinable`, while the thread lives.
    joinable_ids: FxHashMap<u32, (u32, u64)>,
    /// Lock address (per process) -> mark of its latest release.
    released: FxHashMap<(u32, u64), M>,
    /// Condition variable (per process) -> (time, mark) of its latest signal.
    signalled: FxHashMap<(u32, u64), (u64, M)>,
    /// Semaphore (per process) -> its tokens.
    semaphores: FxHashMap<(u32, u64), Semaphore<M>>,
    /// OpenMP regions in progress, by process and region.
    regions: FxHashMap<(u32, RegionKey), Region<M>>,
    /// Dependencies added, by kind (for reports and tests).
    pub stats: SyncStats,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SyncStats {
    /// Futex wakeups that ended a traced thread's wait.
    pub wakeups: u64,
    /// Of those, wakeups by a thread's exit (joins).
    pub exit_wakeups: u64,
    /// Threads whose start depends on their creator.
    pub creations: u64,
    /// Lock acquisitions that depend on a previous release (`--locks`).
    pub lock_handoffs: u64,
    /// Condition waits that depend on a signal (`--locks`).
    pub signals: u64,
    /// Joins that depend on the joined thread's end without having waited for its exit.
    pub joins: u64,
    /// Semaphore waits that depend on a post (`--locks`).
    pub sem_posts: u64,
    /// OpenMP workers released by their master's fork of a parallel region.
    pub omp_forks: u64,
    /// OpenMP masters released at the end of a region by their team's arrivals.
    pub omp_joins: u64,
    /// OpenMP barrier exits released by the team's arrivals.
    pub omp_barriers: u64,
}

/// An OpenMP parallel region in progress (see `crate::format::openmp`).
struct Region<M> {
    /// The master's event at the fork.
    fork: M,
    /// Each thread's event as its part of the region ended.
    arrivals: Vec<M>,
    /// The barriers in progress, by index within the region. A thread leaves barrier
    /// n before it arrives at n + 1, and nobody leaves n + 1 before everybody arrived
    /// there, so only the latest two can still be left: older ones are dropped.
    barriers: VecDeque<(i32, Vec<M>)>,
}

/// How many posts not taken yet a semaphore keeps the marks of (older ones become
/// tokens without a dependency: memory stays bounded).
const SEM_POSTS_KEPT: usize = 4096;

/// A semaphore's tokens: those sem_init gave, then the posts not taken yet, oldest first.
struct Semaphore<M> {
    initial: u64,
    posts: VecDeque<M>,
}

/// What woke a blocked thread.
pub struct Wake<M> {
    pub mark: M,
    /// The thread whose exit woke it (a join), if that is what it was.
    pub exited: Option<u32>,
}

/// A thread made by pthread_create and not joined yet.
struct Joinable<M> {
    tid: u32,
    /// Its last event, once it exited.
    end: Option<M>,
}

/// A joined thread and its last event.
pub struct Joined<M> {
    pub tid: u32,
    pub end: M,
}

impl<M: Clone> Default for SyncTracker<M> {
    fn default() -> Self {
        SyncTracker {
            created: FxHashMap::default(),
            exited: FxHashMap::default(),
            exit_order: VecDeque::new(),
            woken: FxHashMap::default(),
            joinable: FxHashMap::default(),
            joinable_ids: FxHashMap::default(),
            released: FxHashMap::default(),
            signalled: FxHashMap::default(),
            semaphores: FxHashMap::default(),
            regions: FxHashMap::default(),
            stats: SyncStats::default(),
        }
    }
}

impl<M: Clone> SyncTracker<M> {
    /// Thread `child` was cloned by a thread of process `pid`, whose event is `mark`.
    pub fn clone_thread(&mut self, pid: u32, child: u32, mark: M) {
        self.created.insert(child, (pid, mark));
    }

    /// Thread `tid` of process `pid` is seen for the first time: its creator's mark if it
    /// is a thread its process created while traced (a new process started by a launcher
    /// begins its own path: the launcher's work is not the program's).
    pub fn first_event(&mut self, pid: u32, tid: u32) -> Option<M> {
        let (creator_pid, mark) = self.created.remove(&tid)?;
        (creator_pid == pid && tid != pid).then(|| {
            self.stats.creations += 1;
            mark
        })
    }

    /// Thread `tid` exited; `mark` is its last event.
    pub fn exit(&mut self, tid: u32, mark: M) {
        if let Some(key) = self.joinable_ids.remove(&tid) {
            if let Some(j) = self.joinable.get_mut(&key) {
                j.end = Some(mark.clone());
            }
        }
        if self.exited.insert(tid, mark).is_none() {
            self.exit_order.push_back(tid);
        }
        while self.exit_order.len() > EXITED_KEPT {
            if let Some(old) = self.exit_order.pop_front() {
                self.exited.remove(&old);
            }
        }
        self.woken.remove(&tid);
    }

    /// pthread_create in process `pid` made thread `tid`, whose pthread_t is `pthread`.
    /// (A short thread may have exited before its creator's call returned.)
    pub fn created(&mut self, pid: u32, pthread: u64, tid: u32) {
        let end = self.exited.get(&tid).cloned();
        if end.is_none() {
            self.joinable_ids.insert(tid, (pid, pthread));
        }
        if let Some(old) = self.joinable.insert((pid, pthread), Joinable { tid, end }) {
            self.joinable_ids.remove(&old.tid);
        }
    }

    /// A join of `pthread` in process `pid` succeeded: the joined thread and its last
    /// event, if it is known and has exited.
    pub fn joined(&mut self, pid: u32, pthread: u64) -> Option<Joined<M>> {
        let j = self.joinable.remove(&(pid, pthread))?;
        self.joinable_ids.remove(&j.tid);
        let end = j.end?;
        self.stats.joins += 1;
        Some(Joined { tid: j.tid, end })
    }

    /// The mark of an exited thread, if it is still kept (its exit may wake a joiner).
    pub fn exited(&self, tid: u32) -> Option<&M> {
        self.exited.get(&tid)
    }

    /// A waker (`mark`) woke thread `wakee`, which is blocked in a futex wait; `exited`:
    /// the waker is a thread that exited (a join).
    pub fn wake(&mut self, wakee: u32, mark: M, exited: Option<u32>) {
        self.woken.insert(wakee, Wake { mark, exited });
        self.stats.wakeups += 1;
        if exited.is_some() {
            self.stats.exit_wakeups += 1;
        }
    }

    /// Thread `tid`'s futex wait returned: what woke it, if anything traced did.
    pub fn wait_returned(&mut self, tid: u32) -> Option<Wake<M>> {
        self.woken.remove(&tid)
    }

    /// A lock was released.
    pub fn release(&mut self, pid: u32, lock: u64, mark: M) {
        self.released.insert((pid, lock), mark);
    }

    /// A lock was acquired: the release it depends on.
    pub fn acquire(&mut self, pid: u32, lock: u64) -> Option<M> {
        let m = self.released.get(&(pid, lock)).cloned();
        if m.is_some() {
            self.stats.lock_handoffs += 1;
        }
        m
    }

    /// A condition variable was signalled (or broadcast) at `ts`.
    pub fn signal(&mut self, pid: u32, cond: u64, ts: u64, mark: M) {
        self.signalled.insert((pid, cond), (ts, mark));
    }

    /// A wait on `cond` that began at `since` returned: the signal it depends on.
    pub fn cond_returned(&mut self, pid: u32, cond: u64, since: u64) -> Option<M> {
        let (ts, m) = self.signalled.get(&(pid, cond))?;
        (*ts >= since).then(|| {
            self.stats.signals += 1;
            m.clone()
        })
    }

    /// sem_init gave semaphore `sem` `value` tokens.
    pub fn sem_init(&mut self, pid: u32, sem: u64, value: u64) {
        let s = Semaphore {
            initial: value,
            posts: VecDeque::new(),
        };
        self.semaphores.insert((pid, sem), s);
    }

    /// Semaphore `sem` got a token from a post whose thread's mark is `mark`.
    pub fn sem_post(&mut self, pid: u32, sem: u64, mark: M) {
        let s = self.semaphores.entry((pid, sem)).or_insert(Semaphore {
            initial: 0,
            posts: VecDeque::new(),
        });
        s.posts.push_back(mark);
        if s.posts.len() > SEM_POSTS_KEPT {
            s.posts.pop_front();
            s.initial += 1;
        }
    }

    /// A wait took one of `sem`'s tokens: the post it depends on, if the token came from
    /// one (a token sem_init gave, or one from before tracing began, depends on nothing).
    pub fn sem_taken(&mut self, pid: u32, sem: u64) -> Option<M> {
        let s = self.semaphores.get_mut(&(pid, sem))?;
        if s.initial > 0 {
            s.initial -= 1;
            return None;
        }
        let m = s.posts.pop_front()?;
        self.stats.sem_posts += 1;
        Some(m)
    }

    /// An OpenMP master forks `region` (a region of the same key that has not ended is
    /// one whose end was not seen: replaced).
    pub fn omp_fork(&mut self, pid: u32, region: RegionKey, mark: M) {
        let r = Region {
            fork: mark,
            arrivals: Vec::new(),
            barriers: VecDeque::new(),
        };
        self.regions.insert((pid, region), r);
    }

    /// A worker starts its part of `region`: it depends on the fork.
    pub fn omp_started(&mut self, pid: u32, region: RegionKey) -> Option<M> {
        let r = self.regions.get(&(pid, region))?;
        self.stats.omp_forks += 1;
        Some(r.fork.clone())
    }

    /// A thread's part of `region` ended.
    pub fn omp_arrived(&mut self, pid: u32, region: RegionKey, mark: M) {
        if let Some(r) = self.regions.get_mut(&(pid, region)) {
            r.arrivals.push(mark);
        }
    }

    /// The master goes on after `region`: it depends on every thread's arrival.
    pub fn omp_joined(&mut self, pid: u32, region: RegionKey) -> Vec<M> {
        let Some(r) = self.regions.remove(&(pid, region)) else {
            return Vec::new();
        };
        self.stats.omp_joins += 1;
        r.arrivals
    }

    /// A thread arrives at barrier `index` of `region`.
    pub fn omp_barrier_arrived(&mut self, pid: u32, region: RegionKey, index: i32, mark: M) {
        let Some(r) = self.regions.get_mut(&(pid, region)) else {
            return;
        };
        match r.barriers.iter_mut().find(|(i, _)| *i == index) {
            Some((_, arrivals)) => arrivals.push(mark),
            None => r.barriers.push_back((index, vec![mark])),
        }
        r.barriers.retain(|(i, _)| *i >= index - 1);
    }

    /// A thread leaves barrier `index` of `region`: it depends on every arrival there.
    pub fn omp_barrier_left(&mut self, pid: u32, region: RegionKey, index: i32) -> Vec<M> {
        let Some(r) = self.regions.get(&(pid, region)) else {
            return Vec::new();
        };
        match r.barriers.iter().find(|(i, _)| *i == index) {
            Some((_, arrivals)) => {
                self.stats.omp_barriers += 1;
                arrivals.clone()
            }
            None => Vec::new(),
        }
    }

    /// Entries held (for the memory-bound tests).
    #[cfg(test)]
    pub(crate) fn entries_held(&self) -> usize {
        self.created.len()
            + self.exited.len()
            + self.woken.len()
            + self.joinable.len()
            + self.joinable_ids.len()
            + self.released.len()
            + self.signalled.len()
            + self
                .semaphores
                .values()
                .map(|s| 1 + s.posts.len())
                .sum::<usize>()
            + self
                .regions
                .values()
                .map(|r| 1 + r.arrivals.len() + r.barriers.iter().map(|b| b.1.len()).sum::<usize>())
                .sum::<usize>()
    }
}
