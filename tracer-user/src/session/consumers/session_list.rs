//! The consumers a session's options ask for.

use std::path::Path;

use super::consumer::RecordConsumer;
use super::path::{LivePath, PathAfterTracing};
use super::recording::RecordingConsumer;
use super::stream::StreamConsumer;
use super::summary::SummaryConsumer;
use super::whatif::WhatIfConsumer;
use crate::session::{Analysis, RunAs, SessionError, StreamTo};
use tracer_analysis::online::{OnlineReplay, OnlineWhatIf};
use tracer_analysis::recording::RecordingMeta;
use tracer_analysis::workclock::ClockKind;

/// What the consumers are made from: the parts of the session's options they read.
pub(in crate::session) struct ConsumerOptions<'a> {
    /// The recording file (`-o`), if any.
    pub(in crate::session) output: Option<&'a Path>,
    /// Who owns the files written.
    pub(in crate::session) owner: Option<&'a RunAs>,
    pub(in crate::session) clock: ClockKind,
    pub(in crate::session) analysis: Analysis,
    /// Whether the probes sample stacks (the live profile then follows sampled functions).
    pub(in crate::session) sampling: bool,
    pub(in crate::session) whatif: Option<OnlineReplay>,
    /// An agent's session: its records go to the collector.
    pub(in crate::session) stream: Option<StreamTo>,
}

/// The consumers, in the order they finish: the recording first, so that it is complete
/// and closed before anything reads it back (`--analyze-after`), and before the analyses
/// that take time at the end.
pub(in crate::session) fn for_session(
    opts: ConsumerOptions,
    meta: &RecordingMeta,
) -> Result<Vec<Box<dyn RecordConsumer>>, SessionError> {
    // Checked before the recording is created: a refused session leaves no file.
    let path: Box<dyn RecordConsumer> = match (opts.analysis, opts.output) {
        (Analysis::Live, _) => Box::new(LivePath::new(opts.clock, opts.sampling)),
        (Analysis::AfterTracing, Some(path)) => Box::new(PathAfterTracing {
            path: path.to_path_buf(),
            clock: opts.clock,
        }),
        (Analysis::AfterTracing, None) => return Err(SessionError::AnalyzeAfterWithoutRecording),
    };
    let mut consumers: Vec<Box<dyn RecordConsumer>> = Vec::new();
    if let Some(output) = opts.output {
        consumers.push(Box::new(RecordingConsumer::create(
            output, meta, opts.owner,
        )?));
    }
    // An agent's last batch goes as soon as every record is in.
    if let Some(to) = opts.stream {
        consumers.push(Box::new(StreamConsumer::new(to.batches, to.clock)));
    }
    consumers.push(Box::new(SummaryConsumer::new(&meta.nodes)));
    consumers.push(path);
    if let Some(replay) = opts.whatif {
        consumers.push(Box::new(WhatIfConsumer::new(OnlineWhatIf::new(replay))));
    }
    Ok(consumers)
}
