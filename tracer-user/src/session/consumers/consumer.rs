//! What a consumer of the record stream is told, and what it gives back at the end.

use crate::probes::ProbeError;
use crate::session::SessionError;
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::online::OnlinePrediction;
use tracer_analysis::profile::Profile;
use tracer_analysis::recording::FunctionProbe;
use tracer_analysis::records::Record;
use tracer_analysis::replay::ReplayError;
use tracer_analysis::summary::Summary;
use tracer_analysis::ProcessInfo;

/// One reader of the stream the sink fans out, in the order the session sees it: a probe
/// attached, what /proc says of a process, a record (decoded and lowered).
pub(in crate::session) trait RecordConsumer {
    /// A procedure probe attached (`--func`, before tracing or as programs start).
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError>;

    /// A snapshot of a process, taken the first time a record names it, after it execs
    /// and at its first MPI/PVM call.
    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError>;

    /// A record, with the bytes it was decoded from (what a recording holds).
    fn record(&mut self, raw: &[u8], record: &Record) -> Result<(), SessionError>;

    /// Called on every tick of the event loop: a consumer that buffers hands on what
    /// waited long enough, so that a tracer killed now leaves little behind.
    fn flush_if_due(&mut self, _counts: &mut CountsSoFar) -> Result<(), SessionError> {
        Ok(())
    }

    /// The critical path profile so far, for live samples, from a consumer that computes
    /// it while tracing.
    fn profile_so_far(&self, _lost: u64) -> Option<Profile> {
        None
    }

    /// Every record is in: what the consumer made of them.
    fn finish(self: Box<Self>, end: &SessionEnd) -> Result<ConsumerOutcome, SessionError>;
}

/// The session's counts on a tick: the records the sink took so far, and how often the
/// probes lost or failed, read from the kernel only when a consumer asks (a walk of
/// per-CPU maps).
pub(in crate::session) struct CountsSoFar<'a> {
    pub(in crate::session) events_total: u64,
    /// When the last read of the probes' buffers started: the session has every record
    /// written before then (within the analysis's reorder window).
    pub(in crate::session) read_up_to_ns: u64,
    pub(in crate::session) failures: &'a mut dyn FnMut() -> Result<FailureCounts, ProbeError>,
}

/// The session's counts once tracing ended.
pub(in crate::session) struct SessionEnd<'a> {
    pub(in crate::session) events_total: u64,
    pub(in crate::session) failures: &'a FailureCounts,
}

/// What one consumer made of the stream.
pub(in crate::session) enum ConsumerOutcome {
    /// The recording is complete and closed on disk.
    Recorded,
    Summary(Summary),
    /// The critical path profile.
    Profile(Profile),
    /// The online what-if prediction.
    WhatIf(Result<OnlinePrediction, ReplayError>),
}
