//! The SAMPLE records of a recording, kept aside as the graph is read (they are no events
//! of it): each sampled stack once, and the processes' mapped files it is symbolized
//! against. `graph::attribution` weighs them on the activity graph.

use std::collections::HashMap;

use tracer_common::{unwind_end, SampleRecord};

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
