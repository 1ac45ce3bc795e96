//! Two sessions at once (docs/reliability.md, "Two sessions at once"): two `tracer
//! record` sessions on two jobs of one node, overlapping in time, never see each other's
//! events, and the one that ends first (detaching its probes, some on the very library
//! offsets the other probes too) leaves the other's probes in place.
//!
//! The long session traces an Open MPI pipeline whose ranks, once MPI_Init has returned
//! (so the tracer has probed them), wait for a gate file before the first item
//! (`mpi_pipeline ... GATE`): the test opens the gate only after the other session has
//! exited, so every message of the long session flows after the other's detach.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracer_analysis::records::Record;
use tracer_common::call;
use tracer_tests::profile::{all_matched, assert_near, length, ms, proc_row, tracer_json};
use tracer_tests::{openmpi, program, read_recording, tracer, tracer_fails, Traced};

const RANKS: usize = 4;
/// The pipeline both launched jobs run: 5 items, stage_slow 60 ms, stage_fast 20 ms
/// (tests/programs/mpi_pipeline.c); only the slow rank differs.
const ITEMS: &str = "5";
const SLOW_MS: f64 = 60.0;
const FAST_MS: f64 = 20.0;

/// A `tracer record` session running in the background.
struct Session {
    child: Child,
    dir: PathBuf,
}

/// What a finished session wrote.
struct Outcome {
    /// The recording, with the summary the tracer wrote.
    traced: Traced,
    summary: Value,
    profile: Value,
    report: Value,
    /// Every process whose own records (calls, switches, futex waits, fork, exec, exit)
    /// the recording holds.
    pids: HashSet<u32>,
    lost: u64,
}

impl Session {
    fn start(tag: &str, args: &[&str], command: &[String]) -> Session {
        let dir = std::env::temp_dir().join(format!("tracer-se-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(tracer());
        cmd.args(["record", "-q", "-o"])
            .arg(dir.join("r.trace"))
            .arg("--profile-json")
            .arg(dir.join("profile.json"))
            .arg("--summary-json")
            .arg(dir.join("summary.json"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
        if !command.is_empty() {
            cmd.arg("--").args(command);
        }
        Session {
            child: cmd.spawn().expect("run tracer"),
            dir,
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn finish(mut self) -> Outcome {
        let status = self.child.wait().unwrap();
        let stderr = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
        assert!(status.success(), "tracer failed: {status}\n{stderr}");
        let read = |name: &str| -> Value {
            serde_json::from_slice(&std::fs::read(self.dir.join(name)).unwrap()).unwrap()
        };
        let rec = self.dir.join("r.trace");
        let traced = read_recording(&rec);
        // A wakeup's header is the waker's, which may be any process (a kernel thread,
        // the other job's rank waking nobody of ours never gets here: the wakee is ours).
        let pids = traced
            .records()
            .filter(|r| !matches!(r, Record::Wakeup(_) | Record::WakeupNew(_)))
            .map(|r| r.header().tgid)
            // The idle task (a CPU a traced thread left idle) is no process.
            .filter(|&pid| pid != 0)
            .collect();
        let out = Outcome {
            lost: traced.lost,
            traced,
            summary: read("summary.json"),
            profile: read("profile.json"),
            report: tracer_json(&["report"], &rec),
            pids,
        };
        std::fs::remove_dir_all(&self.dir).unwrap();
        out
    }
}

impl Outcome {
    /// The processes of the summary: (pid, command, rank).
    fn processes(&self) -> Vec<(u32, String, Option<i64>)> {
        self.summary["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["pid"].as_u64().unwrap() as u32,
                    p["command"].as_str().unwrap().to_string(),
                    p["rank"].as_i64(),
                )
            })
            .collect()
    }

    /// Every process with records of its own is in the summary, every process of the
    /// summary runs a command that contains `mark` (the job's own argument), and its
    /// ranks are 0..RANKS once each.
    fn assert_only(&self, mark: &str) {
        let procs = self.processes();
        let listed: HashSet<u32> = procs.iter().map(|p| p.0).collect();
        // (A process may be listed without records of its own: an attached job's mpirun
        // asleep for the whole session.)
        assert!(
            self.pids.is_subset(&listed),
            "recorded processes missing from the summary: {:?}",
            self.pids.difference(&listed).collect::<Vec<_>>()
        );
        for (pid, command, _) in &procs {
            assert!(
                command.contains(mark),
                "pid {pid} runs {command:?}, not {mark}"
            );
        }
        let mut ranks: Vec<i64> = procs.iter().filter_map(|p| p.2).collect();
        ranks.sort();
        assert_eq!(ranks, (0..RANKS as i64).collect::<Vec<_>>(), "{procs:?}");
    }

    /// Nothing lost, and the pipeline's known answer with `slow` the slow rank.
    fn assert_pipeline(&self, slow: i64) {
        let (n, items) = (RANKS as f64, 5.0);
        assert_eq!(self.lost, 0);
        assert_eq!(self.summary["events"]["lost"], 0);
        assert_eq!(self.profile["events"]["lost"], 0);
        let calls = &self.summary["calls"];
        assert_eq!(calls["MPI_Init"], RANKS);
        assert_eq!(calls["MPI_Send"], 15);
        assert_eq!(calls["MPI_Recv"], 15);
        assert_eq!(calls["MPI_Finalize"], RANKS);
        assert_eq!(self.summary["functions"]["stage_slow"], 5);
        assert_eq!(self.summary["functions"]["stage_fast"], 15);
        let p = &self.profile;
        all_matched(p);
        assert_eq!(p["messages"]["sent"], 15);
        assert_near(
            "critical path",
            length(p),
            (n - 1.0) * FAST_MS + SLOW_MS + (items - 1.0) * SLOW_MS,
        );
        assert_near(
            "stage_slow on the path",
            ms(&proc_row(p, "stage_slow")["cp_ns"]),
            items * SLOW_MS,
        );
        let top = &self.report["processes"][0];
        assert_eq!(
            top["rank"], slow,
            "the path runs through the slow rank: {top}"
        );
    }
}

/// Opens the gate when dropped, so that a failing test never leaves a job waiting.
struct Gate(PathBuf);

impl Gate {
    fn new(tag: &str) -> Gate {
        let p = std::env::temp_dir().join(format!("tracer-se-gate-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Gate(p)
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }

    /// Waits until every rank made its mark (MPI_Init returned in each).
    fn wait_for_ranks(&self, limit: Duration) {
        let start = Instant::now();
        let marks: Vec<PathBuf> = (0..RANKS)
            .map(|r| PathBuf::from(format!("{}.{r}", self.path())))
            .collect();
        while !marks.iter().all(|m| m.exists()) {
            assert!(start.elapsed() < limit, "the gated ranks did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn open(&self) {
        std::fs::write(&self.0, b"").unwrap();
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
        for r in 0..RANKS {
            let _ = std::fs::remove_file(format!("{}.{r}", self.path()));
        }
        let _ = std::fs::remove_file(&self.0);
    }
}

fn gated_pipeline(gate: &Gate) -> Session {
    let gate_arg = gate.path();
    Session::start(
        "gated",
        &["--func", "stage_*"],
        &openmpi(RANKS, "mpi_pipeline", &[ITEMS, "1", "60", "20", &gate_arg]),
    )
}

/// Two launched Open MPI jobs: the second starts after the first's ranks are probed,
/// and ends (probes detached, tracer exited) before the first's messages flow.
#[test]
fn two_launched_sessions_keep_to_their_own_jobs() {
    let gate = Gate::new("launched");
    let mut first = gated_pipeline(&gate);
    gate.wait_for_ranks(Duration::from_secs(120));
    // The second job: the same program (same library offsets probed), no gate, rank 2 slow.
    let second = Session::start(
        "second",
        &["--func", "stage_*"],
        &openmpi(RANKS, "mpi_pipeline", &[ITEMS, "2", "60", "20"]),
    );
    let second = second.finish();
    assert!(
        first.running(),
        "the first session must still run when the second has detached"
    );
    gate.open();
    let first = first.finish();

    first.assert_only(&gate.path());
    first.assert_pipeline(1);
    second.assert_pipeline(2);
    // The second job's processes run the same program without the gate argument.
    for (pid, command, _) in second.processes() {
        assert!(
            !command.contains(&gate.path()),
            "pid {pid} of the first job in the second recording: {command}"
        );
        assert!(
            command.contains("mpi_pipeline.openmpi 5 2 60 20"),
            "pid {pid}: {command}"
        );
    }
    assert!(
        first.pids.is_disjoint(&second.pids),
        "both recordings name {:?}",
        first.pids.intersection(&second.pids).collect::<Vec<_>>()
    );
}

/// A session attached with `--pid` to a running Open MPI job while a launched session
/// traces another; the attached one ends first.
#[test]
fn pid_session_beside_a_launched_one() {
    let gate = Gate::new("pid");
    let mut first = gated_pipeline(&gate);
    gate.wait_for_ranks(Duration::from_secs(120));
    // Long enough for any start-up of the attached tracer on a loaded machine; the job
    // is ended once that session is over.
    let cmd = openmpi(RANKS, "mpi_sleeper", &["60"]);
    let mut job = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let job_pid = job.id().to_string();
    let attached = Session::start("attached", &["--pid", &job_pid, "--duration", "1.5"], &[]);
    let attached = attached.finish();
    assert!(
        job.try_wait().unwrap().is_none(),
        "the attached job must outlive its session"
    );
    assert!(
        first.running(),
        "the first session must still run when the attached one has detached"
    );
    // SIGTERM to the mpirun this test started: it ends its ranks.
    let killed = Command::new("kill")
        .args(["-TERM", &job_pid])
        .status()
        .unwrap();
    assert!(killed.success());
    job.wait().unwrap();
    gate.open();
    let first = first.finish();

    first.assert_only(&gate.path());
    first.assert_pipeline(1);
    assert_eq!(attached.lost, 0);
    attached.assert_only("mpi_sleeper");
    assert!(
        attached.processes().iter().any(|p| p.0 == job.id()),
        "the attached job's mpirun is listed"
    );
    // The sleeper's ring: each rank sends tag 1 to the next, and every rank is seen.
    let ranks = attached.traced.ranks();
    let sends = attached.traced.calls_of(call::MPI_SEND);
    assert!(sends.len() > 100, "only {} sends in 1.5 s", sends.len());
    for s in &sends {
        assert_eq!(s.entry.peer as i64, (ranks[&s.pid] + 1) % RANKS as i64);
        assert_eq!(s.entry.tag, 1);
    }
    let senders: HashSet<u32> = sends.iter().map(|s| s.pid).collect();
    assert_eq!(senders.len(), RANKS);
    assert!(first.pids.is_disjoint(&attached.pids));
}

/// What a person reads of a threads-only recording: `dump` prints plain text and each
/// process once; `whatif --placement` says a single process has nothing to move; the
/// predicted path's parts add up to its length; `analyze` of a recording with no events
/// says there is no path.
#[test]
fn plain_answers_about_a_threads_only_recording() {
    let dir = std::env::temp_dir().join(format!("tracer-plain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("threads.trace");
    let rec_s = rec.to_str().unwrap();
    let ok = Command::new(tracer())
        .args(["record", "-q", "-o", rec_s, "--func", "work", "--"])
        .args([program("threads_busy").as_str(), "2", "5"])
        .status()
        .unwrap();
    assert!(ok.success());

    let dump = Command::new(tracer())
        .args(["dump", rec_s])
        .output()
        .unwrap();
    assert!(dump.status.success());
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(!dump.contains("Some(") && !dump.contains("None"), "{dump}");
    let processes: Vec<&str> = dump.lines().filter(|l| l.starts_with("process ")).collect();
    assert_eq!(processes.len(), 1, "{processes:?}");
    assert!(
        processes[0].ends_with(&format!(
            " rank=- mappings={} command={} 2 5",
            processes[0]
                .split("mappings=")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap(),
            program("threads_busy")
        )),
        "{processes:?}"
    );

    // Offline and online alike (the online replay learns the processes as it goes).
    for online in [&[][..], &["--online"]] {
        let mut args = vec!["whatif", rec_s, "--placement", "*@0"];
        args.extend(online);
        let (code, err) = tracer_fails(&args);
        assert_eq!(code, 1);
        assert!(
            err.contains("--placement for ")
                && err.contains("a placement moves the program's processes among CPUs")
                && err.contains("has a single one: nothing to move"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }

    let whatif = Command::new(tracer())
        .args(["whatif", rec_s])
        .output()
        .unwrap();
    assert!(whatif.status.success());
    let text = String::from_utf8_lossy(&whatif.stdout);
    let figure = |label: &str, after: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap();
        let rest = line.split(after).nth(1).unwrap_or(line);
        let ms = rest
            .split_whitespace()
            .find_map(|w| w.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{label}: {line}"));
        ms
    };
    let length = figure("predicted critical path:", ":");
    let running = figure("work", "of CPU,");
    let parts = running
        + figure("off CPU", "CPU")
        + figure("messages", "messages")
        + figure("wakeups", "wakeups")
        + figure("before it", "it");
    // Each figure is rounded to 0.1 ms.
    assert!(
        (parts - length).abs() <= 0.25,
        "{parts} of {length}:\n{text}"
    );

    // A process that sleeps the whole session writes no event.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let empty = dir.join("empty.trace");
    let ok = Command::new(tracer())
        .args([
            "record",
            "-q",
            "-o",
            empty.to_str().unwrap(),
            "--duration",
            "1",
        ])
        .args(["-p", &sleeper.id().to_string()])
        .status()
        .unwrap();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(ok.success());
    let analyze = Command::new(tracer())
        .args(["analyze", empty.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&analyze.stdout);
    assert!(analyze.status.success(), "{text}");
    assert_eq!(
        text.lines().next(),
        Some("critical path: none: the recording has no events of a traced thread"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
