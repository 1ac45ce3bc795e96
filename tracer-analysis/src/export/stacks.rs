//! The critical path and the work of a recording by thread and procedure stack: what the
//! pprof profile and the flame graphs draw. Everything here is read off the activity
//! graph with the report's own pieces (the schedule's critical arcs, the what-if
//! zeroing), so an export's totals are the report's figures.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::analysis::workclock::ClockKind;
use crate::format::recording::{RecordingError, RecordingReader};
use crate::graph::cpm::Schedule;
use crate::graph::path::OUTSIDE;
use crate::graph::recorded::{ProcessLabel, RecordedGraph};
use crate::graph::whatif::zeroing_gain;
use crate::graph::{Arc, ArcKind, ContextId};

/// One thread's work in one stack of selected procedures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStack {
    pub pid: u32,
    pub tid: u32,
    /// Selected procedures active, outermost first; [`OUTSIDE`] alone for the work
    /// outside every selected procedure (a profile needs a frame to hang it on).
    pub frames: Vec<String>,
    /// Work of this stack (not its callees) on the critical path.
    pub critical_ns: u64,
    /// All work of this stack (not its callees), on the path or not.
    pub work_ns: u64,
}

/// What the path gets shorter by if a procedure took no time (callees included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureZeroing {
    /// A selected procedure, or [`OUTSIDE`] for the work outside every one.
    pub procedure: String,
    pub zeroing_ns: u64,
}

/// The critical path and all work by thread and stack, with the zeroing gains.
pub struct StackProfile {
    pub clock: ClockKind,
    pub critical_path_ns: u64,
    /// First to last analysed event (probe clock).
    pub elapsed_ns: u64,
    /// Rows with some work, sorted by process, thread and frames.
    pub stacks: Vec<ThreadStack>,
    /// Selected procedures in the recording's order, then [`OUTSIDE`].
    pub zeroing: Vec<ProcedureZeroing>,
    /// Commands and MPI ranks of the processes.
    pub processes: HashMap<u32, ProcessLabel>,
    /// Events in the recording and events the probes dropped.
    pub events_recorded: u64,
    pub events_lost: u64,
}

/// A thread in a procedure context: the key the sums are kept under.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ThreadContext {
    tid: u32,
    context: ContextId,
}

#[derive(Default)]
struct StackSums {
    critical_ns: u64,
    work_ns: u64,
}

impl StackProfile {
    /// Reads a recording through the analysis pipeline and builds its graph.
    pub fn read(path: &Path, clock: ClockKind) -> Result<Self, RecordingError> {
        let mut items = RecordingReader::open(path)?;
        Ok(Self::new(&RecordedGraph::read(&mut items, clock)?))
    }

    pub fn new(rg: &RecordedGraph) -> Self {
        let g = &rg.graph;
        let schedule = Schedule::new(g);
        let mut sums: BTreeMap<ThreadContext, StackSums> = BTreeMap::new();
        let key = |a: &Arc| ThreadContext {
            tid: g.vertices[a.to as usize].tid,
            context: a.context,
        };
        for a in g.arcs.iter().filter(|a| a.kind == ArcKind::Program) {
            sums.entry(key(a)).or_default().work_ns += a.weight;
        }
        for id in schedule.critical_arcs(g, |_, a| a.weight) {
            let a = g.arc(id);
            if a.kind == ArcKind::Program {
                sums.entry(key(a)).or_default().critical_ns += a.weight;
            }
        }
        let mut stacks: Vec<ThreadStack> = sums
            .into_iter()
            .filter(|(_, s)| s.work_ns > 0 || s.critical_ns > 0)
            .map(|(k, s)| {
                let stack = &g.contexts[k.context as usize].stack;
                let frames = if stack.is_empty() {
                    vec![OUTSIDE.to_string()]
                } else {
                    stack.iter().map(|&p| rg.procedures[p].clone()).collect()
                };
                ThreadStack {
                    pid: rg.pid_of(k.tid),
                    tid: k.tid,
                    frames,
                    critical_ns: s.critical_ns,
                    work_ns: s.work_ns,
                }
            })
            .collect();
        stacks.sort_by(|x, y| (x.pid, x.tid, &x.frames).cmp(&(y.pid, y.tid, &y.frames)));
        let classes = (0..rg.procedures.len()).map(Some).chain([None]);
        let zeroing = classes
            .map(|class| ProcedureZeroing {
                procedure: class.map_or(OUTSIDE.to_string(), |p| rg.procedures[p].clone()),
                zeroing_ns: zeroing_gain(g, class, schedule.length),
            })
            .collect();
        StackProfile {
            clock: rg.clock,
            critical_path_ns: schedule.length,
            elapsed_ns: rg.last_ts.saturating_sub(rg.first_ts),
            stacks,
            zeroing,
            processes: rg.processes.clone(),
            events_recorded: rg.events,
            events_lost: rg.lost,
        }
    }

    /// A process's MPI rank, if it has one.
    pub(crate) fn rank(&self, pid: u32) -> Option<i32> {
        self.processes.get(&pid).and_then(|p| p.rank)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::recording::Item;
    use crate::format::records::Record;
    use crate::format::synth::SyntheticRun;
    use crate::report::{Report, ReportOptions};
    use tracer_common::kind;

    /// Two ranks in a ring, 3 rounds: each rank works in `outer`, calls `inner` from
    /// it, and works outside both; rank 1 works longer, so the path is mostly its.
    pub(crate) fn nested_ring() -> Vec<Item> {
        let mut s = SyntheticRun::new(2, &["outer", "inner"]);
        for round in 0..3 {
            for r in 0..2 {
                let slow = 1 + r as u64;
                let h = s.header(r, kind::FUNC_ENTER, 1);
                s.items.push(Item::Record(Record::FuncEnter(h)));
                s.cpu[r] += 2_000 * slow;
                s.compute(r, 5_000 * slow, Some(1));
                s.cpu[r] += 1_000 * slow;
                let h = s.header(r, kind::FUNC_EXIT, 1);
                s.items.push(Item::Record(Record::FuncExit(h)));
                s.compute(r, 700, None);
                s.message(r, 1 - r, round);
            }
        }
        s.items
    }

    #[test]
    fn stacks_add_up_to_the_report() {
        let rg = RecordedGraph::from_items(&nested_ring(), ClockKind::Cpu);
        let profile = StackProfile::new(&rg);
        let report = Report::new(
            &rg,
            &ReportOptions {
                paths: 1,
                ..Default::default()
            },
            None,
        );
        let length = report.critical_path.path.length_ns;
        assert!(length > 0);
        assert_eq!(profile.critical_path_ns, length);
        let critical: u64 = profile.stacks.iter().map(|s| s.critical_ns).sum();
        assert_eq!(critical, length);
        let frames: Vec<Vec<&str>> = profile
            .stacks
            .iter()
            .filter(|s| s.tid == 101)
            .map(|s| s.frames.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            frames,
            [vec![OUTSIDE], vec!["outer"], vec!["outer", "inner"]]
        );
        for row in &report.procedures {
            // Inclusive figures: every stack the procedure is on.
            let on = |s: &&ThreadStack| s.frames.contains(&row.name);
            let cp: u64 = profile
                .stacks
                .iter()
                .filter(on)
                .map(|s| s.critical_ns)
                .sum();
            let work: u64 = profile.stacks.iter().filter(on).map(|s| s.work_ns).sum();
            assert_eq!((cp, work), (row.cp_ns, row.work_ns), "{}", row.name);
            let zeroing = profile.zeroing.iter().find(|z| z.procedure == row.name);
            assert_eq!(zeroing.unwrap().zeroing_ns, row.zeroing_ns, "{}", row.name);
        }
        // The slower rank's inner work: 3 rounds of 10 us, all on the path.
        let inner = profile
            .stacks
            .iter()
            .find(|s| s.tid == 101 && s.frames.len() == 2)
            .unwrap();
        assert_eq!((inner.critical_ns, inner.work_ns), (30_000, 30_000));
        assert_eq!(profile.rank(101), Some(1));
    }
}
