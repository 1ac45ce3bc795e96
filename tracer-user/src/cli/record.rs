use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tracer_user::session::{self, RecordOptions, StopReason};

#[derive(Args)]
pub struct RecordArgs {
    /// Trace this running process, its threads and all its descendants (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Trace every process that calls MPI, PVM or a selected procedure.
    #[arg(long)]
    all: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Write the event recording here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write a JSON summary here (schema: docs/summary-json.md).
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    /// Probe entry and exit of procedures: SYMBOL or PATH:SYMBOL, globs allowed (repeatable).
    #[arg(long = "func", value_name = "SPEC")]
    funcs: Vec<String>,
    /// Also probe this MPI or PVM library (repeatable); installed ones are found anyway.
    #[arg(long = "lib", value_name = "PATH")]
    libs: Vec<PathBuf>,
    /// Ring buffer size in MiB (a power of two).
    #[arg(long, value_name = "MIB", default_value_t = 16)]
    buffer_mib: u32,
    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
    /// The command to launch and trace from its first instruction.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub fn run(a: RecordArgs) -> anyhow::Result<ExitCode> {
    if !a.buffer_mib.is_power_of_two() {
        bail!("--buffer-mib must be a power of two, got {}", a.buffer_mib);
    }
    let duration = match a.duration {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            bail!("--duration must be a positive number of seconds")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let outcome = session::record(RecordOptions {
        pids: a.pids,
        command: a.command,
        system_wide: a.all,
        duration,
        output: a.output.clone(),
        funcs: a.funcs,
        libs: a.libs,
        ring_mib: a.buffer_mib,
        on_ready: (!a.quiet).then(|| {
            Box::new(|r: &session::Ready| {
                eprintln!(
                    "tracer: tracing ({} target processes, {} probes on {} MPI/PVM libraries); Ctrl-C stops",
                    r.processes, r.probes, r.libraries
                )
            }) as session::ReadyHook
        }),
    })?;
    if let Some(path) = &a.summary_json {
        let json = serde_json::to_string_pretty(&outcome.summary)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if !a.quiet {
        let why = match outcome.stop {
            StopReason::TargetsExited => "traced processes exited",
            StopReason::Deadline => "duration reached",
            StopReason::Signal => "interrupted",
        };
        eprintln!("tracer: stopped ({why})");
        for (path, flavor, n) in &outcome.libraries {
            log::info!("probed {n} calls in {} ({flavor:?})", path.display());
        }
        super::print_summary(&outcome.summary);
        if let Some(code) = outcome.command_status.filter(|c| *c != 0) {
            eprintln!("tracer: the traced command exited with status {code}");
        }
        if let Some(o) = &a.output {
            eprintln!("recording written to {}", o.display());
        }
    }
    if !outcome.unmatched_funcs.is_empty() {
        bail!(
            "--func matched no function anywhere: {}",
            outcome.unmatched_funcs.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
