//! Classes of traffic found unmatched in real applications (issue 38), one phase of
//! tests/programs/mpi_classes.c per test, traced under Open MPI and MPICH with 4 ranks:
//! every message matched, the exact message matrix, every collective complete. The
//! counts follow from the program's construction (its header comment).

use tracer_analysis::metrics::Metrics;
use tracer_tests::{mpich, openmpi, record, world_pairs, Traced};

const N: i32 = 4;
const ROUNDS: u64 = 6;

/// Traces `mpi_classes PHASE ROUNDS` and checks what every phase must give: no lost
/// events, the matrix `want` (per round; sorted here), every message matched and
/// `collectives` collective exits (per round, over all ranks) all complete.
fn phase(mpi: &str, name: &str, want: Vec<(i32, i32, u64, u64)>, collectives: u64) -> Traced {
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
