//! Critical paths through shared-memory synchronization: condition variables, barriers,
//! mutexes, fork/join, OpenMP (GCC's libgomp and LLVM's libomp) and MPI ranks with
//! threads. Every program spins known CPU
//! times in named procedures (tests/programs/*.c derive the expected values in their
//! headers); waiting threads block in futex waits, so the path crosses threads only
//! through wakeups, creation and joins. Tolerance: 5 % or 10 ms, whichever is larger.
//! Every run also checks online == offline == report (see `tracer_tests::profile`).

use std::collections::BTreeMap;

use tracer_analysis::records::Record;
use tracer_tests::profile::{assert_near, length, ms, proc_row, profile, profile_with};
use tracer_tests::{mpich, openmpi, program, record};

/// Expected share on the path and zeroing gain of a procedure, in ms.
fn assert_procedure(p: &serde_json::Value, name: &str, share: f64, zeroing: f64) {
    let row = proc_row(p, name);
    assert_near(&format!("{name} on the path"), ms(&row["cp_ns"]), share);
    assert_near(&format!("zeroing {name}"), ms(&row["zeroing_ns"]), zeroing);
}

fn args(prog: &str, a: &[&str]) -> Vec<String> {
    std::iter::once(program(prog))
        .chain(a.iter().map(|s| s.to_string()))
        .collect()
}

#[test]
fn producer_consumer_over_a_condition_variable() {
    // 10 items, produce 30 ms, consume 20 ms: the consumer waits for every item.
    let run = profile(
        "condvar",
        &["produce", "consume"],
        &args("threads_condvar", &["10", "30", "20"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 320.0);
    assert_procedure(p, "produce", 300.0, 120.0);
    assert_procedure(p, "consume", 20.0, 20.0);
}

#[test]
fn barrier_with_one_slow_thread() {
    // 4 threads, 8 rounds; thread 0 runs slow_step (30 ms), the others fast_step (10).
    let run = profile(
        "barrier",
        &["slow_step", "fast_step"],
        &args("threads_barrier", &["4", "8", "30", "10", "0"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 240.0);
    assert_procedure(p, "slow_step", 240.0, 160.0);
    assert_procedure(p, "fast_step", 0.0, 0.0);
}

#[test]
fn barrier_with_a_rotating_slow_thread() {
    // The slow thread rotates: no single thread's own work reaches the path's length
    // (120 ms at most), so the path must cross the barrier's wakeups.
    let run = profile(
        "barrier-rot",
        &["slow_step", "fast_step"],
        &args("threads_barrier", &["4", "8", "30", "10", "1"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 240.0);
    assert_procedure(p, "slow_step", 240.0, 180.0);
}

#[test]
fn contended_mutex_serializes_the_critical_sections() {
    // 4 threads x 4 rounds of 10 ms outside and 20 ms inside one mutex; every hand-off
    // but the first blocks, so the futex wakes chain all 16 critical sections.
    let run = profile(
        "mutex",
        &["parallel_part", "critical_section"],
        &args("threads_mutex", &["4", "4", "10", "20", "0"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 330.0);
    assert_procedure(p, "critical_section", 320.0, 290.0);
    assert_procedure(p, "parallel_part", 10.0, 10.0);
}

/// A join orders the joiner after the joined thread even when it does not block: the
/// thread had exited already (pthread_join), or a try-join found it done
/// (pthread_tryjoin_np). No futex wakes main, so only the join probes see it.
fn join_without_blocking(mode: &str) {
    let run = profile(
        &format!("join-{mode}"),
        &["slow_work", "fast_work", "serial_work"],
        &args("threads_join", &[mode, "200", "100", "50"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 250.0);
    assert_procedure(p, "slow_work", 200.0, 150.0);
    assert_procedure(p, "serial_work", 50.0, 50.0);
    assert_procedure(p, "fast_work", 0.0, 0.0);
    // The construction held: no join waited, so no exit woke main.
    assert_eq!(p["sync"]["joins"], 2, "{}", p["sync"]);
    assert_eq!(p["sync"]["exit_wakeups"], 0, "{}", p["sync"]);
}

#[test]
fn join_of_a_thread_that_exited_already() {
    join_without_blocking("join");
}

#[test]
fn try_join_that_finds_the_thread_done() {
    join_without_blocking("try");
}

/// With --locks, a semaphore wait that finds its token depends on the post that gave
/// it, although it never blocks; without, nothing shows the dependency (the path is the
/// producer's alone).
#[test]
fn semaphore_post_taken_without_blocking() {
    let command = args("threads_semaphore", &["100", "50"]);
    let run = profile_with("sem", &["--locks"], &["produce", "consume"], &command, &[]);
    let p = &run.online;
    assert_near("critical path", length(p), 150.0);
    assert_procedure(p, "produce", 100.0, 100.0);
    assert_procedure(p, "consume", 50.0, 50.0);
    assert_eq!(p["sync"]["sem_posts"], 1, "{}", p["sync"]);
    let run = profile("sem-unprobed", &["produce", "consume"], &command);
    assert_near("critical path without --locks", length(&run.online), 100.0);
    assert_eq!(run.online["sync"]["sem_posts"], 0);
}

#[test]
fn fork_join_pipeline() {
    // 5 stages of 3 workers (one slow: 40 ms, the others 10) and a 10 ms serial part.
    let run = profile(
        "forkjoin",
        &["stage_slow", "stage_work", "serial_part"],
        &args("threads_forkjoin", &["5", "3", "40", "10", "10"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 250.0);
    assert_procedure(p, "stage_slow", 200.0, 150.0);
    assert_procedure(p, "serial_part", 50.0, 50.0);
    assert_procedure(p, "stage_work", 0.0, 0.0);
}

#[test]
fn openmp_parallel_for_with_one_slow_iteration() {
    // libgomp, 3 threads, static schedule: 12 iterations of 5 ms, one of 40 ms, 6 times.
    let run = profile_with(
        "omp",
        &[],
        &["slow_iteration", "iteration"],
        &args("omp_slow_iteration", &["12", "6", "5", "40"]),
        &[
            ("OMP_NUM_THREADS", "3"),
            ("OMP_WAIT_POLICY", "passive"),
            ("GOMP_SPINCOUNT", "0"),
        ],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 330.0);
    assert_procedure(p, "slow_iteration", 240.0, 210.0);
    assert_procedure(p, "iteration", 90.0, 90.0);
}

/// omp_slow_iteration at libgomp's default wait policy (threads spin before they sleep):
/// the waits and releases come from the region probes, not from futex calls.
fn omp_default_policy(threads: &str, path: f64, iteration: f64, worker_starts: u64) {
    let run = profile_with(
        &format!("omp-default-{threads}"),
        &[],
        &["slow_iteration", "iteration"],
        &args("omp_slow_iteration", &["12", "6", "5", "40"]),
        &[("OMP_NUM_THREADS", threads)],
    );
    let p = &run.online;
    assert_near("critical path", length(p), path);
    assert_procedure(p, "slow_iteration", 240.0, 210.0);
    assert_procedure(p, "iteration", iteration, iteration);
    // 6 regions end; the workers of regions 2-6 wait for their fork (those of the first
    // region are new threads: they depend on their creation).
    assert_eq!(p["sync"]["omp_joins"], 6, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_forks"], worker_starts, "{}", p["sync"]);
}

#[test]
fn openmp_default_wait_policy_three_threads() {
    // 3 threads on 2 CPUs: libgomp spins briefly (it sees more threads than CPUs).
    omp_default_policy("3", 330.0, 90.0, 10);
}

#[test]
fn openmp_default_wait_policy_two_threads() {
    // 2 threads on 2 CPUs: libgomp spins up to 300,000 times before it sleeps.
    omp_default_policy("2", 390.0, 150.0, 5);
}

#[test]
fn openmp_stripped_program() {
    stripped_program("omp_slow_iteration");
}

/// `program` stripped of its symbol table, 40 regions of 65 ms on 2 threads: its
/// outlined function is found at the first region's start (the address libgomp's
/// GOMP_parallel or libomp's __kmpc_fork_call is given) and probed then, so the regions
/// after that are seen. How many regions pass before the probe is in depends on how soon
/// the tracer reads the first region's start: on a loaded machine that took over 1.3 s
/// (20 regions, a whole earlier run of this test, no join seen), so the run is 2.6 s and
/// a quarter of its regions suffice.
fn stripped_program(program_name: &str) {
    let dir = std::env::temp_dir().join(format!(
        "tracer-strip-{}-{program_name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let stripped = dir.join(program_name);
    std::fs::copy(program(program_name), &stripped).unwrap();
    let status = std::process::Command::new("strip")
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(status.success());
    let command: Vec<String> = std::iter::once(stripped.display().to_string())
        .chain(["12", "40", "5", "40"].map(String::from))
        .collect();
    let run = profile_with(
        &format!("stripped-{program_name}"),
        &[],
        &[],
        &command,
        &[("OMP_NUM_THREADS", "2")],
    );
    let p = &run.online;
    // 40 * (5 * 5 + 40) ms; the first regions (before the probe) count their waits as
    // work, which the master's spinning about makes up for.
    assert_near("critical path", length(p), 2600.0);
    let joins = p["sync"]["omp_joins"].as_u64().unwrap();
    assert!((10..=40).contains(&joins), "{}", p["sync"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn openmp_barriers_at_the_active_wait_policy() {
    // One region, 2 threads, 8 phases ending at barriers (4 explicit, 4 implicit at the
    // end of a dynamic loop); OMP_WAIT_POLICY=active: the threads never sleep.
    let run = profile_with(
        "omp-barriers",
        &[],
        &["slow_phase", "normal_phase"],
        &args("omp_barrier_phases", &["2", "4", "40", "10"]),
        &[("OMP_WAIT_POLICY", "active")],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 320.0);
    assert_procedure(p, "slow_phase", 320.0, 240.0);
    assert_procedure(p, "normal_phase", 0.0, 0.0);
    // Each of the 2 threads leaves each of the 8 barriers once.
    assert_eq!(p["sync"]["omp_barriers"], 16, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_joins"], 1, "{}", p["sync"]);
    assert_eq!(p["sync"]["wakeups"], 0, "no futex wake: {}", p["sync"]);
}

#[test]
fn libomp_passive_wait_policy() {
    // libomp with OMP_WAIT_POLICY=passive (KMP_BLOCKTIME 0): its threads sleep at once,
    // and futex wakes and the region probes both see the releases.
    let run = profile_with(
        "libomp-passive",
        &[],
        &["slow_iteration", "iteration"],
        &args("omp_slow_iteration.libomp", &["12", "6", "5", "40"]),
        &[("OMP_NUM_THREADS", "3"), ("OMP_WAIT_POLICY", "passive")],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 330.0);
    assert_procedure(p, "slow_iteration", 240.0, 210.0);
    assert_procedure(p, "iteration", 90.0, 90.0);
    assert_eq!(p["sync"]["omp_joins"], 6, "{}", p["sync"]);
}

/// omp_slow_iteration built with clang (LLVM's libomp) at its default wait policy:
/// threads spin for KMP_BLOCKTIME (200 ms) before they sleep, longer than any wait here,
/// so every wait and release comes from the region probes (`__kmpc_fork_call`, the
/// `.omp_outlined.` function, entered by the master too).
fn libomp_default_policy(threads: &str, path: f64, iteration: f64, worker_starts: u64) {
    let run = profile_with(
        &format!("libomp-default-{threads}"),
        &[],
        &["slow_iteration", "iteration"],
        &args("omp_slow_iteration.libomp", &["12", "6", "5", "40"]),
        &[("OMP_NUM_THREADS", threads)],
    );
    let p = &run.online;
    assert_near("critical path", length(p), path);
    assert_procedure(p, "slow_iteration", 240.0, 210.0);
    assert_procedure(p, "iteration", iteration, iteration);
    // 6 regions end; the workers of regions 2-6 wait for their fork (those of the first
    // region are new threads: they depend on their creation). The static loop ends at
    // the region's end: no barrier call (__kmpc_for_static_fini is none).
    assert_eq!(p["sync"]["omp_joins"], 6, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_forks"], worker_starts, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_barriers"], 0, "{}", p["sync"]);
}

#[test]
fn libomp_default_wait_policy_three_threads() {
    libomp_default_policy("3", 330.0, 90.0, 10);
}

#[test]
fn libomp_default_wait_policy_two_threads() {
    libomp_default_policy("2", 390.0, 150.0, 5);
}

#[test]
fn libomp_barriers_at_the_default_wait_policy() {
    // One region, 2 threads, 8 phases ending at barriers: 4 explicit, 4 at the end of a
    // dynamic loop (clang calls __kmpc_barrier for both). The threads spin throughout.
    let run = profile_with(
        "libomp-barriers",
        &[],
        &["slow_phase", "normal_phase"],
        &args("omp_barrier_phases.libomp", &["2", "4", "40", "10"]),
        &[],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 320.0);
    assert_procedure(p, "slow_phase", 320.0, 240.0);
    assert_procedure(p, "normal_phase", 0.0, 0.0);
    // Each of the 2 threads leaves each of the 8 barriers once.
    assert_eq!(p["sync"]["omp_barriers"], 16, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_joins"], 1, "{}", p["sync"]);
}

#[test]
fn libomp_serialized_region_and_reduction_barriers() {
    // A region run by the master alone (if(0)), 50 ms of serial work, then one region of
    // 2 threads through 4 phases ending at a blocking reduction (__kmpc_reduce,
    // __kmpc_end_reduce, then the loop's __kmpc_barrier).
    let run = profile_with(
        "libomp-reduce",
        &[],
        &["slow_phase", "normal_phase", "serial_part"],
        &args("omp_reduce_serial.libomp", &["2", "4", "40", "10", "50"]),
        &[],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 210.0);
    assert_procedure(p, "serial_part", 50.0, 50.0);
    assert_procedure(p, "slow_phase", 160.0, 120.0);
    assert_procedure(p, "normal_phase", 0.0, 0.0);
    // 2 threads leave 3 barrier calls per phase; one region joins (the serialized one
    // has no team); its worker is a new thread (no fork to wait for).
    assert_eq!(p["sync"]["omp_barriers"], 24, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_joins"], 1, "{}", p["sync"]);
    assert_eq!(p["sync"]["omp_forks"], 0, "{}", p["sync"]);
}

#[test]
fn libomp_stripped_program() {
    stripped_program("omp_slow_iteration.libomp");
}

fn hybrid(launch: fn(usize, &str, &[&str]) -> Vec<String>, tag: &str) {
    // 2 ranks x 2 threads, 5 rounds; one thread of one rank (rotating) runs 40 ms, the
    // others 10 ms; each rank joins its threads, then all ranks Allreduce. The path
    // crosses thread creation, joins and the collective: one graph, one path.
    let run = profile(
        tag,
        &["thread_slow", "thread_work"],
        &launch(2, "hybrid_mpi_threads", &["2", "5", "40", "10", "-1"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), 200.0);
    assert_procedure(p, "thread_slow", 200.0, 150.0);
    assert_procedure(p, "thread_work", 0.0, 0.0);
    // The path runs through both ranks' threads.
    let threads: Vec<&serde_json::Value> = run.report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["cp_ns"].as_u64() > Some(1_000_000))
        .collect();
    let pids: std::collections::BTreeSet<u64> =
        threads.iter().map(|t| t["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "both ranks are on the path: {threads:?}");
}

#[test]
fn hybrid_mpi_threads_openmpi() {
    hybrid(openmpi, "hybrid-ompi");
}

#[test]
fn hybrid_mpi_threads_mpich() {
    hybrid(mpich, "hybrid-mpich");
}

/// 2 threads, 5 rounds of 10 ms outside and 15 ms inside a mutex; thread 1 starts after
/// thread 0 is done, so no hand-off blocks.
fn sequential_mutex(locks: bool) -> tracer_tests::profile::Run {
    let record_args: &[&str] = if locks { &["--locks"] } else { &[] };
    profile_with(
        if locks {
            "mutex-seq-locks"
        } else {
            "mutex-seq"
        },
        record_args,
        &["parallel_part", "critical_section"],
        &args("threads_mutex", &["2", "5", "10", "15", "1"]),
        &[],
    )
}

#[test]
fn uncontended_lock_handoffs_need_locks() {
    // Without --locks the hand-offs never enter the kernel: each thread is its own path.
    let run = sequential_mutex(false);
    let p = &run.online;
    assert_near("critical path without --locks", length(p), 125.0);
    assert_procedure(p, "critical_section", 75.0, 75.0);
    // With --locks the second thread's first acquisition follows the first thread's
    // last release: the critical sections line up across both threads.
    let run = sequential_mutex(true);
    let p = &run.online;
    assert_near("critical path with --locks", length(p), 240.0);
    assert_procedure(p, "critical_section", 150.0, 150.0);
    assert_procedure(p, "parallel_part", 90.0, 90.0);
}

#[test]
fn contended_mutex_with_locks_gives_the_same_path() {
    let run = profile_with(
        "mutex-locks",
        &["--locks"],
        &["parallel_part", "critical_section"],
        &args("threads_mutex", &["4", "4", "10", "20", "0"]),
        &[],
    );
    let p = &run.online;
    assert_near("critical path", length(p), 330.0);
    assert_procedure(p, "critical_section", 320.0, 290.0);
}

/// `--func` on an OpenMP outlined function (issue 38), which the tracer probes itself for
/// the OpenMP lowering: the procedure gets probes of its own beside the lowering's (which
/// once took the point for theirs, and the procedure recorded 0 entries). Every thread of
/// each of the `regions` teams of `threads` enters and leaves it once; the lowering
/// still sees every region end.
fn outlined_function_selected(
    program_name: &str,
    outlined: &str,
    program_args: &[&str],
    threads: usize,
    regions: u64,
) {
    let dir = std::env::temp_dir().join(format!(
        "tracer-omp-func-{}-{program_name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let profile_json = dir.join("profile.json");
    let traced = record(
        &format!("omp-func-{program_name}"),
        &[
            "--func",
            outlined,
            "--profile-json",
            profile_json.to_str().unwrap(),
        ],
        &args(program_name, program_args),
    );
    let profile: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&profile_json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let summary = &traced.summary;
    assert_eq!(
        summary["functions"][outlined],
        threads as u64 * regions,
        "{summary}"
    );
    assert_eq!(summary["calls"]["omp_join"], regions, "{summary}");
    // Entries and exits by thread.
    let mut by_thread: BTreeMap<u32, [u64; 2]> = BTreeMap::new();
    for r in traced.records() {
        match r {
            Record::FuncEnter(h) => by_thread.entry(h.tid).or_default()[0] += 1,
            Record::FuncExit(h) => by_thread.entry(h.tid).or_default()[1] += 1,
            _ => {}
        }
    }
    assert_eq!(by_thread.len(), threads, "threads: {by_thread:?}");
    assert!(
        by_thread.values().all(|&n| n == [regions, regions]),
        "(entries, exits) by thread: {by_thread:?}"
    );
    let row = proc_row(&profile, outlined);
    assert!(row["cpu_ns"].as_u64().unwrap() > 0, "{row}");
}

#[test]
fn func_selects_a_gfortran_outlined_function() {
    // NPB CG's name: a subroutine's region, 5 regions of 2 threads.
    outlined_function_selected("omp_conj_grad_f", "conj_grad_._omp_fn.0", &["2", "5"], 2, 5);
}

#[test]
fn func_selects_a_gcc_outlined_function() {
    // One region of 2 threads.
    outlined_function_selected(
        "omp_barrier_phases",
        "main._omp_fn.0",
        &["2", "4", "10", "5"],
        2,
        1,
    );
}

#[test]
fn func_selects_a_clang_outlined_function() {
    // 6 regions of 3 threads (the 5th argument sets the team's size).
    outlined_function_selected(
        "omp_slow_iteration.libomp",
        ".omp_outlined.",
        &["12", "6", "5", "10", "3"],
        3,
        6,
    );
}
