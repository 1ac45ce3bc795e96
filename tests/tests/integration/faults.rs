//! Faults in the traced job are reported, not guessed over (docs/reliability.md): a rank
//! that SIGKILLs itself mid-run (tests/programs/mpi_killed.c) is named in the profile and
//! the report with its signal, its unreceived messages and the collective it never
//! entered, and the analysis of every other rank goes on. Open MPI's mpirun then ends the
//! other ranks with SIGTERM, MPICH's launcher with SIGKILL.

use std::process::Command;

use serde_json::Value;
use tracer_tests::profile::tracer_json;
use tracer_tests::{mpich, openmpi, read_recording, tracer};

const RANKS: usize = 4;
const ROUNDS: usize = 5;
const VICTIM: i64 = 2;

fn killed_rank(mpi: &str) {
    let dir = std::env::temp_dir().join(format!("tracer-faults-{}-{mpi}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rec, online) = (dir.join("r.trace"), dir.join("profile.json"));
    let args = [ROUNDS.to_string(), VICTIM.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let command = if mpi == "openmpi" {
        openmpi(RANKS, "mpi_killed", &args)
    } else {
        mpich(RANKS, "mpi_killed", &args)
    };
    let out = Command::new(tracer())
        .args(["record", "-q", "-o"])
        .arg(&rec)
        .arg("--profile-json")
        .arg(&online)
        .arg("--")
        .args(&command)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The launcher fails (Open MPI: 137, MPICH: 9) and the tracer passes its status on;
    // 1 would be an error of the tracer itself.
    let code = out.status.code();
    assert!(
        code.is_some_and(|c| c != 0 && c != 1),
        "status {code:?}\n{stderr}"
    );
    let online: Value = serde_json::from_slice(&std::fs::read(&online).unwrap()).unwrap();
    let offline = tracer_json(&["analyze"], &rec);
    let report = tracer_json(&["report"], &rec);
    let text = Command::new(tracer())
        .arg("analyze")
        .arg(&rec)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let t = read_recording(&rec);
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("profile: {online:#}");

    assert_eq!(online, offline, "online and offline profiles differ");
    assert_eq!(t.lost, 0);
    assert_eq!(online["events"]["lost"], 0);
    let ranks = t.ranks();
    let victim = *ranks.iter().find(|(_, &r)| r == VICTIM).unwrap().0;

    // The dead rank, first in order of death, with what it left undone.
    let killed = online["killed"].as_array().expect("killed processes");
    let first = &killed[0];
    assert_eq!(first["pid"], victim);
    assert_eq!(first["rank"], VICTIM);
    assert_eq!(first["signal"], 9);
    assert_eq!(first["signal_name"], "SIGKILL");
    assert_eq!(first["sends_unreceived"], 3, "its tag 99 sends to rank 0");
    assert_eq!(first["sends_to_it_unreceived"], 1, "rank 1's tag 98 send");
    assert_eq!(
        first["collectives_incomplete"], 1,
        "the barrier it never entered"
    );
    assert!(first["command"].as_str().unwrap().contains("mpi_killed"));
    // The launcher ends the others afterwards, each named too, in order of death.
    let others_signal = if mpi == "openmpi" { 15 } else { 9 };
    assert_eq!(killed.len(), RANKS, "{killed:#?}");
    for w in killed.windows(2) {
        assert!(w[0]["at_ns"].as_u64() <= w[1]["at_ns"].as_u64());
    }
    for k in &killed[1..] {
        assert_eq!(k["signal"], others_signal, "{k}");
        assert_eq!(k["collectives_incomplete"], 1, "{k}");
        let (rank, from, to) = (
            &k["rank"],
            &k["sends_unreceived"],
            &k["sends_to_it_unreceived"],
        );
        match rank.as_i64().unwrap() {
            0 => assert_eq!((from, to), (&0.into(), &3.into()), "{k}"),
            1 => assert_eq!((from, to), (&1.into(), &0.into()), "{k}"),
            3 => assert_eq!((from, to), (&0.into(), &0.into()), "{k}"),
            r => panic!("rank {r} killed twice: {killed:#?}"),
        }
    }
    assert_eq!(
        report["killed"], online["killed"],
        "the report names them too"
    );
    assert!(
        text.contains(&format!(
            "killed: pid {victim} rank {VICTIM} by SIGKILL (9) at "
        )) && text.contains("sends never received: 3 from it, 1 to it; incomplete collectives: 1"),
        "{text}"
    );

    // Every other message is there and matched: the ring's ROUNDS*N, and the 4 sends
    // nobody received; the analysis went on (a path through the ranks).
    let m = &online["messages"];
    assert_eq!(m["sent"], ROUNDS * RANKS + 4);
    assert_eq!(m["received"], ROUNDS * RANKS);
    assert_eq!(m["matched"], ROUNDS * RANKS);
    assert_eq!(m["unmatched"], 4);
    assert_eq!(t.summary["calls"]["MPI_Send"], ROUNDS * RANKS + 4);
    assert_eq!(t.summary["calls"]["MPI_Recv"], ROUNDS * RANKS);
    assert!(online["critical_path"]["length_ns"].as_u64().unwrap() > 0);
    let ends_in = online["critical_path"]["ends_in_pid"].as_u64().unwrap() as u32;
    assert!(ranks.contains_key(&ends_in), "the path ends in a rank");
    assert_eq!(
        report["critical_path"]["length_ns"],
        online["critical_path"]["length_ns"]
    );
}

#[test]
fn killed_rank_openmpi() {
    killed_rank("openmpi");
}

#[test]
fn killed_rank_mpich() {
    killed_rank("mpich");
}
