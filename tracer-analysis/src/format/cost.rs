//! What a session cost the traced program and the machine (the summary's `cost`, and the
//! `cost:` line at the end of `tracer record`): how often the probes ran, the share of the
//! program's CPU they took, and the tracer's own CPU. By default the runs are counted from
//! the records the probes wrote (free, and only the traced program's) and their time is
//! estimated; with `tracer record --bpf-stats` the kernel counts and times every run of our
//! programs, machine-wide, at a price per run. This is only the arithmetic, tested on
//! made-up figures. Schema: docs/summary-json.md.

use std::collections::BTreeMap;

use serde::Serialize;
use tracer_common::RecordKind;

use crate::units::percent;

/// What one entry or return uprobe hit costs beyond the program it runs: the kernel's
/// trap, finding the probe, the return's hijacked address and system call. Not
/// measurable per hit; taken from docs/benchmarks.md (round 6, "what this kernel offers
/// for cheaper uprobes"): an entry + return pair with empty programs on an emulated
/// `push` costs 856 ns of the process's CPU time on the benchmark VM, of which the empty
/// programs' own run time is about 78 ns (72-84 ns a pair in the kernel's statistics,
/// "Round 6" of section 1), which `run_ns` counts; (856 - 78) / 2 = 389. A probe the
/// kernel single-steps (a `--func` procedure starting with an instruction it cannot
/// emulate) costs far more (10 us a pair on that VM); other machines differ.
pub const TRAP_NS_PER_UPROBE_HIT: u64 = 390;

/// What one run of the sampler's program takes (the 16 KiB copy of the stack most of
/// it), measured with the kernel's run statistics (docs/sampling.md, "Figures").
pub const SAMPLER_RUN_NS: u64 = 6_000;

/// Where a family of probes fires: at a function's entry or return (a uprobe, which traps
/// into the kernel) or at a kernel tracepoint (no trap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeFamily {
    /// Entry and return of MPI, PVM, pthread and OpenMP calls (with `--probes floor`,
    /// the empty programs of procedures too: they are the same pair).
    Calls,
    /// Entry and return of `--func` procedures.
    Procedures,
    /// The return of dlopen (libraries loaded at run time).
    LibraryLoaded,
    /// Context switches and wakeups.
    Scheduler,
    /// Fork, exec and exit.
    Processes,
    /// futex system calls' entry and exit.
    Futex,
    /// The sampler (`--sample HZ`): a perf-event program run by the CPU clock, which
    /// copies a traced thread's registers and top of stack (docs/sampling.md). Not a
    /// uprobe: counted with the tracepoints.
    Sampler,
}

impl ProbeFamily {
    /// Whether the family's probes are uprobes (which trap) rather than tracepoints.
    pub fn is_uprobe(self) -> bool {
        matches!(
            self,
            ProbeFamily::Calls | ProbeFamily::Procedures | ProbeFamily::LibraryLoaded
        )
    }

    /// The time one run of the family's programs takes, for counts without the kernel's
    /// timing ([`CountSource::Records`]): the mean run time the kernel's statistics
    /// measured on the benchmark VM (docs/benchmarks.md, "What a run costs": `tracer
    /// record --bpf-stats` on bench_slowdown's message loop for calls, its `--func
    /// 'bproc_*'` procedures, threads_pingpong's futex calls, and the switches and
    /// processes of mpi_busy and those runs). An estimate: runs that read arrays or
    /// statuses, or scan the stack (a futex wait's site), take longer than the mean, and
    /// other machines differ.
    pub fn estimated_run_ns(self) -> u64 {
        match self {
            ProbeFamily::Calls => 300,
            ProbeFamily::Procedures => 155,
            ProbeFamily::Scheduler => 400,
            // A held process's dlopen return stops it, as an exec does: not measured
            // apart (one run per dlopen), taken as the processes' figure.
            ProbeFamily::Processes | ProbeFamily::LibraryLoaded => 1_800,
            ProbeFamily::Futex => 1_000,
            // docs/sampling.md, "Cost": `--bpf-stats` on sampled_chain at 999 Hz.
            ProbeFamily::Sampler => SAMPLER_RUN_NS,
        }
    }

    /// The family whose run wrote a record of `kind` as its first (head) record; None
    /// for the records a run writes after its head (a call's handle and status arrays,
    /// the calls it found unwound, a process's end after its last thread's exit) and
    /// for the ring's short forms, which userspace expands into whole records before
    /// anything counts them.
    fn of_head_record(kind: RecordKind) -> Option<ProbeFamily> {
        match kind {
            RecordKind::CallEnter | RecordKind::CallExit => Some(ProbeFamily::Calls),
            RecordKind::FuncEnter | RecordKind::FuncExit => Some(ProbeFamily::Procedures),
            RecordKind::SwitchOut
            | RecordKind::SwitchIn
            | RecordKind::Wakeup
            | RecordKind::WakeupNew => Some(ProbeFamily::Scheduler),
            RecordKind::Fork | RecordKind::Exec | RecordKind::Exit => Some(ProbeFamily::Processes),
            RecordKind::FutexEnter | RecordKind::FutexExit => Some(ProbeFamily::Futex),
            RecordKind::HandleArray
            | RecordKind::StatusArray
            | RecordKind::CallsUnwound
            | RecordKind::ProcessEnd => None,
            // One run of the sampler wrote the RAW_SAMPLE that became this SAMPLE.
            RecordKind::Sample => Some(ProbeFamily::Sampler),
            RecordKind::RawSample => None,
            RecordKind::CallPair
            | RecordKind::CallReturn
            | RecordKind::FutexPair
            | RecordKind::SwitchPair
            | RecordKind::SlotsNudge
            | RecordKind::LibraryLoaded => None,
        }
    }
}

/// Where a session's probe counts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CountSource {
    /// The records the probes wrote for the traced threads (free): hits in the traced
    /// program only, run time estimated ([`ProbeFamily::estimated_run_ns`]).
    Records,
    /// The kernel's BPF run statistics (`--bpf-stats`): every run of our programs on the
    /// machine, its time measured.
    Kernel,
}

/// One family's runs and the time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgramRuns {
    /// Runs of the family's programs: each run is one probe hit.
    pub hits: u64,
    /// Time inside the programs (the tail calls they make included): measured by the
    /// kernel, or `hits` x the family's estimated run time.
    pub run_ns: u64,
}

/// A session's probe runs, by family, over `counted_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeCounts {
    pub source: CountSource,
    pub families: BTreeMap<ProbeFamily, ProgramRuns>,
    /// From just before the first probe was attached to tracing stopped.
    pub counted_ns: u64,
}

/// The runs of a session's probes that wrote other than one record the summary counts
/// as a run's head: counted where userspace reads the ring, the rest of the runs being
/// the summary's records by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunsNotOneRecord {
    /// Switches from one traced thread to another: one run of the switch program that
    /// wrote both a `switch_out` and a `switch_in`.
    pub switch_pairs: u64,
    /// dlopen returns in processes held for them: runs whose ring record stands for no
    /// record.
    pub libraries_loaded: u64,
}

impl ProbeCounts {
    /// The runs the records stand for: one per head record (a call's entry or exit, a
    /// procedure's, a switch, a wakeup, a fork, exec or exit, a futex call's entry or
    /// exit), a switch pair one run, each held dlopen return one; the time estimated.
    /// `by_kind`: the records by kind name, as the summary counts them
    /// (`EventCounts::by_kind`).
    pub fn from_records(
        by_kind: &BTreeMap<String, u64>,
        apart: RunsNotOneRecord,
        counted_ns: u64,
    ) -> ProbeCounts {
        let mut hits: BTreeMap<ProbeFamily, u64> = BTreeMap::new();
        for (name, &count) in by_kind {
            let family = RecordKind::ALL
                .iter()
                .find(|k| k.name() == name)
                .and_then(|&k| ProbeFamily::of_head_record(k));
            if let Some(family) = family {
                *hits.entry(family).or_default() += count;
            }
        }
        if let Some(switches) = hits.get_mut(&ProbeFamily::Scheduler) {
            *switches = switches.saturating_sub(apart.switch_pairs);
        }
        if apart.libraries_loaded > 0 {
            *hits.entry(ProbeFamily::LibraryLoaded).or_default() += apart.libraries_loaded;
        }
        ProbeCounts {
            source: CountSource::Records,
            families: hits
                .into_iter()
                .map(|(family, hits)| {
                    let run_ns = hits * family.estimated_run_ns();
                    (family, ProgramRuns { hits, run_ns })
                })
                .collect(),
            counted_ns,
        }
    }
}

/// The facts a session's cost is computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostInputs {
    pub probes: ProbeCounts,
    /// CPU time of the traced threads, first to last record of each (the critical path
    /// analysis' total).
    pub program_cpu_ns: u64,
    /// The tracer's own CPU time (user + system, all its threads).
    pub tracer_cpu_ns: u64,
    /// The session's wall time, from its start to the outputs written.
    pub session_ns: u64,
}

/// What a session cost (the summary's `cost`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunCost {
    /// The session's wall time, from its start to the outputs written.
    pub session_ns: u64,
    /// The summary's `tracer_cpu_ns` over `session_ns`, in percent of one core.
    pub tracer_core_pct: f64,
    pub probes: ProbeCost,
}

/// What the probes cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeCost {
    /// Where the counts come from: `records` (the traced program's, run time estimated)
    /// or `kernel` (the whole machine's, run time measured).
    pub source: CountSource,
    /// The span the counts cover: from the first probe attached to tracing stopped.
    pub counted_ns: u64,
    /// Runs of our uprobe programs (an entry and a return probe are one hit each).
    pub uprobe_hits: u64,
    /// Runs of our tracepoint programs.
    pub tracepoint_hits: u64,
    /// Both, per second of `counted_ns`.
    pub hits_per_s: f64,
    pub uprobe_hits_per_s: f64,
    pub tracepoint_hits_per_s: f64,
    /// Time inside all our programs: measured by the kernel, or estimated (`source`).
    pub run_ns: u64,
    /// The constant [`TRAP_NS_PER_UPROBE_HIT`].
    pub trap_ns_per_uprobe_hit: u64,
    /// `uprobe_hits` x `trap_ns_per_uprobe_hit`: an estimate.
    pub trap_ns: u64,
    /// CPU time of the traced threads, first to last record of each.
    pub program_cpu_ns: u64,
    /// `run_ns` + `trap_ns` in percent of `program_cpu_ns` (None when it is 0), and the
    /// two parts.
    pub probes_pct: Option<f64>,
    pub run_pct: Option<f64>,
    pub trap_pct: Option<f64>,
    /// Hits and run time by family (only the families that ran).
    pub families: BTreeMap<ProbeFamily, ProgramRuns>,
}

impl RunCost {
    pub fn new(inputs: &CostInputs) -> RunCost {
        RunCost {
            session_ns: inputs.session_ns,
            tracer_core_pct: percent(inputs.tracer_cpu_ns, inputs.session_ns),
            probes: ProbeCost::new(&inputs.probes, inputs.program_cpu_ns),
        }
    }

    /// The line `tracer record` ends with.
    pub fn text_line(&self) -> String {
        let p = &self.probes;
        let (whose, run) = match p.source {
            CountSource::Records => ("in the traced program", "estimated"),
            CountSource::Kernel => ("machine-wide", "measured"),
        };
        let hits = format!(
            "{} probe hits/s {whose} (uprobes {}, tracepoints {})",
            grouped(p.hits_per_s),
            grouped(p.uprobe_hits_per_s),
            grouped(p.tracepoint_hits_per_s)
        );
        let share = match (p.probes_pct, p.run_pct, p.trap_pct) {
            (Some(all), Some(run_pct), Some(trap)) => format!(
                "probes ~{all:.1} % of the program's CPU ({run_pct:.1} % in our programs, \
                 {run}; {trap:.1} % in traps, estimated)"
            ),
            _ => "probes' share of the program's CPU unknown (no CPU time of a traced \
                  thread recorded)"
                .to_string(),
        };
        format!(
            "cost: {hits}; {share}; tracer {:.1} % of a core",
            self.tracer_core_pct
        )
    }
}

impl ProbeCost {
    fn new(counts: &ProbeCounts, program_cpu_ns: u64) -> ProbeCost {
        let mut uprobe_hits = 0;
        let mut tracepoint_hits = 0;
        let mut run_ns = 0;
        for (family, runs) in &counts.families {
            if family.is_uprobe() {
                uprobe_hits += runs.hits;
            } else {
                tracepoint_hits += runs.hits;
            }
            run_ns += runs.run_ns;
        }
        let trap_ns = uprobe_hits * TRAP_NS_PER_UPROBE_HIT;
        let per_s = |n: u64| {
            if counts.counted_ns == 0 {
                0.0
            } else {
                (n as f64 * 1e9 / counts.counted_ns as f64).round()
            }
        };
        let share = |ns: u64| (program_cpu_ns > 0).then(|| percent(ns, program_cpu_ns));
        ProbeCost {
            source: counts.source,
            counted_ns: counts.counted_ns,
            uprobe_hits,
            tracepoint_hits,
            hits_per_s: per_s(uprobe_hits + tracepoint_hits),
            uprobe_hits_per_s: per_s(uprobe_hits),
            tracepoint_hits_per_s: per_s(tracepoint_hits),
            run_ns,
            trap_ns_per_uprobe_hit: TRAP_NS_PER_UPROBE_HIT,
            trap_ns,
            program_cpu_ns,
            probes_pct: share(run_ns + trap_ns),
            run_pct: share(run_ns),
            trap_pct: share(trap_ns),
            families: counts
                .families
                .iter()
                .filter(|(_, runs)| runs.hits > 0)
                .map(|(&family, &runs)| (family, runs))
                .collect(),
        }
    }
}

/// A rate rounded to a whole number, its thousands separated by commas.
fn grouped(rate: f64) -> String {
    let digits = format!("{:.0}", rate.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(source: CountSource) -> ProbeCounts {
        let runs = |hits, run_ns| ProgramRuns { hits, run_ns };
        ProbeCounts {
            source,
            families: BTreeMap::from([
                (ProbeFamily::Calls, runs(40_000, 12_000_000)),
                (ProbeFamily::Procedures, runs(100, 30_000)),
                (ProbeFamily::LibraryLoaded, runs(0, 0)),
                (ProbeFamily::Scheduler, runs(1_800, 700_000)),
                (ProbeFamily::Futex, runs(200, 100_000)),
            ]),
            counted_ns: 2_000_000_000,
        }
    }

    fn inputs(source: CountSource) -> CostInputs {
        CostInputs {
            probes: counts(source),
            program_cpu_ns: 400_000_000,
            tracer_cpu_ns: 500_000_000,
            session_ns: 2_500_000_000,
        }
    }

    /// Uprobes and tracepoints are counted apart, every program's time counts, the trap
    /// is estimated for uprobe hits only, and shares are of the program's CPU.
    #[test]
    fn hits_split_by_kind_and_shares_of_the_program() {
        let cost = RunCost::new(&inputs(CountSource::Kernel));
        assert_eq!(cost.tracer_core_pct, 20.0);
        let p = &cost.probes;
        assert_eq!(p.uprobe_hits, 40_100);
        assert_eq!(p.tracepoint_hits, 2_000);
        assert_eq!(p.hits_per_s, 21_050.0);
        assert_eq!(p.uprobe_hits_per_s, 20_050.0);
        assert_eq!(p.tracepoint_hits_per_s, 1_000.0);
        assert_eq!(p.run_ns, 12_830_000);
        assert_eq!(p.trap_ns, 40_100 * TRAP_NS_PER_UPROBE_HIT);
        // 12.83 ms of programs and 15.639 ms of traps in 400 ms of the program's CPU.
        assert_eq!(p.run_pct, Some(3.21));
        assert_eq!(p.trap_pct, Some(3.91));
        assert_eq!(p.probes_pct, Some(7.12));
        // A family that never ran is left out.
        assert!(!p.families.contains_key(&ProbeFamily::LibraryLoaded));
        assert_eq!(p.families.len(), 4);
        assert_eq!(
            cost.text_line(),
            "cost: 21,050 probe hits/s machine-wide (uprobes 20,050, tracepoints 1,000); \
             probes ~7.1 % of the program's CPU (3.2 % in our programs, measured; 3.9 % in \
             traps, estimated); tracer 20.0 % of a core"
        );
        let json = serde_json::to_value(&cost).unwrap();
        assert_eq!(json["probes"]["source"], "kernel");
    }

    /// The line says whose hits they are and that the programs' time is an estimate
    /// when the records counted them; the JSON says where the counts come from.
    #[test]
    fn the_source_is_said() {
        let cost = RunCost::new(&inputs(CountSource::Records));
        assert_eq!(
            cost.text_line(),
            "cost: 21,050 probe hits/s in the traced program (uprobes 20,050, tracepoints \
             1,000); probes ~7.1 % of the program's CPU (3.2 % in our programs, estimated; \
             3.9 % in traps, estimated); tracer 20.0 % of a core"
        );
        let json = serde_json::to_value(&cost).unwrap();
        assert_eq!(json["probes"]["source"], "records");
    }

    /// Without the program's CPU there is no share; the hits and the tracer's CPU are
    /// still told.
    #[test]
    fn what_is_unknown_is_said_so() {
        let no_program = RunCost::new(&CostInputs {
            program_cpu_ns: 0,
            session_ns: 0,
            ..inputs(CountSource::Records)
        });
        assert_eq!(no_program.tracer_core_pct, 0.0);
        let p = &no_program.probes;
        assert_eq!((p.probes_pct, p.run_pct, p.trap_pct), (None, None, None));
        assert!(no_program
            .text_line()
            .contains("share of the program's CPU unknown"));
        assert!(no_program
            .text_line()
            .starts_with("cost: 21,050 probe hits/s"));
    }

    /// One run per head record: entries and exits of calls, procedures and futex calls,
    /// switches, wakeups, forks, execs and exits, samples (a sampler run each); not the arrays, statuses, unwound
    /// calls and process ends written after a head; a switch pair is one run (two
    /// records), and each held dlopen return one more run. Time is hits x the family's
    /// estimate.
    #[test]
    fn records_count_one_run_per_head_record() {
        let by_kind: BTreeMap<String, u64> = [
            (RecordKind::CallEnter, 10),
            (RecordKind::CallExit, 9),
            (RecordKind::HandleArray, 4),
            (RecordKind::StatusArray, 3),
            (RecordKind::CallsUnwound, 1),
            (RecordKind::FuncEnter, 5),
            (RecordKind::FuncExit, 5),
            (RecordKind::SwitchOut, 30),
            (RecordKind::SwitchIn, 28),
            (RecordKind::Wakeup, 7),
            (RecordKind::WakeupNew, 1),
            (RecordKind::Fork, 2),
            (RecordKind::Exec, 2),
            (RecordKind::Exit, 3),
            (RecordKind::ProcessEnd, 2),
            (RecordKind::FutexEnter, 6),
            (RecordKind::FutexExit, 6),
            (RecordKind::Sample, 11),
        ]
        .into_iter()
        .map(|(kind, n)| (kind.name().to_string(), n))
        .collect();
        let counts = ProbeCounts::from_records(
            &by_kind,
            RunsNotOneRecord {
                switch_pairs: 20,
                libraries_loaded: 1,
            },
            1_000,
        );
        assert_eq!(counts.source, CountSource::Records);
        assert_eq!(counts.counted_ns, 1_000);
        let hits = |family| counts.families[&family].hits;
        assert_eq!(hits(ProbeFamily::Calls), 19);
        assert_eq!(hits(ProbeFamily::Procedures), 10);
        assert_eq!(hits(ProbeFamily::Scheduler), 30 + 28 + 7 + 1 - 20);
        assert_eq!(hits(ProbeFamily::Processes), 7);
        assert_eq!(hits(ProbeFamily::Futex), 12);
        assert_eq!(hits(ProbeFamily::LibraryLoaded), 1);
        assert_eq!(hits(ProbeFamily::Sampler), 11);
        assert_eq!(
            counts.families[&ProbeFamily::Sampler].run_ns,
            11 * SAMPLER_RUN_NS
        );
        // The sampler is no uprobe: its runs count with the tracepoints'.
        assert!(!ProbeFamily::Sampler.is_uprobe());
        for (family, runs) in &counts.families {
            assert_eq!(runs.run_ns, runs.hits * family.estimated_run_ns());
        }
        // No library loaded: no such family.
        let none = ProbeCounts::from_records(&by_kind, RunsNotOneRecord::default(), 1_000);
        assert!(!none.families.contains_key(&ProbeFamily::LibraryLoaded));
    }

    #[test]
    fn rates_are_grouped_by_thousands() {
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.4), "999");
        assert_eq!(grouped(1_000.0), "1,000");
        assert_eq!(grouped(1_234_567.0), "1,234,567");
    }
}
