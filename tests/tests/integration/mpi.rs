//! Tracing real Open MPI and MPICH jobs launched by the tracer (`-- mpirun ...`), and an
//! Open MPI job attached by PID. Every count below follows from the program's construction.

use std::collections::{HashMap, HashSet};

use tracer_common::{call, UNSET};
use tracer_tests::{mpich, openmpi, record, Traced};

const N: usize = 4;

fn launcher(mpi: &str) -> fn(usize, &str, &[&str]) -> Vec<String> {
    if mpi == "openmpi" {
        openmpi
    } else {
        mpich
    }
}

/// Every rank 0..n is known, exactly once.
fn assert_ranks(t: &Traced, n: usize) -> HashMap<u32, i64> {
    let ranks = t.ranks();
    let mut seen: Vec<i64> = ranks.values().copied().collect();
    seen.sort();
    assert_eq!(seen, (0..n as i64).collect::<Vec<_>>(), "ranks: {ranks:?}");
    ranks
}

fn ring(mpi: &str) {
    let rounds = 10;
    let t = record(
        &format!("ring-{mpi}"),
        &[],
        &launcher(mpi)(N, "mpi_ring", &["10", "256"]),
    );
    assert_eq!(t.lost, 0);
    assert_eq!(t.summary["events"]["lost"], 0);
    let ranks = assert_ranks(&t, N);
    let sends = t.calls_of(call::MPI_SEND);
    let recvs = t.calls_of(call::MPI_RECV);
    assert_eq!(sends.len(), rounds * N);
    assert_eq!(recvs.len(), rounds * N);
    for s in &sends {
        let rank = ranks[&s.pid];
        assert_eq!(s.entry.peer as i64, (rank + 1) % N as i64, "send peer");
        assert!((0..rounds as i32).contains(&s.entry.tag));
        assert_eq!(s.entry.bytes, 256);
        assert_eq!(s.exit.ret, 0);
    }
    for r in &recvs {
        let rank = ranks[&r.pid];
        assert_eq!(
            r.entry.peer as i64,
            (rank - 1 + N as i64) % N as i64,
            "recv source"
        );
        assert_eq!(r.entry.bytes, 256);
    }
    // Each rank sends each tag exactly once.
    let per: HashSet<(u32, i32)> = sends.iter().map(|s| (s.pid, s.entry.tag)).collect();
    assert_eq!(per.len(), rounds * N);
    assert_eq!(t.summary["calls"]["MPI_Send"], rounds * N);
}

#[test]
fn ring_openmpi() {
    ring("openmpi");
}

#[test]
fn ring_mpich() {
    ring("mpich");
}

fn wildcard(mpi: &str) {
    let rounds = 6;
    let t = record(
        &format!("wild-{mpi}"),
        &[],
        &launcher(mpi)(N, "mpi_wildcard", &["6"]),
    );
    assert_eq!(t.lost, 0);
    let ranks = assert_ranks(&t, N);
    let any_source = if mpi == "openmpi" { -1 } else { -2 };
    let recvs: Vec<_> = t
        .calls_of(call::MPI_RECV)
        .into_iter()
        .filter(|c| ranks[&c.pid] == 0)
        .collect();
    assert_eq!(recvs.len(), rounds * (N - 1));
    let mut by_source: HashMap<i32, usize> = HashMap::new();
    for r in &recvs {
        assert_eq!(r.entry.peer, any_source, "a wildcard receive");
        assert_eq!(r.exit.tag, 100 + r.exit.peer, "actual tag from the status");
        assert_eq!(r.exit.bytes, 16, "4 ints received");
        *by_source.entry(r.exit.peer).or_default() += 1;
    }
    let want: HashMap<i32, usize> = (1..N as i32).map(|s| (s, rounds)).collect();
    assert_eq!(by_source, want);
}

#[test]
fn wildcard_openmpi() {
    wildcard("openmpi");
}

#[test]
fn wildcard_mpich() {
    wildcard("mpich");
}

fn nonblocking(mpi: &str) {
    let rounds = 8;
    let t = record(
        &format!("nb-{mpi}"),
        &[],
        &launcher(mpi)(N, "mpi_nonblocking", &["8"]),
    );
    assert_eq!(t.lost, 0);
    assert_ranks(&t, N);
    let calls = t.calls();
    let count = |id| calls.iter().filter(|c| c.id == id).count();
    assert_eq!(count(call::MPI_IRECV), (rounds + 2) * N);
    assert_eq!(count(call::MPI_ISEND), (rounds + 2) * N);
    assert_eq!(count(call::MPI_WAITALL), N);
    assert_eq!(count(call::MPI_WAIT), (2 * rounds + 1) * N);
    assert!(count(call::MPI_TEST) >= N);
    // Every completion names a request that an Isend/Irecv of the same process returned
    // and that was not completed yet.
    let mut live: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut waitall_handles: HashMap<u32, Vec<u64>> = HashMap::new();
    for r in t.records() {
        if let tracer_analysis::records::Record::HandleArray(a) = r {
            let v = waitall_handles.entry(a.header.tgid).or_default();
            v.extend(a.values.iter().take(a.total as usize - a.first as usize));
        }
    }
    for c in &calls {
        match c.id {
            call::MPI_ISEND | call::MPI_IRECV => {
                assert_ne!(c.exit.handle, 0, "request handle");
                live.entry(c.pid).or_default().push(c.exit.handle);
            }
            call::MPI_WAIT => {
                let l = live.get_mut(&c.pid).unwrap();
                let i = l
                    .iter()
                    .position(|h| *h == c.entry.handle)
                    .expect("Wait on a known request");
                l.remove(i);
            }
            call::MPI_TEST if c.exit.out == 1 => {
                let l = live.get_mut(&c.pid).unwrap();
                let i = l
                    .iter()
                    .position(|h| *h == c.entry.handle)
                    .expect("Test on a known request");
                l.remove(i);
            }
            call::MPI_WAITALL => {
                assert_eq!(c.entry.count, 2);
                let l = live.get_mut(&c.pid).unwrap();
                for h in &waitall_handles[&c.pid] {
                    let i = l
                        .iter()
                        .position(|x| x == h)
                        .expect("Waitall on known requests");
                    l.remove(i);
                }
            }
            _ => {}
        }
    }
    assert!(
        live.values().all(|l| l.is_empty()),
        "requests never completed: {live:?}"
    );
}

#[test]
fn nonblocking_openmpi() {
    nonblocking("openmpi");
}

#[test]
fn nonblocking_mpich() {
    nonblocking("mpich");
}

fn collectives(mpi: &str) {
    let rounds = 5;
    let t = record(
        &format!("coll-{mpi}"),
        &[],
        &launcher(mpi)(N, "mpi_collectives", &["5"]),
    );
    assert_eq!(t.lost, 0);
    let ranks = assert_ranks(&t, N);
    let calls = t.calls();
    for id in [
        call::MPI_BCAST,
        call::MPI_REDUCE,
        call::MPI_ALLREDUCE,
        call::MPI_GATHER,
        call::MPI_SCATTER,
        call::MPI_ALLGATHER,
        call::MPI_ALLTOALL,
    ] {
        for &pid in ranks.keys() {
            let n = calls.iter().filter(|c| c.id == id && c.pid == pid).count();
            assert_eq!(
                n,
                rounds,
                "{} on pid {pid}",
                tracer_analysis::calls::name(id)
            );
        }
    }
    // Barriers: ROUNDS on the world plus one on each derived communicator.
    for &pid in ranks.keys() {
        let b: Vec<_> = calls
            .iter()
            .filter(|c| c.id == call::MPI_BARRIER && c.pid == pid)
            .collect();
        assert_eq!(b.len(), rounds + 2);
        let comms: HashSet<u64> = b.iter().map(|c| c.entry.comm).collect();
        assert_eq!(comms.len(), 3, "world, dup and split communicators");
        let dup = calls
            .iter()
            .find(|c| c.id == call::MPI_COMM_DUP && c.pid == pid)
            .unwrap();
        assert!(
            comms.contains(&dup.exit.handle),
            "the Barrier uses the communicator Comm_dup returned"
        );
        let split = calls
            .iter()
            .find(|c| c.id == call::MPI_COMM_SPLIT && c.pid == pid)
            .unwrap();
        assert_eq!(split.entry.peer as i64, ranks[&pid] % 2, "color");
        assert_eq!(split.entry.peer2 as i64, ranks[&pid], "key");
        assert!(comms.contains(&split.exit.handle));
    }
    let roots: HashSet<i32> = calls
        .iter()
        .filter(|c| c.id == call::MPI_REDUCE)
        .map(|c| c.entry.peer)
        .collect();
    assert_eq!(roots, HashSet::from([0]));
    let bcast = calls.iter().find(|c| c.id == call::MPI_BCAST).unwrap();
    assert_eq!(bcast.entry.bytes, 64, "16 ints");
    assert_ne!(bcast.entry.bytes, UNSET);
}

#[test]
fn collectives_openmpi() {
    collectives("openmpi");
}

#[test]
fn collectives_mpich() {
    collectives("mpich");
}

#[test]
fn selected_procedures_in_mpi_ranks() {
    let iters = 4;
    let t = record(
        "func",
        &["--func", "compute", "--func", "exch*"],
        &openmpi(N, "mpi_busy", &["4", "5"]),
    );
    assert_eq!(t.lost, 0);
    let ranks = assert_ranks(&t, N);
    assert_eq!(t.summary["functions"]["compute"], iters * N);
    assert_eq!(t.summary["functions"]["exchange"], iters * N);
    for &pid in ranks.keys() {
        let enters = t
            .records()
            .filter(
                |r| matches!(r, tracer_analysis::records::Record::FuncEnter(h) if h.tgid == pid),
            )
            .count();
        let exits = t
            .records()
            .filter(|r| matches!(r, tracer_analysis::records::Record::FuncExit(h) if h.tgid == pid))
            .count();
        assert_eq!(enters, 2 * iters);
        assert_eq!(exits, 2 * iters);
    }
}

#[test]
fn attach_to_running_job_by_pid() {
    use std::process::{Command, Stdio};
    let cmd = openmpi(N, "mpi_sleeper", &["6"]);
    let mut job = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let pid = job.id().to_string();
    let t = record("attach", &["--pid", &pid, "--duration", "1.5"], &[]);
    job.wait().unwrap();
    assert_eq!(t.lost, 0);
    // Ranks come from the launcher's environment when MPI_Comm_rank ran before we came.
    let ranks = assert_ranks(&t, N);
    let sends = t.calls_of(call::MPI_SEND);
    assert!(sends.len() > 100, "only {} sends in 1.5 s", sends.len());
    for s in &sends {
        assert_eq!(s.entry.peer as i64, (ranks[&s.pid] + 1) % N as i64);
        assert_eq!(s.entry.tag, 1);
    }
    // Every rank is seen sending.
    let senders: HashSet<u32> = sends.iter().map(|s| s.pid).collect();
    assert_eq!(senders.len(), N);
}

/// Fortran programs reach the same library entry points (PMPI_Send is MPI_Send's address).
fn fortran_ring(mpi: &str) {
    let t = record(
        &format!("fortran-{mpi}"),
        &[],
        &launcher(mpi)(3, "mpi_ring_f", &["6", "48"]),
    );
    assert_eq!(t.lost, 0);
    let ranks = assert_ranks(&t, 3);
    let sends = t.calls_of(call::MPI_SEND);
    assert_eq!(sends.len(), 6 * 3);
    assert!(sends
        .iter()
        .all(|s| s.entry.peer as i64 == (ranks[&s.pid] + 1) % 3 && s.entry.bytes == 48));
    assert_eq!(t.calls_of(call::MPI_RECV).len(), 6 * 3);
}

#[test]
fn fortran_ring_openmpi() {
    fortran_ring("openmpi");
}

#[test]
fn fortran_ring_mpich() {
    fortran_ring("mpich");
}

/// Calls faster than the reader's 50 ms reads of the probes' per-CPU slots drain them
/// (about 700,000 records a second per rank): the probes wake the reader when half a
/// CPU's slots are unread, and a CPU whose slots are full writes to the ring, which the
/// reader merges with the slots. Every call must still be there, in program order, with
/// its arguments. The ring holds the whole run (`--buffer-mib 64`, about 42 MB of
/// records), so that a reader starved of CPU by the ranks and by other tests running
/// meanwhile does not lose records: this is about order and completeness, not speed
/// (`cargo xtask bench --only flood` is).
#[test]
fn calls_faster_than_the_reader_all_arrive_in_order() {
    let n = 30_000;
    let t = record(
        "fast-calls",
        &["--buffer-mib", "64"],
        &mpich(2, "mpi_probe_cost", &[&n.to_string()]),
    );
    assert_eq!(t.lost, 0);
    let ranks = assert_ranks(&t, 2);
    for (&pid, &rank) in &ranks {
        // calls() pairs entries with exits per thread and fails on a mismatch.
        let mine: Vec<_> = t.calls().into_iter().filter(|c| c.pid == pid).collect();
        let id = |range: std::ops::Range<usize>| -> HashSet<u16> {
            mine[range].iter().map(|c| c.id).collect()
        };
        // MPI_Init, n × MPI_Comm_rank, n × (Isend, Recv, Wait), MPI_Finalize.
        assert_eq!(mine.len(), 2 + 4 * n, "calls of rank {rank}");
        assert_eq!(id(1..n + 1), HashSet::from([call::MPI_COMM_RANK]));
        for (i, c) in mine[1..n + 1].iter().enumerate() {
            assert_eq!(c.exit.out, rank, "MPI_Comm_rank {i} of rank {rank}");
        }
        let exchange = &mine[n + 1..4 * n + 1];
        for (i, round) in exchange.chunks(3).enumerate() {
            let ids: Vec<u16> = round.iter().map(|c| c.id).collect();
            assert_eq!(
                ids,
                [call::MPI_ISEND, call::MPI_RECV, call::MPI_WAIT],
                "round {i} of rank {rank}"
            );
            assert_eq!(round[0].entry.peer as i64, rank);
            assert_eq!(round[0].entry.tag, 1);
            assert_eq!(round[0].entry.bytes, 8);
            assert_eq!(round[1].entry.peer as i64, rank);
        }
        // Timestamps never go back within the thread.
        assert!(mine
            .windows(2)
            .all(|w| w[0].exit.header.ts_ns <= w[1].entry.header.ts_ns));
    }
    assert_eq!(t.summary["calls"]["MPI_Comm_rank"], 2 * n);
}
