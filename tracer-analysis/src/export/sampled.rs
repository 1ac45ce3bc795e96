//! The sampled call stacks as a [`StackSource`]: every function's critical-path time and
//! CPU time, measured by the SAMPLE records on the activity graph (`graph::sampled`,
//! docs/sampled-attribution.md), with no procedure selected. The folded stacks, the SVG
//! flame graph, pprof and Hatchet draw them as they draw the procedure stacks
//! ([`super::stacks::GraphStacks`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::Serialize;

use super::stack_source::{
    ProcedureZeroing, SourceSummary, StackSource, StackWeights, WeightedStack,
};
use crate::analysis::workclock::ClockKind;
use crate::format::recording::{RecordingError, RecordingReader};
use crate::graph::cpm::Schedule;
use crate::graph::recorded::{ProcessLabel, RecordedGraph};
use crate::graph::sampled::Attribution;
use crate::symbolize::CodeLocator;

/// How many functions (the first by inclusive critical-path time) get their zeroing
/// computed: each is one pass of the critical path method over the graph.
pub const ZEROED_FUNCTIONS: usize = 10;

/// The frame of an address no mapped file has a symbol for.
pub const UNKNOWN_FRAME: &str = "[unknown]";
/// The one frame of a sample the probe could read no user stack of.
pub const NO_STACK_FRAME: &str = "[no user stack]";

/// Why sampled stacks cannot be attributed.
#[derive(Debug, thiserror::Error)]
pub enum SampledError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error("sampled stacks are weighed on the cpu clock (the samples' clock), not --clock {0}")]
    Clock(&'static str),
}

/// Time of a function on the sampled stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FunctionTimes {
    /// On the critical path.
    pub critical_path_ns: u64,
    /// CPU time, on the path or not.
    pub cpu_ns: u64,
    /// Samples counted.
    pub samples: u64,
}

/// A function of the sampled stacks: its own time (innermost frame) and its inclusive
/// time (on the stack at all, counted once per stack however often it recurses).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SampledFunction {
    pub name: String,
    #[serde(rename = "self")]
    pub self_times: FunctionTimes,
    pub inclusive: FunctionTimes,
    /// What the critical path gets shorter by if the function's sampled time were
    /// removed: exact through the graph for the first [`ZEROED_FUNCTIONS`] by inclusive
    /// critical-path time, absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeroing_ns: Option<u64>,
}

/// How many samples there were and how many unwound to their stack's root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampleCounts {
    pub samples: u64,
    pub complete: u64,
    /// Their time: all CPU time the samples weigh, and the part on the critical path.
    pub cpu_ns: u64,
    pub critical_path_ns: u64,
}

/// The sampled stacks of a recording, weighed, and its functions.
pub struct SampledStacks {
    summary: SourceSummary,
    stacks: Vec<WeightedStack>,
    zeroing: Vec<ProcedureZeroing>,
    processes: HashMap<u32, ProcessLabel>,
    functions: Vec<SampledFunction>,
    counts: SampleCounts,
}

impl SampledStacks {
    /// Reads a recording through the analysis pipeline (one pass: the graph and its
    /// samples) and symbolizes its stacks with `locator`.
    pub fn read(
        path: &Path,
        clock: ClockKind,
        locator: &mut dyn CodeLocator,
    ) -> Result<Self, SampledError> {
        let mut items = RecordingReader::open(path)?;
        Self::new(&RecordedGraph::read(&mut items, clock)?, locator)
    }

    /// The samples of `rg` (read on the cpu clock) weighed on its graph.
    pub fn new(rg: &RecordedGraph, locator: &mut dyn CodeLocator) -> Result<Self, SampledError> {
        if rg.clock != ClockKind::Cpu {
            return Err(SampledError::Clock(rg.clock.name()));
        }
        let schedule = Schedule::new(&rg.graph);
        let attribution = Attribution::new(rg, &schedule);
        let names = stack_names(rg, locator);
        let log = &rg.samples;

        let mut counts = SampleCounts::default();
        let mut by_thread_stack: BTreeMap<(u32, u32), StackWeights> = BTreeMap::new();
        let mut self_times: BTreeMap<&str, FunctionTimes> = BTreeMap::new();
        let mut inclusive: BTreeMap<&str, FunctionTimes> = BTreeMap::new();
        let distinct: Vec<BTreeSet<&str>> = names
            .iter()
            .map(|n| n.iter().map(String::as_str).collect())
            .collect();
        for (sample, t) in log.samples().iter().zip(&attribution.times) {
            counts.samples += 1;
            counts.complete += sample.complete as u64;
            counts.cpu_ns += t.cpu_ns;
            counts.critical_path_ns += t.critical_path_ns;
            let w = by_thread_stack
                .entry((sample.tid, sample.stack))
                .or_default();
            w.critical_path_ns += t.critical_path_ns;
            w.work_ns += t.cpu_ns;
            let add = |f: &mut FunctionTimes| {
                f.critical_path_ns += t.critical_path_ns;
                f.cpu_ns += t.cpu_ns;
                f.samples += 1;
            };
            let stack = &names[sample.stack as usize];
            add(self_times.entry(stack.last().expect("never empty")).or_default());
            for f in &distinct[sample.stack as usize] {
                add(inclusive.entry(f).or_default());
            }
        }

        let mut stacks: Vec<WeightedStack> = by_thread_stack
            .into_iter()
            .filter(|(_, w)| w.work_ns > 0 || w.critical_path_ns > 0)
            .map(|((tid, stack), weights)| WeightedStack {
                pid: log.stacks()[stack as usize].pid,
                tid,
                frames: names[stack as usize].clone(),
                weights,
            })
            .collect();
        stacks.sort_by(|x, y| (x.pid, x.tid, &x.frames).cmp(&(y.pid, y.tid, &y.frames)));
        // Stacks of one thread named alike (two addresses of one function) are one.
        stacks.dedup_by(|later, kept| {
            let same = (later.pid, later.tid, &later.frames) == (kept.pid, kept.tid, &kept.frames);
            if same {
                kept.weights.critical_path_ns += later.weights.critical_path_ns;
                kept.weights.work_ns += later.weights.work_ns;
            }
            same
        });

        let mut functions: Vec<SampledFunction> = inclusive
            .iter()
            .map(|(&name, &times)| SampledFunction {
                name: name.to_string(),
                self_times: self_times.get(name).copied().unwrap_or_default(),
                inclusive: times,
                zeroing_ns: None,
            })
            .collect();
        functions.sort_by(|x, y| {
            (y.inclusive.critical_path_ns, y.inclusive.cpu_ns)
                .cmp(&(x.inclusive.critical_path_ns, x.inclusive.cpu_ns))
                .then_with(|| x.name.cmp(&y.name))
        });
        for f in functions.iter_mut().take(ZEROED_FUNCTIONS) {
            let on: Vec<bool> = distinct.iter().map(|d| d.contains(&*f.name)).collect();
            f.zeroing_ns = Some(attribution.gain(rg, |s| on[s.stack as usize]));
        }
        let zeroing = functions
            .iter()
            .filter_map(|f| {
                Some(ProcedureZeroing {
                    procedure: f.name.clone(),
                    symbol: None,
                    zeroing_ns: f.zeroing_ns?,
                })
            })
            .collect();
        Ok(SampledStacks {
            summary: SourceSummary {
                clock: ClockKind::Cpu,
                critical_path_ns: schedule.length,
                elapsed_ns: rg.last_ts.saturating_sub(rg.first_ts),
                events_recorded: rg.events,
                events_lost: rg.lost,
            },
            stacks,
            zeroing,
            processes: rg.processes.clone(),
            functions,
            counts,
        })
    }

    /// Every function of the sampled stacks, the largest inclusive critical-path time
    /// first.
    pub fn functions(&self) -> &[SampledFunction] {
        &self.functions
    }

    pub fn counts(&self) -> &SampleCounts {
        &self.counts
    }
}

/// Every distinct stack's frames as function names, outermost first: each address's
/// function, then the functions inlined there. A return address is named by the byte
/// before it (the call), the interrupted instruction by itself.
fn stack_names(rg: &RecordedGraph, locator: &mut dyn CodeLocator) -> Vec<Vec<String>> {
    let log = &rg.samples;
    let mut known: HashMap<(Option<u32>, u64), Vec<String>> = HashMap::new();
    log.stacks()
        .iter()
        .map(|stack| {
            let mut frames = Vec::new();
            for (i, &addr) in stack.frames.iter().enumerate().rev() {
                let code = if i == 0 { addr } else { addr.saturating_sub(1) };
                let names = known.entry((stack.mappings, code)).or_insert_with(|| {
                    let names = locator.function_names(log.mappings(stack), code);
                    if names.is_empty() {
                        vec![UNKNOWN_FRAME.to_string()]
                    } else {
                        names
                    }
                });
                frames.extend(names.iter().cloned());
            }
            if frames.is_empty() {
                frames.push(NO_STACK_FRAME.to_string());
            }
            frames
        })
        .collect()
}

impl StackSource for SampledStacks {
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
pub(crate) mod tests {
    use super::*;
    use crate::export::flame::folded_stacks;
    use crate::format::synth::{sampled_pair, SAMPLED_FUNCTIONS};
    use crate::format::Mapping;
    use crate::symbolize::CodeLocation;

    /// Names addresses by [`SAMPLED_FUNCTIONS`] (a symbol table fixture; the blazesym
    /// locator is the binary's).
    pub(crate) struct TableLocator;

    impl CodeLocator for TableLocator {
        fn locate_return(&mut self, _: &[Mapping], _: u64) -> Option<CodeLocation> {
            None
        }

        fn function_names(&mut self, mappings: &[Mapping], addr: u64) -> Vec<String> {
            if !mappings.iter().any(|m| m.path == "/app") {
                return Vec::new();
            }
            SAMPLED_FUNCTIONS
                .iter()
                .filter(|(_, start)| (*start..start + 0x1000).contains(&addr))
                .map(|(name, _)| name.to_string())
                .collect()
        }
    }

    pub(crate) fn sampled_pair_stacks() -> SampledStacks {
        let rg = RecordedGraph::from_items(&sampled_pair(), ClockKind::Cpu);
        SampledStacks::new(&rg, &mut TableLocator).unwrap()
    }

    fn times(critical_path_ns: u64, cpu_ns: u64, samples: u64) -> FunctionTimes {
        FunctionTimes {
            critical_path_ns,
            cpu_ns,
            samples,
        }
    }

    #[test]
    fn functions_weigh_what_the_construction_says() {
        let s = sampled_pair_stacks();
        assert_eq!(s.summary().critical_path_ns, 50_000);
        assert_eq!(
            *s.counts(),
            SampleCounts {
                samples: 6,
                complete: 5,
                cpu_ns: 60_000,
                critical_path_ns: 50_000,
            }
        );
        let got: Vec<(&str, FunctionTimes, FunctionTimes, Option<u64>)> = s
            .functions()
            .iter()
            .map(|f| (&*f.name, f.self_times, f.inclusive, f.zeroing_ns))
            .collect();
        // Zeroing, by the path recomputed: without main nothing is left (50 us);
        // without a, rank 0 works 10 us and rank 1 5 us after the receive (15 us);
        // without b, 20 + 20 us; without c, rank 1's first 10 us go and 5 us of its
        // last 20: 30 + 15 us.
        assert_eq!(
            got,
            [
                ("main", times(0, 0, 0), times(50_000, 60_000, 6), Some(50_000)),
                ("a", times(35_000, 35_000, 3), times(35_000, 35_000, 3), Some(35_000)),
                ("b", times(10_000, 10_000, 1), times(10_000, 10_000, 1), Some(10_000)),
                ("c", times(5_000, 15_000, 2), times(5_000, 15_000, 2), Some(5_000)),
            ]
        );
    }

    #[test]
    fn folded_stacks_carry_the_critical_path_time() {
        let s = sampled_pair_stacks();
        let folded: Vec<(String, u64)> = folded_stacks(&s).into_iter().collect();
        let line = |rank: u32, frames: &str, ns: u64| {
            (
                format!("app rank {rank} pid {pid};tid {pid};{frames}", pid = 100 + rank),
                ns,
            )
        };
        assert_eq!(
            folded,
            [
                line(0, "main;a", 20_000),
                line(0, "main;b", 10_000),
                line(1, "main;a", 15_000),
                line(1, "main;c", 5_000),
            ]
        );
        let cpu: Vec<(u32, &[String], u64)> = s
            .stacks()
            .iter()
            .map(|w| (w.tid, &w.frames[..], w.weights.work_ns))
            .collect();
        let names = |f: &[&str]| f.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cpu,
            [
                (100, &names(&["main", "a"])[..], 20_000),
                (100, &names(&["main", "b"])[..], 10_000),
                (101, &names(&["main", "a"])[..], 15_000),
                (101, &names(&["main", "c"])[..], 15_000),
            ]
        );
    }

    #[test]
    fn samples_change_neither_the_graph_nor_the_report() {
        let with = RecordedGraph::from_items(&sampled_pair(), ClockKind::Cpu);
        let without: Vec<_> = sampled_pair()
            .into_iter()
            .filter(|i| {
                !matches!(
                    i,
                    crate::format::recording::Item::Record(crate::format::records::Record::Sample(_))
                )
            })
            .collect();
        let without = RecordedGraph::from_items(&without, ClockKind::Cpu);
        assert_eq!(with.samples.samples().len(), 6);
        assert!(without.samples.is_empty());
        assert_eq!(with.graph.arcs, without.graph.arcs);
        assert_eq!(with.events, without.events);
        let opts = crate::report::ReportOptions::default();
        let text = |rg: &RecordedGraph| crate::report::Report::new(rg, &opts, None).text();
        assert_eq!(text(&with), text(&without));
    }

    #[test]
    fn a_recording_gives_what_its_items_give() {
        use crate::format::recording::{Item, RecordingMeta, RecordingWriter};
        let dir = std::env::temp_dir().join(format!("sampled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sampled.trace");
        let mut w = RecordingWriter::create(&path, &RecordingMeta::default()).unwrap();
        for item in sampled_pair() {
            match item {
                Item::Record(r) => w.record(r.as_bytes()).unwrap(),
                Item::Process(p) => w.process(&p).unwrap(),
                Item::Probe(f) => w.probe(&f).unwrap(),
            }
        }
        w.finish(&Default::default()).unwrap();
        let read = SampledStacks::read(&path, ClockKind::Cpu, &mut TableLocator).unwrap();
        let built = sampled_pair_stacks();
        assert_eq!(read.functions(), built.functions());
        assert_eq!(read.stacks(), built.stacks());
        assert_eq!(read.counts(), built.counts());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_clock_is_refused() {
        let rg = RecordedGraph::from_items(&sampled_pair(), ClockKind::Wall);
        let e = SampledStacks::new(&rg, &mut TableLocator).err().unwrap();
        assert_eq!(
            e.to_string(),
            "sampled stacks are weighed on the cpu clock (the samples' clock), not --clock wall"
        );
    }
}
