//! Which processes busy-poll inside their MPI/PVM calls (they keep their CPU while they
//! wait), from their records: the offline replay reads it from a recording, the online
//! one ([`polls`]) from the records it sees.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::analysis::workclock::still_runnable;
use crate::format::calls::{self, split_call_field, Role};
use crate::format::recording::{Item, RecordingError, RecordingReader};
use crate::format::records::Record;

/// A process busy-polls when it is on CPU for at least this share of the time it is
/// awake inside MPI/PVM calls...
pub(crate) const POLLING_SHARE: f64 = 0.5;
/// ...and does not switch out runnable this often per second of it. A library that
/// yields while it polls (Open MPI when it knows the node is oversubscribed) leaves a
/// shared CPU to the processes that work, and switches out at every poll when another
/// process wants the CPU (tens of thousands of times a second); one that is merely
/// preempted switches out at most at the scheduler's tick rate. (The kernel reports a
/// yield and a preemption in user mode alike, as state 0: only the rate tells them apart.)
pub(crate) const YIELDS_PER_S: f64 = 5000.0;

/// Whether a process polls, from its time inside MPI/PVM waits: CPU time, awake time,
/// and how many times it yielded.
pub(crate) fn polls(cpu: u64, awake: u64, yields: u64) -> bool {
    awake > 0
        && cpu as f64 >= POLLING_SHARE * awake as f64
        && (yields as f64) < YIELDS_PER_S * awake as f64 / 1e9
}

/// Processes that stay on CPU inside their MPI/PVM calls (busy-polling): on CPU for at
/// least [`POLLING_SHARE`] of the time they are awake inside them (time runnable but
/// preempted by other work on the machine does not count either way); and the CPUs each
/// process ran on, into `ran_on`.
pub(crate) fn scan(
    reader: &mut RecordingReader,
    ran_on: &mut HashMap<u32, BTreeSet<u32>>,
) -> Result<HashSet<u32>, RecordingError> {
    #[derive(Default)]
    struct Thread {
        /// Depth of MPI/PVM calls, and the outermost entry's (ts, cpu).
        depth: u32,
        entry: (u64, u64),
        /// Preempted since; runnable time inside the current outermost call.
        preempted: Option<u64>,
        runnable: u64,
        yields: u64,
    }
    let mut threads: HashMap<u32, Thread> = HashMap::new();
    // Per process: (awake, cpu, yields) inside outermost calls.
    let mut inside: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    while let Some(item) = reader.next_item()? {
        let Item::Record(r) = item else { continue };
        let h = *r.header();
        // From the thread's first MPI/PVM communication call on: before it, a
        // launcher's script (pin_rank.sh, taskset) may still run in the process, on any
        // CPU. (The online replay does the same with the records it sees.)
        if threads.contains_key(&h.tid) && !matches!(r, Record::SwitchIn(_)) {
            ran_on.entry(h.tgid).or_default().insert(h.cpu);
        }
        let c = match &r {
            Record::SwitchOut(s) => {
                if let Some(t) = threads.get_mut(&h.tid) {
                    t.preempted = still_runnable(s.prev_state).then_some(h.ts_ns);
                    if s.prev_state == 0 && t.depth > 0 {
                        t.yields += 1;
                    }
                }
                continue;
            }
            Record::SwitchIn(_) => {
                if let Some(t) = threads.get_mut(&h.tid) {
                    if let (Some(p), true) = (t.preempted.take(), t.depth > 0) {
                        t.runnable += h.ts_ns.saturating_sub(p);
                    }
                }
                continue;
            }
            Record::CallEnter(c) | Record::CallExit(c) => c,
            _ => continue,
        };
        // Communication calls only: setup calls (MPI_Init waits for the launcher) and
        // pthread calls say nothing about how the library waits for messages.
        let id = split_call_field(c.header.call).id;
        if !communication_call(id) {
            continue;
        }
        let t = threads.entry(h.tid).or_default();
        if matches!(r, Record::CallEnter(_)) {
            if t.depth == 0 {
                (t.entry, t.runnable, t.yields) = ((h.ts_ns, h.cpu_ns), 0, 0);
            }
            t.depth += 1;
        } else if t.depth > 0 {
            t.depth -= 1;
            if t.depth == 0 {
                let e = inside.entry(h.tgid).or_default();
                e.0 += h.ts_ns.saturating_sub(t.entry.0).saturating_sub(t.runnable);
                e.1 += h.cpu_ns.saturating_sub(t.entry.1);
                e.2 += t.yields;
            }
        }
    }
    Ok(inside
        .into_iter()
        .filter(|&(_, (awake, cpu, yields))| polls(cpu, awake, yields))
        .map(|(pid, _)| pid)
        .collect())
}

/// An MPI/PVM call that communicates (not a setup call such as MPI_Init).
pub(crate) fn communication_call(id: u16) -> bool {
    calls::is_mpi_or_pvm(id) && calls::spec(id).is_some_and(|s| s.role != Role::Setup)
}
