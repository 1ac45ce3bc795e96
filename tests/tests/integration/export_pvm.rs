//! The exports of a real PVM job, read by the same real readers as the MPI and threads
//! ones (the checkers of export.rs, export_perfetto.rs and export_otf2.rs): the Chrome
//! JSON and Perfetto protobuf timelines in the Perfetto UI, pprof, folded stacks, the SVG
//! flame graph and Hatchet's call tree, and the OTF2 archive, which carries PVM calls as
//! regions only (OTF2 has no PVM message events).
//!
//! The job (tests/programs/pvm_master.c, pvm_worker.c): `pvm_master 3 4 10` spawns 3
//! workers; for 4 rounds it pvm_sends each a request and takes each one's reply with a
//! wildcard pvm_recv, the workers running pvm_task (10 ms) in between; then one pvm_mcast
//! to the 3 workers and one pvm_precv from each, answered by pvm_psend. By construction,
//! 30 messages (2*3*4 + 3 + 3); the master makes 12 pvm_send, 15 pvm_recv (12, and one
//! inside each of its 3 pvm_precv), 3 pvm_precv and 1 pvm_mcast; each worker 5 pvm_send
//! (4, and one inside its pvm_psend), 5 pvm_recv (4 requests and the multicast), 1
//! pvm_psend and 4 pvm_task.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::{json, Value};
use tracer_tests::{pvm, tracer};

use super::export::{
    check_chrome_in_perfetto, check_folded, check_hatchet, check_pprof, check_svg, Recorded,
};
use super::export_otf2::{total, Exported};
use super::export_perfetto::{check_perfetto, Recording};

const WORKERS: u64 = 3;
const ROUNDS: u64 = 4;
const MESSAGES: u64 = 2 * WORKERS * ROUNDS + 2 * WORKERS;

fn job() -> Vec<String> {
    pvm(&["3", "4", "10"])
}

/// The PVM calls and pvm_task a task makes by construction, master or worker.
fn calls_of(master: bool) -> BTreeMap<&'static str, u64> {
    let calls: &[(&str, u64)] = if master {
        &[
            ("pvm_send", WORKERS * ROUNDS),
            ("pvm_recv", WORKERS * ROUNDS + WORKERS),
            ("pvm_precv", WORKERS),
            ("pvm_mcast", 1),
        ]
    } else {
        &[
            ("pvm_send", ROUNDS + 1),
            ("pvm_recv", ROUNDS + 1),
            ("pvm_psend", 1),
            ("pvm_task", ROUNDS),
        ]
    };
    calls.iter().copied().collect()
}

/// The same calls over the whole job.
fn calls_of_job() -> BTreeMap<&'static str, u64> {
    let mut all = calls_of(true);
    for (name, n) in calls_of(false) {
        *all.entry(name).or_default() += WORKERS * n;
    }
    all
}

/// The pid of the master task (the launcher's command lines name pvm_master too: the
/// task is the process with a PVM task id).
fn master_pid(trace: &std::path::Path) -> u64 {
    let out = Command::new(tracer())
        .args(["summary", "--json"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let masters: Vec<u64> = summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["command"].as_str().unwrap().contains("pvm_master") && p["pvm_tid"].is_i64())
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(masters.len(), 1, "{summary}");
    masters[0]
}

/// Chrome JSON and Perfetto protobuf of the job in the Perfetto UI: the generic checks
/// (the UI reads every slice, flow, thread and process, no import error, every flow drawn
/// forward, from a departure in a send call to an arrival), and per task the calls the
/// program makes, one message flow per message.
#[test]
fn pvm_chrome_and_perfetto() {
    let r = Recording::new("pvm", &["pvm_task"], &job());
    let master = master_pid(&r.trace);
    let c = check_perfetto(&r, master, "export-pvm-perfetto-proto.png");
    let (json, _) = r.export("chrome", &[]);
    check_chrome_in_perfetto(&json, "export-pvm-perfetto.png");
    let out = Command::new(tracer())
        .args(["analyze", "--json"])
        .arg(&r.trace)
        .output()
        .unwrap();
    let analyze: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(analyze["events"]["lost"], 0);
    assert_eq!(analyze["messages"]["matched"], MESSAGES);
    assert_eq!(analyze["messages"]["unmatched"], 0);

    // The Perfetto UI: the job's calls, and a message flow per message.
    let names = &c.ui["slice_names"];
    for (name, n) in calls_of_job() {
        // pvm_task is on the critical path track too, once per slice of it on the path.
        if name != "pvm_task" {
            assert_eq!(names[name], n, "{name} in the Perfetto UI");
        }
    }
    let flows = c.ui["extra"]["flows"].as_array().unwrap();
    let from = |parent: &str| {
        flows
            .iter()
            .filter(|f| f["out_name"] == "message departure" && f["out_parent"] == parent)
            .count() as u64
    };
    // The multicast's three messages leave from the one pvm_mcast; a pvm_psend's message
    // leaves from it, before the pvm_send it calls.
    assert_eq!(
        [from("pvm_send"), from("pvm_psend"), from("pvm_mcast")],
        [2 * WORKERS * ROUNDS, WORKERS, WORKERS]
    );

    // The Chrome JSON: the tasks by process name, each with its calls on its own track.
    let events = c.chrome["traceEvents"].as_array().unwrap();
    let tasks: BTreeMap<u64, bool> = events
        .iter()
        .filter(|m| m["ph"] == "M" && m["name"] == "process_name")
        .filter_map(|m| {
            let name = m["args"]["name"].as_str().unwrap();
            let command = name.strip_prefix("pvm task 0x")?.split_once(": ")?.1;
            let program = command.split_whitespace().next()?;
            let master = program.ends_with("/pvm_master");
            (master || program.ends_with("/pvm_worker"))
                .then(|| (m["pid"].as_u64().unwrap(), master))
        })
        .collect();
    assert_eq!(tasks.values().filter(|&&m| m).count(), 1, "{tasks:?}");
    assert_eq!(
        tasks.values().filter(|&&m| !m).count() as u64,
        WORKERS,
        "{tasks:?}"
    );
    assert_eq!(tasks.get(&master), Some(&true));
    for (&pid, &is_master) in &tasks {
        let mut got: BTreeMap<&str, u64> = BTreeMap::new();
        for e in events.iter().filter(|e| e["ph"] == "X" && e["pid"] == pid) {
            let name = e["name"].as_str().unwrap();
            if calls_of(is_master).contains_key(name) {
                *got.entry(name).or_default() += 1;
            }
        }
        assert_eq!(got, calls_of(is_master), "task pid {pid}");
    }
    let message = |ph: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == "message")
            .collect()
    };
    let (starts, ends) = (message("s"), message("f"));
    assert_eq!(starts.len() as u64, MESSAGES);
    assert_eq!(ends.len() as u64, MESSAGES);
    let ids =
        |v: &[&Value]| -> BTreeSet<u64> { v.iter().map(|e| e["id"].as_u64().unwrap()).collect() };
    assert_eq!(ids(&starts).len() as u64, MESSAGES);
    assert_eq!(ids(&starts), ids(&ends));
    // Every message goes between the tasks: none from or to the daemon or the launcher.
    assert!(starts
        .iter()
        .chain(&ends)
        .all(|e| tasks.contains_key(&e["pid"].as_u64().unwrap())));
}

/// pprof, folded stacks, the SVG flame graph and Hatchet's tree of the job with `main`
/// and pvm_task selected, each read by its own tool with the report's figures exactly;
/// the workers' main;pvm_task stacks make the path.
#[test]
fn pvm_profiles() {
    let r = Recorded::new("pvm", &["main", "pvm_task"], &job());
    let procedures: BTreeMap<&str, &Value> = r.report["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p))
        .collect();
    assert!(procedures["pvm_task"]["cp_ns"].as_u64().unwrap() > 0);
    assert!(procedures["main"]["cp_ns"].as_u64() >= procedures["pvm_task"]["cp_ns"].as_u64());
    check_pprof(&r);
    check_folded(&r, "main;pvm_task");
    check_svg(&r, "export-pvm-flamegraph.png");
    check_hatchet(&r);
}

/// The OTF2 archive of the job, read by otf2-print and the `otf2` Python module: the
/// common checks (both readers agree, Enters pair with Leaves and equal the Chrome
/// export's slices per thread, time order, the critical-path metric per thread), each
/// task a location group named by its task id and command line, its PVM calls as point-to-point
/// regions of paradigm UNKNOWN with the counts of the program, and no MPI message event.
#[test]
fn pvm_otf2() {
    let e = Exported::new("pvm", &["pvm_task"], &job());
    let printed = e.otf2_print();
    let v = e.python();
    e.check_common(&printed, &v);
    assert_eq!(e.analyze["messages"]["matched"], MESSAGES);
    for region in [
        "pvm_send",
        "pvm_recv",
        "pvm_mcast",
        "pvm_psend",
        "pvm_precv",
    ] {
        assert_eq!(
            v["regions"][region],
            json!(["POINT2POINT", "UNKNOWN"]),
            "{region}"
        );
    }
    assert_eq!(v["regions"]["pvm_task"], json!(["FUNCTION", "USER"]));
    // The tasks' main threads, by their group's name: "pvm task 0x...: COMMAND", as in
    // the Chrome export (processes without a task id are named by their command).
    let (mut masters, mut workers) = (0, 0);
    for (loc, l) in v["locations"].as_object().unwrap() {
        let group = l["group"].as_str().unwrap();
        let Some((_, command)) = group
            .strip_prefix("pvm task 0x")
            .and_then(|rest| rest.split_once(": "))
        else {
            continue;
        };
        let program = command.split_whitespace().next().unwrap();
        let is_master = program.ends_with("/pvm_master");
        if !is_master && !program.ends_with("/pvm_worker") {
            continue;
        }
        if is_master {
            masters += 1;
        } else {
            workers += 1;
        }
        for (region, n) in calls_of(is_master) {
            assert_eq!(l["enters"][region], n, "{region} on {loc} ({command})");
        }
    }
    assert_eq!((masters, workers), (1, WORKERS));
    for kind in [
        "MpiSend",
        "MpiRecv",
        "MpiIsend",
        "MpiIrecv",
        "MpiCollectiveBegin",
    ] {
        assert_eq!(total(&v, kind), 0, "{kind}");
    }
}
