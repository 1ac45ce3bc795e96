//! Command-line front end: one file per subcommand; errors become one line with context.

mod analyze;
mod calibrate;
mod dump;
mod export;
mod functions;
mod metrics;
mod record;
mod report;
mod summary;
mod whatif;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Critical-path tracer for parallel programs (MPI, PVM, threads), built on eBPF.
#[derive(Parser)]
#[command(name = "tracer", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace processes (by PID, a command, or system-wide) and record their events.
    Record(record::RecordArgs),
    /// Compute the critical path profile of a recording (no root needed).
    Analyze(analyze::AnalyzeArgs),
    /// Offline analyses of a recording's graph: the path itself, slack, near-critical
    /// paths, maximum benefit, what-if, phases (no root needed).
    Report(report::ReportArgs),
    /// Print the events of a recording, one per line.
    Dump(dump::DumpArgs),
    /// Write a recording for another tool: a timeline for Perfetto or chrome://tracing,
    /// a pprof profile, folded stacks or a flame graph of the critical path
    /// (docs/exports.md).
    Export(export::ExportArgs),
    /// Summarize a recording (counts, processes, ranks).
    Summary(summary::SummaryArgs),
    /// Metrics by level (program, machine, process, thread, procedure): CPU, work and
    /// blocked time, CPU wait, parallelism, message traffic matrices and latency
    /// percentiles (no root needed).
    Metrics(metrics::MetricsArgs),
    /// List the procedures of a process or binary that `--func` can select, with size and
    /// source location; ranked by CPU time with `--profile`.
    Functions(functions::FunctionsArgs),
    /// Measure a network cost table (message size -> one-way latency) for `tracer whatif
    /// --network` with an MPI ping-pong run by the given launcher (docs/network-table.md).
    Calibrate(calibrate::CalibrateArgs),
    /// Predict the runtime and critical path under another placement of processes on
    /// CPUs and/or another network, by replaying a recording (docs/whatif.md).
    Whatif(whatif::WhatifArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Report(a) => report::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Export(a) => export::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Metrics(a) => metrics::run(a),
        Command::Functions(a) => functions::run(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Whatif(a) => whatif::run(a),
    }
}

/// Says on stderr that a recording is incomplete, when it is: `recorded` events are in
/// it, `lost` more were dropped by the probes (every command that reads or writes a
/// recording ends with this, so that no result from an incomplete one goes unflagged).
fn warn_lost(recorded: u64, lost: u64) {
    if lost > 0 {
        let produced = recorded + lost;
        eprintln!(
            "tracer: warning: {lost} of {produced} events ({:.1} %) were lost (the tracer \
             fell behind and the probes' buffers filled up): calls and messages among them \
             are missing, so the results are incomplete",
            lost as f64 * 100.0 / produced as f64
        );
    }
}

/// Prints a summary for people.
fn print_summary(s: &tracer_analysis::format::summary::Summary) {
    let cpu = s
        .tracer_cpu_ns
        .map(|ns| format!("; tracer CPU {:.2} s", ns as f64 / 1e9))
        .unwrap_or_default();
    eprintln!(
        "events: {} recorded, {} lost{cpu}",
        s.events.total, s.events.lost
    );
    for p in &s.processes {
        let mut who = String::new();
        if let Some(r) = p.rank {
            who.push_str(&format!(" rank {r}"));
        }
        if let Some(t) = p.pvm_tid {
            who.push_str(&format!(" pvm tid {t:#x}"));
        }
        eprintln!(
            "  pid {:>7}{who}  threads {:>3}  {}",
            p.pid, p.threads, p.command
        );
    }
    if !s.calls.is_empty() {
        let calls: Vec<String> = s.calls.iter().map(|(k, v)| format!("{k} {v}")).collect();
        eprintln!("calls: {}", calls.join(", "));
    }
    if !s.functions.is_empty() {
        let f: Vec<String> = s
            .functions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        eprintln!("procedures entered: {}", f.join(", "));
    }
    if let Some(unprobed) = s.unprobed_mpi_calls.as_ref().filter(|u| !u.is_empty()) {
        let names: Vec<&str> = unprobed.keys().map(String::as_str).collect();
        eprintln!(
            "MPI calls imported but not probed (their time counts as work, their traffic \
             is unmatched): {}",
            names.join(", ")
        );
    }
}
