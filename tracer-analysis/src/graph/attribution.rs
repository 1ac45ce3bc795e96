//! Sampled call stacks on the activity graph (docs/sampled-attribution.md): where each
//! SAMPLE record's time falls on its thread's program arcs, and so how much of it is on
//! the critical path.
//!
//! A thread's program arcs are consecutive stretches of its CPU clock: the arc ending at
//! vertex `v` ends at the thread's CPU clock at `v` ([`RecordedGraph::vertex_cpu`]). A
//! sample of thread T at CPU clock `c` weighs T's CPU time since its previous sample (the
//! first one: since T's first event); that interval is split over T's arcs by overlap,
//! each part in the arc's work (the arc's weight over its CPU span: time blocked inside a
//! communication call is CPU time, not work), and the parts inside arcs on the critical
//! path are the sample's critical-path time. The samples, named through the
//! [`CodeLocator`], are then summed per function and per thread and stack
//! ([`SampledProfile`]), with the first functions' zeroing recomputed on the graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::cpm::Schedule;
use super::recorded::RecordedGraph;
use super::{ArcId, ArcKind};
use crate::analysis::workclock::ClockKind;
use crate::format::samples::Sample;
use crate::symbolize::{stack_function_names, CodeLocator};
pub use crate::symbolize::{NO_STACK_FRAME, UNKNOWN_FRAME};

/// What one sample weighs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleTimes {
    /// The thread's CPU time since its previous sample.
    pub cpu_ns: u64,
    /// Of that, the work inside program arcs on the critical path.
    pub critical_path_ns: u64,
}

/// Work of one sample inside one program arc (on the path or not): what lowering the
/// arc by the sample's time takes off it ([`Attribution::gain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArcShare {
    /// Index of [`crate::format::samples::SampleLog::samples`].
    pub sample: u32,
    pub arc: ArcId,
    pub work_ns: u64,
}

/// The samples of a recording weighed on its graph (cpu clock).
pub struct Attribution {
    /// Per sample of [`crate::format::samples::SampleLog::samples`], in its order.
    pub times: Vec<SampleTimes>,
    /// Every sample's work per program arc, by sample.
    pub shares: Vec<ArcShare>,
    /// The critical path's length.
    pub length_ns: u64,
}

/// A program arc as a stretch of its thread's CPU clock.
struct ArcSpan {
    id: ArcId,
    start: u64,
    end: u64,
    weight: u64,
    critical: bool,
}

impl Attribution {
    /// Weighs every sample of `rg` (whose graph is weighed on the cpu clock) on its
    /// thread's program arcs; `schedule` is the graph's, its critical arcs the path.
    pub fn new(rg: &RecordedGraph, schedule: &Schedule) -> Self {
        let g = &rg.graph;
        let mut critical = vec![false; g.arcs.len()];
        for id in schedule.critical_arcs(g, |_, a| a.weight) {
            critical[id as usize] = true;
        }
        let mut by_thread: FxHashMap<u32, Vec<ArcSpan>> = FxHashMap::default();
        for (id, a) in g.arcs.iter().enumerate() {
            if a.kind != ArcKind::Program {
                continue;
            }
            let end = rg.vertex_cpu[a.to as usize];
            // Never shorter than its work: a thread created while traced has its work
            // counted from its clone (CPU clock 0), before its first event, in its first
            // arc with work.
            let span = end
                .saturating_sub(rg.vertex_cpu[a.from as usize])
                .max(a.weight);
            // An arc of no time holds no sample's time (and would break the order of
            // the thread's arcs as disjoint stretches of its clock).
            if span == 0 {
                continue;
            }
            by_thread
                .entry(g.vertices[a.to as usize].tid)
                .or_default()
                .push(ArcSpan {
                    id: id as ArcId,
                    start: end.saturating_sub(span),
                    end,
                    weight: a.weight,
                    critical: critical[id],
                });
        }
        for spans in by_thread.values_mut() {
            spans.sort_by_key(|s| (s.end, s.start));
        }
        let samples = rg.samples.samples();
        let mut order: Vec<u32> = (0..samples.len() as u32).collect();
        order.sort_by_key(|&i| (samples[i as usize].tid, samples[i as usize].cpu_ns));
        let mut times = vec![SampleTimes::default(); samples.len()];
        let mut shares = Vec::new();
        let no_arcs = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let tid = samples[order[i] as usize].tid;
            let spans = by_thread.get(&tid).unwrap_or(&no_arcs);
            // Since the thread's first event (or its clone); a thread without events
            // has no arcs and its samples weigh from its first one.
            let mut prev = spans
                .iter()
                .map(|s| s.start)
                .min()
                .unwrap_or(samples[order[i] as usize].cpu_ns);
            let mut next_span = 0;
            while i < order.len() && samples[order[i] as usize].tid == tid {
                let index = order[i];
                let at = samples[index as usize].cpu_ns;
                i += 1;
                if at <= prev {
                    continue;
                }
                let t = &mut times[index as usize];
                t.cpu_ns = at - prev;
                while next_span < spans.len() && spans[next_span].end <= prev {
                    next_span += 1;
                }
                for s in spans[next_span..].iter().take_while(|s| s.start < at) {
                    let overlap = s.end.min(at).saturating_sub(s.start.max(prev));
                    if overlap == 0 {
                        continue;
                    }
                    let work =
                        (overlap as u128 * s.weight as u128 / (s.end - s.start) as u128) as u64;
                    if work == 0 {
                        continue;
                    }
                    if s.critical {
                        t.critical_path_ns += work;
                    }
                    shares.push(ArcShare {
                        sample: index,
                        arc: s.id,
                        work_ns: work,
                    });
                }
                prev = at;
            }
        }
        shares.sort_by_key(|s| (s.sample, s.arc));
        Attribution {
            times,
            shares,
            length_ns: schedule.length,
        }
    }

    /// What the critical path gets shorter by when every program arc loses the work of
    /// the samples `selected` says yes to inside it: the path recomputed on the lowered
    /// weights (exact for the samples' time; see docs/sampled-attribution.md).
    pub fn gain(&self, rg: &RecordedGraph, selected: impl Fn(&Sample) -> bool) -> u64 {
        let samples = rg.samples.samples();
        let mut lowered: FxHashMap<ArcId, u64> = FxHashMap::default();
        for s in &self.shares {
            if selected(&samples[s.sample as usize]) {
                *lowered.entry(s.arc).or_default() += s.work_ns;
            }
        }
        super::whatif::lowered_gain(&rg.graph, &lowered, self.length_ns)
    }
}

// Functions: the samples named, summed per function and per thread and stack.

/// How many functions (the first by inclusive critical-path time) get their zeroing
/// computed: each is one pass of the critical path method over the graph.
pub const ZEROED_FUNCTIONS: usize = 10;

/// Why sampled stacks cannot be weighed.
#[derive(Debug, thiserror::Error)]
pub enum SampledError {
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

/// One thread's time in one sampled stack (frames named, outermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStack {
    pub pid: u32,
    pub tid: u32,
    pub frames: Vec<String>,
    pub critical_path_ns: u64,
    pub cpu_ns: u64,
}

/// The samples of a recording weighed on its graph and named: every function's times,
/// the first functions' zeroing, and every thread's time per stack.
pub struct SampledProfile {
    /// The critical path's length.
    pub length_ns: u64,
    /// Every function, the largest inclusive critical-path time first.
    pub functions: Vec<SampledFunction>,
    pub counts: SampleCounts,
    /// Sorted by process, thread and frames, each once, with some time.
    pub thread_stacks: Vec<ThreadStack>,
}

impl SampledProfile {
    /// The samples of `rg` (read on the cpu clock) weighed on its graph, their stacks
    /// named by `locator`.
    pub fn new(rg: &RecordedGraph, locator: &mut dyn CodeLocator) -> Result<Self, SampledError> {
        if rg.clock != ClockKind::Cpu {
            return Err(SampledError::Clock(rg.clock.name()));
        }
        let schedule = Schedule::new(&rg.graph);
        let attribution = Attribution::new(rg, &schedule);
        let names = stack_names(rg, locator);
        let log = &rg.samples;

        let mut counts = SampleCounts::default();
        let mut by_thread_stack: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
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
            w.0 += t.critical_path_ns;
            w.1 += t.cpu_ns;
            let add = |f: &mut FunctionTimes| {
                f.critical_path_ns += t.critical_path_ns;
                f.cpu_ns += t.cpu_ns;
                f.samples += 1;
            };
            let stack = &names[sample.stack as usize];
            add(self_times
                .entry(stack.last().expect("never empty"))
                .or_default());
            for f in &distinct[sample.stack as usize] {
                add(inclusive.entry(f).or_default());
            }
        }

        let mut thread_stacks: Vec<ThreadStack> = by_thread_stack
            .into_iter()
            .filter(|(_, (cp, cpu))| *cp > 0 || *cpu > 0)
            .map(|((tid, stack), (critical_path_ns, cpu_ns))| ThreadStack {
                pid: log.stacks()[stack as usize].pid,
                tid,
                frames: names[stack as usize].clone(),
                critical_path_ns,
                cpu_ns,
            })
            .collect();
        thread_stacks.sort_by(|x, y| (x.pid, x.tid, &x.frames).cmp(&(y.pid, y.tid, &y.frames)));
        // Stacks of one thread named alike (two addresses of one function) are one.
        thread_stacks.dedup_by(|later, kept| {
            let same = (later.pid, later.tid, &later.frames) == (kept.pid, kept.tid, &kept.frames);
            if same {
                kept.critical_path_ns += later.critical_path_ns;
                kept.cpu_ns += later.cpu_ns;
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
        Ok(SampledProfile {
            length_ns: schedule.length,
            functions,
            counts,
            thread_stacks,
        })
    }
}

/// Every distinct stack's frames as function names, outermost first
/// ([`stack_function_names`]).
fn stack_names(rg: &RecordedGraph, locator: &mut dyn CodeLocator) -> Vec<Vec<String>> {
    let log = &rg.samples;
    let mut known: HashMap<(Option<u32>, u64), Vec<String>> = HashMap::new();
    log.stacks()
        .iter()
        .map(|stack| {
            stack_function_names(&stack.frames, |code| {
                known
                    .entry((stack.mappings, code))
                    .or_insert_with(|| locator.function_names(log.mappings(stack), code))
                    .clone()
            })
        })
        .collect()
}
