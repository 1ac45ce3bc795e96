//! What-if predictions for other placements and networks (LBF and NF): a recording is
//! replayed with its processes on other CPUs and/or with message costs from a table.

pub mod network;
pub mod online;
pub mod placement;
pub mod replay;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use crate::analysis::workclock::still_runnable;
use crate::format::calls::{self, split_call_field, Role};
use crate::format::recording::{Item, RecordingError, RecordingReader};
use crate::format::records::Record;
use crate::graph::path::OUTSIDE;
use crate::graph::recorded::RecordedGraph;
use placement::PlacementSpec;
use replay::{PathPiece, Prediction};

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

/// What a replay needs from a recording: its graph with every clock per vertex, and
/// which processes poll inside blocking calls.
pub struct RecordedRun {
    pub cpu: RecordedGraph,
    pub polling: HashSet<u32>,
    /// Events the probes could not write (the ring buffer was full): the calls and
    /// messages among them are missing from the graph.
    pub events_lost: u64,
    /// The CPUs each process ran on (from its threads' records after their first
    /// MPI/PVM communication call).
    pub ran_on: HashMap<u32, BTreeSet<u32>>,
}

impl RecordedRun {
    pub fn read(path: &Path) -> Result<Self, RecordingError> {
        let mut reader = RecordingReader::open(path)?;
        let mut ran_on = HashMap::new();
        let polling = scan(&mut reader, &mut ran_on)?;
        Ok(RecordedRun {
            cpu: RecordedGraph::read_with_clocks(&mut RecordingReader::open(path)?)?,
            polling,
            events_lost: reader.trailer.map_or(0, |t| t.events_lost),
            ran_on,
        })
    }

    /// The placement the program ran under, as far as the recording shows it: each rank
    /// on the CPUs its process ran on, sets that overlap merged (a rank pinned to CPU 0
    /// has {0}; ranks the scheduler moved between CPUs 0 and 1 share {0,1}). None when no
    /// process has a rank (they then keep a CPU per thread).
    pub fn recorded_placement(&self) -> Option<PlacementSpec> {
        let mut sets: Vec<(Vec<i32>, BTreeSet<u32>)> = Vec::new();
        for (pid, rank) in self.program() {
            let (Some(rank), Some(cpus)) = (rank, self.ran_on.get(&pid)) else {
                continue;
            };
            let mut merged = (vec![rank], cpus.clone());
            sets.retain(|(ranks, set)| {
                if set.is_disjoint(&merged.1) {
                    return true;
                }
                merged.0.extend(ranks);
                merged.1.extend(set);
                false
            });
            sets.push(merged);
        }
        if sets.is_empty() {
            return None;
        }
        let join = |v: Vec<String>, sep: &str| v.join(sep);
        let text = join(
            sets.into_iter()
                .map(|(ranks, cpus)| {
                    let r = join(ranks.iter().map(|r| r.to_string()).collect(), ",");
                    let c = join(cpus.iter().map(|c| c.to_string()).collect(), ",");
                    format!("{r}@{c}")
                })
                .collect(),
            ";",
        );
        text.parse().ok()
    }

    /// The replay of this run.
    pub fn replay(&self) -> Result<replay::Replay<'_>, replay::ReplayError> {
        let mut r = replay::Replay::new(&self.cpu, self.polling.clone())?;
        r.ran_on = self.ran_on.clone();
        Ok(r)
    }

    /// The processes a placement's `*` and ranks refer to: the program's, with ranks.
    pub fn program(&self) -> Vec<(u32, Option<i32>)> {
        self.cpu
            .participants
            .iter()
            .map(|&pid| (pid, self.cpu.processes.get(&pid).and_then(|p| p.rank)))
            .collect()
    }
}

/// Processes that stay on CPU inside their MPI/PVM calls (busy-polling): on CPU for at
/// least [`POLLING_SHARE`] of the time they are awake inside them (time runnable but
/// preempted by other work on the machine does not count either way).
pub fn polling_processes(reader: &mut RecordingReader) -> Result<HashSet<u32>, RecordingError> {
    scan(reader, &mut HashMap::new())
}

/// [`polling_processes`], and the CPUs each process ran on into `ran_on`.
fn scan(
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
        let id = split_call_field(c.header.call).0;
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

/// Time on the predicted critical path, by kind, process and procedure.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PathProfile {
    pub length_ns: f64,
    /// CPU time of the work on the path.
    pub work_ns: f64,
    /// What that work took to run: more than `work_ns` where it shared a CPU.
    pub running_ns: f64,
    /// Time off CPU (sleep, I/O, calls that waited for nothing traced).
    pub off_ns: f64,
    /// Waits for messages and collectives (their latency on the path).
    pub message_ns: f64,
    /// Waits for other threads of a process (wakeups, thread starts).
    pub wakeup_ns: f64,
    /// Time spent on the path by each process (its running and off time).
    pub processes: Vec<ProcessShare>,
    /// Running time on the path inside each selected procedure (inclusive).
    pub procedures: Vec<ProcedureShare>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessShare {
    pub pid: u32,
    pub rank: Option<i32>,
    pub command: String,
    pub ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcedureShare {
    pub procedure: String,
    pub ns: f64,
}

impl PathProfile {
    pub fn of(p: &Prediction, rg: &RecordedGraph) -> Self {
        let mut out = PathProfile {
            length_ns: p.predicted_ns,
            ..Default::default()
        };
        let mut by_pid: BTreeMap<u32, f64> = BTreeMap::new();
        let mut by_proc: BTreeMap<String, f64> = BTreeMap::new();
        for piece in &p.path {
            match *piece {
                PathPiece::Thread {
                    pid,
                    context,
                    work_ns,
                    running_ns,
                    off_ns,
                    ..
                } => {
                    out.work_ns += work_ns;
                    out.running_ns += running_ns;
                    out.off_ns += off_ns;
                    *by_pid.entry(pid).or_default() += running_ns + off_ns;
                    let c = &rg.graph.contexts[context as usize];
                    if c.procedures.is_empty() {
                        *by_proc.entry(OUTSIDE.to_string()).or_default() += running_ns;
                    }
                    for &q in &c.procedures {
                        *by_proc.entry(rg.procedures[q].clone()).or_default() += running_ns;
                    }
                }
                PathPiece::Dependency {
                    latency_ns,
                    message,
                    ..
                } => {
                    if message {
                        out.message_ns += latency_ns;
                    } else {
                        out.wakeup_ns += latency_ns;
                    }
                }
            }
        }
        out.processes = by_pid
            .into_iter()
            .map(|(pid, ns)| {
                let label = rg.processes.get(&pid);
                ProcessShare {
                    pid,
                    rank: label.and_then(|l| l.rank),
                    command: label.map(|l| l.command.clone()).unwrap_or_default(),
                    ns,
                }
            })
            .collect();
        out.processes.sort_by(|a, b| b.ns.total_cmp(&a.ns));
        out.procedures = by_proc
            .into_iter()
            .map(|(procedure, ns)| ProcedureShare { procedure, ns })
            .collect();
        out.procedures.sort_by(|a, b| b.ns.total_cmp(&a.ns));
        out
    }
}
