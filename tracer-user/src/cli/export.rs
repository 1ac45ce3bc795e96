use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use tracer_analysis::analysis::workclock::ClockKind;
use tracer_analysis::export::chrome::{ChromeExport, ExportStats};
use tracer_analysis::export::{recording_items, ExportError};

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and chrome://tracing.
    Chrome,
}

#[derive(Args)]
pub struct ExportArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Where to write the export (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    /// Which clock weighs the work on the critical path track.
    #[arg(long, value_enum, default_value = "cpu")]
    clock: super::analyze::Clock,
}

pub fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let reading = || format!("reading {}", a.file.display());
    let writing = || format!("writing {}", a.output.display());
    let Format::Chrome = a.format;
    // The graph first: a bad recording fails before an output file exists.
    let plan = ChromeExport::read(&a.file, ClockKind::from(a.clock)).with_context(reading)?;
    let (recorded, lost) = (plan.events_recorded, plan.events_lost);
    let items = recording_items(&a.file).with_context(reading)?;
    let to_stdout = a.output == Path::new("-");
    let result = if to_stdout {
        let out = BufWriter::new(std::io::stdout().lock());
        plan.write(items, out).map(|(stats, _)| stats)
    } else {
        let file = File::create(&a.output).with_context(writing)?;
        let result = plan
            .write(items, BufWriter::with_capacity(1 << 20, file))
            .and_then(|(stats, w)| {
                let file = w.into_inner().map_err(|e| e.into_error())?;
                file.sync_all()?;
                Ok(stats)
            });
        if result.is_err() {
            let _ = std::fs::remove_file(&a.output);
        }
        result
    };
    let stats = match result {
        Ok(s) => s,
        Err(ExportError::Recording(e)) => return Err(e).with_context(reading),
        Err(ExportError::Write(e)) => return Err(e).with_context(writing),
    };
    if !to_stdout {
        report(&stats, &a.output);
    }
    super::warn_lost(recorded, lost);
    Ok(ExitCode::SUCCESS)
}

fn report(s: &ExportStats, out: &Path) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "wrote {}: {} slices, {} flows, {} processes, {} threads; critical path {:.3} ms in {} slices{}",
        out.display(),
        s.slices,
        s.flows,
        s.processes,
        s.threads,
        s.critical_path_ns as f64 / 1e6,
        s.critical_slices,
        if s.unclosed > 0 {
            format!("; {} calls or procedures never returned (not shown)", s.unclosed)
        } else {
            String::new()
        }
    );
}
