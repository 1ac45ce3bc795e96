//! The demo's real application: LAMMPS as Debian ships it, running the Lennard-Jones
//! melt of tests/apps/in.lj (4,000 atoms, 200 steps) on 2 Open MPI ranks, traced with its
//! force computation and its neighbour-list build selected; and the three lines the demo
//! says of the report. tests/tests/integration/applications.rs traces the same
//! procedures (3 ranks, with its own checks); tests/tests/integration/demo.rs runs this.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::util::{output, root, run_bounded, MPIRUN_NP};

/// LAMMPS's library, where its procedures are (`lmp` itself is a small launcher).
pub const LIBLAMMPS: &str = "/usr/lib/x86_64-linux-gnu/liblammps.so.0";
/// The symbol of the pair forces, where LAMMPS spends most of its time.
pub const PAIR_COMPUTE: &str = "_ZN9LAMMPS_NS9PairLJCut7computeEii";
/// [`PAIR_COMPUTE`] as the tracer's outputs name it (demangled).
pub const PAIR_COMPUTE_NAME: &str = "LAMMPS_NS::PairLJCut::compute(int, int)";
/// The symbol of the neighbour lists' build (rebuilt every 20 steps).
pub const NEIGHBOR_BUILD: &str = "_ZN9LAMMPS_NS8Neighbor5buildEi";
/// [`NEIGHBOR_BUILD`] as the tracer's outputs name it (demangled).
pub const NEIGHBOR_BUILD_NAME: &str = "LAMMPS_NS::Neighbor::build(int)";
/// The LAMMPS command, run in tests/apps: the melt's input, no log file, no screen output.
pub const LMP: &[&str] = &["lmp", "-in", "in.lj", "-log", "none", "-screen", "none"];
/// Open MPI ranks of the demo's run.
pub const RANKS: usize = 2;
/// The traced run takes a few seconds: past this limit it is taken to hang, and ended.
const LIMIT: Duration = Duration::from_secs(300);

/// Where LAMMPS runs: tests/apps, which holds its input.
pub fn apps_dir() -> PathBuf {
    root().join("tests/apps")
}

/// The `--func` patterns of the two procedures, each in LAMMPS's library.
pub fn procedures() -> [String; 2] {
    [PAIR_COMPUTE, NEIGHBOR_BUILD].map(|symbol| format!("{LIBLAMMPS}:{symbol}"))
}

/// What the demo's LAMMPS run left.
pub struct Traced {
    pub recording: PathBuf,
    /// `tracer report --html`'s page.
    pub html: PathBuf,
    /// `tracer report --json` (docs/report-json.md).
    pub report: Value,
}

/// Traces LAMMPS on [`RANKS`] Open MPI ranks with `tracer` (`tracer record`, its output
/// shown), then writes the HTML report into `out_dir` and reads the JSON one.
pub fn trace(tracer: &Path, out_dir: &Path) -> Result<Traced> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let recording = out_dir.join("lammps.trace");
    let html = out_dir.join("lammps-report.html");
    let mut record = Command::new(tracer);
    record
        .current_dir(apps_dir())
        .args(["record", "-o"])
        .arg(&recording);
    for pattern in procedures() {
        record.args(["--func", &pattern]);
    }
    record
        .arg("--")
        .args(MPIRUN_NP)
        .arg(RANKS.to_string())
        .args(LMP);
    run_bounded(&mut record, LIMIT)?;
    let json = output(
        Command::new(tracer)
            .args(["report", "--json", "--html"])
            .arg(&html)
            .arg(&recording),
    )?;
    let report = serde_json::from_str(&json).context("reading `tracer report --json`")?;
    Ok(Traced {
        recording,
        html,
        report,
    })
}

/// The three lines the demo says of a report, and the report's names they cite (as the
/// report names them: C++ names demangled).
pub struct Lessons {
    /// The selected procedure with the largest share of the critical path.
    pub top_procedure: String,
    /// The selected procedure with the next largest share, if any.
    pub next_procedure: Option<String>,
    /// The process that does most of the path's work.
    pub busiest: ProcessName,
    /// The call in which a process on the path waits for another most often; None when
    /// the path never moves from one process to another.
    pub commonest_wait: Option<CallCount>,
    /// What the user learns: where the path's time goes, what removing it buys, where
    /// the ranks wait.
    pub lines: [String; 3],
}

/// A process as the report names it: its MPI rank, else its pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessName {
    Rank(u64),
    Pid(u64),
}

impl std::fmt::Display for ProcessName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcessName::Rank(r) => write!(f, "rank {r}"),
            ProcessName::Pid(p) => write!(f, "pid {p}"),
        }
    }
}

/// How often the path waits in one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCount {
    pub call: String,
    pub count: usize,
}

/// The report's row for work outside every selected procedure.
const OUTSIDE: &str = "(outside selected procedures)";

/// The three lines of `report` (`tracer report --json`): the selected procedure with the
/// largest share of the critical path against its share of all work; what making it (and
/// the next) take no time would gain; how often and in which call the path waits for
/// another rank, and how the ranks share the path's work.
pub fn lessons(report: &Value) -> Result<Lessons> {
    // The procedure table is largest share first (docs/report-json.md).
    let selected: Vec<&Value> = array(report, "procedures")?
        .iter()
        .filter(|row| row["name"].as_str() != Some(OUTSIDE))
        .collect();
    let Some(top) = selected.first() else {
        bail!("the report has no selected procedure");
    };
    let next = selected.get(1);
    let top_name = text(top, "name")?;
    let next_name = next.map(|row| text(row, "name")).transpose()?;
    let first = path_share(report, top, top_name)?;
    let mut second = format!(
        "making it take no time would shorten the run by {}",
        zeroing_gain(top)?
    );
    if let (Some(next), Some(next_name)) = (next, next_name) {
        second.push_str(&format!("; {next_name} by {}", zeroing_gain(next)?));
    }
    let waits = rank_waits(report)?;
    Ok(Lessons {
        top_procedure: top_name.to_string(),
        next_procedure: next_name.map(str::to_string),
        busiest: waits.busiest,
        commonest_wait: waits.commonest,
        lines: [first, second, waits.line],
    })
}

/// The first line: the top procedure's share of the path against its share of all work.
fn path_share(report: &Value, top: &Value, shown: &str) -> Result<String> {
    let length_ns = number(&report["critical_path"], "length_ns")?;
    let (cp_pct, work_pct) = (number(top, "cp_pct")?, number(top, "work_pct")?);
    let weighs = if cp_pct > work_pct {
        "the path weighs it more than a CPU profile does"
    } else {
        "a CPU profile weighs it at least as much as the path does"
    };
    Ok(format!(
        "{shown} is {cp_pct:.1} % of the critical path ({:.1} ms of {:.1} ms) and {work_pct:.1} % of all work: {weighs}",
        ms(number(top, "cp_ns")?),
        ms(length_ns),
    ))
}

/// What making a procedure (a row of the table) take no time would gain.
fn zeroing_gain(row: &Value) -> Result<String> {
    Ok(format!(
        "{:.1} % ({:.1} ms)",
        number(row, "zeroing_pct")?,
        ms(number(row, "zeroing_ns")?)
    ))
}

/// The third line and what it cites.
struct RankWaits {
    /// How often, with what measured latency in all, and most often in which call, a
    /// rank on the path waits for another; the two largest shares of the path's work.
    line: String,
    busiest: ProcessName,
    commonest: Option<CallCount>,
}

fn rank_waits(report: &Value) -> Result<RankWaits> {
    let mut processes: Vec<&Value> = array(report, "processes")?.iter().collect();
    processes.sort_by_key(|p| std::cmp::Reverse(p["cp_ns"].as_u64()));
    let Some(busiest) = processes.first() else {
        bail!("the report has no process on the critical path");
    };
    let busiest = process_name(busiest)?;
    // "rank 0 does 84.8 % of the path's work, rank 1 15.2 %".
    let mut shares = Vec::new();
    for (i, process) in processes.iter().take(2).enumerate() {
        let (name, pct) = (process_name(process)?, number(process, "cp_pct")?);
        shares.push(if i == 0 {
            format!("{name} does {pct:.1} % of the path's work")
        } else {
            format!("{name} {pct:.1} %")
        });
    }
    let shares = shares.join(", ");
    // Waits of one process for another (not those between threads of one process).
    let mut waits: BTreeMap<&str, usize> = BTreeMap::new();
    let mut latency_ns = 0.0;
    for activity in array(report, "activities")? {
        if activity["type"] == "wait" && activity["from_pid"] != activity["to_pid"] {
            *waits.entry(text(activity, "call")?).or_default() += 1;
            latency_ns += number(activity, "latency_ns")?;
        }
    }
    let all_waits: usize = waits.values().sum();
    // Most often; among equals, the first by name (a stable answer).
    let commonest = waits
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(call, count)| CallCount {
            call: call.to_string(),
            count: *count,
        });
    let line = match &commonest {
        Some(CallCount { call, count }) => format!(
            "along the path the ranks wait for each other {all_waits} times ({:.1} ms of measured latency), {count} of them in {call}; {shares}",
            ms(latency_ns)
        ),
        None => format!("along the path no rank waits for another; {shares}"),
    };
    Ok(RankWaits {
        line,
        busiest,
        commonest,
    })
}

/// The last line of the demo: the HTML report's address, as an OSC 8 hyperlink (the
/// address as its text) when `terminal` says the output is a terminal that shows one.
pub fn report_link(html: &Path, terminal: bool) -> String {
    let url = format!("file://{}", html.display());
    if terminal {
        format!("\x1b]8;;{url}\x1b\\{url}\x1b]8;;\x1b\\")
    } else {
        url
    }
}

fn process_name(process: &Value) -> Result<ProcessName> {
    Ok(match process["rank"].as_u64() {
        Some(rank) => ProcessName::Rank(rank),
        None => ProcessName::Pid(
            process["pid"]
                .as_u64()
                .with_context(|| format!("the report has no pid in {process}"))?,
        ),
    })
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

fn number(v: &Value, key: &str) -> Result<f64> {
    v[key]
        .as_f64()
        .with_context(|| format!("the report has no number {key:?} in {v}"))
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v[key]
        .as_str()
        .with_context(|| format!("the report has no text {key:?} in {v}"))
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    v[key]
        .as_array()
        .with_context(|| format!("the report has no list {key:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report of the demo's first part, as the tracer wrote it: `cargo xtask demo`,
    /// then `target/release/tracer report --json /tmp/tracer-demo/hybrid.trace`
    /// (hybrid_mpi_threads.openmpi 2 5 40 10 -1 on 2 Open MPI ranks: each round one
    /// thread of one rank, the rank alternating, runs thread_slow for 40 ms, the others
    /// thread_work for 10 ms, then the ranks join their threads and MPI_Allreduce).
    fn hybrid_report() -> Value {
        let path = root().join("xtask/fixtures/hybrid-report.json");
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }

    #[test]
    fn three_lines_of_the_planted_bottleneck() {
        let lessons = lessons(&hybrid_report()).unwrap();
        // By construction: 5 x 40 ms of thread_slow on the path, thread_work never on
        // it, and the path crosses from rank to rank at each of the 5 MPI_Allreduce.
        assert_eq!(
            lessons.lines,
            [
                "thread_slow is 98.8 % of the critical path (200.0 ms of 202.6 ms) and 47.9 % of all work: the path weighs it more than a CPU profile does",
                "making it take no time would shorten the run by 73.5 % (148.8 ms); thread_work by 0.0 % (0.0 ms)",
                "along the path the ranks wait for each other 5 times (11.0 ms of measured latency), 5 of them in MPI_Allreduce; rank 0 does 60.3 % of the path's work, rank 1 39.7 %",
            ]
        );
        assert_eq!(lessons.top_procedure, "thread_slow");
        assert_eq!(lessons.next_procedure.as_deref(), Some("thread_work"));
        assert_eq!(lessons.busiest, ProcessName::Rank(0));
        assert_eq!(
            lessons.commonest_wait,
            Some(CallCount {
                call: "MPI_Allreduce".to_string(),
                count: 5
            })
        );
    }

    #[test]
    fn a_path_within_one_process_has_no_rank_waits() {
        let mut report = hybrid_report();
        let activities = report["activities"].as_array_mut().unwrap();
        activities.retain(|a| a["type"] != "wait" || a["from_pid"] == a["to_pid"]);
        let lessons = lessons(&report).unwrap();
        assert_eq!(lessons.commonest_wait, None);
        assert_eq!(
            lessons.lines[2],
            "along the path no rank waits for another; rank 0 does 60.3 % of the path's work, rank 1 39.7 %"
        );
    }

    #[test]
    fn a_report_without_selected_procedures_is_refused() {
        let mut report = hybrid_report();
        let rows = report["procedures"].as_array_mut().unwrap();
        rows.retain(|row| row["name"] == OUTSIDE);
        let error = lessons(&report).err().unwrap().to_string();
        assert_eq!(error, "the report has no selected procedure");
    }

    #[test]
    fn the_lines_cite_procedures_as_the_report_names_them() {
        // The report names C++ procedures demangled (with their symbol beside): the lines
        // cite the names, never the symbols.
        let mut report = hybrid_report();
        for row in report["procedures"].as_array_mut().unwrap() {
            let (name, symbol) = match row["name"].as_str().unwrap() {
                "thread_slow" => (PAIR_COMPUTE_NAME, PAIR_COMPUTE),
                "thread_work" => (NEIGHBOR_BUILD_NAME, NEIGHBOR_BUILD),
                _ => continue,
            };
            row["name"] = name.into();
            row["symbol"] = symbol.into();
        }
        let lessons = lessons(&report).unwrap();
        assert_eq!(lessons.top_procedure, PAIR_COMPUTE_NAME);
        assert_eq!(lessons.next_procedure.as_deref(), Some(NEIGHBOR_BUILD_NAME));
        assert!(
            lessons.lines[0].starts_with(&format!("{PAIR_COMPUTE_NAME} is 98.8 % ")),
            "{}",
            lessons.lines[0]
        );
        assert_eq!(
            lessons.lines[1],
            format!("making it take no time would shorten the run by 73.5 % (148.8 ms); {NEIGHBOR_BUILD_NAME} by 0.0 % (0.0 ms)")
        );
    }

    #[test]
    fn the_report_link_is_a_hyperlink_only_on_a_terminal() {
        let html = Path::new("/tmp/tracer-demo/lammps-report.html");
        let url = "file:///tmp/tracer-demo/lammps-report.html";
        assert_eq!(report_link(html, false), url);
        assert_eq!(
            report_link(html, true),
            format!("\x1b]8;;{url}\x1b\\{url}\x1b]8;;\x1b\\")
        );
    }
}
