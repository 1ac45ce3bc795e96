//! `tracer report --arcs FILE`: every arc of the graph with its schedule, as CSV.

use crate::graph::cpm::Schedule;
use crate::graph::recorded::RecordedGraph;
use crate::graph::ArcKind;

/// Writes every arc with its critical-path-method times as CSV (`tracer report
/// --arcs FILE`; columns in docs/report-json.md).
pub fn write_arcs_csv(rg: &RecordedGraph, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let g = &rg.graph;
    let sched = Schedule::new(g);
    writeln!(
        out,
        "arc,from,to,kind,pid,tid,procedure,weight_ns,early_start,early_finish,late_start,late_finish,total_slack,free_slack"
    )?;
    let opt = |x: Option<u64>| x.map(|v| v.to_string()).unwrap_or_default();
    for (id, a) in g.arcs.iter().enumerate() {
        let t = sched.arc_times(a, a.weight);
        // Program arcs belong to the thread they lead to; others name the waiting side.
        let tid = g.vertices[a.to as usize].tid;
        let procedure = match a.kind {
            ArcKind::Program => crate::graph::path::arc_procedure(g, rg, id as u32),
            _ => String::new(),
        };
        let kind = match a.kind {
            ArcKind::Program => "program",
            ArcKind::Dependency => "dependency",
            ArcKind::Virtual => "virtual",
        };
        writeln!(
            out,
            "{id},{},{},{kind},{},{tid},\"{}\",{},{},{},{},{},{},{}",
            a.from,
            a.to,
            rg.pid_of(tid),
            procedure.replace('"', "\"\""),
            a.weight,
            t.early_start,
            t.early_finish,
            opt(t.late_start),
            opt(t.late_finish),
            opt(t.total_slack),
            t.free_slack
        )?;
    }
    Ok(())
}
