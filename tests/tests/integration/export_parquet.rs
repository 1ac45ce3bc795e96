//! `tracer export --format parquet`: the tables of real recordings (an Open MPI ring
//! with `--func main`, a threads fork/join program, a PVM job) read by two independent
//! readers, pyarrow and DuckDB (tests/readers/parquet_tables.py), which must both find
//! the report's figures exactly: messages matched, the critical path's length as the
//! sum of its work activities, the procedure rows; and the recording's own calls.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;
use tracer_tests::{openmpi, pvm, python, read_recording, root, tracer};

fn run(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new(tracer()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A recording in a directory of its own, its report, and its Parquet export.
struct Exported {
    dir: std::path::PathBuf,
    trace: std::path::PathBuf,
    report: Value,
    tables: std::path::PathBuf,
    /// What `tracer export` said on standard error.
    said: String,
}

impl Exported {
    fn new(tag: &str, funcs: &[&str], command: &[String]) -> Self {
        let dir = std::env::temp_dir().join(format!("tracer-parquet-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
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
        let tables = dir.join("tables");
        let out = Command::new(tracer())
            .arg("export")
            .arg(&trace)
            .args(["--format", "parquet", "-o"])
            .arg(&tables)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{said}");
        Exported {
            dir,
            trace,
            report,
            tables,
            said,
        }
    }

    /// What pyarrow and DuckDB read in the tables: `[pyarrow, duckdb]`.
    fn read(&self) -> [Value; 2] {
        let out = Command::new(python())
            .arg(root().join("tests/readers/parquet_tables.py"))
            .arg(&self.tables)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "parquet_tables.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        [v["pyarrow"].clone(), v["duckdb"].clone()]
    }

    /// Checks both readers' figures against the report and the recording; returns the
    /// pyarrow figures (equal to DuckDB's) for the test's own exact values.
    fn check(&self) -> Value {
        let [arrow, duck] = self.read();
        let r = &self.report;
        let length = r["critical_path"]["length_ns"].as_u64().unwrap();
        // Outermost calls per name, paired in the recording by the test crate itself.
        let traced = read_recording(&self.trace);
        let mut calls: BTreeMap<String, u64> = BTreeMap::new();
        for c in traced.calls() {
            *calls.entry(tracer_analysis::calls::name(c.id)).or_default() += 1;
        }
        let records = traced.records().count() as u64;
        let procedures: BTreeMap<String, Vec<u64>> = r["procedures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let f = |k: &str| p[k].as_u64().unwrap();
                (
                    p["name"].as_str().unwrap().to_string(),
                    vec![
                        f("cp_ns"),
                        f("cp_exclusive_ns"),
                        f("work_ns"),
                        f("zeroing_ns"),
                    ],
                )
            })
            .collect();
        let work: u64 = r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["work_ns"].as_u64().unwrap())
            .sum();
        for (reader, v) in [("pyarrow", &arrow), ("duckdb", &duck)] {
            let rows = |t: &str| v["rows"][t].as_u64().unwrap();
            assert_eq!(
                v["messages"].as_u64().unwrap(),
                r["messages"]["matched"].as_u64().unwrap(),
                "{reader}: messages matched"
            );
            assert_eq!(rows("messages"), v["messages"].as_u64().unwrap());
            assert_eq!(
                v["message_latency_ns"], v["message_span_ns"],
                "{reader}: latency = receive - send"
            );
            assert_eq!(
                v["critical_path_ns"].as_u64().unwrap(),
                length,
                "{reader}: critical path as the sum of its work activities"
            );
            assert_eq!(v["critical_path_meta_ns"].as_u64().unwrap(), length);
            assert_eq!(
                rows("critical_path"),
                r["activities"].as_array().unwrap().len() as u64,
                "{reader}"
            );
            assert_eq!(
                rows("arcs"),
                r["critical_path"]["arcs"].as_u64().unwrap(),
                "{reader}: every arc of the graph"
            );
            assert_eq!(v["min_total_slack_ns"].as_u64(), Some(0), "{reader}");
            assert!(v["critical_program_arcs"].as_u64().unwrap() > 0);
            assert_eq!(
                v["program_work_ns"].as_u64().unwrap(),
                work,
                "{reader}: program arcs weigh all work"
            );
            let got: BTreeMap<String, u64> = serde_json::from_value(v["calls"].clone()).unwrap();
            assert_eq!(got, calls, "{reader}: calls per name");
            let got: BTreeMap<String, Vec<u64>> =
                serde_json::from_value(v["procedures"].clone()).unwrap();
            assert_eq!(got, procedures, "{reader}: procedure rows");
            assert_eq!(rows("events"), records, "{reader}: one row per record");
            assert_eq!(
                rows("events"),
                r["critical_path"]["events"].as_u64().unwrap(),
                "{reader}"
            );
        }
        assert_eq!(arrow, duck, "pyarrow and DuckDB read the same tables");
        // The summary line names every table with its rows.
        for (t, n) in arrow["rows"].as_object().unwrap() {
            assert!(
                self.said.contains(&format!("{t} {n} rows")),
                "{t}: {}",
                self.said
            );
        }
        arrow
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The Open MPI ring, 4 ranks x 10 rounds of 256 bytes, `main` selected: 40 messages,
/// 40 MPI_Send and 40 MPI_Recv by construction.
#[test]
fn ring_openmpi_tables() {
    let e = Exported::new("ring", &["main"], &openmpi(4, "mpi_ring", &["10", "256"]));
    let v = e.check();
    assert_eq!(v["messages"], 40);
    assert_eq!(v["message_bytes"], serde_json::json!([256]));
    assert_eq!(v["calls"]["MPI_Send"], 40);
    assert_eq!(v["calls"]["MPI_Recv"], 40);
    assert_eq!(v["calls"]["MPI_Init"], 4);
    assert!(v["procedures"]["main"][0].as_u64().unwrap() > 0);
}

/// threads_forkjoin: 5 stages of 3 workers; no messages, the path through the workers'
/// stages and `main`'s serial part.
#[test]
fn forkjoin_threads_tables() {
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
    let v = e.check();
    assert_eq!(v["messages"], 0);
    assert_eq!(v["calls"]["pthread_create"], 15);
    assert_eq!(v["calls"]["pthread_join"], 15);
    let cp_slow = v["procedures"]["stage_slow"][0].as_u64().unwrap();
    assert!(cp_slow > 0);
}

/// A PVM job (3 workers, 4 rounds): the master's requests and the workers' replies,
/// then one multicast to and one packed reply from each worker: 2*3*4 + 2*3 messages.
#[test]
fn pvm_tables() {
    let e = Exported::new("pvm", &[], &pvm(&["3", "4"]));
    let v = e.check();
    assert_eq!(v["messages"], 30);
    assert_eq!(v["calls"]["pvm_mcast"], 1);
}

/// OUT must be new or empty: a non-empty directory is one line and exit 1, and nothing
/// in it is touched.
#[test]
fn non_empty_directory_is_refused() {
    let dir = std::env::temp_dir().join(format!("tracer-parquet-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), b"mine").unwrap();
    let trace = dir.join("x.trace");
    std::fs::write(&trace, b"not a recording at all").unwrap();
    // A bad recording fails first, before OUT is made.
    let fresh = dir.join("fresh");
    let (code, err) = tracer_tests::tracer_fails(&[
        "export",
        trace.to_str().unwrap(),
        "--format",
        "parquet",
        "-o",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!((code, err.trim().lines().count()), (1, 1), "{err}");
    assert!(!fresh.exists());
    // A real (tiny) recording into the non-empty directory.
    let rec = dir.join("ring.trace");
    let mut args: Vec<std::ffi::OsString> = vec!["record".into(), "-q".into(), "-o".into()];
    args.push(rec.clone().into());
    args.push("--".into());
    args.extend(
        openmpi(2, "mpi_ring", &["1", "8"])
            .into_iter()
            .map(Into::into),
    );
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
    run(&args);
    let (code, err) = tracer_tests::tracer_fails(&[
        "export",
        rec.to_str().unwrap(),
        "--format",
        "parquet",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("not empty"), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["keep.txt", "ring.trace", "x.trace"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
