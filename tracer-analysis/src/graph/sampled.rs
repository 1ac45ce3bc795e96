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
//! path are the sample's critical-path time.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use tracer_common::{unwind_end, SampleRecord};

use super::cpm::Schedule;
use super::recorded::RecordedGraph;
use super::{ArcId, ArcKind};
use crate::format::{Mapping, ProcessInfo};

/// A distinct sampled stack of a process: its frames as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SampledStack {
    pub pid: u32,
    /// The process's mapped files when the stack was sampled (an index of
    /// [`SampleLog::mappings`]); none before the process's first snapshot.
    pub mappings: Option<u32>,
    /// Run-time code addresses, innermost first (as [`SampleRecord::frames`]).
    pub frames: Box<[u64]>,
}

/// One SAMPLE record, its stack interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub tid: u32,
    /// The thread's CPU clock at the sample.
    pub cpu_ns: u64,
    /// Index of [`SampleLog::stacks`].
    pub stack: u32,
    /// Whether the unwinding reached the stack's root ([`unwind_end::COMPLETE`]).
    pub complete: bool,
}

/// The SAMPLE records of a recording, in the order read, with the processes' mapped
/// files they are symbolized against. Stacks are kept once each: a hot loop's samples
/// share one.
#[derive(Clone, Debug, Default)]
pub struct SampleLog {
    snapshots: Vec<Vec<Mapping>>,
    latest: HashMap<u32, u32>,
    stacks: Vec<SampledStack>,
    stack_ids: HashMap<SampledStack, u32>,
    samples: Vec<Sample>,
}

impl SampleLog {
    /// A process snapshot: the mapped files its later samples are symbolized against.
    pub(crate) fn process(&mut self, p: &ProcessInfo) {
        if p.mappings.is_empty() {
            return;
        }
        self.snapshots.push(p.mappings.clone());
        self.latest.insert(p.pid, self.snapshots.len() as u32 - 1);
    }

    pub(crate) fn add(&mut self, r: &SampleRecord) {
        let depth = (r.depth as usize).min(r.frames.len());
        let key = SampledStack {
            pid: r.header.tgid,
            mappings: self.latest.get(&r.header.tgid).copied(),
            frames: r.frames[..depth].into(),
        };
        let stack = match self.stack_ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.stacks.len() as u32;
                self.stacks.push(key.clone());
                self.stack_ids.insert(key, id);
                id
            }
        };
        self.samples.push(Sample {
            tid: r.header.tid,
            cpu_ns: r.header.cpu_ns,
            stack,
            complete: r.end == unwind_end::COMPLETE,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub fn stacks(&self) -> &[SampledStack] {
        &self.stacks
    }

    /// The mapped files a stack is symbolized against (empty when none was known).
    pub fn mappings(&self, stack: &SampledStack) -> &[Mapping] {
        stack
            .mappings
            .map_or(&[][..], |i| &self.snapshots[i as usize])
    }
}

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
    /// Index of [`SampleLog::samples`].
    pub sample: u32,
    pub arc: ArcId,
    pub work_ns: u64,
}

/// The samples of a recording weighed on its graph (cpu clock).
pub struct Attribution {
    /// Per sample of [`SampleLog::samples`], in its order.
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
            // Never shorter than its work: a thread created while traced has its first
            // arc's work counted from its clone (CPU clock 0), before its first event.
            let span = end.saturating_sub(rg.vertex_cpu[a.from as usize]).max(a.weight);
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
                .first()
                .map_or(samples[order[i] as usize].cpu_ns, |s| s.start);
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
                    let work = (overlap as u128 * s.weight as u128 / (s.end - s.start) as u128)
                        as u64;
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
