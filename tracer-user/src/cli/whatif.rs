use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tracer_analysis::node::ShownId;

use super::print::{out, out_part};
use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::Serialize;
use tracer_analysis::network::NetworkTable;
use tracer_analysis::online::{network_cost, OnlineReplay, OnlineWhatIf};
use tracer_analysis::placement::{Placement, PlacementSpec};
use tracer_analysis::recording::RecordingReader;
use tracer_analysis::replay::ReplayError;
use tracer_analysis::{ms_tenths, DEFAULT_SLICE_NS};
use tracer_analysis::{PathProfile, RecordedRun};

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Polling {
    /// From the recording: processes on CPU for at least half their time in MPI/PVM calls.
    Auto,
    /// Every process busy-polls while it waits.
    Yes,
    /// No process uses a CPU while it waits.
    No,
}

#[derive(Args)]
pub(super) struct WhatifArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Where processes run, e.g. `*@0` (all ranks share CPU 0), `*@0-1`, `0-1@0;2-3@1`,
    /// `0-1@a:0;2-3@b:0` (two nodes), `each` (a CPU per process); see docs/whatif.md.
    #[arg(long, value_name = "SPEC")]
    placement: Option<String>,
    /// Message costs from a table (CSV `scope,bytes,latency_ns`, as `tracer calibrate`
    /// writes it) instead of the recorded latencies.
    #[arg(long, value_name = "TABLE")]
    network: Option<PathBuf>,
    /// Whether waiting processes use their CPU (busy-polling MPI libraries do).
    #[arg(long, value_enum, default_value = "auto")]
    polling: Polling,
    /// The scheduler's time slice: a polling rank on a shared CPU notices a message half
    /// a slice late on average.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_SLICE_NS / 1e6)]
    slice_ms: f64,
    /// Run the online replay (what `tracer record --whatif-placement` runs while it
    /// traces) instead of the offline one: the predicted runtime only, no path.
    #[arg(long)]
    online: bool,
    /// Print JSON (schema: docs/whatif.md) instead of text.
    #[arg(long)]
    json: bool,
}

/// `--online`: the recording's items through the online replay.
fn online(
    a: &WhatifArgs,
    spec: Option<PlacementSpec>,
    table: Option<NetworkTable>,
) -> anyhow::Result<ExitCode> {
    let context = || format!("reading {}", a.file.display());
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    let replay = OnlineReplay::new(spec, table.map(network_cost), a.polling.forced())
        .with_slice(a.slice_ms * 1e6);
    let mut w = OnlineWhatIf::new(replay);
    while let Some(item) = reader.next_item().with_context(context)? {
        w.item(&item);
    }
    let p = w.finish().with_context(|| match &a.placement {
        Some(_) => format!("--placement for {}", a.file.display()),
        None => format!("replaying {}", a.file.display()),
    })?;
    let trailer = reader.totals();
    super::warn_probe_failures(&trailer.probe_failures);
    super::warn_lost(trailer.events_total, trailer.events_lost);
    if a.json {
        out!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        out!("{}", p.text_line());
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Output {
    schema: u32,
    placement: Option<String>,
    network: Option<String>,
    /// Events the recording lost (their calls and messages are missing).
    events_lost: u64,
    /// Processes that use their CPU while they wait.
    polling_pids: Vec<u32>,
    /// The parallel section: first MPI_Init return to last MPI_Finalize call.
    measured_ns: u64,
    predicted_ns: u64,
    change_percent: f64,
    /// The whole run, launch and setup included.
    measured_total_ns: u64,
    predicted_total_ns: u64,
    predicted_path: PathProfile,
    /// The predicted critical path piece by piece (times in ns from the first event).
    path: Vec<tracer_analysis::replay::PathPiece>,
}

impl Polling {
    /// None: decide from the recording.
    fn forced(self) -> Option<bool> {
        match self {
            Polling::Auto => None,
            Polling::Yes => Some(true),
            Polling::No => Some(false),
        }
    }
}

pub(super) fn run(a: WhatifArgs) -> anyhow::Result<ExitCode> {
    let totals = super::tell_condition(&a.file);
    if !(a.slice_ms >= 0.0 && a.slice_ms.is_finite()) {
        anyhow::bail!("--slice-ms must be a number of milliseconds >= 0");
    }
    let spec = a
        .placement
        .as_deref()
        .map(PlacementSpec::parse_checked)
        .transpose()
        .context("--placement")?;
    let table = a
        .network
        .as_deref()
        .map(NetworkTable::load)
        .transpose()
        .context("--network")?;
    if a.online {
        return online(&a, spec, table);
    }
    let context = || format!("reading {}", a.file.display());
    let mut run = RecordedRun::read(&a.file).with_context(context)?;
    if spec.is_some() && run.cpu.participants.len() <= 1 {
        let e = ReplayError::NothingToMove {
            processes: run.cpu.participants.len(),
        };
        return Err(e).with_context(|| format!("--placement for {}", a.file.display()));
    }
    match a.polling.forced() {
        None => {}
        Some(true) => run.polling = run.cpu.participants.iter().copied().collect(),
        Some(false) => run.polling.clear(),
    }
    // No --placement: the placement the program ran under.
    let placement = match spec.clone().or_else(|| run.recorded_placement()) {
        Some(s) => Placement::bind(&s, &run.program())?,
        None => Placement::unconstrained(),
    };
    let mut replay = run
        .replay()
        .with_context(|| format!("replaying {}", a.file.display()))?;
    replay.slice_ns = a.slice_ms * 1e6;
    if let Some(t) = table {
        replay.set_network(&run.cpu, &placement, &network_cost(t))?;
    }
    let p = replay.run(&placement);
    let mut polling_pids: Vec<u32> = run.polling.iter().copied().collect();
    polling_pids.sort_unstable();
    let out = Output {
        schema: 1,
        placement: a.placement.clone(),
        network: a.network.as_ref().map(|p| p.display().to_string()),
        events_lost: run.events_lost,
        polling_pids,
        measured_ns: p.measured_ns,
        predicted_ns: p.predicted_ns.round() as u64,
        change_percent: 100.0 * (p.predicted_ns / p.measured_ns.max(1) as f64 - 1.0),
        measured_total_ns: p.measured_total_ns,
        predicted_total_ns: p.predicted_total_ns.round() as u64,
        predicted_path: PathProfile::of(&p, &run.cpu),
        path: p.path.clone(),
    };
    super::warn_probe_failures(&totals.probe_failures);
    super::warn_lost(run.cpu.events, run.events_lost);
    if a.json {
        out!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        out_part!("{}", text(&out, &run));
    }
    Ok(ExitCode::SUCCESS)
}

fn text(o: &Output, run: &RecordedRun) -> String {
    let mut s = String::new();
    let what = match (&o.placement, &o.network) {
        (Some(p), Some(n)) => format!("placement {p}, network {n}"),
        (Some(p), None) => format!("placement {p}"),
        (None, Some(n)) => format!("network {n}"),
        (None, None) => {
            "no change (a replay of the recording as it ran, on the CPUs it ran on)".to_string()
        }
    };
    let _ = writeln!(s, "what if: {what}");
    let polling = if o.polling_pids.is_empty() {
        "none".to_string()
    } else {
        format!("{} of {}", o.polling_pids.len(), run.cpu.participants.len())
    };
    let _ = writeln!(s, "processes polling while they wait: {polling}");
    let section = if run.cpu.milestones.is_empty() {
        "first event to last"
    } else {
        "MPI_Init return to MPI_Finalize call"
    };
    let _ = writeln!(s, "runtime ({section}):");
    let _ = writeln!(s, "  measured   {}", ms_tenths(o.measured_ns as f64));
    let _ = writeln!(
        s,
        "  predicted  {} ({:+.1} %)",
        ms_tenths(o.predicted_ns as f64),
        o.change_percent
    );

    let p = &o.predicted_path;
    let _ = writeln!(s, "\npredicted critical path: {}", ms_tenths(p.length_ns));
    let _ = writeln!(
        s,
        "  work        {} of CPU, {} to run ({} waiting for a shared CPU)",
        ms_tenths(p.work_ns),
        ms_tenths(p.running_ns),
        ms_tenths(p.running_ns - p.work_ns)
    );
    let _ = writeln!(s, "  off CPU     {}", ms_tenths(p.off_ns));
    let _ = writeln!(s, "  messages    {}", ms_tenths(p.message_ns));
    let _ = writeln!(s, "  wakeups     {}", ms_tenths(p.wakeup_ns));
    // The parts above are the path's pieces; the path starts where its first thread
    // does, which can be well after the section's start (a thread that starts late).
    let before = p.length_ns - (p.running_ns + p.off_ns + p.message_ns + p.wakeup_ns);
    let _ = writeln!(
        s,
        "  before it   {} (from the section's start to the path's first thread)",
        ms_tenths(before.max(0.0))
    );
    let _ = writeln!(s, "  by process:");
    for r in p.processes.iter().take(8) {
        let who = match r.rank {
            Some(rank) => format!("rank {rank} (pid {})", ShownId(r.pid)),
            None => format!("pid {}", ShownId(r.pid)),
        };
        let _ = writeln!(s, "    {:>10}  {who}  {}", ms_tenths(r.ns), r.command);
    }
    if p.procedures
        .iter()
        .any(|r| r.procedure != tracer_analysis::path::OUTSIDE)
    {
        let _ = writeln!(s, "  by procedure (running time, inclusive):");
        for r in p.procedures.iter().take(8) {
            let _ = writeln!(s, "    {:>10}  {}", ms_tenths(r.ns), r.procedure);
        }
    }
    s
}
