use super::build::*;
use super::types::*;
use crate::graph::path::{Activity, OUTSIDE};

/// A ping-pong path: `iterations` x (sliver of work on tid 1, tid 2 waits in
/// MPI_Recv, sliver on tid 2, tid 1 waits in MPI_Allreduce), the work of iteration
/// `i` starting at 1 s + i us (tid 1) and half a microsecond later (tid 2).
fn ping_pong(iterations: u64) -> Vec<Activity> {
    let work = |tid: u32, start_ns: u64| Activity::Work {
        pid: tid,
        tid,
        procedure: OUTSIDE.into(),
        start_ns,
        end_ns: start_ns + 10,
        work_ns: 10,
    };
    let wait = |from_tid: u32, to_tid: u32, call: &str| Activity::Wait {
        from_pid: from_tid,
        from_tid,
        to_pid: to_tid,
        to_tid,
        call: call.into(),
        latency_ns: 100,
    };
    (0..iterations)
        .flat_map(|i| {
            let t = 1_000_000_000 + i * 1000;
            [
                work(1, t),
                wait(1, 2, "MPI_Recv"),
                work(2, t + 500),
                wait(2, 1, "MPI_Allreduce"),
            ]
        })
        .collect()
}

#[test]
fn phases_of_a_long_path_are_found_fast_with_each_occurrence_s_own_start() {
    // 200,000 activities; every work is a sliver (10 ns of 1 ms), so the string is
    // the waits only: MPI_Recv, MPI_Allreduce, over and over.
    let acts = ping_pong(50_000);
    assert_eq!(acts.len(), 200_000);
    let length = 50_000 * 20;
    let started = std::time::Instant::now();
    let phases = phase_rows(&acts, length, &ReportOptions::default());
    let took = started.elapsed();
    // The longest pattern allowed (16 waits, 8 iterations) ranks first: 100,000
    // waits hold 6,250 of it; shifted by one wait it fits once less.
    let recv_allreduce: Vec<String> = ["MPI_Recv", "MPI_Allreduce"]
        .iter()
        .cycle()
        .take(16)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(phases[0].pattern, recv_allreduce);
    assert_eq!(phases[0].count, 6250);
    assert_eq!(phases[0].score, 6250 * 16 * 16);
    // Occurrence k starts at wait 16k, the MPI_Recv of iteration 8k, which ends
    // when tid 2's work of that iteration starts.
    let expected: Vec<u64> = (0..6250)
        .map(|k| 1_000_000_000 + 8 * k * 1000 + 500)
        .collect();
    assert_eq!(phases[0].starts_ns, expected);
    assert_eq!(phases[1].pattern[0], "MPI_Allreduce");
    assert_eq!(phases[1].pattern.len(), 16);
    assert_eq!(phases[1].count, 6249);
    // Occurrence k: the MPI_Allreduce of iteration 8k, then tid 1's next work.
    let expected: Vec<u64> = (0..6249)
        .map(|k| 1_000_000_000 + (8 * k + 1) * 1000)
        .collect();
    assert_eq!(phases[1].starts_ns, expected);
    for p in &phases {
        assert!(
            p.starts_ns.windows(2).all(|w| w[0] < w[1]),
            "{:?} x {}: starts not distinct and ascending",
            p.pattern,
            p.count
        );
    }
    // Was 45 s for a path of this kind (OSU latency); linear now, with room for an
    // unoptimized build on a busy machine.
    assert!(took.as_secs() < 10, "took {took:?}");
}

#[test]
fn procedure_rows_are_named_demangled_with_their_symbol() {
    use crate::analysis::workclock::ClockKind;
    use crate::graph::recorded::RecordedGraph;
    let symbols = ["_ZN9LAMMPS_NS9PairLJCut7computeEii", "stage_c"];
    let items = crate::format::synth::pipeline(&symbols).items;
    let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
    let r = Report::new(&rg, &ReportOptions::default(), None);
    let json = serde_json::to_value(&r).unwrap();
    let rows: Vec<(String, Option<String>)> = json["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_string(),
                row.get("symbol").map(|s| s.as_str().unwrap().to_string()),
            )
        })
        .collect();
    let row = |name: &str, symbol: Option<&str>| (name.to_string(), symbol.map(str::to_string));
    // The middle stage (procedure 1, 100 ms a round) holds the path; C names stay.
    assert_eq!(
        rows,
        [
            row("stage_c", Some("stage_c")),
            row("LAMMPS_NS::PairLJCut::compute(int, int)", Some(symbols[0])),
            row(OUTSIDE, None),
        ]
    );
    assert!(r
        .text()
        .contains("LAMMPS_NS::PairLJCut::compute(int, int) "));
}
