//! The tables of the Parquet export (`tracer export --format parquet`), as rows: what
//! the Parquet writer (tracer-user's render/parquet.rs, which brings the C library in
//! through its crates) stores column by column. docs/exports.md describes each column.
//!
//! Two kinds of table:
//!
//! - streamed ([`stream_tables`]): `events` (every record), `calls` (every completed
//!   call) and `messages` (every point-to-point message matched, with its send and
//!   receive times). They come out of the one pass that builds the activity graph: each
//!   record, right after the analyzer took it (so the messages are the report's
//!   `messages.matched`), goes to a [`TableSink`] as rows, so memory holds the graph,
//!   the open calls and the messages in flight, never the rows;
//! - read off the graph: the critical path's activities and the per-procedure profile
//!   ([`GraphTables`]), every arc with its slack ([`ArcTable`], made one at a time as
//!   the writer asks), all the report's own rows.

use std::io;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use tracer_common::{CallRecord, UNSET, UNSET32};

use super::ExportError;
use crate::analysis::matcher::{MatchStats, MatchedMessage};
use crate::analysis::workclock::ClockKind;
use crate::analysis::Analyzer;
use crate::format::calls::{self, split_call_field, Family, Role};
use crate::format::pairing::{close_call, drop_unwound};
use crate::format::recording::{Item, ItemSource};
use crate::format::records::{kind_name, Record};
use crate::graph::cpm::Schedule;
use crate::graph::path::Activity;
use crate::graph::recorded::{GraphModel, RecordObserver, RecordedGraph};
use crate::report::{arc_rows, ArcRow, ProcedureRow, Report, ReportOptions};

/// One record of the recording, in timestamp order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    pub ts_ns: u64,
    /// The thread's on-CPU time when the record was made.
    pub cpu_time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// The record kind (`call_enter`, `futex_exit`, `switch_out`, ...).
    pub kind: &'static str,
    /// The call of a call record, the procedure of a procedure record (shared: one
    /// allocation per name, not per row).
    pub name: Option<Arc<str>>,
}

/// One completed call (MPI, PVM, pthread, OpenMP), entry and exit paired per thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRow {
    pub pid: u32,
    pub tid: u32,
    pub name: Arc<str>,
    /// `mpi`, `pvm`, `pthread`, `openmp`, or `call` for an unknown id.
    pub family: &'static str,
    /// 0 for a call the program made, more for a probed call made inside another.
    pub depth: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Entry arguments: destination/source/root, tag, bytes, when the call has them.
    pub peer: Option<i32>,
    pub tag: Option<i32>,
    pub bytes: Option<i64>,
    /// What a receive got (from its status): source, tag, bytes.
    pub source: Option<i32>,
    pub received_tag: Option<i32>,
    pub received_bytes: Option<i64>,
    pub ret: Option<i64>,
}

/// One point-to-point message the matcher paired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRow {
    pub from_pid: u32,
    pub to_pid: u32,
    /// As the send described it, else as the receive's status reported it.
    pub bytes: Option<u64>,
    /// Entry of the send.
    pub send_ns: u64,
    /// Exit of the call that completed the receive (Recv, Wait*, Test, pvm_*recv).
    pub receive_ns: u64,
    /// `receive_ns - send_ns` (0 if the clocks of two CPUs put the receive first).
    pub latency_ns: u64,
}

fn message_row(m: &MatchedMessage) -> MessageRow {
    MessageRow {
        from_pid: m.from_pid,
        to_pid: m.to_pid,
        bytes: m.bytes,
        send_ns: m.send_ts,
        receive_ns: m.recv_ts,
        latency_ns: m.recv_ts.saturating_sub(m.send_ts),
    }
}

/// Where the streamed rows go.
pub trait TableSink {
    fn event(&mut self, row: EventRow) -> io::Result<()>;
    fn call(&mut self, row: CallRow) -> io::Result<()>;
    fn message(&mut self, row: MessageRow) -> io::Result<()>;
}

/// What the streamed tables got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCounts {
    pub events: u64,
    pub calls: u64,
    pub messages: u64,
    /// Calls entered and never left (the recording ended inside them): not in `calls`.
    pub unclosed_calls: u64,
}

/// What the pass over the recording leaves: the streamed tables' counts and the graph
/// the other tables are read off ([`GraphTables::new`]).
pub struct Streamed {
    pub counts: StreamCounts,
    pub graph: RecordedGraph,
}

/// The one pass over a recording: builds its activity graph (as `tracer analyze` would,
/// on `clock`) and hands `sink` the rows of each record as the analysis takes it. A
/// failing sink stops the reading; its error is returned.
pub fn stream_tables(
    reader: &mut (impl ItemSource + Send),
    clock: ClockKind,
    sink: &mut impl TableSink,
) -> Result<Streamed, ExportError> {
    let mut pass = StreamPass::new(sink);
    let graph = RecordedGraph::read_observed(reader, clock, &mut pass)?;
    pass.finish(graph)
}

/// The rows of the records, as [`RecordedGraph::read_observed`] shows them.
struct StreamPass<'s, S> {
    sink: &'s mut S,
    /// Names of the function probes, by id (shared by every row that names one).
    // Looked up per record: Fx, not SipHash (3 % of the export's samples).
    probe_names: FxHashMap<u16, Arc<str>>,
    /// Names of the calls, by call id, as met.
    call_names: FxHashMap<u16, Arc<str>>,
    /// Calls entered and not yet left, per thread (they nest inside libraries).
    open: FxHashMap<u32, Vec<CallRecord>>,
    counts: StreamCounts,
    /// The sink's first error: the pass stops there.
    failed: Option<io::Error>,
}

impl<'s, S: TableSink> StreamPass<'s, S> {
    fn new(sink: &'s mut S) -> Self {
        StreamPass {
            sink,
            probe_names: FxHashMap::default(),
            call_names: FxHashMap::default(),
            open: FxHashMap::default(),
            counts: StreamCounts::default(),
            failed: None,
        }
    }

    fn finish(mut self, graph: RecordedGraph) -> Result<Streamed, ExportError> {
        if let Some(e) = self.failed {
            return Err(e.into());
        }
        self.counts.unclosed_calls = self.open.values().map(|s| s.len() as u64).sum();
        Ok(Streamed {
            counts: self.counts,
            graph,
        })
    }

    /// The messages matched since the last call.
    fn message_rows(&mut self, analyzer: &mut Analyzer<GraphModel>) -> io::Result<()> {
        for m in analyzer.matcher.take_matches() {
            self.sink.message(message_row(&m))?;
            self.counts.messages += 1;
        }
        Ok(())
    }

    fn call_name(&mut self, id: u16) -> Arc<str> {
        self.call_names
            .entry(id)
            .or_insert_with(|| calls::name(id).into())
            .clone()
    }

    fn rows(&mut self, analyzer: &mut Analyzer<GraphModel>, r: &Record) -> io::Result<()> {
        self.message_rows(analyzer)?;
        let h = *r.header();
        let name = match r {
            Record::CallEnter(_) | Record::CallExit(_) => {
                Some(self.call_name(split_call_field(h.call).id))
            }
            Record::FuncEnter(_) | Record::FuncExit(_) => self.probe_names.get(&h.call).cloned(),
            _ => None,
        };
        self.sink.event(EventRow {
            ts_ns: h.ts_ns,
            cpu_time_ns: h.cpu_ns,
            pid: h.tgid,
            tid: h.tid,
            cpu: h.cpu,
            kind: kind_name(h.kind),
            name,
        })?;
        self.counts.events += 1;
        match r {
            Record::CallEnter(c) => self.open.entry(h.tid).or_default().push(*c),
            Record::CallsUnwound(u) => {
                drop_unwound(self.open.entry(h.tid).or_default(), u.calls);
            }
            Record::CallExit(x) => {
                let stack = self.open.entry(h.tid).or_default();
                // Paired by call id: a missing exit or entry costs that call alone.
                let closed = close_call(stack, split_call_field(h.call).id, |e| {
                    split_call_field(e.header.call).id
                });
                if let Some(e) = closed.map(|c| c.entry) {
                    let depth = stack.len() as u32;
                    let name = self.call_name(split_call_field(e.header.call).id);
                    self.sink.call(call_row(&e, x, depth, name))?;
                    self.counts.calls += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl<S: TableSink> RecordObserver for StreamPass<'_, S> {
    fn fact(&mut self, item: &Item) {
        if let Item::Probe(p) = item {
            self.probe_names.insert(p.id, p.name().into());
        }
    }

    fn record(&mut self, analyzer: &mut Analyzer<GraphModel>, r: &Record) {
        if self.failed.is_none() {
            if let Err(e) = self.rows(analyzer, r) {
                self.failed = Some(e);
            }
        }
    }

    fn ended(&mut self, analyzer: &mut Analyzer<GraphModel>) {
        if self.failed.is_none() {
            if let Err(e) = self.message_rows(analyzer) {
                self.failed = Some(e);
            }
        }
    }

    fn stop(&self) -> bool {
        self.failed.is_some()
    }
}

/// The row of a completed call: what it was asked to move and what it got.
fn call_row(e: &CallRecord, x: &CallRecord, depth: u32, name: Arc<str>) -> CallRow {
    let id = split_call_field(e.header.call).id;
    let spec = calls::spec(id);
    let i32_set = |v: i32| (v != UNSET32).then_some(v);
    let i64_set = |v: i64| (v != UNSET).then_some(v);
    let receives = spec.is_some_and(|s| matches!(s.role, Role::Recv | Role::SendRecv));
    CallRow {
        pid: e.header.tgid,
        tid: e.header.tid,
        name,
        family: match spec.map(|s| s.family) {
            Some(Family::Mpi) => "mpi",
            Some(Family::Pvm) => "pvm",
            Some(Family::Threads) => "pthread",
            Some(Family::OpenMp) => "openmp",
            None => "call",
        },
        depth,
        start_ns: e.header.ts_ns,
        end_ns: x.header.ts_ns,
        peer: i32_set(e.peer),
        tag: i32_set(e.tag),
        bytes: i64_set(e.bytes),
        source: receives.then(|| i32_set(x.peer)).flatten(),
        received_tag: receives.then(|| i32_set(x.tag)).flatten(),
        received_bytes: receives.then(|| i64_set(x.bytes)).flatten(),
        ret: i64_set(x.ret),
    }
}

/// The report's tables read off the activity graph: the critical path and the
/// procedures held. The arcs are [`ArcTable`]'s: the two are made at once by the export
/// (the report's rows, with each procedure's zeroing and maximum benefit, take about as
/// long as encoding the arcs).
pub struct GraphTables {
    pub clock: ClockKind,
    pub critical_path_ns: u64,
    /// The critical path, first activity first (the report's `activities`).
    pub critical_path: Vec<Activity>,
    /// The per-procedure profile (the report's `procedures`).
    pub procedures: Vec<ProcedureRow>,
    /// The matcher's counts (the report's `messages`).
    pub messages: MatchStats,
    pub events_recorded: u64,
    pub events_lost: u64,
}

impl GraphTables {
    /// The report's rows on `rg` (one path: the export has no near-critical paths, so
    /// `mbm_ns` is against the critical path alone, as `tracer report --paths 1`).
    pub fn new(rg: &RecordedGraph) -> Self {
        let report = Report::new(
            rg,
            &ReportOptions {
                paths: 1,
                ..Default::default()
            },
            None,
        );
        GraphTables {
            clock: rg.clock,
            critical_path_ns: report.critical_path.path.length_ns,
            critical_path: report.activities,
            procedures: report.procedures,
            messages: rg.messages.clone(),
            events_recorded: rg.events,
            events_lost: rg.lost,
        }
    }
}

/// Every arc of the graph with its schedule and slack, made one at a time as the writer
/// asks (millions in a big recording).
pub struct ArcTable<'g> {
    rg: &'g RecordedGraph,
    schedule: Schedule,
}

impl<'g> ArcTable<'g> {
    pub fn new(rg: &'g RecordedGraph) -> Self {
        ArcTable {
            rg,
            schedule: Schedule::new(&rg.graph),
        }
    }

    /// The report's `--arcs` lines, in id order.
    pub fn rows(&self) -> impl Iterator<Item = ArcRow> + '_ {
        arc_rows(self.rg, &self.schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synth::ring;

    #[derive(Default)]
    struct Rows {
        events: Vec<EventRow>,
        calls: Vec<CallRow>,
        messages: Vec<MessageRow>,
    }

    impl TableSink for Rows {
        fn event(&mut self, row: EventRow) -> io::Result<()> {
            self.events.push(row);
            Ok(())
        }
        fn call(&mut self, row: CallRow) -> io::Result<()> {
            self.calls.push(row);
            Ok(())
        }
        fn message(&mut self, row: MessageRow) -> io::Result<()> {
            self.messages.push(row);
            Ok(())
        }
    }

    /// A ring over 3 ranks, 4 rounds: 12 messages, each a send and a receive.
    #[test]
    fn ring_tables_hold_the_reports_figures() {
        let items = ring(None);
        let mut rows = Rows::default();
        let mut pass = StreamPass::new(&mut rows);
        let rg = RecordedGraph::from_items_observed(&items, ClockKind::Cpu, &mut pass);
        let Streamed { counts, graph: rg } = pass.finish(rg).unwrap();
        // The graph of the observed pass is the graph of a plain one.
        let plain = RecordedGraph::from_items(&items, ClockKind::Cpu);
        assert_eq!(rg.graph.arcs.len(), plain.graph.arcs.len());
        assert_eq!(rg.messages, plain.messages);
        let tables = GraphTables::new(&rg);
        assert_eq!(rows.messages.len() as u64, rg.messages.matched);
        assert_eq!(rows.messages.len(), 12);
        assert!(rows
            .messages
            .iter()
            .all(|m| m.latency_ns == m.receive_ns - m.send_ns));
        let named = |n: &str| rows.calls.iter().filter(|c| &*c.name == n).count();
        assert_eq!((named("MPI_Send"), named("MPI_Recv")), (12, 12));
        assert_eq!(counts.events, rows.events.len() as u64);
        assert!(rows.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        let work: u64 = tables
            .critical_path
            .iter()
            .map(|a| match a {
                Activity::Work { work_ns, .. } => *work_ns,
                Activity::Wait { .. } => 0,
            })
            .sum();
        assert_eq!(work, tables.critical_path_ns);
        assert!(work > 0);
        let arcs: Vec<ArcRow> = ArcTable::new(&rg).rows().collect();
        assert_eq!(arcs.len(), rg.graph.arcs.len());
        let critical = arcs
            .iter()
            .filter(|a| a.kind == "program" && a.total_slack == Some(0))
            .map(|a| a.weight_ns)
            .sum::<u64>();
        assert!(critical >= tables.critical_path_ns);
    }
}
