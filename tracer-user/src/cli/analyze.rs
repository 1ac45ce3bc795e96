use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use tracer_user::analysis::{self, profile::Profile, workclock::ClockKind};
use tracer_user::recording::{self, Item};

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
pub struct AnalyzeArgs {
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

pub fn run(a: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let (meta, items, trailer) =
        recording::read_all(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let clock = ClockKind::from(a.clock);
    let analyzer = analysis::analyze(&meta, &items, clock);
    let commands: HashMap<u32, String> = items
        .iter()
        .filter_map(|i| match i {
            Item::Process(p) if !p.command.is_empty() => Some((p.pid, p.command.clone())),
            _ => None,
        })
        .collect();
    let profile = Profile::new(&analyzer, clock, trailer.events_lost, &commands);
    if let Some(path) = &a.profile_json {
        std::fs::write(path, serde_json::to_string_pretty(&profile)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&profile)?);
    } else {
        print!("{}", profile.text());
    }
    Ok(ExitCode::SUCCESS)
}
