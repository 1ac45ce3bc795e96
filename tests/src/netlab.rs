//! The lab's tracers (xtask's `netlab` is the lab itself: namespaces, link, launchers):
//! a tracer, an agent or a collector run in a node of the lab, and what the multinode
//! tests read back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use xtask::netlab::*;

/// A tracer run in a namespace of the lab (`nsenter --net`, which keeps tracefs and
/// bpffs in view), its standard error read line by line as it comes; killed, by its own
/// pid, if dropped while it runs.
pub struct LabTracer {
    child: Child,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl LabTracer {
    /// `tracer ARGS` in namespace `ns`, once it has said a line holding `ready` (at most
    /// `limit`; `what` names it in the panic).
    pub fn start(ns: &str, args: &[String], ready: &str, limit: Duration, what: &str) -> LabTracer {
        let enter = enter(ns);
        let mut child = Command::new(&enter[0])
            .args(&enter[1..])
            .arg(crate::tracer())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nsenter");
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let t = LabTracer { child, stderr: rx };
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match t.stderr.recv_timeout(left) {
                Ok(line) if line.contains(ready) => return t,
                Ok(_) => {}
                Err(_) => panic!("{what} in {ns} did not say {ready:?} within {limit:?}"),
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the tracer to end, at most `limit`: it must end with status 0. What it
    /// said since it was ready.
    pub fn finish(mut self, limit: Duration) -> String {
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < limit,
                "the tracer did not end within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().unwrap();
        let said: Vec<String> = self.stderr.try_iter().collect();
        assert!(status.success(), "{}", said.join("\n"));
        said.join("\n")
    }
}

impl Drop for LabTracer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `tracer agent` in a namespace of the lab.
pub struct Agent {
    tracer: LabTracer,
    /// HOST:PORT, as `--agent` takes it.
    pub address: String,
}

impl Agent {
    /// Starts an agent in namespace `ns` listening on `address`, once it says so.
    pub fn start(ns: &str, address: &str, token: &Path, extra: &[&str]) -> Agent {
        let mut args: Vec<String> = ["agent", "--listen", address, "--token-file"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(token.display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        let tracer = LabTracer::start(
            ns,
            &args,
            "listening on",
            Duration::from_secs(30),
            "the agent",
        );
        Agent {
            tracer,
            address: address.to_string(),
        }
    }

    /// Its pid, to kill it as a test would kill a node's agent.
    pub fn pid(&self) -> u32 {
        self.tracer.pid()
    }

    /// Ends the agent with SIGTERM: it must be gone within 5 s, with status 0.
    pub fn stop(self) -> String {
        let pid = self.pid().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.tracer.finish(Duration::from_secs(5))
    }

    /// `record`'s options that make it this agent's collector, with its recording and
    /// live profile written to `recording` and `profile`.
    pub fn collector_args(&self, token: &Path, recording: &Path, profile: &Path) -> Vec<String> {
        collector_args(std::slice::from_ref(self), token, recording, profile)
    }
}

/// `record`'s options that make it the collector of `agents`, with its recording and live
/// profile written to `recording` and `profile`.
pub fn collector_args(
    agents: &[Agent],
    token: &Path,
    recording: &Path,
    profile: &Path,
) -> Vec<String> {
    let mut args = Vec::new();
    for agent in agents {
        args.extend(["--agent".to_string(), agent.address.clone()]);
    }
    args.push("--token-file".into());
    for path in [
        token,
        Path::new("-o"),
        recording,
        Path::new("--profile-json"),
        profile,
    ] {
        args.push(path.display().to_string());
    }
    args
}

/// Each rank of `tracer report --json`'s processes with its node: the node is the
/// process id's high bits (docs/multinode.md), sorted by rank.
pub fn ranks_with_their_nodes(report: &serde_json::Value) -> Vec<(i64, u64)> {
    let mut ranks: Vec<(i64, u64)> = report["processes"]
        .as_array()
        .expect("a report's processes")
        .iter()
        .filter_map(|p| Some((p["rank"].as_i64()?, p["pid"].as_u64()? >> 22)))
        .collect();
    ranks.sort();
    ranks
}

/// `tracer report`'s text (for people) names every rank's process as its node gave it,
/// with the node when it is not node 0 (`101@node1`, docs/multinode.md): its process
/// table has a row `PID RANK` per rank of `report` (the same recording's `--json`).
pub fn report_text_names_each_rank_with_its_node(recording: &Path, report: &serde_json::Value) {
    let out = Command::new(crate::tracer())
        .arg("report")
        .arg(recording)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let processes = report["processes"]
        .as_array()
        .expect("a report's processes");
    let mut ranks = 0;
    for p in processes {
        let (Some(rank), Some(pid)) = (p["rank"].as_i64(), p["pid"].as_u64()) else {
            continue;
        };
        let (node, local) = (pid >> 22, pid & ((1 << 22) - 1));
        let shown = if node == 0 {
            local.to_string()
        } else {
            format!("{local}@node{node}")
        };
        let rank = rank.to_string();
        assert!(
            rows.iter()
                .any(|r| r.len() > 2 && r[0] == shown && r[1] == rank),
            "no process row {shown:?} for rank {rank} in:\n{text}"
        );
        ranks += 1;
    }
    assert!(ranks >= 2, "{report}");
}

/// A collector's run: `tracer record --agent ... -- COMMAND` in namespace `ns`, killed
/// by its own pid past `limit`.
pub fn collect(
    ns: &str,
    args: &[String],
    command: &[String],
    cwd: &Path,
    limit: Duration,
) -> std::process::Output {
    let enter = enter(ns);
    let child = Command::new(&enter[0])
        .args(&enter[1..])
        .arg(crate::tracer())
        .current_dir(cwd)
        .arg("record")
        .args(args)
        .arg("--")
        .args(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nsenter");
    let pid = child.id();
    let guard = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(100));
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return false;
            }
        }
        // The collector's own pid (nsenter execs the tracer).
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        true
    });
    let out = child.wait_with_output().unwrap();
    assert!(!guard.join().unwrap(), "the collector ran past {limit:?}");
    out
}

/// A token file in `dir` holding `token`, readable by its owner only.
pub fn token_file(dir: &Path, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("token-{}", token.len()));
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// `tracer calibrate --mpicc mpicc.openmpi ARGS -- LAUNCHER`; panics with the tracer's
/// error output on failure, else returns (standard output, standard error).
pub fn calibrate(args: &[&str], launcher: &[String]) -> (String, String) {
    let out = Command::new(crate::tracer())
        .arg("calibrate")
        .args(["--mpicc", "mpicc.openmpi"])
        .args(args)
        .arg("--")
        .args(launcher)
        .output()
        .expect("run tracer");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "tracer calibrate failed: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}
