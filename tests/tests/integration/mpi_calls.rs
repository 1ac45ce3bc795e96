//! MPI calls beyond send/receive and the eight classic collectives: v-collectives, scans,
//! Sendrecv_replace, the Test/Wait family, probes, cancel, persistent requests,
//! nonblocking collectives, one-sided fences, MPI_COMM_SELF. Real Open MPI and MPICH jobs
//! under the real tracer; every count follows from the program's construction (see each
//! program's header comment).
//!
//! Times: 5 % of the expected value or 10 ms, whichever is larger (critical_path.rs).

use tracer_analysis::records::Record;
use tracer_analysis::Metrics;
use tracer_common::call;
use tracer_tests::profile::{all_matched, assert_near, length, ms, proc_row, profile};
use tracer_tests::{mpich, openmpi, record};

fn launcher(mpi: &str) -> fn(usize, &str, &[&str]) -> Vec<String> {
    if mpi == "openmpi" {
        openmpi
    } else {
        mpich
    }
}

/// mpi_more_calls, 3 rounds on 4 ranks: world rank r sends 5 messages a round to r + 1
/// (16 + 24 + 8 + 8 + 8 bytes); 20 collective exits per rank and round.
fn more_calls(mpi: &str) {
    let (n, rounds) = (4u64, 3u64);
    let t = record(
        &format!("more-calls-{mpi}"),
        &[],
        &launcher(mpi)(n as usize, "mpi_more_calls", &["3"]),
    );
    assert_eq!(t.lost, 0);
    let m = Metrics::from_items(&t.items, &t.meta);
    let mut pairs: Vec<(i32, i32, u64, u64)> = m
        .traffic
        .processes
        .iter()
        .map(|p| {
            let rank = |r: Option<i32>| r.expect("a world rank");
            (rank(p.from_rank), rank(p.to_rank), p.messages, p.bytes)
        })
        .collect();
    pairs.sort();
    let want: Vec<(i32, i32, u64, u64)> = (0..n as i32)
        .map(|r| (r, (r + 1) % n as i32, 5 * rounds, 64 * rounds))
        .collect();
    assert_eq!(pairs, want, "the message matrix");
    let s = &m.traffic.matching;
    assert_eq!((s.sent, s.matched, s.unmatched), (60, 60, 0), "{s:?}");
    assert_eq!(s.collectives, 20 * rounds * n, "{s:?}");
    assert_eq!(s.collectives_incomplete, 0, "{s:?}");
    let per_round = n * rounds;
    for name in [
        "MPI_Gatherv",
        "MPI_Scatterv",
        "MPI_Allgatherv",
        "MPI_Reduce_scatter",
        "MPI_Reduce_scatter_block",
        "MPI_Scan",
        "MPI_Exscan",
        "MPI_Ibcast",
        "MPI_Iallreduce",
        "MPI_Ibarrier",
        "MPI_Ireduce",
        "MPI_Put",
        "MPI_Get",
        "MPI_Sendrecv_replace",
        "MPI_Startall",
        "MPI_Cancel",
        "MPI_Alltoallw",
        "MPI_Igather",
        "MPI_Iscatter",
        "MPI_Iallgather",
        "MPI_Ialltoall",
        "MPI_Probe",
    ] {
        assert_eq!(t.summary["calls"][name], per_round, "{name}");
    }
    assert_eq!(t.summary["calls"]["MPI_Win_fence"], 2 * per_round);
    assert_eq!(t.summary["calls"]["MPI_Waitall"], 2 * per_round);
    for name in [
        "MPI_Send_init",
        "MPI_Recv_init",
        "MPI_Win_create",
        "MPI_Win_free",
    ] {
        assert_eq!(t.summary["calls"][name], n, "{name}");
    }
    // Probed since issue 38 (it was the example of a call imported and not probed:
    // `calls_without_exits_are_unwound` has one now).
    assert_eq!(t.summary["calls"]["MPI_Comm_split_type"], n);
    assert_eq!(t.summary["unprobed_mpi_calls"], serde_json::json!({}));
    // Completed until done: at least one call per round and rank.
    for name in ["MPI_Waitsome", "MPI_Testall", "MPI_Testsome"] {
        assert!(
            t.summary["calls"][name].as_u64().unwrap() >= per_round,
            "{name}"
        );
    }
}

#[test]
fn more_calls_openmpi() {
    more_calls("openmpi");
}

#[test]
fn more_calls_mpich() {
    more_calls("mpich");
}

/// mpi_alltoallv: rank 1 runs slow_part (A ms), the others fast_part (B ms), then all
/// meet in MPI_Alltoallv. The path is slow_part's, and zeroing it gains only
/// ITERS * (A - B): the fast ranks are close behind.
fn alltoallv_imbalance(mpi: &str) {
    let (iters, a, b) = (4.0, 60.0, 40.0);
    let run = profile(
        &format!("a2av-{mpi}"),
        &["slow_part", "fast_part"],
        &launcher(mpi)(4, "mpi_alltoallv", &["4", "60", "40"]),
    );
    let p = &run.online;
    assert_near("critical path", length(p), iters * a);
    let slow = proc_row(p, "slow_part");
    let fast = proc_row(p, "fast_part");
    assert_near("slow_part on the path", ms(&slow["cp_ns"]), iters * a);
    assert_eq!(fast["cp_ns"], 0, "fast_part is never on the path");
    assert_near(
        "zeroing slow_part",
        ms(&slow["zeroing_ns"]),
        iters * (a - b),
    );
    assert_eq!(p["messages"]["collectives"], 4 * 4, "every Alltoallv exit");
    assert_eq!(p["messages"]["collectives_incomplete"], 0);
    let top = &run.report["processes"][0];
    assert_eq!(top["rank"], 1, "{top}");
}

#[test]
fn alltoallv_imbalance_openmpi() {
    alltoallv_imbalance("openmpi");
}

#[test]
fn alltoallv_imbalance_mpich() {
    alltoallv_imbalance("mpich");
}

/// mpi_poll: rank 0 busy-polls MPI_Testany and MPI_Iprobe while rank 1 produces for W ms
/// before each message: the polling is waiting, so the path is rank 1's produce
/// (2 * ROUNDS * W) and every message is matched.
fn polling_is_waiting(mpi: &str) {
    let (rounds, w) = (5.0, 30.0);
    let run = profile(
        &format!("poll-{mpi}"),
        &["produce"],
        &launcher(mpi)(2, "mpi_poll", &["5", "30"]),
    );
    let p = &run.online;
    all_matched(p);
    assert_eq!(p["messages"]["matched"], 2 * 5);
    assert_near("critical path", length(p), 2.0 * rounds * w);
    let produce = proc_row(p, "produce");
    assert_near(
        "produce on the path",
        ms(&produce["cp_ns"]),
        2.0 * rounds * w,
    );
    let top = &run.report["processes"][0];
    assert_eq!(top["rank"], 1, "{top}");
    assert_near("rank 1 on the path", ms(&top["cp_ns"]), 2.0 * rounds * w);
}

#[test]
fn polling_is_waiting_openmpi() {
    polling_is_waiting("openmpi");
}

#[test]
fn polling_is_waiting_mpich() {
    polling_is_waiting("mpich");
}

/// mpi_test_overlap: rank 0 computes 2 * W ms a round in 100 us chunks, testing its
/// receive between chunks while rank 1 sleeps W ms before sending. The chunks between
/// tests that found nothing are work, not a polling loop: the path is rank 0's CPU time
/// outside MPI calls (about half that if they were taken for polling). That is at least
/// 2 * ROUNDS * W, and more by the chunks' overshoot and the start-up (307-314 ms
/// measured): the program prints it by its own clock. The path is 2.5-5 ms longer
/// still, the traps of the probes on its 1,400 MPI_Test calls.
fn work_between_tests(mpi: &str) {
    let (rounds, w) = (5.0, 30.0);
    let run = profile(
        &format!("test-overlap-{mpi}"),
        &[],
        &launcher(mpi)(2, "mpi_test_overlap", &["5", "30", "100"]),
    );
    let work_cpu: f64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("work_cpu_ms "))
        .unwrap_or_else(|| panic!("no work_cpu_ms in {:?}", run.stdout))
        .parse()
        .unwrap();
    assert!(
        work_cpu >= 2.0 * rounds * w,
        "rank 0 worked {work_cpu} ms of CPU in its rounds, want at least {}",
        2.0 * rounds * w
    );
    let p = &run.online;
    all_matched(p);
    assert_eq!(p["messages"]["matched"], 2 * 5);
    assert_near("critical path", length(p), work_cpu);
    let top = &run.report["processes"][0];
    assert_eq!(top["rank"], 0, "{top}");
    assert_near("rank 0 on the path", ms(&top["cp_ns"]), work_cpu);
}

#[test]
fn work_between_tests_is_work_openmpi() {
    work_between_tests("openmpi");
}

#[test]
fn work_between_tests_is_work_mpich() {
    work_between_tests("mpich");
}

/// mpi_poll's MPI_Testany loops: a test writes its requests only when it completed one,
/// so the recording has one handle array per round (the request the round's Irecv
/// returned), however often rank 0 polled, and every poll is one call.
fn tests_write_requests_they_complete(mpi: &str) {
    let rounds = 5;
    let t = record(
        &format!("poll-arrays-{mpi}"),
        &[],
        &launcher(mpi)(2, "mpi_poll", &["5", "10"]),
    );
    assert_eq!(t.lost, 0);
    let irecvs = t.calls_of(call::MPI_IRECV);
    let tests = t.calls_of(call::MPI_TESTANY);
    assert_eq!(irecvs.len(), rounds);
    let completed: Vec<_> = tests.iter().filter(|c| c.exit.out >= 0).collect();
    assert_eq!(completed.len(), rounds, "one completion a round");
    assert!(
        tests.len() > 2 * rounds,
        "rank 0 polled while rank 1 produced: {} tests",
        tests.len()
    );
    let arrays: Vec<_> = t
        .records()
        .filter_map(|r| match r {
            Record::HandleArray(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(arrays.len(), rounds, "one array per completed test");
    for (a, (test, irecv)) in arrays.iter().zip(completed.iter().zip(&irecvs)) {
        assert_eq!((a.first, a.total), (0, 1));
        assert_eq!(a.values[0], irecv.exit.handle, "the round's request");
        // Written before the exit it belongs to, after the entry.
        assert!(test.entry.header.ts_ns <= a.header.ts_ns);
        assert!(a.header.ts_ns <= test.exit.header.ts_ns);
    }
}

#[test]
fn tests_write_requests_they_complete_openmpi() {
    tests_write_requests_they_complete("openmpi");
}

#[test]
fn tests_write_requests_they_complete_mpich() {
    tests_write_requests_they_complete("mpich");
}

/// Calls that never return through their return probe (an error handler longjmps out of
/// each of N receives, `mpi_longjmp`): the probes drop each one's frame at the next call
/// from its call site or entered above its stack pointer (a `calls_unwound` record, `exit_missed` in the
/// failures), so the thread's later calls are outermost again and pair: the barrier is
/// complete and every ring message matched. Before, each lost exit stayed on the thread's
/// stack for good, and the ring's calls counted as made inside a receive.
fn calls_without_exits_are_unwound(mpi: &str) {
    let (n, jumps) = (2u64, 5u64);
    let t = record(
        &format!("longjmp-{mpi}"),
        &[],
        &launcher(mpi)(n as usize, "mpi_longjmp", &[&jumps.to_string()]),
    );
    assert_eq!(t.lost, 0);
    let unwound: u64 = t
        .records()
        .filter_map(|r| match r {
            Record::CallsUnwound(u) => Some(u.calls as u64),
            _ => None,
        })
        .sum();
    assert_eq!(unwound, n * jumps, "calls unwound");
    assert_eq!(
        t.summary["events"]["failures"]["exit_missed"],
        n * jumps,
        "{}",
        t.summary["events"]
    );
    let receives_completed = t.calls_of(call::MPI_RECV).len();
    assert_eq!(receives_completed, 0, "no receive returned");
    let m = Metrics::from_items(&t.items, &t.meta);
    let s = &m.traffic.matching;
    assert_eq!(
        (s.sent, s.matched, s.unmatched),
        (n * jumps, n * jumps, 0),
        "{s:?}"
    );
    assert_eq!(s.collectives, n, "the barrier, at every rank: {s:?}");
    // Imported and not probed: reported, once per rank's program.
    assert_eq!(
        t.summary["unprobed_mpi_calls"],
        serde_json::json!({ "MPI_Comm_create_errhandler": n }),
    );
}

#[test]
fn calls_without_exits_are_unwound_openmpi() {
    calls_without_exits_are_unwound("openmpi");
}

#[test]
fn calls_without_exits_are_unwound_mpich() {
    calls_without_exits_are_unwound("mpich");
}
