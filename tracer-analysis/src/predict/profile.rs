//! Where the predicted critical path spends its time: by kind, process and procedure.

use std::collections::BTreeMap;

use serde::Serialize;

use super::replay::{PathPiece, Prediction};
use crate::graph::path::OUTSIDE;
use crate::graph::recorded::RecordedGraph;

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
    /// Demangled (C++, Rust), or [`OUTSIDE`].
    pub procedure: String,
    /// The selected procedure's symbol as the binary has it; none for [`OUTSIDE`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
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
            .map(|(procedure, ns)| ProcedureShare {
                // The first procedure of that name (two symbols may demangle alike).
                symbol: rg
                    .procedures
                    .iter()
                    .position(|name| *name == procedure)
                    .map(|p| rg.procedure_symbols[p].clone()),
                procedure,
                ns,
            })
            .collect();
        out.procedures.sort_by(|a, b| b.ns.total_cmp(&a.ns));
        out
    }
}
