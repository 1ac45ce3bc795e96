//! Chrome trace-event JSON (the `{"traceEvents": [...]}` format that Perfetto's UI and
//! chrome://tracing load): one track per traced thread, grouped by process; MPI/PVM
//! calls, selected procedures and futex waits as slices; every dependency of the
//! activity graph (a message, a collective) as a flow arrow from the sender's call to
//! the receiver's; and the critical path as a track of its own. docs/chrome-export.md
//! describes the mapping.
//!
//! Times are microseconds since the first analysed record, as the format wants.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};
use tracer_common::{kind, CallRecord, UNSET, UNSET32};

use super::ExportError;
use crate::analysis::reorder::ReorderBuffer;
use crate::analysis::workclock::ClockKind;
use crate::analysis::{futex_waits, REORDER_WINDOW_NS};
use crate::format::calls::{self, split_call_field, Family, Role};
use crate::format::recording::{Item, RecordingError, RecordingReader};
use crate::format::records::Record;
use crate::format::summary::SummaryBuilder;
use crate::graph::cpm::Schedule;
use crate::graph::path::arc_procedure;
use crate::graph::recorded::RecordedGraph;
use crate::graph::{ArcId, ArcKind, Vertex};

/// Pseudo process (and thread) of the critical path track: above the largest pid_max
/// Linux allows (2^22), so no traced process has it.
pub const CRITICAL_PID: u32 = 1 << 30;

/// Flow categories: a dependency, and one the critical path goes through.
pub(crate) const FLOW_CAT: &str = "dependency";
pub(crate) const CRITICAL_FLOW_CAT: &str = "critical_dependency";

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExportStats {
    /// Call, procedure and futex-wait slices on the thread tracks.
    pub slices: u64,
    /// Flow arrows (one per dependency arc of the graph).
    pub flows: u64,
    /// The short slices flows start and end in (a departure, an arrival).
    pub flow_slices: u64,
    /// Slices on the critical path track and the work they add up to.
    pub critical_slices: u64,
    pub critical_path_ns: u64,
    pub processes: usize,
    pub threads: usize,
    /// Calls, procedures and waits still open at the end of the recording (not shown).
    pub unclosed: u64,
}

/// One work arc of the critical path.
struct CriticalSlice {
    start_ns: u64,
    end_ns: u64,
    pid: u32,
    tid: u32,
    procedure: String,
    work_ns: u64,
}

/// One end of a flow arrow, at a graph vertex: the event of thread `tid` at `ts_ns`.
#[derive(Clone, Copy, Debug)]
struct Endpoint {
    ts_ns: u64,
    pid: u32,
    id: u64,
    /// The sending end ("s"), else the receiving end ("f").
    start: bool,
    /// Time from the source event to the target event.
    span_ns: u64,
    /// What the dependency is (the flow's name).
    name: &'static str,
    critical: bool,
}

/// What a dependency arriving at `to` is: what the waiting thread was in.
fn dependency_name(to: &Vertex) -> &'static str {
    let k = (to.label >> 16) as u16;
    if matches!(k, kind::FUTEX_ENTER | kind::FUTEX_EXIT) {
        return "wakeup";
    }
    if !matches!(k, kind::CALL_ENTER | kind::CALL_EXIT) {
        return "thread start";
    }
    match calls::spec(split_call_field(to.label as u16).id) {
        Some(s) if s.role == Role::Collective => "collective",
        Some(s) if s.role == Role::ThreadJoin => "join",
        Some(s) if s.family == Family::Threads => "lock",
        Some(s) if s.family == Family::OpenMp => "openmp",
        _ => "message",
    }
}

impl Endpoint {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cat(&self) -> &'static str {
        if self.critical {
            CRITICAL_FLOW_CAT
        } else {
            FLOW_CAT
        }
    }
}

/// The first pass's result: what the timeline needs from the graph, and the graph
/// itself is dropped.
pub struct ChromeExport {
    clock: ClockKind,
    base_ns: u64,
    critical: Vec<CriticalSlice>,
    critical_length_ns: u64,
    /// Flow ends per thread, by time.
    endpoints: HashMap<u32, VecDeque<Endpoint>>,
    /// Ranks the matcher learned, for processes the summary has none for.
    ranks: HashMap<u32, i32>,
    /// Events in the recording, and events the probes dropped (the timeline misses
    /// their calls and messages).
    pub events_recorded: u64,
    pub events_lost: u64,
}

impl ChromeExport {
    /// The first pass over a recording: its graph through the analysis pipeline.
    pub fn read(path: &Path, clock: ClockKind) -> Result<Self, RecordingError> {
        let mut reader = RecordingReader::open(path)?;
        Ok(Self::new(&RecordedGraph::read(&mut reader, clock)?))
    }

    /// What the timeline needs from a graph: the work arcs of its critical path and
    /// both ends of every dependency arc.
    pub fn new(rg: &RecordedGraph) -> Self {
        let g = &rg.graph;
        let schedule = Schedule::new(g);
        let path = schedule.critical_arcs(g, |_, a| a.weight);
        let critical = path
            .iter()
            .filter(|&&id| {
                let a = g.arc(id);
                a.kind == ArcKind::Program && a.weight > 0
            })
            .map(|&id| {
                let a = g.arc(id);
                let (from, to) = (&g.vertices[a.from as usize], &g.vertices[a.to as usize]);
                CriticalSlice {
                    start_ns: from.ts_ns,
                    end_ns: to.ts_ns,
                    pid: rg.pid_of(to.tid),
                    tid: to.tid,
                    procedure: arc_procedure(g, rg, id),
                    work_ns: a.weight,
                }
            })
            .collect();
        let on_path: HashSet<ArcId> = path.into_iter().collect();
        let mut endpoints: HashMap<u32, VecDeque<Endpoint>> = HashMap::new();
        let mut flows = 0;
        for (i, a) in g.arcs.iter().enumerate() {
            let (from, to) = (&g.vertices[a.from as usize], &g.vertices[a.to as usize]);
            // A collective's exit also depends on the member's own entry: that is its
            // program order, not an arrow worth drawing.
            if a.kind != ArcKind::Dependency || from.tid == to.tid {
                continue;
            }
            flows += 1;
            let end = Endpoint {
                ts_ns: from.ts_ns,
                pid: rg.pid_of(from.tid),
                id: flows,
                start: true,
                span_ns: to.ts_ns.saturating_sub(from.ts_ns),
                name: dependency_name(to),
                critical: on_path.contains(&(i as ArcId)),
            };
            endpoints.entry(from.tid).or_default().push_back(end);
            endpoints.entry(to.tid).or_default().push_back(Endpoint {
                ts_ns: to.ts_ns,
                pid: rg.pid_of(to.tid),
                start: false,
                ..end
            });
        }
        for ends in endpoints.values_mut() {
            ends.make_contiguous().sort_by_key(|e| (e.ts_ns, e.start));
        }
        ChromeExport {
            clock: rg.clock,
            base_ns: rg.first_ts,
            critical,
            critical_length_ns: schedule.length,
            endpoints,
            ranks: rg
                .processes
                .iter()
                .filter_map(|(&pid, p)| Some((pid, p.rank?)))
                .collect(),
            events_recorded: rg.events,
            events_lost: rg.lost,
        }
    }

    /// The second pass: streams the timeline of `items` (the same recording, in file
    /// order) to `out` as Chrome JSON and returns the writer.
    pub fn write<W: Write>(
        mut self,
        items: impl IntoIterator<Item = Result<Item, RecordingError>>,
        out: W,
    ) -> Result<(ExportStats, W), ExportError> {
        let mut out = EventWriter::begin(out)?;
        let mut stats = ExportStats::default();
        self.write_critical_path(&mut out, &mut stats)?;
        let mut timeline = Timeline {
            base_ns: self.base_ns,
            threads: HashMap::new(),
            endpoints: std::mem::take(&mut self.endpoints),
            probe_names: HashMap::new(),
            seen: BTreeSet::new(),
        };
        let mut summary = SummaryBuilder::new();
        // The same reorder window as the analysis: the records reach the timeline in the
        // order the graph's vertices were made.
        let mut reorder = ReorderBuffer::new(REORDER_WINDOW_NS);
        let mut ready: Vec<Record> = Vec::new();
        for item in items {
            let item = item?;
            summary.item(&item);
            match item {
                Item::Record(r) => {
                    reorder.push(&r);
                    reorder.ready(|r| ready.push(r.clone()));
                }
                Item::Probe(p) => {
                    timeline.probe_names.insert(p.id, p.symbol);
                }
                Item::Process(_) => {}
            }
            for r in ready.drain(..) {
                timeline.record(&r, &mut out, &mut stats)?;
            }
        }
        reorder.flush(|r| ready.push(r.clone()));
        for r in ready.drain(..) {
            timeline.record(&r, &mut out, &mut stats)?;
        }
        timeline.finish(&mut out, &mut stats)?;
        self.write_names(&mut out, &summary.finish(0), &timeline.seen, &mut stats)?;
        let other = json!({
            "generator": concat!("tracer ", env!("CARGO_PKG_VERSION")),
            "clock": ClockKind::name(self.clock),
            "critical_path_ns": self.critical_length_ns,
            "time_zero_monotonic_ns": self.base_ns,
        });
        Ok((stats, out.finish(&other)?))
    }

    fn write_critical_path<W: Write>(
        &self,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        let p = CRITICAL_PID;
        out.event(&Event::meta(
            "process_name",
            p,
            p,
            json!({ "name": "critical path" }),
        ))?;
        out.event(&Event::meta(
            "process_sort_index",
            p,
            p,
            json!({ "sort_index": -1 }),
        ))?;
        let thread = format!("critical path ({} clock)", ClockKind::name(self.clock));
        out.event(&Event::meta("thread_name", p, p, json!({ "name": thread })))?;
        for s in &self.critical {
            let args = json!({
                "pid": s.pid,
                "tid": s.tid,
                "work_ms": s.work_ns as f64 / 1e6,
                "work_ns": s.work_ns,
            });
            out.event(&Event::slice(
                &s.procedure,
                "critical_path",
                p,
                p,
                us(s.start_ns, self.base_ns),
                us(s.end_ns, s.start_ns),
                Some(args),
            ))?;
            stats.critical_slices += 1;
            stats.critical_path_ns += s.work_ns;
        }
        Ok(())
    }

    /// Names of the processes (with their MPI rank or PVM task id) and threads.
    fn write_names<W: Write>(
        &self,
        out: &mut EventWriter<W>,
        summary: &crate::format::summary::Summary,
        threads: &BTreeSet<(u32, u32)>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        for p in &summary.processes {
            let command = if p.command.is_empty() {
                format!("pid {}", p.pid)
            } else {
                p.command.clone()
            };
            let rank = p.rank.or_else(|| self.ranks.get(&p.pid).copied());
            let name = match (rank, p.pvm_tid) {
                (Some(r), _) => format!("rank {r}: {command}"),
                (None, Some(t)) => format!("pvm task {t:#x}: {command}"),
                (None, None) => command,
            };
            out.event(&Event::meta(
                "process_name",
                p.pid,
                p.pid,
                json!({ "name": name }),
            ))?;
            if let Some(r) = rank {
                out.event(&Event::meta(
                    "process_sort_index",
                    p.pid,
                    p.pid,
                    json!({ "sort_index": r }),
                ))?;
            }
            stats.processes += 1;
        }
        for &(pid, tid) in threads {
            let name = if pid == tid { "main" } else { "thread" };
            out.event(&Event::meta(
                "thread_name",
                pid,
                tid,
                json!({ "name": name }),
            ))?;
            stats.threads += 1;
        }
        Ok(())
    }
}

/// Microseconds from `base_ns` to `ts_ns` (negative for a record older than the base).
fn us(ts_ns: u64, base_ns: u64) -> f64 {
    (ts_ns as i128 - base_ns as i128) as f64 / 1000.0
}

/// What the timeline keeps per thread.
#[derive(Default)]
struct ThreadTrack {
    pid: u32,
    /// MPI/PVM calls in progress (they nest inside libraries).
    calls: Vec<CallRecord>,
    /// Selected procedures in progress: probe id and entry time.
    procedures: Vec<(u16, u64)>,
    futex_wait: Option<u64>,
    /// Time of the latest mark on this thread: a slice start or end, or a flow end's
    /// vertex.
    last_mark: Option<u64>,
    /// Flow starts (all at one vertex) waiting for the thread's next mark, which bounds
    /// their departure slice (see [`Timeline::record`]).
    departing: Option<(u64, Vec<Endpoint>)>,
}

/// Longest time from a flow end's vertex to its departure or arrival slice, and that
/// slice's longest duration.
const FLOW_SLICE_MAX_NS: u64 = 1000;

impl ThreadTrack {
    /// A slice starts or ends at `ts`: it bounds the departure in waiting.
    fn boundary<W: Write>(
        &mut self,
        ts: u64,
        tid: u32,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
        base_ns: u64,
    ) -> io::Result<()> {
        if let Some((at, ends)) = self.departing.take() {
            flow_slice(out, stats, &ends, tid, at, ts, base_ns)?;
        }
        self.last_mark = Some(ts);
        Ok(())
    }

    /// Flow ends at one vertex, all starts or all ends. Arrivals are placed before the
    /// vertex, after the previous mark (halfway to it from a departure in waiting);
    /// departures wait for the next mark.
    fn flow_ends<W: Write>(
        &mut self,
        ends: Vec<Endpoint>,
        tid: u32,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
        base_ns: u64,
    ) -> io::Result<()> {
        let at = ends[0].ts_ns;
        let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
        let mut from = self.last_mark.unwrap_or(at.saturating_sub(span)).min(at);
        if let Some((dep, waiting)) = self.departing.take() {
            let mid = dep + (at - dep) / 2;
            flow_slice(out, stats, &waiting, tid, dep, mid, base_ns)?;
            from = mid;
        }
        if ends[0].start {
            self.departing = Some((at, ends));
        } else {
            flow_slice(out, stats, &ends, tid, from, at, base_ns)?;
        }
        self.last_mark = Some(at);
        Ok(())
    }
}

/// The slice of flow ends at one vertex, in the free time `from..to` next to it (no
/// other slice starts or ends there): a departure's just after its vertex `from`, an
/// arrival's just before its vertex `to`. Each is at most a third of that time, of the
/// shortest flow's span and [`FLOW_SLICE_MAX_NS`] away from its vertex and as long, so
/// that every departure slice starts no later than its arrival slice (Perfetto draws a
/// flow from the earlier of its two slices). The flow events sit inside it, a quarter
/// of it from its start (a departure) or its end (an arrival): a flow's start event is
/// then strictly earlier than its end event, as Perfetto needs to pair them.
fn flow_slice<W: Write>(
    out: &mut EventWriter<W>,
    stats: &mut ExportStats,
    ends: &[Endpoint],
    tid: u32,
    from: u64,
    to: u64,
    base_ns: u64,
) -> io::Result<()> {
    let first = &ends[0];
    let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
    let x = (to.saturating_sub(from) / 3)
        .min(span / 3)
        .min(FLOW_SLICE_MAX_NS);
    let start = if first.start { from + x } else { to - 2 * x };
    let name = format!(
        "{} {}",
        first.name(),
        if first.start { "departure" } else { "arrival" }
    );
    let ids: Vec<u64> = ends.iter().map(|e| e.id).collect();
    let cat = if ends.iter().any(|e| e.critical) {
        CRITICAL_FLOW_CAT
    } else {
        FLOW_CAT
    };
    out.event(&Event::slice(
        &name,
        cat,
        first.pid,
        tid,
        us(start, base_ns),
        us(start + x, start),
        Some(json!({ "flows": ids })),
    ))?;
    stats.flow_slices += 1;
    let at = if first.start {
        start + x / 4
    } else {
        start + x - x / 4
    };
    for e in ends {
        flow(out, stats, e, tid, at, base_ns)?;
    }
    Ok(())
}

/// Pops the flow ends at the front of `ends` that share one vertex (time and direction)
/// and satisfy `take`.
fn next_vertex(
    ends: Option<&mut VecDeque<Endpoint>>,
    take: impl Fn(&Endpoint) -> bool,
) -> Option<Vec<Endpoint>> {
    let ends = ends?;
    let first = *ends.front().filter(|e| take(e))?;
    let mut group = Vec::new();
    while let Some(e) = ends.front() {
        if e.ts_ns != first.ts_ns || e.start != first.start {
            break;
        }
        group.push(ends.pop_front().unwrap());
    }
    Some(group)
}

/// The second pass: slices and flow ends, record by record.
struct Timeline {
    base_ns: u64,
    threads: HashMap<u32, ThreadTrack>,
    endpoints: HashMap<u32, VecDeque<Endpoint>>,
    probe_names: HashMap<u16, String>,
    /// (pid, tid) of every thread with a record.
    seen: BTreeSet<(u32, u32)>,
}

/// A slice a record closed.
struct Closed {
    name: String,
    cat: &'static str,
    start_ns: u64,
    args: Option<Value>,
}

impl Timeline {
    /// Slices are emitted when they close. Every flow end gets a short slice of its
    /// own, next to its vertex, in which the flow event sits: Perfetto binds a flow
    /// event to the innermost slice open at its time and orients the arrow by the
    /// start times of the two slices, so a flow bound to a blocking receive (which
    /// starts before its send) would point backwards, and one at a point with no slice
    /// (a new thread's start) would be dropped. The marks of a thread (slice starts and
    /// ends, flow-end vertices) are taken in time order; a departure slice goes in the
    /// free time after its vertex, an arrival slice in the free time before it (see
    /// [`flow_slice`]), so that the flow slices nest in the call slices.
    fn record<W: Write>(
        &mut self,
        r: &Record,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        // A wakeup's header is the waker (maybe untraced), a switch-in's may lack its
        // process: neither is an event of the thread the analysis counts.
        if matches!(
            r,
            Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
        ) {
            return Ok(());
        }
        let h = *r.header();
        let ts = h.ts_ns;
        self.seen.insert((h.tgid, h.tid));
        let t = self.threads.entry(h.tid).or_default();
        t.pid = h.tgid;
        let (boundary, closed) = match r {
            Record::CallEnter(c) => {
                t.calls.push(*c);
                (true, None)
            }
            Record::CallExit(x) => match t.calls.pop() {
                Some(e) => (true, Some(call_slice(&e, x))),
                None => (false, None),
            },
            Record::FuncEnter(_) if self.probe_names.contains_key(&h.call) => {
                t.procedures.push((h.call, ts));
                (true, None)
            }
            Record::FuncExit(_) => match t.procedures.iter().rposition(|p| p.0 == h.call) {
                Some(i) => {
                    let (id, start_ns) = t.procedures[i];
                    // Procedures left without their exit (longjmp, tracing cut) end here.
                    stats.unclosed += (t.procedures.len() - i - 1) as u64;
                    t.procedures.truncate(i);
                    let closed = Closed {
                        name: self.probe_names[&id].clone(),
                        cat: "procedure",
                        start_ns,
                        args: None,
                    };
                    (true, Some(closed))
                }
                None => (false, None),
            },
            Record::FutexEnter(f) if futex_waits(f.op) => {
                t.futex_wait = Some(ts);
                (true, None)
            }
            Record::FutexExit(_) => match t.futex_wait.take() {
                Some(start_ns) => (
                    true,
                    Some(Closed {
                        name: "futex wait".into(),
                        cat: "sync",
                        start_ns,
                        args: None,
                    }),
                ),
                None => (false, None),
            },
            _ => (false, None),
        };
        // Flow ends of earlier vertices (records the timeline skips), then the
        // arrivals at this record, its slice boundary, the departures at it.
        let base = self.base_ns;
        let ends = &mut self.endpoints;
        while let Some(v) = next_vertex(ends.get_mut(&h.tid), |e| {
            e.ts_ns < ts || (e.ts_ns == ts && !e.start)
        }) {
            t.flow_ends(v, h.tid, out, stats, base)?;
        }
        if boundary {
            t.boundary(ts, h.tid, out, stats, base)?;
        }
        while let Some(v) = next_vertex(ends.get_mut(&h.tid), |e| e.ts_ns == ts) {
            t.flow_ends(v, h.tid, out, stats, base)?;
        }
        if let Some(c) = closed {
            out.event(&Event::slice(
                &c.name,
                c.cat,
                h.tgid,
                h.tid,
                us(c.start_ns, self.base_ns),
                us(ts, c.start_ns),
                c.args,
            ))?;
            stats.slices += 1;
        }
        Ok(())
    }

    /// Flow ends after a thread's last record, and departures that found no later
    /// mark (a departure slice then ends within the flow's span); what is still open is
    /// counted.
    fn finish<W: Write>(
        &mut self,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.extend(self.endpoints.keys());
        tids.sort_unstable();
        tids.dedup();
        for tid in tids {
            let t = self.threads.entry(tid).or_default();
            stats.unclosed +=
                (t.calls.len() + t.procedures.len()) as u64 + t.futex_wait.is_some() as u64;
            while let Some(v) = next_vertex(self.endpoints.get_mut(&tid), |_| true) {
                t.flow_ends(v, tid, out, stats, self.base_ns)?;
            }
            if let Some((at, ends)) = t.departing.take() {
                let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
                flow_slice(out, stats, &ends, tid, at, at + span, self.base_ns)?;
            }
        }
        Ok(())
    }
}

/// One end of a flow arrow ("s" binds to the enclosing slice; "f" with `bp: e` too),
/// inside its flow slice.
fn flow<W: Write>(
    out: &mut EventWriter<W>,
    stats: &mut ExportStats,
    e: &Endpoint,
    tid: u32,
    at_ns: u64,
    base_ns: u64,
) -> io::Result<()> {
    stats.flows += e.start as u64;
    out.event(&Event {
        ph: if e.start { "s" } else { "f" },
        name: e.name(),
        cat: e.cat(),
        pid: e.pid,
        tid,
        ts: us(at_ns, base_ns),
        dur: None,
        id: Some(e.id),
        bp: (!e.start).then_some("e"),
        args: None,
    })
}

/// The slice of a completed call: its name, family, and the arguments that say what it
/// moved.
fn call_slice(e: &CallRecord, x: &CallRecord) -> Closed {
    let id = split_call_field(e.header.call).id;
    let spec = calls::spec(id);
    let mut args = Map::new();
    let mut put = |k: &str, v: Option<i64>| {
        if let Some(v) = v {
            args.insert(k.into(), v.into());
        }
    };
    let i32_set = |v: i32| (v != UNSET32).then_some(v as i64);
    let i64_set = |v: i64| (v != UNSET).then_some(v);
    put("peer", i32_set(e.peer));
    put("tag", i32_set(e.tag));
    put("bytes", i64_set(e.bytes));
    if spec.is_some_and(|s| matches!(s.role, Role::Recv | Role::SendRecv)) {
        put("source", i32_set(x.peer));
        put("received_tag", i32_set(x.tag));
        put("received_bytes", i64_set(x.bytes));
    }
    put("ret", i64_set(x.ret));
    Closed {
        name: calls::name(id),
        cat: match spec.map(|s| s.family) {
            Some(Family::Mpi) => "mpi",
            Some(Family::Pvm) => "pvm",
            Some(Family::Threads) => "pthread",
            Some(Family::OpenMp) => "openmp",
            None => "call",
        },
        start_ns: e.header.ts_ns,
        args: (!args.is_empty()).then_some(Value::Object(args)),
    }
}

/// One trace event; fields a phase does not use are left out.
#[derive(Serialize)]
struct Event<'a> {
    ph: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    pid: u32,
    tid: u32,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Value>,
}

impl<'a> Event<'a> {
    /// A complete ("X") slice.
    fn slice(
        name: &'a str,
        cat: &'static str,
        pid: u32,
        tid: u32,
        ts: f64,
        dur: f64,
        args: Option<Value>,
    ) -> Self {
        Event {
            ph: "X",
            name,
            cat,
            pid,
            tid,
            ts,
            dur: Some(dur),
            id: None,
            bp: None,
            args,
        }
    }

    /// A metadata ("M") event: process and thread names and order.
    fn meta(name: &'a str, pid: u32, tid: u32, args: Value) -> Self {
        Event {
            ph: "M",
            name,
            cat: "",
            pid,
            tid,
            ts: 0.0,
            dur: None,
            id: None,
            bp: None,
            args: Some(args),
        }
    }
}

/// Writes the JSON object event by event.
struct EventWriter<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> EventWriter<W> {
    fn begin(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"traceEvents\":[\n")?;
        Ok(EventWriter { out, first: true })
    }

    fn event(&mut self, e: &Event) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, e)?;
        Ok(())
    }

    fn finish(mut self, other: &Value) -> io::Result<W> {
        self.out
            .write_all(b"\n],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, other)?;
        self.out.write_all(b"}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::synth::SyntheticRun;
    use crate::graph::path::OUTSIDE;
    use tracer_common::call;

    /// A ring over 3 ranks, 4 rounds, with work inside and outside `work`.
    fn ring() -> Vec<Item> {
        let mut s = SyntheticRun::new(3, &["work"]);
        for round in 0..4 {
            for r in 0..3 {
                s.compute(r, 10_000 + 1000 * r as u64, Some(0));
                s.compute(r, 500, None);
                s.message(r, (r + 1) % 3, round);
            }
        }
        s.items
    }

    fn export(items: &[Item]) -> (ExportStats, Value, RecordedGraph) {
        let rg = RecordedGraph::from_items(items, ClockKind::Cpu);
        let (stats, bytes) = ChromeExport::new(&rg)
            .write(items.iter().cloned().map(Ok), Vec::new())
            .unwrap();
        let v: Value = serde_json::from_slice(&bytes).expect("valid JSON");
        (stats, v, rg)
    }

    fn events<'a>(v: &'a Value, ph: &str) -> Vec<&'a Value> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .collect()
    }

    /// The slice of thread `tid` named `name` that strictly contains `ts`.
    fn inside<'a>(slices: &[&'a Value], tid: &Value, ts: f64, name: &str) -> Option<&'a Value> {
        slices.iter().copied().find(|s| {
            let start = s["ts"].as_f64().unwrap();
            let end = start + s["dur"].as_f64().unwrap();
            s["tid"] == *tid && s["name"] == name && start < ts && ts < end
        })
    }

    /// The innermost slice of the thread of `e` that strictly contains its time.
    fn innermost<'a>(slices: &[&'a Value], e: &Value) -> Option<&'a Value> {
        let ts = e["ts"].as_f64().unwrap();
        slices
            .iter()
            .copied()
            .filter(|s| {
                let start = s["ts"].as_f64().unwrap();
                s["pid"] == e["pid"]
                    && s["tid"] == e["tid"]
                    && start < ts
                    && ts < start + s["dur"].as_f64().unwrap()
            })
            .min_by(|a, b| a["dur"].as_f64().partial_cmp(&b["dur"].as_f64()).unwrap())
    }

    /// What Perfetto makes of the flows: each starts in a departure slice and ends in an
    /// arrival slice of its own (named after it, listing its id), the departure slice
    /// starting no later than the arrival slice; and the slices of every thread nest.
    fn check_flow_slices(v: &Value) {
        let slices = events(v, "X");
        let ends = events(v, "f");
        let starts = events(v, "s");
        assert_eq!(starts.len(), ends.len());
        for s in &starts {
            let f = ends.iter().find(|f| f["id"] == s["id"]).unwrap();
            let bound = |e: &Value, side: &str| {
                let slice = innermost(&slices, e).unwrap_or_else(|| panic!("{e}: no slice"));
                let name = format!("{} {side}", e["name"].as_str().unwrap());
                assert_eq!(slice["name"], name.as_str(), "{e}");
                assert_eq!(slice["cat"], e["cat"]);
                assert!(slice["args"]["flows"]
                    .as_array()
                    .unwrap()
                    .contains(&e["id"]));
                slice["ts"].as_f64().unwrap()
            };
            assert!(bound(s, "departure") <= bound(f, "arrival"), "{s} {f}");
            assert!(s["ts"].as_f64() < f["ts"].as_f64(), "{s} {f}");
        }
        for a in &slices {
            for b in &slices {
                if a["pid"] != b["pid"] || a["tid"] != b["tid"] {
                    continue;
                }
                let span = |s: &Value| {
                    let t = s["ts"].as_f64().unwrap();
                    (t, t + s["dur"].as_f64().unwrap())
                };
                let ((a0, a1), (b0, b1)) = (span(a), span(b));
                let overlap = a0 < b1 && b0 < a1;
                let nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
                assert!(!overlap || nested, "{a} and {b} overlap");
            }
        }
    }

    #[test]
    fn ring_exports_slices_flows_and_the_critical_path() {
        let items = ring();
        let (stats, v, rg) = export(&items);
        let slices = events(&v, "X");
        let named = |n: &str| {
            slices
                .iter()
                .filter(|s| s["name"] == n && s["pid"] != CRITICAL_PID)
                .count()
        };
        assert_eq!(named("MPI_Send"), 12);
        assert_eq!(named("MPI_Recv"), 12);
        assert_eq!(named("work"), 12);
        let send = slices.iter().find(|s| s["name"] == "MPI_Send").unwrap();
        assert_eq!(send["cat"], "mpi");
        assert_eq!(send["args"]["bytes"], 64);
        assert_eq!(send["pid"], send["tid"]);

        // One flow per dependency arc; ids unique, each start before its end, each end
        // strictly inside the sending and the receiving call.
        let deps = rg
            .graph
            .arcs
            .iter()
            .filter(|a| {
                let (from, to) = (
                    &rg.graph.vertices[a.from as usize],
                    &rg.graph.vertices[a.to as usize],
                );
                a.kind == ArcKind::Dependency && from.tid != to.tid
            })
            .count();
        assert_eq!(deps, 12);
        let starts = events(&v, "s");
        let ends = events(&v, "f");
        assert_eq!(starts.len(), deps);
        assert_eq!(ends.len(), deps);
        assert_eq!(stats.flows, deps as u64);
        let ids: BTreeSet<u64> = starts.iter().map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(ids.len(), deps);
        for s in &starts {
            let f = ends
                .iter()
                .find(|f| f["id"] == s["id"])
                .expect("matching end");
            assert_eq!(f["bp"], "e");
            assert_eq!(
                (f["name"].clone(), f["cat"].clone()),
                (s["name"].clone(), s["cat"].clone())
            );
            let (ts, tf) = (s["ts"].as_f64().unwrap(), f["ts"].as_f64().unwrap());
            assert!(ts < tf, "flow {} goes back in time", s["id"]);
            assert!(inside(&slices, &s["tid"], ts, "MPI_Send").is_some(), "{s}");
            assert!(inside(&slices, &f["tid"], tf, "MPI_Recv").is_some(), "{f}");
        }
        check_flow_slices(&v);
        assert_eq!(stats.flow_slices, 2 * deps as u64);

        // The critical path track adds up to the schedule's length.
        let length = Schedule::new(&rg.graph).length;
        let critical: Vec<&&Value> = slices.iter().filter(|s| s["pid"] == CRITICAL_PID).collect();
        assert!(!critical.is_empty());
        let work: u64 = critical
            .iter()
            .map(|s| s["args"]["work_ns"].as_u64().unwrap())
            .sum();
        assert_eq!(work, length);
        assert_eq!(stats.critical_path_ns, length);
        assert!(critical.iter().any(|s| s["name"] == "work"));
        assert!(critical.iter().any(|s| s["name"] == OUTSIDE));
        assert!(starts.iter().any(|s| s["cat"] == CRITICAL_FLOW_CAT));
        let work_ms: f64 = critical
            .iter()
            .map(|s| s["args"]["work_ms"].as_f64().unwrap())
            .sum();
        assert!((work_ms - length as f64 / 1e6).abs() < 1e-9);

        // Named processes (ranks from the launcher's environment) and threads.
        let meta = events(&v, "M");
        let mut names: Vec<&str> = meta
            .iter()
            .filter(|m| m["name"] == "process_name")
            .map(|m| m["args"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "critical path",
                "rank 0: ./app",
                "rank 1: ./app",
                "rank 2: ./app"
            ]
        );
        let threads = meta.iter().filter(|m| m["name"] == "thread_name").count();
        assert_eq!(threads, 4);
        assert_eq!(stats.slices, 36);
        assert_eq!(stats.unclosed, 0);
        assert_eq!(v["otherData"]["critical_path_ns"], length);
    }

    /// Threads: a new thread's start and a futex wakeup get slices at both ends, the
    /// new thread's arrival before its first record, and every arrow points forwards.
    #[test]
    fn thread_start_and_wakeup_flows_have_slices() {
        use crate::format::synth::{SyntheticThreads, THREADS_PID as MAIN};
        let mut s = SyntheticThreads::new(&["work"]);
        s.compute(MAIN, 1000, Some(0));
        s.clone(MAIN, 501);
        s.compute(501, 5000, Some(0));
        s.wait(MAIN);
        s.compute(501, 2000, Some(0));
        s.wake(501, MAIN);
        s.resume(MAIN);
        s.compute(MAIN, 1000, Some(0));
        s.exit(501);
        s.exit(MAIN);
        let (stats, v, _) = export(&s.items);
        check_flow_slices(&v);
        let slices = events(&v, "X");
        let named = |n: &str| slices.iter().filter(|s| s["name"] == n).count();
        assert_eq!(named("thread start departure"), 1, "{v}");
        assert_eq!(named("thread start arrival"), 1);
        assert_eq!(named("wakeup departure"), 1);
        assert_eq!(named("wakeup arrival"), 1);
        assert_eq!(stats.flows, 2);
        assert_eq!(stats.flow_slices, 4);
        // The wakeup arrives inside the futex wait.
        let f = events(&v, "f")
            .into_iter()
            .find(|f| f["name"] == "wakeup")
            .unwrap();
        let ts = f["ts"].as_f64().unwrap();
        assert!(inside(&slices, &f["tid"], ts, "futex wait").is_some());
    }

    /// A flow of 3 µs between two threads with room around both vertices: its slices
    /// are as long as they may be (1 µs), and still its start event comes strictly
    /// before its end event (at one time, Perfetto may read the end first and drop it).
    #[test]
    fn a_short_flow_starts_before_it_ends() {
        let departure = Endpoint {
            ts_ns: 10_000,
            pid: 1,
            id: 1,
            start: true,
            span_ns: 3000,
            name: "wakeup",
            critical: false,
        };
        let arrival = Endpoint {
            ts_ns: 13_000,
            pid: 2,
            start: false,
            ..departure
        };
        let mut out = EventWriter::begin(Vec::new()).unwrap();
        let mut stats = ExportStats::default();
        flow_slice(&mut out, &mut stats, &[departure], 1, 10_000, 50_000, 0).unwrap();
        flow_slice(&mut out, &mut stats, &[arrival], 2, 0, 13_000, 0).unwrap();
        let v: Value = serde_json::from_slice(&out.finish(&json!({})).unwrap()).unwrap();
        check_flow_slices(&v);
        assert!(events(&v, "X").iter().all(|s| s["dur"] == 1.0));
        assert_eq!((stats.flows, stats.flow_slices), (1, 2));
    }

    #[test]
    fn unclosed_calls_are_counted_not_drawn() {
        let mut s = SyntheticRun::new(2, &["work"]);
        s.compute(0, 1000, Some(0));
        s.call(0, call::MPI_SEND, 1, 0, false);
        let (stats, v, _) = export(&s.items);
        assert_eq!(
            events(&v, "X")
                .iter()
                .filter(|e| e["pid"] != CRITICAL_PID)
                .count(),
            1
        );
        assert_eq!(stats.unclosed, 1);
    }

    #[test]
    fn a_recording_error_stops_the_export() {
        let items = ring();
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let stream = items
            .iter()
            .take(10)
            .cloned()
            .map(Ok)
            .chain([Err(RecordingError::Truncated("test"))]);
        let err = ChromeExport::new(&rg)
            .write(stream, Vec::new())
            .unwrap_err();
        assert!(matches!(
            err,
            ExportError::Recording(RecordingError::Truncated(_))
        ));
    }
}
