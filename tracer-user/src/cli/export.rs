use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::print::say;
use anyhow::Context;
use clap::{Args, ValueEnum};
use tracer_analysis::attribution::SampledProfile;
use tracer_analysis::chrome::{ChromeExport, ExportStats};
use tracer_analysis::flame::{write_folded, FlameStats};
use tracer_analysis::hatchet::{write_hatchet, HatchetStats};
use tracer_analysis::ms;
use tracer_analysis::otf2::{Otf2Plan, Otf2Stats};
use tracer_analysis::perfetto::{write_perfetto, PerfettoStats};
use tracer_analysis::pprof::{write_pprof, PprofStats};
use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::recording::{Item, RecordingError, RecordingReader};
use tracer_analysis::sampled::SampledStacks;
use tracer_analysis::stack_source::StackSource;
use tracer_analysis::stacks::GraphStacks;
use tracer_analysis::timeline::TimelinePlan;
use tracer_analysis::workclock::ClockKind;
use tracer_analysis::write_behind::WriteBehind;
use tracer_analysis::{recording_items, ExportError};
use tracer_user::session;
use tracer_user::write_flame_graph;
use tracer_user::{write_otf2, Otf2Error};
use tracer_user::{ParquetExport, ParquetStats};

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Format {
    /// Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and chrome://tracing.
    Chrome,
    /// Perfetto's native protobuf trace: the Chrome timeline as TrackEvents, plus the
    /// scheduler events as Perfetto's own sched data and counters of running and
    /// runnable threads, for ui.perfetto.dev and trace_processor.
    Perfetto,
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
    /// Parquet tables in the directory OUT (events, calls, messages, critical path,
    /// graph arcs with slack, procedures), for pyarrow, pandas, DuckDB, Spark.
    Parquet,
    /// OTF2 archive (OUT is a directory): calls, procedures, futex waits, MPI messages
    /// and collectives, threads, and the critical path as a metric, for Vampir and the
    /// OTF2 tools (`otf2-print OUT/traces.otf2`).
    Otf2,
}

#[derive(Args)]
pub(super) struct ExportArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
    /// Output format (docs/exports.md).
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Where to write the export (`-` for standard output; a directory, new or empty,
    /// for `parquet`).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    /// Which clock weighs the work (the critical path and the work samples).
    #[arg(long, value_enum, default_value = "cpu")]
    clock: super::analyze::Clock,
    /// The stacks of the stack formats (pprof, folded, svg, hatchet): the sampled call
    /// stacks, or the stacks of selected procedures (`--func`). Default: `procedures`
    /// when the recording has selected procedures, else `sampled` when it has sampled
    /// stacks (and the clock is cpu).
    #[arg(long, value_enum)]
    stacks: Option<Stacks>,
}

/// Which stacks the stack formats draw.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Stacks {
    /// Sampled call stacks, every function, weighed on the activity graph
    /// (docs/sampled-attribution.md).
    Sampled,
    /// Stacks of the procedures selected with `tracer record --func`.
    Procedures,
}

/// Reads the recording's graph (one pass, its samples with it) and the stacks `choice`
/// says, or the default (see [`ExportArgs::stacks`]).
fn read_stacks(
    file: &Path,
    clock: ClockKind,
    choice: Option<Stacks>,
) -> anyhow::Result<Box<dyn StackSource>> {
    let reading = || format!("reading {}", file.display());
    let mut items = RecordingReader::open(file).with_context(reading)?;
    let rg = RecordedGraph::read(&mut items, clock).with_context(reading)?;
    let sampled = match choice {
        Some(Stacks::Sampled) => {
            if rg.samples.is_empty() {
                anyhow::bail!(
                    "--stacks sampled: {} has no sampled stacks (record with --sample)",
                    file.display()
                );
            }
            true
        }
        Some(Stacks::Procedures) => false,
        // Procedures a user selected are what they asked to see; without any, the
        // sampled stacks name every function.
        None => rg.procedures.is_empty() && !rg.samples.is_empty() && clock == ClockKind::Cpu,
    };
    Ok(if sampled {
        let profile =
            SampledProfile::new(&rg, &mut tracer_user::Symbolizer::new()).with_context(reading)?;
        Box::new(SampledStacks::new(&rg, profile))
    } else {
        Box::new(GraphStacks::new(&rg))
    })
}

pub(super) fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let totals = super::tell_condition(&a.file);
    let clock = ClockKind::from(a.clock);
    let reading = || format!("reading {}", a.file.display());
    let writing = || format!("writing {}", a.output.display());
    let to_stdout = a.output == Path::new("-");
    let stack_format = matches!(
        a.format,
        Format::Pprof | Format::Hatchet | Format::Folded | Format::Svg
    );
    if a.stacks.is_some() && !stack_format {
        anyhow::bail!("--stacks applies to the stack formats: pprof, folded, svg, hatchet");
    }
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
            // Read on the thread that orders them (see `read_ordered`).
            let mut reader = RecordingReader::open(&a.file).with_context(reading)?;
            let stats = write_output(&a.output, |out| Ok(plan.write(&mut reader, out)?.stats))
                .map_err(fail)?;
            if !to_stdout {
                report_chrome(&stats, &a.output);
            }
            counts
        }
        Format::Perfetto => {
            let plan = TimelinePlan::read(&a.file, clock).with_context(reading)?;
            let counts = (plan.events_recorded, plan.events_lost);
            // Read on the thread that orders them (see `read_ordered`).
            let mut reader = RecordingReader::open(&a.file).with_context(reading)?;
            let stats = write_output(&a.output, |out| {
                Ok(write_perfetto(plan, &mut reader, out)?.stats)
            })
            .map_err(fail)?;
            if !to_stdout {
                report_perfetto(&stats, &a.output);
            }
            counts
        }
        Format::Pprof => {
            let profile = read_stacks(&a.file, clock, a.stacks)?;
            let stats = write_output(&a.output, |out| Ok(write_pprof(&*profile, out)?.stats))
                .map_err(fail)?;
            if !to_stdout {
                report_pprof(&stats, &a.output);
            }
            (
                profile.summary().events_recorded,
                profile.summary().events_lost,
            )
        }
        Format::Hatchet => {
            let profile = read_stacks(&a.file, clock, a.stacks)?;
            let stats = write_output(&a.output, |out| Ok(write_hatchet(&*profile, out)?.stats))
                .map_err(fail)?;
            if !to_stdout {
                report_hatchet(&stats, &a.output);
            }
            (
                profile.summary().events_recorded,
                profile.summary().events_lost,
            )
        }
        Format::Parquet => {
            if to_stdout {
                anyhow::bail!("--format parquet writes a directory of tables: -o - is not one");
            }
            out_dir(&a.output)?;
            // One pass: a recording that is none fails here, before OUT is made; one
            // broken further on fails mid-way, and what was written goes again.
            let mut reader = RecordingReader::open(&a.file).with_context(reading)?;
            let stats = write_parquet(&a.output, &mut reader, clock).map_err(|e| match e {
                ParquetFailure::Export(e) => fail(e),
                e @ ParquetFailure::Directory { .. } => anyhow::Error::new(e),
            })?;
            report_parquet(&stats, &a.output);
            (stats.events_recorded, stats.events_lost)
        }
        Format::Otf2 => {
            if to_stdout {
                anyhow::bail!("an OTF2 archive is a directory: give one with -o DIR, not -");
            }
            let plan = Otf2Plan::read(&a.file, clock).map_err(fail)?;
            let items = recording_items(&a.file).with_context(reading)?;
            let stats = write_archive(plan, items, &a.output).map_err(|e| match e {
                Otf2Error::Recording(e) => anyhow::Error::new(e).context(reading()),
                e => anyhow::Error::new(e).context(writing()),
            })?;
            report_otf2(&stats, &a.output);
            (stats.events_recorded, stats.events_lost)
        }
        Format::Folded | Format::Svg => {
            let profile = read_stacks(&a.file, clock, a.stacks)?;
            let svg = matches!(a.format, Format::Svg);
            let stats = write_output(&a.output, |out| {
                Ok(if svg {
                    write_flame_graph(&*profile, out)?.stats
                } else {
                    write_folded(&*profile, out)?.stats
                })
            })
            .map_err(fail)?;
            if !to_stdout {
                report_flame(&stats, &a.output);
            }
            (
                profile.summary().events_recorded,
                profile.summary().events_lost,
            )
        }
    };
    super::warn_probe_failures(&totals.probe_failures);
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
    let mut out = WriteBehind::new(file);
    let result = write(&mut out).and_then(|written| {
        session::sync_if_regular(&out.finish()?)?;
        Ok(written)
    });
    if result.is_err() {
        session::remove_partial(output);
    }
    result
}

/// Why the Parquet export failed: OUT is not a directory it may fill, or writing failed.
#[derive(Debug, thiserror::Error)]
enum ParquetFailure {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("{}: {what}", path.display())]
    Directory { path: PathBuf, what: String },
}

/// What OUT is, for the Parquet export: a directory of its own to fill.
enum OutDir {
    Missing,
    Empty,
}

/// Refuses an OUT that is not a new or an empty directory (before the recording is read,
/// so that the user hears of it at once).
fn out_dir(output: &Path) -> Result<OutDir, ParquetFailure> {
    let refuse = |what: String| ParquetFailure::Directory {
        path: output.to_path_buf(),
        what,
    };
    match std::fs::read_dir(output).map(|mut entries| entries.next().is_none()) {
        Ok(false) => Err(refuse(
            "exists and is not empty (the Parquet export writes a directory of its own)".into(),
        )),
        Ok(true) => Ok(OutDir::Empty),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(OutDir::Missing),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            Err(refuse("exists and is not a directory".into()))
        }
        Err(e) => Err(refuse(e.to_string())),
    }
}

/// Writes the tables into OUT: a new directory, or an empty one. A failure removes what
/// the export created, so that no partial table is left for a tool to misread.
fn write_parquet(
    output: &Path,
    reader: &mut RecordingReader,
    clock: ClockKind,
) -> Result<ParquetStats, ParquetFailure> {
    let owner = session::invoking_user();
    let created = matches!(out_dir(output)?, OutDir::Missing);
    if created {
        let refuse = |what: String| ParquetFailure::Directory {
            path: output.to_path_buf(),
            what,
        };
        std::fs::create_dir(output).map_err(|e| refuse(format!("cannot create: {e}")))?;
        if let Some(owner) = &owner {
            owner
                .chown(output)
                .map_err(|e| refuse(format!("cannot give to the invoking user: {e}")))?;
        }
    }
    let mut export = ParquetExport::new(output, owner.as_ref());
    let result = export.write(reader, clock);
    if result.is_err() {
        for f in &export.files {
            let _ = std::fs::remove_file(f);
        }
        if created {
            let _ = std::fs::remove_dir(output);
        }
    }
    Ok(result?)
}

/// Writes the OTF2 archive in `dir`, which must be new or empty: on failure what was
/// written goes again (the directory too, if this made it).
fn write_archive(
    plan: Otf2Plan,
    items: impl IntoIterator<Item = Result<Item, RecordingError>>,
    dir: &Path,
) -> Result<Otf2Stats, Otf2Error> {
    let existed = dir.exists();
    // libotf2 creates the files: made private (and given to the invoking user) after.
    let result = write_otf2(plan, items, dir).and_then(|stats| {
        session::make_tree_private(dir, session::invoking_user().as_ref())?;
        Ok(stats)
    });
    if let Err(Otf2Error::Library { .. } | Otf2Error::Io(_) | Otf2Error::Recording(_)) = &result {
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
    say!(
        "wrote {}: {} events in {} locations, {} regions, {} communicators; critical path {:.3} ms (metric \"critical path\")",
        out.display(),
        s.events,
        s.locations,
        s.regions,
        s.comms,
        ms(s.critical_path_ns),
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
        ms(s.critical_path_ns),
        s.critical_slices,
        if s.unclosed > 0 {
            format!("; {} calls or procedures never returned (not shown)", s.unclosed)
        } else {
            String::new()
        }
    );
}

fn report_perfetto(s: &PerfettoStats, out: &Path) {
    let t = &s.timeline;
    say!(
        "wrote {}: {} slices, {} flows (in {} slices of their own), {} processes, {} threads; critical path {:.3} ms in {} slices; {} sched switches ({} repaired), {} wakeups, {} counter values, {} threads named only by the scheduler{}",
        out.display(),
        t.slices,
        t.flows,
        t.flow_slices,
        t.processes,
        t.threads,
        ms(t.critical_path_ns),
        t.critical_slices,
        s.sched_switches,
        s.sched_repairs,
        s.sched_wakeups,
        s.counter_values,
        s.sched_only_threads,
        if t.unclosed > 0 {
            format!("; {} calls or procedures never returned (not shown)", t.unclosed)
        } else {
            String::new()
        }
    );
}

fn report_pprof(s: &PprofStats, out: &Path) {
    say!(
        "wrote {}: {} samples, {} functions; critical path {:.3} ms, work {:.3} ms",
        out.display(),
        s.samples,
        s.functions,
        ms(s.critical_path_ns),
        ms(s.work_ns),
    );
}

fn report_flame(s: &FlameStats, out: &Path) {
    say!(
        "wrote {}: {} stacks; critical path {:.3} ms",
        out.display(),
        s.stacks,
        ms(s.critical_path_ns),
    );
}

fn report_hatchet(s: &HatchetStats, out: &Path) {
    say!(
        "wrote {}: {} nodes, {} roots; critical path {:.3} ms, work {:.3} ms",
        out.display(),
        s.nodes,
        s.roots,
        ms(s.critical_path_ns),
        ms(s.work_ns),
    );
}

fn report_parquet(s: &ParquetStats, out: &Path) {
    let tables: Vec<String> = s
        .tables
        .iter()
        .map(|t| format!("{} {} rows", t.name, t.rows))
        .collect();
    say!(
        "wrote {}: {}; critical path {:.3} ms",
        out.display(),
        tables.join(", "),
        ms(s.critical_path_ns),
    );
}
