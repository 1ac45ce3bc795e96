//! A diagnosis in words: a short list of findings, each naming where to look and citing
//! the figures behind it, ranked by how much of the run it explains. The rules read the
//! report's figures only, so every statement can be checked against the tables below it.

use std::collections::BTreeMap;

use super::types::{Finding, FindingKind, Report};
use crate::graph::path::{Activity, OUTSIDE};
use crate::metrics::{Cause, Metrics};

fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e4).round() / 100.0
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 10000.0 / whole as f64).round() / 100.0
    }
}

/// Shares below this part of the path are not worth a statement.
const NOTABLE_PCT: f64 = 10.0;

fn who(r: &Report, pid: u32) -> String {
    match r
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .and_then(|p| p.rank)
    {
        Some(rank) => format!("rank {rank} (pid {pid})"),
        None => format!("pid {pid}"),
    }
}

fn figures(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The findings on a report, with the recording's metrics when they were computed.
pub(crate) fn diagnose(r: &Report, m: Option<&Metrics>) -> Vec<Finding> {
    let len = r.critical_path.path.length_ns;
    let mut out = Vec::new();
    if len == 0 {
        return out;
    }
    sequential_bottleneck(r, len, &mut out);
    procedures_on_path(r, &mut out);
    communication(r, &mut out);
    close_paths(r, len, &mut out);
    off_path(r, &mut out);
    if let Some(m) = m {
        waiting_in_calls(m, &mut out);
        cpu_contention(m, &mut out);
    }
    // Stable: findings of equal impact keep the order of the rules above.
    out.sort_by_key(|f| std::cmp::Reverse(f.impact_ns));
    out
}

/// The process whose work is most of the path, and the procedure it spends it in.
fn sequential_bottleneck(r: &Report, len: u64, out: &mut Vec<Finding>) {
    let on_path = r.processes.iter().filter(|p| p.cp_ns > 0).count();
    let Some(top) = r.processes.first() else {
        return;
    };
    if on_path < 2 || top.cp_pct < 50.0 {
        return;
    }
    let mut by_proc: BTreeMap<&str, u64> = BTreeMap::new();
    for a in &r.activities {
        if let Activity::Work {
            pid,
            procedure,
            work_ns,
            ..
        } = a
        {
            if *pid == top.pid {
                *by_proc.entry(procedure.as_str()).or_default() += work_ns;
            }
        }
    }
    let (proc_name, proc_ns) = by_proc
        .iter()
        .filter(|(p, _)| **p != OUTSIDE)
        .max_by_key(|(_, ns)| **ns)
        .map(|(p, ns)| (*p, *ns))
        .unwrap_or((OUTSIDE, top.cp_ns));
    let what = if proc_name == OUTSIDE {
        "its own code".to_string()
    } else {
        proc_name.to_string()
    };
    let others = match on_path - 1 {
        1 => "the other process on the path waits".to_string(),
        n => format!("the other {n} processes on the path wait"),
    };
    out.push(Finding {
        kind: FindingKind::SequentialBottleneck,
        text: format!(
            "{} runs {what} for {:.1} % of the critical path ({:.1} ms of {:.1} ms) while {others} for it: a sequential bottleneck",
            who(r, top.pid),
            pct(proc_ns, len),
            ms(proc_ns),
            ms(len),
        ),
        impact_ns: top.cp_ns,
        figures: figures(&[
            ("process_cp_ms", ms(top.cp_ns)),
            ("process_cp_pct", top.cp_pct),
            ("procedure_cp_ms", ms(proc_ns)),
            ("critical_path_ms", ms(len)),
        ]),
    });
}

/// Procedures that are a notable part of the path: what zeroing them gains, and how the
/// next paths bound what tuning can buy.
fn procedures_on_path(r: &Report, out: &mut Vec<Finding>) {
    for p in &r.procedures {
        if p.name == OUTSIDE || p.cp_pct < NOTABLE_PCT {
            continue;
        }
        // In u128: a damaged recording's times may be near 2^64 (found by the fuzzer).
        let close = u128::from(p.zeroing_ns) * 10 < u128::from(p.cp_ns) * 9;
        let share = format!(
            "{} is {:.1} % of the critical path ({:.1} ms)",
            p.name,
            p.cp_pct,
            ms(p.cp_ns)
        );
        let text = if close {
            let rest = r.critical_path.path.length_ns.saturating_sub(p.zeroing_ns);
            format!(
                "{share}, but removing it entirely would gain {:.1} % ({:.1} ms), not its full share: without it another path of {:.1} ms becomes critical",
                p.zeroing_pct,
                ms(p.zeroing_ns),
                ms(rest)
            )
        } else if p.cp_pct > p.work_pct {
            format!(
                "{share} but only {:.1} % of all work: it matters more than a CPU profile shows; making it faster shortens the run by up to {:.1} % ({:.1} ms)",
                p.work_pct,
                p.zeroing_pct,
                ms(p.zeroing_ns)
            )
        } else {
            format!(
                "{share}: making it faster shortens the run by up to {:.1} % ({:.1} ms)",
                p.zeroing_pct,
                ms(p.zeroing_ns)
            )
        };
        out.push(Finding {
            kind: FindingKind::ProcedureOnPath,
            text,
            impact_ns: p.zeroing_ns,
            figures: figures(&[
                ("cp_ms", ms(p.cp_ns)),
                ("cp_pct", p.cp_pct),
                ("work_pct", p.work_pct),
                ("zeroing_ms", ms(p.zeroing_ns)),
                ("zeroing_pct", p.zeroing_pct),
                ("mbm_ms", ms(p.mbm_ns)),
            ]),
        });
    }
}

/// The pair of processes whose messages the path waits for longest.
fn communication(r: &Report, out: &mut Vec<Finding>) {
    let t = &r.totals;
    let whole = t.length_ns + t.dependency_latency_ns;
    if pct(t.dependency_latency_ns, whole) < NOTABLE_PCT {
        return;
    }
    let mut pairs: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
    for a in &r.activities {
        if let Activity::Wait {
            from_pid,
            to_pid,
            latency_ns,
            ..
        } = a
        {
            let e = pairs.entry((*from_pid, *to_pid)).or_default();
            e.0 += 1;
            e.1 += latency_ns;
        }
    }
    let Some((&(from, to), &(n, ns))) = pairs.iter().max_by_key(|(_, v)| v.1) else {
        return;
    };
    out.push(Finding {
        kind: FindingKind::CommunicationOnPath,
        text: format!(
            "the critical path spends {:.1} % of its time waiting for messages ({:.1} ms measured latency); most of it ({:.1} ms in {n} waits) between {} and {}",
            pct(t.dependency_latency_ns, whole),
            ms(t.dependency_latency_ns),
            ms(ns),
            who(r, from),
            who(r, to)
        ),
        impact_ns: t.dependency_latency_ns,
        figures: figures(&[
            ("latency_ms", ms(t.dependency_latency_ns)),
            ("latency_pct", pct(t.dependency_latency_ns, whole)),
            ("pair_latency_ms", ms(ns)),
            ("pair_waits", n as f64),
        ]),
    });
}

/// When the next paths are close behind, tuning the top procedure buys less than its
/// share: the maximum benefit over the k longest paths says how much at most.
fn close_paths(r: &Report, len: u64, out: &mut Vec<Finding>) {
    let Some(top) = r
        .procedures
        .iter()
        .find(|p| p.name != OUTSIDE && p.cp_pct >= NOTABLE_PCT)
    else {
        return;
    };
    if top.mbm_ns * 10 >= top.cp_ns * 9 {
        return;
    }
    // The longest path that is shorter than the critical one (ties are the same run of
    // work by another route).
    let next = r.near_critical_paths.iter().find(|p| p.length_ns < len);
    let behind = next
        .map(|p| format!(" (the next path is {:.1} % of the critical one)", p.pct))
        .unwrap_or_default();
    out.push(Finding {
        kind: FindingKind::ClosePaths,
        text: format!(
            "other paths are close behind{behind}: tuning {} buys at most {:.1} % ({:.1} ms) of its {:.1} % share, judged from the {} longest paths",
            top.name,
            top.mbm_pct,
            ms(top.mbm_ns),
            top.cp_pct,
            r.near_critical_paths.len()
        ),
        impact_ns: top.cp_ns - top.mbm_ns,
        figures: figures(&[
            ("next_path_pct", next.map(|p| p.pct).unwrap_or(0.0)),
            ("mbm_ms", ms(top.mbm_ns)),
            ("mbm_pct", top.mbm_pct),
            ("cp_pct", top.cp_pct),
        ]),
    });
}

/// Procedures with a large share of all work and none of the path.
fn off_path(r: &Report, out: &mut Vec<Finding>) {
    for p in &r.procedures {
        if p.name == OUTSIDE || p.work_pct < NOTABLE_PCT || p.cp_pct >= 1.0 {
            continue;
        }
        out.push(Finding {
            kind: FindingKind::OffPath,
            text: format!(
                "{} takes {:.1} % of all work ({:.1} ms) but {:.1} % of the critical path: tuning it will not shorten the run",
                p.name,
                p.work_pct,
                ms(p.work_ns),
                p.cp_pct
            ),
            impact_ns: 0,
            figures: figures(&[
                ("work_ms", ms(p.work_ns)),
                ("work_pct", p.work_pct),
                ("cp_pct", p.cp_pct),
            ]),
        });
    }
}

/// A load factor above this is worth a statement.
const CONTENDED_LOAD: f64 = 1.2;
/// Processes blocked this part of their time or more are worth a statement.
const WAITING_PCT: f64 = 25.0;

/// Runnable threads waited for a CPU: the CPU clock leaves that wait out of the path.
fn cpu_contention(m: &Metrics, out: &mut Vec<Finding>) {
    let p = &m.program;
    let Some(load) = p.load_factor.filter(|l| *l >= CONTENDED_LOAD) else {
        return;
    };
    out.push(Finding {
        kind: FindingKind::CpuContention,
        text: format!(
            "the program's threads waited {:.1} ms for a CPU, {:.1} % of their CPU time (load factor {load:.2} on {} CPUs): more runnable threads than CPUs; the critical path's CPU clock leaves this wait out (--clock wall counts it)",
            ms(p.cpu_wait_ns),
            pct(p.cpu_wait_ns, p.cpu_ns),
            m.cpus
        ),
        // Not part of the path's length under the CPU clock: listed after the findings
        // about the path.
        impact_ns: 0,
        figures: figures(&[
            ("cpu_wait_ms", ms(p.cpu_wait_ns)),
            ("load_factor", load),
            ("cpus", m.cpus as f64),
        ]),
    });
}

/// The program's processes wait in message and collective calls: name the call that
/// holds them longest and its distribution.
fn waiting_in_calls(m: &Metrics, out: &mut Vec<Finding>) {
    let program: Vec<_> = m.processes.iter().filter(|p| p.participant).collect();
    let elapsed: u64 = program.iter().map(|p| p.measures.elapsed_ns).sum();
    let waiting: u64 = program
        .iter()
        .map(|p| p.measures.blocked.message_ns + p.measures.blocked.collective_ns)
        .sum();
    let share = pct(waiting, elapsed);
    if share < WAITING_PCT {
        return;
    }
    let Some(top) = m
        .calls
        .iter()
        .filter(|c| matches!(c.cause, Cause::Message | Cause::Collective))
        .max_by_key(|c| c.blocked.total_ns)
    else {
        return;
    };
    let d = &top.blocked;
    // Where in the code, when the call's heaviest site has a name.
    let site = m
        .call_sites
        .iter()
        .filter(|s| s.name == top.name)
        .max_by_key(|s| s.blocked.total_ns)
        .and_then(|s| s.location.as_ref())
        .map(|l| format!(" at {l}"))
        .unwrap_or_default();
    out.push(Finding {
        kind: FindingKind::WaitingInCalls,
        text: format!(
            "the program's {} processes spend {share:.1} % of their time blocked in messages and collectives, most in {}{site} ({:.1} ms over {} calls; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms): they wait for the critical path",
            program.len(),
            top.name,
            ms(d.total_ns),
            d.count,
            ms(d.p50_ns),
            ms(d.p99_ns),
            ms(d.max_ns)
        ),
        // A symptom that the path findings explain: listed after them.
        impact_ns: 0,
        figures: figures(&[
            ("blocked_pct", share),
            ("call_blocked_ms", ms(d.total_ns)),
            ("call_p50_ms", ms(d.p50_ns)),
            ("call_p99_ms", ms(d.p99_ns)),
        ]),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::format::synth::SyntheticRun;
    use crate::graph::recorded::RecordedGraph;
    use crate::report::ReportOptions;

    /// A three-stage pipeline whose middle stage is slow, and a busy procedure on the
    /// first rank that nothing waits for.
    #[test]
    fn names_the_planted_bottleneck() {
        let mut s = SyntheticRun::new(3, &["fast", "slow", "busy"]);
        for item in 0..3 {
            s.compute(0, 10_000_000, Some(0));
            s.send(0, 1, item);
            s.recv(1, 0, item);
            s.compute(1, 100_000_000, Some(1));
            s.send(1, 2, item);
            s.recv(2, 1, item);
            s.compute(2, 10_000_000, Some(0));
        }
        s.compute(0, 200_000_000, Some(2));
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let r = Report::new(&rg, &ReportOptions::default(), None);
        let d = &r.diagnosis;
        assert_eq!(d[0].kind, FindingKind::SequentialBottleneck, "{d:#?}");
        assert!(
            d[0].text.starts_with("rank 1 (pid 101) runs slow"),
            "{d:#?}"
        );
        assert_eq!(d[0].figures["procedure_cp_ms"], 300.0);
        let busy = d.iter().find(|f| f.kind == FindingKind::OffPath).unwrap();
        assert!(busy.text.starts_with("busy "), "{d:#?}");
        let slow = d
            .iter()
            .find(|f| f.kind == FindingKind::ProcedureOnPath && f.text.starts_with("slow "))
            .unwrap();
        // Without `slow` the longest path is rank 0's: 3 x 10 ms, then busy's 200 ms.
        assert_eq!(slow.figures["zeroing_ms"], 320.0 - 230.0, "{d:#?}");
    }
}
