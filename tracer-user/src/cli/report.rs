use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tracer_analysis::attribution::SampledProfile;
use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::recording::RecordingReader;
use tracer_analysis::sampled::SampledStacks;
use tracer_analysis::whatif::parse_scale;
use tracer_analysis::workclock::ClockKind;
use tracer_analysis::Metrics;
use tracer_analysis::{write_arcs_csv, Report, ReportOptions};

use tracer_user::{html_report, Traced};

use super::analyze::Clock;
use super::print::{out, out_part, say};

#[derive(Args)]
pub(super) struct ReportArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Which clock weighs the work between events.
    #[arg(long, value_enum, default_value = "cpu")]
    clock: Clock,
    /// How many longest paths to find (near-critical paths and maximum benefit).
    #[arg(long, value_name = "K", default_value_t = 10)]
    paths: usize,
    /// What-if: scale a selected procedure's time by FACTOR (0 removes it); repeatable,
    /// the edits apply together. PROCEDURE is its name as the report shows it (demangled)
    /// or its symbol.
    #[arg(long, value_name = "PROCEDURE=FACTOR")]
    scale: Vec<String>,
    /// Phases: a repeated pattern on the path must occur at least this often.
    #[arg(long, value_name = "N", default_value_t = 2)]
    phase_support: usize,
    /// Also write every arc of the graph with its early/late start and finish and its
    /// total and free slack, as CSV.
    #[arg(long, value_name = "FILE")]
    arcs: Option<PathBuf>,
    /// Print JSON (schema: docs/report-json.md) instead of the text report.
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML page: the diagnosis, the
    /// procedure table, a timeline of the critical path and its flame graph.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

pub(super) fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let totals = super::tell_condition(&a.file);
    if a.paths == 0 {
        anyhow::bail!("--paths must be at least 1");
    }
    let context = || format!("reading {}", a.file.display());
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    let rg = RecordedGraph::read(&mut reader, a.clock.into()).with_context(context)?;
    let command = reader.meta.command.join(" ");
    let scales = a
        .scale
        .iter()
        .map(|s| parse_scale(s, &rg.procedures, &rg.procedure_symbols))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = ReportOptions {
        paths: a.paths,
        scales,
        phase_support: a.phase_support,
        ..Default::default()
    };
    if let Some(path) = &a.arcs {
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(tracer_user::session::create_private(
                path,
                tracer_user::session::invoking_user().as_ref(),
            )?);
            write_arcs_csv(&rg, &mut out)?;
            std::io::Write::flush(&mut out)
        };
        write().with_context(|| format!("writing {}", path.display()))?;
    }
    // A second pass for the metrics by level (they feed the diagnosis).
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    let mut metrics = Metrics::from_reader(&mut reader).with_context(context)?;
    metrics.locate_sites(&mut tracer_user::Symbolizer::new());
    let mut report = Report::new(&rg, &opts, Some(metrics));
    // Sampled stacks are weighed on the cpu clock, the samples' own.
    let sampled = if rg.samples.is_empty() || rg.clock != ClockKind::Cpu {
        None
    } else {
        let profile =
            SampledProfile::new(&rg, &mut tracer_user::Symbolizer::new()).with_context(context)?;
        report.add_sampled(&profile);
        Some(SampledStacks::new(&rg, profile))
    };
    if let Some(path) = &a.html {
        let traced = Traced {
            command: &command,
            recording: &a.file.display().to_string(),
        };
        write_html(&html_report(&report, &rg, sampled.as_ref(), &traced)?, path)
            .with_context(|| format!("writing {}", path.display()))?;
        say!("wrote {} (HTML report)", path.display());
    }
    super::warn_probe_failures(&totals.probe_failures);
    super::warn_lost(rg.events, rg.lost);
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out_part!("{}", report.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the HTML page, private to the invoking user as every output is; a page that
/// could not be written whole is removed.
fn write_html(page: &str, path: &std::path::Path) -> std::io::Result<()> {
    let user = tracer_user::session::invoking_user();
    let mut file = tracer_user::session::create_private(path, user.as_ref())?;
    let written = std::io::Write::write_all(&mut file, page.as_bytes())
        .and_then(|()| tracer_user::session::sync_if_regular(&file));
    if written.is_err() {
        tracer_user::session::remove_partial(path);
    }
    written
}
