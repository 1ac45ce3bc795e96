//! The activity graph's procedure stacks as a [`StackSource`]: the critical path and the
//! work of a recording by thread and stack of selected procedures. Everything here is
//! read off the activity graph with the report's own pieces (the schedule's critical
//! arcs, the what-if zeroing), so an export's totals are the report's figures.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::stack_source::{
    ProcedureZeroing, SourceSummary, StackSource, StackWeights, WeightedStack,
};
use crate::analysis::workclock::ClockKind;
use crate::format::recording::{RecordingError, RecordingReader};
use crate::graph::cpm::Schedule;
use crate::graph::path::OUTSIDE;
use crate::graph::recorded::{ProcessLabel, RecordedGraph};
use crate::graph::whatif::zeroing_gain;
use crate::graph::{Arc, ArcKind, ContextId};

/// The critical path and all work by thread and stack of selected procedures, with the
/// procedures' zeroing gains. A stack's frames are the selected procedures active,
/// outermost first, or [`OUTSIDE`] alone for the work outside every one.
pub struct GraphStacks {
    summary: SourceSummary,
    /// Rows with some work, sorted by process, thread and frames.
    stacks: Vec<WeightedStack>,
    /// Selected procedures in the recording's order, then [`OUTSIDE`].
    zeroing: Vec<ProcedureZeroing>,
    /// Commands and MPI ranks of the processes.
    processes: HashMap<u32, ProcessLabel>,
}

/// A thread in a procedure context: the key the sums are kept under.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ThreadContext {
    tid: u32,
    context: ContextId,
}

impl GraphStacks {
    /// Reads a recording through the analysis pipeline and builds its graph.
    pub fn read(path: &Path, clock: ClockKind) -> Result<Self, RecordingError> {
        let mut items = RecordingReader::open(path)?;
        Ok(Self::new(&RecordedGraph::read(&mut items, clock)?))
    }

    pub fn new(rg: &RecordedGraph) -> Self {
        let g = &rg.graph;
        let schedule = Schedule::new(g);
        let mut sums: BTreeMap<ThreadContext, StackWeights> = BTreeMap::new();
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
                sums.entry(key(a)).or_default().critical_path_ns += a.weight;
            }
        }
        let mut stacks: Vec<WeightedStack> = sums
            .into_iter()
            .filter(|(_, w)| w.work_ns > 0 || w.critical_path_ns > 0)
            .map(|(k, weights)| {
                let stack = &g.contexts[k.context as usize].stack;
                let frames = if stack.is_empty() {
                    vec![OUTSIDE.to_string()]
                } else {
                    stack.iter().map(|&p| rg.procedures[p].clone()).collect()
                };
                WeightedStack {
                    pid: rg.pid_of(k.tid),
                    tid: k.tid,
                    frames,
                    weights,
                }
            })
            .collect();
        stacks.sort_by(|x, y| (x.pid, x.tid, &x.frames).cmp(&(y.pid, y.tid, &y.frames)));
        let classes = (0..rg.procedures.len()).map(Some).chain([None]);
        let zeroing = classes
            .map(|class| ProcedureZeroing {
                procedure: class.map_or(OUTSIDE.to_string(), |p| rg.procedures[p].clone()),
                symbol: class.map(|p| rg.procedure_symbols[p].clone()),
                zeroing_ns: zeroing_gain(g, class, schedule.length),
            })
            .collect();
        GraphStacks {
            summary: SourceSummary {
                clock: rg.clock,
                critical_path_ns: schedule.length,
                elapsed_ns: rg.last_ts.saturating_sub(rg.first_ts),
                events_recorded: rg.events,
                events_lost: rg.lost,
            },
            stacks,
            zeroing,
            processes: rg.processes.clone(),
        }
    }
}

impl StackSource for GraphStacks {
    fn summary(&self) -> &SourceSummary {
        &self.summary
    }

    fn stacks(&self) -> &[WeightedStack] {
        &self.stacks
    }

    fn zeroing(&self) -> &[ProcedureZeroing] {
        &self.zeroing
    }

    fn process(&self, pid: u32) -> Option<&ProcessLabel> {
        self.processes.get(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synth::nested_ring;
    use crate::report::{Report, ReportOptions};

    #[test]
    fn stacks_add_up_to_the_report() {
        let rg = RecordedGraph::from_items(&nested_ring(), ClockKind::Cpu);
        let profile = GraphStacks::new(&rg);
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
        assert_eq!(profile.summary().critical_path_ns, length);
        let critical: u64 = profile
            .stacks()
            .iter()
            .map(|s| s.weights.critical_path_ns)
            .sum();
        assert_eq!(critical, length);
        let frames: Vec<Vec<&str>> = profile
            .stacks()
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
            let on = |s: &&WeightedStack| s.frames.contains(&row.name);
            let cp: u64 = profile
                .stacks()
                .iter()
                .filter(on)
                .map(|s| s.weights.critical_path_ns)
                .sum();
            let work: u64 = profile
                .stacks()
                .iter()
                .filter(on)
                .map(|s| s.weights.work_ns)
                .sum();
            assert_eq!((cp, work), (row.cp_ns, row.work_ns), "{}", row.name);
            let zeroing = profile.zeroing().iter().find(|z| z.procedure == row.name);
            assert_eq!(zeroing.unwrap().zeroing_ns, row.zeroing_ns, "{}", row.name);
        }
        // The slower rank's inner work: 3 rounds of 10 us, all on the path.
        let inner = profile
            .stacks()
            .iter()
            .find(|s| s.tid == 101 && s.frames.len() == 2)
            .unwrap();
        assert_eq!(
            (inner.weights.critical_path_ns, inner.weights.work_ns),
            (30_000, 30_000)
        );
        assert_eq!(profile.rank(101), Some(1));
    }
}
