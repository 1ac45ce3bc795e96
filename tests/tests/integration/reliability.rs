//! Reliability: a tracer killed with SIGKILL at any moment of its run (start-up, steady
//! state, detach) leaves no process stopped, no program loaded and no uprobe behind, and a
//! recording every command reads (docs/reliability.md).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tracer_tests::{openmpi, read_recording, tracer};

/// When the tracer is killed: so long after it starts, after it says it traces (the
/// command is launched then, and its exec held), or after it says it detaches (its
/// outputs are complete then).
#[derive(Clone, Copy, Debug)]
enum Moment {
    Start(u64),
    Tracing(u64),
    Detaching(u64),
}

/// Twenty moments spread over a run: while the probes load (from the start), right after
/// mpirun's exec hold (0 ms after "tracing"), while the ranks are held at their exec and
/// their libraries probed, in the steady state of the job (its ranks compute for about
/// 1.5 s), and while the probes detach (about 0.1 s each).
const MOMENTS: [Moment; 20] = [
    Moment::Start(50),
    Moment::Start(150),
    Moment::Start(300),
    Moment::Start(500),
    Moment::Start(800),
    Moment::Start(1100),
    Moment::Tracing(0),
    Moment::Tracing(10),
    Moment::Tracing(30),
    Moment::Tracing(60),
    Moment::Tracing(100),
    Moment::Tracing(200),
    Moment::Tracing(400),
    Moment::Tracing(800),
    Moment::Tracing(1200),
    Moment::Tracing(1600),
    Moment::Detaching(0),
    Moment::Detaching(30),
    Moment::Detaching(100),
    Moment::Detaching(300),
];

/// The job: 4 Open MPI ranks, each entering the selected procedure `compute` (10 ms of
/// CPU) `ITERATIONS` times.
const ITERATIONS: u64 = 60;

/// Our eBPF programs' names, as the kernel keeps them (at most 15 bytes).
const PROGRAMS: &[&str] = &[
    "call_enter",
    "call_exit",
    "func_enter",
    "func_exit",
    "library_loaded",
    "floor_uprobe",
    "floor_uretprobe",
    "floor_tracepoint",
    "call_enter_m",
    "call_exit_m",
    "func_enter_m",
    "func_exit_m",
    "floor_uprobe_m",
    "floor_uretp_m",
    "sched_switch",
    "sched_waking",
    "sched_wakeup_new",
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "sys_enter_futex",
    "sys_exit_futex",
];

/// The environment variable that marks the processes of one run: the tracer, its
/// watchdog, mpirun and the ranks all inherit it, whoever their parent is after the
/// tracer dies.
const MARK: &str = "TRACER_RELIABILITY_RUN";

#[test]
fn a_killed_tracer_leaves_nothing_stopped_or_loaded() {
    let dir = std::env::temp_dir().join(format!("tracer-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("k.trace");
    let iterations = ITERATIONS.to_string();
    let job = openmpi(4, "mpi_busy", &[&iterations, "10"]);
    for (n, moment) in MOMENTS.into_iter().enumerate() {
        let mark = format!("{}-{n}", std::process::id());
        let baseline = programs().iter().map(|p| p.id).max().unwrap_or(0);
        let _ = std::fs::remove_file(&rec);
        let mut t = Command::new(tracer())
            .args([
                "record",
                "--func",
                "compute",
                "-o",
                rec.to_str().unwrap(),
                "--",
            ])
            .args(&job)
            .env(MARK, &mark)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let err = t.stderr.take().unwrap();
        // The reader is never joined: mpirun and the ranks inherit the tracer's stderr,
        // and a stopped one keeps it open for ever.
        let (tx, said) = mpsc::channel();
        let printed = Arc::new(Mutex::new(String::new()));
        let lines = Arc::clone(&printed);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("tracing (") {
                    let _ = tx.send(Said::Tracing);
                }
                if line.contains("detaching") {
                    let _ = tx.send(Said::Detaching);
                }
                let mut l = lines.lock().unwrap();
                *l += &line;
                l.push('\n');
            }
        });
        match moment {
            Moment::Start(ms) => {
                std::thread::sleep(Duration::from_millis(ms).saturating_sub(started.elapsed()))
            }
            Moment::Tracing(ms) => {
                wait_until_said(&said, Said::Tracing, moment);
                std::thread::sleep(Duration::from_millis(ms));
            }
            Moment::Detaching(ms) => {
                wait_until_said(&said, Said::Detaching, moment);
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        let tracer_pid = t.id();
        t.kill().unwrap(); // SIGKILL
        t.wait().unwrap();
        let reaped = Instant::now();
        let what = format!(
            "{moment:?} (tracer {tracer_pid}):\n{}",
            printed.lock().unwrap()
        );

        // Within a few seconds no process of the run is stopped...
        let stopped = wait_for(Duration::from_secs(3), || {
            let s = stopped_marked(&mark);
            s.is_empty().then_some(()).ok_or(s)
        });
        assert!(
            stopped.is_ok(),
            "{what}stopped 3 s after the tracer was reaped: {:?}",
            stopped.unwrap_err()
        );
        // No process of the run (the watchdog, mpirun, a rank) holds a program of ours:
        // one that inherited a probe's file descriptor would keep it loaded.
        let run: HashSet<u32> = marked(&mark).iter().map(|m| m.0).collect();
        let held: Vec<Program> = programs()
            .into_iter()
            .filter(|p| is_ours(&p.name) && p.pids.iter().any(|h| run.contains(h)))
            .collect();
        assert!(held.is_empty(), "{what}programs held by the run: {held:?}");
        // ...and the job finishes (mpirun, the ranks and the watchdog all exit).
        let left = wait_for(Duration::from_secs(60), || {
            let m = marked(&mark);
            m.is_empty().then_some(()).ok_or(m)
        });
        assert!(
            left.is_ok(),
            "{what}still running {:?} s after the tracer was reaped: {:?}",
            reaped.elapsed().as_secs(),
            left.unwrap_err()
        );
        // No program of ours is left loaded, held by no process or by one of the run.
        let ours = wait_for(Duration::from_secs(5), || {
            let leftover = leftover_programs(baseline);
            leftover.is_empty().then_some(()).ok_or(leftover)
        });
        assert!(ours.is_ok(), "{what}programs left: {:?}", ours.unwrap_err());
        // No uprobe event the loader would have named after the tracer's pid.
        let alias = format!("aya_{tracer_pid}_");
        for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
            let events =
                std::fs::read_to_string(format!("{root}/uprobe_events")).unwrap_or_default();
            assert!(
                !events.contains(&alias),
                "{what}uprobes left in {root}:\n{events}"
            );
        }
        check_recording(&rec, moment, &what);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the tracer says as it goes that the test waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Tracing,
    Detaching,
}

fn wait_until_said(said: &mpsc::Receiver<Said>, what: Said, moment: Moment) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match said.recv_timeout(left) {
            Ok(s) if s == what => return,
            Ok(_) => {}
            Err(_) => panic!("{moment:?}: the tracer never said {what:?}"),
        }
    }
}

/// The recording a killed tracer left: every command reads it; once the tracer traced it
/// exists, in the steady state it holds the job's events, and once the tracer detaches it
/// is complete, with every call of the job.
fn check_recording(rec: &std::path::Path, moment: Moment, what: &str) {
    if matches!(moment, Moment::Start(_)) && !rec.exists() {
        return; // killed before the recording was created
    }
    for command in ["analyze", "report", "metrics"] {
        let out = Command::new(tracer())
            .args([command, "--json"])
            .arg(rec)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what}`tracer {command}` on the recording: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Events up to the kill are recovery::'s check: a recording may be up to a second
    // behind (the flush interval), so a kill 0.8 s into the run may leave no event yet.
    if let Moment::Detaching(_) = moment {
        let t = read_recording(rec);
        assert_eq!(t.lost, 0, "{what}");
        assert_eq!(t.summary["functions"]["compute"], 4 * ITERATIONS, "{what}");
    }
}

/// Polls `check` every 50 ms until it holds or `limit` passes (then its last complaint).
fn wait_for<E>(limit: Duration, mut check: impl FnMut() -> Result<(), E>) -> Result<(), E> {
    let start = Instant::now();
    loop {
        match check() {
            Ok(()) => return Ok(()),
            Err(e) if start.elapsed() >= limit => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Live processes (not zombies) whose environment holds `MARK=mark`: (pid, state, name).
fn marked(mark: &str) -> Vec<(u32, char, String)> {
    let needle = format!("{MARK}={mark}\0");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if !String::from_utf8_lossy(&env).contains(&needle) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) S ...": the name may hold spaces, the last ')' ends it.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
        let name = stat[stat.find('(').unwrap_or(0) + 1..close].to_string();
        if state != 'Z' && state != 'X' {
            found.push((pid, state, name));
        }
    }
    found
}

/// Marked processes stopped by a signal (T) or a tracer (t).
fn stopped_marked(mark: &str) -> Vec<(u32, char, String)> {
    marked(mark)
        .into_iter()
        .filter(|&(_, s, _)| s == 'T' || s == 't')
        .collect()
}

#[derive(Debug)]
struct Program {
    id: u64,
    name: String,
    pids: Vec<u32>,
}

/// The loaded eBPF programs (`bpftool -j prog show`), with the processes holding them.
fn programs() -> Vec<Program> {
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .expect("bpftool");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bpftool's JSON");
    all.as_array()
        .unwrap()
        .iter()
        .map(|p| Program {
            id: p["id"].as_u64().unwrap_or(0),
            name: p["name"].as_str().unwrap_or("").to_string(),
            pids: p["pids"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|h| h["pid"].as_u64())
                        .map(|x| x as u32)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Programs with our names loaded since `baseline` (the largest id before the run) that
/// no live process holds: the killed tracer's, had they outlived it. Programs another
/// tracer on this machine loaded meanwhile are held by it; those that another tracer is
/// closing as it exits are ambiguous: with another tracer running, only the check that
/// no process of the run holds one stays.
fn leftover_programs(baseline: u64) -> Vec<Program> {
    let others = other_tracer_running();
    programs()
        .into_iter()
        .filter(|p| p.id > baseline && is_ours(&p.name))
        .filter(|p| p.pids.is_empty() && !others)
        .collect()
}

fn is_ours(name: &str) -> bool {
    PROGRAMS.iter().any(|p| &p[..p.len().min(15)] == name)
}

/// Whether another tracer runs on this machine (then its programs may be mid-exit).
fn other_tracer_running() -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "tracer"))
}
