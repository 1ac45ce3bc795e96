use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use tracer_analysis::analysis::workclock::ClockKind;
use tracer_analysis::export::chrome::{ChromeExport, ExportStats};
use tracer_analysis::export::flame::{write_folded, FlameStats};
use tracer_analysis::export::hatchet::{write_hatchet, HatchetStats};
use tracer_analysis::export::otf2::{Otf2Stats, Otf2Trace};
use tracer_analysis::export::pprof::{write_pprof, PprofStats};
use tracer_analysis::export::stacks::StackProfile;
use tracer_analysis::export::{recording_items, ExportError};
use tracer_user::render::flame_graph::write_flame_graph;
use tracer_user::render::otf2::{write_otf2, Otf2Error};
use tracer_user::session;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and chrome://tracing.
    Chrome,
    /// pprof profile (gzipped profile.proto): critical-path time, CPU time and zeroing
    /// by procedure stack, for `go tool pprof`.
    Pprof,
    /// Folded stacks of the critical path (`frame;frame;... ns`), for flame graph tools.
    Folded,
    /// Flame graph of the critical path (SVG, drawn by inferno), for a web browser.
    Svg,
    /// Hatchet literal JSON: the call tree by process, thread and procedure stack, with
    /// work, critical-path time and zeroing per node, for `GraphFrame.from_literal`.
    Hatchet,
    /// OTF2 archive (OUT is a directory): calls, procedures, futex waits, MPI messages
    /// and collectives, threads, and the critical path as a metric, for Vampir and the
    /// OTF2 tools (`otf2-print OUT/traces.otf2`).
    Otf2,
}

#[derive(Args)]
pub struct ExportArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Output format (docs/exports.md).
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Where to write the export (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    /// Which clock weighs the work (the critical path and the work samples).
    #[arg(long, value_enum, default_value = "cpu")]
    clock: super::analyze::Clock,
}

pub fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    super::tell_condition(&a.file);
    let clock = ClockKind::from(a.clock);
    let reading = || format!("reading {}", a.file.display());
    let writing = || format!("writing {}", a.output.display());
    let to_stdout = a.output == Path::new("-");
    let fail = |e: ExportError| match e {
        ExportError::Recording(e) => anyhow::Error::new(e).context(reading()),
        ExportError::Write(e) => anyhow::Error::new(e).context(writing()),
    };
    // Each format reads the graph first: a bad recording fails before an output file
    // exists.
    let (recorded, lost) = match a.format {
        Format::Chrome => {
            let plan = ChromeExport::read(&a.file, clock).with_context(reading)?;
            let counts = (plan.events_recorded, plan.events_lost);
            let items = recording_items(&a.file).with_context(reading)?;
            let stats =
                write_output(&a.output, |out| Ok(plan.write(items, out)?.0)).map_err(fail)?;
            if !to_stdout {
                report_chrome(&stats, &a.output);
            }
            counts
        }
        Format::Pprof => {
            let profile = StackProfile::read(&a.file, clock).with_context(reading)?;
            let stats =
                write_output(&a.output, |out| Ok(write_pprof(&profile, out)?.0)).map_err(fail)?;
            if !to_stdout {
                report_pprof(&stats, &a.output);
            }
            (profile.events_recorded, profile.events_lost)
        }
        Format::Hatchet => {
            let profile = StackProfile::read(&a.file, clock).with_context(reading)?;
            let stats =
                write_output(&a.output, |out| Ok(write_hatchet(&profile, out)?.0)).map_err(fail)?;
            if !to_stdout {
                report_hatchet(&stats, &a.output);
            }
            (profile.events_recorded, profile.events_lost)
        }
        Format::Otf2 => {
            if to_stdout {
                anyhow::bail!("an OTF2 archive is a directory: give one with -o DIR, not -");
            }
            let trace = Otf2Trace::read(&a.file, clock).map_err(fail)?;
            let stats = write_archive(&trace, &a.output).with_context(writing)?;
            report_otf2(&stats, &a.output);
            (trace.events_recorded, trace.events_lost)
        }
        Format::Folded | Format::Svg => {
            let profile = StackProfile::read(&a.file, clock).with_context(reading)?;
            let svg = matches!(a.format, Format::Svg);
            let stats = write_output(&a.output, |out| {
                Ok(if svg {
                    write_flame_graph(&profile, out)?.0
                } else {
                    write_folded(&profile, out)?.0
                })
            })
            .map_err(fail)?;
            if !to_stdout {
                report_flame(&stats, &a.output);
            }
            (profile.events_recorded, profile.events_lost)
        }
    };
    super::warn_lost(recorded, lost);
    Ok(ExitCode::SUCCESS)
}

/// Runs `write` on OUT: standard output for `-`, else a new file that is removed again
/// if writing fails, so that no partial export is left for a tool to misread.
fn write_output<T>(
    output: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<T, ExportError>,
) -> Result<T, ExportError> {
    if output == Path::new("-") {
        let mut out = BufWriter::new(std::io::stdout().lock());
        let written = write(&mut out)?;
        out.flush()?;
        return Ok(written);
    }
    // Private, and the sudo user's under sudo: an export names commands and paths.
    let file = session::create_private(output, session::invoking_user().as_ref())?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let result = write(&mut out).and_then(|written| {
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(written)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(output);
    }
    result
}

/// Writes the OTF2 archive in `dir`, which must be new or empty: on failure what was
/// written goes again (the directory too, if this made it).
fn write_archive(trace: &Otf2Trace, dir: &Path) -> Result<Otf2Stats, Otf2Error> {
    let existed = dir.exists();
    let result = write_otf2(trace, dir);
    if let Err(Otf2Error::Library { .. } | Otf2Error::Io(_)) = &result {
        if existed {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let _ = std::fs::remove_dir_all(entry.path())
                    .or_else(|_| std::fs::remove_file(entry.path()));
            }
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    result
}

fn report_otf2(s: &Otf2Stats, out: &Path) {
    eprintln!(
        "wrote {}: {} events in {} locations, {} regions, {} communicators; critical path {:.3} ms (metric \"critical path\")",
        out.display(),
        s.events,
        s.locations,
        s.regions,
        s.comms,
        s.critical_path_ns as f64 / 1e6,
    );
}

fn report_chrome(s: &ExportStats, out: &Path) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "wrote {}: {} slices, {} flows (in {} slices of their own), {} processes, {} threads; critical path {:.3} ms in {} slices{}",
        out.display(),
        s.slices,
        s.flows,
        s.flow_slices,
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

fn report_pprof(s: &PprofStats, out: &Path) {
    eprintln!(
        "wrote {}: {} samples, {} functions; critical path {:.3} ms, work {:.3} ms",
        out.display(),
        s.samples,
        s.functions,
        s.critical_path_ns as f64 / 1e6,
        s.work_ns as f64 / 1e6,
    );
}

fn report_flame(s: &FlameStats, out: &Path) {
    eprintln!(
        "wrote {}: {} stacks; critical path {:.3} ms",
        out.display(),
        s.stacks,
        s.critical_path_ns as f64 / 1e6,
    );
}

fn report_hatchet(s: &HatchetStats, out: &Path) {
    eprintln!(
        "wrote {}: {} nodes, {} roots; critical path {:.3} ms, work {:.3} ms",
        out.display(),
        s.nodes,
        s.roots,
        s.critical_path_ns as f64 / 1e6,
        s.work_ns as f64 / 1e6,
    );
}
