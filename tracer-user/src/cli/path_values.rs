//! `tracer path-values` (hidden, for the benchmark): what the next design across nodes
//! would send between them for a recording of several nodes (docs/multinode.md, "Scale";
//! `tracer_analysis::simulate_path_values`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tracer_analysis::recording::RecordingReader;
use tracer_analysis::simulate_path_values;
use tracer_user::Symbolizer;

use super::print::out;

#[derive(Args)]
pub(super) struct PathValuesArgs {
    /// A recording of several nodes (`tracer record --agent ... -o`, or `tracer merge`).
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: PathValuesArgs) -> anyhow::Result<ExitCode> {
    super::tell_condition(&a.file);
    let context = || format!("reading {}", a.file.display());
    let mut reader = RecordingReader::open(&a.file).with_context(context)?;
    if reader.meta.nodes().len() < 2 {
        anyhow::bail!(
            "{} is a recording of one node: no value would cross nodes",
            a.file.display()
        );
    }
    let traffic = simulate_path_values(&mut reader, Some(Box::new(Symbolizer::symbols_only())))
        .with_context(context)?;
    if a.json {
        out!("{}", serde_json::to_string_pretty(&traffic)?);
    } else {
        let t = &traffic;
        let records: Vec<String> = t.records_by_node.iter().map(u64::to_string).collect();
        out!(
            "records by node: {} in {:.3} s\n\
             dependencies: {}, {} of them between nodes (a path value each)\n\
             path values: {} bytes ({} procedures; the largest {} bytes), {} bytes as \
             differences\n\
             critical path: {:.3} ms",
            records.join(", "),
            t.span_ns as f64 / 1e9,
            t.dependencies,
            t.cross_node,
            t.value_bytes,
            t.procedures,
            t.value_bytes_max,
            t.delta_bytes,
            t.critical_path_ns as f64 / 1e6
        );
    }
    Ok(ExitCode::SUCCESS)
}
