//! Sessions whose targets cover the tracer itself: `--pid` of a process the tracer
//! descends from (the shell that started it; here the test binary), and `--pid 1`, the
//! whole machine. The tracer never traces, holds or waits on itself or its helpers, and
//! programs that exec meanwhile go on. Each session runs under a deadline that kills
//! only its own tracer, by pid: a tracer that held the machine must not hold the test.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tracer_analysis::records::Record;
use tracer_tests::{read_recording, tracer};

/// Longest a session may take here: its duration, the start (loading the probes) and
/// the end (writing, detaching) with room for a loaded CI machine.
const SESSION_LIMIT: Duration = Duration::from_secs(60);

/// Waits for `child` (a tracer) until `limit`; past it, kills it by its pid and fails.
fn wait_or_kill(mut child: Child, limit: Duration, what: &str) -> (ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status, err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: the tracer did not end within {limit:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `/bin/true` `n` times from a shell this test starts (execs the tracer sees,
/// held or not) and returns how long the longest took; fails past `limit` each.
fn exec_loop(n: usize, limit: Duration) -> Duration {
    let mut longest = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        let mut child = Command::new("/bin/sh")
            .args(["-c", "/bin/true && ldd /bin/true >/dev/null"])
            .spawn()
            .unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if start.elapsed() > limit {
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                panic!("an exec under tracing took over {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        longest = longest.max(start.elapsed());
    }
    longest
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tracer-whole-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start(args: &[&str], rec: &Path) -> Child {
    Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(rec)
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// `--pid` of the tracer's own parent: the parent's other children are traced (and held
/// at their exec, a moment each), the tracer and what it runs (ldd, the watchdog) are
/// not; `--duration` ends it, and the recording names no process of the tracer's.
#[test]
fn pid_of_an_ancestor_traces_it_but_not_the_tracer() {
    let dir = scratch("ancestor");
    let rec = dir.join("rec.trace");
    let me = std::process::id().to_string();
    let child = start(&["--pid", &me, "--duration", "3"], &rec);
    let tracer_pid = child.id();
    // Programs exec while it traces: each is held until the tracer has looked at it,
    // and never for good (the hold's deadline is 3 s).
    std::thread::sleep(Duration::from_millis(800));
    let longest = exec_loop(10, Duration::from_secs(10));
    let (status, err) = wait_or_kill(child, SESSION_LIMIT, "--pid of an ancestor");
    assert!(status.success(), "tracer failed: {status}\n{err}");
    eprintln!("longest exec under tracing: {longest:?}");
    let t = read_recording(&rec);
    let pids: Vec<u64> = t.summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.contains(&(std::process::id() as u64)),
        "the traced ancestor is missing: {pids:?}"
    );
    assert!(
        !pids.contains(&(tracer_pid as u64)),
        "the tracer traced itself: {pids:?}"
    );
    for r in t.records() {
        match r {
            // A wakeup names its waker, traced or not (the tracer wakes the test's thread
            // that waits for it): only the wakee must be traced.
            Record::Wakeup(w) | Record::WakeupNew(w) => {
                assert_ne!(w.wakee_tgid, tracer_pid, "the tracer woken: {r:?}")
            }
            _ => assert_ne!(r.header().tgid, tracer_pid, "a record of the tracer: {r:?}"),
        }
    }
    assert!(
        !err.contains("hold_expired"),
        "a hold ran out its deadline: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--pid 1` is the whole machine: traced as with `--all` (nothing held), and it ends
/// at its `--duration` while programs exec.
#[test]
fn pid_1_is_system_wide_and_ends_on_time() {
    let dir = scratch("pid1");
    let rec = dir.join("rec.trace");
    let started = Instant::now();
    let child = start(&["--pid", "1", "--duration", "2"], &rec);
    std::thread::sleep(Duration::from_millis(500));
    let longest = exec_loop(10, Duration::from_secs(5));
    let (status, err) = wait_or_kill(child, SESSION_LIMIT, "--pid 1");
    assert!(status.success(), "tracer failed: {status}\n{err}");
    assert!(
        err.contains("--pid 1 is every process on the machine"),
        "not said: {err}"
    );
    eprintln!(
        "--pid 1 --duration 2 took {:?}; longest exec {longest:?}",
        started.elapsed()
    );
    let t = read_recording(&rec);
    assert!(t.meta.system_wide);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM ends a session that traces an ancestor within a second plus the time to
/// write its outputs, while programs exec.
#[test]
fn sigterm_ends_a_session_over_an_ancestor_promptly() {
    let dir = scratch("sigterm");
    let rec = dir.join("rec.trace");
    let me = std::process::id().to_string();
    let child = start(&["--pid", &me], &rec);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(800));
    exec_loop(5, Duration::from_secs(10));
    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (status, err) = wait_or_kill(child, SESSION_LIMIT, "SIGTERM");
    let took = sent.elapsed();
    assert!(status.success(), "tracer failed: {status}\n{err}");
    // Detaching takes most of it (about 0.1 s per kernel link); the event loop itself
    // must stop within a second.
    assert!(
        took < Duration::from_secs(15),
        "SIGTERM took {took:?} to end the session"
    );
    read_recording(&rec);
    let _ = std::fs::remove_dir_all(&dir);
}

/// stress-ng's futex stressor: a flood of futex calls from a program that maps a device
/// (reading every file a process maps whole read /dev/zero for ever: the tracer grew by
/// 1 GB/s, wrote nothing and never ended). The session now ends with the program, in
/// bounded memory, and its recording holds what it read (or says what it lost).
#[test]
fn a_futex_flood_ends_with_its_program_in_bounded_memory() {
    let dir = scratch("flood");
    let rec = dir.join("rec.trace");
    let maxrss = dir.join("maxrss");
    let started = Instant::now();
    let time = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&maxrss)
        .arg(tracer())
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--", "stress-ng", "--futex", "1", "-t", "2"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The deadline kills the tracer (time's child), not time; it is called off once
    // time has ended (its pid may be reused after).
    let time_pid = time.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < SESSION_LIMIT {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let children =
                std::fs::read_to_string(format!("/proc/{time_pid}/task/{time_pid}/children"))
                    .unwrap_or_default();
            for pid in children.split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        })
    };
    let (status, err) = wait_or_kill(time, SESSION_LIMIT + Duration::from_secs(5), "flood");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    killer.join().unwrap();
    let took = started.elapsed();
    assert!(status.success(), "tracer failed: {status}\n{err}");
    let kib: u64 = std::fs::read_to_string(&maxrss)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eprintln!("futex flood: {took:?}, tracer peak RSS {kib} KiB");
    // 2 s of stressor; the rest is starting and ending (the detaching of a few links).
    assert!(
        took < Duration::from_secs(30),
        "the session took {took:?} for 2 s of program"
    );
    assert!(kib < 1 << 20, "the tracer's peak RSS is {kib} KiB");
    let t = read_recording(&rec);
    let events = t.records().count() as u64;
    assert!(events > 10_000, "only {events} records of a futex flood");
    if t.lost > 0 {
        assert!(err.contains("were lost"), "losses not said: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Past `--memory-limit-mib` the tracer drops what it reads, counts it as lost and says
/// so on every command; the session ends with its program and its recording is whole.
/// A limit of 1 MiB is passed at the first check, before the first record is read (the
/// tracer alone takes more), so every record is dropped, whatever the rate.
#[test]
fn past_its_memory_limit_the_tracer_drops_and_counts() {
    let dir = scratch("memlimit");
    let rec = dir.join("rec.trace");
    let child = Command::new(tracer())
        .args(["record", "--memory-limit-mib", "1", "-o"])
        .arg(&rec)
        .arg("--")
        .arg(tracer_tests::program("threads_pingpong"))
        .arg("20000")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (status, err) = wait_or_kill(child, SESSION_LIMIT, "memory limit");
    assert!(status.success(), "tracer failed: {status}\n{err}");
    assert!(
        err.contains("passed --memory-limit-mib (1 MiB)"),
        "not said while tracing: {err}"
    );
    let t = read_recording(&rec);
    assert_eq!(t.records().count(), 0, "records kept past the limit");
    assert!(t.lost > 0, "nothing counted as lost");
    assert!(err.contains("records dropped by the tracer"), "{err}");
    assert!(err.contains("were lost"), "{err}");
    // Every command that reads the recording says it too.
    let out = Command::new(tracer())
        .arg("summary")
        .arg(&rec)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("records dropped by the tracer"), "{said}");
    assert!(said.contains("were lost"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
