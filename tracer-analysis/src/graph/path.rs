//! A path of the graph as people read it: a sequence of activities (a thread working in
//! one procedure context, or waiting for another thread's event), with consecutive
//! pieces of the same kind merged, and totals by procedure, process and thread.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tracer_common::kind;

use super::recorded::RecordedGraph;
use super::{ArcId, ArcKind, Graph, Vertex};
use crate::format::calls::{self, split_call_field};

/// Name of the class of work outside every selected procedure.
pub const OUTSIDE: &str = "(outside selected procedures)";

/// What a new thread "waits in" for its creator.
pub(crate) const THREAD_START: &str = "thread start";
/// What a thread waited in when a futex wait returned (no probed call around it).
pub(crate) const FUTEX_WAIT: &str = "futex wait";

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Activity {
    /// A thread's own work, all in one procedure context.
    Work {
        pid: u32,
        tid: u32,
        /// Innermost selected procedure, or [`OUTSIDE`].
        procedure: String,
        /// Probe clock at the first and last event (ns).
        start_ns: u64,
        end_ns: u64,
        /// Work-clock time: what the activity adds to the path.
        work_ns: u64,
    },
    /// The path moves to another thread: the target event waited for the source event.
    Wait {
        from_pid: u32,
        from_tid: u32,
        to_pid: u32,
        to_tid: u32,
        /// What the waiting thread was in (e.g. MPI_Recv, MPI_Allreduce).
        call: String,
        /// Measured time from the source event to the target event.
        latency_ns: u64,
    },
}

impl Activity {
    /// The activity's type, for phase detection.
    pub fn kind_name(&self) -> &str {
        match self {
            Activity::Work { procedure, .. } => procedure,
            Activity::Wait { call, .. } => call,
        }
    }
}

/// What a thread waited in, from the event where a dependency arrives: the call (an
/// MPI/PVM receive, wait or collective, or a pthread call with `--locks`), a futex wait,
/// or, for any other event, the start of a thread (its creator's clone).
pub(crate) fn event_name(v: &Vertex) -> String {
    let k = (v.label >> 16) as u16;
    let c = v.label as u16;
    match k {
        kind::CALL_ENTER | kind::CALL_EXIT | kind::HANDLE_ARRAY | kind::STATUS_ARRAY => {
            calls::name(split_call_field(c).id)
        }
        kind::FUTEX_ENTER | kind::FUTEX_EXIT => FUTEX_WAIT.into(),
        _ => THREAD_START.into(),
    }
}

/// The procedure an arc's work is attributed to (innermost selected one).
pub(crate) fn arc_procedure(g: &Graph, rg: &RecordedGraph, a: ArcId) -> String {
    match innermost_procedure(g, a) {
        Some(p) => rg.procedures.get(p).cloned().unwrap_or_default(),
        None => OUTSIDE.to_string(),
    }
}

/// The index in `RecordedGraph::procedures` of the innermost selected procedure active
/// on arc `a`; None outside every selected procedure.
fn innermost_procedure(g: &Graph, a: ArcId) -> Option<usize> {
    g.contexts[g.arc(a).context as usize].innermost
}

/// The procedures' names as [`arc_procedure`] gives them, shared: one allocation per
/// procedure, not per arc, for the exports' rows (a big graph has millions of arcs).
pub(crate) struct ProcedureNames {
    names: Vec<Arc<str>>,
    outside: Arc<str>,
    /// "": the name of an arc that is not work, and of a procedure index the recording
    /// does not list.
    empty: Arc<str>,
}

impl ProcedureNames {
    pub(crate) fn new(rg: &RecordedGraph) -> Self {
        ProcedureNames {
            names: rg
                .procedures
                .iter()
                .map(|p| Arc::from(p.as_str()))
                .collect(),
            outside: Arc::from(OUTSIDE),
            empty: Arc::from(""),
        }
    }

    /// The procedure arc `a`'s work is attributed to.
    pub(crate) fn of_arc(&self, g: &Graph, a: ArcId) -> Arc<str> {
        match innermost_procedure(g, a) {
            Some(p) => self.names.get(p).unwrap_or(&self.empty).clone(),
            None => self.outside.clone(),
        }
    }

    /// The empty name (of an arc that is not work).
    pub(crate) fn none(&self) -> Arc<str> {
        self.empty.clone()
    }
}

/// Turns a source-to-sink arc list into activities. `weight` gives each arc's weight
/// (what-if edits change it).
pub fn activities(
    rg: &RecordedGraph,
    arcs: &[ArcId],
    weight: &dyn Fn(ArcId) -> u64,
) -> Vec<Activity> {
    let g = &rg.graph;
    let mut out: Vec<Activity> = Vec::new();
    for &id in arcs {
        let a = g.arc(id);
        let (from, to) = (&g.vertices[a.from as usize], &g.vertices[a.to as usize]);
        match a.kind {
            ArcKind::Virtual => {}
            ArcKind::Program => {
                let procedure = arc_procedure(g, rg, id);
                let w = weight(id);
                if let Some(Activity::Work {
                    tid,
                    procedure: p,
                    end_ns,
                    work_ns,
                    ..
                }) = out.last_mut()
                {
                    if *tid == to.tid && (*p == procedure || w == 0) {
                        *end_ns = to.ts_ns;
                        *work_ns += w;
                        continue;
                    }
                }
                if w == 0 {
                    continue; // bookkeeping between events of a thread: not an activity
                }
                out.push(Activity::Work {
                    pid: rg.pid_of(to.tid),
                    tid: to.tid,
                    procedure,
                    start_ns: from.ts_ns,
                    end_ns: to.ts_ns,
                    work_ns: w,
                });
            }
            ArcKind::Dependency => out.push(Activity::Wait {
                from_pid: rg.pid_of(from.tid),
                from_tid: from.tid,
                to_pid: rg.pid_of(to.tid),
                to_tid: to.tid,
                call: event_name(to),
                latency_ns: to.ts_ns.saturating_sub(from.ts_ns),
            }),
        }
    }
    out
}

/// Totals of a path.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathTotals {
    pub length_ns: u64,
    /// Work on the path by selected procedure (inclusive: callees counted), and the
    /// work outside every selected procedure under [`OUTSIDE`].
    pub by_procedure: BTreeMap<String, u64>,
    /// Work on the path in each procedure and not in a selected callee.
    pub by_procedure_exclusive: BTreeMap<String, u64>,
    pub by_process: BTreeMap<u32, u64>,
    pub by_thread: BTreeMap<u32, u64>,
    /// Dependencies the path crosses and their measured latency in total: the
    /// communication the path waited for (not counted in its length, which assumes an
    /// infinitely fast network).
    pub dependencies: u64,
    pub dependency_latency_ns: u64,
}

impl PathTotals {
    pub fn new(rg: &RecordedGraph, arcs: &[ArcId], weight: &dyn Fn(ArcId) -> u64) -> Self {
        let g = &rg.graph;
        let mut t = PathTotals::default();
        for &id in arcs {
            let a = g.arc(id);
            match a.kind {
                ArcKind::Virtual => {}
                ArcKind::Dependency => {
                    t.dependencies += 1;
                    let (f, to) = (&g.vertices[a.from as usize], &g.vertices[a.to as usize]);
                    t.dependency_latency_ns += to.ts_ns.saturating_sub(f.ts_ns);
                }
                ArcKind::Program => {
                    let w = weight(id);
                    t.length_ns += w;
                    if w == 0 {
                        continue;
                    }
                    let c = &g.contexts[a.context as usize];
                    for &p in &c.procedures {
                        *t.by_procedure.entry(rg.procedures[p].clone()).or_default() += w;
                    }
                    let excl = match c.innermost {
                        Some(p) => rg.procedures[p].clone(),
                        None => OUTSIDE.to_string(),
                    };
                    if c.procedures.is_empty() {
                        *t.by_procedure.entry(OUTSIDE.to_string()).or_default() += w;
                    }
                    *t.by_procedure_exclusive.entry(excl).or_default() += w;
                    let tid = g.vertices[a.to as usize].tid;
                    *t.by_process.entry(rg.pid_of(tid)).or_default() += w;
                    *t.by_thread.entry(tid).or_default() += w;
                }
            }
        }
        t
    }
}
