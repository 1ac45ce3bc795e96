//! `tracer export --format otf2` on real recordings (the Open MPI ring with `--func main`,
//! the threads fork/join program), read back by the OTF2 library's own tools: Debian's
//! `otf2-print` (event lines per type and location) and its Python module `otf2`
//! (tests/readers/otf2_summary.py: definitions, events, and every MPI receive paired with
//! its send by communicator, sender, receiver and tag). Counts are exact: what the
//! programs do by construction, and what our own `analyze`, `report` and Chrome export
//! say of the same recording.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tracer_analysis::chrome::CRITICAL_PID;
use tracer_tests::{openmpi, tracer, tracer_fails};

fn run(args: &[&OsStr]) -> Vec<u8> {
    let out = Command::new(tracer()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A recording, its OTF2 archive, and our own figures of it.
pub(crate) struct Exported {
    dir: PathBuf,
    archive: PathBuf,
    pub(crate) analyze: Value,
    pub(crate) report: Value,
    /// Chrome export slices (calls, procedures, futex waits) per thread.
    chrome_slices: HashMap<u64, u64>,
}

impl Exported {
    pub(crate) fn new(tag: &str, funcs: &[&str], command: &[String]) -> Self {
        let dir = std::env::temp_dir().join(format!("tracer-otf2-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("run.trace");
        let mut args: Vec<std::ffi::OsString> = vec!["record".into(), "-q".into(), "-o".into()];
        args.push(trace.clone().into());
        for f in funcs {
            args.push("--func".into());
            args.push(f.into());
        }
        args.push("--".into());
        args.extend(command.iter().map(Into::into));
        run(&args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
        let archive = dir.join("run.otf2");
        let export = |format: &str, out: &Path| {
            let out = Command::new(tracer())
                .args(["export".as_ref(), trace.as_os_str(), "--format".as_ref()])
                .arg(format)
                .arg("-o")
                .arg(out)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let said = export("otf2", &archive);
        assert!(said.contains("wrote "), "{said}");
        assert!(said.contains("metric \"critical path\""), "{said}");
        let json = dir.join("run.json");
        export("chrome", &json);
        let chrome: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let mut chrome_slices = HashMap::new();
        for e in chrome["traceEvents"].as_array().unwrap() {
            let name = e["name"].as_str().unwrap_or("");
            // Calls, procedures and futex waits, not the flow slices of their own.
            if e["ph"] == "X"
                && e["pid"] != CRITICAL_PID
                && !name.ends_with(" departure")
                && !name.ends_with(" arrival")
            {
                *chrome_slices.entry(e["tid"].as_u64().unwrap()).or_default() += 1;
            }
        }
        let json_of = |args: &[&str]| -> Value {
            let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
            a.push(trace.as_os_str());
            serde_json::from_slice(&run(&a)).unwrap()
        };
        let analyze = json_of(&["analyze", "--json"]);
        let report = json_of(&["report", "--json"]);
        assert_eq!(analyze["events"]["lost"], 0);
        // An existing non-empty OUT is refused, the archive left as it was.
        let (code, err) = tracer_fails(&[
            "export",
            trace.to_str().unwrap(),
            "--format",
            "otf2",
            "-o",
            archive.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("is not an empty directory"), "{err}");
        assert!(archive.join("traces.otf2").exists());
        assert_private(&archive);
        Exported {
            dir,
            archive,
            analyze,
            report,
            chrome_slices,
        }
    }

    fn anchor(&self) -> PathBuf {
        self.archive.join("traces.otf2")
    }

    /// `otf2-print`'s event lines: count per (event type, location).
    pub(crate) fn otf2_print(&self) -> BTreeMap<(String, u64), u64> {
        let out = Command::new("otf2-print")
            .arg(self.anchor())
            .output()
            .expect("otf2-print (Debian otf2-tools; `cargo xtask setup` installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut counts = BTreeMap::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let mut words = line.split_whitespace();
            let (Some(kind), Some(loc)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(loc) = loc.parse::<u64>() else {
                continue;
            };
            if kind.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                *counts.entry((kind.to_string(), loc)).or_default() += 1;
            }
        }
        counts
    }

    /// What the `otf2` Python module reads (tests/readers/otf2_summary.py).
    pub(crate) fn python(&self) -> Value {
        let out = Command::new("/usr/bin/python3")
            .arg(tracer_tests::root().join("tests/readers/otf2_summary.py"))
            .arg(self.anchor())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "python3-otf2 (Debian; `cargo xtask setup` installs it): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The checks every archive passes: both readers agree; every location's Enters and
    /// Leaves pair up by region and equal the Chrome export's slices of that thread;
    /// events are in time order; the clock is in ns; the critical-path metric of every
    /// thread ends at the report's figure for it, and they add up to the path.
    pub(crate) fn check_common(&self, otf2_print: &BTreeMap<(String, u64), u64>, v: &Value) {
        assert_eq!(v["clock"]["resolution"], 1_000_000_000u64);
        assert_eq!(v["out_of_order"], 0);
        assert_eq!(v["metrics"], serde_json::json!(["critical path"]));
        let locations = v["locations"].as_object().unwrap();
        let by_print = |kind: &str, loc: u64| otf2_print.get(&(kind.into(), loc)).copied();
        let python_names = [
            ("ENTER", "Enter"),
            ("LEAVE", "Leave"),
            ("MPI_SEND", "MpiSend"),
            ("MPI_RECV", "MpiRecv"),
            ("MPI_ISEND", "MpiIsend"),
            ("MPI_IRECV", "MpiIrecv"),
            ("THREAD_CREATE", "ThreadCreate"),
            ("THREAD_BEGIN", "ThreadBegin"),
            ("THREAD_END", "ThreadEnd"),
            ("METRIC", "Metric"),
        ];
        let mut cp_sum = 0;
        for (tid, l) in locations {
            let tid_n: u64 = tid.parse().unwrap();
            for (print, python) in python_names {
                assert_eq!(
                    by_print(print, tid_n).unwrap_or(0),
                    l["events"][python].as_u64().unwrap_or(0),
                    "{print} on {tid}"
                );
            }
            assert_eq!(l["enters"], l["leaves"], "location {tid}");
            assert_eq!(
                l["events"]["Enter"].as_u64().unwrap_or(0),
                self.chrome_slices.get(&tid_n).copied().unwrap_or(0),
                "Enters of {tid} against the Chrome export's slices"
            );
            let cp = l["critical_path_ns"].as_u64().unwrap();
            let ours = self.report["threads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["tid"].as_u64() == Some(tid_n))
                .map_or(0, |t| t["cp_ns"].as_u64().unwrap());
            assert_eq!(cp, ours, "critical path of {tid}");
            cp_sum += cp;
        }
        assert_eq!(
            cp_sum,
            self.report["critical_path"]["length_ns"].as_u64().unwrap()
        );
        assert!(cp_sum > 0);
        // Every location with events is one the definitions name, and the reverse.
        let with_events: BTreeSet<u64> = otf2_print.keys().map(|k| k.1).collect();
        let defined: BTreeSet<u64> = locations.keys().map(|t| t.parse().unwrap()).collect();
        assert_eq!(with_events, defined);
        // Thread lifecycle: each creation begins exactly one thread of that contingent.
        let t = &v["threads"];
        assert_eq!(t["created"], t["begun"]);
        assert_eq!(t["created"], t["created_and_begun"]);
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sum of one event type over all locations.
pub(crate) fn total(v: &Value, kind: &str) -> u64 {
    v["locations"]
        .as_object()
        .unwrap()
        .values()
        .map(|l| l["events"][kind].as_u64().unwrap_or(0))
        .sum()
}

const N: usize = 4;
const ROUNDS: u64 = 10;

#[test]
fn ring_openmpi_otf2() {
    let e = Exported::new("ring", &["main"], &openmpi(N, "mpi_ring", &["10", "256"]));
    let printed = e.otf2_print();
    let v = e.python();
    e.check_common(&printed, &v);

    // Definitions: the four ranks as location groups, MPI_COMM_WORLD, the regions with
    // their roles and paradigms.
    let ranks: Vec<&str> = v["location_groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str().filter(|n| n.starts_with("rank ")))
        .collect();
    assert_eq!(ranks.len(), N, "{ranks:?}");
    for r in 0..N {
        assert!(ranks.iter().any(|n| n.starts_with(&format!("rank {r}: "))));
    }
    assert!(v["comms"]
        .as_array()
        .unwrap()
        .contains(&"MPI_COMM_WORLD".into()));
    assert_eq!(
        v["regions"]["MPI_Send"],
        serde_json::json!(["POINT2POINT", "MPI"])
    );
    assert_eq!(
        v["regions"]["MPI_Recv"],
        serde_json::json!(["POINT2POINT", "MPI"])
    );
    assert_eq!(
        v["regions"]["main"],
        serde_json::json!(["FUNCTION", "USER"])
    );
    assert_eq!(
        v["regions"]["futex wait"],
        serde_json::json!(["THREAD_WAIT", "PTHREAD"])
    );

    // Each rank's main thread: one main, one MPI_Init and MPI_Finalize, ROUNDS sends and
    // receives, as Enters and as MPI events (otf2-print's lines).
    let mut rank_locations = 0;
    for (tid, l) in v["locations"].as_object().unwrap() {
        if !l["group"].as_str().unwrap().starts_with("rank ") || l["enters"]["main"].is_null() {
            continue;
        }
        rank_locations += 1;
        let tid: u64 = tid.parse().unwrap();
        for (region, n) in [
            ("main", 1),
            ("MPI_Init", 1),
            ("MPI_Finalize", 1),
            ("MPI_Send", ROUNDS),
            ("MPI_Recv", ROUNDS),
        ] {
            assert_eq!(l["enters"][region], n, "{region} on {tid}");
        }
        assert_eq!(printed[&("MPI_SEND".to_string(), tid)], ROUNDS);
        assert_eq!(printed[&("MPI_RECV".to_string(), tid)], ROUNDS);
    }
    assert_eq!(rank_locations, N);

    // Messages: exactly ours, every receive paired with its send by (comm, sender,
    // receiver, tag), with the same length.
    let ours = &e.analyze["messages"];
    assert_eq!(ours["matched"], N as u64 * ROUNDS);
    assert_eq!(total(&v, "MpiSend"), ours["sent"].as_u64().unwrap());
    assert_eq!(total(&v, "MpiRecv"), ours["received"].as_u64().unwrap());
    assert_eq!(v["messages"]["matched"], ours["matched"]);
    assert_eq!(v["messages"]["same_length"], ours["matched"]);
    assert_eq!(v["messages"]["unmatched_receives"], 0);
    assert_eq!(v["messages"]["unmatched_sends"], 0);
    assert_eq!(total(&v, "MpiCollectiveBegin"), 0);
}

/// threads_forkjoin 5 3 40 10 10: main creates 3 workers per stage for 5 stages and
/// joins each (tests/programs/threads_forkjoin.c).
#[test]
fn forkjoin_threads_otf2() {
    const STAGES: u64 = 5;
    const WORKERS: u64 = 3;
    let e = Exported::new(
        "forkjoin",
        &["main", "serial_part", "stage_slow", "stage_work"],
        &[
            tracer_tests::program("threads_forkjoin"),
            "5".into(),
            "3".into(),
            "40".into(),
            "10".into(),
            "10".into(),
        ],
    );
    let printed = e.otf2_print();
    let v = e.python();
    e.check_common(&printed, &v);
    let locations = v["locations"].as_object().unwrap();
    assert_eq!(locations.len() as u64, 1 + STAGES * WORKERS);
    let main = locations
        .values()
        .find(|l| l["enters"]["main"] == 1)
        .expect("main's location");
    assert_eq!(main["events"]["ThreadCreate"], STAGES * WORKERS);
    assert_eq!(main["enters"]["pthread_create"], STAGES * WORKERS);
    assert_eq!(main["enters"]["pthread_join"], STAGES * WORKERS);
    assert_eq!(main["enters"]["serial_part"], STAGES);
    let t = &v["threads"];
    assert_eq!(t["created"], STAGES * WORKERS);
    assert_eq!(t["begun"], STAGES * WORKERS);
    assert_eq!(t["ended"], STAGES * WORKERS);
    let workers: Vec<&Value> = locations
        .values()
        .filter(|l| l["events"]["ThreadBegin"] == 1)
        .collect();
    assert_eq!(workers.len() as u64, STAGES * WORKERS);
    let slow: u64 = workers
        .iter()
        .map(|l| l["enters"]["stage_slow"].as_u64().unwrap_or(0))
        .sum();
    let work: u64 = workers
        .iter()
        .map(|l| l["enters"]["stage_work"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!((slow, work), (STAGES, STAGES * (WORKERS - 1)));
    assert_eq!(total(&v, "MpiSend") + total(&v, "MpiRecv"), 0);
    assert!(v["comms"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c.as_str().unwrap().starts_with("threads of ")));
}

/// Nonblocking point-to-point (tests/programs/mpi_nonblocking.c: Isend/Irecv completed
/// by Wait, Waitall and a Test loop) and blocking collectives
/// (tests/programs/mpi_collectives.c): request events pair up, every receive matches its
/// send, and the collective events equal the collectives `tracer analyze` counts.
#[test]
fn nonblocking_and_collectives_openmpi_otf2() {
    let nb = Exported::new("nonblocking", &[], &openmpi(2, "mpi_nonblocking", &[]));
    let printed = nb.otf2_print();
    let v = nb.python();
    nb.check_common(&printed, &v);
    let ours = &nb.analyze["messages"];
    assert!(ours["matched"].as_u64().unwrap() > 0);
    assert_eq!(total(&v, "MpiIsend"), ours["sent"].as_u64().unwrap());
    assert_eq!(total(&v, "MpiIrecv"), ours["received"].as_u64().unwrap());
    assert_eq!(total(&v, "MpiIsendComplete"), total(&v, "MpiIsend"));
    assert_eq!(total(&v, "MpiIrecvRequest"), total(&v, "MpiIrecv"));
    assert_eq!(v["messages"]["matched"], ours["matched"]);
    assert_eq!(v["messages"]["same_length"], ours["matched"]);
    assert_eq!(v["messages"]["unmatched_receives"], 0);
    assert_eq!(v["messages"]["unmatched_sends"], 0);
    drop(nb);

    let coll = Exported::new("collectives", &[], &openmpi(N, "mpi_collectives", &[]));
    let printed = coll.otf2_print();
    let v = coll.python();
    coll.check_common(&printed, &v);
    let collectives = coll.analyze["messages"]["collectives"].as_u64().unwrap();
    assert!(collectives > 0);
    assert_eq!(total(&v, "MpiCollectiveBegin"), collectives);
    assert_eq!(total(&v, "MpiCollectiveEnd"), collectives);
    assert_eq!(
        v["regions"]["MPI_Barrier"],
        serde_json::json!(["BARRIER", "MPI"])
    );
    assert_eq!(
        v["regions"]["MPI_Bcast"],
        serde_json::json!(["COLL_ONE2ALL", "MPI"])
    );
    assert_eq!(
        v["messages"]["matched"],
        coll.analyze["messages"]["matched"]
    );
    assert_eq!(v["messages"]["unmatched_receives"], 0);
}

/// Blocking, nonblocking and persistent sends (tests/programs/mpi_more_calls.c, 3 rounds
/// on 4 ranks: per rank and round, an MPI_Sendrecv_replace; a persistent send and receive
/// started by MPI_Startall and completed by MPI_Waitsome; an Isend/Irecv pair completed
/// by MPI_Testall after an Irecv that was cancelled; an Isend whose message is found by
/// MPI_Probe and received by MPI_Recv; an Isend/Irecv pair completed by MPI_Testsome):
/// the archive's MPI sends and receives, as otf2-print reads them, are the 60 messages
/// the program sends and `tracer analyze` matches, every receive paired with its send.
#[test]
fn blocking_nonblocking_and_persistent_sends_openmpi_otf2() {
    const RANKS: u64 = 4;
    const MORE_ROUNDS: u64 = 3;
    const MESSAGES: u64 = 5 * RANKS * MORE_ROUNDS;
    let e = Exported::new(
        "more-calls",
        &[],
        &openmpi(RANKS as usize, "mpi_more_calls", &["3"]),
    );
    let printed = e.otf2_print();
    let v = e.python();
    e.check_common(&printed, &v);
    let printed_total = |kind: &str| -> u64 {
        printed
            .iter()
            .filter(|((k, _), _)| k == kind)
            .map(|(_, n)| n)
            .sum()
    };
    let ours = &e.analyze["messages"];
    assert_eq!(ours["matched"], MESSAGES);
    assert_eq!(ours["unmatched"], 0);
    assert_eq!(e.report["messages"]["matched"], MESSAGES, "report --json");
    // Sendrecv_replace's send; the persistent send's start and the three Isends.
    assert_eq!(printed_total("MPI_SEND"), RANKS * MORE_ROUNDS);
    assert_eq!(printed_total("MPI_ISEND"), 4 * RANKS * MORE_ROUNDS);
    assert_eq!(
        printed_total("MPI_SEND") + printed_total("MPI_ISEND"),
        MESSAGES
    );
    // Sendrecv_replace's receive and the probed message's MPI_Recv; the persistent
    // receive and the two Irecvs that were not cancelled.
    assert_eq!(printed_total("MPI_RECV"), 2 * RANKS * MORE_ROUNDS);
    assert_eq!(printed_total("MPI_IRECV"), 3 * RANKS * MORE_ROUNDS);
    assert_eq!(
        printed_total("MPI_RECV") + printed_total("MPI_IRECV"),
        MESSAGES
    );
    // Every started send completes; every receive request posted (the cancelled one
    // too) but the cancelled ones receives.
    assert_eq!(
        printed_total("MPI_ISEND_COMPLETE"),
        printed_total("MPI_ISEND")
    );
    assert_eq!(
        printed_total("MPI_IRECV_REQUEST"),
        printed_total("MPI_IRECV") + RANKS * MORE_ROUNDS
    );
    assert_eq!(v["messages"]["matched"], MESSAGES);
    assert_eq!(v["messages"]["same_length"], MESSAGES);
    assert_eq!(v["messages"]["unmatched_receives"], 0);
    assert_eq!(v["messages"]["unmatched_sends"], 0);
}

/// Every directory of the archive is mode 0700 and every file 0600, as every output of
/// the tracer (libotf2 creates them with the umask's modes).
fn assert_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            assert_private(&path);
        } else {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
}
