//! What a report says: the types `tracer report --json` writes (docs/report-json.md).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::faults::Killed;
use crate::analysis::matcher::MatchStats;
use crate::analysis::profile::CriticalPath;
use crate::graph::path::{Activity, PathTotals};
use crate::graph::whatif::Scale;
use crate::metrics::Metrics;

pub(crate) const SCHEMA_VERSION: u32 = 1;

pub struct ReportOptions {
    /// How many longest paths to find (1 = the critical path only).
    pub paths: usize,
    /// What-if edits, applied together.
    pub scales: Vec<Scale>,
    /// Phases: least number of occurrences, longest pattern, how many to list.
    pub phase_support: usize,
    pub phase_max_len: usize,
    pub phase_limit: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            paths: 10,
            scales: Vec::new(),
            phase_support: 2,
            phase_max_len: 16,
            phase_limit: 5,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub clock: String,
    /// Findings in words, most important first (see `diagnosis`).
    pub diagnosis: Vec<Finding>,
    pub critical_path: PathHeader,
    /// The path itself, first activity first.
    pub activities: Vec<Activity>,
    pub totals: PathTotals,
    /// Per selected procedure (and the work outside them), largest share first.
    pub procedures: Vec<ProcedureRow>,
    /// Functions on the critical path by sampled stacks (docs/sampled-attribution.md):
    /// absent when the recording has no samples ([`Report::add_sampled`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledSection>,
    pub processes: Vec<ProcessRow>,
    pub threads: Vec<ThreadRow>,
    pub near_critical_paths: Vec<NearPath>,
    pub whatif: Option<WhatIf>,
    pub phases: Vec<PhaseRow>,
    pub messages: MatchStats,
    /// Processes a signal killed, in order of death (absent when none was): the path
    /// and figures above are those of what every process recorded until then.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub killed: Vec<Killed>,
    /// Metrics by level (docs/metrics.md), when computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathHeader {
    /// Length, elapsed time and where the path ends, as in the online profile.
    #[serde(flatten)]
    pub path: CriticalPath,
    pub vertices: usize,
    pub arcs: usize,
    pub events: u64,
    pub lost: u64,
    /// The probes' failures by reason name, lost records included: absent when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub probe_failures: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcedureRow {
    /// Demangled (C++, Rust), or [`OUTSIDE`](crate::path::OUTSIDE).
    pub name: String,
    /// The selected procedure's symbol as the binary has it (what `--func` matched);
    /// none for the row of the work outside every selected procedure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Time of the critical path inside the procedure (callees included).
    pub cp_ns: u64,
    pub cp_pct: f64,
    pub cp_exclusive_ns: u64,
    /// Work in the procedure (callees included) by all threads, and its share of all
    /// work.
    pub work_ns: u64,
    pub work_pct: f64,
    /// How much shorter the critical path gets if the procedure took no time (exact:
    /// the path recomputed on the graph with the procedure's arcs weighted 0).
    pub zeroing_ns: u64,
    pub zeroing_pct: f64,
    /// Maximum benefit over the k longest paths (an upper bound on the gain that tuning
    /// the procedure can buy, judged by the paths found).
    pub mbm_ns: u64,
    pub mbm_pct: f64,
    /// Whether `mbm_ns` is exactly the zeroing gain (the k paths cover every path that
    /// could matter); otherwise it is an upper bound.
    pub mbm_exact: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub rank: Option<i32>,
    pub command: String,
    pub cp_ns: u64,
    pub cp_pct: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadRow {
    pub tid: u32,
    pub pid: u32,
    /// Work of the thread on the critical path and in all.
    pub cp_ns: u64,
    pub work_ns: u64,
    /// Least total slack of the thread's work: how much it could be delayed without
    /// lengthening the path (0 for threads on the critical path); None if none of its
    /// work reaches the path's end.
    pub min_slack_ns: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NearPath {
    pub rank: usize,
    pub length_ns: u64,
    /// Length as a percentage of the critical path's.
    pub pct: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct WhatIf {
    /// (procedure, factor) edits applied together.
    pub scales: Vec<(String, f64)>,
    pub measured_ns: u64,
    pub predicted_ns: u64,
    pub gain_ns: u64,
    pub gain_pct: f64,
    /// Work on the new critical path by procedure (inclusive), and where it ends.
    pub by_procedure: BTreeMap<String, u64>,
    pub ends_in_tid: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseRow {
    /// Activity types (procedure names and waits) in order.
    pub pattern: Vec<String>,
    pub count: usize,
    pub score: u64,
    /// Probe clock at the start of each occurrence.
    pub starts_ns: Vec<u64>,
}

/// What a finding of the diagnosis is about (`diagnosis` says when each is made).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A signal killed a process: the run did not end as written, and every figure is
    /// of what was recorded until then. Always first.
    ProcessKilled,
    /// One process carries most of the path while the others wait for it.
    SequentialBottleneck,
    /// A procedure is a large part of the path: what removing it would gain.
    ProcedureOnPath,
    /// The path waits long for messages between a pair of processes.
    CommunicationOnPath,
    /// The path waits long in a program's synchronization (OpenMP barriers, joins and
    /// forks, locks, futex waits) between a pair of threads.
    SynchronizationOnPath,
    /// Another path is close behind: tuning the critical path alone gains little.
    ClosePaths,
    /// A procedure takes much work but never limits the run.
    OffPath,
    /// Threads wait for a CPU: more runnable threads than CPUs.
    CpuContention,
    /// The program's processes spend much of their time blocked in calls.
    WaitingInCalls,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// The statement, with its figures.
    pub text: String,
    /// How much of the path the finding is about (ranking key).
    pub impact_ns: u64,
    /// The figures cited, by name (milliseconds and percentages).
    pub figures: BTreeMap<String, f64>,
}

/// Functions on the critical path, measured by sampled stacks.
#[derive(Clone, Debug, Serialize)]
pub struct SampledSection {
    /// Samples, and how many unwound to their stack's root (`main`, a thread's start).
    pub samples: u64,
    pub complete: u64,
    pub complete_pct: f64,
    /// CPU time the samples weigh in all, and the part of it on the critical path (and
    /// its share of the path's length).
    pub cpu_ns: u64,
    pub critical_path_ns: u64,
    pub critical_path_pct: f64,
    /// Functions with any time, all counted.
    pub functions_total: usize,
    /// The first 30 (`REPORTED_FUNCTIONS`) by inclusive critical-path time.
    pub functions: Vec<SampledFunctionRow>,
}

/// One function of [`SampledSection`]: percentages of the path's length (cp) and of
/// the samples' CPU time (cpu).
#[derive(Clone, Debug, Serialize)]
pub struct SampledFunctionRow {
    pub name: String,
    /// Inclusive: the function anywhere on the stack.
    pub cp_ns: u64,
    pub cp_pct: f64,
    pub cpu_ns: u64,
    pub cpu_pct: f64,
    pub samples: u64,
    /// Self: the function innermost.
    pub self_cp_ns: u64,
    pub self_cp_pct: f64,
    pub self_cpu_ns: u64,
    pub self_cpu_pct: f64,
    pub self_samples: u64,
    /// What the path gets shorter by without the function's sampled time (exact, through
    /// the graph); absent after the first functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeroing_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeroing_pct: Option<f64>,
}
