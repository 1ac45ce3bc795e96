//! `tracer report`: the offline answers on a recording's graph, as a text report and as
//! JSON (schema: docs/report-json.md).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::cpm::Schedule;
use super::diagnosis::{diagnose, Finding};
use super::kpaths::NearCriticalPaths;
use super::mbm::maximum_benefit;
use super::path::{activities, Activity, PathTotals, OUTSIDE, THREAD_START};
use super::phases::find_phases;
use super::recorded::RecordedGraph;
use super::whatif::{Scale, ScaledWeights};
use super::ArcKind;
use crate::analysis::matcher::MatchStats;
use crate::analysis::profile::{messages_line, CriticalPath};
use crate::metrics::Metrics;

pub const SCHEMA_VERSION: u32 = 1;

pub struct ReportOptions {
    /// How many longest paths to find (1 = the critical path only).
    pub paths: usize,
    /// What-if edits, applied together.
    pub scales: Vec<Scale>,
    /// Phases: least number of occurrences, longest pattern, how many to list.
    pub phase_support: usize,
    pub phase_max_len: usize,
    pub phase_limit: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            paths: 10,
            scales: Vec::new(),
            phase_support: 2,
            phase_max_len: 16,
            phase_limit: 5,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub clock: String,
    /// Findings in words, most important first (see `diagnosis`).
    pub diagnosis: Vec<Finding>,
    pub critical_path: PathHeader,
    /// The path itself, first activity first.
    pub activities: Vec<Activity>,
    pub totals: PathTotals,
    /// Per selected procedure (and the work outside them), largest share first.
    pub procedures: Vec<ProcedureRow>,
    pub processes: Vec<ProcessRow>,
    pub threads: Vec<ThreadRow>,
    pub near_critical_paths: Vec<NearPath>,
    pub whatif: Option<WhatIf>,
    pub phases: Vec<PhaseRow>,
    pub messages: MatchStats,
    /// Metrics by level (docs/metrics.md), when computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathHeader {
    /// Length, elapsed time and where the path ends, as in the online profile.
    #[serde(flatten)]
    pub path: CriticalPath,
    pub vertices: usize,
    pub arcs: usize,
    pub events: u64,
    pub lost: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcedureRow {
    pub name: String,
    /// Time of the critical path inside the procedure (callees included).
    pub cp_ns: u64,
    pub cp_pct: f64,
    pub cp_exclusive_ns: u64,
    /// Work in the procedure (callees included) by all threads, and its share of all
    /// work.
    pub work_ns: u64,
    pub work_pct: f64,
    /// How much shorter the critical path gets if the procedure took no time (exact:
    /// the path recomputed on the graph with the procedure's arcs weighted 0).
    pub zeroing_ns: u64,
    pub zeroing_pct: f64,
    /// Maximum benefit over the k longest paths (an upper bound on the gain that tuning
    /// the procedure can buy, judged by the paths found).
    pub mbm_ns: u64,
    pub mbm_pct: f64,
    /// Whether `mbm_ns` is exactly the zeroing gain (the k paths cover every path that
    /// could matter); otherwise it is an upper bound.
    pub mbm_exact: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub rank: Option<i32>,
    pub command: String,
    pub cp_ns: u64,
    pub cp_pct: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadRow {
    pub tid: u32,
    pub pid: u32,
    /// Work of the thread on the critical path and in all.
    pub cp_ns: u64,
    pub work_ns: u64,
    /// Least total slack of the thread's work: how much it could be delayed without
    /// lengthening the path (0 for threads on the critical path); None if none of its
    /// work reaches the path's end.
    pub min_slack_ns: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NearPath {
    pub rank: usize,
    pub length_ns: u64,
    /// Length as a percentage of the critical path's.
    pub pct: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct WhatIf {
    /// (procedure, factor) edits applied together.
    pub scales: Vec<(String, f64)>,
    pub measured_ns: u64,
    pub predicted_ns: u64,
    pub gain_ns: u64,
    pub gain_pct: f64,
    /// Work on the new critical path by procedure (inclusive), and where it ends.
    pub by_procedure: BTreeMap<String, u64>,
    pub ends_in_tid: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseRow {
    /// Activity types (procedure names and waits) in order.
    pub pattern: Vec<String>,
    pub count: usize,
    pub score: u64,
    /// Probe clock at the start of each occurrence.
    pub starts_ns: Vec<u64>,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 10000.0 / whole as f64).round() / 100.0
    }
}

fn activity_start(a: &Activity) -> u64 {
    match a {
        Activity::Work { start_ns, .. } => *start_ns,
        Activity::Wait { .. } => 0,
    }
}

impl Report {
    /// The report on a recording's graph; `metrics` (of the same recording) adds the
    /// findings about CPU contention and time blocked.
    pub fn new(rg: &RecordedGraph, opts: &ReportOptions, metrics: Option<Metrics>) -> Report {
        let g = &rg.graph;
        let sched = Schedule::new(g);
        let own = |id| g.arc(id).weight;
        let cp = sched.critical_arcs(g, |_, a| a.weight);
        let acts = activities(rg, &cp, &own);
        let totals = PathTotals::new(rg, &cp, &own);
        let length = sched.length;
        let end_tid = cp
            .last()
            .map(|&id| g.vertices[g.arc(id).from as usize].tid)
            .unwrap_or(0);
        let end_pid = rg.pid_of(end_tid);

        let paths = NearCriticalPaths::search(g, &sched, opts.paths.max(1));
        let benefits = maximum_benefit(g, &paths, rg.procedures.len());
        let (work_in, work_total) = work_by_procedure(rg);
        let mut procedures: Vec<ProcedureRow> = benefits
            .iter()
            .map(|b| {
                let name = match b.class {
                    Some(p) => rg.procedures[p].clone(),
                    None => OUTSIDE.to_string(),
                };
                let zeroing = match b.class {
                    Some(p) => {
                        let zero = ScaledWeights::new(
                            g,
                            &[Scale {
                                procedure: p,
                                factor: 0.0,
                            }],
                        );
                        length - zero.schedule(g).length
                    }
                    None => length - zeroed_outside(rg).length,
                };
                let work = match b.class {
                    Some(p) => work_in[p],
                    None => work_in[rg.procedures.len()],
                };
                ProcedureRow {
                    work_ns: work,
                    work_pct: pct(work, work_total),
                    cp_exclusive_ns: totals
                        .by_procedure_exclusive
                        .get(&name)
                        .copied()
                        .unwrap_or(0),
                    name,
                    cp_ns: b.on_critical_ns,
                    cp_pct: pct(b.on_critical_ns, length),
                    zeroing_ns: zeroing,
                    zeroing_pct: pct(zeroing, length),
                    mbm_ns: b.mbm_ns,
                    mbm_pct: pct(b.mbm_ns, length),
                    mbm_exact: b.exact,
                }
            })
            .collect();
        procedures.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.name.cmp(&y.name)));

        let mut processes: Vec<ProcessRow> = totals
            .by_process
            .iter()
            .map(|(&pid, &ns)| {
                let label = rg.processes.get(&pid);
                ProcessRow {
                    pid,
                    rank: label.and_then(|l| l.rank),
                    command: label.map(|l| l.command.clone()).unwrap_or_default(),
                    cp_ns: ns,
                    cp_pct: pct(ns, length),
                }
            })
            .collect();
        processes.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.pid.cmp(&y.pid)));

        let threads = thread_rows(rg, &sched, &totals);
        let near_critical_paths = (0..paths.len())
            .map(|j| NearPath {
                rank: j + 1,
                length_ns: paths.length(j),
                pct: pct(paths.length(j), length),
            })
            .collect();

        let whatif = (!opts.scales.is_empty()).then(|| {
            let w = ScaledWeights::new(g, &opts.scales);
            let s = w.schedule(g);
            let arcs = s.critical_arcs(g, |id, _| w.weight(g, id));
            let t = PathTotals::new(rg, &arcs, &|id| w.weight(g, id));
            WhatIf {
                scales: opts
                    .scales
                    .iter()
                    .map(|s| (rg.procedures[s.procedure].clone(), s.factor))
                    .collect(),
                measured_ns: length,
                predicted_ns: s.length,
                gain_ns: length.saturating_sub(s.length),
                gain_pct: pct(length.saturating_sub(s.length), length),
                by_procedure: t.by_procedure,
                ends_in_tid: arcs
                    .last()
                    .map(|&id| g.vertices[g.arc(id).from as usize].tid)
                    .unwrap_or(0),
            }
        });

        let phases = phase_rows(&acts, length, opts);
        let mut report = Report {
            schema_version: SCHEMA_VERSION,
            diagnosis: Vec::new(),
            clock: rg.clock.name().into(),
            critical_path: PathHeader {
                path: CriticalPath {
                    length_ns: length,
                    ends_in_pid: end_pid,
                    ends_in_tid: end_tid,
                    ends_in_command: rg
                        .processes
                        .get(&end_pid)
                        .map(|p| p.command.clone())
                        .unwrap_or_default(),
                    elapsed_ns: rg.last_ts.saturating_sub(rg.first_ts),
                    within_program: !rg.participants.is_empty(),
                },
                vertices: g.vertex_count(),
                arcs: g.arcs.len(),
                events: rg.events,
                lost: rg.lost,
            },
            activities: acts,
            totals,
            procedures,
            processes,
            threads,
            near_critical_paths,
            whatif,
            phases,
            messages: rg.messages.clone(),
            metrics,
        };
        report.diagnosis = diagnose(&report, report.metrics.as_ref());
        report
    }
}

/// Work per procedure (inclusive) over all threads, the work outside every selected
/// procedure last; and all work.
fn work_by_procedure(rg: &RecordedGraph) -> (Vec<u64>, u64) {
    let g = &rg.graph;
    let n = rg.procedures.len();
    let mut by_context = vec![0u64; g.contexts.len()];
    for a in g.arcs.iter().filter(|a| a.kind == ArcKind::Program) {
        by_context[a.context as usize] += a.weight;
    }
    let mut work = vec![0u64; n + 1];
    for (c, ns) in g.contexts.iter().zip(&by_context) {
        if c.procedures.is_empty() {
            work[n] += ns;
        }
        for &p in &c.procedures {
            work[p] += ns;
        }
    }
    (work, by_context.iter().sum())
}

/// The path with all work outside selected procedures weighted 0.
fn zeroed_outside(rg: &RecordedGraph) -> Schedule {
    let g = &rg.graph;
    Schedule::with_weights(g, |_, a| {
        if a.kind == ArcKind::Program && g.contexts[a.context as usize].procedures.is_empty() {
            0
        } else {
            a.weight
        }
    })
}

fn thread_rows(rg: &RecordedGraph, sched: &Schedule, totals: &PathTotals) -> Vec<ThreadRow> {
    let g = &rg.graph;
    let mut rows: BTreeMap<u32, ThreadRow> = BTreeMap::new();
    for a in &g.arcs {
        if a.kind != ArcKind::Program {
            continue;
        }
        let tid = g.vertices[a.to as usize].tid;
        let row = rows.entry(tid).or_insert_with(|| ThreadRow {
            tid,
            pid: rg.pid_of(tid),
            cp_ns: totals.by_thread.get(&tid).copied().unwrap_or(0),
            work_ns: 0,
            min_slack_ns: None,
        });
        row.work_ns += a.weight;
        if a.weight > 0 {
            if let Some(s) = sched.arc_times(a, a.weight).total_slack {
                row.min_slack_ns = Some(row.min_slack_ns.map_or(s, |m| m.min(s)));
            }
        }
    }
    let mut rows: Vec<ThreadRow> = rows.into_values().filter(|r| r.work_ns > 0).collect();
    rows.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.tid.cmp(&y.tid)));
    rows
}

/// Phases over the path's activities. Slivers of work (under 0.1 % of the path, the
/// bookkeeping between two calls) are left out of the string, so that a loop's
/// iterations read alike.
fn phase_rows(acts: &[Activity], length: u64, opts: &ReportOptions) -> Vec<PhaseRow> {
    // Indexes into `acts` of the activities the string is made of.
    let kept: Vec<usize> = (0..acts.len())
        .filter(|&i| match &acts[i] {
            Activity::Work { work_ns, .. } => work_ns.saturating_mul(1000) >= length,
            Activity::Wait { .. } => true,
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
    let symbols: Vec<u32> = kept
        .iter()
        .map(|&i| {
            let n = acts[i].kind_name();
            *ids.entry(n).or_insert_with(|| {
                names.push(n.to_string());
                (names.len() - 1) as u32
            })
        })
        .collect();
    // The start of an occurrence: the start of the first work at or after its first
    // activity on the whole path, slivers included (a wait has no time of its own; the
    // work after it begins when it ends). One backward pass: looking it up per
    // occurrence in the filtered string was quadratic when that string held no work
    // (a long run of small messages, all of whose work is slivers), and then gave every
    // occurrence the same start.
    let mut next_work_start = vec![0u64; acts.len() + 1];
    for i in (0..acts.len()).rev() {
        next_work_start[i] = match activity_start(&acts[i]) {
            0 => next_work_start[i + 1],
            start => start,
        };
    }
    find_phases(
        &symbols,
        opts.phase_support.max(2),
        2,
        opts.phase_max_len.max(2),
        opts.phase_limit,
    )
    .into_iter()
    .map(|p| PhaseRow {
        pattern: p
            .pattern
            .iter()
            .map(|&s| names[s as usize].clone())
            .collect(),
        count: p.count,
        score: p.score,
        starts_ns: p
            .positions
            .iter()
            .map(|&at| next_work_start[kept[at]])
            .collect(),
    })
    .collect()
}

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
            ArcKind::Program => super::path::arc_procedure(g, rg, id as u32),
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

/// How many activities the text report lists.
const TEXT_ACTIVITIES: usize = 30;

impl Report {
    /// The report for people.
    pub fn text(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let cp = &self.critical_path;
        let mut s = String::new();
        let _ = writeln!(s, "{}", cp.path.headline(&self.clock));
        if !self.diagnosis.is_empty() {
            let _ = writeln!(s, "\ndiagnosis:");
            for (i, f) in self.diagnosis.iter().enumerate() {
                let _ = writeln!(s, "  {}. {}", i + 1, f.text);
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "graph: {} vertices, {} arcs from {} events ({} lost)",
            cp.vertices, cp.arcs, cp.events, cp.lost
        );
        let t = &self.totals;
        let _ = writeln!(
            s,
            "on the path: computation {:.3} ms ({:.2} %); {} waits for other threads with {:.3} ms measured latency ({:.2} %, not in the length)",
            ms(t.length_ns),
            pct(t.length_ns, t.length_ns + t.dependency_latency_ns),
            t.dependencies,
            ms(t.dependency_latency_ns),
            pct(t.dependency_latency_ns, t.length_ns + t.dependency_latency_ns),
        );

        let _ = writeln!(s, "\nthe path ({} activities):", self.activities.len());
        let t0 = self
            .activities
            .iter()
            .map(activity_start)
            .find(|&t| t > 0)
            .unwrap_or(0);
        for a in self.activities.iter().take(TEXT_ACTIVITIES) {
            match a {
                Activity::Work {
                    pid,
                    tid,
                    procedure,
                    start_ns,
                    work_ns,
                    ..
                } => {
                    let _ = writeln!(
                        s,
                        "  {:>10.3} ms  pid {pid} tid {tid}  {procedure}  {:.3} ms",
                        ms(start_ns.saturating_sub(t0)),
                        ms(*work_ns)
                    );
                }
                Activity::Wait {
                    from_pid,
                    from_tid,
                    to_pid,
                    to_tid,
                    call,
                    latency_ns,
                } => {
                    // Threads of one process are told apart by thread id.
                    let (to, from) = if from_pid == to_pid {
                        (format!("tid {to_tid}"), format!("tid {from_tid}"))
                    } else {
                        (format!("pid {to_pid}"), format!("pid {from_pid}"))
                    };
                    let what = if call == THREAD_START {
                        format!("{to} is started by {from}")
                    } else {
                        format!("{to} waits in {call} for {from}")
                    };
                    let _ = writeln!(
                        s,
                        "  {:>13}  {what} ({:.3} ms latency)",
                        "",
                        ms(*latency_ns)
                    );
                }
            }
        }
        if self.activities.len() > TEXT_ACTIVITIES {
            let _ = writeln!(
                s,
                "  ... {} more (--json lists them all)",
                self.activities.len() - TEXT_ACTIVITIES
            );
        }

        let _ = writeln!(
            s,
            "\n{:<30} {:>11} {:>7} {:>11} {:>11} {:>7} {:>11} {:>7}",
            "procedure", "cp ms", "cp %", "excl ms", "zeroing ms", "zero %", "mbm ms", "mbm %"
        );
        for p in &self.procedures {
            let _ = writeln!(
                s,
                "{:<30} {:>11.3} {:>7.2} {:>11.3} {:>11.3} {:>7.2} {:>11.3} {:>7.2}",
                p.name,
                ms(p.cp_ns),
                p.cp_pct,
                ms(p.cp_exclusive_ns),
                ms(p.zeroing_ns),
                p.zeroing_pct,
                ms(p.mbm_ns),
                p.mbm_pct
            );
        }
        let _ = writeln!(
            s,
            "(mbm: maximum benefit over the {} longest paths)",
            self.near_critical_paths.len()
        );

        let _ = writeln!(
            s,
            "\n{:<9} {:>5} {:>11} {:>7}  command",
            "pid", "rank", "cp ms", "cp %"
        );
        for p in &self.processes {
            let rank = p.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "{:<9} {:>5} {:>11.3} {:>7.2}  {}",
                p.pid,
                rank,
                ms(p.cp_ns),
                p.cp_pct,
                p.command
            );
        }
        let _ = writeln!(
            s,
            "\n{:<9} {:<9} {:>11} {:>11} {:>13}",
            "tid", "pid", "cp ms", "work ms", "min slack ms"
        );
        for r in &self.threads {
            let slack = r
                .min_slack_ns
                .map(|x| format!("{:.3}", ms(x)))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "{:<9} {:<9} {:>11.3} {:>11.3} {:>13}",
                r.tid,
                r.pid,
                ms(r.cp_ns),
                ms(r.work_ns),
                slack
            );
        }

        let _ = writeln!(s, "\nlongest paths:");
        for p in &self.near_critical_paths {
            let _ = writeln!(
                s,
                "  #{:<5} {:>12.3} ms {:>7.2} %",
                p.rank,
                ms(p.length_ns),
                p.pct
            );
        }

        if let Some(w) = &self.whatif {
            let edits: Vec<String> = w.scales.iter().map(|(p, f)| format!("{p}={f}")).collect();
            let _ = writeln!(
                s,
                "\nwhat if {}: critical path {:.3} ms instead of {:.3} ms (gain {:.3} ms, {:.2} %); ends in tid {}",
                edits.join(" "),
                ms(w.predicted_ns),
                ms(w.measured_ns),
                ms(w.gain_ns),
                w.gain_pct,
                w.ends_in_tid
            );
            for (p, ns) in &w.by_procedure {
                let _ = writeln!(
                    s,
                    "  {:<30} {:>11.3} ms {:>7.2} %",
                    p,
                    ms(*ns),
                    pct(*ns, w.predicted_ns)
                );
            }
        }

        if !self.phases.is_empty() {
            let _ = writeln!(s, "\nrepeated phases on the path (occurrences x pattern):");
            for p in &self.phases {
                let _ = writeln!(s, "  {:>4} x  {}", p.count, p.pattern.join(" > "));
            }
        }
        let _ = writeln!(s, "\n{}", messages_line(&self.messages));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping-pong path: `iterations` x (sliver of work on tid 1, tid 2 waits in
    /// MPI_Recv, sliver on tid 2, tid 1 waits in MPI_Allreduce), the work of iteration
    /// `i` starting at 1 s + i us (tid 1) and half a microsecond later (tid 2).
    fn ping_pong(iterations: u64) -> Vec<Activity> {
        let work = |tid: u32, start_ns: u64| Activity::Work {
            pid: tid,
            tid,
            procedure: OUTSIDE.into(),
            start_ns,
            end_ns: start_ns + 10,
            work_ns: 10,
        };
        let wait = |from_tid: u32, to_tid: u32, call: &str| Activity::Wait {
            from_pid: from_tid,
            from_tid,
            to_pid: to_tid,
            to_tid,
            call: call.into(),
            latency_ns: 100,
        };
        (0..iterations)
            .flat_map(|i| {
                let t = 1_000_000_000 + i * 1000;
                [
                    work(1, t),
                    wait(1, 2, "MPI_Recv"),
                    work(2, t + 500),
                    wait(2, 1, "MPI_Allreduce"),
                ]
            })
            .collect()
    }

    #[test]
    fn phases_of_a_long_path_are_found_fast_with_each_occurrence_s_own_start() {
        // 200,000 activities; every work is a sliver (10 ns of 1 ms), so the string is
        // the waits only: MPI_Recv, MPI_Allreduce, over and over.
        let acts = ping_pong(50_000);
        assert_eq!(acts.len(), 200_000);
        let length = 50_000 * 20;
        let started = std::time::Instant::now();
        let phases = phase_rows(&acts, length, &ReportOptions::default());
        let took = started.elapsed();
        // The longest pattern allowed (16 waits, 8 iterations) ranks first: 100,000
        // waits hold 6,250 of it; shifted by one wait it fits once less.
        let recv_allreduce: Vec<String> = ["MPI_Recv", "MPI_Allreduce"]
            .iter()
            .cycle()
            .take(16)
            .map(|s| s.to_string())
            .collect();
        assert_eq!(phases[0].pattern, recv_allreduce);
        assert_eq!(phases[0].count, 6250);
        assert_eq!(phases[0].score, 6250 * 16 * 16);
        // Occurrence k starts at wait 16k, the MPI_Recv of iteration 8k, which ends
        // when tid 2's work of that iteration starts.
        let expected: Vec<u64> = (0..6250)
            .map(|k| 1_000_000_000 + 8 * k * 1000 + 500)
            .collect();
        assert_eq!(phases[0].starts_ns, expected);
        assert_eq!(phases[1].pattern[0], "MPI_Allreduce");
        assert_eq!(phases[1].pattern.len(), 16);
        assert_eq!(phases[1].count, 6249);
        // Occurrence k: the MPI_Allreduce of iteration 8k, then tid 1's next work.
        let expected: Vec<u64> = (0..6249)
            .map(|k| 1_000_000_000 + (8 * k + 1) * 1000)
            .collect();
        assert_eq!(phases[1].starts_ns, expected);
        for p in &phases {
            assert!(
                p.starts_ns.windows(2).all(|w| w[0] < w[1]),
                "{:?} x {}: starts not distinct and ascending",
                p.pattern,
                p.count
            );
        }
        // Was 45 s for a path of this kind (OSU latency); linear now, with room for an
        // unoptimized build on a busy machine.
        assert!(took.as_secs() < 10, "took {took:?}");
    }
}
