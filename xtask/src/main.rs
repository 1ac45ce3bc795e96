//! Project automation. `cargo xtask setup` installs everything a fresh machine lacks
//! (idempotent and quick when it is all there); `test`, `demo` and `bench` run setup first.
//! One module per command (setup, build, test, demo, bench); the library (lib.rs) holds
//! what the integration tests use too: `util` (running commands) and `lammps` (the
//! demo's real application). This file only parses the command line and dispatches.

mod bench;
mod build;
mod demo;
mod fuzz;
mod layout;
mod setup;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};
// The modules' `crate::util` (the library holds it: the integration tests use it too).
use xtask::util;

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install Debian packages, clippy and rustfmt, the nightly's rust-src and bpf-linker
    /// (idempotent).
    Setup,
    /// Build the tracer (release) and the test programs.
    Build,
    /// Run every test: rustfmt and clippy checks (as `lint`), unit tests, then the
    /// root-only integration tests.
    Test,
    /// Only the checks `test` starts with: `cargo fmt --all --check`, then `cargo clippy
    /// --all-targets -- -D warnings` on the host crates.
    Lint,
    /// Trace a bundled MPI program and print what the tracer found; then LAMMPS, with
    /// three lines of what its report shows and its HTML report's address last.
    Demo,
    /// Fuzz every reader (recording, records, network table, placement, scale, the whole
    /// analysis) for a bounded time each, on a copy of fuzz/corpus in target/fuzz.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = fuzz::TEST_SECONDS)]
        seconds: u64,
        /// Only these targets (comma-separated or repeated).
        #[arg(long, value_delimiter = ',')]
        target: Vec<String>,
        /// Instead of fuzzing, minimize fuzz/corpus (`-merge=1`) with what the last runs
        /// found.
        #[arg(long)]
        minimize: bool,
    },
    /// The overhead and throughput suite (docs/benchmarks.md): probe cost against empty
    /// programs, application slowdown, analyzer throughput, a live event flood, memory,
    /// recording size; then the offline graph analyses on a 10-million-arc graph.
    Bench {
        /// Only these stages (comma-separated or repeated).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<bench::Stage>,
        /// Runs of each configuration (default per stage: floor 5, slowdown 2,
        /// throughput 5, memory 2, exports 3, start-stop 3; flood and size run once).
        #[arg(long)]
        reps: Option<usize>,
        /// Seconds of each slowdown run's loop.
        #[arg(long, default_value_t = 1.0)]
        slowdown_secs: f64,
        /// Message rates of the slowdown stage (comma-separated; default 150,1000,10000).
        #[arg(long, value_delimiter = ',')]
        slowdown_rates: Vec<u64>,
        /// Numbers of selected procedures of the slowdown stage (comma-separated, each
        /// 0, 1, 8 or 32; default all four).
        #[arg(long, value_delimiter = ',', value_parser = procedure_count)]
        slowdown_procs: Vec<usize>,
        /// Seconds of the live flood (the documented figure uses 60).
        #[arg(long, default_value_t = 60.0)]
        flood_secs: f64,
        /// Events per second of the flood (and of the first recording-size run).
        #[arg(long, default_value_t = 500_000)]
        flood_rate: u64,
        /// Seconds of the shorter memory run; the longer runs ten times as long.
        #[arg(long, default_value_t = 2.0)]
        memory_secs: f64,
        /// Only the offline graph analyses (no root or MPI needed); same as --only graph.
        #[arg(long)]
        graph_only: bool,
    },
}

fn main() -> std::process::ExitCode {
    // The error on one line, not main's Debug form: with RUST_BACKTRACE set (as CI sets
    // it) that form adds xtask's own backtrace, twenty lines that push the failing test's
    // message out of the tail of the log a reader sees first.
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Setup => setup::setup(),
        Cmd::Build => build::build(),
        Cmd::Test => test::test(),
        Cmd::Lint => test::lint(),
        Cmd::Demo => demo::demo(),
        Cmd::Fuzz {
            minimize: true,
            target,
            ..
        } => fuzz::minimize(&target),
        Cmd::Fuzz {
            seconds, target, ..
        } => {
            setup::setup()?;
            fuzz::fuzz(seconds, &target)
        }
        Cmd::Bench {
            graph_only: true, ..
        } => bench::graph_bench(),
        Cmd::Bench {
            only,
            reps,
            slowdown_secs,
            slowdown_rates,
            slowdown_procs,
            flood_secs,
            flood_rate,
            memory_secs,
            ..
        } => bench::bench(
            &only,
            &bench::Options {
                reps,
                slowdown_secs,
                slowdown_rates,
                slowdown_procs,
                flood_secs,
                flood_rate,
                memory_secs,
            },
        ),
    }
}

/// `--slowdown-procs`: one of the selections the slowdown stage knows.
fn procedure_count(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(n @ (0 | 1 | 8 | 32)) => Ok(n),
        _ => Err(format!("{s:?}: want 0, 1, 8 or 32")),
    }
}
