//! The sampled call stacks as a [`StackSource`]: every function's critical-path time and
//! CPU time, measured by the SAMPLE records on the activity graph
//! ([`crate::graph::attribution`], docs/sampled-attribution.md), with no procedure selected.
//! The folded stacks, the SVG flame graph, pprof and Hatchet draw them as they draw the
//! procedure stacks ([`super::stacks::GraphStacks`]).

use std::collections::HashMap;
use std::path::Path;

use super::stack_source::{
    ProcedureZeroing, SourceSummary, StackSource, StackWeights, WeightedStack,
};
use crate::analysis::workclock::ClockKind;
use crate::format::recording::{RecordingError, RecordingReader};
use crate::graph::attribution::{SampledError, SampledProfile};
use crate::graph::recorded::{ProcessLabel, RecordedGraph};
use crate::symbolize::CodeLocator;

/// Why a recording's sampled stacks could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SampledStacksError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Sampled(#[from] SampledError),
}

/// The sampled stacks of a recording, weighed, with its functions.
pub struct SampledStacks {
    summary: SourceSummary,
    stacks: Vec<WeightedStack>,
    zeroing: Vec<ProcedureZeroing>,
    processes: HashMap<u32, ProcessLabel>,
    profile: SampledProfile,
}

impl SampledStacks {
    /// Reads a recording through the analysis pipeline (one pass: the graph and its
    /// samples) and symbolizes its stacks with `locator`.
    pub fn read(
        path: &Path,
        clock: ClockKind,
        locator: &mut dyn CodeLocator,
    ) -> Result<Self, SampledStacksError> {
        let mut items = RecordingReader::open(path)?;
        let rg = RecordedGraph::read(&mut items, clock)?;
        let profile = SampledProfile::new(&rg, locator)?;
        Ok(Self::new(&rg, profile))
    }

    /// The stacks of `profile`, the sampled profile of `rg`.
    pub fn new(rg: &RecordedGraph, profile: SampledProfile) -> Self {
        let stacks = profile
            .thread_stacks
            .iter()
            .map(|s| WeightedStack {
                pid: s.pid,
                tid: s.tid,
                frames: s.frames.clone(),
                weights: StackWeights {
                    critical_path_ns: s.critical_path_ns,
                    work_ns: s.cpu_ns,
                },
            })
            .collect();
        let zeroing = profile
            .functions
            .iter()
            .filter_map(|f| {
                Some(ProcedureZeroing {
                    procedure: f.name.clone(),
                    symbol: None,
                    zeroing_ns: f.zeroing_ns?,
                })
            })
            .collect();
        SampledStacks {
            summary: SourceSummary {
                clock: ClockKind::Cpu,
                critical_path_ns: profile.length_ns,
                elapsed_ns: rg.last_ts.saturating_sub(rg.first_ts),
                events_recorded: rg.events,
                events_lost: rg.lost,
            },
            stacks,
            zeroing,
            processes: rg.processes.clone(),
            profile,
        }
    }

    /// The functions and sample counts the stacks were summed into.
    pub fn profile(&self) -> &SampledProfile {
        &self.profile
    }
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
    use crate::graph::attribution::{FunctionTimes, SampleCounts};
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
        SampledStacks::new(&rg, SampledProfile::new(&rg, &mut TableLocator).unwrap())
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
            s.profile().counts,
            SampleCounts {
                samples: 6,
                complete: 5,
                cpu_ns: 60_000,
                critical_path_ns: 50_000,
            }
        );
        let got: Vec<(&str, FunctionTimes, FunctionTimes, Option<u64>)> = s
            .profile()
            .functions
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
                (
                    "main",
                    times(0, 0, 0),
                    times(50_000, 60_000, 6),
                    Some(50_000)
                ),
                (
                    "a",
                    times(35_000, 35_000, 3),
                    times(35_000, 35_000, 3),
                    Some(35_000)
                ),
                (
                    "b",
                    times(10_000, 10_000, 1),
                    times(10_000, 10_000, 1),
                    Some(10_000)
                ),
                (
                    "c",
                    times(5_000, 15_000, 2),
                    times(5_000, 15_000, 2),
                    Some(5_000)
                ),
            ]
        );
    }

    #[test]
    fn folded_stacks_carry_the_critical_path_time() {
        let s = sampled_pair_stacks();
        let folded: Vec<(String, u64)> = folded_stacks(&s).into_iter().collect();
        let line = |rank: u32, frames: &str, ns: u64| {
            (
                format!(
                    "app rank {rank} pid {pid};tid {pid};{frames}",
                    pid = 100 + rank
                ),
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
        use crate::format::recording::{Item, RecordingMeta};
        use crate::format::records::Record;
        let with_items = sampled_pair();
        let without_items: Vec<Item> = with_items
            .iter()
            .filter(|i| !matches!(i, Item::Record(Record::Sample(_))))
            .cloned()
            .collect();
        let with = RecordedGraph::from_items(&with_items, ClockKind::Cpu);
        let without = RecordedGraph::from_items(&without_items, ClockKind::Cpu);
        assert_eq!(with.samples.samples().len(), 6);
        assert!(without.samples.is_empty());
        assert_eq!(with.graph.arcs, without.graph.arcs);
        // The samples count as records read, and as nothing else.
        assert_eq!(with.events, without.events + 6);
        let opts = crate::report::ReportOptions::default();
        let text = |rg: &RecordedGraph| crate::report::Report::new(rg, &opts, None).text();
        // The same report but for the records read.
        assert_eq!(
            text(&with).replace("from 13 events", "from 7 events"),
            text(&without)
        );
        // The same metrics but for the records read.
        let meta = RecordingMeta::default();
        let mut with_metrics = crate::metrics::Metrics::from_items(&with_items, &meta);
        assert_eq!(with_metrics.events.analyzed, 13);
        with_metrics.events.analyzed = 7;
        assert_eq!(
            serde_json::to_string(&with_metrics).unwrap(),
            serde_json::to_string(&crate::metrics::Metrics::from_items(&without_items, &meta))
                .unwrap()
        );
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
        assert_eq!(read.profile().functions, built.profile().functions);
        assert_eq!(read.stacks(), built.stacks());
        assert_eq!(read.profile().counts, built.profile().counts);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pprof_carries_both_weights_and_the_zeroing() {
        let s = sampled_pair_stacks();
        let p = crate::export::pprof::profile_message(&s);
        let totals = |i: usize| -> i64 { p.sample.iter().map(|x| x.value[i]).sum() };
        // Critical-path ns, CPU ns, and one zeroing sample per zeroed function.
        assert_eq!(totals(0), 50_000);
        assert_eq!(totals(1), 60_000);
        assert_eq!(totals(2), 50_000 + 35_000 + 10_000 + 5_000);
    }

    /// A thread created while traced works 4 us before its first event: its work counts
    /// from its clone (CPU clock 0), and so do its samples, the first one included; its
    /// 6 us are the path, which the main thread waits for.
    #[test]
    fn a_new_thread_is_weighed_from_its_clone() {
        use crate::format::synth::{SyntheticThreads, THREADS_PID as MAIN};
        let frames = |f: u64| [f + 5, 0x1010];
        let mut s = SyntheticThreads::new(&[]);
        for item in &mut s.items {
            if let crate::format::recording::Item::Process(p) = item {
                p.mappings = vec![Mapping {
                    path: "/app".into(),
                    bias: 0,
                }];
            }
        }
        s.compute(MAIN, 1000, None);
        s.clone(MAIN, 501);
        s.wait(MAIN);
        *s.cpu.get_mut(&501).unwrap() = 2000;
        s.sample(501, &frames(0x2000));
        *s.cpu.get_mut(&501).unwrap() = 4000;
        s.sample(501, &frames(0x3000));
        s.compute(501, 0, None);
        s.compute(501, 2000, None);
        s.sample(501, &frames(0x4000));
        s.wake(501, MAIN);
        s.resume(MAIN);
        s.exit(501);
        s.exit(MAIN);
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let p = SampledProfile::new(&rg, &mut TableLocator).unwrap();
        // The path: the new thread's 6 us (the main thread's work before its first
        // event, the clone, is in no graph).
        assert_eq!(p.length_ns, 6000);
        let got: Vec<(&str, u64, u64)> = p
            .thread_stacks
            .iter()
            .map(|t| (t.frames[1].as_str(), t.critical_path_ns, t.cpu_ns))
            .collect();
        assert_eq!(
            got,
            [("a", 2000, 2000), ("b", 2000, 2000), ("c", 2000, 2000)]
        );
    }

    #[test]
    fn another_clock_is_refused() {
        let rg = RecordedGraph::from_items(&sampled_pair(), ClockKind::Wall);
        let e = SampledProfile::new(&rg, &mut TableLocator).err().unwrap();
        assert_eq!(
            e.to_string(),
            "sampled stacks are weighed on the cpu clock (the samples' clock), not --clock wall"
        );
    }
}
