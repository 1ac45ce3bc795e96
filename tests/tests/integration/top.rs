//! `tracer top` in a real terminal (tmux): the live view shows the planted bottleneck of
//! the hybrid MPI + threads program (each round one thread of one rank runs
//! `thread_slow` for 40 ms while the others run `thread_work` for 10 ms:
//! tests/programs/hybrid_mpi_threads.c), and `q` stops tracing and writes the outputs as
//! `record` does.

use std::process::Command;
use std::time::{Duration, Instant};

use tracer_tests::profile::tracer_json;
use tracer_tests::{openmpi, tracer};

/// Rounds of the program: long enough (about 50 ms each) for several samples, a second
/// apart, before `q`.
const ROUNDS: &str = "200";

#[test]
fn top_shows_the_bottleneck_live_and_q_writes_the_outputs() {
    let dir = std::env::temp_dir().join(format!("tracer-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recording = dir.join("top.trace");
    let status = dir.join("status");
    let command = openmpi(2, "hybrid_mpi_threads", &["2", ROUNDS, "40", "10", "-1"]);
    let script = format!(
        "{} top -o {} --func thread_slow --func thread_work -- {}; echo $? > {}; sleep 600",
        tracer().display(),
        recording.display(),
        command.join(" "),
        status.display()
    );
    let tmux = Tmux::start(&format!("tracer-top-{}", std::process::id()), &script);

    // The view, once a sample has come in with thread_slow ahead on a path of at least
    // ten rounds: the ranks' shares below are within a round of half of it, and a round
    // is a third of a three-round path (on a busy machine the first sample can be that
    // short: 111.8 ms, one rank 64 %).
    let screen = tmux.wait_for(Duration::from_secs(60), |s| {
        first_procedure(s).as_deref() == Some("thread_slow")
            && path_ms(s).is_some_and(|ms| ms >= 10.0 * 40.0)
    });
    assert!(screen.contains("critical path"), "{screen}");
    assert!(screen.contains("ends in pid"), "{screen}");
    assert!(screen.contains("procedures by critical path"), "{screen}");
    assert!(screen.contains("thread_work"), "{screen}");
    eprintln!("the live view:\n{screen}");
    // Where the path runs: the slow thread moves from rank to rank each round, so both
    // ranks hold half of the path (within a round of the rounds sampled so far), each
    // through a new thread every other round.
    let ranks = path_processes(&screen);
    assert_eq!(ranks.len(), 2, "two processes on the path:\n{screen}");
    for (pid, threads, pct) in &ranks {
        assert!(
            (40.0..=60.0).contains(pct) && *threads >= 2,
            "pid {pid}: {threads} threads, {pct} % of the path:\n{screen}"
        );
    }

    // `s` sorts by zeroing: thread_slow stays first (it is the only procedure whose
    // removal shortens the path).
    tmux.keys("s");
    let sorted = tmux.wait_for(Duration::from_secs(10), |s| {
        s.contains("procedures by zeroing")
    });
    assert_eq!(
        first_procedure(&sorted).as_deref(),
        Some("thread_slow"),
        "{sorted}"
    );
    // `tab` shows the message counts.
    tmux.keys("Tab");
    tmux.wait_for(Duration::from_secs(10), |s| s.contains("collectives:"));

    tmux.keys("q");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !status.exists() {
        assert!(
            Instant::now() < deadline,
            "tracer top did not end after q:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = tmux.screen();
    assert_eq!(
        std::fs::read_to_string(&status).unwrap().trim(),
        "0",
        "{after}"
    );
    // The terminal is back to normal and shows what record prints at the end.
    assert!(after.contains("tracer: stopped (interrupted)"), "{after}");
    assert!(after.contains("recording written to"), "{after}");
    drop(tmux);

    let json = tracer_json(&["analyze"], &recording);
    assert_eq!(
        json["procedures"][0]["name"], "thread_slow",
        "{}",
        json["procedures"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The process rows of the path table on a captured screen: (pid, threads on the path,
/// cp %), for the traced program's processes.
fn path_processes(screen: &str) -> Vec<(u32, usize, f64)> {
    screen
        .lines()
        .skip_while(|l| !l.contains("path runs through"))
        .filter_map(|l| {
            let row = l.trim_matches(|c: char| c == '│' || c.is_whitespace());
            let rest = row.strip_prefix("pid ")?;
            if !rest.contains("hybrid_mpi_threads") {
                return None;
            }
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let n = fields.len();
            Some((
                fields[0].parse().ok()?,
                fields.get(n.checked_sub(3)?)?.parse().ok()?,
                fields.get(n - 1)?.parse().ok()?,
            ))
        })
        .collect()
}

/// The critical path's length in ms on a captured screen ("critical path 486.295 ms").
fn path_ms(screen: &str) -> Option<f64> {
    let rest = &screen[screen.find("critical path ")? + "critical path ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The first row of the procedure table on a captured screen.
fn first_procedure(screen: &str) -> Option<String> {
    let mut lines = screen.lines().skip_while(|l| !l.contains("procedure  "));
    lines.next()?;
    let row = lines.next()?;
    row.trim_matches(|c: char| c == '│' || c.is_whitespace())
        .split_whitespace()
        .next()
        .map(String::from)
}

/// A detached tmux session running one shell command; killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(name: &str, script: &str) -> Tmux {
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                "160",
                "-y",
                "45",
                script,
            ])
            .status()
            .expect("tmux")
            .success();
        assert!(ok, "tmux new-session failed");
        Tmux { name: name.into() }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &self.name, keys])
            .status()
            .expect("tmux send-keys")
            .success();
        assert!(ok, "tmux send-keys {keys} failed");
    }

    /// The screen once `ready` holds, polled every 200 ms until `limit`.
    fn wait_for(&self, limit: Duration, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.screen();
            if ready(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never got there:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}
