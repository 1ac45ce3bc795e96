//! Sampled functions in the online profile (docs/sampled-attribution.md, "Live"): each
//! SAMPLE record named through a [`CodeLocator`], its CPU time summed per function, and
//! the functions that take a share of the CPU followed on the critical path by the
//! engine, each as a procedure of its own ([`super::model::PathModel::sampled`]).
//!
//! Memory is bounded whatever the run's length: at most [`MAX_TRACKED`] functions are
//! followed on the path at a time (each one a column of every path state a message
//! carries), at most [`MAX_FUNCTIONS`] are tallied, and the names of at most
//! [`MAX_NAMED_ADDRESSES`] code addresses are kept. A start-up (an MPI library's
//! initialisation) makes many functions hot for a moment; once they are cold and have no
//! time on the path (work inside MPI calls is no path work), their columns go to the
//! functions that are hot later.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracer_common::{unwind_end, SampleRecord};

use super::model::{ProcId, StackProcs};
use crate::format::{Mapping, ProcessInfo};
use crate::symbolize::{stack_function_names, CodeLocator};

/// Functions followed on the critical path at most.
pub(crate) const MAX_TRACKED: usize = 32;
/// Functions whose CPU time is tallied at most; later ones are counted, not named.
const MAX_FUNCTIONS: usize = 16_384;
/// Code addresses whose names are kept; the cache starts over beyond this.
const MAX_NAMED_ADDRESSES: usize = 65_536;
/// A followed function not sampled in the last this many samples is cold: its column may
/// go to another once no path has time in it.
const COLD_SAMPLES: u64 = 32;
/// How often (in samples) a hot function without a column looks for a cold one.
const REUSE_EVERY_SAMPLES: u64 = 8;

/// Where the followed functions' columns come from: the analyzer's procedures and its
/// path model.
pub(crate) trait Columns {
    /// A new column, for function `name`.
    fn add(&mut self, name: &str) -> ProcId;
    /// Whether no path has time in column `p`.
    fn unused(&self, p: ProcId) -> bool;
    /// Column `p` starts over as function `name`.
    fn reuse(&mut self, p: ProcId, name: &str);
}

/// When a function is followed on the path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TrackRule {
    pub(crate) samples: u64,
    /// Of the sampled CPU time so far.
    pub(crate) cpu_permille: u64,
}

/// Once it has 2 samples and at least 1 % of the sampled CPU time: hot functions get the
/// columns, and a start-up's many one-sample functions do not use them up.
pub(crate) const HOT: TrackRule = TrackRule {
    samples: 2,
    cpu_permille: 10,
};

/// What the samples so far amount to (the profile's `samples`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LiveSampleCounts {
    pub samples: u64,
    /// Samples whose unwinding reached the stack's root.
    pub complete: u64,
    /// CPU time the samples stand for (each: its thread's CPU time since the previous).
    pub cpu_ns: u64,
    /// Distinct functions seen, the columns made for those followed on the path (at most
    /// [`MAX_TRACKED`]), and how many times a column went from one function to another.
    pub functions: u64,
    pub tracked: u64,
    pub reused: u64,
}

struct FunctionTally {
    name: String,
    /// CPU time of the samples whose stack has the function.
    cpu_ns: u64,
    samples: u64,
    /// Samples read when it was last in one.
    last_seen: u64,
    /// Its procedure, while followed on the path.
    proc: Option<ProcId>,
}

pub(crate) struct LiveSamples {
    locator: Box<dyn CodeLocator>,
    /// Per process: its latest snapshot's number and mapped files.
    mappings: FxHashMap<u32, (u32, Vec<Mapping>)>,
    snapshots: u32,
    /// (snapshot, code address) -> the functions there, outermost first.
    named: FxHashMap<(u32, u64), Vec<String>>,
    functions: Vec<FunctionTally>,
    by_name: HashMap<String, u32>,
    /// Per thread: its CPU clock at its previous sample.
    last_cpu: FxHashMap<u32, u64>,
    counts: LiveSampleCounts,
    rule: TrackRule,
    /// The followed functions (ids of `functions`).
    followed: Vec<u32>,
    /// Columns released, for the next hot functions.
    free: Vec<ProcId>,
    /// Samples read when a hot function last looked for a cold one's column.
    reuse_tried: u64,
}

impl LiveSamples {
    pub(crate) fn new(locator: Box<dyn CodeLocator>, rule: TrackRule) -> Self {
        LiveSamples {
            locator,
            mappings: FxHashMap::default(),
            snapshots: 0,
            named: FxHashMap::default(),
            functions: Vec::new(),
            by_name: HashMap::new(),
            last_cpu: FxHashMap::default(),
            counts: LiveSampleCounts::default(),
            rule,
            followed: Vec::new(),
            free: Vec::new(),
            reuse_tried: 0,
        }
    }

    /// A process snapshot: the mapped files its later samples are named against.
    pub(crate) fn process(&mut self, p: &ProcessInfo) {
        if p.mappings.is_empty() {
            return;
        }
        self.snapshots += 1;
        self.mappings
            .insert(p.pid, (self.snapshots, p.mappings.clone()));
    }

    /// The process ended: its mapped files are no longer needed (a system-wide session
    /// sees processes come and go without end).
    pub(crate) fn end_process(&mut self, pid: u32) {
        self.mappings.remove(&pid);
    }

    /// The thread ended: its previous sample is no longer needed.
    pub(crate) fn end_thread(&mut self, tid: u32) {
        self.last_cpu.remove(&tid);
    }

    /// Tallies sample `r` of a thread whose first record had CPU clock `first_cpu`
    /// (None: no record of the thread came yet, and the sample is only counted);
    /// returns the followed functions its stack is in. A hot function gets a column of
    /// `columns` from a sample that `may_follow` (taken outside MPI/PVM calls: a sample
    /// inside one is no path work, and an MPI library's start-up would make hundreds of
    /// its functions hot for a moment).
    pub(crate) fn sample(
        &mut self,
        r: &SampleRecord,
        first_cpu: Option<u64>,
        may_follow: bool,
        columns: &mut dyn Columns,
    ) -> StackProcs {
        let h = &r.header;
        self.counts.samples += 1;
        self.counts.complete += (r.end == unwind_end::COMPLETE) as u64;
        let Some(first_cpu) = first_cpu else {
            return StackProcs::default();
        };
        let previous = self.last_cpu.insert(h.tid, h.cpu_ns).unwrap_or(first_cpu);
        let weight = h.cpu_ns.saturating_sub(previous);
        self.counts.cpu_ns += weight;

        let names = self.stack_names(r);
        let mut ids: Vec<u32> = Vec::with_capacity(names.len());
        for name in &names {
            if let Some(id) = self.function_id(name) {
                ids.push(id);
            }
        }
        let leaf = names.last().and_then(|n| self.by_name.get(n).copied());
        ids.sort_unstable();
        ids.dedup();

        let mut stack = StackProcs::default();
        for &id in &ids {
            let seen = self.counts.samples;
            let f = &mut self.functions[id as usize];
            f.cpu_ns += weight;
            f.samples += 1;
            f.last_seen = seen;
            let hot = f.samples >= self.rule.samples
                && f.cpu_ns * 1000 >= self.counts.cpu_ns * self.rule.cpu_permille;
            if f.proc.is_none() && hot && may_follow {
                self.follow(id, columns);
            }
            if let Some(p) = self.functions[id as usize].proc {
                stack.inclusive.push(p);
            }
        }
        stack.leaf = leaf.and_then(|id| self.functions[id as usize].proc);
        stack
    }

    /// Releases the column of every followed function no path that counts has time in,
    /// cold or not (the launcher's, once the program's processes show themselves).
    pub(crate) fn release_unused(&mut self, columns: &mut dyn Columns) {
        let functions = &mut self.functions;
        let free = &mut self.free;
        self.followed.retain(|&id| {
            let f = &mut functions[id as usize];
            match f.proc {
                Some(p) if columns.unused(p) => {
                    free.push(p);
                    f.proc = None;
                    false
                }
                _ => true,
            }
        });
    }

    /// Whether column `p` was released and waits for a function to follow: it names no
    /// function, so no output shows it.
    pub(crate) fn is_free(&self, p: ProcId) -> bool {
        self.free.contains(&p)
    }

    /// Gives hot function `id` a column: a released one, a new one, or a cold function's.
    fn follow(&mut self, id: u32, columns: &mut dyn Columns) {
        if let Some(p) = self.free.pop() {
            columns.reuse(p, &self.functions[id as usize].name);
            self.functions[id as usize].proc = Some(p);
            self.followed.push(id);
            self.counts.reused += 1;
            return;
        }
        if self.followed.len() + self.free.len() < MAX_TRACKED {
            let f = &mut self.functions[id as usize];
            f.proc = Some(columns.add(&f.name));
            self.followed.push(id);
            self.counts.tracked += 1;
            return;
        }
        let now = self.counts.samples;
        if now < self.reuse_tried + REUSE_EVERY_SAMPLES {
            return;
        }
        self.reuse_tried = now;
        let functions = &self.functions;
        let coldest = self
            .followed
            .iter()
            .enumerate()
            .filter(|(_, &c)| functions[c as usize].last_seen + COLD_SAMPLES < now)
            .filter(|(_, &c)| {
                functions[c as usize]
                    .proc
                    .is_some_and(|p| columns.unused(p))
            })
            .min_by_key(|(_, &c)| functions[c as usize].last_seen)
            .map(|(slot, &c)| (slot, c));
        let Some((slot, cold)) = coldest else {
            return;
        };
        let p = self.functions[cold as usize].proc.take();
        if let Some(p) = p {
            columns.reuse(p, &self.functions[id as usize].name);
            self.functions[id as usize].proc = Some(p);
            self.followed[slot] = id;
            self.counts.reused += 1;
        }
    }

    /// The stack's frames named, outermost first.
    fn stack_names(&mut self, r: &SampleRecord) -> Vec<String> {
        let depth = (r.depth as usize).min(r.frames.len());
        let (snapshot, mappings) = match self.mappings.get(&r.header.tgid) {
            Some((n, m)) => (*n, &m[..]),
            None => (0, &[][..]),
        };
        if self.named.len() > MAX_NAMED_ADDRESSES {
            self.named.clear();
        }
        let (named, locator) = (&mut self.named, &mut self.locator);
        stack_function_names(&r.frames[..depth], |code| {
            named
                .entry((snapshot, code))
                .or_insert_with(|| locator.function_names(mappings, code))
                .clone()
        })
    }

    /// The tally of function `name` (None when [`MAX_FUNCTIONS`] are tallied already).
    fn function_id(&mut self, name: &str) -> Option<u32> {
        if let Some(&id) = self.by_name.get(name) {
            return Some(id);
        }
        if self.functions.len() >= MAX_FUNCTIONS {
            return None;
        }
        let id = self.functions.len() as u32;
        self.functions.push(FunctionTally {
            name: name.to_string(),
            cpu_ns: 0,
            samples: 0,
            last_seen: 0,
            proc: None,
        });
        self.by_name.insert(name.to_string(), id);
        self.counts.functions += 1;
        Some(id)
    }

    pub(crate) fn counts(&self) -> LiveSampleCounts {
        self.counts
    }

    /// The CPU time of the samples in the function followed as procedure `p`.
    pub(crate) fn cpu_of(&self, p: ProcId) -> u64 {
        self.functions
            .iter()
            .find(|f| f.proc == Some(p))
            .map_or(0, |f| f.cpu_ns)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::TrackRule;
    use crate::analysis::profile::Profile;
    use crate::analysis::workclock::ClockKind;
    use crate::analysis::Pipeline;
    use crate::export::sampled::tests::TableLocator;
    use crate::format::synth::{sampled_pair, SyntheticRun};

    /// A pipeline whose analyzer follows every sampled function from its first sample.
    fn following_every_function() -> Pipeline {
        let mut pipeline = Pipeline::new(ClockKind::Cpu);
        pipeline.analyzer.follow_sampled_functions_when(
            Box::new(TableLocator),
            TrackRule {
                samples: 1,
                cpu_permille: 0,
            },
        );
        pipeline
    }

    /// The live estimate on the construction the report's attribution is tested on
    /// (`export::sampled`): every function followed from its first sample gets the
    /// report's critical-path, exclusive and CPU times and zeroing.
    #[test]
    fn live_functions_weigh_what_the_construction_says() {
        let mut pipeline = following_every_function();
        for item in &sampled_pair() {
            pipeline.item(item);
        }
        let profile = Profile::new(pipeline.flush(), ClockKind::Cpu, 0, &HashMap::new());
        assert_eq!(profile.critical_path.length_ns, 50_000);
        assert!(profile.procedures.is_empty());
        let got: Vec<(&str, u64, u64, u64, u64)> = profile
            .sampled_functions
            .iter()
            .map(|f| (&*f.name, f.cp_ns, f.cp_exclusive_ns, f.cpu_ns, f.zeroing_ns))
            .collect();
        assert_eq!(
            got,
            [
                ("main", 50_000, 0, 60_000, 50_000),
                ("a", 35_000, 35_000, 35_000, 35_000),
                ("b", 10_000, 10_000, 10_000, 10_000),
                ("c", 5_000, 5_000, 15_000, 5_000),
            ]
        );
        let counts = profile.samples.unwrap();
        assert_eq!((counts.samples, counts.complete), (6, 5));
        assert_eq!(
            (counts.cpu_ns, counts.functions, counts.tracked),
            (60_000, 4, 4)
        );
    }

    /// A launcher's function is followed until the program shows itself, then its column
    /// is released: the profile lists the program's functions, not an empty row for it.
    #[test]
    fn a_released_column_is_no_row() {
        use tracer_common::{call, unwind_end};
        let mut pipeline = following_every_function();
        let frames = |f: u64| [f + 5, 0x1010];
        let mut s = SyntheticRun::new(2, &[]);
        s.map_app();
        // Rank 1 plays the launcher: it works in c and never calls MPI.
        s.compute(1, 10_000, None);
        s.sample(1, &frames(0x4000), unwind_end::COMPLETE);
        s.compute(0, 10_000, None);
        s.sample(0, &frames(0x2000), unwind_end::COMPLETE);
        s.call(0, call::MPI_BARRIER, -1, -1, false);
        s.call(0, call::MPI_BARRIER, -1, -1, true);
        s.compute(0, 10_000, None);
        s.sample(0, &frames(0x2000), unwind_end::COMPLETE);
        for item in &s.items {
            pipeline.item(item);
        }
        let profile = Profile::new(pipeline.flush(), ClockKind::Cpu, 0, &HashMap::new());
        let names: Vec<&str> = profile.sampled_functions.iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["a", "main"]);
        let counts = profile.samples.unwrap();
        assert_eq!(
            (counts.samples, counts.functions, counts.tracked),
            (3, 3, 3)
        );
    }
}
