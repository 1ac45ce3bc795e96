//! The `start-stop` stage: what `tracer record -- COMMAND` adds to a command's wall time
//! (loading, attaching, the exec hold, detaching), with uprobe_multi links and with one
//! perf event per probe; and attach and detach times by probe count.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::{load, timed, Env, Stats};
use crate::util::run;

/// How a run attaches its uprobes (`tracer record --uprobe-links`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Links {
    Untraced,
    Multi,
    PerProbe,
}

impl Links {
    fn name(self) -> &'static str {
        match self {
            Links::Untraced => "untraced",
            Links::Multi => "multi",
            Links::PerProbe => "per-probe",
        }
    }
}

/// Ranks of the Open MPI ring, and the link kinds each is run with: 2 ranks, one per CPU
/// of the benchmark VM (the short two-rank job of the start/stop target, issue 43), both
/// kinds at 4 ranks (oversubscribed: the fixed cost then includes what tracing the ring's
/// busy polling costs), multi links only at 16 and 32 (start-up as the job grows; the
/// library's probes are the same, so per-probe detaching costs what it does at 4).
const RING_RUNS: [(usize, &[Links]); 4] = [
    (2, &[Links::Untraced, Links::Multi]),
    (4, &[Links::Untraced, Links::Multi, Links::PerProbe]),
    (16, &[Links::Untraced, Links::Multi]),
    (32, &[Links::Untraced, Links::Multi]),
];

/// Selected procedures of the attach/detach table: 28, 100 and 500 procedures, an entry
/// and a return probe each (56, 200 and 1,000 probes), and their `--func` patterns over
/// the generated program's `f000`..`f499`.
const SELECTIONS: [(usize, &[&str]); 3] = [
    (28, &["f00[0-9]", "f01[0-9]", "f02[0-7]"]),
    (100, &["f0[0-9][0-9]"]),
    (500, &["f[0-4][0-9][0-9]"]),
];

pub(super) fn start_stop(env: &Env, reps: usize) -> Result<()> {
    println!(
        "Wall time of `tracer record -q -- COMMAND` against the command alone, {reps} rounds \
         alternating; load average {}.\n",
        load()
    );
    ring_fixed_cost(env, reps)?;
    attach_detach(env, reps)
}

/// A 2-, 4-, 16- and 32-rank Open MPI ring of 20 rounds, untraced and traced.
fn ring_fixed_cost(env: &Env, reps: usize) -> Result<()> {
    println!("| Open MPI ring (20 rounds) | links | wall s | fixed cost s (median of traced - untraced) |");
    println!("|---|---|---|---|");
    for (ranks, kinds) in RING_RUNS {
        let ring = env.programs.join("mpi_ring.openmpi");
        let argv: Vec<String> = [
            "mpirun.openmpi",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &ranks.to_string(),
            &ring.display().to_string(),
            "20",
            "0",
        ]
        .map(String::from)
        .to_vec();
        let mut walls: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
        for _ in 0..reps {
            for (i, &kind) in kinds.iter().enumerate() {
                walls[i].push(timed(&traced(env, kind, &[], &argv))?.wall_s);
            }
        }
        let untraced = Stats::of(&walls[0]).median;
        for (i, &kind) in kinds.iter().enumerate() {
            let s = Stats::of(&walls[i]);
            let fixed = match kind {
                Links::Untraced => "-".to_string(),
                _ => format!("{:.3}", s.median - untraced),
            };
            println!(
                "| {ranks} ranks | {} | {} | {fixed} |",
                kind.name(),
                s.show(3)
            );
        }
    }
    println!();
    Ok(())
}

/// Attach and detach times of 56, 200 and 1,000 procedure probes in a program that runs
/// for no time.
fn attach_detach(env: &Env, reps: usize) -> Result<()> {
    let program = procedures_program(&env.scratch)?;
    println!(
        "Attach: from the tracer's start to the traced program's first line (loading the \
         programs, the exec hold and attaching; the program alone: {:.3} s). Detach: from the \
         tracer's `detaching` line to its exit. Median (min-max) of {reps} runs.\n",
        alone(&program)?
    );
    println!(
        "| procedures | links | probes (tracer's count) | kernel links | attach s | detach s |"
    );
    println!("|---|---|---|---|---|---|");
    for (procedures, patterns) in SELECTIONS {
        let mut extra = Vec::new();
        for p in patterns {
            extra.extend(["--func".to_string(), p.to_string()]);
        }
        for kind in [Links::Multi, Links::PerProbe] {
            let mut attach = Vec::new();
            let mut detach = Vec::new();
            let mut counts = (0, 0);
            for _ in 0..reps {
                let t = timeline(env, kind, &extra, &program)?;
                attach.push(t.attach_s);
                detach.push(t.detach_s);
                counts = (t.probes, t.kernel_links);
            }
            println!(
                "| {procedures} | {} | {} | {} | {} | {} |",
                kind.name(),
                counts.0,
                counts.1,
                Stats::of(&attach).show(3),
                Stats::of(&detach).show(3)
            );
        }
    }
    println!();
    Ok(())
}

/// `argv` alone or under `tracer record -q` with `kind`'s links.
fn traced(env: &Env, kind: Links, extra: &[String], argv: &[String]) -> Command {
    if kind == Links::Untraced {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        return c;
    }
    let mut c = Command::new(&env.tracer);
    c.args(["record", "--uprobe-links", kind.name()])
        .args(extra)
        .arg("--")
        .args(argv);
    c
}

/// When things happened in one traced run of the procedures program.
struct Timeline {
    attach_s: f64,
    detach_s: f64,
    probes: usize,
    kernel_links: usize,
}

/// Runs the procedures program under the tracer (not quiet: its `detaching` line marks
/// the start of detaching) and times its lines as they come.
fn timeline(env: &Env, kind: Links, extra: &[String], program: &Path) -> Result<Timeline> {
    let start = Instant::now();
    let mut child = traced(env, kind, extra, &[program.display().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running the tracer")?;
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let readers: Vec<_> = [
        Box::new(child.stdout.take().context("stdout")?) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().context("stderr")?),
    ]
    .into_iter()
    .map(|out| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((Instant::now(), line));
            }
        })
    })
    .collect();
    drop(tx);
    let status = child.wait()?;
    let end = Instant::now();
    for r in readers {
        let _ = r.join();
    }
    let lines: Vec<(Instant, String)> = rx.into_iter().collect();
    if !status.success() {
        let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
        bail!("the tracer failed ({status}): {}", text.join("\n"));
    }
    let at = |what: &str| {
        lines
            .iter()
            .find(|(_, l)| l.contains(what))
            .with_context(|| format!("no line with {what:?}"))
    };
    let ready = at(READY_LINE)?.0;
    let (detaching, line) = at("detaching")?;
    // "tracer: outputs written; detaching N probes in K kernel links (...)"
    let numbers: Vec<usize> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [probes, kernel_links] = numbers[..] else {
        bail!("unexpected detaching line {line:?}");
    };
    Ok(Timeline {
        attach_s: (ready - start).as_secs_f64(),
        detach_s: (end - *detaching).as_secs_f64(),
        probes,
        kernel_links,
    })
}

/// What the procedures program prints first.
const READY_LINE: &str = "procedures ready";

/// Writes and builds a program with 500 procedures, `f000` to `f499`, that prints
/// `READY_LINE`, calls each once and exits.
fn procedures_program(scratch: &Path) -> Result<PathBuf> {
    let source = scratch.join("procedures500.c");
    let binary = scratch.join("procedures500");
    let mut c = String::from("#include <stdio.h>\nvolatile int sink;\n");
    for i in 0..500 {
        c.push_str(&format!(
            "__attribute__((noinline)) void f{i:03}(void) {{ sink += {i}; }}\n"
        ));
    }
    c.push_str(&format!(
        "int main(void) {{\n    printf(\"{READY_LINE}\\n\");\n    fflush(stdout);\n"
    ));
    for i in 0..500 {
        c.push_str(&format!("    f{i:03}();\n"));
    }
    c.push_str("    return 0;\n}\n");
    std::fs::write(&source, c).with_context(|| source.display().to_string())?;
    run(Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&binary)
        .arg(&source))?;
    Ok(binary)
}

/// The program's own wall time, untraced.
fn alone(program: &Path) -> Result<f64> {
    let start = Instant::now();
    let out = Command::new(program).output()?;
    if !out.status.success() {
        bail!("{} failed", program.display());
    }
    Ok(start.elapsed().as_secs_f64())
}
