//! Where decoded records go: process snapshots taken as the stream needs them, then
//! everything fanned out to the session's consumers (`consumers/`).

use super::consumers::{
    for_session, ConsumerOptions, ConsumerOutcome, CountsSoFar, RecordConsumer, SessionEnd,
};
use super::probing::Probing;
use super::processes::ProcessSnapshots;
use super::targets::Targets;
use super::{RecordOptions, SessionError};
use crate::probes::{this_node, ClockPair, ProbeError};
use tracer_analysis::calls::Flavor;
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::online::{OnlinePrediction, OnlineReplay};
use tracer_analysis::profile::Profile;
use tracer_analysis::recording::{FunctionProbe, LibraryInfo, RecordingMeta};
use tracer_analysis::records::Record;
use tracer_analysis::replay::ReplayError;
use tracer_analysis::summary::Summary;
use tracer_analysis::ProcessInfo;

pub(super) struct Sink {
    processes: ProcessSnapshots,
    /// In the order they finish ([`super::consumers::for_session`]).
    consumers: Vec<Box<dyn RecordConsumer>>,
    /// Records taken so far.
    pub(super) total: u64,
}

impl Sink {
    fn new(processes: ProcessSnapshots, consumers: Vec<Box<dyn RecordConsumer>>) -> Self {
        Sink {
            processes,
            consumers,
            total: 0,
        }
    }

    pub(super) fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        for c in &mut self.consumers {
            c.probe(probe)?;
        }
        Ok(())
    }

    /// Records what /proc says about a process the first time we see it.
    pub(super) fn see_process(&mut self, pid: u32) -> Result<(), SessionError> {
        match self.processes.first_look(pid) {
            Some(info) => self.process(&info),
            None => Ok(()),
        }
    }

    /// Records what /proc says about a process that mapped new code
    /// ([`ProcessSnapshots::new_code`]).
    pub(super) fn see_new_code(&mut self, pid: u32) -> Result<(), SessionError> {
        match self.processes.new_code(pid) {
            Some(info) => self.process(&info),
            None => Ok(()),
        }
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        for c in &mut self.consumers {
            c.process(info)?;
        }
        Ok(())
    }

    pub(super) fn record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        for info in self.processes.snapshots_before(rec) {
            self.process(&info)?;
        }
        self.total += 1;
        for c in &mut self.consumers {
            c.record(raw, rec)?;
        }
        Ok(())
    }

    /// Lets the consumers flush what waited long enough: called on every tick of the
    /// event loop; `failures` reads the probes' loss and failure counts, for those that
    /// write them.
    pub(super) fn flush_if_due(
        &mut self,
        mut failures: impl FnMut() -> Result<FailureCounts, ProbeError>,
    ) -> Result<(), SessionError> {
        let mut counts = CountsSoFar {
            events_total: self.total,
            failures: &mut failures,
        };
        for c in &mut self.consumers {
            c.flush_if_due(&mut counts)?;
        }
        Ok(())
    }

    /// The profile so far; None when the analysis waits for the end of tracing.
    pub(super) fn profile(&self, lost: u64) -> Option<Profile> {
        self.consumers.iter().find_map(|c| c.profile_so_far(lost))
    }

    pub(super) fn finish(self, failures: &FailureCounts) -> Result<SinkResults, SessionError> {
        let end = SessionEnd {
            events_total: self.total,
            failures,
        };
        let mut summary = None;
        let mut profile = None;
        let mut whatif = None;
        for c in self.consumers {
            match c.finish(&end)? {
                ConsumerOutcome::Recorded => {}
                ConsumerOutcome::Summary(s) => summary = Some(s),
                ConsumerOutcome::Profile(p) => profile = Some(p),
                ConsumerOutcome::WhatIf(w) => whatif = Some(w),
            }
        }
        Ok(SinkResults {
            summary: summary.expect("every session has a summary consumer (for_session)"),
            profile: profile.expect("every session has a critical path consumer (for_session)"),
            whatif,
        })
    }
}

/// What a session computed, once its sink has read every record.
pub(super) struct SinkResults {
    pub(super) summary: Summary,
    pub(super) profile: Profile,
    /// The online what-if prediction, when asked for.
    pub(super) whatif: Option<Result<OnlinePrediction, ReplayError>>,
}

impl Sink {
    /// The session's third stage: the recording's header, the consumers the options ask
    /// for, told of the procedure probes attached so far.
    pub(super) fn open(
        opts: &RecordOptions,
        whatif: Option<OnlineReplay>,
        targets: &Targets,
        probing: &Probing,
    ) -> Result<Sink, SessionError> {
        let start = ClockPair::now();
        let node = this_node(start);
        let meta = RecordingMeta {
            tracer_version: env!("CARGO_PKG_VERSION").to_string(),
            hostname: node.hostname.clone(),
            command: opts.command.clone(),
            pids: opts.pids.clone(),
            system_wide: targets.system_wide,
            start_unix_ns: start.unix_ns,
            start_monotonic_ns: start.monotonic_ns,
            libraries: probing.libs.infos(),
            nodes: vec![node],
        };
        let open_mpi: Vec<LibraryInfo> = meta
            .libraries
            .iter()
            .filter(|l| l.flavor == Flavor::OpenMpi)
            .cloned()
            .collect();
        let consumers = for_session(
            ConsumerOptions {
                output: opts.output.as_deref(),
                owner: opts.run_as.as_ref(),
                clock: opts.clock,
                analysis: opts.analysis,
                sampling: opts.sample_hz > 0,
                whatif,
            },
            &meta,
        )?;
        let mut sink = Sink::new(ProcessSnapshots::new(open_mpi), consumers);
        for p in &probing.attached_functions {
            sink.probe(p)?;
        }
        Ok(sink)
    }
}

#[cfg(test)]
mod tests {
    use super::{for_session, ConsumerOptions, ProcessSnapshots, Sink};
    use crate::session::Analysis;
    use tracer_analysis::failures::FailureCounts;
    use tracer_analysis::recording::{FunctionProbe, Item, RecordingMeta, RecordingReader};
    use tracer_analysis::workclock::ClockKind;

    #[test]
    fn a_probe_reaches_the_recording_and_each_consumer_gives_its_outcome() {
        let dir = std::env::temp_dir().join(format!("tracer-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.trace");
        let consumers = for_session(
            ConsumerOptions {
                output: Some(&path),
                owner: None,
                clock: ClockKind::Cpu,
                analysis: Analysis::AfterTracing,
                sampling: false,
                whatif: None,
            },
            &RecordingMeta::default(),
        )
        .unwrap();
        let mut sink = Sink::new(ProcessSnapshots::new(Vec::new()), consumers);
        let probe = FunctionProbe {
            id: 1,
            symbol: "work".into(),
            path: "/bin/program".into(),
            vaddr: 0x1000,
        };
        sink.probe(&probe).unwrap();
        sink.flush_if_due(|| Ok(FailureCounts::default())).unwrap();
        let results = sink.finish(&FailureCounts::default()).unwrap();
        assert_eq!(results.summary.events.total, 0);
        assert!(results.whatif.is_none());
        let mut reader = RecordingReader::open(&path).unwrap();
        assert_eq!(reader.next_item().unwrap(), Some(Item::Probe(probe)));
        assert_eq!(reader.next_item().unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
