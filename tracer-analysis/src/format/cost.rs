//! What a session cost the traced program and the machine (the summary's `cost`, and the
//! `cost:` line at the end of `tracer record`): how often the probes ran, the share of the
//! program's CPU they took, and the tracer's own CPU. The counts come from the kernel (its
//! BPF run statistics) and the clocks; this is only their arithmetic, tested on made-up
//! figures. Schema: docs/summary-json.md.

use std::collections::BTreeMap;

use serde::Serialize;

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
}

impl ProbeFamily {
    /// Whether the family's probes are uprobes (which trap) rather than tracepoints.
    pub fn is_uprobe(self) -> bool {
        matches!(
            self,
            ProbeFamily::Calls | ProbeFamily::Procedures | ProbeFamily::LibraryLoaded
        )
    }
}

/// What the kernel counted of one family's programs: runs and the time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgramRuns {
    /// Runs of the family's programs: each run is one probe hit.
    pub hits: u64,
    /// Time inside the programs (the tail calls they make included), as the kernel
    /// measures it.
    pub run_ns: u64,
}

/// The kernel's counts of a session's programs, by family, over `counted_ns`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    pub families: BTreeMap<ProbeFamily, ProgramRuns>,
    /// From the statistics turned on (before the first probe was attached) to their
    /// reading (tracing stopped).
    pub counted_ns: u64,
}

/// The kernel's counts of a session's programs, or why there are none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeCounting {
    Counted(ProbeCounts),
    Unknown(NoCounts),
}

/// Why a session has no probe counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoCounts {
    /// `--no-bpf-stats`: the statistics were left off.
    Off,
    /// The kernel would not turn its statistics on (before Linux 5.8).
    Refused,
    /// They were on, but could not be read at the end.
    Unreadable,
}

impl NoCounts {
    fn says(self) -> &'static str {
        match self {
            NoCounts::Off => "the kernel's BPF statistics were left off (--no-bpf-stats)",
            NoCounts::Refused => "the kernel's BPF statistics could not be turned on",
            NoCounts::Unreadable => "the kernel's BPF statistics could not be read",
        }
    }
}

/// The facts a session's cost is computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostInputs {
    pub probes: ProbeCounting,
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
    /// None without the kernel's counts; `probes_unknown` then says why.
    pub probes: Option<ProbeCost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes_unknown: Option<NoCounts>,
}

/// What the probes cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeCost {
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
    /// Time inside all our programs, measured by the kernel.
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
            probes: match &inputs.probes {
                ProbeCounting::Counted(counts) => {
                    Some(ProbeCost::new(counts, inputs.program_cpu_ns))
                }
                ProbeCounting::Unknown(_) => None,
            },
            probes_unknown: match inputs.probes {
                ProbeCounting::Counted(_) => None,
                ProbeCounting::Unknown(why) => Some(why),
            },
        }
    }

    /// The line `tracer record` ends with.
    pub fn text_line(&self) -> String {
        let tracer = format!("tracer {:.1} % of a core", self.tracer_core_pct);
        let Some(p) = &self.probes else {
            let why = self.probes_unknown.map_or("", NoCounts::says);
            return format!("cost: probe hits unknown ({why}); {tracer}");
        };
        let hits = format!(
            "{} probe hits/s (uprobes {}, tracepoints {})",
            grouped(p.hits_per_s),
            grouped(p.uprobe_hits_per_s),
            grouped(p.tracepoint_hits_per_s)
        );
        let share = match (p.probes_pct, p.run_pct, p.trap_pct) {
            (Some(all), Some(run), Some(trap)) => format!(
                "probes ~{all:.1} % of the program's CPU ({run:.1} % in our programs, \
                 ~{trap:.1} % estimated trap cost)"
            ),
            _ => "probes' share of the program's CPU unknown (no CPU time of a traced \
                  thread recorded)"
                .to_string(),
        };
        format!("cost: {hits}; {share}; {tracer}")
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

    fn counts() -> ProbeCounts {
        let runs = |hits, run_ns| ProgramRuns { hits, run_ns };
        ProbeCounts {
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

    /// Uprobes and tracepoints are counted apart, every program's time counts, the trap
    /// is estimated for uprobe hits only, and shares are of the program's CPU.
    #[test]
    fn hits_split_by_kind_and_shares_of_the_program() {
        let cost = RunCost::new(&CostInputs {
            probes: ProbeCounting::Counted(counts()),
            program_cpu_ns: 400_000_000,
            tracer_cpu_ns: 500_000_000,
            session_ns: 2_500_000_000,
        });
        assert_eq!(cost.tracer_core_pct, 20.0);
        let p = cost.probes.as_ref().unwrap();
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
            "cost: 21,050 probe hits/s (uprobes 20,050, tracepoints 1,000); probes ~7.1 % of \
             the program's CPU (3.2 % in our programs, ~3.9 % estimated trap cost); tracer \
             20.0 % of a core"
        );
    }

    /// Without the program's CPU there is no share, and without the kernel's statistics
    /// no hits; the tracer's CPU is still told.
    #[test]
    fn what_is_unknown_is_said_so() {
        let no_program = RunCost::new(&CostInputs {
            probes: ProbeCounting::Counted(counts()),
            program_cpu_ns: 0,
            tracer_cpu_ns: 1_000,
            session_ns: 0,
        });
        assert_eq!(no_program.tracer_core_pct, 0.0);
        let p = no_program.probes.as_ref().unwrap();
        assert_eq!((p.probes_pct, p.run_pct, p.trap_pct), (None, None, None));
        assert!(no_program
            .text_line()
            .contains("share of the program's CPU unknown"));
        let no_stats = RunCost::new(&no_stats_inputs());
        assert!(no_stats.probes.is_none());
        assert_eq!(no_stats.probes_unknown, Some(NoCounts::Refused));
        assert_eq!(
            no_stats.text_line(),
            "cost: probe hits unknown (the kernel's BPF statistics could not be turned on); \
             tracer 25.0 % of a core"
        );
        let off = RunCost::new(&CostInputs {
            probes: ProbeCounting::Unknown(NoCounts::Off),
            ..no_stats_inputs()
        });
        assert!(off.text_line().contains("left off (--no-bpf-stats)"));
        let json = serde_json::to_value(&off).unwrap();
        assert_eq!(json["probes"], serde_json::Value::Null);
        assert_eq!(json["probes_unknown"], "off");
        // With counts, no reason.
        let counted = serde_json::to_value(&no_program).unwrap();
        assert!(counted.get("probes_unknown").is_none());
    }

    fn no_stats_inputs() -> CostInputs {
        CostInputs {
            probes: ProbeCounting::Unknown(NoCounts::Refused),
            program_cpu_ns: 1,
            tracer_cpu_ns: 1,
            session_ns: 4,
        }
    }

    #[test]
    fn rates_are_grouped_by_thousands() {
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.4), "999");
        assert_eq!(grouped(1_000.0), "1,000");
        assert_eq!(grouped(1_234_567.0), "1,234,567");
    }
}
