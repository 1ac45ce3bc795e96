//! What a session cost (issue 43): the probe hits the kernel counted, the probes' share of
//! the program's CPU, the tracer's CPU, in the summary's `cost` and on `record`'s last
//! lines; and a summary of the recording, offline, without it.

use std::process::Command;

use serde_json::Value;
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

/// `mpi_busy` enters `compute` exactly ITERS times per rank: with `--func compute` its
/// entry and return probes run exactly 2 x ITERS x RANKS times, and nothing else runs
/// them (they sit in this checkout's own copy of the program, and uprobes belong to a
/// file). The call probes get no exact count: the MPI library's, and the C library's
/// pthread_create and pthread_join probes, fire in every process that maps those files,
/// untraced ones too, so other programs on the machine add hits; each completed call
/// adds at least its entry and its return.
#[test]
fn cost_counts_the_probe_hits_and_shares_the_program_cpu() {
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-cost", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec.trace");
    let sum = dir.join("summary.json");
    let output = Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(&rec)
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
    let cost = &summary["cost"];
    let probes = &cost["probes"];
    let families = &probes["families"];

    // Exact: the procedure probes.
    assert_eq!(u(&families["procedures"]["hits"]), 2 * ITERS * RANKS);
    // At least an entry and a return per completed call.
    let completed: u64 = summary["calls"].as_object().unwrap().values().map(u).sum();
    assert!(completed >= ITERS * RANKS * 2, "{}", summary["calls"]);
    assert!(u(&families["calls"]["hits"]) >= 2 * completed, "{probes}");
    // Launching processes runs the fork, exec and exit tracepoints; ranks switch.
    assert!(u(&families["processes"]["hits"]) > 0, "{probes}");
    assert!(u(&families["scheduler"]["hits"]) > 0, "{probes}");

    // The totals are the families', split by where they fire.
    let sum_of = |uprobes: bool| -> u64 {
        families
            .as_object()
            .unwrap()
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
    let run_ns: u64 = families
        .as_object()
        .unwrap()
        .values()
        .map(|runs| u(&runs["run_ns"]))
        .sum();
    assert_eq!(u(&probes["run_ns"]), run_ns);
    assert!(run_ns > 0);
    let counted_s = u(&probes["counted_ns"]) as f64 / 1e9;
    let rate = (uprobe_hits + tracepoint_hits) as f64 / counted_s;
    assert!((f(&probes["hits_per_s"]) - rate).abs() <= 1.0, "{probes}");

    // The trap is an estimate per uprobe hit; the shares are of the ranks' CPU, which
    // is at least what `compute` spins.
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

    // The tracer's CPU over the session.
    let tracer_cpu_ns = u(&summary["tracer_cpu_ns"]);
    assert!(tracer_cpu_ns > 0);
    let session_ns = u(&cost["session_ns"]);
    assert!(session_ns >= u(&probes["counted_ns"]));
    let core = f(&cost["tracer_core_pct"]);
    let expected = tracer_cpu_ns as f64 * 100.0 / session_ns as f64;
    assert!(core > 0.0 && (core - expected).abs() <= 0.005, "{cost}");

    // The same figures, for people.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("cost: "))
        .unwrap_or_else(|| panic!("no cost line in:\n{stderr}"));
    assert!(line.contains(" probe hits/s (uprobes "), "{line}");
    assert!(
        line.contains(&format!("probes ~{share:.1} % of the program's CPU")),
        "{line}"
    );
    assert!(
        line.contains(&format!("tracer {core:.1} % of a core")),
        "{line}"
    );

    // A summary of the recording has no session, so no cost.
    let offline = Command::new(tracer())
        .args(["summary", "--json"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(offline.status.success());
    let offline: Value = serde_json::from_slice(&offline.stdout).unwrap();
    assert!(offline.get("cost").is_none(), "{offline}");
    assert_eq!(offline["functions"], summary["functions"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--no-bpf-stats` leaves the kernel's statistics off: no probe counts, and the reason,
/// in the JSON and on the line; the tracer's CPU is still measured.
#[test]
fn without_the_kernel_statistics_the_hits_are_unknown() {
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-cost-off", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sum = dir.join("summary.json");
    let output = Command::new(tracer())
        .args(["record", "--no-bpf-stats", "--summary-json"])
        .arg(&sum)
        .arg("--")
        .args(openmpi(RANKS as usize, "mpi_busy", &["2", "1"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    let cost = &summary["cost"];
    assert_eq!(cost["probes"], Value::Null, "{cost}");
    assert_eq!(cost["probes_unknown"], "off", "{cost}");
    assert!(f(&cost["tracer_core_pct"]) > 0.0, "{cost}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("cost: "))
        .unwrap_or_else(|| panic!("no cost line in:\n{stderr}"));
    assert!(
        line.starts_with(
            "cost: probe hits unknown (the kernel's BPF statistics were left off \
             (--no-bpf-stats)); tracer "
        ),
        "{line}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
