//! Where the critical path is computed ([`Analysis`](crate::session::Analysis)): while
//! tracing, by the online engine, or once tracing ends, from the recording.

use std::collections::HashMap;
use std::path::PathBuf;

use super::consumer::{ConsumerOutcome, RecordConsumer, SessionEnd};
use crate::session::SessionError;
use crate::symbolize::Symbolizer;
use tracer_analysis::profile::Profile;
use tracer_analysis::recording::{FunctionProbe, Item, RecordingReader};
use tracer_analysis::records::Record;
use tracer_analysis::workclock::ClockKind;
use tracer_analysis::Pipeline;
use tracer_analysis::ProcessInfo;

/// The online engine, fed in timestamp order; its profile so far makes the live samples.
pub(super) struct LivePath {
    pipeline: Box<Pipeline>,
    clock: ClockKind,
    /// The command line of each process, as its profile names them.
    commands: HashMap<u32, String>,
}

impl LivePath {
    /// With `sampling`, the profile follows the hot sampled functions, named from the
    /// binaries' symbol tables (reading their debug information could hold the records
    /// up for a second; the report names inlined functions too).
    pub(super) fn new(clock: ClockKind, sampling: bool) -> Self {
        let mut pipeline = Box::new(Pipeline::new(clock));
        if sampling {
            pipeline
                .analyzer
                .follow_sampled_functions(Box::new(Symbolizer::symbols_only()));
        }
        LivePath {
            pipeline,
            clock,
            commands: HashMap::new(),
        }
    }
}

impl RecordConsumer for LivePath {
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        self.pipeline.item(&Item::Probe(probe.clone()));
        Ok(())
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        self.pipeline.item(&Item::Process(info.clone()));
        if !info.command.is_empty() {
            self.commands.insert(info.pid, info.command.clone());
        }
        Ok(())
    }

    fn record(&mut self, _raw: &[u8], record: &Record) -> Result<(), SessionError> {
        self.pipeline.record(record);
        Ok(())
    }

    /// Records still in the reorder window are not in it yet.
    fn profile_so_far(&self, lost: u64) -> Option<Profile> {
        Some(Profile::new(
            &self.pipeline.analyzer,
            self.clock,
            lost,
            &self.commands,
        ))
    }

    fn finish(mut self: Box<Self>, end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        let lost = end.failures.lost();
        let profile = Profile::new(self.pipeline.flush(), self.clock, lost, &self.commands);
        Ok(ConsumerOutcome::Profile(profile))
    }
}

/// `--analyze-after`: nothing while tracing; the profile of the recording at `path`, read
/// back once it is complete and closed (the recording's consumer finishes first).
pub(super) struct PathAfterTracing {
    pub(super) path: PathBuf,
    pub(super) clock: ClockKind,
}

impl RecordConsumer for PathAfterTracing {
    fn probe(&mut self, _probe: &FunctionProbe) -> Result<(), SessionError> {
        Ok(())
    }

    fn process(&mut self, _info: &ProcessInfo) -> Result<(), SessionError> {
        Ok(())
    }

    fn record(&mut self, _raw: &[u8], _record: &Record) -> Result<(), SessionError> {
        Ok(())
    }

    fn finish(self: Box<Self>, _end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        let read_back = |source| SessionError::ReadBack {
            path: self.path.clone(),
            source,
        };
        let mut reader = RecordingReader::open(&self.path).map_err(read_back)?;
        let profile = Profile::of_recording(
            &mut reader,
            self.clock,
            Some(Box::new(Symbolizer::symbols_only())),
        )
        .map_err(read_back)?;
        Ok(ConsumerOutcome::Profile(profile))
    }
}
