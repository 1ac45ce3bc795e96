//! Communicators the matcher must understand to pair messages and collectives: split with
//! a reordering key and used at once, created from groups, duplicated and split again.
//! Real Open MPI and MPICH jobs under the real tracer; every count follows from the
//! program's construction (see each program's header comment).

use tracer_analysis::Metrics;
use tracer_tests::{mpich, openmpi, record, world_pairs, Traced};

const N: usize = 4;

fn launcher(mpi: &str) -> fn(usize, &str, &[&str]) -> Vec<String> {
    if mpi == "openmpi" {
        openmpi
    } else {
        mpich
    }
}

fn traced(tag: &str, mpi: &str, program: &str, args: &[&str]) -> (Traced, Metrics) {
    let t = record(
        &format!("{tag}-{mpi}"),
        &[],
        &launcher(mpi)(N, program, args),
    );
    assert_eq!(t.lost, 0);
    let m = Metrics::from_items(&t.items, &t.meta);
    (t, m)
}

/// mpi_split_now: world rank w sends ROUNDS messages of 32 bytes to w - 1 (the ring on
/// the reversed communicator) and ROUNDS to w + 2 (its partner in the reversed half);
/// per round 3 collectives per rank (2 Allreduce, 1 Bcast).
fn split_used_at_once(mpi: &str) {
    let rounds = 10u64;
    let (_, m) = traced("split-now", mpi, "mpi_split_now", &["10"]);
    let n = N as i32;
    let mut want: Vec<(i32, i32, u64, u64)> = (0..n)
        .flat_map(|w| {
            [
                (w, (w + n - 1) % n, rounds, 32 * rounds),
                (w, (w + 2) % n, rounds, 32 * rounds),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(world_pairs(&m), want, "the message matrix");
    let s = &m.traffic.matching;
    assert_eq!(s.matched, 2 * rounds * N as u64, "{s:?}");
    assert_eq!((s.unmatched, s.collectives_incomplete), (0, 0), "{s:?}");
    assert_eq!(s.collectives, 3 * rounds * N as u64, "{s:?}");
}

#[test]
fn split_used_at_once_openmpi() {
    split_used_at_once("openmpi");
}

#[test]
fn split_used_at_once_mpich() {
    split_used_at_once("mpich");
}

/// mpi_comm_create: communicators from groups (Comm_create of Group_incl, Comm_dup and
/// Comm_split of it, Comm_create_group of Group_excl) and Cart_create; per round, by world
/// rank: 0->1 40 B; 1->2 16 + 40 B; 1->3 8 + 24 B; 2->1 8 B; 2->3 16 B; 3->1 16 + 24 B;
/// 3->2 8 B; 11 collective exits.
fn created_from_groups(mpi: &str) {
    let r = 10u64;
    let (t, m) = traced("comm-create", mpi, "mpi_comm_create", &["10"]);
    let want = vec![
        (0, 1, r, 40 * r),
        (1, 2, 2 * r, 56 * r),
        (1, 3, 2 * r, 32 * r),
        (2, 1, r, 8 * r),
        (2, 3, r, 16 * r),
        (3, 1, 2 * r, 40 * r),
        (3, 2, r, 8 * r),
    ];
    assert_eq!(world_pairs(&m), want, "the message matrix");
    let s = &m.traffic.matching;
    assert_eq!(s.matched, 10 * r, "{s:?}");
    assert_eq!((s.unmatched, s.collectives_incomplete), (0, 0), "{s:?}");
    assert_eq!(s.collectives, 11 * r, "{s:?}");
    // Every group and creation call was seen: 4 ranks made 3 groups each and called
    // Comm_create and Cart_create; world ranks 1-3 called dup, split and create_group.
    for (name, n) in [
        ("MPI_Comm_group", 4),
        ("MPI_Group_incl", 4),
        ("MPI_Group_excl", 4),
        ("MPI_Comm_create", 4),
        ("MPI_Cart_create", 4),
        ("MPI_Comm_dup", 3),
        ("MPI_Comm_split", 3),
        ("MPI_Comm_create_group", 3),
    ] {
        assert_eq!(t.summary["calls"][name], n, "{name}");
    }
}

#[test]
fn created_from_groups_openmpi() {
    created_from_groups("openmpi");
}

#[test]
fn created_from_groups_mpich() {
    created_from_groups("mpich");
}

/// mpi_comm_create_f (Fortran bindings): per round, by world rank: 1->2 16 B; 1->3 8 +
/// 24 B; 2->1 8 B; 2->3 16 B; 3->1 16 + 24 B; 3->2 8 B; 5 collective exits.
fn fortran_created_from_a_group(mpi: &str) {
    let r = 6u64;
    let (t, m) = traced("comm-create-f", mpi, "mpi_comm_create_f", &["6"]);
    let want = vec![
        (1, 2, r, 16 * r),
        (1, 3, 2 * r, 32 * r),
        (2, 1, r, 8 * r),
        (2, 3, r, 16 * r),
        (3, 1, 2 * r, 40 * r),
        (3, 2, r, 8 * r),
    ];
    assert_eq!(world_pairs(&m), want, "the message matrix");
    let s = &m.traffic.matching;
    assert_eq!((s.matched, s.unmatched), (8 * r, 0), "{s:?}");
    assert_eq!(
        (s.collectives, s.collectives_incomplete),
        (5 * r, 0),
        "{s:?}"
    );
    // The Fortran program imports the group calls under their Fortran names: they were
    // probed on demand.
    for (name, n) in [
        ("MPI_Comm_group", 4),
        ("MPI_Group_incl", 4),
        ("MPI_Comm_create", 4),
    ] {
        assert_eq!(t.summary["calls"][name], n, "{name}");
    }
}

#[test]
fn fortran_created_from_a_group_openmpi() {
    fortran_created_from_a_group("openmpi");
}

#[test]
fn fortran_created_from_a_group_mpich() {
    fortran_created_from_a_group("mpich");
}
