//! Classes of traffic found unmatched in real applications (issue 38), one phase of
//! tests/programs/mpi_classes.c per test, traced under Open MPI and MPICH with 4 ranks:
//! every message matched, the exact message matrix, every collective complete. The
//! counts follow from the program's construction (its header comment).

use std::collections::BTreeMap;
use tracer_analysis::records::Record;
use tracer_analysis::Metrics;
use tracer_common::{call, ProbeFailure};
use tracer_tests::{mpich, openmpi, record, world_pairs, Traced};

const N: i32 = 4;
const ROUNDS: u64 = 6;

/// Traces `mpi_classes PHASE ROUNDS`, with no lost events.
fn trace(mpi: &str, name: &str) -> (Traced, Metrics) {
    let rounds = ROUNDS.to_string();
    let args = [name, rounds.as_str()];
    let command = if mpi == "openmpi" {
        openmpi(N as usize, "mpi_classes", &args)
    } else {
        mpich(N as usize, "mpi_classes", &args)
    };
    let t = record(&format!("classes-{name}-{mpi}"), &[], &command);
    assert_eq!(t.lost, 0);
    let m = Metrics::from_items(&t.items, &t.meta);
    (t, m)
}

/// Traces `mpi_classes PHASE ROUNDS` and checks what every phase must give: no lost
/// events, the matrix `want` (per round; sorted here), every message matched and
/// `collectives` collective exits (per round, over all ranks) all complete.
fn phase(mpi: &str, name: &str, want: Vec<(i32, i32, u64, u64)>, collectives: u64) -> Traced {
    let (t, m) = trace(mpi, name);
    let s = &m.traffic.matching;
    let mut want: Vec<(i32, i32, u64, u64)> = want
        .into_iter()
        .map(|(f, to, n, b)| (f, to, n * ROUNDS, b * ROUNDS))
        .collect();
    want.sort();
    let messages: u64 = want.iter().map(|p| p.2).sum();
    assert_eq!((s.matched, s.unmatched), (messages, 0), "{s:?}");
    assert_eq!(world_pairs(&m), want, "the message matrix");
    assert_eq!(
        (s.collectives, s.collectives_incomplete),
        (collectives * ROUNDS, 0),
        "{s:?}"
    );
    t
}

/// Self-sends on world and on a dup (one into a wildcard receive): w->w 3 messages, 48 B.
fn self_sends(mpi: &str) {
    let want = (0..N).map(|w| (w, w, 3, 48)).collect();
    phase(mpi, "self", want, 0);
}

#[test]
fn self_sends_openmpi() {
    self_sends("openmpi");
}

#[test]
fn self_sends_mpich() {
    self_sends("mpich");
}

/// Ready, synchronous and buffered sends from ranks 1..3 into rank 0's 3 wildcard
/// receives, completed by Waitall and Testall with MPI_STATUSES_IGNORE and by Waitall
/// with statuses: w->0 3 messages, 56 B for w = 1..3; no collective but Barriers (4 per
/// rank per round).
fn into_wildcards(mpi: &str) {
    let want = (1..N).map(|w| (w, 0, 3, 56)).collect();
    phase(mpi, "wildcard", want, 4 * N as u64);
}

#[test]
fn into_wildcards_openmpi() {
    into_wildcards("openmpi");
}

#[test]
fn into_wildcards_mpich() {
    into_wildcards("mpich");
}

/// `calls` were probed, each called once per rank, `times` times.
fn probed(t: &Traced, calls: &[(&str, u64)]) {
    for &(call, times) in calls {
        assert_eq!(t.summary["calls"][call], times * N as u64, "{call}");
        assert!(t.summary["unprobed_mpi_calls"][call].is_null(), "{call}");
    }
}

/// Messages (from, to, bytes) per round as one matrix row per pair of world ranks.
fn matrix(messages: &[(i32, i32, u64)]) -> Vec<(i32, i32, u64, u64)> {
    let mut pairs = std::collections::BTreeMap::<(i32, i32), (u64, u64)>::new();
    for &(from, to, bytes) in messages {
        let p = pairs.entry((from, to)).or_default();
        *p = (p.0 + 1, p.1 + bytes);
    }
    pairs
        .into_iter()
        .map(|((f, t), (n, b))| (f, t, n, b))
        .collect()
}

/// MPI_Cart_create (reorder allowed, ranks kept) and MPI_Cart_sub of it (rows, columns)
/// and of a row: w->w^1 24 B, w->w^2 32 B; an Allreduce on a row and on a column.
fn cart_sub(mpi: &str) {
    let want = (0..N)
        .flat_map(|w| [(w, w ^ 1, 1, 24), (w, w ^ 2, 1, 32)])
        .collect();
    let t = phase(mpi, "cartsub", want, 2 * N as u64);
    probed(&t, &[("MPI_Cart_create", 1), ("MPI_Cart_sub", 3)]);
    // remain_dims as the probes read them, per rank in call order (row, col, line: 2, 2
    // and 1 dimensions): 8 ints from the stack; from the page's last two ints, the
    // page's end (the chunk's read fails there, and is no failure of the probes).
    let mut read: BTreeMap<u32, Vec<(u32, Vec<u64>)>> = BTreeMap::new();
    for r in t.records() {
        if let Record::HandleArray(a) = r {
            if a.header.call & 0xff == call::MPI_CART_SUB {
                let calls = read.entry(a.header.tgid).or_default();
                let ndims = if calls.len() == 2 { 1 } else { 2 };
                calls.push((a.total, a.values[..ndims].to_vec()));
            }
        }
    }
    let want = vec![(8, vec![0, 1]), (2, vec![1, 0]), (8, vec![1])];
    assert_eq!(read.len(), N as usize);
    for (pid, calls) in read {
        assert_eq!(calls, want, "pid {pid}");
    }
    assert_eq!(
        t.probe_failures.get(ProbeFailure::UserRead.name()),
        None,
        "{:?}",
        t.probe_failures
    );
}

#[test]
fn cart_sub_openmpi() {
    cart_sub("openmpi");
}

#[test]
fn cart_sub_mpich() {
    cart_sub("mpich");
}

/// Point-to-point on an intercommunicator between the even and the odd ranks (ranks name
/// the remote group), a Barrier, an Allreduce, a Bcast and a Reduce on it, then
/// point-to-point on the two merged, odd group first (world 1, 3, 0, 2), with an
/// Allreduce on the merged one.
fn intercomm(mpi: &str) {
    let want = matrix(&[
        (0, 1, 20),
        (2, 3, 20),
        (1, 2, 28),
        (3, 0, 28),
        (1, 3, 36),
        (3, 0, 36),
        (0, 2, 36),
        (2, 1, 36),
    ]);
    let t = phase(mpi, "intercomm", want, 5 * N as u64);
    probed(
        &t,
        &[("MPI_Intercomm_create", 1), ("MPI_Intercomm_merge", 1)],
    );
}

#[test]
fn intercomm_openmpi() {
    intercomm("openmpi");
}

#[test]
fn intercomm_mpich() {
    intercomm("mpich");
}

/// Communicators of distributed graphs (adjacent: a ring; general: w -> w + 2), ranks
/// kept: w->w+1 44 B, w->w+2 52 B; a Bcast, a Neighbor_allgather and a
/// Neighbor_alltoall on the ring (each depending on the rank before), an Allreduce on the
/// other.
fn dist_graph(mpi: &str) {
    let want = (0..N)
        .flat_map(|w| [(w, (w + 1) % N, 1, 44), (w, (w + 2) % N, 1, 52)])
        .collect();
    let t = phase(mpi, "distgraph", want, 4 * N as u64);
    probed(
        &t,
        &[
            ("MPI_Dist_graph_create_adjacent", 1),
            ("MPI_Dist_graph_create", 1),
            ("MPI_Neighbor_allgather", ROUNDS),
            ("MPI_Neighbor_alltoall", ROUNDS),
        ],
    );
}

/// A distributed graph created with `reorder` set: MPICH ignores it (its
/// MPIR_Dist_graph_create_adjacent_impl copies the old communicator's ranks), so a ring
/// on it is matched, w->w+1 48 B; Open MPI's topo/treematch may permute the ranks, so
/// the tracer leaves the communicator unknown: none of the 4 receives a round is matched
/// (counted unmatched), and no pair is guessed.
fn dist_graph_reordered(mpi: &str) {
    if mpi == "mpich" {
        let want = (0..N).map(|w| (w, (w + 1) % N, 1, 48)).collect();
        phase(mpi, "distreorder", want, 0);
        return;
    }
    let (_, m) = trace(mpi, "distreorder");
    let s = &m.traffic.matching;
    let receives = N as u64 * ROUNDS;
    assert_eq!(
        (s.matched, s.unmatched, s.received),
        (0, receives, receives),
        "{s:?}"
    );
    assert_eq!(world_pairs(&m), vec![], "the message matrix");
}

#[test]
fn dist_graph_reordered_openmpi() {
    dist_graph_reordered("openmpi");
}

#[test]
fn dist_graph_reordered_mpich() {
    dist_graph_reordered("mpich");
}

#[test]
fn dist_graph_openmpi() {
    dist_graph("openmpi");
}

#[test]
fn dist_graph_mpich() {
    dist_graph("mpich");
}

/// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) on one machine, keys reversing the world:
/// w->w-1 40 B; 1 Bcast per rank.
fn split_type(mpi: &str) {
    let want = (0..N).map(|w| (w, (w + N - 1) % N, 1, 40)).collect();
    let t = phase(mpi, "splittype", want, N as u64);
    assert_eq!(
        t.summary["calls"]["MPI_Comm_split_type"], N,
        "MPI_Comm_split_type"
    );
}

#[test]
fn split_type_openmpi() {
    split_type("openmpi");
}

#[test]
fn split_type_mpich() {
    split_type("mpich");
}

/// A communicator through MPI_Comm_c2f and back through MPI_Comm_f2c: w->w+1 12 B; 1
/// Allreduce per rank.
fn fortran_handle_and_back(mpi: &str) {
    let want = (0..N).map(|w| (w, (w + 1) % N, 1, 12)).collect();
    phase(mpi, "f2c", want, N as u64);
}

#[test]
fn fortran_handle_and_back_openmpi() {
    fortran_handle_and_back("openmpi");
}

#[test]
fn fortran_handle_and_back_mpich() {
    fortran_handle_and_back("mpich");
}
