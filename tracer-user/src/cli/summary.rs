use std::path::PathBuf;
use std::process::ExitCode;

use super::print::out;
use anyhow::Context;
use clap::Args;
use tracer_analysis::{recording, summary};

#[derive(Args)]
pub(super) struct SummaryArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Print JSON (schema: docs/summary-json.md) instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: SummaryArgs) -> anyhow::Result<ExitCode> {
    super::tell_condition(&a.file);
    let recording::WholeRecording {
        items,
        trailer,
        meta,
    } = recording::read_all(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let mut s = summary::summarize(&items, trailer.events_lost);
    s.events.failures = trailer.probe_failures.clone();
    s.name_nodes(&meta.nodes);
    if a.json {
        out!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        super::print_summary(&s);
    }
    super::warn_probe_failures(&trailer.probe_failures);
    super::warn_lost(trailer.events_total, trailer.events_lost);
    Ok(ExitCode::SUCCESS)
}
