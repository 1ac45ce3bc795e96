//! Communicators the matcher must understand to pair messages and collectives: split with
//! a reordering key and used at once, created from groups, duplicated and split again.
//! Real Open MPI and MPICH jobs under the real tracer; every count follows from the
//! program's construction (see each program's header comment).

use tracer_tests::{mpich, openmpi, record, Traced};
use tracer_user::metrics::Metrics;

const N: usize = 4;

fn launcher(mpi: &str) -> fn(usize, &str, &[&str]) -> Vec<String> {
    if mpi == "openmpi" {
        openmpi
    } else {
        mpich
    }
}

/// The message matrix by world rank: (from, to, messages, bytes), sorted.
fn world_pairs(m: &Metrics) -> Vec<(i32, i32, u64, u64)> {
    let mut v: Vec<(i32, i32, u64, u64)> = m
        .traffic
        .processes
        .iter()
        .map(|p| {
            (
                p.from_rank.expect("sender's world rank"),
                p.to_rank.expect("receiver's world rank"),
                p.messages,
                p.bytes,
            )
        })
        .collect();
    v.sort();
    v
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
