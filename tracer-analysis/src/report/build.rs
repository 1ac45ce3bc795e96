//! Building a report from a recording's graph: the path, its procedures, threads,
//! phases, near-critical paths, maximum benefit and what-if answers.

use std::collections::BTreeMap;

use super::diagnosis::diagnose;
use super::types::*;
use crate::analysis::profile::CriticalPath;
use crate::graph::cpm::Schedule;
use crate::graph::kpaths::NearCriticalPaths;
use crate::graph::mbm::maximum_benefit;
use crate::graph::path::{activities, Activity, PathTotals, OUTSIDE};
use crate::graph::phases::find_phases;
use crate::graph::recorded::RecordedGraph;
use crate::graph::whatif::{zeroing_gain, ScaledWeights};
use crate::graph::ArcKind;
use crate::metrics::Metrics;
use crate::units::percent;

pub(super) fn activity_start(a: &Activity) -> u64 {
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
        let ProcedureWork {
            inclusive: work_in,
            total: work_total,
        } = work_by_procedure(rg);
        let mut procedures: Vec<ProcedureRow> = benefits
            .iter()
            .map(|b| {
                let name = match b.class {
                    Some(p) => rg.procedures[p].clone(),
                    None => OUTSIDE.to_string(),
                };
                let zeroing = zeroing_gain(g, b.class, length);
                let work = match b.class {
                    Some(p) => work_in[p],
                    None => work_in[rg.procedures.len()],
                };
                ProcedureRow {
                    work_ns: work,
                    work_pct: percent(work, work_total),
                    cp_exclusive_ns: totals
                        .by_procedure_exclusive
                        .get(&name)
                        .copied()
                        .unwrap_or(0),
                    name,
                    symbol: b.class.map(|p| rg.procedure_symbols[p].clone()),
                    cp_ns: b.on_critical_ns,
                    cp_pct: percent(b.on_critical_ns, length),
                    zeroing_ns: zeroing,
                    zeroing_pct: percent(zeroing, length),
                    mbm_ns: b.mbm_ns,
                    mbm_pct: percent(b.mbm_ns, length),
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
                    cp_pct: percent(ns, length),
                }
            })
            .collect();
        processes.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.pid.cmp(&y.pid)));

        let threads = thread_rows(rg, &sched, &totals);
        let near_critical_paths = (0..paths.len())
            .map(|j| NearPath {
                rank: j + 1,
                length_ns: paths.length(j),
                pct: percent(paths.length(j), length),
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
                gain_pct: percent(length.saturating_sub(s.length), length),
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
                probe_failures: rg.probe_failures.clone(),
            },
            activities: acts,
            totals,
            procedures,
            sampled: None,
            processes,
            threads,
            near_critical_paths,
            whatif,
            phases,
            messages: rg.messages.clone(),
            killed: rg.killed.clone(),
            metrics,
        };
        report.diagnosis = diagnose(&report, report.metrics.as_ref());
        report
    }
}

/// Work per procedure (inclusive) over all threads, the work outside every selected
/// procedure last; and all work.
pub(super) fn work_by_procedure(rg: &RecordedGraph) -> ProcedureWork {
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
    ProcedureWork {
        inclusive: work,
        total: by_context.iter().sum(),
    }
}

/// Work per procedure (inclusive, the work outside every selected procedure last), and
/// all work.
pub(super) struct ProcedureWork {
    pub(super) inclusive: Vec<u64>,
    pub(super) total: u64,
}

pub(super) fn thread_rows(
    rg: &RecordedGraph,
    sched: &Schedule,
    totals: &PathTotals,
) -> Vec<ThreadRow> {
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
pub(super) fn phase_rows(acts: &[Activity], length: u64, opts: &ReportOptions) -> Vec<PhaseRow> {
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
