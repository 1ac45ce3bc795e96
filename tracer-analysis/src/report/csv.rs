//! `tracer report --arcs FILE`: every arc of the graph with its schedule, as CSV.

use std::sync::Arc;

use crate::graph::cpm::Schedule;
use crate::graph::path::ProcedureNames;
use crate::graph::recorded::RecordedGraph;
use crate::graph::{ArcKind, VertexId};

/// One arc of the graph with its critical-path-method times (the CSV's line, and the
/// Parquet export's `arcs` table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArcRow {
    pub arc: u32,
    pub from: VertexId,
    pub to: VertexId,
    /// `program`, `dependency` or `virtual`.
    pub kind: &'static str,
    /// Process and thread of the arc's target event.
    pub pid: u32,
    pub tid: u32,
    /// Innermost selected procedure of a program arc; empty for the other kinds. Shared:
    /// one allocation per procedure, not per arc (a big graph has millions of arcs).
    pub procedure: Arc<str>,
    pub weight_ns: u64,
    pub early_start: u64,
    pub early_finish: u64,
    /// `None` for an arc that cannot reach the path's end.
    pub late_start: Option<u64>,
    pub late_finish: Option<u64>,
    pub total_slack: Option<u64>,
    pub free_slack: u64,
}

/// Every arc of the graph, in id order, timed by `sched` (the graph's schedule).
pub(crate) fn arc_rows<'a>(
    rg: &'a RecordedGraph,
    sched: &'a Schedule,
) -> impl Iterator<Item = ArcRow> + 'a {
    let g = &rg.graph;
    let names = ProcedureNames::new(rg);
    g.arcs.iter().enumerate().map(move |(id, a)| {
        let t = sched.arc_times(a, a.weight);
        // Program arcs belong to the thread they lead to; others name the waiting side.
        let tid = g.vertices[a.to as usize].tid;
        let procedure = match a.kind {
            ArcKind::Program => names.of_arc(g, id as u32),
            _ => names.none(),
        };
        ArcRow {
            arc: id as u32,
            from: a.from,
            to: a.to,
            kind: match a.kind {
                ArcKind::Program => "program",
                ArcKind::Dependency => "dependency",
                ArcKind::Virtual => "virtual",
            },
            pid: rg.pid_of(tid),
            tid,
            procedure,
            weight_ns: a.weight,
            early_start: t.early_start,
            early_finish: t.early_finish,
            late_start: t.late_start,
            late_finish: t.late_finish,
            total_slack: t.total_slack,
            free_slack: t.free_slack,
        }
    })
}

/// Writes every arc with its critical-path-method times as CSV (`tracer report
/// --arcs FILE`; columns in docs/report-json.md).
pub fn write_arcs_csv(rg: &RecordedGraph, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let sched = Schedule::new(&rg.graph);
    writeln!(
        out,
        "arc,from,to,kind,pid,tid,procedure,weight_ns,early_start,early_finish,late_start,late_finish,total_slack,free_slack"
    )?;
    let opt = |x: Option<u64>| x.map(|v| v.to_string()).unwrap_or_default();
    for r in arc_rows(rg, &sched) {
        writeln!(
            out,
            "{},{},{},{},{},{},\"{}\",{},{},{},{},{},{},{}",
            r.arc,
            r.from,
            r.to,
            r.kind,
            r.pid,
            r.tid,
            r.procedure.replace('"', "\"\""),
            r.weight_ns,
            r.early_start,
            r.early_finish,
            opt(r.late_start),
            opt(r.late_finish),
            opt(r.total_slack),
            r.free_slack
        )?;
    }
    Ok(())
}
