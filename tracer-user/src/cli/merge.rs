//! `tracer merge`: recordings made on each node of a job, one recording of the job
//! (docs/multinode.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tracer_analysis::merge;

use super::print::say;

#[derive(Args)]
pub(super) struct MergeArgs {
    /// Recordings of one node each (`tracer record -o` on every node of the job); the
    /// first is node 0, whose clock the merged recording's times are on.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// The merged recording.
    #[arg(short, long)]
    output: PathBuf,
}

pub(super) fn run(a: MergeArgs) -> anyhow::Result<ExitCode> {
    if a.files.contains(&a.output) {
        anyhow::bail!(
            "{} is an input: write the merged recording to another file",
            a.output.display()
        );
    }
    let merged = merge::merge(&a.files, &a.output)?;
    for input in &merged.inputs {
        for m in input.condition.messages() {
            say!("tracer: warning: {}: {m}", input.path.display());
        }
    }
    let hosts: Vec<&str> = merged.nodes.iter().map(|n| n.hostname.as_str()).collect();
    say!(
        "tracer: merged {} recordings ({} nodes: {}) into {}: {} events",
        a.files.len(),
        merged.nodes.len(),
        hosts.join(", "),
        a.output.display(),
        merged.events
    );
    super::warn_probe_failures(&merged.trailer.probe_failures);
    super::warn_lost(merged.trailer.events_total, merged.trailer.events_lost);
    Ok(ExitCode::SUCCESS)
}
