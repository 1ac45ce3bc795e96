//! Every function's share of the critical path with nothing selected (issue 42): the
//! known-answer programs traced without `--func`, their planted functions found by the
//! sampled stacks alone (docs/sampled-attribution.md). Each planted function's
//! critical-path time (inclusive) is within 10 % of what the construction gives it (the
//! figure the `--func` tests of `critical_path`, `threads` and `report_html` check
//! against the same construction), or 3 ms, whichever is larger: the samples come 1 ms
//! of CPU apart (`--sample 999`), and a function's time is known to about a sample at
//! each end of each stretch of it. A function the construction keeps off the path gets
//! at most 2 % of it. The planted functions rank as the construction orders them, and
//! the report states the samples and how many unwound to their stack's root.

use serde_json::Value;
use tracer_tests::profile::length;
use tracer_tests::{openmpi, program, tracer};

/// Samples per second of a thread's CPU time in these runs.
const HZ: &str = "999";

/// A planted function and what the construction puts on the path.
struct Planted {
    name: &'static str,
    cp_ms: f64,
    /// What making it take no time gains, when the test checks it.
    zeroing_ms: Option<f64>,
}

/// The report's sampled section of `command` traced with no `--func`, the profile, and
/// the Hatchet export of the sampled stacks (CPU and critical-path time per call path).
struct Sampled {
    section: Value,
    profile: Value,
    hatchet: Value,
}

fn traced(tag: &str, command: &[String]) -> Sampled {
    let dir = std::env::temp_dir().join(format!("tracer-sp-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec.trace");
    let profile = dir.join("profile.json");
    let out = std::process::Command::new(tracer())
        .args(["record", "-q", "--sample", HZ, "-o"])
        .arg(&rec)
        .arg("--profile-json")
        .arg(&profile)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::process::Command::new(tracer())
        .args(["report", "--json"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let profile: Value = serde_json::from_slice(&std::fs::read(&profile).unwrap()).unwrap();
    let hatchet = dir.join("hatchet.json");
    let export = std::process::Command::new(tracer())
        .args(["export", "--format", "hatchet", "-o"])
        .arg(&hatchet)
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let hatchet: Value = serde_json::from_slice(&std::fs::read(&hatchet).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    Sampled {
        section: report["sampled"].clone(),
        profile,
        hatchet,
    }
}

fn function<'a>(section: &'a Value, name: &str) -> Option<&'a Value> {
    function_in(&section["functions"], name)
}

fn ms_of(v: &Value) -> f64 {
    v.as_u64().unwrap_or(0) as f64 / 1e6
}

fn near(what: &str, got: f64, want: f64) {
    let tolerance = (want * 0.10).max(3.0);
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got:.1} ms, construction {want:.1} ms (tolerance {tolerance:.1} ms)"
    );
}

/// The checks every program gets: `planted` in this order by critical-path time, each
/// near its construction; `off_path` functions (when sampled at all) nearly off the path.
fn check(run: &Sampled, planted: &[Planted], off_path: &[&str]) {
    let s = &run.section;
    assert!(s.is_object(), "no sampled section: {s}");
    let samples = s["samples"].as_u64().unwrap();
    let complete = s["complete"].as_u64().unwrap();
    assert!(samples > 100, "{samples} samples");
    // Issue 42 asks for 95 %. With 8 KiB of stack copied the 4-rank Open MPI fan-out
    // gave 92.5-96.1 % (mpirun's start-up and MPI_Init ran out of stack bytes); with 16
    // KiB these jobs unwind 96.9-98.6 % (docs/sampling.md, "Figures").
    assert!(
        complete * 100 >= samples * 95,
        "{complete} of {samples} samples unwound to their root"
    );
    let path_ms = length(&run.profile);
    let mut ranked = Vec::new();
    for p in planted {
        let f = function(s, p.name).unwrap_or_else(|| panic!("{} not sampled: {s}", p.name));
        near(
            &format!("{} on the path ({} samples)", p.name, f["samples"]),
            ms_of(&f["cp_ns"]),
            p.cp_ms,
        );
        if let Some(z) = p.zeroing_ms {
            near(&format!("zeroing {}", p.name), ms_of(&f["zeroing_ns"]), z);
        }
        ranked.push((f["cp_ns"].as_u64().unwrap(), p.name));
    }
    let order: Vec<&str> = planted.iter().map(|p| p.name).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let by_cp: Vec<&str> = ranked.iter().map(|r| r.1).collect();
    assert_eq!(by_cp, order, "ranked by critical-path time");
    for name in off_path {
        if let Some(f) = function(s, name) {
            let cp = ms_of(&f["cp_ns"]);
            assert!(
                cp <= path_ms * 0.02,
                "{name} has {cp:.1} ms of a {path_ms:.1} ms path: {f}"
            );
            assert!(f["cpu_ns"].as_u64().unwrap() > 0, "{f}");
        }
    }
    check_live(run, s, planted);
}

/// The live profile (`--profile-json`) read the same samples as the report and followed
/// each planted function on the path: within the same tolerance of the construction, as
/// the online engine estimates it without a graph (docs/sampled-attribution.md, "Live").
fn check_live(run: &Sampled, section: &Value, planted: &[Planted]) {
    let live = &run.profile;
    eprintln!("live sampled functions: {:#}", live["sampled_functions"]);
    assert_eq!(live["samples"]["samples"], section["samples"], "{live}");
    assert_eq!(live["samples"]["complete"], section["complete"], "{live}");
    for p in planted {
        let f = function_in(&live["sampled_functions"], p.name)
            .unwrap_or_else(|| panic!("{} not followed live: {live}", p.name));
        near(
            &format!("{} on the live path", p.name),
            ms_of(&f["cp_ns"]),
            p.cp_ms,
        );
    }
}

fn function_in<'a>(rows: &'a Value, name: &str) -> Option<&'a Value> {
    rows.as_array()?.iter().find(|f| f["name"] == name)
}

/// 4 ranks, 5 items, rank 1 slow (60 ms), the others 20 ms (tests/programs/mpi_pipeline.c).
#[test]
fn pipeline_without_func() {
    let (n, items, slow, fast) = (4.0, 5.0, 60.0, 20.0);
    let run = traced("pipe", &openmpi(4, "mpi_pipeline", &["5", "1", "60", "20"]));
    check(
        &run,
        &[
            Planted {
                name: "stage_slow",
                cp_ms: items * slow,
                zeroing_ms: Some(items * slow - (items - 1.0) * fast),
            },
            Planted {
                name: "stage_fast",
                cp_ms: (n - 1.0) * fast,
                zeroing_ms: None,
            },
        ],
        &[],
    );
}

/// `light` has more CPU time, `heavy` is the path (tests/programs/mpi_imbalance.c). The
/// report lists functions by critical-path time, so `light` (none) may not be among
/// them: its CPU time is read from the Hatchet export of the same sampled stacks.
#[test]
fn imbalance_without_func() {
    let (iters, a, b) = (4.0, 60.0, 50.0);
    let run = traced("imb", &openmpi(4, "mpi_imbalance", &["4", "60", "50"]));
    check(
        &run,
        &[Planted {
            name: "heavy",
            cp_ms: iters * a,
            zeroing_ms: Some(iters * (a - b)),
        }],
        &["light"],
    );
    let cpu = |name: &str| -> f64 {
        fn walk(node: &Value, name: &str, sum: &mut f64) {
            if node["frame"]["name"] == name {
                *sum += node["metrics"]["time (inc)"].as_f64().unwrap_or(0.0) / 1e6;
                return;
            }
            for child in node["children"].as_array().into_iter().flatten() {
                walk(child, name, sum);
            }
        }
        let mut sum = 0.0;
        for root in run.hatchet.as_array().unwrap() {
            walk(root, name, &mut sum);
        }
        sum
    };
    let (heavy, light) = (cpu("heavy"), cpu("light"));
    near("heavy's CPU", heavy, iters * a);
    near("light's CPU (3 ranks)", light, 3.0 * iters * b);
}

/// Rooted collectives (tests/programs/mpi_fanout.c).
#[test]
fn fanout_without_func() {
    let (iters, p, s) = (4.0, 20.0, 50.0);
    let run = traced("fan", &openmpi(4, "mpi_fanout", &["4", "20", "30", "50"]));
    check(
        &run,
        &[
            Planted {
                name: "work_slow",
                cp_ms: iters * s,
                zeroing_ms: None,
            },
            Planted {
                name: "prepare",
                cp_ms: iters * p,
                zeroing_ms: None,
            },
        ],
        &["work"],
    );
}

/// MPI + threads: each round's slow thread is the path (tests/programs/hybrid_mpi_threads.c).
#[test]
fn hybrid_without_func() {
    let (rounds, l, w) = (5.0, 40.0, 10.0);
    let run = traced(
        "hyb",
        &openmpi(2, "hybrid_mpi_threads", &["2", "5", "40", "10", "-1"]),
    );
    check(
        &run,
        &[Planted {
            name: "thread_slow",
            cp_ms: rounds * l,
            zeroing_ms: Some(rounds * (l - w)),
        }],
        &["thread_work"],
    );
}

/// Fork/join threads (tests/programs/threads_forkjoin.c).
#[test]
fn forkjoin_without_func() {
    let (stages, l, p) = (5.0, 40.0, 10.0);
    let run = traced(
        "fj",
        &[
            program("threads_forkjoin"),
            "5".into(),
            "3".into(),
            "40".into(),
            "10".into(),
            "10".into(),
        ],
    );
    check(
        &run,
        &[
            Planted {
                name: "stage_slow",
                cp_ms: stages * l,
                zeroing_ms: Some(stages * (l - 10.0)),
            },
            Planted {
                name: "serial_part",
                cp_ms: stages * p,
                zeroing_ms: None,
            },
        ],
        &["stage_work"],
    );
}
