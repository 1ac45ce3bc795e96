//! Critical paths of real MPI and PVM programs whose answer is known by construction
//! (CPU spins of known length in named procedures, known dependency structure).
//!
//! Tolerance: 5 % of the expected critical path or 10 ms, whichever is larger. The
//! programs also run MPI_Init, loading and the launcher's start-up, which the
//! construction does not count; on this machine that adds about 3-8 ms to a path.
//!
//! Every test also checks that the profile computed online by `tracer record` equals the
//! one `tracer analyze` computes from the recording of the same run.

use serde_json::Value;
use tracer_tests::profile::{
    all_matched, assert_diagnosis, assert_near, length, ms, proc_row, profile, profile_with,
};
use tracer_tests::{mpich, openmpi, pvm, tracer};

fn pipeline(launch: fn(usize, &str, &[&str]) -> Vec<String>, tag: &str) {
    // 4 ranks, 5 items, rank 1 slow (60 ms), the others 20 ms.
    let (n, items, s, f) = (4.0, 5.0, 60.0, 20.0);
    let run = profile(
        tag,
        &["stage_*"],
        &launch(4, "mpi_pipeline", &["5", "1", "60", "20"]),
    );
    let p = &run.online;
    all_matched(p);
    assert_eq!(p["messages"]["sent"], 15);
    assert_near(
        "critical path",
        length(p),
        (n - 1.0) * f + s + (items - 1.0) * s,
    );
    let slow = proc_row(p, "stage_slow");
    let fast = proc_row(p, "stage_fast");
    assert_near("stage_slow on the path", ms(&slow["cp_ns"]), items * s);
    assert_near("stage_fast on the path", ms(&fast["cp_ns"]), (n - 1.0) * f);
    assert_near("stage_fast CPU", ms(&fast["cpu_ns"]), (n - 1.0) * items * f);
    assert_near(
        "zeroing stage_slow",
        ms(&slow["zeroing_ns"]),
        items * s - (items - 1.0) * f,
    );
    assert_eq!(
        p["procedures"][0]["name"], "stage_slow",
        "sorted by critical-path time"
    );
    // The recorded path runs through rank 1 for all its slow items.
    let top = &run.report["processes"][0];
    assert_eq!(top["rank"], 1, "{top}");
    assert_near("rank 1 on the path", ms(&top["cp_ns"]), items * s);
    let slow_work: Vec<&Value> = run.report["activities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["procedure"] == "stage_slow")
        .collect();
    assert!(
        slow_work.iter().all(|a| a["pid"] == top["pid"]),
        "{slow_work:?}"
    );
    assert_diagnosis(
        &run.report,
        &["rank 1", "stage_slow", "sequential bottleneck"],
        &[],
    );
}

#[test]
fn pipeline_openmpi() {
    pipeline(openmpi, "pipe-ompi");
}

#[test]
fn pipeline_mpich() {
    pipeline(mpich, "pipe-mpich");
}

/// The procedure with the most CPU time is not on the critical path, and zeroing the one
/// that is gains much less than its share because a second path is close behind.
fn imbalance(launch: fn(usize, &str, &[&str]) -> Vec<String>, tag: &str) {
    let (iters, a, b, n) = (4.0, 60.0, 50.0, 4.0);
    let run = profile(
        tag,
        &["heavy", "light"],
        &launch(4, "mpi_imbalance", &["4", "60", "50"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), iters * a);
    let heavy = proc_row(p, "heavy");
    let light = proc_row(p, "light");
    assert_near("heavy on the path", ms(&heavy["cp_ns"]), iters * a);
    assert_eq!(light["cp_ns"], 0, "light is never on the path");
    assert_near("light CPU", ms(&light["cpu_ns"]), (n - 1.0) * iters * b);
    assert!(
        light["cpu_ns"].as_u64() > heavy["cpu_ns"].as_u64(),
        "light has more CPU time"
    );
    assert_near("zeroing heavy", ms(&heavy["zeroing_ns"]), iters * (a - b));
    assert_eq!(light["zeroing_ns"], 0);
    assert_eq!(
        p["messages"]["collectives"],
        4 * 4,
        "every rank's Allreduce exits"
    );
    assert_eq!(p["messages"]["collectives_incomplete"], 0);
    assert_diagnosis(&run.report, &["heavy"], &["light"]);
}

#[test]
fn imbalance_openmpi() {
    imbalance(openmpi, "imb-ompi");
}

#[test]
fn imbalance_mpich() {
    imbalance(mpich, "imb-mpich");
}

#[test]
fn manager_worker_with_wildcard_receives() {
    let (rounds, t, n) = (4.0, 30.0, 4.0);
    let run = profile(
        "manager",
        &["*task"],
        &openmpi(4, "mpi_manager", &["4", "30"]),
    );
    let p = &run.online;
    all_matched(p);
    assert_near("critical path", length(p), rounds * 2.0 * t);
    let slow = proc_row(p, "slow_task");
    let task = proc_row(p, "task");
    assert_near(
        "slow_task on the path",
        ms(&slow["cp_ns"]),
        rounds * 2.0 * t,
    );
    assert_eq!(task["cp_ns"], 0);
    assert_near("task CPU", ms(&task["cpu_ns"]), (n - 2.0) * rounds * t);
    assert_near("zeroing slow_task", ms(&slow["zeroing_ns"]), rounds * t);
    assert_diagnosis(&run.report, &["slow_task"], &["task"]);
}

#[test]
fn nonblocking_overlap() {
    let (rounds, a, b) = (6.0, 30.0, 50.0);
    let run = profile(
        "overlap",
        &["overlap", "produce"],
        &mpich(2, "mpi_overlap", &["6", "30", "50"]),
    );
    let p = &run.online;
    all_matched(p);
    assert_near("critical path", length(p), rounds * b);
    let produce = proc_row(p, "produce");
    let overlap = proc_row(p, "overlap");
    assert_near("produce on the path", ms(&produce["cp_ns"]), rounds * b);
    assert_eq!(overlap["cp_ns"], 0, "overlapped work is hidden");
    assert_near("overlap CPU", ms(&overlap["cpu_ns"]), rounds * a);
    assert_near(
        "zeroing produce",
        ms(&produce["zeroing_ns"]),
        rounds * (b - a),
    );
    assert_eq!(overlap["zeroing_ns"], 0);
    assert_diagnosis(&run.report, &["produce"], &["overlap"]);
}

#[test]
fn pvm_manager_worker_path() {
    let (workers, rounds, t) = (3, 4.0, 40.0);
    let cmd = pvm(&[&workers.to_string(), "4", "40"]);
    let run = profile("pvm", &["pvm_task"], &cmd);
    let p = &run.online;
    all_matched(p);
    // 4 rounds x 3 requests and replies, 3 multicast copies, 3 psend/precv.
    assert_eq!(p["messages"]["matched"], 4 * 3 * 2 + 3 + 3);
    // The path is four rounds of pvm_task after the start-up work of the worker that
    // started slowest, as the tracer counts it (from its exec record, outside
    // pvm_mytid), a few us a round, and the master's exit (its C library's exit
    // handlers after pvm_exit: up to a ms). The worker's own count of its start-up (CPU
    // time since its thread began, outside pvm_mytid) also has what pvmd's fork ran
    // before the exec, 0-4 ms here: so the path is at most rounds x MS plus that count
    // and 2 ms, and at least rounds x MS.
    let startup_us: f64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("workers' start-up work max_us "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no start-up work printed: {:?}", run.stdout));
    let (least, most) = (rounds * t, rounds * t + startup_us / 1000.0 + 2.0);
    let got = length(p);
    eprintln!("critical path {got:.3} ms; want {least:.3} to {most:.3}");
    assert!(
        (least..=most).contains(&got),
        "critical path {got:.3} ms, want {least:.3} to {most:.3}"
    );
    let task = proc_row(p, "pvm_task");
    assert_near("pvm_task on the path", ms(&task["cp_ns"]), rounds * t);
    assert_near(
        "pvm_task CPU",
        ms(&task["cpu_ns"]),
        workers as f64 * rounds * t,
    );
}

#[test]
fn live_samples_while_the_program_runs() {
    let out = std::process::Command::new(tracer())
        .args(["record", "--interval", "0.25", "--func", "compute", "--"])
        .args(openmpi(2, "mpi_busy", &["12", "100"]))
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // Samples of the program's path: those taken before the ranks' first MPI call are
    // the launcher's, and say so.
    let samples: Vec<f64> = err
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("critical path"))
        .filter(|l| !l.contains("(all traced threads"))
        .map(|l| {
            l.split("critical path")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(samples.len() >= 3, "only {} samples:\n{err}", samples.len());
    assert!(
        samples.windows(2).all(|w| w[0] <= w[1]),
        "the path only grows: {samples:?}"
    );
    assert!(err.contains("compute"), "{err}");
}

#[test]
fn attaching_mid_run_measures_the_traced_interval() {
    use std::process::{Command, Stdio};
    let cmd = openmpi(4, "mpi_sleeper", &["6"]);
    let mut job = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let dir = std::env::temp_dir().join(format!("tracer-mid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("p.json");
    let out = Command::new(tracer())
        .args([
            "record",
            "-q",
            "--duration",
            "1.5",
            "--pid",
            &job.id().to_string(),
            "--profile-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    job.wait().unwrap();
    let p: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // The path covers the traced 1.5 s only (the job ran 2 s before), and on 2 CPUs
    // 4 ranks spinning 1 ms per step get half a CPU each: a few hundred ms of work.
    let len = length(&p);
    assert!(
        len > 100.0 && len < 1500.0,
        "critical path {len} ms for 1.5 s of tracing"
    );
    // Only messages that cross the start or the end of tracing can be unmatched. The
    // probes are attached one library call at a time while the ring runs, so a few
    // rounds can be half seen (9 of 1,774 once on a loaded machine): at most 1 %.
    let m = &p["messages"];
    let matched = m["matched"].as_u64().unwrap();
    assert!(matched > 200, "{m}");
    assert!(m["unmatched"].as_u64().unwrap() * 100 <= matched, "{m}");
}

/// Rooted collectives: a Bcast makes every rank wait for the root's work, a Reduce makes
/// the root wait for the slowest rank.
fn fanout(launch: fn(usize, &str, &[&str]) -> Vec<String>, tag: &str) {
    fanout_recorded(launch, tag, &[]);
}

/// [`fanout`] with more `tracer record` arguments.
fn fanout_recorded(launch: fn(usize, &str, &[&str]) -> Vec<String>, tag: &str, record: &[&str]) {
    let (iters, p_ms, w, s) = (4.0, 20.0, 30.0, 50.0);
    let run = profile_with(
        tag,
        record,
        &["prepare", "work*"],
        &launch(4, "mpi_fanout", &["4", "20", "30", "50"]),
        &[],
    );
    let p = &run.online;
    assert_near("critical path", length(p), iters * (p_ms + s));
    let prepare = proc_row(p, "prepare");
    let slow = proc_row(p, "work_slow");
    let work = proc_row(p, "work");
    assert_near("prepare on the path", ms(&prepare["cp_ns"]), iters * p_ms);
    assert_near("work_slow on the path", ms(&slow["cp_ns"]), iters * s);
    assert_eq!(work["cp_ns"], 0);
    assert_near("work CPU", ms(&work["cpu_ns"]), 2.0 * iters * w);
    assert_near(
        "zeroing work_slow",
        ms(&slow["zeroing_ns"]),
        iters * (s - w),
    );
    assert_near("zeroing prepare", ms(&prepare["zeroing_ns"]), iters * p_ms);
    assert_eq!(p["messages"]["collectives"], 4 * 4 * 2);
    assert_eq!(p["messages"]["collectives_incomplete"], 0);
    assert_diagnosis(&run.report, &["work_slow"], &["work"]);
}

#[test]
fn fanout_openmpi() {
    fanout(openmpi, "fan-ompi");
}

#[test]
fn fanout_mpich() {
    fanout(mpich, "fan-mpich");
}

/// The profile computed from the recording once tracing ends is the one computed live:
/// the same known answer.
#[test]
fn fanout_analyzed_after_tracing_openmpi() {
    fanout_recorded(openmpi, "fan-after", &["--analyze-after"]);
}
