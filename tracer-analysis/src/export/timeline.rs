//! The timeline model every timeline export shares (Chrome JSON, Perfetto protobuf):
//! one track per traced thread, grouped by process; MPI/PVM calls, selected procedures
//! and futex waits as slices; every dependency of the activity graph (a message, a
//! collective, a wakeup, a thread start) as a flow between a short departure slice on
//! the sending thread and a short arrival slice on the receiving one; and the critical
//! path as a track of its own. A format only says how to write each piece: it
//! implements [`TimelineSink`]. docs/chrome-export.md and docs/exports.md describe the
//! mapping.

use crate::format::node::ShownId;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracer_common::{kind, CallRecord, UNSET, UNSET32};

use super::ExportError;
use crate::analysis::futex_waits;
use crate::analysis::ordered::{read_ordered, Ordered};
use crate::analysis::workclock::ClockKind;
use crate::format::calls::{self, split_call_field, Family, Role};
use crate::format::pairing::{close_call, drop_unwound};
use crate::format::recording::{Item, ItemSource, RecordingError, RecordingReader};
use crate::format::records::Record;
use crate::format::summary::Summary;
use crate::graph::cpm::Schedule;
use crate::graph::path::ProcedureNames;
use crate::graph::recorded::RecordedGraph;
use crate::graph::{ArcKind, Vertex};

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
pub(crate) struct CriticalSlice {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    /// Shared with the other slices of the procedure (a long path has hundreds of
    /// thousands).
    pub(crate) procedure: Arc<str>,
    pub(crate) work_ns: u64,
}

/// One end of a flow arrow, at a graph vertex: the event of thread `tid` at `ts_ns`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Endpoint {
    pub(crate) ts_ns: u64,
    pub(crate) pid: u32,
    pub(crate) id: u64,
    /// The sending end (a departure), else the receiving end (an arrival).
    pub(crate) start: bool,
    /// Time from the source event to the target event.
    pub(crate) span_ns: u64,
    /// What the dependency is (the flow's name).
    pub(crate) name: &'static str,
    pub(crate) critical: bool,
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
    pub(crate) fn cat(&self) -> &'static str {
        if self.critical {
            CRITICAL_FLOW_CAT
        } else {
            FLOW_CAT
        }
    }
}

/// The first pass's result: what the timeline needs from the graph, and the graph
/// itself is dropped. A format writes it with [`TimelinePlan::stream`].
pub struct TimelinePlan {
    pub(crate) clock: ClockKind,
    /// The first analysed record's time.
    pub(crate) base_ns: u64,
    pub(crate) critical: Vec<CriticalSlice>,
    pub(crate) critical_length_ns: u64,
    /// Flow ends per thread, by time.
    endpoints: FxHashMap<u32, VecDeque<Endpoint>>,
    /// Ranks the matcher learned, for processes the summary has none for.
    pub(crate) ranks: HashMap<u32, i32>,
    /// Events in the recording, and events the probes dropped (the timeline misses
    /// their calls and messages).
    pub events_recorded: u64,
    pub events_lost: u64,
}

impl TimelinePlan {
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
        let names = ProcedureNames::new(rg);
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
                    procedure: names.of_arc(g, id),
                    work_ns: a.weight,
                }
            })
            .collect();
        // A flag per arc, not a hash set: a long path has hundreds of thousands of arcs.
        let mut on_path = vec![false; g.arcs.len()];
        for &id in &path {
            on_path[id as usize] = true;
        }
        let mut endpoints: FxHashMap<u32, VecDeque<Endpoint>> = FxHashMap::default();
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
                critical: on_path[i],
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
        TimelinePlan {
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

    /// The second pass: streams the timeline of `source` (the same recording, in file
    /// order) into `sink`: every slice as it closes, every flow end in a slice of its
    /// own, the scheduler's records as they come. Returns what the names need.
    pub(crate) fn stream<S: TimelineSink>(
        &mut self,
        source: &mut (impl ItemSource + Send),
        sink: &mut S,
        stats: &mut ExportStats,
    ) -> Result<Streamed, ExportError> {
        let mut timeline = Timeline {
            threads: FxHashMap::default(),
            endpoints: std::mem::take(&mut self.endpoints),
            probe_names: FxHashMap::default(),
            seen: BTreeSet::new(),
        };
        // The records are ordered (and the summary built) on a thread of their own; this
        // one makes and writes the timeline.
        let ending = read_ordered(source, true, |entry| timeline.take(entry, sink, stats))?;
        let summary = ending.summary.expect("the summary was asked for");
        timeline.finish(sink, stats)?;
        Ok(Streamed {
            summary,
            threads: timeline.seen,
        })
    }

    /// A process's name on the timeline: its command, with its MPI rank or PVM task id.
    pub(crate) fn process_name(&self, p: &crate::format::summary::ProcessSummary) -> String {
        let command = if p.command.is_empty() {
            format!("pid {}", ShownId(p.pid))
        } else {
            p.command.clone()
        };
        match (self.rank(p), p.pvm_tid) {
            (Some(r), _) => format!("rank {r}: {command}"),
            (None, Some(t)) => format!("pvm task {t:#x}: {command}"),
            (None, None) => command,
        }
    }

    /// A process's MPI rank, from its launcher's environment or the matcher.
    pub(crate) fn rank(&self, p: &crate::format::summary::ProcessSummary) -> Option<i32> {
        p.rank.or_else(|| self.ranks.get(&p.pid).copied())
    }
}

/// What the second pass leaves for the names of the tracks.
pub(crate) struct Streamed {
    pub(crate) summary: Summary,
    /// Every thread with a record.
    pub(crate) threads: BTreeSet<TrackedThread>,
}

/// A thread of the timeline, in the order of its tracks: by process, then thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TrackedThread {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
}

/// A thread's name on the timeline.
pub(crate) fn thread_name(pid: u32, tid: u32) -> &'static str {
    if pid == tid {
        "main"
    } else {
        "thread"
    }
}

/// A slice's arguments: named integers (what a call moved, a critical slice's work),
/// kept in name order, as the keys of a JSON object sort. A fixed array: the second
/// pass makes one per call slice, millions in a big recording.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IntArgs {
    items: [IntArg; 7],
    len: usize,
}

/// One named integer of a slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntArg {
    pub(crate) name: &'static str,
    pub(crate) value: i64,
}

impl IntArg {
    pub(crate) fn new(name: &'static str, value: i64) -> Self {
        IntArg { name, value }
    }
}

impl IntArgs {
    /// At most 7 arguments.
    pub(crate) fn new(args: impl IntoIterator<Item = IntArg>) -> Self {
        let mut all = IntArgs::default();
        for a in args {
            all.items[all.len] = a;
            all.len += 1;
        }
        all.items[..all.len].sort_unstable_by_key(|a| a.name);
        all
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The arguments, by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = IntArg> + '_ {
        self.items[..self.len].iter().copied()
    }
}

/// A closed slice of a thread track.
pub(crate) struct Slice<'a> {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) name: &'a str,
    pub(crate) cat: &'static str,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// What a call moved (peer, tag, bytes, ...).
    pub(crate) args: Option<&'a IntArgs>,
}

/// The slice of the flow ends at one vertex (all departures or all arrivals), and the
/// time inside it where the flow events sit.
pub(crate) struct FlowSlice<'a> {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    /// "message departure", "wakeup arrival", ...
    pub(crate) name: &'a str,
    pub(crate) cat: &'static str,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) flows_at_ns: u64,
    pub(crate) ends: &'a [Endpoint],
}

/// How a format writes the timeline's pieces, in the order the second pass makes them
/// (slices when they close, so not by start time).
pub(crate) trait TimelineSink {
    fn slice(&mut self, s: &Slice) -> io::Result<()>;
    fn flow_slice(&mut self, s: &FlowSlice) -> io::Result<()>;
    /// A scheduler record (switch, wakeup), which the slices and flows skip.
    fn sched(&mut self, _r: &Record) -> io::Result<()> {
        Ok(())
    }
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
    fn boundary<S: TimelineSink>(
        &mut self,
        ts: u64,
        tid: u32,
        out: &mut S,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        if let Some((at, ends)) = self.departing.take() {
            flow_slice(out, stats, &ends, tid, at, ts)?;
        }
        self.last_mark = Some(ts);
        Ok(())
    }

    /// Flow ends at one vertex, all starts or all ends. Arrivals are placed before the
    /// vertex, after the previous mark (halfway to it from a departure in waiting);
    /// departures wait for the next mark.
    fn flow_ends<S: TimelineSink>(
        &mut self,
        ends: Vec<Endpoint>,
        tid: u32,
        out: &mut S,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        let at = ends[0].ts_ns;
        let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
        let mut from = self.last_mark.unwrap_or(at.saturating_sub(span)).min(at);
        if let Some((dep, waiting)) = self.departing.take() {
            let mid = dep + (at - dep) / 2;
            flow_slice(out, stats, &waiting, tid, dep, mid)?;
            from = mid;
        }
        if ends[0].start {
            self.departing = Some((at, ends));
        } else {
            flow_slice(out, stats, &ends, tid, from, at)?;
        }
        self.last_mark = Some(at);
        Ok(())
    }
}

/// The slice of flow ends at one vertex, in the free time `from..to` next to it (no
/// other slice starts or ends there): a departure's just after its vertex `from`, an
/// arrival's just before its vertex `to`. Each is at most `x` long, a third of that
/// time, of the shortest flow's span and [`FLOW_SLICE_MAX_NS`]; a departure starts `x`
/// after its vertex, an arrival ends `x / 2` before its one: every departure slice then
/// starts before its arrival slice whenever the flow spans 3 ns or more (Perfetto draws
/// a JSON flow from the earlier of its two slices, and reads a protobuf flow's arrival
/// seen before its departure as no flow at all). The flow events sit inside it, a quarter
/// of it from its start (a departure) or its end (an arrival): a flow's start event is
/// then strictly earlier than its end event, as Perfetto needs to pair them.
pub(crate) fn flow_slice<S: TimelineSink>(
    out: &mut S,
    stats: &mut ExportStats,
    ends: &[Endpoint],
    tid: u32,
    from: u64,
    to: u64,
) -> io::Result<()> {
    let first = &ends[0];
    let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
    let x = (to.saturating_sub(from) / 3)
        .min(span / 3)
        .min(FLOW_SLICE_MAX_NS);
    let start = if first.start {
        from + x
    } else {
        to - x - x / 2
    };
    let name = flow_slice_name(first.name, first.start);
    let cat = if ends.iter().any(|e| e.critical) {
        CRITICAL_FLOW_CAT
    } else {
        FLOW_CAT
    };
    let at = if first.start {
        start + x / 4
    } else {
        start + x - x / 4
    };
    out.flow_slice(&FlowSlice {
        pid: first.pid,
        tid,
        name: &name,
        cat,
        start_ns: start,
        end_ns: start + x,
        flows_at_ns: at,
        ends,
    })?;
    stats.flow_slices += 1;
    stats.flows += ends.iter().filter(|e| e.start).count() as u64;
    Ok(())
}

/// "message departure", "wakeup arrival", ...: static for the names
/// [`dependency_name`] gives (one flow slice per dependency end, millions in a big
/// recording).
fn flow_slice_name(name: &'static str, start: bool) -> Cow<'static, str> {
    Cow::Borrowed(match (name, start) {
        ("wakeup", true) => "wakeup departure",
        ("wakeup", false) => "wakeup arrival",
        ("thread start", true) => "thread start departure",
        ("thread start", false) => "thread start arrival",
        ("collective", true) => "collective departure",
        ("collective", false) => "collective arrival",
        ("join", true) => "join departure",
        ("join", false) => "join arrival",
        ("lock", true) => "lock departure",
        ("lock", false) => "lock arrival",
        ("openmp", true) => "openmp departure",
        ("openmp", false) => "openmp arrival",
        ("message", true) => "message departure",
        ("message", false) => "message arrival",
        _ => {
            let side = if start { "departure" } else { "arrival" };
            return Cow::Owned(format!("{name} {side}"));
        }
    })
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
    // Looked up per record: hashed with Fx, not SipHash (5 % of the export's samples).
    threads: FxHashMap<u32, ThreadTrack>,
    endpoints: FxHashMap<u32, VecDeque<Endpoint>>,
    probe_names: FxHashMap<u16, String>,
    /// (pid, tid) of every thread with a record.
    seen: BTreeSet<TrackedThread>,
}

/// A slice a record closed.
struct Closed {
    name: ClosedName,
    cat: &'static str,
    start_ns: u64,
    args: Option<IntArgs>,
}

/// A closed slice's name: a call's or the futex wait's, or a probe's, looked up when the
/// slice is written (a copy of the name per procedure slice was a malloc and a free).
enum ClosedName {
    Text(Cow<'static, str>),
    Probe(u16),
}

impl Timeline {
    /// An ordered entry: a record's slices and flow ends into `out`, a probe's name.
    fn take<S: TimelineSink>(
        &mut self,
        entry: &Ordered,
        out: &mut S,
        stats: &mut ExportStats,
    ) -> Result<(), ExportError> {
        match entry {
            Ordered::Record(r) => self.record(r, out, stats)?,
            Ordered::Fact(Item::Probe(p)) => {
                self.probe_names.insert(p.id, p.name());
            }
            Ordered::Fact(_) => {}
        }
        Ok(())
    }

    /// Slices are emitted when they close. Every flow end gets a short slice of its
    /// own, next to its vertex, in which the flow event sits: Perfetto binds a flow
    /// event to the innermost slice open at its time and orients the arrow by the
    /// start times of the two slices, so a flow bound to a blocking receive (which
    /// starts before its send) would point backwards, and one at a point with no slice
    /// (a new thread's start) would be dropped. The marks of a thread (slice starts and
    /// ends, flow-end vertices) are taken in time order; a departure slice goes in the
    /// free time after its vertex, an arrival slice in the free time before it (see
    /// [`flow_slice`]), so that the flow slices nest in the call slices.
    fn record<S: TimelineSink>(
        &mut self,
        r: &Record,
        out: &mut S,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        // A wakeup's header is the waker (maybe untraced), a switch-in's may lack its
        // process: neither is an event of the thread the analysis counts.
        if matches!(
            r,
            Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
        ) {
            return out.sched(r);
        }
        if let Record::SwitchOut(_) = r {
            out.sched(r)?;
        }
        let h = *r.header();
        let ts = h.ts_ns;
        self.seen.insert(TrackedThread {
            pid: h.tgid,
            tid: h.tid,
        });
        let t = self.threads.entry(h.tid).or_default();
        t.pid = h.tgid;
        let (boundary, closed) = match r {
            Record::CallEnter(c) => {
                t.calls.push(*c);
                (true, None)
            }
            Record::CallsUnwound(u) => {
                drop_unwound(&mut t.calls, u.calls);
                (false, None)
            }
            // Paired by call id: a missing exit or entry costs that call alone.
            Record::CallExit(x) => {
                match close_call(&mut t.calls, split_call_field(h.call).id, |e| {
                    split_call_field(e.header.call).id
                }) {
                    Some(closed) => (true, Some(call_slice(&closed.entry, x))),
                    None => (false, None),
                }
            }
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
                        name: ClosedName::Probe(id),
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
                        name: ClosedName::Text(Cow::Borrowed("futex wait")),
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
        let ends = &mut self.endpoints;
        while let Some(v) = next_vertex(ends.get_mut(&h.tid), |e| {
            e.ts_ns < ts || (e.ts_ns == ts && !e.start)
        }) {
            t.flow_ends(v, h.tid, out, stats)?;
        }
        if boundary {
            t.boundary(ts, h.tid, out, stats)?;
        }
        while let Some(v) = next_vertex(ends.get_mut(&h.tid), |e| e.ts_ns == ts) {
            t.flow_ends(v, h.tid, out, stats)?;
        }
        if let Some(c) = closed {
            let name: &str = match &c.name {
                ClosedName::Text(name) => name,
                ClosedName::Probe(id) => &self.probe_names[id],
            };
            out.slice(&Slice {
                pid: h.tgid,
                tid: h.tid,
                name,
                cat: c.cat,
                start_ns: c.start_ns,
                end_ns: ts,
                args: c.args.as_ref(),
            })?;
            stats.slices += 1;
        }
        Ok(())
    }

    /// Flow ends after a thread's last record, and departures that found no later
    /// mark (a departure slice then ends within the flow's span); what is still open is
    /// counted.
    fn finish<S: TimelineSink>(&mut self, out: &mut S, stats: &mut ExportStats) -> io::Result<()> {
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.extend(self.endpoints.keys());
        tids.sort_unstable();
        tids.dedup();
        for tid in tids {
            let t = self.threads.entry(tid).or_default();
            stats.unclosed +=
                (t.calls.len() + t.procedures.len()) as u64 + t.futex_wait.is_some() as u64;
            while let Some(v) = next_vertex(self.endpoints.get_mut(&tid), |_| true) {
                t.flow_ends(v, tid, out, stats)?;
            }
            if let Some((at, ends)) = t.departing.take() {
                let span = ends.iter().map(|e| e.span_ns).min().unwrap_or(0);
                flow_slice(out, stats, &ends, tid, at, at + span)?;
            }
        }
        Ok(())
    }
}
/// The slice of a completed call: its name, family, and the arguments that say what it
/// moved.
fn call_slice(e: &CallRecord, x: &CallRecord) -> Closed {
    let id = split_call_field(e.header.call).id;
    let spec = calls::spec(id);
    let i32_set = |v: i32| (v != UNSET32).then_some(v as i64);
    let i64_set = |v: i64| (v != UNSET).then_some(v);
    let received = spec.is_some_and(|s| matches!(s.role, Role::Recv | Role::SendRecv));
    let pairs = [
        ("peer", i32_set(e.peer)),
        ("tag", i32_set(e.tag)),
        ("bytes", i64_set(e.bytes)),
        ("source", i32_set(x.peer).filter(|_| received)),
        ("received_tag", i32_set(x.tag).filter(|_| received)),
        ("received_bytes", i64_set(x.bytes).filter(|_| received)),
        ("ret", i64_set(x.ret)),
    ];
    let args = IntArgs::new(
        pairs
            .into_iter()
            .filter_map(|(name, value)| Some(IntArg::new(name, value?))),
    );
    Closed {
        name: ClosedName::Text(match spec {
            Some(s) => Cow::Borrowed(s.symbol),
            None => Cow::Owned(calls::name(id)),
        }),
        cat: match spec.map(|s| s.family) {
            Some(Family::Mpi) => "mpi",
            Some(Family::Pvm) => "pvm",
            Some(Family::Threads) => "pthread",
            Some(Family::OpenMp) => "openmp",
            None => "call",
        },
        start_ns: e.header.ts_ns,
        args: (!args.is_empty()).then_some(args),
    }
}
