use std::path::PathBuf;
use std::process::ExitCode;

use super::print::{out, out_part};
use anyhow::Context;
use clap::{Args, ValueEnum};
use tracer_analysis::recording::RecordingReader;
use tracer_analysis::{profile::Profile, workclock::ClockKind};

use tracer_user::Symbolizer;

#[derive(Clone, Copy, ValueEnum)]
pub enum Clock {
    /// On-CPU time minus time in communication and synchronization calls.
    Cpu,
    /// Elapsed time minus time in communication and synchronization calls.
    Wall,
}

impl From<Clock> for ClockKind {
    fn from(c: Clock) -> Self {
        match c {
            Clock::Cpu => ClockKind::Cpu,
            Clock::Wall => ClockKind::Wall,
        }
    }
}

#[derive(Args)]
pub(super) struct AnalyzeArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Which clock weighs the work between events.
    #[arg(long, value_enum, default_value = "cpu")]
    clock: Clock,
    /// Also write the profile as JSON (schema: docs/profile-json.md).
    #[arg(long, value_name = "FILE")]
    profile_json: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    super::tell_condition(&a.file);
    let context = || format!("reading {}", a.file.display());
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    let profile = Profile::of_recording(
        &mut reader,
        ClockKind::from(a.clock),
        Some(Box::new(Symbolizer::symbols_only())),
    )
    .with_context(context)?;
    let trailer = reader.totals();
    if let Some(path) = &a.profile_json {
        let json = serde_json::to_string_pretty(&profile)? + "\n";
        let owner = tracer_user::session::invoking_user();
        tracer_user::session::write_private(path, json.as_bytes(), owner.as_ref())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        out!("{}", serde_json::to_string_pretty(&profile)?);
    } else {
        out_part!("{}", profile.text());
    }
    super::warn_probe_failures(&trailer.probe_failures);
    super::warn_lost(trailer.events_total, trailer.events_lost);
    Ok(ExitCode::SUCCESS)
}
