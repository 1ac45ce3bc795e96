//! What a replay reads from a recording: its graph with every clock, which processes
//! poll, and the CPUs each process ran on.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use super::placement::{PlacementSpec, ProgramProcess};
use super::polling::scan;
use super::replay;
use crate::format::recording::{RecordingError, RecordingReader};
use crate::graph::recorded::RecordedGraph;

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
            events_lost: reader.totals().events_lost,
            ran_on,
        })
    }

    /// The placement the program ran under, as far as the recording shows it: each rank
    /// on the CPUs its process ran on, sets that overlap merged (a rank pinned to CPU 0
    /// has {0}; ranks the scheduler moved between CPUs 0 and 1 share {0,1}). None when no
    /// process has a rank (they then keep a CPU per thread).
    pub fn recorded_placement(&self) -> Option<PlacementSpec> {
        let mut sets: Vec<(Vec<i32>, BTreeSet<u32>)> = Vec::new();
        for process in self.program() {
            let (Some(rank), Some(cpus)) = (process.rank, self.ran_on.get(&process.pid)) else {
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
    pub fn program(&self) -> Vec<ProgramProcess> {
        self.cpu
            .participants
            .iter()
            .map(|&pid| ProgramProcess {
                pid,
                rank: self.cpu.processes.get(&pid).and_then(|p| p.rank),
            })
            .collect()
    }
}
