//! How often our programs ran and how long they took, as the kernel counts them (its BPF
//! run statistics), for `tracer record --bpf-stats`: the measured probe hits and run time
//! of the session's cost (`tracer_analysis::cost`; by default it counts the records the
//! probes wrote instead, which costs nothing).
//!
//! The kernel keeps the statistics while someone asks for them: the session holds the
//! descriptor `BPF_ENABLE_STATS` returns, and closing it (when the probes go) ends its
//! request. Unlike the `kernel.bpf_stats_enabled` sysctl, nothing stays changed after
//! the tracer. While it is held, every BPF program on the machine pays the statistics'
//! two clock reads a run: about 75 ns on the benchmark VM (docs/benchmarks.md), hence
//! off by default. They count every run of our programs, in every process.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use aya::sys::{enable_stats, Stats};
use tracer_analysis::cost::{CountSource, ProbeCounts, ProbeFamily, ProgramRuns};

use super::{one_line, ProbeError, Probes};

/// The kernel's statistics turned on for this session.
pub(super) struct RunStatistics {
    /// Held for the session: the kernel counts while it is open.
    _enabled: OwnedFd,
    /// The family of each of our programs, by name.
    families: HashMap<&'static str, ProbeFamily>,
}

impl RunStatistics {
    /// Turns the statistics on for our programs `families`; None (and a warning) when
    /// the kernel refuses (before Linux 5.8, or without CAP_SYS_ADMIN): the session then
    /// counts the records instead.
    pub(super) fn enable(families: HashMap<&'static str, ProbeFamily>) -> Option<Self> {
        match enable_stats(Stats::RunTime) {
            Ok(fd) => Some(RunStatistics {
                _enabled: fd,
                families,
            }),
            Err(source) => {
                log::warn!(
                    "the kernel's BPF statistics could not be turned on; the session's cost \
                     counts the probes' records instead: {}",
                    one_line(&source)
                );
                None
            }
        }
    }
}

impl Probes {
    /// Nanoseconds since just before the first probe was attached: the span the probe
    /// counts cover.
    pub(crate) fn counted_ns(&self) -> u64 {
        self.counting_since.elapsed().as_nanos() as u64
    }

    /// Runs and run time of our programs so far as the kernel counted them, by family;
    /// None when its statistics are off (not asked for, or refused by the kernel). A
    /// program not loaded (the procedure programs of a session without `--func`) never
    /// ran.
    pub(crate) fn kernel_run_counts(&self) -> Result<Option<ProbeCounts>, ProbeError> {
        let Some(stats) = &self.run_statistics else {
            return Ok(None);
        };
        let mut families: std::collections::BTreeMap<ProbeFamily, ProgramRuns> = Default::default();
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
            let runs = families.entry(family).or_default();
            *runs = ProgramRuns {
                hits: runs.hits + info.run_count(),
                run_ns: runs.run_ns + info.run_time().as_nanos() as u64,
            };
        }
        Ok(Some(ProbeCounts {
            source: CountSource::Kernel,
            families,
            counted_ns: self.counted_ns(),
        }))
    }
}
