//! How often our programs ran and how long they took, as the kernel counts them (its BPF
//! run statistics): the probe hits and the programs' own time of the session's cost
//! (`tracer_analysis::cost`).
//!
//! The kernel keeps the statistics while someone asks for them: the session holds the
//! descriptor `BPF_ENABLE_STATS` returns, and closing it (when the probes go) ends its
//! request. Unlike the `kernel.bpf_stats_enabled` sysctl, nothing stays changed after
//! the tracer. While it is held, every BPF program on the machine pays the statistics'
//! two clock reads a run: about 75 ns on the benchmark VM (docs/benchmarks.md), hence
//! `--no-bpf-stats`.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::time::Instant;

use aya::sys::{enable_stats, Stats};
use tracer_analysis::cost::{ProbeCounts, ProbeFamily, ProgramRuns};

use super::{one_line, ProbeError, Probes};

/// The kernel's statistics turned on for this session.
pub(super) struct RunStatistics {
    /// Held for the session: the kernel counts while it is open.
    _enabled: OwnedFd,
    /// When they were turned on (before the first probe was attached).
    since: Instant,
    /// The family of each of our programs, by name.
    families: HashMap<&'static str, ProbeFamily>,
}

impl RunStatistics {
    /// Turns the statistics on for our programs `families`; None (and a warning) when
    /// the kernel refuses (before Linux 5.8, or without CAP_SYS_ADMIN): the session then
    /// goes on without probe counts.
    pub(super) fn enable(families: HashMap<&'static str, ProbeFamily>) -> Option<Self> {
        match enable_stats(Stats::RunTime) {
            Ok(fd) => Some(RunStatistics {
                _enabled: fd,
                since: Instant::now(),
                families,
            }),
            Err(source) => {
                log::warn!(
                    "the kernel's BPF statistics could not be turned on; the session's probe \
                     hits will be unknown: {}",
                    one_line(&source)
                );
                None
            }
        }
    }
}

impl Probes {
    /// Runs and run time of our programs so far, by family, and the span since the
    /// statistics were turned on; None when they are off (not asked for, or refused by
    /// the kernel). A program not loaded (the procedure programs of a session without
    /// `--func`) never ran.
    pub(crate) fn run_counts(&self) -> Result<Option<ProbeCounts>, ProbeError> {
        let Some(stats) = &self.run_statistics else {
            return Ok(None);
        };
        let mut counts = ProbeCounts::default();
        for (name, program) in self.ebpf.programs() {
            let Some((&name, &family)) = stats.families.get_key_value(name) else {
                continue;
            };
            if !self.loaded.contains(name) {
                continue;
            }
            let info = program
                .info()
                .map_err(|source| ProbeError::Program { name, source })?;
            let runs = counts.families.entry(family).or_default();
            *runs = ProgramRuns {
                hits: runs.hits + info.run_count(),
                run_ns: runs.run_ns + info.run_time().as_nanos() as u64,
            };
        }
        counts.counted_ns = stats.since.elapsed().as_nanos() as u64;
        Ok(Some(counts))
    }
}
