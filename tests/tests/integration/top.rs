//! `tracer top` in a real terminal (tmux, 160x45): the live view shows the planted
//! bottleneck of the hybrid MPI + threads program (each round one thread of one rank runs
//! `thread_slow` for 40 ms while the others run `thread_work` for 10 ms:
//! tests/programs/hybrid_mpi_threads.c), which also prints 20 lines a round on each
//! rank: they go to a file whose last lines a pane shows, and never onto the view. The
//! view uses the screen (no blank rows in its panes), and `q` stops tracing, ends the
//! job (mpirun and its ranks) and writes the outputs as Ctrl-C does under `record`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use tracer_tests::profile::tracer_json;
use tracer_tests::{openmpi, tracer};

/// Rounds of the program: about 50 ms each, a minute in all: the job is still running
/// when `q` comes, so that its end is the tracer's doing.
const ROUNDS: &str = "1200";

/// Lines each rank prints after each round.
const LINES: &str = "20";

#[test]
fn top_shows_the_bottleneck_live_and_q_writes_the_outputs() {
    let dir = std::env::temp_dir().join(format!("tracer-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recording = dir.join("top.trace");
    let status = dir.join("status");
    let output = dir.join("command.out");
    let command = openmpi(
        2,
        "hybrid_mpi_threads",
        &["2", ROUNDS, "40", "10", "-1", LINES],
    );
    let script = format!(
        "{} top -o {} --command-output {} --func thread_slow --func thread_work -- {}; \
         echo $? > {}; sleep 600",
        tracer().display(),
        recording.display(),
        output.display(),
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
    check_the_view_holds(&screen, &output);
    let footer = screen.lines().last().unwrap();
    let (probes, libraries) = probes_so_far(footer).expect("probes in the footer");
    assert!(probes > 0 && libraries > 0, "{footer}");
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
    // `tab` shows the message counts, each line whole, the output below them.
    tmux.keys("Tab");
    let counts = tmux.wait_for(Duration::from_secs(10), |s| s.contains("collectives:"));
    assert!(
        counts.contains("│  OpenMP: 0 forks, 0 joins, 0 barriers "),
        "{counts}"
    );
    check_the_view_holds(&counts, &output);

    // The job, as it runs: every process under the tracer (mpirun, its ranks, the
    // tracer's watchdog).
    let tracer_pid = tmux.tracer_pid();
    let job = descendants(tracer_pid);
    assert!(job.len() >= 3, "mpirun and 2 ranks at least: {job:?}");
    assert!(
        job.values()
            .filter(|c| c.contains("hybrid_mpi_threads"))
            .count()
            >= 3,
        "{job:?}"
    );
    let mut ours = job.clone();
    ours.insert(tracer_pid, cmdline(tracer_pid));
    let _guard = KillOnDrop { processes: ours };

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
    // The shell writes the status once the tracer has exited, but tmux may not have
    // drawn the tracer's last lines by then (one CI run read a screen that ended at its
    // `samples:` line): the screen once they are there.
    let after = tmux.wait_for(Duration::from_secs(10), |s| {
        s.contains("recording written to") && s.contains("the command's output is in")
    });
    // The command's status, as under `record` (the session waits for the command that
    // q interrupted: mpirun exits 1 when interrupted), and only it: an error of the
    // tracer would print no such line.
    let code = std::fs::read_to_string(&status).unwrap();
    let code = code.trim();
    let said = if code == "0" {
        !after.contains("the traced command")
    } else {
        after.contains(&format!("the traced command exited with status {code}"))
            || after.contains(&format!("(status {code})"))
    };
    assert!(said, "status {code}: {after}");
    // The terminal is back to normal and shows what record prints at the end.
    assert!(after.contains("tracer: stopped (interrupted)"), "{after}");
    assert!(after.contains("recording written to"), "{after}");
    // What the run cost, as record says it (docs/summary-json.md, `cost`).
    assert!(
        after.contains("cost: ") && after.contains(" probe hits/s"),
        "{after}"
    );
    assert!(
        after.contains(&format!("the command's output is in {}", output.display())),
        "{after}"
    );
    // `q` ended the job, long before its minute was up.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<&u32> = job
            .iter()
            .filter(|(&pid, c)| alive(pid, c))
            .map(|(p, _)| p)
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running 30 s after q: {left:?} of {job:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(tmux);
    let printed = std::fs::read_to_string(&output).unwrap();
    assert!(
        printed.contains("rank 0 round 0 line 1 of 20\n"),
        "{printed}"
    );
    assert!(
        printed.contains("rank 1 round 0 line 20 of 20\n"),
        "{printed}"
    );

    let json = tracer_json(&["analyze"], &recording);
    assert_eq!(
        json["procedures"][0]["name"], "thread_slow",
        "{}",
        json["procedures"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What a printing command must not do to the view: the header stays on the first line,
/// the footer on the last; the program's lines are only in the output pane, which names
/// its file, each at the pane's left edge (no staircase); no pane has a blank row.
fn check_the_view_holds(screen: &str, output: &std::path::Path) {
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].starts_with("┌ tracer top "), "{screen}");
    assert_eq!(lines.len(), 45, "{screen}");
    assert!(lines[44].starts_with(" q stop"), "{screen}");
    let pane = lines
        .iter()
        .position(|l| l.contains(&format!("the command's output: {} ", output.display())))
        .unwrap_or_else(|| panic!("no output pane:\n{screen}"));
    let printed = |l: &str| l.contains(" round ") && l.contains(" line ");
    assert!(
        !lines[..pane].iter().any(|l| printed(l)),
        "the program's output above its pane:\n{screen}"
    );
    let shown: Vec<&&str> = lines[pane..].iter().filter(|l| printed(l)).collect();
    assert!(shown.len() >= 3, "{screen}");
    for l in shown {
        assert!(
            l.starts_with("│rank "),
            "not at the pane's edge: {l:?}\n{screen}"
        );
    }
    for l in &lines {
        let inside = l
            .trim_end()
            .strip_prefix('│')
            .and_then(|l| l.strip_suffix('│'));
        assert!(
            inside.is_none_or(|i| !i.trim().is_empty()),
            "a blank row in a pane:\n{screen}"
        );
    }
}

/// "N probes in M MPI/PVM libraries" in the footer.
fn probes_so_far(footer: &str) -> Option<(u64, u64)> {
    let at = footer.find(" probes in ")?;
    let probes = footer[..at].rsplit(' ').next()?.parse().ok()?;
    let rest = &footer[at + " probes in ".len()..];
    let libraries = rest.split(' ').next()?.parse().ok()?;
    Some((probes, libraries))
}

/// The processes under `pid`, by pid, with their command lines.
fn descendants(pid: u32) -> BTreeMap<u32, String> {
    let mut found = BTreeMap::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in children(p) {
            found.insert(child, cmdline(child));
            todo.push(child);
        }
    }
    found
}

/// The children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether `pid` is still the process that ran `command` (not gone, not a zombie, not
/// a new process with its number).
fn alive(pid: u32, command: &str) -> bool {
    let c = cmdline(pid);
    !c.is_empty() && c == command
}

/// Kills, when the test ends however it ends, the processes of its own job (the tracer
/// and what it launched) that still run: a failed test leaves nothing running. Each by
/// its pid, and only while that pid still runs the command it ran.
struct KillOnDrop {
    processes: BTreeMap<u32, String>,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for (&pid, command) in &self.processes {
            if alive(pid, command) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
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

    /// The tracer: the child of the pane's shell.
    fn tracer_pid(&self) -> u32 {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.name, "#{pane_pid}"])
            .output()
            .expect("tmux display-message");
        let shell: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let tracer = tracer().display().to_string();
        children(shell)
            .into_iter()
            .find(|&c| cmdline(c).starts_with(&tracer))
            .expect("the tracer under the pane's shell")
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
