//! Session life cycle: system-wide mode, Ctrl-C, and nothing left in the kernel after.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tracer_analysis::records::Record;
use tracer_common::call;
use tracer_tests::{mpich, openmpi, read_recording, tracer};

/// Names of our eBPF programs as the kernel lists them.
const PROGRAMS: &[&str] = &[
    "call_enter",
    "call_exit",
    "func_enter",
    "call_enter_m",
    "call_exit_m",
    "func_enter_m",
    "sched_switch",
    "sys_enter_futex",
    "sampler",
];

fn loaded_programs() -> String {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .expect("bpftool");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether another tracer runs on this machine (then programs with our names may be its).
fn other_tracer_running() -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "tracer"))
}

fn assert_nothing_left() {
    if other_tracer_running() {
        eprintln!("another tracer is running: cannot tell whose programs are loaded; skipped");
        return;
    }
    let progs = loaded_programs();
    for p in PROGRAMS {
        assert!(
            !progs.contains(&format!(" name {p} ")),
            "{p} still loaded:\n{progs}"
        );
    }
}

/// Starts `tracer record ARGS` and waits until it says it is tracing.
fn start_tracer(args: &[&str]) -> Child {
    let mut child = Command::new(tracer())
        .arg("record")
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "tracer exited before tracing"
        );
        if line.contains("tracing (") {
            break;
        }
    }
    // Keep draining stderr so the tracer never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

#[test]
fn system_wide_traces_a_job_started_elsewhere() {
    let dir = std::env::temp_dir().join(format!("tracer-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("all.trace");
    let mut t = start_tracer(&["--all", "--duration", "8", "-o", rec.to_str().unwrap()]);
    let job = mpich(3, "mpi_ring", &["7", "32"]);
    let status = Command::new(&job[0])
        .args(&job[1..])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(t.wait().unwrap().success());
    let traced = read_recording(&rec);
    assert_eq!(traced.lost, 0);
    let ranks = traced.ranks();
    assert_eq!(ranks.len(), 3, "the three ranks, found by their MPI calls");
    let sends = traced.calls_of(call::MPI_SEND);
    assert_eq!(sends.len(), 7 * 3);
    assert!(sends
        .iter()
        .all(|s| s.entry.peer as i64 == (ranks[&s.pid] + 1) % 3 && s.entry.bytes == 32));
    assert_nothing_left();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--all --func`: a job launched after the session started has its selected procedures
/// probed from its ranks' first MPI call on (before, only processes running at the start
/// were looked at, and the session ended with "--func matched no function anywhere").
/// The pipeline's ranks wait at a gate after MPI_Init until the recording, written as the
/// session goes, holds both procedures' probes (tests/programs/mpi_pipeline.c): then every
/// call of each is seen, 5 items through the slow rank, 5 through each of 3 others.
#[test]
fn system_wide_probes_the_selected_procedures_of_a_job_started_later() {
    use tracer_analysis::recording::Item;
    let dir = std::env::temp_dir().join(format!("tracer-all-func-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("all.trace");
    let gate = dir.join("gate");
    let mut t = start_tracer(&[
        "--all",
        "--duration",
        "60",
        "--sample",
        "0",
        "--func",
        "stage_slow",
        "--func",
        "stage_fast",
        "-o",
        rec.to_str().unwrap(),
    ]);
    let job_cmd = openmpi(
        4,
        "mpi_pipeline",
        &["5", "1", "60", "20", gate.to_str().unwrap()],
    );
    let mut job = Command::new(&job_cmd[0])
        .args(&job_cmd[1..])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let probed = loop {
        let dump = Command::new(tracer())
            .arg("dump")
            .arg(&rec)
            .output()
            .unwrap();
        let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
        let probes: Vec<&str> = dump.lines().filter(|l| l.starts_with("probe ")).collect();
        if ["stage_slow", "stage_fast"]
            .iter()
            .all(|f| probes.iter().any(|p| p.contains(&format!(" {f} in "))))
        {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::fs::write(&gate, b"").unwrap();
    if !probed {
        let _ = job.kill();
        let _ = t.kill();
        panic!("the procedures were not probed within 30 s of the job's launch");
    }
    assert!(job.wait().unwrap().success());
    // SAFETY: plain kill(2) to our own child.
    unsafe { libc_kill(t.id() as i32, 2) };
    assert!(t.wait().unwrap().success());
    let traced = read_recording(&rec);
    assert_eq!(traced.lost, 0);
    let id_of = |name: &str| {
        traced
            .items
            .iter()
            .find_map(|i| match i {
                Item::Probe(p) if p.symbol == name => Some(p.id),
                _ => None,
            })
            .unwrap()
    };
    let (slow, fast) = (id_of("stage_slow"), id_of("stage_fast"));
    let entries = |id: u16| {
        traced
            .records()
            .filter(|r| matches!(r, Record::FuncEnter(h) if h.call == id))
            .count()
    };
    assert_eq!((entries(slow), entries(fast)), (5, 15));
    assert_nothing_left();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_writes_everything_and_detaches() {
    let dir = std::env::temp_dir().join(format!("tracer-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("int.trace");
    let sum = dir.join("int.json");
    let job_cmd = openmpi(2, "mpi_sleeper", &["8"]);
    let mut job = Command::new(&job_cmd[0])
        .args(&job_cmd[1..])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = job.id().to_string();
    let mut t = start_tracer(&[
        "--pid",
        &pid,
        "-o",
        rec.to_str().unwrap(),
        "--summary-json",
        sum.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: plain kill(2) to our own child.
    unsafe { libc_kill(t.id() as i32, 2) };
    assert!(
        t.wait().unwrap().success(),
        "Ctrl-C is a normal way to stop"
    );
    let traced = read_recording(&rec);
    let sends = traced.calls_of(call::MPI_SEND).len();
    assert!(sends > 50, "only {sends} sends recorded");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    assert_eq!(
        summary["calls"]["MPI_Send"].as_u64().unwrap() as usize,
        sends
    );
    assert_nothing_left();
    // The job was only observed: it runs on and finishes normally.
    assert!(job.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every program of a session, the sampler's included, is unloaded by the session itself
/// before the tracer exits: the tracer waits for the kernel to free them (with a 2 s
/// deadline it logs at). A program left to the end of the process (the sampler, until
/// it was unloaded with the others) made the stop wait out that deadline (seen with
/// `RUST_LOG=info`, as here; docs/benchmarks.md, start and stop, round 8).
#[test]
fn a_session_unloads_every_program_it_loaded() {
    let out = Command::new(tracer())
        .env("RUST_LOG", "info")
        .args(["record", "--sample", "99", "--func", "main", "--"])
        .args(openmpi(2, "mpi_ring", &["3", "0"]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(" calls in ") && err.contains("(OpenMpi)"),
        "the call programs ran: {err}"
    );
    assert!(
        !err.contains("had not freed every program"),
        "a program outlived its session's detaching: {err}"
    );
    assert_nothing_left();
}

/// `tracer record -- COMMAND` exits with the command's status, as `time` does (exit code
/// n: n; killed by signal s: 128 + s), and still writes every output.
#[test]
fn record_exits_with_the_command_s_status() {
    let dir = std::env::temp_dir().join(format!("tracer-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("status.trace");
    let sum = dir.join("status.json");
    for (script, status, says) in [
        (
            "exit 7",
            7,
            "tracer: the traced command exited with status 7",
        ),
        (
            "kill -KILL $$",
            128 + 9,
            "tracer: the traced command was killed by signal 9 (status 137)",
        ),
        ("exit 0", 0, ""),
    ] {
        let out = Command::new(tracer())
            .args(["record", "-o", rec.to_str().unwrap()])
            .args(["--summary-json", sum.to_str().unwrap()])
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "sh -c '{script}': {err}");
        assert!(err.contains(says), "sh -c '{script}': {err}");
        assert_eq!(
            err.contains("the traced command"),
            status != 0,
            "sh -c '{script}': {err}"
        );
        // The outputs are complete: the recording has its trailer and the shell's exec
        // and exit, and the summary names the shell.
        let traced = read_recording(&rec);
        assert_eq!(traced.meta.command, ["sh", "-c", script]);
        assert_eq!(traced.lost, 0);
        let execs = traced
            .records()
            .filter(|r| matches!(r, Record::Exec(_)))
            .count();
        let group_exits = traced
            .records()
            .filter(|r| matches!(r, Record::Exit(x) if x.group_dead != 0))
            .count();
        assert_eq!((execs, group_exits), (1, 1), "sh -c '{script}'");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
        let commands: Vec<&str> = summary["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["command"].as_str().unwrap())
            .collect();
        assert_eq!(commands, [format!("sh -c {script}")], "sh -c '{script}'");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Ctrl-C in a terminal reaches the whole foreground process group: the tracer stops,
/// writes its outputs, and exits with the status of the command, which the same SIGINT
/// killed (128 + 2), as `time` would.
#[test]
fn ctrl_c_to_the_process_group_gives_the_command_s_status() {
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("tracer-intgrp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("int.trace");
    let mut tracer_command = Command::new(tracer());
    tracer_command
        .args(["record", "-o", rec.to_str().unwrap(), "--", "sleep", "60"])
        .process_group(0)
        .stderr(Stdio::piped());
    // A terminal's foreground job takes SIGINT's default action. Run from a script's
    // background job (`cmd &`) the tests inherit SIGINT ignored, and an ignored signal
    // stays ignored through fork and exec: the command would outlive the Ctrl-C (as it
    // should, untraced too), which is not what this test is about.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        tracer_command.pre_exec(|| {
            libc_signal(2, SIG_DFL);
            Ok(())
        });
    }
    let mut t = tracer_command.spawn().unwrap();
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("tracing (") {
        assert!(err.read_line(&mut printed).unwrap() > 0, "{printed}");
    }
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: plain kill(2) to the process group of our own child.
    assert_eq!(unsafe { libc_kill(-(t.id() as i32), 2) }, 0);
    std::io::Read::read_to_string(&mut err, &mut printed).unwrap();
    let status = t.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{printed}");
    assert!(
        printed.contains("tracer: the traced command was killed by signal 2 (status 130)"),
        "{printed}"
    );
    let traced = read_recording(&rec);
    assert_eq!(traced.meta.command, ["sleep", "60"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Kills the tracer `pid` (only it) if the test has not ended it by `after`: a test that
/// could hang the machine's CI guards itself.
struct Guard(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Guard {
    fn new(pid: u32, after: Duration) -> Guard {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = done.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < after {
                if seen.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("tracer {pid} still running after {after:?}: killed");
            // SAFETY: plain kill(2) of the tracer this test started.
            unsafe { libc_kill(pid as i32, 9) };
        });
        Guard(done)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs `command` in a process group of its own with SIGINT's default action (as a
/// terminal's foreground job), SIGINTs the group (Ctrl-C) once `ready` says so on
/// stderr and `wait` later, and returns its exit code and stderr.
fn ctrl_c(command: &mut Command, ready: &str, wait: Duration) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    command.process_group(0).stderr(Stdio::piped());
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc_signal(2, SIG_DFL);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let _guard = Guard::new(child.id(), Duration::from_secs(120));
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut printed = String::new();
    while !printed.contains(ready) {
        assert!(err.read_line(&mut printed).unwrap() > 0, "{printed}");
    }
    std::thread::sleep(wait);
    // SAFETY: plain kill(2) to the process group of our own child.
    assert_eq!(unsafe { libc_kill(-(child.id() as i32), 2) }, 0);
    std::io::Read::read_to_string(&mut err, &mut printed).unwrap();
    (child.wait().unwrap().code(), printed)
}

/// Ctrl-C of `record -- mpirun -np 2 ...`: mpirun takes about a second to end its ranks,
/// and the tracer waits for it (once its outputs are written and its probes detached)
/// and exits with mpirun's own status: the one mpirun gives untraced under the same
/// Ctrl-C (Open MPI 4.1's is 1). Nothing sends mpirun a signal the user did not: it
/// never says it forwards one (SIGCONT is 18).
#[test]
fn ctrl_c_of_mpirun_gives_mpirun_s_status() {
    let dir = std::env::temp_dir().join(format!("tracer-intmpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("int.trace");
    let job = openmpi(2, "mpi_sleeper", &["60"]);
    let (untraced, said) = ctrl_c(
        Command::new(&job[0]).args(&job[1..]),
        "",
        Duration::from_secs(3),
    );
    assert!(
        matches!(untraced, Some(c) if c != 0),
        "untraced: {untraced:?} {said}"
    );
    let (traced, printed) = ctrl_c(
        Command::new(tracer())
            .args(["record", "-o", rec.to_str().unwrap(), "--"])
            .args(&job),
        "tracing (",
        Duration::from_secs(3),
    );
    assert_eq!(traced, untraced, "{printed}");
    assert!(
        printed.contains(&format!(
            "tracer: the traced command exited with status {}",
            untraced.unwrap()
        )),
        "{printed}"
    );
    assert!(!printed.contains("Forwarding signal"), "{printed}");
    let recorded = read_recording(&rec);
    assert_eq!(recorded.lost, 0);
    let ranks = recorded.ranks();
    assert_eq!(ranks.len(), 2, "{printed}");
    // The ranks end with mpirun (their last moments, reaped by init, may follow
    // mpirun's exit by a little).
    for pid in ranks.keys() {
        let gone_by = std::time::Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(std::time::Instant::now() < gone_by, "rank {pid} still runs");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_nothing_left();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A command that survives Ctrl-C is waited for with nothing attached (the outputs
/// written, the probes detached, before the wait), and a second Ctrl-C ends the wait at
/// once: the tracer exits 0 (the command has no status yet) and leaves it running.
#[test]
fn a_second_ctrl_c_stops_waiting_for_the_command() {
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("tracer-int2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("int2.trace");
    let mut command = Command::new(tracer());
    command
        .args(["record", "-o", rec.to_str().unwrap(), "--"])
        .args(["sh", "-c", "trap '' INT; sleep 60"])
        .process_group(0)
        .stderr(Stdio::piped());
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc_signal(2, SIG_DFL);
            Ok(())
        });
    }
    let mut t = command.spawn().unwrap();
    let _guard = Guard::new(t.id(), Duration::from_secs(60));
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("tracing (") {
        assert!(err.read_line(&mut printed).unwrap() > 0, "{printed}");
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: plain kill(2) to the process group of our own child (Ctrl-C).
    assert_eq!(unsafe { libc_kill(-(t.id() as i32), 2) }, 0);
    while !printed.contains("waiting for the traced command") {
        assert!(err.read_line(&mut printed).unwrap() > 0, "{printed}");
    }
    assert!(
        printed.contains("tracer: outputs written; detaching"),
        "{printed}"
    );
    // While it waits: the recording is complete and no probe is left.
    assert_eq!(read_recording(&rec).meta.command[0], "sh");
    assert_nothing_left();
    let asked = std::time::Instant::now();
    // SAFETY: plain kill(2) to our own child (the second Ctrl-C, the tracer's only).
    assert_eq!(unsafe { libc_kill(t.id() as i32, 2) }, 0);
    let status = t.wait().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    // The command runs on (sh and its sleep, still in the tracer's process group, and
    // holding the pipe): ended here, so that the pipe ends.
    // SAFETY: plain kill(2) of the process group this test made.
    assert_eq!(unsafe { libc_kill(-(t.id() as i32), 9) }, 0);
    std::io::Read::read_to_string(&mut err, &mut printed).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{printed}");
    assert!(
        printed.contains("tracer: stopped (interrupted)"),
        "{printed}"
    );
    assert!(!printed.contains("the traced command exited"), "{printed}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tracer record ... 2>&1 | head -1`: the reader of the tracer's stderr leaves after
/// the first line. The tracer still finishes the session (a complete recording with
/// every send of the ring, no probe left), exits with the command's status, and does not
/// panic (101).
#[test]
fn a_closed_pipe_ends_the_output_not_the_session() {
    let dir = std::env::temp_dir().join(format!("tracer-epipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("pipe.trace");
    let mut t = Command::new(tracer())
        .args(["record", "-o", rec.to_str().unwrap(), "--"])
        .args(openmpi(2, "mpi_ring", &["5", "32"]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _guard = Guard::new(t.id(), Duration::from_secs(120));
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("tracing ("), "{line}");
    drop(err); // as `head -1` does
    let status = t.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "the ring's status, not a panic's 101"
    );
    let recorded = read_recording(&rec);
    assert_eq!(recorded.lost, 0);
    assert_eq!(recorded.calls_of(call::MPI_SEND).len(), 5 * 2);
    assert_nothing_left();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--all -- sleep 1`, as `perf record -a -- sleep 1`: the session ends with the command.
#[test]
fn system_wide_with_a_command_ends_with_it() {
    let dir = std::env::temp_dir().join(format!("tracer-allcmd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("all.trace");
    let mut t = Command::new(tracer())
        .args([
            "record",
            "-a",
            "-o",
            rec.to_str().unwrap(),
            "--",
            "sleep",
            "1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _guard = Guard::new(t.id(), Duration::from_secs(60));
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut t.stderr.take().unwrap(), &mut printed).unwrap();
    let status = t.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{printed}");
    assert!(
        printed.contains("tracer: stopped (traced processes exited)"),
        "{printed}"
    );
    assert_eq!(read_recording(&rec).meta.command, ["sleep", "1"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// signal(2)'s default action.
const SIG_DFL: usize = 0;

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
    #[link_name = "signal"]
    fn libc_signal(sig: i32, handler: usize) -> usize;
}
