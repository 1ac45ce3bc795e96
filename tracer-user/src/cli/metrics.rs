use std::path::PathBuf;
use std::process::ExitCode;

use super::print::{out, out_part};
use anyhow::Context;
use clap::Args;
use tracer_analysis::recording::RecordingReader;
use tracer_analysis::Metrics;

#[derive(Args)]
pub(super) struct MetricsArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Print JSON (schema: docs/metrics.md) instead of tables.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: MetricsArgs) -> anyhow::Result<ExitCode> {
    let totals = super::tell_condition(&a.file);
    let context = || format!("reading {}", a.file.display());
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    // Streamed: memory follows the program's shape, not the recording's length.
    let mut m = Metrics::from_reader(&mut reader).with_context(context)?;
    m.locate_sites(&mut tracer_user::Symbolizer::new());
    if a.json {
        out!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        out_part!("{}", m.text());
    }
    super::warn_probe_failures(&totals.probe_failures);
    super::warn_lost(m.events.analyzed, m.events.lost);
    Ok(ExitCode::SUCCESS)
}
