//! The command line: the subcommands and which file runs each.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::{
    agent, analyze, calibrate, dump, export, functions, merge, metrics, path_values, record,
    report, summary, top, whatif,
};

/// Critical-path tracer for parallel programs (MPI, PVM, threads), built on eBPF.
#[derive(Parser)]
#[command(name = "tracer", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace processes (by PID, a command, or system-wide) and record their events.
    Record(record::RecordArgs),
    /// Trace as `record` does, with a live view of the critical path in the terminal: its
    /// length and growth, the procedures on it, messages and lost events; `q` stops.
    Top(top::TopArgs),
    /// Serve this node's part of jobs across nodes to a collector (`record --agent`):
    /// idle until one asks, then trace every MPI/PVM process of this node and stream
    /// its records (docs/multinode.md).
    Agent(agent::AgentArgs),
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
    /// Merge recordings made on each node of a job (`tracer record -o` on every node)
    /// into one recording of the whole job, which every offline command reads
    /// (docs/multinode.md).
    Merge(merge::MergeArgs),
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
    /// What the per-node engines design would send between nodes for a recording of
    /// several nodes (the benchmark's design study: docs/multinode.md, "Scale").
    #[command(hide = true)]
    PathValues(path_values::PathValuesArgs),
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Top(a) => top::run(a),
        Command::Agent(a) => agent::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Report(a) => report::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Export(a) => export::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Metrics(a) => metrics::run(a),
        Command::Functions(a) => functions::run(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Whatif(a) => whatif::run(a),
        Command::PathValues(a) => path_values::run(a),
    }
}
