//! `tracer export --format chrome` on a real Open MPI ring (4 ranks, 10 rounds): the
//! timeline holds exactly the calls and messages the program makes by construction,
//! names its ranks, and its critical path track adds up to what `tracer analyze` finds.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;
use tracer_analysis::export::chrome::CRITICAL_PID;
use tracer_tests::{openmpi, tracer};

const N: usize = 4;
const ROUNDS: usize = 10;

fn run(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new(tracer()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn ring_openmpi_chrome_timeline() {
    let dir = std::env::temp_dir().join(format!("tracer-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("ring.trace");
    let json = dir.join("ring.json");
    let mut record: Vec<std::ffi::OsString> = vec!["record".into(), "-q".into(), "-o".into()];
    record.push(rec.clone().into());
    record.push("--".into());
    record.extend(
        openmpi(N, "mpi_ring", &["10", "256"])
            .into_iter()
            .map(Into::into),
    );
    let record: Vec<&std::ffi::OsStr> = record.iter().map(|s| s.as_os_str()).collect();
    run(&record);
    run(&[
        "export".as_ref(),
        rec.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
        "-o".as_ref(),
        json.as_os_str(),
    ]);
    let profile: Value = serde_json::from_slice(&run(&[
        "analyze".as_ref(),
        "--json".as_ref(),
        rec.as_os_str(),
    ]))
    .unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("valid JSON");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(profile["events"]["lost"], 0);

    let events = v["traceEvents"].as_array().unwrap();
    let of = |ph: &str| -> Vec<&Value> { events.iter().filter(|e| e["ph"] == ph).collect() };

    // Ranks: exactly four processes named "rank 0".."rank 3", one pid each.
    let mut rank_pids: HashMap<u64, u64> = HashMap::new();
    for m in of("M") {
        if m["name"] != "process_name" {
            continue;
        }
        let name = m["args"]["name"].as_str().unwrap();
        if let Some(rest) = name.strip_prefix("rank ") {
            let rank: u64 = rest.split(':').next().unwrap().parse().unwrap();
            assert!(
                rank_pids.insert(rank, m["pid"].as_u64().unwrap()).is_none(),
                "rank {rank} named twice"
            );
            assert!(name.contains("mpi_ring.openmpi 10 256"), "{name}");
        }
    }
    assert_eq!(
        rank_pids.keys().copied().collect::<BTreeSet<_>>(),
        (0..N as u64).collect::<BTreeSet<_>>()
    );
    let ranks: BTreeSet<u64> = rank_pids.values().copied().collect();

    // Calls: every MPI_Send and MPI_Recv of the program, on the rank's own track.
    let slices = of("X");
    let count = |name: &str| {
        let calls: Vec<&&Value> = slices
            .iter()
            .filter(|s| s["name"] == name && s["pid"] != CRITICAL_PID)
            .collect();
        assert!(calls
            .iter()
            .all(|s| ranks.contains(&s["pid"].as_u64().unwrap())));
        calls.len()
    };
    assert_eq!(count("MPI_Send"), N * ROUNDS);
    assert_eq!(count("MPI_Recv"), N * ROUNDS);
    assert_eq!(count("MPI_Init"), N);
    assert_eq!(count("MPI_Finalize"), N);

    // Messages: one flow per matched message, ids paired, from a send to a receive (the
    // other flows are the runtime's threads: creation and wakeups).
    let matched = profile["messages"]["matched"].as_u64().unwrap() as usize;
    assert_eq!(matched, N * ROUNDS);
    let message_flows = |ph: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == "message")
            .collect()
    };
    let (starts, ends) = (message_flows("s"), message_flows("f"));
    assert_eq!(starts.len(), matched);
    assert_eq!(ends.len(), matched);
    let ids =
        |v: &[&Value]| -> BTreeSet<u64> { v.iter().map(|e| e["id"].as_u64().unwrap()).collect() };
    assert_eq!(ids(&starts).len(), matched);
    assert_eq!(ids(&starts), ids(&ends));
    let enclosing = |e: &Value, name: &str| {
        let ts = e["ts"].as_f64().unwrap();
        slices.iter().any(|s| {
            let start = s["ts"].as_f64().unwrap();
            s["tid"] == e["tid"]
                && s["name"] == name
                && start < ts
                && ts < start + s["dur"].as_f64().unwrap()
        })
    };
    assert!(starts.iter().all(|s| enclosing(s, "MPI_Send")));
    assert!(ends
        .iter()
        .all(|f| enclosing(f, "MPI_Recv") && f["bp"] == "e"));

    // The critical path track adds up to the profile's critical path.
    let length = profile["critical_path"]["length_ns"].as_u64().unwrap();
    let work: u64 = slices
        .iter()
        .filter(|s| s["pid"] == CRITICAL_PID)
        .map(|s| s["args"]["work_ns"].as_u64().unwrap())
        .sum();
    assert!(length > 0);
    assert_eq!(work, length);
    assert_eq!(v["otherData"]["critical_path_ns"], length);
}

#[test]
fn corrupt_recording_is_one_line_and_no_output() {
    let dir = std::env::temp_dir().join(format!("tracer-export-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.trace");
    let out = dir.join("out.json");
    std::fs::write(&junk, b"not a recording at all").unwrap();
    let (code, err) = tracer_tests::tracer_fails(&[
        "export",
        junk.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not a recording"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
