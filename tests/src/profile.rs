//! Known-answer critical path runs: record a program with `tracer record`, and check
//! that the online profile, `tracer analyze` and `tracer report` agree on the recording.
//!
//! Tolerance: 5 % of the expected value or 10 ms, whichever is larger.

use serde_json::Value;

use crate::tracer;

pub struct Run {
    pub online: Value,
    pub offline: Value,
    /// `tracer report --json` on the recording.
    pub report: Value,
    /// What the traced command printed on its standard output (`record -q` prints nothing
    /// there itself): programs whose answer depends on the machine print it.
    pub stdout: String,
}

pub fn tracer_json(args: &[&str], file: &std::path::Path) -> Value {
    let out = std::process::Command::new(tracer())
        .args(args)
        .arg("--json")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The offline report agrees with the online profile: the same length, and per
/// procedure the same share and zeroing value; the path's activities add up to its
/// length; what-if with the top procedure scaled to 0 predicts the zeroing value.
pub fn check_report(online: &Value, report: &Value, rec: &std::path::Path) {
    let len = online["critical_path"]["length_ns"].as_u64().unwrap();
    assert_eq!(report["critical_path"]["length_ns"], len, "report length");
    let work: u64 = report["activities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "work")
        .map(|a| a["work_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(work, len, "the path's activities add up to its length");
    let paths = report["near_critical_paths"].as_array().unwrap();
    assert_eq!(paths[0]["length_ns"], len);
    assert!(paths
        .windows(2)
        .all(|w| w[0]["length_ns"].as_u64() >= w[1]["length_ns"].as_u64()));
    for row in online["procedures"].as_array().unwrap() {
        let r = proc_row(report, row["name"].as_str().unwrap());
        assert_eq!(r["cp_ns"], row["cp_ns"], "{}: share", row["name"]);
        assert_eq!(
            r["zeroing_ns"], row["zeroing_ns"],
            "{}: zeroing",
            row["name"]
        );
        let (mbm, zero) = (r["mbm_ns"].as_u64(), r["zeroing_ns"].as_u64());
        assert!(
            mbm >= zero && mbm <= r["cp_ns"].as_u64(),
            "{}: mbm {r}",
            row["name"]
        );
    }
    check_threads(online, report);
    if let Some(top) = online["procedures"][0]["name"].as_str() {
        let scale = format!("{top}=0");
        let w = tracer_json(&["report", "--scale", &scale], rec);
        let zeroing = online["procedures"][0]["zeroing_ns"].as_u64().unwrap();
        assert_eq!(
            w["whatif"]["predicted_ns"],
            len - zeroing,
            "what-if {scale}"
        );
    }
}

/// The threads the online path runs through are the report's, each for the same time,
/// and their times add up to the path's length.
fn check_threads(online: &Value, report: &Value) {
    let len = online["critical_path"]["length_ns"].as_u64().unwrap();
    let on_path = |rows: &Value| -> std::collections::BTreeMap<u64, u64> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| (r["tid"].as_u64().unwrap(), r["cp_ns"].as_u64().unwrap()))
            .filter(|&(_, ns)| ns > 0)
            .collect()
    };
    let online_threads = on_path(&online["threads"]);
    assert_eq!(
        online_threads.values().sum::<u64>(),
        len,
        "the threads' times add up to the path: {online_threads:?}"
    );
    assert_eq!(
        online_threads,
        on_path(&report["threads"]),
        "threads on the path (tid: ns), online and in the report"
    );
}

pub fn profile(tag: &str, funcs: &[&str], command: &[String]) -> Run {
    profile_with(tag, &[], funcs, command, &[])
}

/// [`profile`] with more `tracer record` arguments (e.g. `--locks`) and environment
/// variables for the traced command.
pub fn profile_with(
    tag: &str,
    record_args: &[&str],
    funcs: &[&str],
    command: &[String],
    env: &[(&str, &str)],
) -> Run {
    let dir = std::env::temp_dir().join(format!("tracer-cp-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("r.trace");
    let online = dir.join("online.json");
    let summary = dir.join("summary.json");
    let mut cmd = std::process::Command::new(tracer());
    cmd.args(["record", "-q", "-o"])
        .arg(&rec)
        .arg("--profile-json")
        .arg(&online)
        .arg("--summary-json")
        .arg(&summary);
    for f in funcs {
        cmd.args(["--func", f]);
    }
    cmd.args(record_args).envs(env.iter().copied());
    let out = cmd.arg("--").args(command).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offline = std::process::Command::new(tracer())
        .args(["analyze", "--json"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        offline.status.success(),
        "{}",
        String::from_utf8_lossy(&offline.stderr)
    );
    let run = Run {
        online: serde_json::from_slice(&std::fs::read(&online).unwrap()).unwrap(),
        offline: serde_json::from_slice(&offline.stdout).unwrap(),
        report: tracer_json(&["report", "--paths", "20"], &rec),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    };
    check_report(&run.online, &run.report, &rec);
    // Shown only when the test fails: what the tracer saw (procedure entries, calls,
    // processes) next to the profile.
    eprintln!("profile: {:#}", run.online);
    eprintln!("summary: {}", std::fs::read_to_string(&summary).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        run.online, run.offline,
        "online and offline profiles differ"
    );
    assert_eq!(run.online["events"]["lost"], 0);
    run
}

/// The report's diagnosis names `first` in its first finding, and finds each procedure
/// of `off_path` off the critical path.
pub fn assert_diagnosis(report: &Value, first: &[&str], off_path: &[&str]) {
    let d = report["diagnosis"].as_array().unwrap();
    let text = |f: &Value| f["text"].as_str().unwrap().to_string();
    let top = d.first().map(text).unwrap_or_default();
    for name in first {
        assert!(top.contains(name), "first finding names {name}: {d:#?}");
    }
    for name in off_path {
        assert!(
            d.iter()
                .any(|f| f["kind"] == "off_path" && text(f).starts_with(&format!("{name} "))),
            "{name} is found off the path: {d:#?}"
        );
    }
}

pub fn ms(v: &Value) -> f64 {
    v.as_u64().unwrap() as f64 / 1e6
}

pub fn assert_near(what: &str, got: f64, want: f64) {
    let tol = (want * 0.05).max(10.0);
    assert!(
        (got - want).abs() <= tol,
        "{what}: {got:.3} ms, want {want:.3} ms ± {tol:.1}"
    );
}

pub fn proc_row<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {p}"))
}

pub fn length(p: &Value) -> f64 {
    ms(&p["critical_path"]["length_ns"])
}

pub fn all_matched(p: &Value) {
    let corrected = all_matched_some_late(p);
    assert_eq!(
        corrected, 0,
        "no clock put a receive before its send: {}",
        p["messages"]
    );
}

/// Every message matched, some of them (the count returned) after waiting for a send
/// that the nodes' clocks put after the receive (`clock_corrected`).
pub fn all_matched_some_late(p: &Value) -> u64 {
    let m = &p["messages"];
    assert_eq!(m["unmatched"], 0, "{m}");
    assert_eq!(m["sent"], m["matched"], "{m}");
    assert_eq!(m["received"], m["matched"], "{m}");
    assert_eq!(m["collectives_incomplete"], 0, "{m}");
    m["clock_corrected"]
        .as_u64()
        .expect("messages.clock_corrected")
}
