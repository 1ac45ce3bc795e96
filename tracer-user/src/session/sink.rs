//! Where decoded records go: the recording, the summary, the online critical path
//! engine and the online what-if replay.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};

use super::output::make_private;
use super::{Analysis, RunAs, SessionError};
use crate::probes::ProbeError;
use crate::target::{libraries, procfs};
use tracer_analysis::analysis::profile::Profile;
use tracer_analysis::analysis::workclock::ClockKind;
use tracer_analysis::analysis::Pipeline;
use tracer_analysis::format::failures::FailureCounts;
use tracer_analysis::format::recording::{
    Item, LibraryInfo, RecordingMeta, RecordingReader, RecordingWriter, Trailer,
};
use tracer_analysis::format::records::Record;
use tracer_analysis::format::summary::{Summary, SummaryBuilder};
use tracer_analysis::format::ProcessInfo;
use tracer_analysis::predict::online::{OnlinePrediction, OnlineWhatIf};
use tracer_analysis::predict::replay::ReplayError;

/// Where decoded records go: the recording file (if any) and the summary.
pub(super) struct Sink {
    writer: Option<RecordingWriter>,
    /// Open MPI libraries, to find each process's MPI_COMM_WORLD handle.
    open_mpi: Vec<LibraryInfo>,
    summary: SummaryBuilder,
    /// Where the critical path is computed.
    engine: PathEngine,
    /// The online what-if replay, fed the same items.
    pub(super) whatif: Option<OnlineWhatIf>,
    clock: ClockKind,
    commands: HashMap<u32, String>,
    /// Processes inspected and what was last recorded of each: looked up for every
    /// record (Fx: see `analysis`).
    seen: FxHashMap<u32, ProcessInfo>,
    inspected_after_mpi: FxHashSet<u32>,
    pub(super) total: u64,
    /// The probe failures of the last COUNTS chunk written.
    failures_written: BTreeMap<String, u64>,
}

impl Sink {
    pub(super) fn new(
        meta: &RecordingMeta,
        output: Option<&Path>,
        open_mpi: Vec<LibraryInfo>,
        clock: ClockKind,
        owner: Option<&RunAs>,
        analysis: Analysis,
    ) -> Result<Self, SessionError> {
        let engine = match (analysis, output) {
            (Analysis::Live, _) => PathEngine::Live(Box::new(Pipeline::new(clock))),
            (Analysis::AfterTracing, Some(path)) => PathEngine::AfterTracing(path.to_path_buf()),
            (Analysis::AfterTracing, None) => {
                return Err(SessionError::AnalyzeAfterWithoutRecording)
            }
        };
        let writer = match output {
            Some(p) => {
                let w = RecordingWriter::create(p, meta)?;
                make_private(p, owner)?;
                Some(w)
            }
            None => None,
        };
        Ok(Sink {
            open_mpi,
            writer,
            summary: SummaryBuilder::new(),
            engine,
            whatif: None,
            clock,
            commands: HashMap::new(),
            seen: FxHashMap::default(),
            inspected_after_mpi: FxHashSet::default(),
            total: 0,
            failures_written: BTreeMap::new(),
        })
    }

    pub(super) fn probe(
        &mut self,
        p: &tracer_analysis::format::recording::FunctionProbe,
    ) -> Result<(), SessionError> {
        self.summary.probe(p);
        if let PathEngine::Live(pipeline) = &mut self.engine {
            pipeline.item(&Item::Probe(p.clone()));
        }
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Probe(p.clone()));
        }
        if let Some(w) = &mut self.writer {
            w.probe(p)?;
        }
        Ok(())
    }

    /// Records what /proc says about a process the first time we see it.
    pub(super) fn see_process(&mut self, pid: u32) -> Result<(), SessionError> {
        if pid == 0 || self.seen.contains_key(&pid) {
            return Ok(());
        }
        self.inspect(pid, Earlier::Forget)
    }

    /// Records what /proc says about a process now, if it is still there: a process that
    /// exited before the reader got to its record has nothing left to say, and an empty
    /// snapshot would hide the one recorded before.
    fn refresh(&mut self, pid: u32, earlier: Earlier) -> Result<(), SessionError> {
        if procfs::is_alive(pid) {
            self.inspect(pid, earlier)?;
        }
        Ok(())
    }

    fn inspect(&mut self, pid: u32, earlier: Earlier) -> Result<(), SessionError> {
        let mut info = procfs::inspect(pid);
        log::debug!("pid {pid}: {} mapped files", info.mappings.len());
        // The reader may come to a record after its process began to exit (it reads
        // every 50 ms): /proc then shows part of the mappings or none.
        if let (Earlier::Keep, Some(before)) = (earlier, self.seen.get(&pid)) {
            info.keep_earlier(before);
        }
        info.mpi_world_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_world_handle(l, &info))
            .or(info.mpi_world_handle);
        info.mpi_self_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_self_handle(l, &info))
            .or(info.mpi_self_handle);
        self.summary.process(&info);
        if let PathEngine::Live(pipeline) = &mut self.engine {
            pipeline.item(&Item::Process(info.clone()));
        }
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Process(info.clone()));
        }
        if !info.command.is_empty() {
            self.commands.insert(info.pid, info.command.clone());
        }
        if let Some(w) = &mut self.writer {
            w.process(&info)?;
        }
        self.seen.insert(pid, info);
        Ok(())
    }

    pub(super) fn record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        let h = rec.header();
        if from_traced_thread(rec) {
            self.see_process(h.tgid)?;
        }
        match rec {
            // After exec the command line and mappings are new; at the first MPI/PVM call
            // the libraries are mapped (they were not yet at exec).
            Record::Exec(_) => {
                self.inspected_after_mpi.remove(&h.tgid);
                self.refresh(h.tgid, Earlier::Forget)?;
            }
            Record::CallEnter(c)
                if tracer_analysis::format::calls::is_mpi_or_pvm(
                    tracer_analysis::format::calls::split_call_field(c.header.call).id,
                ) && self.inspected_after_mpi.insert(h.tgid) =>
            {
                self.refresh(h.tgid, Earlier::Keep)?
            }
            _ => {}
        }
        self.total += 1;
        self.summary.record(rec);
        if let PathEngine::Live(pipeline) = &mut self.engine {
            pipeline.record(rec);
        }
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Record(rec.clone()));
        }
        if let Some(w) = &mut self.writer {
            w.record(raw)?;
        }
        Ok(())
    }

    /// Hands the recording's buffered chunks to the kernel if they waited long enough
    /// (`RecordingWriter::flush_if_due`): called on every tick of the event loop. Before
    /// such a flush, if the probes lost or failed more since the last one, the totals so
    /// far go first (`failures` reads them), so that a recording cut short says what was
    /// lost before the cut.
    pub(super) fn flush_if_due(
        &mut self,
        failures: impl FnOnce() -> Result<FailureCounts, ProbeError>,
    ) -> Result<(), SessionError> {
        let Some(w) = &mut self.writer else {
            return Ok(());
        };
        if w.flush_due() {
            let failures = failures()?;
            let named = failures.named();
            if named != self.failures_written {
                w.counts(&Trailer {
                    events_total: self.total,
                    events_lost: failures.lost(),
                    probe_failures: named.clone(),
                })?;
                self.failures_written = named;
            }
        }
        w.flush_if_due()?;
        Ok(())
    }

    /// The profile so far (records still in the reorder window are not in it yet); None
    /// when the analysis waits for the end of tracing.
    pub(super) fn profile(&self, lost: u64) -> Option<Profile> {
        let PathEngine::Live(pipeline) = &self.engine else {
            return None;
        };
        Some(Profile::new(
            &pipeline.analyzer,
            self.clock,
            lost,
            &self.commands,
        ))
    }

    pub(super) fn finish(mut self, failures: &FailureCounts) -> Result<SinkResults, SessionError> {
        let lost = failures.lost();
        let whatif = self.whatif.take().map(OnlineWhatIf::finish);
        if let Some(w) = self.writer {
            w.finish(&Trailer {
                events_total: self.total,
                events_lost: lost,
                probe_failures: failures.named(),
            })?;
        }
        // The recording is complete and closed before it is read back.
        let profile = match &mut self.engine {
            PathEngine::Live(pipeline) => {
                Profile::new(pipeline.flush(), self.clock, lost, &self.commands)
            }
            PathEngine::AfterTracing(path) => after_tracing(path, self.clock)?,
        };
        let mut summary = self.summary.finish(lost);
        summary.events.failures = failures.named();
        Ok(SinkResults {
            summary,
            profile,
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

/// Where the critical path is computed ([`Analysis`]).
enum PathEngine {
    /// The online engine, fed in timestamp order.
    Live(Box<Pipeline>),
    /// Once tracing ends, from the recording at this path (`--analyze-after`).
    AfterTracing(PathBuf),
}

/// The profile of the finished recording at `path`, read back.
fn after_tracing(path: &Path, clock: ClockKind) -> Result<Profile, SessionError> {
    let read_back = |source| SessionError::ReadBack {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = RecordingReader::open(path).map_err(read_back)?;
    Profile::of_recording(&mut reader, clock).map_err(read_back)
}

/// Whether a new snapshot of a process keeps what the last one saw and it no longer
/// does: yes while it runs one program, no after it execs another.
#[derive(Clone, Copy)]
enum Earlier {
    Keep,
    Forget,
}

/// Whether a record's header is a traced thread (the waker of a wakeup may be untraced;
/// a switch-in record's header is the thread that leaves the CPU).
pub(super) fn from_traced_thread(rec: &Record) -> bool {
    !matches!(
        rec,
        Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
    )
}
