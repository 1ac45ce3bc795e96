//! The recording file as a consumer: every item written, buffered chunks handed to the
//! kernel within about a second, and the loss and failure counts written as they change.

use std::collections::BTreeMap;
use std::path::Path;

use super::consumer::{ConsumerOutcome, CountsSoFar, RecordConsumer, SessionEnd};
use crate::session::output::make_private;
use crate::session::{RunAs, SessionError};
use tracer_analysis::recording::{FunctionProbe, RecordingMeta, RecordingWriter, Trailer};
use tracer_analysis::records::Record;
use tracer_analysis::ProcessInfo;

pub(super) struct RecordingConsumer {
    writer: RecordingWriter,
    /// The probe failures of the last COUNTS chunk written.
    failures_written: BTreeMap<String, u64>,
}

impl RecordingConsumer {
    /// Creates the recording at `path`, owned by `owner` if given, readable by no one
    /// else.
    pub(super) fn create(
        path: &Path,
        meta: &RecordingMeta,
        owner: Option<&RunAs>,
    ) -> Result<Self, SessionError> {
        let writer = RecordingWriter::create(path, meta)?;
        make_private(path, owner)?;
        Ok(RecordingConsumer {
            writer,
            failures_written: BTreeMap::new(),
        })
    }
}

impl RecordConsumer for RecordingConsumer {
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        Ok(self.writer.probe(probe)?)
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        Ok(self.writer.process(info)?)
    }

    fn record(&mut self, raw: &[u8], _record: &Record) -> Result<(), SessionError> {
        Ok(self.writer.record(raw)?)
    }

    /// Hands the recording's buffered chunks to the kernel if they waited long enough
    /// (`RecordingWriter::flush_if_due`). Before such a flush, if the probes lost or
    /// failed more since the last one, the totals so far go first, so that a recording
    /// cut short says what was lost before the cut.
    fn flush_if_due(&mut self, counts: &mut CountsSoFar) -> Result<(), SessionError> {
        if self.writer.flush_due() {
            let failures = (counts.failures)()?;
            let named = failures.named();
            if named != self.failures_written {
                self.writer.counts(&Trailer {
                    events_total: counts.events_total,
                    events_lost: failures.lost(),
                    probe_failures: named.clone(),
                })?;
                self.failures_written = named;
            }
        }
        self.writer.flush_if_due()?;
        Ok(())
    }

    fn finish(self: Box<Self>, end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        self.writer.finish(&Trailer {
            events_total: end.events_total,
            events_lost: end.failures.lost(),
            probe_failures: end.failures.named(),
        })?;
        Ok(ConsumerOutcome::Recorded)
    }
}
