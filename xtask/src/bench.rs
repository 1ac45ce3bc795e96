//! `cargo xtask bench`: the overhead and throughput suite (docs/benchmarks.md). Every
//! figure is a ratio or a difference measured within one run of the suite, repeated, and
//! printed as median and min-max as a Markdown table; each stage runs alone with
//! `--only STAGE`.
//!
//! - `floor`: per-event cost of each probe type against empty BPF programs attached at
//!   the same places (`tracer record --probes floor`), untraced/floor/ours alternating.
//! - `slowdown`: an MPI program at 150, 1,000 and 10,000 messages/s with 0, 1, 8 and 32
//!   selected procedures, untraced/floor/ours alternating.
//! - `throughput`: `tracer analyze` replaying a large recording on one core.
//! - `flood`: `tracer record` (online, no `-o`) under a paced futex flood; lost events.
//! - `memory`: peak RSS of `tracer record` (online) for a run and a ten times longer one.
//! - `size`: bytes per event on disk and the write rate, at the flood rate and unpaced.
//! - `exports`: `tracer export` in every format on the throughput stage's recording, against
//!   `tracer analyze` on it.
//! - `real`: the slowdown of LAMMPS, hpcc and NAS- and OSU-shaped programs by their own
//!   timers, at 2 ranks on 2 cores and oversubscribed, and where the cost goes.
//! - `start-stop`: the wall time `tracer record` adds to an Open MPI job (uprobe_multi
//!   links against one perf event per probe), and attach/detach times by probe count.
//! - `sampler`: what sampling call stacks at the default 99 Hz adds to the slowdown
//!   stage's program on top of tracing without it, and the report's attribution rate.
//! - `nodes`: a job with a rank on each node of the lab (2 and 3 nodes), untraced and
//!   traced live by a collector and agents: the slowdown and the collector's load.

mod nodes;
mod real;
mod sampler;
mod start_stop;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::build::build_release;
use crate::setup::setup;
use crate::util::{output, root, run};

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub(crate) enum Stage {
    Floor,
    Slowdown,
    Throughput,
    Flood,
    Memory,
    Size,
    Exports,
    StartStop,
    Real,
    /// What sampling call stacks adds, and how fast the report attributes samples.
    Sampler,
    /// A job across the lab's nodes traced live: slowdown and the collector's load.
    Nodes,
    /// The offline graph analyses (tracer-analysis/examples/graph_bench.rs).
    Graph,
}

pub(crate) struct Options {
    /// Repetitions of every stage (each stage has its own default).
    pub reps: Option<usize>,
    /// Seconds of each slowdown run's loop.
    pub slowdown_secs: f64,
    /// Message rates of the slowdown stage (empty: `RATES`).
    pub slowdown_rates: Vec<u64>,
    /// Numbers of selected procedures of the slowdown stage (empty: all of `SELECTIONS`).
    pub slowdown_procs: Vec<usize>,
    /// Seconds and events per second of the flood.
    pub flood_secs: f64,
    pub flood_rate: u64,
    /// Seconds of the shorter memory run (the longer one is ten times that).
    pub memory_secs: f64,
}

/// Where the built tracer and test programs are. `XTASK_BENCH_TRACER=PATH` replaces the
/// tracer (to compare two builds with the same suite); `XTASK_BENCH_BASELINE=PATH` adds
/// another build's probes to every round of the floor stage (a before/after comparison
/// within one run).
pub(crate) struct Env {
    pub tracer: PathBuf,
    pub baseline: Option<PathBuf>,
    pub programs: PathBuf,
    pub scratch: PathBuf,
}

/// `cargo xtask bench`: the overhead and throughput suite, then the offline graph
/// analyses.
pub(crate) fn bench(only: &[Stage], opts: &Options) -> Result<()> {
    let all = [
        Stage::Floor,
        Stage::Slowdown,
        Stage::Throughput,
        Stage::Flood,
        Stage::Memory,
        Stage::Size,
        Stage::Exports,
        Stage::StartStop,
        Stage::Real,
        Stage::Sampler,
        Stage::Nodes,
        Stage::Graph,
    ];
    let stages: Vec<Stage> = if only.is_empty() {
        all.to_vec()
    } else {
        all.into_iter().filter(|s| only.contains(s)).collect()
    };
    if stages.iter().any(|s| *s != Stage::Graph) {
        setup()?;
        build_release()?;
        let target = target_dir(&root());
        let programs = target.join("test-programs");
        run(Command::new("make")
            .current_dir(root().join("tests/programs"))
            .arg(format!("OUT={}", programs.display()))
            .arg("-s"))?;
        let scratch = std::env::temp_dir().join("tracer-bench");
        std::fs::create_dir_all(&scratch)?;
        let env = Env {
            tracer: std::env::var_os("XTASK_BENCH_TRACER")
                .map(PathBuf::from)
                .unwrap_or_else(|| target.join("release/tracer")),
            baseline: std::env::var_os("XTASK_BENCH_BASELINE").map(PathBuf::from),
            programs,
            scratch,
        };
        for &stage in stages.iter().filter(|s| **s != Stage::Graph) {
            run_stage(stage, &env, opts)?;
        }
    }
    if stages.contains(&Stage::Graph) {
        graph_bench()?;
    }
    Ok(())
}

/// The offline graph analyses (graph building, critical path method, k longest paths
/// against a baseline, maximum benefit) on a synthetic 10-million-arc trace graph, each
/// step in a process of its own (docs/benchmarks.md, "Offline graph analyses").
pub(crate) fn graph_bench() -> Result<()> {
    run(Command::new("cargo").current_dir(root()).args([
        "run",
        "--release",
        "-p",
        "tracer-analysis",
        "--example",
        "graph_bench",
        "--",
        "suite",
    ]))
}

fn run_stage(stage: Stage, env: &Env, o: &Options) -> Result<()> {
    println!("\n## {stage:?} ({})\n", today());
    match stage {
        Stage::Floor => floor(env, o.reps.unwrap_or(5)),
        Stage::Slowdown => {
            let rates = if o.slowdown_rates.is_empty() {
                RATES.to_vec()
            } else {
                o.slowdown_rates.clone()
            };
            let selections: Vec<(usize, &str)> = SELECTIONS
                .into_iter()
                .filter(|(k, _)| o.slowdown_procs.is_empty() || o.slowdown_procs.contains(k))
                .collect();
            slowdown(
                env,
                o.reps.unwrap_or(2),
                o.slowdown_secs,
                &rates,
                &selections,
            )
        }
        Stage::Throughput => throughput(env, o.reps.unwrap_or(5)),
        Stage::Flood => flood(env, o.flood_rate, o.flood_secs),
        Stage::Memory => memory(env, o.reps.unwrap_or(2), o.memory_secs),
        Stage::Size => size(env, o.flood_rate),
        Stage::Exports => exports(env, o.reps.unwrap_or(3)),
        Stage::StartStop => start_stop::start_stop(env, o.reps.unwrap_or(3)),
        Stage::Real => real::real(env, o.reps.unwrap_or(5)),
        Stage::Sampler => sampler::sampler(env, o.reps.unwrap_or(3), o.slowdown_secs),
        Stage::Nodes => nodes::nodes(env, o.reps.unwrap_or(3)),
        Stage::Graph => unreachable!("the graph stage is run by bench()"),
    }
}

// ---------------------------------------------------------------------------------------
// Running things

/// How a program runs: alone, under the empty floor programs, or under our probes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Untraced,
    Floor,
    Ours,
}

const MODES: [Mode; 3] = [Mode::Untraced, Mode::Floor, Mode::Ours];

/// `argv` run as `mode` says; `extra` are options of `tracer record` (e.g. `--func`).
/// With `pin`, the program runs on CPU 1 and the tracer on CPU 0, so the program's own
/// time holds the probes' cost and not the tracer's decoding.
fn command(env: &Env, mode: Mode, extra: &[String], argv: &[String], pin: bool) -> Command {
    let mut program: Vec<String> = Vec::new();
    if pin {
        program.extend(["taskset".into(), "-c".into(), "1".into()]);
    }
    program.extend(argv.iter().cloned());
    let mut tracer: Vec<String> = Vec::new();
    if pin {
        tracer.extend(["taskset".into(), "-c".into(), "0".into()]);
    }
    tracer.push(env.tracer.display().to_string());
    tracer.extend(["record".into(), "-q".into()]);
    if mode == Mode::Floor {
        tracer.extend(["--probes".into(), "floor".into()]);
    }
    tracer.extend(extra.iter().cloned());
    tracer.push("--".into());
    let all = match mode {
        Mode::Untraced => program,
        _ => tracer.into_iter().chain(program).collect(),
    };
    let mut c = Command::new(&all[0]);
    c.args(&all[1..]);
    c
}

/// `name=<number>` from a program's output.
fn field(out: &str, name: &str) -> Result<f64> {
    let key = format!("{name}=");
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&key))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {name}= in {out:?}"))
}

/// What `/usr/bin/time` saw of a command, and its standard output.
struct Timed {
    stdout: String,
    wall_s: f64,
    peak_kib: f64,
    /// User plus system.
    cpu_s: f64,
}

/// Runs `cmd` under `/usr/bin/time`.
fn timed(cmd: &Command) -> Result<Timed> {
    let mut c = Command::new("/usr/bin/time");
    c.args(["-f", "xtask-time %M %U %S"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    let start = Instant::now();
    let out = c.output().with_context(|| format!("running {c:?}"))?;
    let secs = start.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{c:?} failed ({}): {err}", out.status);
    }
    let line = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("xtask-time "))
        .context("no /usr/bin/time line")?;
    let v: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() != 3 {
        bail!("bad /usr/bin/time line {line:?}");
    }
    Ok(Timed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        wall_s: secs,
        peak_kib: v[0],
        cpu_s: v[1] + v[2],
    })
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn today() -> String {
    Command::new("date")
        .arg("+%Y-%m-%d %H:%M")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Statistics

/// Median and range of repeated measurements.
#[derive(Clone, Copy)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(v: &[f64]) -> Stats {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Stats {
            median,
            min: s.first().copied().unwrap_or(f64::NAN),
            max: s.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// `median (min-max)` with `d` decimals.
    fn show(&self, d: usize) -> String {
        format!(
            "{:.d$} ({:.d$}-{:.d$})",
            self.median,
            self.min,
            self.max,
            d = d
        )
    }
}

// ---------------------------------------------------------------------------------------
// 1. Probe cost against the floor

/// One probe type: the program that exercises it and the `tracer record` options it needs.
struct ProbeType {
    name: &'static str,
    argv: Vec<String>,
    extra: Vec<String>,
    /// What one op is (the unit of ns_per_op).
    op: &'static str,
    /// Our BPF programs one op runs, and the floor's (each name once per op).
    programs: &'static [&'static str],
    floor_programs: &'static [&'static str],
}

/// The uprobe programs as the kernel names them (uprobe_multi twins: `tracer record`
/// attaches those where the kernel has them).
const CALL_PROGRAMS: &[&str] = &["call_enter_m", "call_exit_m"];
const UPROBE_FLOOR: &[&str] = &["floor_uprobe_m", "floor_uretp_m"];
const TRACEPOINT_FLOOR: &[&str] = &["floor_tracepoint", "floor_tracepoint"];

fn floor(env: &Env, reps: usize) -> Result<()> {
    let p = |name: &str| env.programs.join(name).display().to_string();
    let types = [
        ProbeType {
            name: "MPI call (MPICH MPI_Comm_rank)",
            argv: vec![
                "mpirun.mpich".into(),
                "-np".into(),
                "1".into(),
                p("bench_slowdown.mpich"),
                "calls".into(),
                "200000".into(),
            ],
            extra: vec![],
            op: "call: entry + return uprobe",
            programs: CALL_PROGRAMS,
            floor_programs: UPROBE_FLOOR,
        },
        ProbeType {
            name: "selected procedure (--func)",
            argv: vec![p("bench_probe"), "func".into(), "50000".into()],
            extra: args(&["--func", "bench_tiny"]),
            op: "call: entry + return uprobe",
            programs: &["func_enter_m", "func_exit_m"],
            floor_programs: UPROBE_FLOOR,
        },
        ProbeType {
            name: "selected procedure starting with endbr64 and a 5-byte nop (--func)",
            argv: vec![p("bench_probe"), "func_cet".into(), "50000".into()],
            extra: args(&["--func", "bench_tiny_cet"]),
            op: "call: entry + return uprobe",
            programs: &["func_enter_m", "func_exit_m"],
            floor_programs: UPROBE_FLOOR,
        },
        ProbeType {
            name: "futex (FUTEX_WAKE, no waiter)",
            argv: vec![p("bench_probe"), "futex".into(), "1000000".into()],
            extra: vec![],
            op: "call: enter + exit tracepoint",
            programs: &["sys_enter_futex", "sys_exit_futex"],
            floor_programs: TRACEPOINT_FLOOR,
        },
        ProbeType {
            name: "scheduler (pipe ping-pong, one CPU)",
            argv: vec![p("bench_probe"), "sched".into(), "200000".into()],
            extra: vec![],
            op: "hand-off: sched_waking + sched_switch",
            programs: &["sched_waking", "sched_switch"],
            floor_programs: TRACEPOINT_FLOOR,
        },
    ];
    println!(
        "Per-op CPU time of the program (CLOCK_PROCESS_CPUTIME_ID), program on CPU 1, tracer \
         on CPU 0; {reps} rounds of untraced, floor, ours; load average {}.\n",
        load()
    );
    let baseline = env.baseline.as_ref().map(|b| Env {
        tracer: b.clone(),
        baseline: None,
        programs: env.programs.clone(),
        scratch: env.scratch.clone(),
    });
    if let Some(b) = &baseline {
        println!(
            "Baseline: each round also runs {} (last columns).\n",
            b.tracer.display()
        );
    }
    let (head, rule) = if baseline.is_some() {
        (
            " baseline ns/op | baseline cost ns | ratio baseline/floor |",
            "---|---|---|",
        )
    } else {
        ("", "")
    };
    println!("| probe type | op | untraced ns/op | floor ns/op | ours ns/op | floor cost ns | our cost ns | ratio ours/floor (of medians) | ratio per round (min-max) |{head}");
    println!("|---|---|---|---|---|---|---|---|---|{rule}");
    let mut floor_costs = Vec::new();
    for t in &types {
        let mut ns: [Vec<f64>; 3] = Default::default();
        let mut base_ns = Vec::new();
        for _ in 0..reps {
            for (i, mode) in MODES.iter().enumerate() {
                let out = output(&mut command(env, *mode, &t.extra, &t.argv, true))?;
                ns[i].push(field(&out, "ns_per_op")?);
            }
            if let Some(b) = &baseline {
                let out = output(&mut command(b, Mode::Ours, &t.extra, &t.argv, true))?;
                base_ns.push(field(&out, "ns_per_op")?);
            }
        }
        let [u, f, o] = &ns;
        let (su, sf, so) = (Stats::of(u), Stats::of(f), Stats::of(o));
        let floor_cost = sf.median - su.median;
        let our_cost = so.median - su.median;
        let rounds: Vec<f64> = (0..reps).map(|r| (o[r] - u[r]) / (f[r] - u[r])).collect();
        let rr = Stats::of(&rounds);
        let base = if base_ns.is_empty() {
            String::new()
        } else {
            let sb = Stats::of(&base_ns);
            let cost = sb.median - su.median;
            format!(" {} | {cost:.0} | {:.2} |", sb.show(1), cost / floor_cost)
        };
        println!(
            "| {} | {} | {} | {} | {} | {floor_cost:.0} | {our_cost:.0} | {:.2} | {:.2}-{:.2} |{base}",
            t.name,
            t.op,
            su.show(1),
            sf.show(1),
            so.show(1),
            our_cost / floor_cost,
            rr.min,
            rr.max
        );
        floor_costs.push(floor_cost);
    }
    // The whole-process figures above swing by a few hundred ns per call from run to run
    // here (the uprobe trap's cost moves with the host's load); the programs' own run
    // time, as the kernel counts it, does not.
    println!(
        "\nProgram time per op (the kernel's BPF statistics, `kernel.bpf_stats_enabled`, \
         {PROGRAM_TIME_RUNS} more runs of floor and ours alternating; a program's mean run \
         time, summed over the programs an op runs). \"Ratio\" is (floor cost + ours - \
         floor) / floor cost, with medians and the floor cost of the table above: the ratio \
         if the rest of a probe costs what the floor's does.\n"
    );
    println!(
        "| probe type | floor programs ns/op | our programs ns/op | ours - floor ns | ratio |"
    );
    println!("|---|---|---|---|---|");
    for (t, floor_cost) in types.iter().zip(floor_costs) {
        let time = |mode: Mode, names: &[&str]| -> Result<f64> {
            let (times, _) = program_times(&mut command(env, mode, &t.extra, &t.argv, true))?;
            names
                .iter()
                .map(|n| {
                    times
                        .get(*n)
                        .map(ProgramTime::mean_ns)
                        .with_context(|| format!("no run time for program {n}: {times:?}"))
                })
                .sum()
        };
        let (mut floor_ns, mut ours_ns) = (Vec::new(), Vec::new());
        for _ in 0..PROGRAM_TIME_RUNS {
            floor_ns.push(time(Mode::Floor, t.floor_programs)?);
            ours_ns.push(time(Mode::Ours, t.programs)?);
        }
        let (f, o) = (Stats::of(&floor_ns), Stats::of(&ours_ns));
        println!(
            "| {} | {} | {} | {:.0} | {:.2} |",
            t.name,
            f.show(0),
            o.show(0),
            o.median - f.median,
            (floor_cost + o.median - f.median) / floor_cost
        );
    }
    Ok(())
}

/// Runs of each configuration for the programs' own run time (each ends with the kernel
/// detaching the probes: about 6 s for the MPI library's).
const PROGRAM_TIME_RUNS: usize = 3;

/// Runs `cmd` (a `tracer record`) with the kernel's BPF run-time statistics on, and
/// returns the runs and run time of each program it loaded, as last read before it
/// detached it (`bpftool prog show`, every 200 ms), and the command's standard output.
/// Programs are told apart from other tracers' by being new; two new programs of one name
/// fail the measurement.
fn program_times(cmd: &mut Command) -> Result<(HashMap<String, ProgramTime>, String)> {
    const STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";
    let before: HashSet<u64> = bpf_programs()?.into_iter().map(|p| p.id).collect();
    let was = std::fs::read_to_string(STATS).context(STATS)?;
    std::fs::write(STATS, "1").context(STATS)?;
    let measured = (|| {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("running {cmd:?}"))?;
        // The output is read on a thread of its own, so a chatty command never blocks.
        let mut pipe = child.stdout.take().context("the command's stdout")?;
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut pipe, &mut text).map(|_| text)
        });
        // Per program: its id and its latest statistics; the counts only grow, and a
        // program is gone once detached.
        let mut latest: HashMap<String, (u64, ProgramTime)> = HashMap::new();
        loop {
            let done = child.try_wait()?;
            for BpfProgram { id, name, runs, ns } in bpf_programs()? {
                if before.contains(&id) || runs == 0 {
                    continue;
                }
                match latest.insert(name.clone(), (id, ProgramTime { runs, ns })) {
                    Some((other, _)) if other != id => {
                        bail!("two new BPF programs named {name}: is another tracer running?")
                    }
                    _ => {}
                }
            }
            if let Some(status) = done {
                if !status.success() {
                    bail!("{cmd:?} failed ({status})");
                }
                let stdout = reader
                    .join()
                    .map_err(|_| anyhow::anyhow!("the output reader panicked"))??;
                let times = latest.into_iter().map(|(name, (_, t))| (name, t)).collect();
                return Ok((times, stdout));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })();
    std::fs::write(STATS, was.trim()).context(STATS)?;
    measured
}

/// A BPF program's runs and their total run time, from the kernel's statistics.
#[derive(Clone, Copy, Debug, Default)]
struct ProgramTime {
    runs: u64,
    ns: u64,
}

impl ProgramTime {
    fn mean_ns(&self) -> f64 {
        self.ns as f64 / self.runs as f64
    }
}

/// A loaded BPF program and its run-time statistics.
struct BpfProgram {
    id: u64,
    name: String,
    runs: u64,
    /// Total run time.
    ns: u64,
}

/// Every loaded BPF program.
fn bpf_programs() -> Result<Vec<BpfProgram>> {
    let out = output(Command::new("bpftool").args(["prog", "show", "--json"]))?;
    let list: serde_json::Value = serde_json::from_str(&out).context("bpftool's JSON")?;
    let num = |p: &serde_json::Value, k: &str| p.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    Ok(list
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let name = p.get("name").and_then(|v| v.as_str()).unwrap_or("");
            BpfProgram {
                id: num(p, "id"),
                name: name.to_string(),
                runs: num(p, "run_cnt"),
                ns: num(p, "run_time_ns"),
            }
        })
        .collect())
}

// ---------------------------------------------------------------------------------------
// 2. Application slowdown

const RATES: [u64; 3] = [150, 1_000, 10_000];
/// Selected procedures and the `--func` patterns that select them.
const SELECTIONS: [(usize, &str); 4] = [
    (0, ""),
    (1, "bproc_00"),
    (8, "bproc_0[0-7]"),
    (32, "bproc_*"),
];

/// One rank exchanging with itself, pinned to CPU 1 with the tracer on CPU 0, and its own
/// CPU time as the measure: on this shared 2-CPU machine, the wall time of two ranks in
/// lockstep varied from -35 % to +155 % between identical runs (docs/benchmarks.md).
/// The slowdown loop (`bench_slowdown.mpich`, one rank on CPU 1), calibrated: the
/// slowdown and sampler stages run it.
struct SlowdownLoop {
    prog: PathBuf,
    /// Work units per microsecond.
    per_us: f64,
}

impl SlowdownLoop {
    /// Work units per microsecond: the fastest of three calibrations, so every run does
    /// the same work and only the probes differ.
    fn calibrated(env: &Env) -> Result<SlowdownLoop> {
        let prog = env.programs.join("bench_slowdown.mpich");
        let mut per_us = 0f64;
        for _ in 0..3 {
            let out = output(
                Command::new("taskset")
                    .args(["-c", "1"])
                    .arg(&prog)
                    .arg("calibrate"),
            )?;
            per_us = per_us.max(field(&out, "units_per_us")?);
        }
        Ok(SlowdownLoop { prog, per_us })
    }

    /// The command: `secs` of the loop at `rate` messages per second.
    fn argv(&self, rate: u64, secs: f64) -> Vec<String> {
        let iters = (rate as f64 * secs).round() as u64;
        let units = (self.per_us * 1e6 / rate as f64).round() as u64;
        vec![
            "mpirun.mpich".to_string(),
            "-np".into(),
            "1".into(),
            self.prog.display().to_string(),
            iters.to_string(),
            units.to_string(),
        ]
    }
}

fn slowdown(
    env: &Env,
    reps: usize,
    secs: f64,
    rates: &[u64],
    selections: &[(usize, &str)],
) -> Result<()> {
    let work = SlowdownLoop::calibrated(env)?;
    let per_us = work.per_us;
    println!(
        "bench_slowdown.mpich, one rank (mpirun.mpich -np 1) on CPU 1, tracer on CPU 0, \
         {secs} s loops; work per iteration 1/rate s at {per_us:.1} units/us (calibrated); \
         slowdown = loop CPU time traced / untraced - 1 (wall time in the last column); \
         {reps} rounds, each: untraced, then floor and ours for 0, 1, 8, 32 procedures; load \
         average {}.\n",
        load()
    );
    println!("| msgs/s (nominal) | untraced msgs/s | procedures | floor slowdown % | our slowdown % | ours - floor (points) | our slowdown %, wall time |");
    println!("|---|---|---|---|---|---|---|");
    for &rate in rates {
        let argv = work.argv(rate, secs);
        // (cpu seconds, wall seconds, msgs/s)
        let run = |mode: Mode, k: usize| -> Result<(f64, f64, f64)> {
            let pattern = SELECTIONS.iter().find(|s| s.0 == k).unwrap().1;
            let extra = if pattern.is_empty() {
                vec![]
            } else {
                vec!["--func".to_string(), pattern.to_string()]
            };
            let out = output(&mut command(env, mode, &extra, &argv, true))?;
            Ok((
                field(&out, "cpu_secs")?,
                field(&out, "secs")?,
                field(&out, "msgs_per_s")?,
            ))
        };
        // Per round: slowdown of each traced run against that round's untraced run.
        let mut untraced_rate = Vec::new();
        let n = selections.len();
        let (mut floor, mut ours, mut diff, mut wall) = (
            vec![Vec::new(); n],
            vec![Vec::new(); n],
            vec![Vec::new(); n],
            vec![Vec::new(); n],
        );
        for _ in 0..reps {
            let (base_cpu, base_wall, r) = run(Mode::Untraced, 0)?;
            untraced_rate.push(r);
            for (i, (k, _)) in selections.iter().enumerate() {
                let f = run(Mode::Floor, *k)?;
                let o = run(Mode::Ours, *k)?;
                let fp = (f.0 / base_cpu - 1.0) * 100.0;
                let op = (o.0 / base_cpu - 1.0) * 100.0;
                floor[i].push(fp);
                ours[i].push(op);
                diff[i].push(op - fp);
                wall[i].push((o.1 / base_wall - 1.0) * 100.0);
            }
        }
        for (i, (k, _)) in selections.iter().enumerate() {
            println!(
                "| {rate} | {:.0} | {k} | {} | {} | {} | {} |",
                Stats::of(&untraced_rate).median,
                Stats::of(&floor[i]).show(2),
                Stats::of(&ours[i]).show(2),
                Stats::of(&diff[i]).show(2),
                Stats::of(&wall[i]).show(2),
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. Analyzer throughput (replay)

/// Records the large recording that the throughput and export stages read.
fn busy_recording(env: &Env) -> Result<PathBuf> {
    let rec = env.scratch.join("busy.trace");
    output(
        Command::new(&env.tracer)
            .args(["record", "-q", "--func", "compute", "-o"])
            .arg(&rec)
            .args(["--", "mpirun.mpich", "-np", "2"])
            .arg(env.programs.join("mpi_busy.mpich"))
            .args(["200000", "0.001"]),
    )?;
    Ok(rec)
}

fn throughput(env: &Env, reps: usize) -> Result<()> {
    let rec = busy_recording(env)?;
    let bytes = std::fs::metadata(&rec)?.len();
    let mut rates = Vec::new();
    let mut rss = Vec::new();
    let mut events = 0;
    for _ in 0..reps {
        let mut c = Command::new(&env.tracer);
        c.args(["analyze", "--json"]).arg(&rec);
        let Timed {
            stdout: out,
            wall_s: secs,
            peak_kib: kib,
            ..
        } = timed(&c)?;
        let profile: serde_json::Value = serde_json::from_str(&out)?;
        events = profile["events"]["total"].as_u64().unwrap_or(0);
        rates.push(events as f64 / secs);
        rss.push(kib / 1024.0);
    }
    println!(
        "`tracer analyze --json` on one recording of `tracer record --func compute -- \
         mpirun.mpich -np 2 mpi_busy.mpich 200000 0.001`, {reps} runs; load average {}.\n",
        load()
    );
    println!("| events | recording MiB | bytes/event | events/s | peak RSS MiB |");
    println!("|---|---|---|---|---|");
    println!(
        "| {events} | {:.1} | {:.1} | {} | {} |",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / events.max(1) as f64,
        Stats::of(&rates).show(0),
        Stats::of(&rss).show(1)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Exports

/// Every format of `tracer export`.
const EXPORT_FORMATS: &[&str] = &[
    "chrome", "pprof", "folded", "svg", "hatchet", "parquet", "perfetto", "otf2",
];

/// Time and peak RSS of `tracer export` in every format, and of `tracer analyze`, on the
/// throughput stage's recording; the commands alternate within each repetition.
fn exports(env: &Env, reps: usize) -> Result<()> {
    let rec = busy_recording(env)?;
    let out = env.scratch.join("export.out");
    let mut analyze = Command::new(&env.tracer);
    analyze.args(["analyze", "--json"]).arg(&rec);
    let mut commands = vec![("`tracer analyze --json`".to_string(), analyze)];
    for format in EXPORT_FORMATS {
        let mut c = Command::new(&env.tracer);
        c.args(["export", "--format", format, "-o"])
            .arg(&out)
            .arg(&rec);
        commands.push((format!("`tracer export --format {format}`"), c));
    }
    let mut secs = vec![Vec::new(); commands.len()];
    let mut rss = vec![Vec::new(); commands.len()];
    let mut events = 0;
    for _ in 0..reps {
        for (i, (_, c)) in commands.iter().enumerate() {
            // Directory formats refuse an existing output.
            let _ = std::fs::remove_dir_all(&out);
            let _ = std::fs::remove_file(&out);
            let run = timed(c)?;
            if i == 0 {
                let profile: serde_json::Value = serde_json::from_str(&run.stdout)?;
                events = profile["events"]["total"].as_u64().unwrap_or(0);
            }
            secs[i].push(run.wall_s);
            rss[i].push(run.peak_kib / 1024.0);
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&out);
    println!(
        "On one recording of `tracer record --func compute -- mpirun.mpich -np 2 \
         mpi_busy.mpich 200000 0.001` ({events} events), {reps} runs; load average {}.\n",
        load()
    );
    println!("| command | time s | time / analyze | peak RSS MiB |");
    println!("|---|---|---|---|");
    let analyze_s = Stats::of(&secs[0]).median;
    for (i, (name, _)) in commands.iter().enumerate() {
        let s = Stats::of(&secs[i]);
        println!(
            "| {name} | {} | {:.2} | {} |",
            s.show(2),
            s.median / analyze_s,
            Stats::of(&rss[i]).show(1)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4. Live flood, 5. memory, 6. recording size

/// One `tracer record` of a command; what it says about itself.
struct Recorded {
    /// The program's stdout.
    out: String,
    wall_s: f64,
    peak_kib: f64,
    /// CPU of the tracer and the program it launched and reaped (`/usr/bin/time`).
    cpu_s: f64,
    /// The tracer's own CPU (its summary's `tracer_cpu_ns`; None from older tracers).
    own_cpu_s: Option<f64>,
    events: u64,
    lost: u64,
}

fn record(env: &Env, extra: &[String], argv: &[String]) -> Result<Recorded> {
    let summary = env.scratch.join("summary.json");
    let mut c = Command::new(&env.tracer);
    c.args(["record", "-q", "--summary-json"])
        .arg(&summary)
        .args(extra)
        .arg("--")
        .args(argv);
    let Timed {
        stdout: out,
        wall_s,
        peak_kib,
        cpu_s,
    } = timed(&c)?;
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary)?)?;
    Ok(Recorded {
        out,
        wall_s,
        peak_kib,
        cpu_s,
        own_cpu_s: s["tracer_cpu_ns"].as_f64().map(|ns| ns / 1e9),
        events: s["events"]["total"].as_u64().unwrap_or(0),
        lost: s["events"]["lost"].as_u64().unwrap_or(0),
    })
}

fn flood_argv(env: &Env, rate: u64, secs: f64) -> Vec<String> {
    vec![
        env.programs.join("bench_probe").display().to_string(),
        "flood".into(),
        rate.to_string(),
        secs.to_string(),
    ]
}

fn flood(env: &Env, rate: u64, secs: f64) -> Result<()> {
    let r = record(env, &[], &flood_argv(env, rate, secs))?;
    println!(
        "`tracer record -- bench_probe flood {rate} {secs}` (online analysis, no -o): futex \
         wakes paced in 1 ms batches; load average {}.\n",
        load()
    );
    // The tracer's own CPU is what the analyzer costs; `/usr/bin/time` also counts the
    // program it launched (and the probes, which run in the program's context).
    println!("| target events/s | program's events/s | events recorded | lost | tracer's own CPU s | % of the run | events per own CPU s | with the program: CPU s | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let program_secs = field(&r.out, "secs")?;
    let own = |f: &dyn Fn(f64) -> String| r.own_cpu_s.map_or("-".to_string(), f);
    println!(
        "| {rate} | {:.0} | {} | {} | {} | {} | {} | {:.1} | {:.1} |",
        field(&r.out, "events_per_s")?,
        r.events,
        r.lost,
        own(&|c| format!("{c:.1}")),
        own(&|c| format!("{:.0}", 100.0 * c / program_secs)),
        own(&|c| format!("{:.2} M", r.events as f64 / c / 1e6)),
        r.cpu_s,
        r.peak_kib / 1024.0
    );
    Ok(())
}

fn memory(env: &Env, reps: usize, secs: f64) -> Result<()> {
    let prog = env.programs.join("bench_slowdown.mpich");
    let out = output(Command::new(&prog).arg("calibrate"))?;
    let per_us = field(&out, "units_per_us")?;
    let rate = 1000u64;
    let units = (per_us * 1e6 / rate as f64).round() as u64;
    let argv = |scale: f64| {
        vec![
            "mpirun.mpich".to_string(),
            "-np".into(),
            "2".into(),
            prog.display().to_string(),
            ((rate as f64 * secs * scale).round() as u64).to_string(),
            units.to_string(),
        ]
    };
    let extra = args(&["--func", "bproc_*"]);
    let mut rows: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for _ in 0..reps {
        for (i, scale) in [1.0, 10.0].into_iter().enumerate() {
            let r = record(env, &extra, &argv(scale))?;
            rows[i].0.push(r.peak_kib / 1024.0);
            rows[i].1.push(r.events as f64);
        }
    }
    println!(
        "Peak RSS (`/usr/bin/time -f %M`) of `tracer record --func 'bproc_*' -- mpirun.mpich \
         -np 2 bench_slowdown.mpich ITERS UNITS` (1,000 msgs/s per rank, 32 procedures, online \
         analysis, no -o), {secs} s and {} s; {reps} runs each, alternating; load average {}.\n",
        secs * 10.0,
        load()
    );
    println!("| run | events (median) | peak RSS MiB |");
    println!("|---|---|---|");
    for (i, label) in ["1x", "10x"].iter().enumerate() {
        println!(
            "| {label} ({} s) | {:.0} | {} |",
            secs * if i == 0 { 1.0 } else { 10.0 },
            Stats::of(&rows[i].1).median,
            Stats::of(&rows[i].0).show(1)
        );
    }
    let (a, b) = (Stats::of(&rows[0].0).median, Stats::of(&rows[1].0).median);
    println!("\n10x / 1x peak RSS: {:.3}", b / a);
    Ok(())
}

fn size(env: &Env, rate: u64) -> Result<()> {
    let secs = 10.0;
    let file = env.scratch.join("flood.trace");
    println!(
        "`tracer record -o FILE -- bench_probe flood RATE {secs}`: bytes per event and write \
         rate, at the flood rate and unpaced (as fast as the program goes); load average {}.\n",
        load()
    );
    println!("| target events/s | program's events/s | events recorded | lost | MiB | bytes/event | MiB/s written |");
    println!("|---|---|---|---|---|---|---|");
    for target in [rate, 100_000_000] {
        let extra = vec!["-o".to_string(), file.display().to_string()];
        let r = record(env, &extra, &flood_argv(env, target, secs))?;
        let bytes = std::fs::metadata(&file)?.len() as f64;
        let program_secs = field(&r.out, "secs")?;
        println!(
            "| {} | {:.0} | {} | {} | {:.1} | {:.1} | {:.1} |",
            if target == rate {
                target.to_string()
            } else {
                "unpaced".into()
            },
            field(&r.out, "events_per_s")?,
            r.events,
            r.lost,
            bytes / (1 << 20) as f64,
            bytes / r.events.max(1) as f64,
            bytes / (1 << 20) as f64 / program_secs,
        );
        let _ = r.wall_s;
        std::fs::remove_file(&file)?;
    }
    Ok(())
}

/// The target directory cargo builds into (`CARGO_TARGET_DIR` or `<root>/target`).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        Some(d) => root.join(d),
        None => root.join("target"),
    }
}
