//! Helpers for the root-only integration tests: build the C/MPI/PVM programs, run the
//! real `tracer` binary on them, and read back what it recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tracer_analysis::calls::split_call_field;
use tracer_analysis::recording::{self, Item, RecordingMeta};
use tracer_analysis::records::Record;
use tracer_common::CallRecord;

pub mod netlab;
pub mod profile;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The test programs, built once per test binary with the project's Makefile.
pub fn programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = root().join("target/test-programs");
        let status = Command::new("make")
            .current_dir(root().join("tests/programs"))
            .arg(format!("OUT={}", out.display()))
            .arg("-s")
            .status()
            .expect("make");
        assert!(status.success(), "building the test programs failed");
        out
    })
}

pub fn program(name: &str) -> String {
    programs().join(name).display().to_string()
}

/// The Python of the readers' virtual environment (`cargo xtask setup` installs the
/// packages the export tests read our files with into it).
pub fn python() -> PathBuf {
    let p = root().join("target/readers/python/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// The npm packages `cargo xtask setup` installs for the export tests (NODE_PATH).
pub fn node_modules() -> PathBuf {
    let p = root().join("target/readers/node/node_modules");
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// The tracer binary, built as users run it: optimized (`cargo xtask test` builds it
/// before the tests). An unoptimized tracer cannot keep up with the scheduler events of
/// ranks that yield while they wait (close to a million a second) and loses some.
///
/// Under sudo (`sudo cargo xtask test`) the tracer would run every launched command as
/// the user who ran sudo, and some need root (`ip netns exec`): the first call takes
/// the SUDO_* variables out of the tests' environment, so that every tracer they start
/// runs its command as root. `run_as.rs` sets them for its own tracers.
pub fn tracer() -> PathBuf {
    static NOT_UNDER_SUDO: std::sync::Once = std::sync::Once::new();
    NOT_UNDER_SUDO.call_once(|| {
        for var in ["SUDO_USER", "SUDO_UID", "SUDO_GID"] {
            std::env::remove_var(var);
        }
    });
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or(root().join("target"), |d| root().join(d));
    let p = target.join("release/tracer");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release -p tracer-user` first",
        p.display()
    );
    p
}

pub fn openmpi(np: usize, prog: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "mpirun.openmpi",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(np.to_string());
    v.push(program(&format!("{prog}.openmpi")));
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

pub fn mpich(np: usize, prog: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["mpirun.mpich".into(), "-np".into(), np.to_string()];
    v.push(program(&format!("{prog}.mpich")));
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// `pvm_master ARGS` under a private PVM daemon (tests/programs/run_pvm.sh).
pub fn pvm(master_args: &[&str]) -> Vec<String> {
    let mut v = vec![
        program("run_pvm.sh"),
        programs().display().to_string(),
        "--".into(),
        program("pvm_master"),
    ];
    v.extend(master_args.iter().map(|s| s.to_string()));
    v
}

/// What one `tracer record` run produced.
pub struct Traced {
    /// The summary the tracer wrote (`--summary-json`), or one computed from the recording.
    pub summary: serde_json::Value,
    pub meta: RecordingMeta,
    pub items: Vec<Item>,
    pub lost: u64,
    /// The probes' failures by reason (the recording's trailer).
    pub probe_failures: std::collections::BTreeMap<String, u64>,
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracer-it-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `tracer record -o ... --summary-json ... ARGS [-- COMMAND]` and reads both outputs.
pub fn record(tag: &str, args: &[&str], command: &[String]) -> Traced {
    let dir = scratch(tag);
    let rec = dir.join("rec.trace");
    let sum = dir.join("summary.json");
    let mut cmd = Command::new(tracer());
    cmd.arg("record")
        .arg("-o")
        .arg(&rec)
        .arg("--summary-json")
        .arg(&sum)
        .args(args);
    if !command.is_empty() {
        cmd.arg("--").args(command);
    }
    let output = cmd.output().expect("run tracer");
    assert!(
        output.status.success(),
        "tracer failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    let recording::WholeRecording {
        meta,
        items,
        trailer,
    } = recording::read_all(&rec).expect("read recording");
    let _ = std::fs::remove_dir_all(&dir);
    assert_graph_matches_engine(&items);
    Traced {
        summary,
        meta,
        items,
        lost: trailer.events_lost,
        probe_failures: trailer.probe_failures,
    }
}

/// A completed MPI/PVM call: its entry and exit records.
#[derive(Clone, Debug)]
pub struct Call {
    pub id: u16,
    pub pid: u32,
    pub tid: u32,
    /// 0 for a call the program made; >0 for a probed call made inside another one
    /// (pvm_precv calls pvm_recv, for instance).
    pub depth: usize,
    pub entry: CallRecord,
    pub exit: CallRecord,
}

impl Traced {
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.items.iter().filter_map(|i| match i {
            Item::Record(r) => Some(r),
            _ => None,
        })
    }

    /// Completed outermost calls in exit order, entries paired with exits per thread.
    pub fn calls(&self) -> Vec<Call> {
        self.all_calls()
            .into_iter()
            .filter(|c| c.depth == 0)
            .collect()
    }

    /// Completed calls, nested ones included.
    pub fn all_calls(&self) -> Vec<Call> {
        let mut open: HashMap<u32, Vec<CallRecord>> = HashMap::new();
        let mut out = Vec::new();
        for r in self.records() {
            match r {
                Record::CallEnter(c) => open.entry(c.header.tid).or_default().push(*c),
                Record::CallExit(x) => {
                    let stack = open.entry(x.header.tid).or_default();
                    let depth = stack.len().saturating_sub(1);
                    if let Some(e) = stack.pop() {
                        let id = split_call_field(x.header.call).id;
                        assert_eq!(
                            id,
                            split_call_field(e.header.call).id,
                            "entry/exit mismatch"
                        );
                        out.push(Call {
                            id,
                            pid: x.header.tgid,
                            tid: x.header.tid,
                            depth,
                            entry: e,
                            exit: *x,
                        });
                    }
                }
                _ => {}
            }
        }
        out
    }

    pub fn calls_of(&self, id: u16) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.id == id).collect()
    }

    /// pid -> MPI rank from the summary.
    pub fn ranks(&self) -> HashMap<u32, i64> {
        self.summary["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| Some((p["pid"].as_u64()? as u32, p["rank"].as_i64()?)))
            .collect()
    }
}

/// Reads a complete recording a test made itself; the summary is computed from it.
pub fn read_recording(path: &Path) -> Traced {
    let recording::WholeRecording {
        meta,
        items,
        trailer,
    } = recording::read_all(path).expect("complete recording");
    assert_graph_matches_engine(&items);
    let summary = tracer_analysis::summary::summarize(&items, trailer.events_lost);
    Traced {
        summary: serde_json::to_value(summary).unwrap(),
        meta,
        items,
        lost: trailer.events_lost,
        probe_failures: trailer.probe_failures,
    }
}

/// The recorded graph of a recording has the online engine's critical path: the same
/// length and the same zeroing value for every selected procedure (checked on every
/// recording the integration tests make).
pub fn assert_graph_matches_engine(items: &[Item]) {
    use tracer_analysis::{analyze, workclock::ClockKind};
    use tracer_analysis::{cpm::Schedule, recorded::RecordedGraph, whatif};
    for clock in [ClockKind::Cpu, ClockKind::Wall] {
        let online = analyze(items, clock);
        let length = online.critical().map(|end| end.path.longest).unwrap_or(0);
        let rg = RecordedGraph::from_items(items, clock);
        assert_eq!(
            Schedule::new(&rg.graph).length,
            length,
            "{clock:?} clock: offline and online critical path lengths differ"
        );
        for (p, name) in rg.procedures.iter().enumerate() {
            let zero = whatif::ScaledWeights::new(
                &rg.graph,
                &[whatif::Scale {
                    procedure: p,
                    factor: 0.0,
                }],
            );
            assert_eq!(
                zero.schedule(&rg.graph).length,
                online.zeroed_length(p),
                "{clock:?} clock: zeroing {name} offline and online differ"
            );
        }
    }
}

/// Runs the tracer expecting failure; returns (exit code, stderr).
pub fn tracer_fails(args: &[&str]) -> (i32, String) {
    let out = Command::new(tracer())
        .args(args)
        .output()
        .expect("run tracer");
    assert!(!out.status.success(), "tracer {args:?} should fail");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The message matrix by world rank: (from, to, messages, bytes), sorted.
pub fn world_pairs(m: &tracer_analysis::Metrics) -> Vec<(i32, i32, u64, u64)> {
    let mut v: Vec<(i32, i32, u64, u64)> = m
        .traffic
        .processes
        .iter()
        .map(|p| {
            (
                p.from_rank.expect("sender's world rank"),
                p.to_rank.expect("receiver's world rank"),
                p.messages,
                p.bytes,
            )
        })
        .collect();
    v.sort();
    v
}
