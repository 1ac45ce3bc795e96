//! A diagnosis in words: a short list of findings, each naming where to look and citing
//! the figures behind it, ranked by how much of the run it explains. The rules read the
//! report's figures only, so every statement can be checked against the tables below it.

use crate::format::node::ShownId;
use std::collections::BTreeMap;

use super::types::{Finding, FindingKind, Report};
use crate::analysis::faults::Killed;
use crate::format::calls::{self, Role};
use crate::graph::path::{Activity, FUTEX_WAIT, OUTSIDE, THREAD_START};
use crate::metrics::{Cause, Metrics};
use crate::units::{ms_hundredths, percent};

/// Shares below this part of the path are not worth a statement.
const NOTABLE_PCT: f64 = 10.0;

fn who(r: &Report, pid: u32) -> String {
    match r
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .and_then(|p| p.rank)
    {
        Some(rank) => format!("rank {rank} (pid {})", ShownId(pid)),
        None => format!("pid {}", ShownId(pid)),
    }
}

fn figures(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The findings on a report, with the recording's metrics when they were computed.
pub(crate) fn diagnose(r: &Report, m: Option<&Metrics>) -> Vec<Finding> {
    let len = r.critical_path.path.length_ns;
    let mut out = Vec::new();
    if len > 0 {
        rules_on_figures(r, m, len, &mut out);
    }
    // A dead process comes before anything the figures say: they are of a run cut short.
    // A dead rank is the first thing to know; a process killed at teardown, having left
    // nothing undone, the last.
    let (cut_short, others): (Vec<&Killed>, Vec<&Killed>) =
        r.killed.iter().partition(|k| k.cut_short);
    let mut findings = killed(&cut_short, true);
    findings.append(&mut out);
    findings.append(&mut killed(&others, false));
    findings
}

/// The findings the figures of a non-empty path raise, largest impact first.
fn rules_on_figures(r: &Report, m: Option<&Metrics>, len: u64, out: &mut Vec<Finding>) {
    sequential_bottleneck(r, len, out);
    procedures_on_path(r, out);
    communication(r, out);
    close_paths(r, len, out);
    off_path(r, out);
    if let Some(m) = m {
        waiting_in_calls(m, out);
        cpu_contention(m, out);
    }
    // Stable: findings of equal impact keep the order of the rules above.
    out.sort_by_key(|f| std::cmp::Reverse(f.impact_ns));
}

/// A finding per process a signal killed, in order of death; of those whose death cut
/// the run short (`Killed::cut_short`), the first says what the figures then are.
fn killed(dead: &[&Killed], cut_short: bool) -> Vec<Finding> {
    dead.iter()
        .enumerate()
        .map(|(i, k)| {
            let whom = match k.rank {
                Some(rank) => format!("rank {rank} (pid {}, {})", ShownId(k.pid), k.command),
                None => format!("pid {} ({})", ShownId(k.pid), k.command),
            };
            let so = if cut_short && i == 0 {
                ": the run did not end as written, and the figures below are of what was \
                 recorded until then"
            } else {
                ""
            };
            Finding {
                kind: FindingKind::ProcessKilled,
                text: format!(
                    "{whom} was killed by {} at {:.2} ms{so}; sends never received: {} from \
                     it, {} to it; incomplete collectives: {}",
                    k.signal_name,
                    ms_hundredths(k.at_ns),
                    k.sends_unreceived,
                    k.sends_to_it_unreceived,
                    k.collectives_incomplete
                ),
                impact_ns: 0,
                figures: figures(&[
                    ("at_ms", ms_hundredths(k.at_ns)),
                    ("signal", f64::from(k.signal)),
                    ("sends_unreceived", k.sends_unreceived as f64),
                    ("sends_to_it_unreceived", k.sends_to_it_unreceived as f64),
                    ("collectives_incomplete", k.collectives_incomplete as f64),
                ]),
            }
        })
        .collect()
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
            percent(proc_ns, len),
            ms_hundredths(proc_ns),
            ms_hundredths(len),
        ),
        impact_ns: top.cp_ns,
        figures: figures(&[
            ("process_cp_ms", ms_hundredths(top.cp_ns)),
            ("process_cp_pct", top.cp_pct),
            ("procedure_cp_ms", ms_hundredths(proc_ns)),
            ("critical_path_ms", ms_hundredths(len)),
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
            ms_hundredths(p.cp_ns)
        );
        let text = if close {
            let rest = r.critical_path.path.length_ns.saturating_sub(p.zeroing_ns);
            format!(
                "{share}, but removing it entirely would gain {:.1} % ({:.1} ms), not its full share: without it another path of {:.1} ms becomes critical",
                p.zeroing_pct,
                ms_hundredths(p.zeroing_ns),
                ms_hundredths(rest)
            )
        } else if p.cp_pct > p.work_pct {
            format!(
                "{share} but only {:.1} % of all work: it matters more than a CPU profile shows; making it faster shortens the run by up to {:.1} % ({:.1} ms)",
                p.work_pct,
                p.zeroing_pct,
                ms_hundredths(p.zeroing_ns)
            )
        } else {
            format!(
                "{share}: making it faster shortens the run by up to {:.1} % ({:.1} ms)",
                p.zeroing_pct,
                ms_hundredths(p.zeroing_ns)
            )
        };
        out.push(Finding {
            kind: FindingKind::ProcedureOnPath,
            text,
            impact_ns: p.zeroing_ns,
            figures: figures(&[
                ("cp_ms", ms_hundredths(p.cp_ns)),
                ("cp_pct", p.cp_pct),
                ("work_pct", p.work_pct),
                ("zeroing_ms", ms_hundredths(p.zeroing_ns)),
                ("zeroing_pct", p.zeroing_pct),
                ("mbm_ms", ms_hundredths(p.mbm_ns)),
            ]),
        });
    }
}

/// What a wait on the path was, by what the waiting thread was in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum WaitKind {
    /// An MPI/PVM receive, wait or collective.
    Message,
    /// An OpenMP team barrier or a pthread barrier.
    Barrier,
    /// The end of an OpenMP region (the master waits for its team) or a pthread join.
    Join,
    /// An OpenMP worker waiting for its master to start the next region.
    Fork,
    Lock,
    Condition,
    Semaphore,
    /// A futex wait with no probed call around it (a lock, a condition variable or a
    /// runtime's own wait: the futex does not say which).
    Futex,
    /// A thread's first event, after its creator's clone.
    ThreadStart,
}

impl WaitKind {
    fn of(call: &str) -> WaitKind {
        if call == FUTEX_WAIT {
            return WaitKind::Futex;
        }
        if call == THREAD_START {
            return WaitKind::ThreadStart;
        }
        match calls::CALLS
            .iter()
            .find(|c| c.symbol == call)
            .map(|c| c.role)
        {
            Some(Role::OmpBarrier | Role::BarrierWait) => WaitKind::Barrier,
            Some(Role::OmpJoin | Role::ThreadJoin) => WaitKind::Join,
            Some(Role::OmpIdle) => WaitKind::Fork,
            Some(Role::LockAcquire) => WaitKind::Lock,
            Some(Role::CondWait) => WaitKind::Condition,
            Some(Role::SemWait) => WaitKind::Semaphore,
            // MPI and PVM calls (and any name the table does not know).
            _ => WaitKind::Message,
        }
    }

    /// What one such wait is called ("futex wait"), `count` of them.
    fn waits(self, count: u64) -> String {
        let what = match self {
            WaitKind::Message => "message",
            WaitKind::Barrier => "barrier",
            WaitKind::Join => "join",
            WaitKind::Fork => "fork",
            WaitKind::Lock => "lock",
            WaitKind::Condition => "condition variable",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Futex => "futex",
            WaitKind::ThreadStart => "thread start",
        };
        let s = if count == 1 { "" } else { "s" };
        format!("{count} {what} wait{s}")
    }

    /// How a sentence says waiting for this: "waiting {phrase}".
    fn phrase(self) -> &'static str {
        match self {
            WaitKind::Message => "for messages",
            WaitKind::Barrier => "at barriers",
            WaitKind::Join => "at joins",
            WaitKind::Fork => "for forks",
            WaitKind::Lock => "for locks",
            WaitKind::Condition => "on condition variables",
            WaitKind::Semaphore => "on semaphores",
            WaitKind::Futex => "in futex waits",
            WaitKind::ThreadStart => "for thread starts",
        }
    }
}

/// Waits on the path of one kind from one thread (or, for messages, process) to
/// another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct WaitGroup {
    kind: WaitKind,
    from_pid: u32,
    /// 0 for messages: they are between processes.
    from_tid: u32,
    to_pid: u32,
    to_tid: u32,
}

#[derive(Clone, Copy, Default)]
struct WaitTotal {
    count: u64,
    latency_ns: u64,
}

/// The waits the path spends long in: messages between processes, or a program's
/// synchronization (OpenMP barriers, joins and forks, locks, futex waits) between its
/// threads, named for what they are, with the pair that waits longest.
fn communication(r: &Report, out: &mut Vec<Finding>) {
    let t = &r.totals;
    let whole = t.length_ns + t.dependency_latency_ns;
    if percent(t.dependency_latency_ns, whole) < NOTABLE_PCT {
        return;
    }
    let mut groups: BTreeMap<WaitGroup, WaitTotal> = BTreeMap::new();
    for a in &r.activities {
        if let Activity::Wait {
            from_pid,
            from_tid,
            to_pid,
            to_tid,
            call,
            latency_ns,
        } = a
        {
            let kind = WaitKind::of(call);
            let by_thread = kind != WaitKind::Message;
            let group = WaitGroup {
                kind,
                from_pid: *from_pid,
                from_tid: if by_thread { *from_tid } else { 0 },
                to_pid: *to_pid,
                to_tid: if by_thread { *to_tid } else { 0 },
            };
            let e = groups.entry(group).or_default();
            e.count += 1;
            e.latency_ns += latency_ns;
        }
    }
    let Some((&top, &top_total)) = groups.iter().max_by_key(|(_, v)| v.latency_ns) else {
        return;
    };
    let mut by_kind: BTreeMap<WaitKind, u64> = BTreeMap::new();
    for (g, total) in &groups {
        *by_kind.entry(g.kind).or_default() += total.latency_ns;
    }
    let latency_pct = percent(t.dependency_latency_ns, whole);
    let n = top_total.count;
    let messages_only = by_kind.keys().all(|k| *k == WaitKind::Message);
    let (kind, text) = if messages_only && top.from_pid != top.to_pid {
        (
            FindingKind::CommunicationOnPath,
            format!(
                "the critical path spends {latency_pct:.1} % of its time waiting for messages ({:.1} ms measured latency); most of it ({:.1} ms in {n} waits) between {} and {}",
                ms_hundredths(t.dependency_latency_ns),
                ms_hundredths(top_total.latency_ns),
                who(r, top.from_pid),
                who(r, top.to_pid)
            ),
        )
    } else {
        let mut kinds: Vec<(WaitKind, u64)> = by_kind.into_iter().collect();
        kinds.sort_by_key(|(k, ns)| (std::cmp::Reverse(*ns), *k));
        // Kinds below 0.05 ms (a thread's start, say) would read as 0.0 ms: left out.
        let parts: Vec<String> = kinds
            .iter()
            .filter(|(_, ns)| ms_hundredths(*ns) > 0.0)
            .map(|(k, ns)| format!("{} {:.1} ms", k.phrase(), ms_hundredths(*ns)))
            .collect();
        let pair = if top.from_pid == top.to_pid {
            format!(
                "thread {} waiting for thread {} of {}",
                top.to_tid,
                top.from_tid,
                who(r, top.to_pid)
            )
        } else {
            format!(
                "{} waiting for {}",
                who(r, top.to_pid),
                who(r, top.from_pid)
            )
        };
        let kind = if top.kind == WaitKind::Message {
            FindingKind::CommunicationOnPath
        } else {
            FindingKind::SynchronizationOnPath
        };
        (
            kind,
            format!(
                "the critical path spends {latency_pct:.1} % of its time waiting ({:.1} ms measured latency): {}; most of it ({:.1} ms in {}) {pair}",
                ms_hundredths(t.dependency_latency_ns),
                parts.join(", "),
                ms_hundredths(top_total.latency_ns),
                top.kind.waits(n),
            ),
        )
    };
    out.push(Finding {
        kind,
        text,
        impact_ns: t.dependency_latency_ns,
        figures: figures(&[
            ("latency_ms", ms_hundredths(t.dependency_latency_ns)),
            ("latency_pct", latency_pct),
            ("pair_latency_ms", ms_hundredths(top_total.latency_ns)),
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
            ms_hundredths(top.mbm_ns),
            top.cp_pct,
            r.near_critical_paths.len()
        ),
        impact_ns: top.cp_ns - top.mbm_ns,
        figures: figures(&[
            ("next_path_pct", next.map(|p| p.pct).unwrap_or(0.0)),
            ("mbm_ms", ms_hundredths(top.mbm_ns)),
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
                ms_hundredths(p.work_ns),
                p.cp_pct
            ),
            impact_ns: 0,
            figures: figures(&[
                ("work_ms", ms_hundredths(p.work_ns)),
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
            ms_hundredths(p.cpu_wait_ns),
            percent(p.cpu_wait_ns, p.cpu_ns),
            m.cpus
        ),
        // Not part of the path's length under the CPU clock: listed after the findings
        // about the path.
        impact_ns: 0,
        figures: figures(&[
            ("cpu_wait_ms", ms_hundredths(p.cpu_wait_ns)),
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
    let share = percent(waiting, elapsed);
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
            ms_hundredths(d.total_ns),
            d.count,
            ms_hundredths(d.p50_ns),
            ms_hundredths(d.p99_ns),
            ms_hundredths(d.max_ns)
        ),
        // A symptom that the path findings explain: listed after them.
        impact_ns: 0,
        figures: figures(&[
            ("blocked_pct", share),
            ("call_blocked_ms", ms_hundredths(d.total_ns)),
            ("call_p50_ms", ms_hundredths(d.p50_ns)),
            ("call_p99_ms", ms_hundredths(d.p99_ns)),
        ]),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::format::synth::pipeline;
    use crate::graph::recorded::RecordedGraph;
    use crate::report::ReportOptions;
    use tracer_common::call;

    /// A three-stage pipeline whose middle stage is slow, and a busy procedure on the
    /// first rank that nothing waits for.
    #[test]
    fn names_the_planted_bottleneck() {
        let mut s = pipeline(&["fast", "slow", "busy"]);
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

    /// A process a signal killed is the first finding, before the bottleneck.
    #[test]
    fn a_killed_process_comes_first() {
        let mut s = pipeline(&["fast", "slow", "busy"]);
        s.compute(0, 200_000_000, Some(2));
        let mut r = report_of(&s.items);
        let dead = crate::analysis::faults::Killed {
            pid: 102,
            rank: Some(2),
            command: "stage".into(),
            signal: 9,
            signal_name: "SIGKILL".into(),
            at_ns: 12_345_678,
            sends_unreceived: 1,
            sends_to_it_unreceived: 2,
            collectives_incomplete: 3,
            cut_short: true,
        };
        let then = crate::analysis::faults::Killed {
            pid: 7,
            rank: None,
            command: "helper".into(),
            signal: 15,
            signal_name: "SIGTERM".into(),
            at_ns: 20_000_000,
            sends_unreceived: 0,
            sends_to_it_unreceived: 0,
            collectives_incomplete: 0,
            cut_short: false,
        };
        r.killed = vec![then, dead];
        let d = diagnose(&r, None);
        assert_eq!(d[0].kind, FindingKind::ProcessKilled, "{d:#?}");
        assert_eq!(
            d[0].text,
            "rank 2 (pid 102, stage) was killed by SIGKILL at 12.35 ms: the run did not end as \
             written, and the figures below are of what was recorded until then; sends never \
             received: 1 from it, 2 to it; incomplete collectives: 3"
        );
        // A process whose death left nothing undone (killed first here) comes last,
        // without the warning.
        assert_eq!(d[1].kind, FindingKind::SequentialBottleneck, "{d:#?}");
        let last = d.last().unwrap();
        assert_eq!(last.kind, FindingKind::ProcessKilled, "{d:#?}");
        assert_eq!(
            last.text,
            "pid 7 (helper) was killed by SIGTERM at 20.00 ms; sends never received: 0 from it, \
             0 to it; incomplete collectives: 0"
        );
        assert_eq!(d.len(), r.diagnosis.len() + 2);
    }

    fn report_of(items: &[crate::format::recording::Item]) -> Report {
        let rg = RecordedGraph::from_items(items, ClockKind::Cpu);
        Report::new(&rg, &ReportOptions::default(), None)
    }

    fn finding(r: &Report, kind: FindingKind) -> &Finding {
        r.diagnosis
            .iter()
            .find(|f| f.kind == kind)
            .unwrap_or_else(|| panic!("no {kind:?}: {:#?}", r.diagnosis))
    }

    /// An OpenMP team of two threads in one process (master 500, worker 501) whose path
    /// crosses between them at two barriers and at the region's end. The waits are
    /// barriers and a join between two threads, not messages, and no process waits for
    /// itself.
    #[test]
    fn openmp_barrier_waits_are_named_with_their_threads() {
        use crate::format::openmp::RegionKey;
        use crate::format::synth::SyntheticThreads;
        let mut s = SyntheticThreads::new(&["slow", "fast"]);
        s.clone(500, 501);
        let region = RegionKey {
            function: 0x1000,
            data: 0x2000,
        };
        // The worker waits for the region; the master forks it.
        s.omp_call(501, call::OMP_IDLE, region, 0, false);
        s.omp_call(500, call::OMP_FORK, region, 0, false);
        s.omp_call(500, call::OMP_FORK, region, 0, true);
        s.omp_call(501, call::OMP_IDLE, region, 0, true);
        // Two phases ending at barriers, the worker slow in the first, the master in
        // the second; the waiting thread is released 50 ms after the last arrival.
        for (index, (slow, fast)) in [(501, 500), (500, 501)].into_iter().enumerate() {
            let index = index as i32;
            s.compute(slow, 100_000_000, Some(0));
            s.compute(fast, 10_000_000, Some(1));
            s.omp_call(fast, call::GOMP_BARRIER, region, index, false);
            s.omp_call(slow, call::GOMP_BARRIER, region, index, false);
            s.omp_call(slow, call::GOMP_BARRIER, region, index, true);
            s.ts += 50_000_000;
            s.omp_call(fast, call::GOMP_BARRIER, region, index, true);
        }
        // The region's end: the master is released 80 ms after the worker's arrival.
        s.compute(501, 40_000_000, Some(0));
        s.omp_call(500, call::OMP_JOIN, region, 0, false);
        s.omp_call(501, call::OMP_IDLE, region, 0, false);
        s.ts += 80_000_000;
        s.omp_call(500, call::OMP_JOIN, region, 0, true);
        s.compute(500, 50_000_000, Some(1));
        let r = report_of(&s.items);
        let f = finding(&r, FindingKind::SynchronizationOnPath);
        assert_eq!(
            f.text,
            "the critical path spends 38.3 % of its time waiting (180.0 ms measured latency): at barriers 100.0 ms, at joins 80.0 ms; most of it (80.0 ms in 1 join wait) thread 500 waiting for thread 501 of pid 500",
            "{:#?}",
            r.diagnosis
        );
        assert!(r
            .diagnosis
            .iter()
            .all(|f| f.kind != FindingKind::CommunicationOnPath));
    }

    /// Threads that hand work over through futex waits (no probed call): the waits are
    /// named futex waits.
    #[test]
    fn futex_waits_are_named_with_their_threads() {
        use crate::format::synth::SyntheticThreads;
        let mut s = SyntheticThreads::new(&["produce", "consume"]);
        s.clone(500, 501);
        for _ in 0..3 {
            s.wait(500);
            s.compute(501, 40_000_000, Some(0));
            s.wake(501, 500);
            s.ts += 20_000_000;
            s.resume(500);
            s.compute(500, 10_000_000, Some(1));
        }
        let r = report_of(&s.items);
        let f = finding(&r, FindingKind::SynchronizationOnPath);
        assert_eq!(
            f.text,
            "the critical path spends 13.3 % of its time waiting (20.0 ms measured latency): in futex waits 20.0 ms; most of it (20.0 ms in 1 futex wait) thread 500 waiting for thread 501 of pid 500",
            "{:#?}",
            r.diagnosis
        );
    }
}
