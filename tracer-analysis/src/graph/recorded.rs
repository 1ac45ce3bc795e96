//! The program activity graph of a recording. [`GraphModel`] is the analysis's other
//! [`PathModel`]: where the online engine folds each dependency into path lengths at
//! once, it keeps the events and arcs. It sees the same calls in the same order, so the
//! longest path of its graph is the online engine's critical path.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use tracer_common::EventHeader;

use super::{ArcKind, ContextId, Graph, GraphBuilder, Vertex, VertexId, NO_PROCEDURE};
use crate::analysis::faults::Killed;
use crate::analysis::matcher::MatchStats;
use crate::analysis::ordered::{read_ordered, Ordered};
use crate::analysis::workclock::ClockKind;
use crate::analysis::{Analyzer, Clocks, Milestone, PathModel, Pipeline};
#[cfg(test)]
use crate::format::recording::ItemIter;
use crate::format::recording::{Item, ItemSource, RecordingError, Trailer};
use crate::format::records::Record;
use crate::format::samples::SampleLog;

/// Which operation made a thread's latest vertex, at which record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Made {
    Cut,
    Snapshot,
    Merge,
}

pub(crate) struct ThreadTrack {
    cur: VertexId,
    made: Made,
    /// Serial number of the record that made `cur`.
    made_at: u64,
    /// Work since `cur`.
    pending: u64,
    /// The thread's CPU clock (raw, `cpu_ns`) at its latest record.
    cpu_ns: u64,
    last_work: u64,
    /// Selected procedures active, innermost last.
    stack: Vec<usize>,
    context: ContextId,
}

/// Builds the graph from the analysis's calls (see [`PathModel`]).
pub(crate) struct GraphModel {
    b: GraphBuilder,
    /// Live threads. This map and `message_arcs` are hashed with Fx, not SipHash: they
    /// are used per record and per message (5 % of an export's samples with SipHash).
    pub(crate) threads: FxHashMap<u32, ThreadTrack>,
    /// Last vertex of every ended thread, and whether its process is a participant.
    ended: Vec<(VertexId, bool)>,
    /// The record being analysed: its stamp and serial number.
    at: EventHeader,
    serial: u64,
    /// With [`Self::with_clocks`] only (the what-if replay is their one reader): the
    /// dependency arcs that are messages or collectives, with their bytes when known. An
    /// insert per matched message was 4-5 % of an export's first pass.
    message_arcs: FxHashMap<(VertexId, VertexId), Option<u64>>,
    milestones: Vec<VertexMilestone>,
    /// With [`Self::with_clocks`]: every clock per thread (latest, and pending since the
    /// thread's latest vertex), and per vertex the clocks of its program arc.
    clock_log: Option<ClockLog>,
    /// Per vertex, its thread's CPU clock (raw) there: where sampled stacks fall on the
    /// thread's program arcs (`graph::attribution`). 0 for the source and the sink.
    vertex_cpu: Vec<u64>,
}

#[derive(Default)]
struct ClockLog {
    threads: FxHashMap<u32, (Clocks, Clocks)>,
    per_vertex: Vec<Clocks>,
}

impl Default for GraphModel {
    fn default() -> Self {
        Self::new()
    }
}

fn label(h: &EventHeader) -> u32 {
    ((h.kind as u32) << 16) | h.call as u32
}

impl GraphModel {
    pub(crate) fn new() -> Self {
        GraphModel {
            b: GraphBuilder::new(),
            threads: FxHashMap::default(),
            ended: Vec::new(),
            at: EventHeader::default(),
            serial: 0,
            message_arcs: FxHashMap::default(),
            milestones: Vec::new(),
            clock_log: None,
            vertex_cpu: Vec::new(),
        }
    }

    /// A model that also keeps, per vertex, the work on every clock (cpu, awake, wall)
    /// and the raw clocks of the program arc that ends there, and the arcs that are
    /// messages (for the what-if replay).
    pub(crate) fn with_clocks() -> Self {
        GraphModel {
            clock_log: Some(ClockLog::default()),
            ..Self::new()
        }
    }

    /// A new vertex for the current record on thread `tid`, after the work pending.
    fn cut(&mut self, tid: u32, made: Made) -> VertexId {
        let v = self.b.add_vertex(Vertex {
            ts_ns: self.at.ts_ns,
            tid,
            label: label(&self.at),
        });
        if let Some(log) = &mut self.clock_log {
            let pending = log.threads.get_mut(&tid).map(|p| std::mem::take(&mut p.1));
            log.per_vertex.resize(v as usize + 1, Clocks::default());
            log.per_vertex[v as usize] = pending.unwrap_or_default();
        }
        let t = self.threads.get_mut(&tid).expect("thread advanced first");
        set_vertex_cpu(&mut self.vertex_cpu, v, t.cpu_ns);
        self.b
            .add_arc(t.cur, v, t.pending, t.context, ArcKind::Program);
        t.cur = v;
        t.made = made;
        t.made_at = self.serial;
        t.pending = 0;
        v
    }

    fn set_context(&mut self, tid: u32) {
        let id = self.b.context_of(&self.threads[&tid].stack);
        self.threads.get_mut(&tid).unwrap().context = id;
    }

    /// Vertices where a process's parallel section begins or ends.
    pub(crate) fn milestones(&self) -> &[VertexMilestone] {
        &self.milestones
    }

    /// Ends the graph: the last events of live threads for which `counts` holds, and of
    /// ended threads of participant processes (of any process without participants), may
    /// end the critical path. With the graph, per vertex the clocks of the program arc
    /// ending there (empty without [`Self::with_clocks`]).
    pub(crate) fn finish_with_clocks(
        mut self,
        only_participants: bool,
        counts: &dyn Fn(u32) -> bool,
    ) -> FinishedGraph {
        let mut live: Vec<u32> = self.threads.keys().copied().collect();
        live.sort_unstable();
        for tid in live {
            let t = &self.threads[&tid];
            // Work after a thread's last record is stamped with the last record seen.
            let v = if t.pending > 0 {
                self.cut(tid, Made::Cut)
            } else {
                t.cur
            };
            if counts(tid) {
                self.b.mark_end(v);
            }
        }
        for &(v, participant) in &self.ended {
            if participant || !only_participants {
                self.b.mark_end(v);
            }
        }
        let clocks = self
            .clock_log
            .take()
            .map(|l| l.per_vertex)
            .unwrap_or_default();
        let graph = self.b.finish();
        self.vertex_cpu.resize(graph.vertex_count(), 0);
        FinishedGraph {
            graph,
            vertex_clocks: clocks,
            vertex_cpu: self.vertex_cpu,
        }
    }
}

fn set_vertex_cpu(vertex_cpu: &mut Vec<u64>, v: VertexId, cpu_ns: u64) {
    vertex_cpu.resize(v as usize + 1, 0);
    vertex_cpu[v as usize] = cpu_ns;
}

/// A graph ended, and per vertex the clocks of the program arc ending there.
pub(crate) struct FinishedGraph {
    pub(crate) graph: Graph,
    pub(crate) vertex_clocks: Vec<Clocks>,
    pub(crate) vertex_cpu: Vec<u64>,
}

impl PathModel for GraphModel {
    type Mark = VertexId;

    fn set_procedures(&mut self, _n: usize) {}

    fn all_clocks(&self) -> bool {
        self.clock_log.is_some()
    }

    fn advance_clocks(&mut self, tid: u32, work: u64, clocks: &Clocks, at: &EventHeader) {
        if let Some(log) = &mut self.clock_log {
            let (last, pending) = log
                .threads
                .entry(tid)
                .or_insert((*clocks, Clocks::default()));
            pending.add_since(last, clocks);
        }
        self.advance(tid, work, at);
    }

    fn advance(&mut self, tid: u32, work: u64, at: &EventHeader) {
        self.at = *at;
        self.serial += 1;
        if let Some(t) = self.threads.get_mut(&tid) {
            t.pending += work.saturating_sub(t.last_work);
            t.last_work = t.last_work.max(work);
            t.cpu_ns = t.cpu_ns.max(at.cpu_ns);
            return;
        }
        // A thread's path starts at its first event (tracing may begin mid-run).
        let v = self.b.add_vertex(Vertex {
            ts_ns: at.ts_ns,
            tid,
            label: label(at),
        });
        set_vertex_cpu(&mut self.vertex_cpu, v, at.cpu_ns);
        self.threads.insert(
            tid,
            ThreadTrack {
                cur: v,
                made: Made::Cut,
                made_at: self.serial,
                pending: 0,
                cpu_ns: at.cpu_ns,
                last_work: work,
                stack: Vec::new(),
                context: NO_PROCEDURE,
            },
        );
    }

    fn enter(&mut self, tid: u32, p: usize) {
        self.cut(tid, Made::Cut);
        self.threads.get_mut(&tid).unwrap().stack.push(p);
        self.set_context(tid);
    }

    fn exit(&mut self, tid: u32, p: usize) {
        let t = self.threads.get_mut(&tid).unwrap();
        // A procedure entered before tracing began exits without an entry: ignore it.
        let Some(i) = t.stack.iter().rposition(|&q| q == p) else {
            return;
        };
        self.cut(tid, Made::Cut);
        self.threads.get_mut(&tid).unwrap().stack.remove(i);
        self.set_context(tid);
    }

    fn snapshot(&mut self, tid: u32) -> VertexId {
        let t = &self.threads[&tid];
        if t.made_at == self.serial && t.pending == 0 && t.made != Made::Cut {
            let v = t.cur;
            self.threads.get_mut(&tid).unwrap().made = Made::Snapshot;
            return v;
        }
        self.cut(tid, Made::Snapshot)
    }

    fn merge(&mut self, tid: u32, incoming: &VertexId) {
        let t = &self.threads[&tid];
        // Several dependencies of one event (a collective's exit) share its vertex, as
        // long as nothing depends on that vertex yet.
        let v = if t.made == Made::Merge && t.made_at == self.serial && t.pending == 0 {
            t.cur
        } else {
            self.cut(tid, Made::Merge)
        };
        if *incoming < v {
            self.b
                .add_arc(*incoming, v, 0, NO_PROCEDURE, ArcKind::Dependency);
        }
    }

    fn merge_message(&mut self, tid: u32, incoming: &VertexId, bytes: Option<u64>) {
        self.merge(tid, incoming);
        let v = self.threads[&tid].cur;
        if *incoming < v && self.clock_log.is_some() {
            self.message_arcs.insert((*incoming, v), bytes);
        }
    }

    fn milestone(&mut self, tid: u32, m: Milestone) {
        let v = self.cut(tid, Made::Cut);
        self.milestones.push(VertexMilestone {
            vertex: v,
            milestone: m,
        });
    }

    fn end_thread(&mut self, tid: u32, participant: bool) {
        if !self.threads.contains_key(&tid) {
            return;
        }
        let v = self.cut(tid, Made::Cut);
        self.threads.remove(&tid);
        if let Some(log) = &mut self.clock_log {
            log.threads.remove(&tid);
        }
        self.ended.push((v, participant));
    }

    fn threads_held(&self) -> usize {
        self.threads.len()
    }
}

/// A process as the reports name it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ProcessLabel {
    pub pid: u32,
    pub command: String,
    pub rank: Option<i32>,
}

/// A vertex where a process's parallel section begins or ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VertexMilestone {
    pub vertex: VertexId,
    pub milestone: Milestone,
}

/// A recording's graph and what the reports need to name its parts.
pub struct RecordedGraph {
    pub graph: Graph,
    pub clock: ClockKind,
    /// Selected procedures' names (demangled), by `ProcId`.
    pub procedures: Vec<String>,
    /// Selected procedures' symbols as the binaries have them, by `ProcId`.
    pub procedure_symbols: Vec<String>,
    /// Process of every thread seen.
    /// Looked up per arc and per flow by the exports (Fx: SipHash was 1-2 % of theirs).
    pub thread_pids: FxHashMap<u32, u32>,
    pub processes: HashMap<u32, ProcessLabel>,
    /// Processes of the program (they call MPI/PVM or a selected procedure), sorted.
    pub participants: Vec<u32>,
    pub messages: MatchStats,
    /// Processes a signal killed, in order of death, named.
    pub killed: Vec<Killed>,
    /// With [`Self::read_with_clocks`]: the dependency arcs that are messages or
    /// collectives (`(from, to)`), with their bytes when known (what a network cost
    /// table applies to).
    pub message_arcs: FxHashMap<(VertexId, VertexId), Option<u64>>,
    /// Vertices where a process's parallel section begins (MPI_Init returns) or ends
    /// (MPI_Finalize is called).
    pub milestones: Vec<VertexMilestone>,
    /// With [`Self::read_with_clocks`]: per vertex, the work on every clock and the raw
    /// clocks of the program arc ending there (see [`GraphModel::with_clocks`]).
    pub vertex_clocks: Vec<Clocks>,
    /// Per vertex, its thread's CPU clock (raw `cpu_ns`) at its event; 0 for the source
    /// and the sink.
    pub vertex_cpu: Vec<u64>,
    /// The sampled call stacks of the recording (SAMPLE records), kept aside as read:
    /// they are no events of the graph ([`crate::graph::attribution`]).
    pub samples: SampleLog,
    pub events: u64,
    pub lost: u64,
    /// The probes' failures by reason name (the recording's trailer), lost records
    /// included.
    pub probe_failures: BTreeMap<String, u64>,
    pub first_ts: u64,
    pub last_ts: u64,
}

impl RecordedGraph {
    /// Reads a recording through the same pipeline as `tracer analyze`, its records
    /// ordered on a thread of their own ([`read_ordered`]).
    pub fn read(
        reader: &mut (impl ItemSource + Send),
        clock: ClockKind,
    ) -> Result<Self, RecordingError> {
        Self::read_model(reader, clock, GraphModel::new())
    }

    /// [`Self::read`] with the cpu clock, keeping every clock per vertex
    /// ([`Self::vertex_clocks`], for the what-if replay).
    pub(crate) fn read_with_clocks(
        reader: &mut (impl ItemSource + Send),
    ) -> Result<Self, RecordingError> {
        Self::read_model(reader, ClockKind::Cpu, GraphModel::with_clocks())
    }

    fn read_model(
        reader: &mut (impl ItemSource + Send),
        clock: ClockKind,
        model: GraphModel,
    ) -> Result<Self, RecordingError> {
        let mut b = Self::builder(clock, model);
        let ending = read_ordered(reader, false, |entry| {
            b.ordered(entry);
            Ok::<(), RecordingError>(())
        })?;
        Ok(b.finish(&ending.totals))
    }

    /// [`Self::read`], showing `observer` every item as the analysis takes it (see
    /// [`RecordObserver`]), with the matcher logging every point-to-point match for the
    /// observer to take (`take_matches`); reading stops once [`RecordObserver::stop`].
    pub(crate) fn read_observed(
        reader: &mut (impl ItemSource + Send),
        clock: ClockKind,
        observer: &mut impl RecordObserver,
    ) -> Result<Self, RecordingError> {
        /// Why the reading stopped early.
        enum Stop {
            Recording(RecordingError),
            Observer,
        }
        impl From<RecordingError> for Stop {
            fn from(e: RecordingError) -> Self {
                Stop::Recording(e)
            }
        }
        let mut b = Self::builder(clock, GraphModel::new());
        b.pipeline.analyzer.matcher.log_matches();
        let read = read_ordered(reader, false, |entry| {
            // A record after the analyzer took it (its matcher has logged what the
            // record completed); a fact before it applies.
            match entry {
                Ordered::Record(r) => {
                    b.ordered(entry);
                    observer.record(&mut b.pipeline.analyzer, r);
                }
                Ordered::Fact(fact) => {
                    observer.fact(fact);
                    b.ordered(entry);
                }
            }
            if observer.stop() {
                return Err(Stop::Observer);
            }
            Ok(())
        });
        match read {
            Ok(ending) => {
                b.pipeline.analyzer.end_waits();
                observer.ended(&mut b.pipeline.analyzer);
                Ok(b.finish(&ending.totals))
            }
            Err(Stop::Recording(e)) => Err(e),
            // The observer has its error; the graph of what was read goes with it.
            Err(Stop::Observer) => Ok(b.finish(&Trailer::default())),
        }
    }

    /// [`Self::read_observed`] on items already in memory.
    #[cfg(test)]
    pub(crate) fn from_items_observed(
        items: &[Item],
        clock: ClockKind,
        observer: &mut impl RecordObserver,
    ) -> Self {
        let mut source = ItemIter(items.iter().cloned().map(Ok));
        Self::read_observed(&mut source, clock, observer).expect("items in memory")
    }

    /// Builds the graph of items already in memory (tests, synthetic streams).
    pub fn from_items(items: &[Item], clock: ClockKind) -> Self {
        Self::from_items_model(items, clock, GraphModel::new())
    }

    /// [`Self::from_items`] with every clock per vertex (see [`Self::read_with_clocks`]).
    #[cfg(test)]
    pub(crate) fn from_items_with_clocks(items: &[Item]) -> Self {
        Self::from_items_model(items, ClockKind::Cpu, GraphModel::with_clocks())
    }

    fn from_items_model(items: &[Item], clock: ClockKind, model: GraphModel) -> Self {
        let mut b = Self::builder(clock, model);
        for item in items {
            b.item(item);
        }
        b.finish(&Trailer::default())
    }

    fn builder(clock: ClockKind, model: GraphModel) -> RecordedGraphBuilder {
        RecordedGraphBuilder {
            pipeline: Pipeline::with_model(clock, model),
            clock,
            processes: HashMap::new(),
            samples: SampleLog::default(),
        }
    }

    pub(crate) fn pid_of(&self, tid: u32) -> u32 {
        self.thread_pids.get(&tid).copied().unwrap_or(0)
    }
}

/// Items in, a [`RecordedGraph`] out: the analysis pipeline with the graph model, and
/// the names of the processes.
struct RecordedGraphBuilder {
    pipeline: Pipeline<GraphModel>,
    clock: ClockKind,
    processes: HashMap<u32, ProcessLabel>,
    samples: SampleLog,
}

/// What sees a recording's items in the pass that builds its graph
/// ([`RecordedGraph::read_observed`]): the Parquet export writes its rows there instead
/// of reading the recording a second time.
pub(crate) trait RecordObserver {
    /// A probe or a process, as read (facts apply at once, before the records that
    /// wait in the reorder window).
    fn fact(&mut self, item: &Item);
    /// A record, in timestamp order, right after the analyzer took it (so its matcher
    /// has logged what the record completed).
    fn record(&mut self, analyzer: &mut Analyzer<GraphModel>, r: &Record);
    /// The last records are in: the analyzer has ended its waits (`analysis::late`),
    /// which may have matched more messages.
    fn ended(&mut self, analyzer: &mut Analyzer<GraphModel>);
    /// True once the observer failed: the reading stops.
    fn stop(&self) -> bool;
}

impl RecordedGraphBuilder {
    fn item(&mut self, item: &Item) {
        self.label(item);
        if let Item::Record(Record::Sample(s)) = item {
            self.samples.add(s);
        }
        self.pipeline.item(item);
    }

    /// [`Self::item`] for an entry already ordered ([`read_ordered`]).
    fn ordered(&mut self, entry: &Ordered) {
        match entry {
            Ordered::Fact(fact) => self.label(fact),
            Ordered::Record(Record::Sample(s)) => self.samples.add(s),
            Ordered::Record(_) => {}
        }
        self.pipeline.ordered(entry);
    }

    /// What a process item says of the process's name and rank (and, for the sampled
    /// stacks, its mapped files).
    fn label(&mut self, item: &Item) {
        if let Item::Process(p) = item {
            self.samples.process(p);
            let e = self.processes.entry(p.pid).or_default();
            e.pid = p.pid;
            if !p.command.is_empty() {
                e.command = p.command.clone();
            }
            e.rank = p.env_rank.or(e.rank);
        }
    }

    fn finish(mut self, totals: &Trailer) -> RecordedGraph {
        let (clock, mut processes, samples) = (self.clock, self.processes, self.samples);
        self.pipeline.flush();
        let mut a = self.pipeline.analyzer;
        let only = a.has_participants();
        let messages = a.matcher.final_stats();
        for (&pid, p) in processes.iter_mut() {
            if let Some(r) = a.matcher.directory.world_rank(pid) {
                p.rank = Some(r);
            }
        }
        let killed = a
            .killed
            .iter()
            .map(|k| Killed {
                command: processes
                    .get(&k.pid)
                    .map(|p| p.command.clone())
                    .unwrap_or_default(),
                ..k.clone()
            })
            .collect();
        let thread_pids = a.thread_pids().iter().map(|(&t, &p)| (t, p)).collect();
        let counted: std::collections::HashSet<u32> = a
            .engine
            .threads
            .keys()
            .copied()
            .filter(|&tid| a.counts(tid))
            .collect();
        let procedures = a.procedures.names.clone();
        let procedure_symbols = a.procedures.symbols.clone();
        let (events, first_ts, last_ts) = (a.events, a.first_ts.unwrap_or(0), a.last_ts);
        // Taken, not copied: the engine is done with it.
        let message_arcs = std::mem::take(&mut a.engine.message_arcs);
        let milestones = a.engine.milestones().to_vec();
        let mut participants: Vec<u32> = a.participants().iter().copied().collect();
        participants.sort_unstable();
        let FinishedGraph {
            graph,
            vertex_clocks,
            vertex_cpu,
        } = a
            .engine
            .finish_with_clocks(only, &|tid| counted.contains(&tid));
        RecordedGraph {
            graph,
            clock,
            procedures,
            procedure_symbols,
            thread_pids,
            processes,
            participants,
            messages,
            killed,
            message_arcs,
            milestones,
            vertex_clocks,
            vertex_cpu,
            samples,
            events,
            lost: totals.events_lost,
            probe_failures: totals.probe_failures.clone(),
            first_ts,
            last_ts,
        }
    }
}
