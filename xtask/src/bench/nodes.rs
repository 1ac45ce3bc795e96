//! `nodes`: a job across the nodes of the lab (xtask's `netlab`: network and UTS
//! namespaces on this machine, a rank on each, Open MPI over TCP), untraced and traced
//! live by a collector on node 0 and an agent on every other node, alternating. For each
//! workload, at 2 and 3 nodes: the job's own timer (the slowdown), and what the collector
//! and the agents take: records a second of the job, their CPU, and so the records a
//! second one collector core would take (its records over its CPU time: the collector
//! also traces its own node, so this is a lower bound of what merging and analysing
//! alone sustain).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{field, load, Env, Stats};
use xtask::netlab::{enter, NetLab};

/// A `bench_kernels` loop across the nodes, about two seconds untraced on a quiet
/// machine, its iterations at 2 and at 3 nodes (TCP between the lab's nodes: 0.1 to 0.4
/// ms an iteration; ten times that and more when other work shares the cores, as the
/// ranks yield when idle). Long enough that the session's start and stop (about half a
/// second of the collector's CPU) weigh little in its records a CPU second.
struct NodesWorkload {
    name: &'static str,
    kernel: &'static str,
    iters_at: [u64; 2],
    n: u64,
}

const WORKLOADS: [NodesWorkload; 2] = [
    NodesWorkload {
        name: "stencil (halo exchanges)",
        kernel: "stencil",
        iters_at: [5_000, 4_000],
        n: 440,
    },
    NodesWorkload {
        name: "CG-like (small allreduces)",
        kernel: "cg",
        iters_at: [20_000, 10_000],
        n: 5_000,
    },
];

/// Node counts the stage runs at (`NodesWorkload::iters_at`'s order).
const NODE_COUNTS: [usize; 2] = [2, 3];

/// The lab's agent port.
const PORT: u16 = 7421;

/// An agent of the lab, killed (by its own pid) when dropped.
struct LabAgent {
    child: Child,
    address: String,
}

impl LabAgent {
    fn start(env: &Env, lab: &NetLab, node: usize, token: &Path) -> Result<LabAgent> {
        let address = format!("{}:{PORT}", lab.address(node));
        let enter = enter(lab.namespace(node));
        let mut child = Command::new(&enter[0])
            .args(&enter[1..])
            .arg(&env.tracer)
            .args(["agent", "--listen", &address, "--token-file"])
            .arg(token)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting an agent")?;
        let stderr = child.stderr.take().context("the agent's stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("listening on") => break,
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    bail!("the agent on node {node} did not listen within 30 s");
                }
            }
        }
        // What it says next (a session's end per run) is not needed: drained.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        Ok(LabAgent { child, address })
    }

    /// Its CPU time so far (user + system), seconds.
    fn cpu_s(&self) -> Result<f64> {
        process_cpu_s(self.child.id())
    }
}

impl Drop for LabAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's CPU time (user + system), seconds, from /proc/PID/stat.
fn process_cpu_s(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_comm = &stat[stat.rfind(')').context("a stat line")? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // utime and stime are fields 14 and 15, the 12th and 13th after the command.
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / clock_ticks())
}

/// Clock ticks a second (USER_HZ: what /proc/PID/stat counts in), as getconf says.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// One traced run: the job's time, the collector's session (wall time, records, CPU),
/// the agents' CPU over it.
struct TracedRun {
    seconds: f64,
    wall_s: f64,
    records: f64,
    collector_cpu_s: f64,
    agents_cpu_s: f64,
    lost: f64,
    next: NextDesign,
}

/// The next design (each node's agent runs the engine; only path values cross nodes),
/// simulated on the run's recording by `tracer path-values` (docs/multinode.md, "Scale").
struct NextDesign {
    /// The recording's span, its records from nodes other than the collector's (what
    /// the agents send today), and the path values that would cross nodes instead.
    span_s: f64,
    agents_records: f64,
    values: f64,
    value_bytes: f64,
    value_bytes_max: f64,
    /// The values' bytes, each sent as its difference from the previous one between the
    /// same two threads.
    delta_bytes: f64,
}

impl NextDesign {
    fn of(env: &Env, recording: &Path) -> Result<NextDesign> {
        let out = Command::new(&env.tracer)
            .args(["path-values", "--json"])
            .arg(recording)
            .output()?;
        if !out.status.success() {
            bail!(
                "tracer path-values failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("path-values")?;
        let number = |what: &str| {
            v[what]
                .as_f64()
                .with_context(|| format!("no {what} in tracer path-values' output"))
        };
        let by_node = v["records_by_node"]
            .as_array()
            .context("no records_by_node in tracer path-values' output")?;
        Ok(NextDesign {
            span_s: number("span_ns")? / 1e9,
            agents_records: by_node.iter().skip(1).filter_map(|n| n.as_f64()).sum(),
            values: number("cross_node")?,
            value_bytes: number("value_bytes")?,
            value_bytes_max: number("value_bytes_max")?,
            delta_bytes: number("delta_bytes")?,
        })
    }
}

fn kernel_args(env: &Env, w: &NodesWorkload, nodes: usize) -> Vec<String> {
    let at = NODE_COUNTS.iter().position(|&n| n == nodes).unwrap_or(0);
    vec![
        env.programs
            .join("bench_kernels.openmpi")
            .display()
            .to_string(),
        w.kernel.to_string(),
        w.iters_at[at].to_string(),
        w.n.to_string(),
    ]
}

fn untraced(env: &Env, lab: &NetLab, nodes: usize, w: &NodesWorkload) -> Result<f64> {
    let argv = kernel_args(env, w, nodes);
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let cmd = lab.openmpi(nodes, &argv[0], &args);
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .current_dir(&env.scratch)
        .output()?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    field(&String::from_utf8_lossy(&out.stdout), "secs")
}

fn traced(
    env: &Env,
    lab: &NetLab,
    agents: &[LabAgent],
    token: &Path,
    w: &NodesWorkload,
) -> Result<TracedRun> {
    let nodes = agents.len() + 1;
    let argv = kernel_args(env, w, nodes);
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let job = lab.openmpi(nodes, &argv[0], &args);
    let summary = env.scratch.join("nodes-summary.json");
    let recording = env.scratch.join("nodes.trace");
    let enter = enter(lab.namespace(0));
    let mut collector = Command::new(&enter[0]);
    collector
        .args(&enter[1..])
        .arg(&env.tracer)
        .args(["record", "-q"]);
    for a in agents {
        collector.args(["--agent", &a.address]);
    }
    collector
        .arg("--token-file")
        .arg(token)
        .arg("--summary-json")
        .arg(&summary)
        .arg("-o")
        .arg(&recording)
        .arg("--")
        .args(&job)
        .current_dir(&env.scratch);
    let agents_before: f64 = agents.iter().map(|a| a.cpu_s()).sum::<Result<f64>>()?;
    let start = Instant::now();
    let out = collector.output()?;
    let wall_s = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "the collector failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let agents_after: f64 = agents.iter().map(|a| a.cpu_s()).sum::<Result<f64>>()?;
    let seconds = field(&String::from_utf8_lossy(&out.stdout), "secs")?;
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary)?).context("the summary")?;
    let number = |v: &serde_json::Value, what: &str| {
        v.as_f64()
            .with_context(|| format!("no {what} in the collector's summary"))
    };
    Ok(TracedRun {
        seconds,
        wall_s,
        records: number(&s["events"]["total"], "events.total")?,
        collector_cpu_s: number(&s["tracer_cpu_ns"], "tracer_cpu_ns")? / 1e9,
        agents_cpu_s: agents_after - agents_before,
        lost: number(&s["events"]["lost"], "events.lost")?,
        next: NextDesign::of(env, &recording)?,
    })
}

pub(super) fn nodes(env: &Env, reps: usize) -> Result<()> {
    println!(
        "A job with a rank on each node of the lab (network and UTS namespaces on this \
         machine, Open MPI over TCP between them: xtask's `netlab`), its own timer \
         (`bench_kernels ... secs=`), untraced and traced live (`tracer record -q \
         --agent ... -o FILE --summary-json FILE -- mpirun ...` in node 0, `tracer agent` \
         in each other node), alternating, {reps} rounds; the nodes share this machine's \
         cores. Over each traced session (the collector's wall time, start and stop \
         included): its records (every node's) a second, its CPU and the agents' (all of \
         them) in percent of a core; a collector core takes: the records over the \
         collector's CPU time. \
         Load average at the start: {}.\n",
        load()
    );
    println!(
        "| workload | nodes | untraced s | traced s | slowdown % | records/s | \
         collector CPU % of a core | agents' CPU % of a core | records a collector core \
         takes, /s | lost |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut next_rows = Vec::new();
    for nodes in NODE_COUNTS {
        let lab = if nodes == 2 {
            NetLab::unshaped()
        } else {
            NetLab::bridged(nodes)
        };
        let token = env.scratch.join("nodes-token");
        std::fs::write(&token, "a-token-for-the-benchmark")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600))?;
        let agents: Vec<LabAgent> = (1..nodes)
            .map(|i| LabAgent::start(env, &lab, i, &token))
            .collect::<Result<_>>()?;
        for w in &WORKLOADS {
            let mut plain = Vec::new();
            let mut runs = Vec::new();
            for _ in 0..reps {
                plain.push(untraced(env, &lab, nodes, w)?);
                runs.push(traced(env, &lab, &agents, &token, w)?);
            }
            let traced_s: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
            let (u, t) = (Stats::of(&plain), Stats::of(&traced_s));
            let slowdown: Vec<f64> = plain
                .iter()
                .zip(&traced_s)
                .map(|(u, t)| (t / u - 1.0) * 100.0)
                .collect();
            let per =
                |f: &dyn Fn(&TracedRun) -> f64| Stats::of(&runs.iter().map(f).collect::<Vec<_>>());
            println!(
                "| {} | {nodes} | {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                u.show(3),
                t.show(3),
                Stats::of(&slowdown).show(1),
                per(&|r| r.records / r.wall_s).show(0),
                per(&|r| r.collector_cpu_s / r.wall_s * 100.0).show(1),
                per(&|r| r.agents_cpu_s / r.wall_s * 100.0).show(1),
                per(&|r| r.records / r.collector_cpu_s).show(0),
                per(&|r| r.lost).show(0),
            );
            let next = |f: &dyn Fn(&NextDesign) -> f64| per(&|r| f(&r.next));
            next_rows.push(format!(
                "| {} | {nodes} | {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                next(&|d| d.agents_records / d.span_s).show(0),
                next(&|d| d.agents_records * RECORD_BYTES / d.span_s / 1e3).show(0),
                next(&|d| d.values / d.span_s).show(0),
                next(&|d| d.value_bytes / d.values.max(1.0)).show(1),
                next(&|d| d.value_bytes_max).show(0),
                next(&|d| d.value_bytes / d.span_s / 1e3).show(1),
                next(&|d| d.delta_bytes / d.values.max(1.0)).show(1),
                next(&|d| d.delta_bytes / d.span_s / 1e3).show(1),
            ));
        }
    }
    println!(
        "\nThe next design, simulated on each traced run's recording (`tracer path-values`: \
         each node's agent runs the engine for its processes, and only the path value of a \
         dependency between nodes travels, protobuf-encoded): what the agents send today \
         (their nodes' records a second of the recording, and kB a second at \
         {RECORD_BYTES} bytes a record, before compression) against the values that would \
         cross nodes, their size and their kB a second, in full and as differences (each \
         value as its difference from the previous one between the same two threads).\n"
    );
    println!(
        "| workload | nodes | agents' records/s today | kB/s today | values/s | bytes a value | \
         largest value, bytes | kB/s | bytes a difference | kB/s as differences |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in next_rows {
        println!("{row}");
    }
    Ok(())
}

/// A record's mean size in a recording (docs/multinode.md, "Scale": 84.3 MB for
/// 1,369,167 records).
const RECORD_BYTES: f64 = 62.0;
