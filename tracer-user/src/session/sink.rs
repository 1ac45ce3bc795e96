//! Where decoded records go: process snapshots taken as the stream needs them, then
//! everything fanned out to the session's consumers (`consumers/`).

use super::consumers::{
    for_session, ConsumerOptions, ConsumerOutcome, CountsSoFar, RecordConsumer, SessionEnd,
};
use super::probing::Probing;
use super::processes::ProcessSnapshots;
use super::targets::Targets;
use super::{RecordOptions, SessionError, StreamTo};
use crate::probes::{monotonic_ns, this_node, ClockPair, ProbeError};
use tracer_analysis::calls::Flavor;
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::live_merge::LiveMerge;
use tracer_analysis::node::NodeInfo;
use tracer_analysis::online::{OnlinePrediction, OnlineReplay};
use tracer_analysis::profile::Profile;
use tracer_analysis::recording::{FunctionProbe, Item, LibraryInfo, RecordingMeta};
use tracer_analysis::records::Record;
use tracer_analysis::replay::ReplayError;
use tracer_analysis::summary::Summary;
use tracer_analysis::ProcessInfo;

/// This node's number among the nodes of a job (the node table's first row).
pub(super) const THIS_NODE: usize = 0;

/// How long the merge waits for a node whose records are late (docs/multinode.md): past
/// it, a link that stalls holds the others' records back no longer, and the merge holds
/// at most this much of the job's records (within the tracer's memory bound). Long
/// enough for a link down 2 s and TCP's retransmission after it (up to twice as long).
const NODE_LAG: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) struct Sink {
    processes: ProcessSnapshots,
    /// The records of every node of a job across nodes made one stream (node 0: this
    /// one's); None on one machine, where records go on at once.
    nodes: Option<LiveMerge>,
    /// In the order they finish ([`super::consumers::for_session`]).
    consumers: Vec<Box<dyn RecordConsumer>>,
    /// Records taken so far.
    pub(super) total: u64,
    /// When the event loop's last drain of this node's probes started: every record
    /// written before then has been taken (within the reorder window).
    read_up_to_ns: u64,
    /// The first job a process handed on named (its launcher's: `procfs::job`), which a
    /// collector tells its agents.
    pub(super) job: Option<String>,
}

impl Sink {
    fn new(processes: ProcessSnapshots, consumers: Vec<Box<dyn RecordConsumer>>) -> Self {
        Sink {
            processes,
            nodes: None,
            consumers,
            total: 0,
            read_up_to_ns: 0,
            job: None,
        }
    }

    pub(super) fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        if let Some(m) = &mut self.nodes {
            m.push(THIS_NODE, Item::Probe(probe.clone()));
            return Ok(());
        }
        self.hand_on_probe(probe)
    }

    fn hand_on_probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
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
        if let Some(m) = &mut self.nodes {
            m.push(THIS_NODE, Item::Process(info.clone()));
            return Ok(());
        }
        self.hand_on_process(info)
    }

    fn hand_on_process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        if self.job.is_none() {
            self.job.clone_from(&info.env_job);
        }
        for c in &mut self.consumers {
            c.process(info)?;
        }
        Ok(())
    }

    pub(super) fn record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        for info in self.processes.snapshots_before(rec) {
            self.process(&info)?;
        }
        if let Some(m) = &mut self.nodes {
            m.push(THIS_NODE, Item::Record(rec.clone()));
            return Ok(());
        }
        self.hand_on_record(raw, rec)
    }

    fn hand_on_record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        self.total += 1;
        for c in &mut self.consumers {
            c.record(raw, rec)?;
        }
        Ok(())
    }

    /// Makes the sink merge the records of `remote` more nodes with this one's
    /// (`LiveMerge`), each waited for at most `max_lag`.
    pub(super) fn merge_nodes(&mut self, remote: usize, max_lag: std::time::Duration) {
        self.nodes = Some(LiveMerge::new(
            1 + remote,
            max_lag.as_nanos() as u64,
            monotonic_ns(),
        ));
    }

    /// An item of node `node` (1 and up: another node's, already relocated; docs/multinode.md).
    pub(super) fn take_from_node(&mut self, node: usize, item: Item) {
        if let Some(m) = &mut self.nodes {
            m.push(node, item);
        }
    }

    /// Node `node` sent every record up to `watermark_ns` (this node's clock); for this
    /// node, the event loop's drain that started then.
    pub(super) fn node_read_up_to(&mut self, node: usize, watermark_ns: u64) {
        if node == THIS_NODE {
            self.read_up_to_ns = watermark_ns;
        }
        if let Some(m) = &mut self.nodes {
            m.advance(node, watermark_ns);
        }
    }

    /// Nothing more comes from node `node`.
    pub(super) fn node_closed(&mut self, node: usize) {
        if let Some(m) = &mut self.nodes {
            m.close(node);
        }
    }

    /// Hands on what every node is past (`all`: everything, once the nodes are done).
    pub(super) fn release(&mut self, all: bool) -> Result<(), SessionError> {
        let Some(m) = &mut self.nodes else {
            return Ok(());
        };
        let mut ready = Vec::new();
        if all {
            m.flush(|i| ready.push(i));
        } else {
            m.ready(|i| ready.push(i));
        }
        for item in ready {
            match item {
                Item::Record(r) => self.hand_on_record(r.as_bytes(), &r)?,
                Item::Process(p) => self.hand_on_process(&p)?,
                Item::Probe(p) => self.hand_on_probe(&p)?,
            }
        }
        Ok(())
    }

    /// Records of other nodes that came after a later record had gone on (the merge's
    /// lag bound let a lagging node go).
    pub(super) fn late_records(&self) -> u64 {
        self.nodes.as_ref().map_or(0, LiveMerge::late)
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
            read_up_to_ns: self.read_up_to_ns,
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

    pub(super) fn finish(mut self, failures: &FailureCounts) -> Result<SinkResults, SessionError> {
        self.release(true)?;
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
    /// for, told of the procedure probes attached so far. `other_nodes`: the agents' nodes
    /// whose records join this one's (a collector's), in the node table's order after it.
    pub(super) fn open(
        opts: &RecordOptions,
        whatif: Option<OnlineReplay>,
        targets: &Targets,
        probing: &Probing,
        other_nodes: &[NodeInfo],
        stream: Option<StreamTo>,
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
            nodes: std::iter::once(node)
                .chain(other_nodes.iter().cloned())
                .collect(),
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
                stream,
            },
            &meta,
        )?;
        let mut sink = Sink::new(ProcessSnapshots::new(open_mpi), consumers);
        if !other_nodes.is_empty() {
            sink.merge_nodes(other_nodes.len(), NODE_LAG);
        }
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

    /// A sink whose consumers write a recording to `path`, and the analysis `analysis`.
    fn recording_to(path: &std::path::Path, analysis: Analysis) -> Sink {
        let consumers = for_session(
            ConsumerOptions {
                output: Some(path),
                owner: None,
                clock: ClockKind::Cpu,
                analysis,
                sampling: false,
                whatif: None,
                stream: None,
            },
            &RecordingMeta::default(),
        )
        .unwrap();
        Sink::new(ProcessSnapshots::new(Vec::new()), consumers)
    }

    #[test]
    fn another_nodes_records_join_this_ones_in_time_order() {
        use crate::probes::monotonic_ns;
        use tracer_analysis::records::Record;
        use tracer_common::{kind, EventHeader, SwitchRecord};
        let dir = std::env::temp_dir().join(format!("tracer-sink-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("job.trace");
        let mut sink = recording_to(&path, Analysis::Live);
        let t0 = monotonic_ns();
        sink.merge_nodes(1, std::time::Duration::from_secs(10));
        // Switch-ins: records that name no process for /proc to be read about.
        let switch_in = |tgid: u32, ts_ns: u64| {
            Record::SwitchIn(SwitchRecord {
                header: EventHeader {
                    kind: kind::SWITCH_IN,
                    ts_ns,
                    tgid,
                    tid: tgid,
                    ..Default::default()
                },
                prev_state: 0,
            })
        };
        let ms = 1_000_000;
        let here = switch_in(7, t0 + 100 * ms);
        let there = switch_in((1 << 22) | 7, t0 + 50 * ms);
        sink.record(here.as_bytes(), &here).unwrap();
        sink.take_from_node(1, Item::Record(there.clone()));
        sink.node_read_up_to(super::THIS_NODE, t0 + 200 * ms);
        sink.release(false).unwrap();
        assert_eq!(
            sink.total, 0,
            "node 1 may still send a record before 100 ms"
        );
        sink.node_read_up_to(1, t0 + 300 * ms);
        sink.release(false).unwrap();
        assert_eq!(sink.total, 2);
        sink.finish(&FailureCounts::default()).unwrap();
        let mut reader = RecordingReader::open(&path).unwrap();
        assert_eq!(reader.next_item().unwrap(), Some(Item::Record(there)));
        assert_eq!(reader.next_item().unwrap(), Some(Item::Record(here)));
        assert_eq!(reader.next_item().unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_probe_reaches_the_recording_and_each_consumer_gives_its_outcome() {
        let dir = std::env::temp_dir().join(format!("tracer-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.trace");
        let mut sink = recording_to(&path, Analysis::AfterTracing);
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
