//! What a session cost (issue 43): the probe hits, the probes' share of the program's
//! CPU, the tracer's CPU, in the summary's `cost` and on `record`'s last lines; counted
//! from the records by default, by the kernel with `--bpf-stats`; and a summary of the
//! recording, offline, without it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tracer_analysis::cost::ProbeFamily;
use tracer_tests::{openmpi, tracer};

const RANKS: u64 = 2;
const ITERS: u64 = 20;
/// Thread CPU time each `compute` spins.
const COMPUTE_MS: u64 = 2;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `tracer record EXTRA --func compute -o DIR/rec.trace --summary-json DIR/summary.json
/// -- mpi_busy ITERS COMPUTE_MS` on RANKS ranks: its output and summary.
fn record_mpi_busy(dir: &Path, extra: &[&str]) -> (Output, Value) {
    std::fs::create_dir_all(dir).unwrap();
    let sum = dir.join("summary.json");
    let output = Command::new(tracer())
        .arg("record")
        .args(extra)
        .arg("-o")
        .arg(dir.join("rec.trace"))
        .arg("--summary-json")
        .arg(&sum)
        .args(["--func", "compute", "--"])
        .args(openmpi(
            RANKS as usize,
            "mpi_busy",
            &[&ITERS.to_string(), &COMPUTE_MS.to_string()],
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    assert_eq!(summary["events"]["lost"], 0);
    assert_eq!(u(&summary["functions"]["compute"]), ITERS * RANKS);
    (output, summary)
}

/// The `cost:` line of `record`'s output.
fn cost_line(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .find(|l| l.starts_with("cost: "))
        .unwrap_or_else(|| panic!("no cost line in:\n{stderr}"))
        .to_string()
}

/// What holds whatever counted the runs: the totals are the families', split by where
/// they fire; the rates are over the span counted; the trap is an estimate per uprobe
/// hit; the shares are of the ranks' CPU, which is at least what `compute` spins; the
/// tracer's CPU is over the session; the line says the same.
fn check_the_arithmetic(summary: &Value, line: &str) {
    let cost = &summary["cost"];
    let probes = &cost["probes"];
    let families = probes["families"].as_object().unwrap();
    let sum_of = |uprobes: bool| -> u64 {
        families
            .iter()
            .filter(|(name, _)| {
                let is_uprobe = ["calls", "procedures", "library_loaded"].contains(&name.as_str());
                is_uprobe == uprobes
            })
            .map(|(_, runs)| u(&runs["hits"]))
            .sum()
    };
    let uprobe_hits = u(&probes["uprobe_hits"]);
    let tracepoint_hits = u(&probes["tracepoint_hits"]);
    assert_eq!(uprobe_hits, sum_of(true));
    assert_eq!(tracepoint_hits, sum_of(false));
    let run_ns: u64 = families.values().map(|runs| u(&runs["run_ns"])).sum();
    assert_eq!(u(&probes["run_ns"]), run_ns);
    assert!(run_ns > 0);
    let counted_s = u(&probes["counted_ns"]) as f64 / 1e9;
    let rate = (uprobe_hits + tracepoint_hits) as f64 / counted_s;
    assert!((f(&probes["hits_per_s"]) - rate).abs() <= 1.0, "{probes}");

    let trap_ns = u(&probes["trap_ns"]);
    assert_eq!(trap_ns, uprobe_hits * u(&probes["trap_ns_per_uprobe_hit"]));
    let program_cpu_ns = u(&probes["program_cpu_ns"]);
    assert!(
        program_cpu_ns >= RANKS * ITERS * COMPUTE_MS * 1_000_000,
        "{probes}"
    );
    let share = f(&probes["probes_pct"]);
    assert!(share > 0.0 && share < 100.0, "{probes}");
    let parts = f(&probes["run_pct"]) + f(&probes["trap_pct"]);
    assert!((share - parts).abs() <= 0.011, "{probes}");
    let expected = (run_ns + trap_ns) as f64 * 100.0 / program_cpu_ns as f64;
    assert!(
        (share - expected).abs() <= 0.005,
        "{share} against {expected}"
    );

    let tracer_cpu_ns = u(&summary["tracer_cpu_ns"]);
    assert!(tracer_cpu_ns > 0);
    let session_ns = u(&cost["session_ns"]);
    assert!(session_ns >= u(&probes["counted_ns"]));
    let core = f(&cost["tracer_core_pct"]);
    let expected = tracer_cpu_ns as f64 * 100.0 / session_ns as f64;
    assert!(core > 0.0 && (core - expected).abs() <= 0.005, "{cost}");

    assert!(line.contains(" probe hits/s "), "{line}");
    assert!(
        line.contains(&format!("probes ~{share:.1} % of the program's CPU")),
        "{line}"
    );
    assert!(
        line.contains(&format!("tracer {core:.1} % of a core")),
        "{line}"
    );
}

/// By default the runs are counted from the records of the traced threads, so the calls
/// are exact too. `mpi_busy` enters `compute` exactly ITERS times per rank: its entry
/// and return probes run 2 x ITERS x RANKS times. Each rank makes, by construction,
/// MPI_Init, MPI_Comm_rank, MPI_Comm_size, ITERS MPI_Send and ITERS MPI_Recv, and
/// MPI_Finalize; the other probed calls (Open MPI's pthread_create and pthread_join, in
/// mpirun and the ranks) are not known by construction, but every one completes: each
/// call is its entry's run and its exit's. The run time is the hits times the family's
/// estimate.
#[test]
fn cost_counts_the_traced_programs_runs_from_its_records() {
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-cost", std::process::id()));
    let (output, summary) = record_mpi_busy(&dir, &[]);
    let probes = &summary["cost"]["probes"];
    assert_eq!(probes["source"], "records", "{probes}");
    let families = &probes["families"];

    let hits = |family: &str| u(&families[family]["hits"]);
    assert_eq!(hits("procedures"), 2 * ITERS * RANKS, "{probes}");
    let calls = summary["calls"].as_object().unwrap();
    let mpi: u64 = calls
        .iter()
        .filter(|(name, _)| name.starts_with("MPI_"))
        .map(|(_, n)| u(n))
        .sum();
    assert_eq!(mpi, RANKS * (4 + 2 * ITERS), "{}", summary["calls"]);
    let others: u64 = calls
        .iter()
        .filter(|(name, _)| !name.starts_with("MPI_"))
        .map(|(_, n)| u(n))
        .sum();
    assert_eq!(hits("calls"), 2 * (mpi + others), "{probes}");
    // Each rank and mpirun is executed, and its main thread exits.
    assert!(hits("processes") >= 2 * (RANKS + 1), "{probes}");
    assert!(hits("scheduler") > 0, "{probes}");
    for (family, name) in [
        (ProbeFamily::Calls, "calls"),
        (ProbeFamily::Procedures, "procedures"),
        (ProbeFamily::Processes, "processes"),
        (ProbeFamily::Scheduler, "scheduler"),
    ] {
        assert_eq!(
            u(&families[name]["run_ns"]),
            hits(name) * family.estimated_run_ns(),
            "{probes}"
        );
    }
    let line = cost_line(&output);
    assert!(
        line.contains(" probe hits/s in the traced program (uprobes "),
        "{line}"
    );
    assert!(line.contains(" % in our programs, estimated; "), "{line}");
    check_the_arithmetic(&summary, &line);

    // A summary of the recording has no session, so no cost.
    let offline = Command::new(tracer())
        .args(["summary", "--json"])
        .arg(dir.join("rec.trace"))
        .output()
        .unwrap();
    assert!(offline.status.success());
    let offline: Value = serde_json::from_slice(&offline.stdout).unwrap();
    assert!(offline.get("cost").is_none(), "{offline}");
    assert_eq!(offline["functions"], summary["functions"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--bpf-stats`: the kernel counts and times every run of our programs. The procedure
/// probes are still exact (they sit in this checkout's own copy of the program, and
/// uprobes belong to a file); the call probes fire in every process that maps the MPI
/// library or the C library, untraced ones too, so the calls get a lower bound: an
/// entry and a return per completed call.
#[test]
fn with_bpf_stats_the_kernel_measures_every_run() {
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-cost-kernel", std::process::id()));
    let (output, summary) = record_mpi_busy(&dir, &["--bpf-stats"]);
    let probes = &summary["cost"]["probes"];
    assert_eq!(probes["source"], "kernel", "{probes}");
    let families = &probes["families"];
    assert_eq!(
        u(&families["procedures"]["hits"]),
        2 * ITERS * RANKS,
        "{probes}"
    );
    let completed: u64 = summary["calls"].as_object().unwrap().values().map(u).sum();
    assert!(completed >= ITERS * RANKS * 2, "{}", summary["calls"]);
    assert!(u(&families["calls"]["hits"]) >= 2 * completed, "{probes}");
    assert!(u(&families["processes"]["hits"]) > 0, "{probes}");
    assert!(u(&families["scheduler"]["hits"]) > 0, "{probes}");
    let line = cost_line(&output);
    assert!(
        line.contains(" probe hits/s machine-wide (uprobes "),
        "{line}"
    );
    assert!(line.contains(" % in our programs, measured; "), "{line}");
    check_the_arithmetic(&summary, &line);
    std::fs::remove_dir_all(&dir).unwrap();
}
