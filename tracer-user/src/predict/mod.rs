//! What-if predictions for other placements and networks (LBF and NF): a recording is
//! replayed with its processes on other CPUs and/or with message costs from a table.

pub mod network;
pub mod placement;
pub mod replay;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::Serialize;
use tracer_common::call;

use crate::analysis::workclock::ClockKind;
use crate::calls::split_call_field;
use crate::graph::path::OUTSIDE;
use crate::graph::recorded::RecordedGraph;
use crate::recording::{Item, RecordingError, RecordingReader};
use crate::records::Record;
use replay::{PathPiece, Prediction};

/// A process busy-polls when it is on CPU for at least this share of the time it spends
/// inside MPI/PVM calls.
const POLLING_SHARE: f64 = 0.5;

/// What a replay needs from a recording: its graph with both work clocks, and which
/// processes poll inside blocking calls.
pub struct RecordedRun {
    pub cpu: RecordedGraph,
    pub wall: RecordedGraph,
    pub polling: HashSet<u32>,
}

impl RecordedRun {
    pub fn read(path: &Path) -> Result<Self, RecordingError> {
        let cpu = RecordedGraph::read(&mut RecordingReader::open(path)?, ClockKind::Cpu)?;
        let wall = RecordedGraph::read(&mut RecordingReader::open(path)?, ClockKind::Wall)?;
        let polling = polling_processes(&mut RecordingReader::open(path)?)?;
        Ok(RecordedRun { cpu, wall, polling })
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

/// Processes that stay on CPU inside their MPI/PVM calls (busy-polling).
pub fn polling_processes(reader: &mut RecordingReader) -> Result<HashSet<u32>, RecordingError> {
    // Per thread: depth of MPI/PVM calls and the outermost entry's (ts, cpu).
    let mut open: HashMap<u32, (u32, u64, u64)> = HashMap::new();
    // Per process: (wall, cpu) inside outermost calls.
    let mut inside: HashMap<u32, (u64, u64)> = HashMap::new();
    while let Some(item) = reader.next_item()? {
        let Item::Record(r) = item else { continue };
        let (Record::CallEnter(c) | Record::CallExit(c)) = &r else {
            continue;
        };
        let h = c.header;
        if split_call_field(h.call).0 >= call::PTHREAD_MUTEX_LOCK {
            continue;
        }
        let e = open.entry(h.tid).or_insert((0, 0, 0));
        if matches!(r, Record::CallEnter(_)) {
            if e.0 == 0 {
                (e.1, e.2) = (h.ts_ns, h.cpu_ns);
            }
            e.0 += 1;
        } else if e.0 > 0 {
            e.0 -= 1;
            if e.0 == 0 {
                let t = inside.entry(h.tgid).or_default();
                t.0 += h.ts_ns.saturating_sub(e.1);
                t.1 += h.cpu_ns.saturating_sub(e.2);
            }
        }
    }
    Ok(inside
        .into_iter()
        .filter(|&(_, (wall, cpu))| wall > 0 && cpu as f64 >= POLLING_SHARE * wall as f64)
        .map(|(pid, _)| pid)
        .collect())
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
