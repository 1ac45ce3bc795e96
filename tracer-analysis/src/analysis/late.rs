//! Dependencies that the nodes' clocks put late: a receive on one node whose send another
//! node's records show starting after it, a collective exit before another node's member
//! entered. Each node stamps its own clock and the offsets between them are only
//! estimated, so in the merged order such a receive would find no send (counted
//! unmatched) and such an exit no entry (incomplete). Instead, the exit waits for what it
//! depends on, and its process waits with it (the analyzer holds its later records,
//! `Analyzer::record`): a controlled logical clock in effect, which moves the receive and
//! what follows it in its process to just after the send, as Scalasca's does, without
//! rewriting any time.
//!
//! Only across nodes (one node's records share one clock, so there a receive before its
//! send is no clock's doing; except from a held process, whose records come late), only
//! on a process traced from its start (seen to exec: a
//! process traced from the middle may have sent before tracing began, and a receive of
//! that message must not take a later one), and for at most [`LATE_WINDOW_NS`] of the
//! stream: a dependency still missing then is counted unmatched or incomplete, as before.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::format::node::GlobalId;
use crate::format::records::Record;

use super::reorder::REORDER_WINDOW_NS;

/// How far the clocks may put a receive before its send, or an exit from a collective
/// before a member's entry, and the two still be paired: the readers' reorder window,
/// far above the error of clocks aligned as docs/multinode.md describes (pings live, NTP
/// for merged recordings).
pub(crate) const LATE_WINDOW_NS: u64 = REORDER_WINDOW_NS;

/// The most records of one process held while it waits; past it, the wait ends at once
/// (the bound of the held records' memory, whatever the event rate).
pub(crate) const MAX_HELD_RECORDS: usize = 1 << 18;

/// A point-to-point queue: (sender, receiver, communicator, tag).
pub(crate) type P2pKey = (u32, u32, u32, i32);

/// A member's entry into a collective: (communicator, sequence number, member).
type EntryKey = (u32, u32, u32);

/// A receive completed before the send it waits for was seen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LateReceive {
    pub pid: u32,
    /// When the receive completed, by its node's clock.
    pub ts: u64,
    pub bytes: Option<u64>,
}

/// What arrived for a waiting process: the sender's or member's path state.
pub(crate) struct LateArrival<S> {
    pub pid: u32,
    pub state: S,
}

/// The waits of the matcher (see the module's comment).
#[derive(Default)]
pub(crate) struct LateWaits {
    /// Receives waiting for their send, by queue.
    receives: FxHashMap<P2pKey, VecDeque<LateReceive>>,
    /// Collective exits waiting for a member's entry: the waiting processes.
    entries: FxHashMap<EntryKey, Vec<u32>>,
    /// Waits registered since the last [`Self::take_registered`].
    registered: usize,
    /// Processes seen to exec while traced: everything they sent was seen.
    traced_from_start: FxHashSet<u32>,
    /// Processes held now: what they send comes later than their node's clock says.
    held: FxHashSet<u32>,
}

/// What one process's waits came to when they ended unmet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GaveUp {
    pub receives: u64,
    pub entries: u64,
}

impl LateWaits {
    /// Process `pid` exec'd while traced.
    pub(crate) fn traced_from_start(&mut self, pid: u32) {
        self.traced_from_start.insert(pid);
    }

    /// Whether `waiter` may wait for what `dependency` does later in the merged order:
    /// it is on another node and traced from its start, or it is held (its records come
    /// later than its clock says, and a process of its own node may wait for it too).
    pub(crate) fn may_wait_for(&self, waiter: u32, dependency: u32) -> bool {
        self.held.contains(&dependency)
            || (GlobalId(waiter).node() != GlobalId(dependency).node()
                && self.traced_from_start.contains(&dependency))
    }

    /// Process `pid` is held now, or no longer.
    pub(crate) fn set_held(&mut self, pid: u32, held: bool) {
        if held {
            self.held.insert(pid);
        } else {
            self.held.remove(&pid);
        }
    }

    pub(crate) fn wait_for_send(&mut self, key: P2pKey, receive: LateReceive) {
        self.receives.entry(key).or_default().push_back(receive);
        self.registered += 1;
    }

    pub(crate) fn wait_for_entry(&mut self, gid: u32, seq: u32, member: u32, waiter: u32) {
        self.entries
            .entry((gid, seq, member))
            .or_default()
            .push(waiter);
        self.registered += 1;
    }

    /// How many waits the last exit registered.
    pub(crate) fn take_registered(&mut self) -> usize {
        std::mem::take(&mut self.registered)
    }

    /// The receive waiting for a send on `key`, if one is.
    pub(crate) fn receive_waiting(&mut self, key: &P2pKey) -> Option<LateReceive> {
        if self.receives.is_empty() {
            return None;
        }
        let waiting = self.receives.get_mut(key)?;
        let r = waiting.pop_front();
        if waiting.is_empty() {
            self.receives.remove(key);
        }
        r
    }

    /// The processes waiting for `member`'s entry into collective `seq` of `gid`.
    pub(crate) fn entry_waiters(&mut self, gid: u32, seq: u32, member: u32) -> Vec<u32> {
        if self.entries.is_empty() {
            return Vec::new();
        }
        self.entries.remove(&(gid, seq, member)).unwrap_or_default()
    }

    /// Process `pid` waits no longer: its waits, removed.
    pub(crate) fn give_up(&mut self, pid: u32) -> GaveUp {
        let mut gave_up = GaveUp::default();
        self.receives.retain(|_, waiting| {
            let before = waiting.len();
            waiting.retain(|r| r.pid != pid);
            gave_up.receives += (before - waiting.len()) as u64;
            !waiting.is_empty()
        });
        self.entries.retain(|_, waiters| {
            let before = waiters.len();
            waiters.retain(|&w| w != pid);
            gave_up.entries += (before - waiters.len()) as u64;
            !waiters.is_empty()
        });
        gave_up
    }
}

/// A process whose exit waits (see the module's comment): its later records, held.
pub(crate) struct Held {
    /// The thread whose exit waits, and the bytes its call received.
    pub tid: u32,
    pub bytes: Option<u64>,
    /// Dependencies still to arrive.
    pub awaiting: usize,
    /// The stream time past which it waits no longer.
    pub deadline_ns: u64,
    pub records: VecDeque<Record>,
}

/// The processes held, and those ready to go on.
#[derive(Default)]
pub(crate) struct HeldProcesses {
    by_pid: FxHashMap<u32, Held>,
    /// The earliest deadline of any (u64::MAX when none).
    earliest_deadline_ns: u64,
    /// Processes whose waits ended (met or given up), to replay.
    ready: Vec<u32>,
}

impl HeldProcesses {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_pid.is_empty() && self.ready.is_empty()
    }

    pub(crate) fn is_held(&self, pid: u32) -> bool {
        self.by_pid.contains_key(&pid)
    }

    /// Thread `tid` of `pid` exited a call that waits for `awaiting` dependencies.
    pub(crate) fn hold(
        &mut self,
        pid: u32,
        tid: u32,
        bytes: Option<u64>,
        awaiting: usize,
        ts: u64,
    ) {
        let deadline_ns = ts.saturating_add(LATE_WINDOW_NS);
        if self.by_pid.is_empty() {
            self.earliest_deadline_ns = u64::MAX;
        }
        self.earliest_deadline_ns = self.earliest_deadline_ns.min(deadline_ns);
        self.by_pid.insert(
            pid,
            Held {
                tid,
                bytes,
                awaiting,
                deadline_ns,
                records: VecDeque::new(),
            },
        );
    }

    /// Keeps `r` back if its process is held; a process that reaches
    /// [`MAX_HELD_RECORDS`] is returned, to wait no longer.
    pub(crate) fn hold_back(&mut self, r: &Record) -> HoldBack {
        let pid = r.header().tgid;
        let Some(held) = self.by_pid.get_mut(&pid) else {
            return HoldBack::NotHeld;
        };
        held.records.push_back(r.clone());
        if held.records.len() >= MAX_HELD_RECORDS {
            return HoldBack::Full(pid);
        }
        HoldBack::Held
    }

    /// The processes whose deadline `now` passed.
    pub(crate) fn overdue(&mut self, now: u64) -> Vec<u32> {
        if now <= self.earliest_deadline_ns {
            return Vec::new();
        }
        let overdue: Vec<u32> = self
            .by_pid
            .iter()
            .filter(|(_, h)| h.deadline_ns < now)
            .map(|(&pid, _)| pid)
            .collect();
        self.earliest_deadline_ns = self
            .by_pid
            .values()
            .map(|h| h.deadline_ns)
            .filter(|&d| d >= now)
            .min()
            .unwrap_or(u64::MAX);
        overdue
    }

    /// Every process held.
    pub(crate) fn all(&self) -> Vec<u32> {
        self.by_pid.keys().copied().collect()
    }

    /// One dependency of `pid`'s exit arrived: the thread to give it to and the bytes
    /// received (`None` if `pid` is not held).
    pub(crate) fn arrived(&mut self, pid: u32) -> Option<WaitingExit> {
        let held = self.by_pid.get_mut(&pid)?;
        held.awaiting = held.awaiting.saturating_sub(1);
        if held.awaiting == 0 {
            self.ready.push(pid);
        }
        Some(WaitingExit {
            tid: held.tid,
            bytes: held.bytes,
        })
    }

    /// `pid` waits no longer: it is replayed next.
    pub(crate) fn release(&mut self, pid: u32) {
        self.ready.push(pid);
    }

    /// The next process ready to go on, with its held records.
    pub(crate) fn next_ready(&mut self) -> Option<Released> {
        while let Some(pid) = self.ready.pop() {
            if let Some(held) = self.by_pid.remove(&pid) {
                return Some(Released {
                    pid,
                    records: held.records,
                });
            }
        }
        None
    }

    /// Appends the records of `pid` not replayed yet to its new hold.
    pub(crate) fn hold_rest(&mut self, pid: u32, rest: VecDeque<Record>) {
        if let Some(held) = self.by_pid.get_mut(&pid) {
            held.records.extend(rest);
        }
    }
}

/// The exit a dependency arrived for: its thread and the bytes its call received.
pub(crate) struct WaitingExit {
    pub tid: u32,
    pub bytes: Option<u64>,
}

/// A process that waits no longer, and its records held meanwhile.
pub(crate) struct Released {
    pub pid: u32,
    pub records: VecDeque<Record>,
}

/// Where a record went (see [`HeldProcesses::hold_back`]).
pub(crate) enum HoldBack {
    NotHeld,
    Held,
    Full(u32),
}
