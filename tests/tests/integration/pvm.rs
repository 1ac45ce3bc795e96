//! Tracing a real PVM job: the daemon, the master and the workers it spawns.

use std::collections::HashMap;

use tracer_common::call;
use tracer_tests::{pvm, record};

#[test]
fn pvm_manager_worker() {
    let (workers, rounds) = (3usize, 4usize);
    let cmd = pvm(&[&workers.to_string(), &rounds.to_string()]);
    let t = record("pvm", &[], &cmd);
    assert_eq!(t.lost, 0);
    // Task ids of the master and workers, from pvm_mytid.
    let procs = t.summary["processes"].as_array().unwrap();
    let tid_of = |needle: &str| -> Vec<i64> {
        procs
            .iter()
            .filter(|p| p["command"].as_str().unwrap().contains(needle))
            .filter_map(|p| p["pvm_tid"].as_i64())
            .collect()
    };
    let master = tid_of("pvm_master");
    let worker_tids = tid_of("pvm_worker");
    assert_eq!(master.len(), 1);
    assert_eq!(worker_tids.len(), workers);
    // The launcher script's command line mentions pvm_master too: the task is the process
    // with a PVM task id.
    let master_pid = procs
        .iter()
        .find(|p| p["command"].as_str().unwrap().contains("pvm_master") && p["pvm_tid"].is_i64())
        .unwrap()["pid"]
        .as_u64()
        .unwrap() as u32;

    let calls = t.calls();
    let sends: Vec<_> = calls
        .iter()
        .filter(|c| c.id == call::PVM_SEND && c.pid == master_pid)
        .collect();
    assert_eq!(sends.len(), workers * rounds);
    assert!(sends
        .iter()
        .all(|s| s.entry.tag == 1 && worker_tids.contains(&(s.entry.peer as i64))));
    // The master's wildcard receives: sources are the workers, each exactly ROUNDS times.
    let recvs: Vec<_> = calls
        .iter()
        .filter(|c| c.id == call::PVM_RECV && c.pid == master_pid)
        .collect();
    assert_eq!(recvs.len(), workers * rounds);
    let mut by_source: HashMap<i64, usize> = HashMap::new();
    for r in &recvs {
        assert_eq!(r.entry.peer, -1);
        assert_eq!(r.exit.tag, 2);
        assert_eq!(r.exit.bytes, 8, "two packed ints");
        *by_source.entry(r.exit.peer as i64).or_default() += 1;
    }
    let want: HashMap<i64, usize> = worker_tids.iter().map(|&t| (t, rounds)).collect();
    assert_eq!(by_source, want);
    // Workers receive with a wildcard too; their source is the master.
    let wrecv: Vec<_> = calls
        .iter()
        .filter(|c| c.id == call::PVM_RECV && c.pid != master_pid && c.entry.tag == 1)
        .collect();
    assert_eq!(wrecv.len(), workers * rounds);
    assert!(wrecv.iter().all(|r| r.exit.peer as i64 == master[0]));
    // pvm_mcast names every worker; pvm_precv reports its actual source and length.
    let mcast = calls.iter().find(|c| c.id == call::PVM_MCAST).unwrap();
    assert_eq!(mcast.entry.count as usize, workers);
    assert_eq!(mcast.entry.tag, 4);
    let precv: Vec<_> = calls.iter().filter(|c| c.id == call::PVM_PRECV).collect();
    assert_eq!(precv.len(), workers);
    assert!(precv.iter().all(|r| r.exit.tag == 3
        && r.exit.bytes == 32
        && worker_tids.contains(&(r.exit.peer as i64))));
    let psend: Vec<_> = calls.iter().filter(|c| c.id == call::PVM_PSEND).collect();
    assert_eq!(psend.len(), workers);
    assert!(psend
        .iter()
        .all(|s| s.entry.bytes == 32 && s.entry.peer as i64 == master[0]));
}
