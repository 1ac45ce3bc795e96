//! Benchmark of the offline graph analyses on a large synthetic trace graph.
//!
//! One phase per process, so that the peak memory printed is that phase's:
//!
//! ```sh
//! cargo run --release -p tracer-analysis --example graph_bench -- build
//! cargo run --release -p tracer-analysis --example graph_bench -- cpm
//! cargo run --release -p tracer-analysis --example graph_bench -- search --k 100000
//! cargo run --release -p tracer-analysis --example graph_bench -- baseline --k 100 --budget-s 60
//! cargo run --release -p tracer-analysis --example graph_bench -- mbm --k 100000
//! cargo run --release -p tracer-analysis --example graph_bench -- suite
//! ```
//!
//! `suite` runs every step of docs/benchmarks.md, each in a process of its own.
//!
//! Options: `--arcs N` (default 10,000,000: the graph grows until it has N arcs),
//! `--threads P` (64), `--seed S` (1), `--k K` (100), `--budget-s T` (60: the baseline
//! stops after T seconds and extrapolates from the share of arcs it merged).
//!
//! Every phase but `build` first builds the graph (and the schedule) untimed, then
//! resets the kernel's peak-RSS mark (`/proc/self/clear_refs`, "5") so that
//! `phase_peak_mib` is the peak during the phase minus the resident size before it.
//! One line of `key=value` pairs is printed per measurement.

use std::collections::VecDeque;
use std::time::Instant;

use tracer_analysis::cpm::Schedule;
use tracer_analysis::kpaths::{k_longest_lengths_baseline_within, NearCriticalPaths};
use tracer_analysis::mbm::maximum_benefit;
use tracer_analysis::{ArcKind, Graph, GraphBuilder, Vertex, VertexId, NO_PROCEDURE};

const USAGE: &str =
    "usage: graph_bench build|cpm|search|baseline|mbm|suite [--arcs N] [--threads P] \
                     [--seed S] [--k K] [--budget-s SECS]";

/// Procedures the synthetic program arcs are attributed to (for the `mbm` phase).
const PROCEDURES: usize = 4;

struct Options {
    phase: String,
    arcs: usize,
    threads: usize,
    seed: u64,
    k: usize,
    budget_s: f64,
}

fn parse() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let phase = args.next().ok_or("no phase")?;
    if !["build", "cpm", "search", "baseline", "mbm", "suite"].contains(&phase.as_str()) {
        return Err(format!("unknown phase {phase}"));
    }
    let mut o = Options {
        phase,
        arcs: 10_000_000,
        threads: 64,
        seed: 1,
        k: 100,
        budget_s: 60.0,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--arcs" => o.arcs = value.parse().map_err(|e| bad(&e))?,
            "--threads" => o.threads = value.parse().map_err(|e| bad(&e))?,
            "--seed" => o.seed = value.parse().map_err(|e| bad(&e))?,
            "--k" => o.k = value.parse().map_err(|e| bad(&e))?,
            "--budget-s" => o.budget_s = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.threads < 2 {
        return Err("--threads must be at least 2".into());
    }
    Ok(o)
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// A graph shaped like a message-passing trace, built as the recorder builds one (in
/// event order through [`GraphBuilder`]). Each event belongs to a random thread, which
/// worked 100 ns to 10 us since its previous event (in a random procedure context).
/// The event receives the oldest message waiting for its thread two times out of
/// three when there is one (a 0-weight dependency arc from the send); otherwise it
/// sends a message to another random thread half the time. Receiving is likelier than
/// sending, so few messages are in flight, as in a real run. Returns the graph and the
/// mean number of messages in flight.
fn synthetic(o: &Options) -> (Graph, f64) {
    let mut rng = Rng(o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut b = GraphBuilder::new();
    let contexts: Vec<_> = [vec![0], vec![0, 1], vec![2], vec![3]]
        .into_iter()
        .map(|procedures| b.context_of(&procedures))
        .collect();
    let mut last: Vec<Option<VertexId>> = vec![None; o.threads];
    let mut inbox: Vec<VecDeque<VertexId>> = vec![VecDeque::new(); o.threads];
    let (mut in_flight, mut in_flight_sum, mut events) = (0u64, 0u64, 0u64);
    let mut ts = 0u64;
    while b.arc_count() < o.arcs {
        let t = rng.below(o.threads as u64) as usize;
        ts += 1 + rng.below(1000);
        let v = b.add_vertex(Vertex {
            ts_ns: ts,
            tid: t as u32 + 1,
            label: 0,
        });
        if let Some(u) = last[t] {
            let context = match rng.below(8) {
                i @ 0..=3 => contexts[i as usize],
                _ => NO_PROCEDURE,
            };
            b.add_arc(u, v, 100 + rng.below(9_901), context, ArcKind::Program);
        }
        last[t] = Some(v);
        if !inbox[t].is_empty() && rng.below(3) < 2 {
            if let Some(from) = inbox[t].pop_front() {
                b.add_arc(from, v, 0, NO_PROCEDURE, ArcKind::Dependency);
                in_flight -= 1;
            }
        } else if rng.below(2) == 0 {
            let to = (t + 1 + rng.below(o.threads as u64 - 1) as usize) % o.threads;
            inbox[to].push_back(v);
            in_flight += 1;
        }
        in_flight_sum += in_flight;
        events += 1;
    }
    for v in last.into_iter().flatten() {
        b.mark_end(v);
    }
    (b.finish(), in_flight_sum as f64 / events.max(1) as f64)
}

/// A field of /proc/self/status in MiB (VmRSS, VmHWM).
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Starts a phase's memory measurement: returns freed heap memory to the kernel (else
/// the phase could reuse pages an earlier step touched and look free), resets the peak
/// to the current RSS and returns that RSS.
fn reset_peak() -> f64 {
    // SAFETY: malloc_trim only releases free memory of glibc's allocator, which is
    // Rust's allocator here; no Rust object is touched.
    unsafe {
        libc::malloc_trim(0);
    }
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("cannot reset the peak RSS ({e}): phase_peak_mib includes earlier phases");
    }
    status_mib("VmRSS")
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if o.phase == "suite" {
        if let Err(e) = suite(&o) {
            eprintln!("suite: {e}");
            std::process::exit(1);
        }
        return;
    }
    let rss_start = status_mib("VmRSS");
    let t = Instant::now();
    let (g, in_flight) = synthetic(&o);
    let build_s = t.elapsed().as_secs_f64();
    let common = format!(
        "vertices={} arcs={} threads={} seed={}",
        g.vertex_count(),
        g.arcs.len(),
        o.threads,
        o.seed
    );
    if o.phase == "build" {
        let peak = status_mib("VmHWM");
        println!(
            "phase=build {common} time_s={build_s:.3} peak_rss_mib={peak:.0} \
             phase_peak_mib={:.0} graph_heap_mib={:.0} mean_in_flight={in_flight:.1}",
            peak - rss_start,
            g.heap_bytes() as f64 / (1 << 20) as f64,
        );
        return;
    }
    let schedule = (o.phase != "cpm" && o.phase != "baseline").then(|| Schedule::new(&g));
    let mbm_paths = (o.phase == "mbm")
        .then(|| {
            schedule
                .as_ref()
                .map(|s| NearCriticalPaths::search(&g, s, o.k))
        })
        .flatten();
    let before = reset_peak();
    let t = Instant::now();
    let result = match (o.phase.as_str(), &schedule) {
        ("cpm", _) => {
            let s = Schedule::new(&g);
            format!("critical_length={}", s.length)
        }
        ("search", Some(s)) => {
            let found = NearCriticalPaths::search(&g, s, o.k);
            let arcs = if found.is_empty() {
                0
            } else {
                found.arcs(&g, 0).len()
            };
            let summary = lengths_summary(&found.lengths(), found.critical_length());
            format!("{summary} critical_arcs={arcs}")
        }
        ("mbm", Some(_)) => match &mbm_paths {
            Some(paths) => {
                let benefits = maximum_benefit(&g, paths, PROCEDURES);
                let list: Vec<String> = benefits
                    .iter()
                    .map(|b| {
                        let class = b.class.map_or("outside".to_string(), |p| format!("p{p}"));
                        format!("{class}:{}/{}", b.on_critical_ns, b.mbm_ns)
                    })
                    .collect();
                format!("paths={} critical/mbm_ns={}", paths.len(), list.join(","))
            }
            None => "no paths".into(),
        },
        ("baseline", _) => {
            let budget = o.budget_s;
            let mut merged = 0;
            let started = Instant::now();
            let done = k_longest_lengths_baseline_within(&g, o.k, &mut |arcs| {
                merged = arcs;
                started.elapsed().as_secs_f64() < budget
            });
            match done {
                Some(lengths) => {
                    let critical = lengths.first().copied().unwrap_or(0);
                    format!("completed=true {}", lengths_summary(&lengths, critical))
                }
                None => {
                    let share = merged as f64 / g.arcs.len() as f64;
                    let elapsed = started.elapsed().as_secs_f64();
                    format!(
                        "completed=false arcs_merged={merged} share={share:.4} \
                         estimated_total_s={:.0}",
                        elapsed / share.max(f64::MIN_POSITIVE)
                    )
                }
            }
        }
        _ => unreachable!("phases are checked by parse"),
    };
    let time_s = t.elapsed().as_secs_f64();
    let peak = status_mib("VmHWM");
    let k = if o.phase == "cpm" {
        String::new()
    } else {
        format!(" k={}", o.k)
    };
    println!(
        "phase={}{k} {common} time_s={time_s:.3} rss_before_mib={before:.0} \
         peak_rss_mib={peak:.0} phase_peak_mib={:.0} {result}",
        o.phase,
        peak - before,
    );
}

/// Every step, each in a fresh process (so that its peak memory is its own), with the
/// same graph options.
fn suite(o: &Options) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut steps: Vec<(&str, usize)> = vec![("build", 0), ("cpm", 0)];
    steps.extend([1, 100, 10_000, 100_000].map(|k| ("search", k)));
    steps.extend([1, 100, 1_000, 10_000, 100_000].map(|k| ("baseline", k)));
    steps.push(("mbm", 100_000));
    for (phase, k) in steps {
        let status = std::process::Command::new(&exe)
            .arg(phase)
            .args(["--arcs", &o.arcs.to_string()])
            .args(["--threads", &o.threads.to_string()])
            .args(["--seed", &o.seed.to_string()])
            .args(["--k", &k.to_string()])
            .args(["--budget-s", &o.budget_s.to_string()])
            .status()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if !status.success() {
            return Err(format!("step {phase} k={k}: {status}"));
        }
    }
    Ok(())
}

/// Enough of the lengths to compare two algorithms: how many, the last (k-th) one and
/// its near-criticality, and their sum.
fn lengths_summary(lengths: &[u64], critical: u64) -> String {
    let last = lengths.last().copied().unwrap_or(0);
    let pct = if critical == 0 {
        100.0
    } else {
        last as f64 * 100.0 / critical as f64
    };
    let sum = lengths.iter().fold(0u64, |s, &l| s.wrapping_add(l));
    format!(
        "paths={} critical_length={critical} kth_length={last} kth_pct={pct:.4} lengths_sum={sum}",
        lengths.len()
    )
}
