//! What an OTF2 archive of a recording holds, in pure Rust: the definitions (processes
//! as location groups, threads as locations, regions, communicators) and every
//! location's events in time order. `tracer-user` writes it through the OTF2 C library
//! (tracer-user/src/render/otf2); this module decides what goes in, so that the
//! analysis crate stays free of C. docs/exports.md describes the mapping.
//!
//! Enumerations carry OTF2's own numbers (OTF2_Definitions.h, OTF2_Events.h,
//! OTF2_GeneralDefinitions.h of OTF2 3.0), so the writer passes them on unchanged.

use crate::format::node::ShownId;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use rustc_hash::FxHashMap;

use tracer_common::{call, CallRecord, UNSET, UNSET32};

use super::ExportError;
use crate::analysis::directory::Directory;
use crate::analysis::reorder::ReorderBuffer;
use crate::analysis::workclock::ClockKind;
use crate::analysis::{futex_waits, REORDER_WINDOW_NS};
use crate::format::call_facts::{
    AskedEnvelope, CollectiveOp, Moment, Receives, RequestsIn, Sends, StatusAt, SEND_POSTED_AT,
};
use crate::format::calls::{self, split_call_field, CallField, Family, Flavor, Role};
use crate::format::recording::{
    FunctionProbe, Item, RecordingError, RecordingMeta, RecordingReader,
};
use crate::format::records::Record;
use crate::graph::cpm::Schedule;
use crate::graph::recorded::RecordedGraph;
use crate::graph::ArcKind;

/// `OTF2_RegionRole` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RegionRole {
    Unknown = 0,
    Function = 1,
    Barrier = 15,
    CollOne2All = 23,
    CollAll2One = 24,
    CollAll2All = 25,
    CollOther = 26,
    PointToPoint = 28,
    Rma = 29,
    ThreadCreate = 32,
    ThreadWait = 33,
}

/// `OTF2_Paradigm` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Paradigm {
    Unknown = 0,
    User = 1,
    OpenMp = 3,
    Mpi = 4,
    Pthread = 7,
}

/// `OTF2_COLLECTIVE_ROOT_NONE`: a collective without a root.
pub const ROOT_NONE: u32 = u32::MAX;

/// A region: an MPI/PVM/pthread call, a selected procedure, or a futex wait.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    /// As tools show it: a selected procedure's demangled name (C++, Rust).
    pub name: String,
    /// As the binary has it: a selected procedure's symbol (mangled for C++ and Rust);
    /// the name for every other region.
    pub canonical_name: String,
    pub role: RegionRole,
    pub paradigm: Paradigm,
}

/// One event of a location. Communicators are indices into [`Otf2Trace::comms`];
/// ranks (receiver, sender, root) are ranks in that communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Enter {
        region: u32,
    },
    Leave {
        region: u32,
    },
    MpiSend(Message),
    MpiIsend {
        message: Message,
        request: u64,
    },
    MpiIsendComplete {
        request: u64,
    },
    MpiIrecvRequest {
        request: u64,
    },
    MpiRecv(Message),
    MpiIrecv {
        message: Message,
        request: u64,
    },
    MpiCollectiveBegin,
    MpiCollectiveEnd {
        op: CollectiveOp,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    },
    /// A thread of this process was created (`comm`: the process's thread contingent,
    /// by its local id, see [`Location::thread_comm`]; `sequence`: what the new
    /// thread's `ThreadBegin` carries too).
    ThreadCreate {
        comm: u32,
        sequence: u64,
    },
    ThreadBegin {
        comm: u32,
        sequence: u64,
    },
    ThreadEnd {
        comm: u32,
        sequence: u64,
    },
    /// The critical-path metric: this location's work on the critical path so far (ns).
    CriticalPath {
        ns: u64,
    },
}

/// A point-to-point message as one side sees it: the peer is the receiver of a send
/// and the sender of a receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub peer: u32,
    pub comm: u32,
    pub tag: u32,
    pub bytes: u64,
}

/// An event at a time (ns, the recording's monotonic clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed {
    pub ts_ns: u64,
    pub event: Event,
}

/// A communicator: MPI ones (members: MPI_COMM_WORLD ranks) and, per process with
/// threads, its thread contingent (members: indices into [`Otf2Trace::thread_locations`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comm {
    pub name: String,
    pub paradigm: Paradigm,
    pub members: Vec<u64>,
}

/// A process: an OTF2 location group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub rank: Option<i32>,
    pub name: String,
}

/// A thread: an OTF2 location (its id is the thread id). Its events went to the sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub tid: u32,
    /// Index into [`Otf2Trace::processes`].
    pub process: u32,
    pub name: String,
    /// The communicator id this location's thread events carry, and the thread
    /// contingent it stands for (an index into [`Otf2Trace::comms`]): the contingents
    /// are numbered after the MPI communicators, known only at the end, so the events
    /// carry a local id and the location's local definitions map it.
    pub thread_comm: Option<CommMapping>,
}

/// A location's local communicator id and the global one it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommMapping {
    pub local: u32,
    pub global: u32,
}

/// The definitions of the archive, known once every event has been streamed.
#[derive(Clone, Debug)]
pub struct Otf2Trace {
    pub clock: ClockKind,
    /// The machine the recording was made on (its system tree node).
    pub machine: String,
    /// The recording's start: wall clock (Unix ns) and probe clock, read together.
    pub start_unix_ns: u128,
    pub start_monotonic_ns: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    pub processes: Vec<Process>,
    pub locations: Vec<Location>,
    pub regions: Vec<Region>,
    pub comms: Vec<Comm>,
    /// The MPI locations by MPI_COMM_WORLD rank (each rank's main thread).
    pub mpi_locations: Vec<u64>,
    /// The locations that create or are threads (the thread contingents' members).
    pub thread_locations: Vec<u64>,
    pub critical_path_ns: u64,
    pub events_recorded: u64,
    pub events_lost: u64,
    /// Calls, procedures and waits never closed: their Enter is left out.
    pub unclosed: u64,
}

/// What an export wrote, for its report line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Otf2Stats {
    pub locations: usize,
    pub regions: usize,
    pub comms: usize,
    pub events: u64,
    pub critical_path_ns: u64,
    /// The recording's events and the ones it lost (for the warning on losses).
    pub events_recorded: u64,
    pub events_lost: u64,
}

/// Where the events go, location by location, each location's in time order (the
/// locations interleave). `tracer-user`'s archive writer is one.
pub trait Otf2Sink {
    type Error;
    fn event(&mut self, tid: u32, event: &Timed) -> Result<(), Self::Error>;
}

/// What the first pass (the graph) leaves for the second: the critical path metric per
/// location and the figures of the definitions. The graph itself is dropped.
pub struct Otf2Plan {
    clock: ClockKind,
    meta: RecordingMeta,
    first_ts: u64,
    last_ts: u64,
    events_recorded: u64,
    events_lost: u64,
    critical_path_ns: u64,
    ranks: HashMap<u32, i32>,
    /// Per thread: its critical path metric events, in time order.
    metrics: HashMap<u32, VecDeque<Timed>>,
}

impl Otf2Plan {
    /// The first pass: reads the recording's graph (the critical path).
    pub fn read(path: &Path, clock: ClockKind) -> Result<Self, ExportError> {
        let mut items = RecordingReader::open(path)?;
        let rg = RecordedGraph::read(&mut items, clock)?;
        Ok(Self::new(&rg, items.meta))
    }

    pub fn new(rg: &RecordedGraph, meta: RecordingMeta) -> Self {
        let schedule = Schedule::new(&rg.graph);
        Otf2Plan {
            clock: rg.clock,
            meta,
            first_ts: rg.first_ts,
            last_ts: rg.last_ts,
            events_recorded: rg.events,
            events_lost: rg.lost,
            critical_path_ns: schedule.length,
            ranks: rg
                .processes
                .iter()
                .filter_map(|(&pid, p)| Some((pid, p.rank?)))
                .collect(),
            metrics: critical_path(rg, &schedule),
        }
    }

    /// The second pass: streams the events of `items` (the same recording, in file
    /// order) into `sink` and returns the definitions. A thread's events wait only
    /// while they may still change: behind a call, procedure or wait still open (its
    /// Enter goes if it never closes), or after a clone whose new thread has not shown
    /// up yet (its ThreadCreate goes before them).
    pub fn stream<S: Otf2Sink>(
        self,
        items: impl IntoIterator<Item = Result<Item, RecordingError>>,
        sink: &mut S,
    ) -> Result<Otf2Trace, S::Error>
    where
        S::Error: From<RecordingError>,
    {
        let mut b = Builder {
            metrics: self.metrics,
            ..Builder::default()
        };
        let mut reorder = ReorderBuffer::new(REORDER_WINDOW_NS);
        let mut out: Vec<(u32, Timed)> = Vec::new();
        let send = |out: &mut Vec<(u32, Timed)>, sink: &mut S| -> Result<(), S::Error> {
            for (tid, e) in out.drain(..) {
                sink.event(tid, &e)?;
            }
            Ok(())
        };
        for item in items {
            match item? {
                Item::Record(r) => {
                    reorder.push(&r);
                    reorder.ready(|r| b.record(&r, &mut out));
                }
                Item::Probe(p) => {
                    b.region_keys.remove(&RegionKey::Procedure(p.id));
                    b.probes.insert(p.id, p);
                }
                Item::Process(p) => {
                    b.directory.process(&p);
                    b.commands.insert(p.pid, p.command.clone());
                }
            }
            send(&mut out, sink)?;
        }
        reorder.flush(|r| b.record(&r, &mut out));
        send(&mut out, sink)?;
        let mut trace = b.finish(&self.ranks, &mut out);
        send(&mut out, sink)?;
        trace.clock = self.clock;
        trace.first_ts = self.first_ts;
        trace.last_ts = self.last_ts;
        trace.events_recorded = self.events_recorded;
        trace.events_lost = self.events_lost;
        trace.critical_path_ns = self.critical_path_ns;
        trace.machine = if self.meta.hostname.is_empty() {
            "localhost".into()
        } else {
            self.meta.hostname.clone()
        };
        trace.start_unix_ns = self.meta.start_unix_ns;
        trace.start_monotonic_ns = self.meta.start_monotonic_ns;
        Ok(trace)
    }
}

/// The critical path as a metric per location: at the start and end of each of its
/// work arcs, the location's work on the path so far. The last value of a location is
/// its share of the path; over all locations they add up to the path's length.
fn critical_path(rg: &RecordedGraph, schedule: &Schedule) -> HashMap<u32, VecDeque<Timed>> {
    let g = &rg.graph;
    let mut so_far: HashMap<u32, u64> = HashMap::new();
    let mut metrics: HashMap<u32, VecDeque<Timed>> = HashMap::new();
    for id in schedule.critical_arcs(g, |_, a| a.weight) {
        let a = g.arc(id);
        if a.kind != ArcKind::Program || a.weight == 0 {
            continue;
        }
        let (from, to) = (&g.vertices[a.from as usize], &g.vertices[a.to as usize]);
        let total = so_far.entry(to.tid).or_default();
        let events = metrics.entry(to.tid).or_default();
        let start = Timed {
            ts_ns: from.ts_ns,
            event: Event::CriticalPath { ns: *total },
        };
        // Two arcs of the path in a row: the first one's end is the second one's start.
        if events.back() != Some(&start) {
            events.push_back(start);
        }
        *total += a.weight;
        events.push_back(Timed {
            ts_ns: to.ts_ns.max(from.ts_ns),
            event: Event::CriticalPath { ns: *total },
        });
    }
    for events in metrics.values_mut() {
        events.make_contiguous().sort_by_key(|e| e.ts_ns);
    }
    metrics
}

/// A call in progress on a thread.
struct OpenCall {
    entry: CallRecord,
    /// Its region's Enter, in the thread's events (removed if the call never returns).
    enter_at: usize,
    handles: Vec<u64>,
    statuses: Vec<Status>,
}

/// One status MPI_Waitall wrote.
#[derive(Clone, Copy)]
struct Status {
    source: i32,
    tag: i32,
    bytes: i64,
}

/// A nonblocking point-to-point request in flight.
#[derive(Clone, Copy)]
enum Pending {
    Send,
    Recv(Message),
}

/// The events of a thread not yet sent, as three streams merged in time order when
/// they go out (at one time: recorded events, then ThreadCreates, then the metric, as
/// a stable sort of them all would order them).
#[derive(Default)]
struct EventBuffer {
    /// Recorded events, in time order; `base` is the number of those already sent, so
    /// that an event keeps its index (`enter_at`) while earlier ones leave.
    recorded: VecDeque<Timed>,
    base: usize,
    /// ThreadCreates, made when the new thread shows up (after later events).
    created: Vec<Timed>,
    metric: VecDeque<Timed>,
}

impl std::ops::Index<usize> for EventBuffer {
    type Output = Timed;
    fn index(&self, at: usize) -> &Timed {
        &self.recorded[at - self.base]
    }
}

impl std::ops::IndexMut<usize> for EventBuffer {
    fn index_mut(&mut self, at: usize) -> &mut Timed {
        &mut self.recorded[at - self.base]
    }
}

/// The Enter of a call, procedure or wait that never closed: left out.
const DROPPED: Event = Event::Enter { region: u32::MAX };

impl EventBuffer {
    fn push(&mut self, e: Timed) -> usize {
        self.recorded.push_back(e);
        self.base + self.recorded.len() - 1
    }

    /// Sends `tid`'s events before `limit` (all with `None`) to `out`, in time order.
    fn drain(&mut self, tid: u32, limit: Option<u64>, out: &mut Vec<(u32, Timed)>) {
        loop {
            // Most events are recorded ones with nothing else waiting.
            if self.created.is_empty()
                && self
                    .metric
                    .front()
                    .is_none_or(|m| self.recorded.front().is_some_and(|r| r.ts_ns <= m.ts_ns))
            {
                match self.recorded.front() {
                    Some(e) if limit.is_none_or(|l| e.ts_ns < l) => {
                        self.base += 1;
                        let e = self.recorded.pop_front().unwrap();
                        if e.event != DROPPED {
                            out.push((tid, e));
                        }
                        continue;
                    }
                    Some(_) => return,
                    None => {}
                }
            }
            let fronts = [
                self.recorded.front(),
                self.created.first(),
                self.metric.front(),
            ];
            // The earliest goes next; at one time, the streams in the order above.
            let Some((ts, stream)) = fronts
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Some((e.as_ref()?.ts_ns, i)))
                .min()
            else {
                return;
            };
            if limit.is_some_and(|l| ts >= l) {
                return;
            }
            let e = match stream {
                0 => {
                    self.base += 1;
                    self.recorded.pop_front().unwrap()
                }
                1 => self.created.remove(0),
                _ => self.metric.pop_front().unwrap(),
            };
            if e.event != DROPPED {
                out.push((tid, e));
            }
        }
    }
}

#[derive(Default)]
struct Thread {
    pid: u32,
    events: EventBuffer,
    calls: Vec<OpenCall>,
    procedures: Vec<(u16, usize)>,
    futex_wait: Option<usize>,
    /// This thread's thread-contingent sequence number, if it began as a new thread.
    sequence: Option<u64>,
    /// Times of this thread's clones whose new thread has not shown up yet.
    clones: Vec<u64>,
}

impl Thread {
    /// The first of its events that may still change: a call's, procedure's or wait's
    /// Enter still open.
    fn first_open(&self) -> Option<usize> {
        let calls = self.calls.iter().map(|c| c.enter_at);
        let procedures = self.procedures.iter().map(|p| p.1);
        calls.chain(procedures).chain(self.futex_wait).min()
    }

    /// Sends the events that can no longer change or be preceded by another: before
    /// `now` (later records are not earlier), before a clone still unseen, before the
    /// first Enter still open.
    fn flush(&mut self, tid: u32, now: u64, out: &mut Vec<(u32, Timed)>) {
        let mut limit = now;
        if let Some(&c) = self.clones.iter().min() {
            limit = limit.min(c);
        }
        if let Some(at) = self.first_open() {
            limit = limit.min(self.events[at].ts_ns);
        }
        self.events.drain(tid, Some(limit), out);
    }
}

#[derive(Default)]
struct Builder {
    directory: Directory,
    commands: HashMap<u32, String>,
    probes: HashMap<u16, FunctionProbe>,
    threads: BTreeMap<u32, Thread>,
    regions: Vec<Region>,
    region_ids: HashMap<Region, u32>,
    region_keys: FxHashMap<RegionKey, u32>,
    /// Directory communicator id -> our communicator index.
    mpi_comms: BTreeMap<u32, u32>,
    pending: FxHashMap<(u32, u64), Pending>,
    /// Persistent requests (MPI_Send_init, MPI_Recv_init) by (pid, request): their
    /// init's entry, which each MPI_Start starts again.
    persistent: FxHashMap<(u32, u64), CallRecord>,
    /// Threads cloned and not yet seen: their creator's (tid, pid) and the time.
    forks: HashMap<u32, Fork>,
    /// Per process: threads created so far (the next sequence number).
    created: HashMap<u32, u64>,
    unclosed: u64,
    /// The critical path metric of threads not seen yet (see [`critical_path`]).
    metrics: HashMap<u32, VecDeque<Timed>>,
}

/// What a region stands for: a call (by id), a selected procedure (by probe id), or
/// the futex wait.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum RegionKey {
    Call(u16),
    Procedure(u16),
    FutexWait,
}

#[derive(Clone, Copy)]
struct Fork {
    parent_tid: u32,
    parent_pid: u32,
    ts_ns: u64,
}

fn set32(v: i32) -> Option<i32> {
    (v != UNSET32).then_some(v)
}

fn bytes_of(v: i64) -> u64 {
    if v == UNSET || v < 0 {
        0
    } else {
        v as u64
    }
}

impl Builder {
    fn region(&mut self, r: Region) -> u32 {
        let next = self.regions.len() as u32;
        *self.region_ids.entry(r.clone()).or_insert_with(|| {
            self.regions.push(r);
            next
        })
    }

    /// The region of `key`, made by `make` the first time (a call or procedure enters
    /// often: its region is looked up without building its name again).
    fn region_of(&mut self, key: RegionKey, make: impl FnOnce(&Self) -> Region) -> u32 {
        if let Some(&id) = self.region_keys.get(&key) {
            return id;
        }
        let id = self.region(make(self));
        self.region_keys.insert(key, id);
        id
    }

    /// Our index of the communicator `handle` of `pid`, if the directory knows it.
    fn comm(&mut self, pid: u32, handle: u64, flavor: Option<Flavor>) -> Option<u32> {
        let gid = self.directory.comm_of(pid, handle, flavor)?;
        let next = self.mpi_comms.len() as u32;
        Some(*self.mpi_comms.entry(gid).or_insert(next))
    }

    fn push(&mut self, tid: u32, ts_ns: u64, event: Event) -> usize {
        let t = self.threads.entry(tid).or_default();
        t.events.push(Timed { ts_ns, event })
    }

    /// Takes a record in, then sends its thread's events that are final to `out`.
    fn record(&mut self, r: &Record, out: &mut Vec<(u32, Timed)>) {
        self.apply(r);
        let h = r.header();
        if let Some(t) = self.threads.get_mut(&h.tid) {
            t.flush(h.tid, h.ts_ns, out);
        }
    }

    fn apply(&mut self, r: &Record) {
        // A wakeup's header is the waker (maybe untraced), a switch-in's may lack its
        // process: neither is an event of the thread.
        if matches!(
            r,
            Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
        ) {
            return;
        }
        let h = *r.header();
        let ts = h.ts_ns;
        let new = !self.threads.contains_key(&h.tid);
        let t = self.threads.entry(h.tid).or_default();
        t.pid = h.tgid;
        if new {
            t.events.metric = self.metrics.remove(&h.tid).unwrap_or_default();
            self.thread_seen(h.tid, h.tgid);
        }
        match r {
            Record::CallEnter(c) => self.call_enter(c),
            Record::CallExit(x) => self.call_exit(x),
            Record::HandleArray(a) => {
                let n = (a.total.saturating_sub(a.first) as usize).min(a.values.len());
                if let Some(c) = self
                    .threads
                    .get_mut(&h.tid)
                    .and_then(|t| t.calls.last_mut())
                {
                    c.handles.extend_from_slice(&a.values[..n]);
                }
            }
            Record::StatusArray(a) => {
                let n = (a.total.saturating_sub(a.first) as usize).min(a.source.len());
                if let Some(c) = self
                    .threads
                    .get_mut(&h.tid)
                    .and_then(|t| t.calls.last_mut())
                {
                    c.statuses.extend((0..n).map(|i| Status {
                        source: a.source[i],
                        tag: a.tag[i],
                        bytes: a.bytes[i],
                    }));
                }
            }
            Record::FuncEnter(_) if self.probes.contains_key(&h.call) => {
                let region = self.region_of(RegionKey::Procedure(h.call), |b| Region {
                    name: b.probes[&h.call].name(),
                    canonical_name: b.probes[&h.call].symbol.clone(),
                    role: RegionRole::Function,
                    paradigm: Paradigm::User,
                });
                let at = self.push(h.tid, ts, Event::Enter { region });
                self.threads
                    .get_mut(&h.tid)
                    .unwrap()
                    .procedures
                    .push((h.call, at));
            }
            Record::FuncExit(_) => {
                let t = self.threads.get_mut(&h.tid).unwrap();
                if let Some(i) = t.procedures.iter().rposition(|p| p.0 == h.call) {
                    // Procedures left without their exit (longjmp) lose their Enter.
                    for &(_, at) in &t.procedures[i + 1..] {
                        t.events[at].event = Event::Enter { region: u32::MAX };
                        self.unclosed += 1;
                    }
                    let (_, at) = t.procedures[i];
                    t.procedures.truncate(i);
                    let Event::Enter { region } = t.events[at].event else {
                        return;
                    };
                    self.push(h.tid, ts, Event::Leave { region });
                }
            }
            Record::FutexEnter(f) if futex_waits(f.op) => {
                let region = self.region_of(RegionKey::FutexWait, |_| Region {
                    name: "futex wait".into(),
                    canonical_name: "futex wait".into(),
                    role: RegionRole::ThreadWait,
                    paradigm: Paradigm::Pthread,
                });
                let at = self.push(h.tid, ts, Event::Enter { region });
                self.threads.get_mut(&h.tid).unwrap().futex_wait = Some(at);
            }
            Record::FutexExit(_) => {
                let t = self.threads.get_mut(&h.tid).unwrap();
                if let Some(at) = t.futex_wait.take() {
                    if let Event::Enter { region } = t.events[at].event {
                        self.push(h.tid, ts, Event::Leave { region });
                    }
                }
            }
            Record::Fork(f) => {
                let fork = Fork {
                    parent_tid: h.tid,
                    parent_pid: h.tgid,
                    ts_ns: ts,
                };
                if let Some(old) = self.forks.insert(f.child_tid, fork) {
                    self.clone_seen(old);
                }
                self.threads.get_mut(&h.tid).unwrap().clones.push(ts);
            }
            Record::Exit(_) => {
                let t = &self.threads[&h.tid];
                if let Some(sequence) = t.sequence {
                    let comm = self.thread_comm(h.tgid);
                    self.push(h.tid, ts, Event::ThreadEnd { comm, sequence });
                }
            }
            _ => {}
        }
    }

    /// A thread's first record: if its creator cloned it in the same process, the
    /// creator's ThreadCreate and its ThreadBegin, both at the clone.
    fn thread_seen(&mut self, tid: u32, pid: u32) {
        let Some(f) = self.forks.remove(&tid) else {
            return;
        };
        self.clone_seen(f);
        if f.parent_pid != pid || tid == pid {
            return;
        }
        let counter = self.created.entry(pid).or_default();
        let sequence = *counter;
        *counter += 1;
        let comm = self.thread_comm(pid);
        let parent = self.threads.entry(f.parent_tid).or_default();
        parent.pid = pid;
        let parent = &mut parent.events;
        // After the creator's events at the clone's time that came before it.
        let at = parent.created.partition_point(|e| e.ts_ns <= f.ts_ns);
        let create = Timed {
            ts_ns: f.ts_ns,
            event: Event::ThreadCreate { comm, sequence },
        };
        parent.created.insert(at, create);
        self.push(tid, f.ts_ns, Event::ThreadBegin { comm, sequence });
        self.threads.get_mut(&tid).unwrap().sequence = Some(sequence);
    }

    /// A clone's new thread showed up (or its id was cloned again): its creator's events
    /// after it no longer wait for its ThreadCreate.
    fn clone_seen(&mut self, f: Fork) {
        if let Some(t) = self.threads.get_mut(&f.parent_tid) {
            if let Some(i) = t.clones.iter().position(|&c| c == f.ts_ns) {
                t.clones.swap_remove(i);
            }
        }
    }

    /// The local id of a process's thread contingent in its events: the contingents
    /// are numbered after the MPI communicators in [`Self::finish`], after the events
    /// went out, so the events carry an id keyed by pid (`u32::MAX - pid` never
    /// collides with an MPI index) that [`Location::thread_comm`] maps.
    fn thread_comm(&self, pid: u32) -> u32 {
        u32::MAX - pid
    }

    fn call_enter(&mut self, e: &CallRecord) {
        let h = e.header;
        let CallField { id, flavor } = split_call_field(h.call);
        let flavor = Flavor::from_id(flavor);
        let spec = calls::spec(id);
        let region = self.region_of(RegionKey::Call(id), |_| Region {
            name: calls::name(id),
            canonical_name: calls::name(id),
            role: call_role(id, spec.map(|s| s.role)),
            paradigm: match spec.map(|s| s.family) {
                Some(Family::Mpi) => Paradigm::Mpi,
                Some(Family::Threads) => Paradigm::Pthread,
                Some(Family::OpenMp) => Paradigm::OpenMp,
                _ => Paradigm::Unknown,
            },
        });
        let outermost = self.threads[&h.tid].calls.is_empty();
        let enter_at = self.push(h.tid, h.ts_ns, Event::Enter { region });
        self.threads.get_mut(&h.tid).unwrap().calls.push(OpenCall {
            entry: *e,
            enter_at,
            handles: Vec::new(),
            statuses: Vec::new(),
        });
        if !outermost || !matches!(flavor, Some(Flavor::OpenMpi | Flavor::Mpich)) {
            return;
        }
        self.directory.calls_mpi(h.tgid);
        self.directory.setup_enter(h.tgid, e);
        let message = |b: &mut Self| {
            Some(Message {
                peer: set32(e.peer)? as u32,
                comm: b.comm(h.tgid, e.comm, flavor)?,
                tag: set32(e.tag)? as u32,
                bytes: bytes_of(e.bytes),
            })
        };
        if send_event_at(spec.and_then(|s| s.sends)) == Some(Moment::Entry) {
            if let Some(m) = message(self) {
                self.push(h.tid, h.ts_ns, Event::MpiSend(m));
            }
        } else if blocking_collective_op(id).is_some() {
            self.push(h.tid, h.ts_ns, Event::MpiCollectiveBegin);
        }
    }

    fn call_exit(&mut self, x: &CallRecord) {
        let h = x.header;
        let ts = h.ts_ns;
        let t = self.threads.get_mut(&h.tid).unwrap();
        let Some(open) = t.calls.pop() else { return };
        let outermost = t.calls.is_empty();
        let Event::Enter { region } = t.events[open.enter_at].event else {
            return;
        };
        let e = open.entry;
        let CallField { id, flavor } = split_call_field(e.header.call);
        let flavor = Flavor::from_id(flavor);
        let mpi = matches!(flavor, Some(Flavor::OpenMpi | Flavor::Mpich));
        // Setup calls of every family, as the analyzer takes them: PVM's `pvm_mytid`
        // names the task's location group.
        if outermost && calls::spec(id).is_some_and(|s| s.role == Role::Setup) {
            self.directory.setup_call(h.tgid, &e, x, &open.handles);
        }
        if outermost && mpi {
            self.mpi_exit(&open, x);
        }
        self.push(h.tid, ts, Event::Leave { region });
    }

    /// The MPI events of a call's exit, before its Leave.
    fn mpi_exit(&mut self, open: &OpenCall, x: &CallRecord) {
        let e = open.entry;
        let CallField { id, flavor } = split_call_field(e.header.call);
        let flavor = Flavor::from_id(flavor);
        let (pid, tid, ts) = (x.header.tgid, x.header.tid, x.header.ts_ns);
        let ok = x.ret == 0;
        let spec = calls::spec(id);
        let receives = spec.and_then(|s| s.receives);
        // A matched probe's message is received where the probe found it (the matcher
        // takes it there), not in the MPI_Mrecv or MPI_Imrecv that copies it out.
        let received = match receives {
            Some(Receives::Message { asked }) => Some(asked),
            Some(r @ Receives::ProbedMessage { .. }) if r.found_message(x) => {
                Some(AskedEnvelope::First)
            }
            _ => None,
        };
        match (receives, received) {
            (_, Some(asked)) if ok => {
                let (req_peer, req_tag) = match asked {
                    AskedEnvelope::First => (e.peer, e.tag),
                    AskedEnvelope::Second => (e.peer2, e.tag2),
                };
                let peer = set32(x.peer).or(set32(req_peer).filter(|&p| p >= 0));
                let tag = set32(x.tag).or(set32(req_tag).filter(|&t| t >= 0));
                if let (Some(peer), Some(tag), Some(comm)) =
                    (peer, tag, self.comm(pid, e.comm, flavor))
                {
                    let bytes = bytes_of(if x.bytes >= 0 { x.bytes } else { e.bytes });
                    let m = Message {
                        peer: peer as u32,
                        comm,
                        tag: tag as u32,
                        bytes,
                    };
                    self.push(tid, ts, Event::MpiRecv(m));
                }
                return;
            }
            (Some(Receives::Request), _) if ok => {
                if let Some(comm) = self.comm(pid, e.comm, flavor) {
                    // What the receive asked for; the completion's status says what came.
                    let asked = Message {
                        peer: e.peer as u32,
                        comm,
                        tag: e.tag as u32,
                        bytes: bytes_of(e.bytes),
                    };
                    self.pending.insert((pid, x.handle), Pending::Recv(asked));
                    let request = x.handle;
                    self.push(tid, ts, Event::MpiIrecvRequest { request });
                }
                return;
            }
            _ => {}
        }
        let sends = spec.and_then(|s| s.sends);
        if let Some(Sends::Persistent(requests_in)) = sends {
            let requests = match requests_in {
                RequestsIn::Handle => std::slice::from_ref(&e.handle),
                RequestsIn::HandleArray => &open.handles[..],
            };
            for &request in requests {
                self.start_persistent(pid, tid, ts, request);
            }
            return;
        }
        if matches!(id, call::MPI_SEND_INIT | call::MPI_RECV_INIT) {
            if ok {
                self.persistent.insert((pid, x.handle), e);
            }
            return;
        }
        if ok && send_event_at(sends) == Some(Moment::Exit) {
            let comm = self.comm(pid, e.comm, flavor);
            if let (Some(peer), Some(tag), Some(comm)) = (set32(e.peer), set32(e.tag), comm) {
                let message = Message {
                    peer: peer as u32,
                    comm,
                    tag: tag as u32,
                    bytes: bytes_of(e.bytes),
                };
                self.pending.insert((pid, x.handle), Pending::Send);
                let request = x.handle;
                self.push(tid, ts, Event::MpiIsend { message, request });
            }
            return;
        }
        if let Some(completes) = spec.and_then(|s| s.completes) {
            if completes.cancelled(x) {
                // A cancelled receive takes no message (as the matcher takes it): the
                // Wait or Test completing its request writes nothing.
                if let Some(Pending::Recv(_)) = self.pending.get(&(pid, e.handle)) {
                    self.pending.remove(&(pid, e.handle));
                }
                return;
            }
            for done in completes.completed(&e, &open.handles, x) {
                let status = match done.status {
                    StatusAt::Exit => Some(Status {
                        source: x.peer,
                        tag: x.tag,
                        bytes: x.bytes,
                    }),
                    StatusAt::Array(i) => open.statuses.get(i).copied(),
                    StatusAt::NotRead => None,
                };
                self.complete(pid, tid, ts, done.request, status);
            }
            return;
        }
        let Some(op) = blocking_collective_op(id) else {
            return;
        };
        let Some(comm) = self.comm(pid, e.comm, flavor) else {
            return;
        };
        let root = match op {
            CollectiveOp::Bcast
            | CollectiveOp::Scatter
            | CollectiveOp::Scatterv
            | CollectiveOp::Gather
            | CollectiveOp::Gatherv
            | CollectiveOp::Reduce => set32(e.peer).map_or(ROOT_NONE, |r| r as u32),
            _ => ROOT_NONE,
        };
        let bytes = bytes_of(e.bytes);
        let end = Event::MpiCollectiveEnd {
            op,
            comm,
            root,
            sent: bytes,
            received: bytes,
        };
        self.push(tid, ts, end);
    }

    /// MPI_Start or MPI_Startall started the persistent `request`: a send's `MpiIsend`,
    /// or a receive's `MpiIrecvRequest`, as MPI_Isend's and MPI_Irecv's, with the
    /// message its init described; the Wait or Test completing it writes its completion.
    fn start_persistent(&mut self, pid: u32, tid: u32, ts: u64, request: u64) {
        let Some(init) = self.persistent.get(&(pid, request)).copied() else {
            return;
        };
        let CallField { id, flavor } = split_call_field(init.header.call);
        let Some(comm) = self.comm(pid, init.comm, Flavor::from_id(flavor)) else {
            return;
        };
        let described = Message {
            peer: init.peer as u32,
            comm,
            tag: init.tag as u32,
            bytes: bytes_of(init.bytes),
        };
        if id == call::MPI_SEND_INIT {
            self.pending.insert((pid, request), Pending::Send);
            let message = described;
            self.push(tid, ts, Event::MpiIsend { message, request });
        } else {
            self.pending
                .insert((pid, request), Pending::Recv(described));
            self.push(tid, ts, Event::MpiIrecvRequest { request });
        }
    }

    /// A request completed: its send's or receive's completion event.
    fn complete(&mut self, pid: u32, tid: u32, ts: u64, request: u64, status: Option<Status>) {
        match self.pending.remove(&(pid, request)) {
            Some(Pending::Send) => {
                self.push(tid, ts, Event::MpiIsendComplete { request });
            }
            Some(Pending::Recv(asked)) => {
                let status = status.unwrap_or(Status {
                    source: UNSET32,
                    tag: UNSET32,
                    bytes: UNSET,
                });
                let message = Message {
                    peer: set32(status.source).map_or(asked.peer, |s| s as u32),
                    tag: set32(status.tag).map_or(asked.tag, |t| t as u32),
                    bytes: if status.bytes >= 0 {
                        status.bytes as u64
                    } else {
                        asked.bytes
                    },
                    comm: asked.comm,
                };
                self.push(tid, ts, Event::MpiIrecv { message, request });
            }
            None => {}
        }
    }

    /// Sends every event left to `out` and returns the definitions.
    fn finish(mut self, ranks: &HashMap<u32, i32>, out: &mut Vec<(u32, Timed)>) -> Otf2Trace {
        // Calls, procedures and waits still open: their Enter goes (a Leave-less Enter
        // would leave the location's call stack open).
        for (&tid, t) in &mut self.threads {
            let mut open: Vec<usize> = t.calls.iter().map(|c| c.enter_at).collect();
            open.extend(t.procedures.iter().map(|p| p.1));
            open.extend(t.futex_wait);
            for at in open {
                t.events[at].event = DROPPED;
                self.unclosed += 1;
            }
            t.events.drain(tid, None, out);
        }
        // Processes: every pid with a thread, named like the Chrome export's.
        let mut pids: Vec<u32> = self.threads.values().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let processes: Vec<Process> = pids
            .iter()
            .map(|&pid| {
                let rank = ranks
                    .get(&pid)
                    .copied()
                    .or_else(|| self.directory.world_rank(pid));
                let command = self
                    .commands
                    .get(&pid)
                    .filter(|c| !c.is_empty())
                    .cloned()
                    .unwrap_or_else(|| format!("pid {}", ShownId(pid)));
                let name = match (rank, self.directory.pvm_tid(pid)) {
                    (Some(r), _) => format!("rank {r}: {command}"),
                    (None, Some(t)) => format!("pvm task {t:#x}: {command}"),
                    (None, None) => command,
                };
                Process { pid, rank, name }
            })
            .collect();
        let process_index: HashMap<u32, u32> = pids
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, i as u32))
            .collect();
        // MPI communicators, then a thread contingent per process that made threads.
        let mut comms: Vec<Comm> = Vec::new();
        for &gid in self.mpi_comms.keys() {
            let members = self
                .directory
                .members(gid)
                .iter()
                .map(|&p| self.directory.world_rank(p).map_or(u64::MAX, |r| r as u64))
                .collect();
            comms.push(Comm {
                name: self.directory.comm_name(gid),
                paradigm: Paradigm::Mpi,
                members,
            });
        }
        let mut mpi_locations: Vec<(i32, u64)> = processes
            .iter()
            .filter(|p| self.directory.world_rank(p.pid).is_some())
            .filter_map(|p| Some((self.directory.world_rank(p.pid)?, p.pid as u64)))
            .collect();
        mpi_locations.sort_unstable();
        let thread_locations: Vec<u64> = self
            .threads
            .iter()
            .filter(|(&tid, t)| {
                t.sequence.is_some() || self.created.contains_key(&t.pid) && tid == t.pid
            })
            .map(|(&tid, _)| tid as u64)
            .collect();
        let mut contingents: HashMap<u32, u32> = HashMap::new();
        for &pid in &pids {
            if !self.created.contains_key(&pid) {
                continue;
            }
            contingents.insert(u32::MAX - pid, comms.len() as u32);
            let members = thread_locations
                .iter()
                .enumerate()
                .filter(|(_, &tid)| self.threads[&(tid as u32)].pid == pid)
                .map(|(i, _)| i as u64)
                .collect();
            comms.push(Comm {
                name: format!("threads of {}", ShownId(pid)),
                paradigm: Paradigm::Pthread,
                members,
            });
        }
        let locations = std::mem::take(&mut self.threads)
            .into_iter()
            .map(|(tid, t)| {
                let local = self.thread_comm(t.pid);
                Location {
                    tid,
                    process: process_index[&t.pid],
                    name: if tid == t.pid {
                        "main".into()
                    } else {
                        format!("thread {}", ShownId(tid))
                    },
                    thread_comm: contingents
                        .get(&local)
                        .map(|&global| CommMapping { local, global }),
                }
            })
            .collect();
        Otf2Trace {
            clock: ClockKind::Cpu,
            machine: String::new(),
            start_unix_ns: 0,
            start_monotonic_ns: 0,
            first_ts: 0,
            last_ts: 0,
            processes,
            locations,
            regions: self.regions,
            comms,
            mpi_locations: mpi_locations.into_iter().map(|(_, l)| l).collect(),
            thread_locations,
            critical_path_ns: 0,
            events_recorded: 0,
            events_lost: 0,
            unclosed: self.unclosed,
        }
    }
}

/// The region role of a call, as Score-P gives MPI's.
fn call_role(id: u16, role: Option<Role>) -> RegionRole {
    if let Some(op) = blocking_collective_op(id) {
        return match op {
            CollectiveOp::Barrier => RegionRole::Barrier,
            CollectiveOp::Bcast | CollectiveOp::Scatter | CollectiveOp::Scatterv => {
                RegionRole::CollOne2All
            }
            CollectiveOp::Gather | CollectiveOp::Gatherv | CollectiveOp::Reduce => {
                RegionRole::CollAll2One
            }
            CollectiveOp::Scan | CollectiveOp::Exscan => RegionRole::CollOther,
            _ => RegionRole::CollAll2All,
        };
    }
    match role {
        Some(Role::Send | Role::Recv | Role::SendRecv | Role::Completion) => {
            RegionRole::PointToPoint
        }
        Some(Role::OneSided) => RegionRole::Rma,
        Some(Role::ThreadCreate) => RegionRole::ThreadCreate,
        Some(
            Role::LockAcquire
            | Role::CondWait
            | Role::BarrierWait
            | Role::ThreadJoin
            | Role::SemWait,
        ) => RegionRole::ThreadWait,
        _ => RegionRole::Function,
    }
}

/// The operation of a blocking MPI collective, whose events the export writes at its
/// entry (`MpiCollectiveBegin`) and exit (`MpiCollectiveEnd`). A nonblocking one ends in
/// the Wait or Test that completes its request, which the export does not follow: it is
/// written as a plain region, as are collectives OTF2 has no operation for.
fn blocking_collective_op(id: u16) -> Option<CollectiveOp> {
    calls::spec(id)?.collective.filter(|c| !c.nonblocking)?.op
}

/// At which of its records the export writes a call's send: a message its entry
/// describes where it leaves (`SEND_POSTED_AT`, as the matcher posts it), but a send that
/// only starts where its request is known (`Sends::request_known_at`: the exit), because
/// OTF2's `MpiIsend` carries the request that the `MpiIsendComplete` of the Wait or Test
/// completing it names. The persistent requests MPI_Start and MPI_Startall start are
/// written at their exit too: MPI_Startall's are in the handle array read after its
/// entry (each an `MpiIsend` or `MpiIrecvRequest`, as MPI_Isend's or MPI_Irecv's). PVM's
/// sends are no MPI events (the export writes MPI's only).
fn send_event_at(sends: Option<Sends>) -> Option<Moment> {
    match sends? {
        s @ (Sends::Message | Sends::MessageWithRequest) => {
            Some(s.request_known_at().unwrap_or(SEND_POSTED_AT))
        }
        Sends::Persistent(_) => Some(Moment::Exit),
        Sends::Multicast => None,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;
    use crate::analysis::{Analyzer, NoPaths};
    use crate::format::synth::{SyntheticRun, SyntheticThreads, THREADS_PID};
    use tracer_common::kind;

    /// A sink keeping every location's events.
    #[derive(Default)]
    struct Events(BTreeMap<u32, Vec<Timed>>);

    impl Otf2Sink for Events {
        type Error = RecordingError;
        fn event(&mut self, tid: u32, event: &Timed) -> Result<(), RecordingError> {
            self.0.entry(tid).or_default().push(event.clone());
            Ok(())
        }
    }

    /// A ring over 3 ranks, 4 rounds, with work inside and outside `work`.
    fn ring() -> (Otf2Trace, Events, RecordedGraph) {
        ring_of(4)
    }

    fn ring_of(rounds: i32) -> (Otf2Trace, Events, RecordedGraph) {
        let mut s = SyntheticRun::new(3, &["work"]);
        for round in 0..rounds {
            for r in 0..3 {
                s.compute(r, 10_000 + 1000 * r as u64, Some(0));
                s.message(r, (r + 1) % 3, round);
            }
        }
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let items = s.items.iter().cloned().map(Ok);
        let mut events = Events::default();
        let plan = Otf2Plan::new(&rg, RecordingMeta::default());
        let trace = plan.stream(items, &mut events).unwrap();
        (trace, events, rg)
    }

    fn count(events: &Events, f: impl Fn(&Event) -> bool) -> usize {
        events.0.values().flatten().filter(|e| f(&e.event)).count()
    }

    #[test]
    fn ring_has_messages_regions_and_the_critical_path() {
        let (t, events, rg) = ring();
        assert_eq!(count(&events, |e| matches!(e, Event::MpiSend(_))), 12);
        assert_eq!(count(&events, |e| matches!(e, Event::MpiRecv(_))), 12);
        assert_eq!(t.processes.len(), 3);
        assert_eq!(t.comms.len(), 1);
        assert_eq!(t.comms[0].name, "MPI_COMM_WORLD");
        assert_eq!(t.comms[0].members, vec![0, 1, 2]);
        assert_eq!(t.machine, "localhost");
        // Every send names its receiver's rank; ranks are the processes' own.
        for l in &t.locations {
            let rank = t.processes[l.process as usize].rank.unwrap() as u32;
            let l = &events.0[&l.tid];
            for e in l {
                if let Event::MpiSend(m) = e.event {
                    assert_eq!(m.peer, (rank + 1) % 3);
                }
            }
            assert!(l.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
            let enters = l
                .iter()
                .filter(|e| matches!(e.event, Event::Enter { .. }))
                .count();
            let leaves = l
                .iter()
                .filter(|e| matches!(e.event, Event::Leave { .. }))
                .count();
            assert_eq!(enters, leaves);
        }
        // The metric's last value per location adds up to the path.
        let sum: u64 = events
            .0
            .values()
            .filter_map(|l| {
                l.iter().rev().find_map(|e| match e.event {
                    Event::CriticalPath { ns } => Some(ns),
                    _ => None,
                })
            })
            .sum();
        assert_eq!(sum, Schedule::new(&rg.graph).length);
        assert_eq!(t.critical_path_ns, sum);
        let send = t.regions.iter().find(|r| r.name == "MPI_Send").unwrap();
        assert_eq!(
            (send.role, send.paradigm),
            (RegionRole::PointToPoint, Paradigm::Mpi)
        );
    }

    #[test]
    fn a_procedure_region_is_named_demangled_with_its_symbol_as_canonical_name() {
        let symbol = "_ZN9LAMMPS_NS9PairLJCut7computeEii";
        let mut s = SyntheticRun::new(2, &[symbol]);
        for r in 0..2 {
            s.compute(r, 10_000, Some(0));
        }
        s.message(0, 1, 0);
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let plan = Otf2Plan::new(&rg, RecordingMeta::default());
        let t = plan
            .stream(s.items.iter().cloned().map(Ok), &mut Events::default())
            .unwrap();
        let procedures: Vec<&Region> = t
            .regions
            .iter()
            .filter(|r| r.role == RegionRole::Function)
            .collect();
        assert_eq!(procedures.len(), 1, "{:?}", t.regions);
        assert_eq!(
            procedures[0].name,
            "LAMMPS_NS::PairLJCut::compute(int, int)"
        );
        assert_eq!(procedures[0].canonical_name, symbol);
        // Calls have no other name.
        let send = t.regions.iter().find(|r| r.name == "MPI_Send").unwrap();
        assert_eq!(send.canonical_name, "MPI_Send");
    }

    /// A sink noting, per event, how many items of the recording had been read.
    struct Arrivals {
        read: Rc<Cell<usize>>,
        at: Vec<usize>,
    }

    impl Otf2Sink for Arrivals {
        type Error = RecordingError;
        fn event(&mut self, _: u32, _: &Timed) -> Result<(), RecordingError> {
            self.at.push(self.read.get());
            Ok(())
        }
    }

    #[test]
    fn events_leave_while_the_recording_is_read() {
        // 20000 rounds of 18 records 1 us apart: 360 ms, the reorder window 50 ms.
        let mut s = SyntheticRun::new(3, &["work"]);
        for round in 0..20_000 {
            for r in 0..3 {
                s.compute(r, 10_000, Some(0));
                s.message(r, (r + 1) % 3, round);
            }
        }
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let read = Rc::new(Cell::new(0));
        let items = s.items.iter().cloned().map(|i| {
            read.set(read.get() + 1);
            Ok(i)
        });
        let mut sink = Arrivals {
            read: read.clone(),
            at: Vec::new(),
        };
        let plan = Otf2Plan::new(&rg, RecordingMeta::default());
        plan.stream(items, &mut sink).unwrap();
        // Events go out about a reorder window (a seventh of the run) behind the
        // reading, not at its end.
        let total = s.items.len();
        assert!(
            sink.at[0] < total / 5,
            "first event after {} of {total}",
            sink.at[0]
        );
        let early = sink.at.iter().filter(|&&n| n < total * 9 / 10).count();
        assert!(
            early > sink.at.len() * 7 / 10,
            "{early} of {}",
            sink.at.len()
        );
    }

    #[test]
    fn a_thread_create_waits_for_its_thread_and_an_unclosed_enter_goes() {
        let mut s = SyntheticThreads::new(&["work"]);
        s.clone(THREADS_PID, 501);
        let clone_ts = s.ts;
        // The creator works before its new thread shows up.
        s.compute(THREADS_PID, 1000, Some(0));
        s.compute(501, 1000, None);
        // A procedure the main thread never leaves.
        let h = s.header(THREADS_PID, kind::FUNC_ENTER, 1);
        s.items.push(Item::Record(Record::FuncEnter(h)));
        s.exit(501);
        s.exit(THREADS_PID);
        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let mut events = Events::default();
        let plan = Otf2Plan::new(&rg, RecordingMeta::default());
        let t = plan
            .stream(s.items.iter().cloned().map(Ok), &mut events)
            .unwrap();
        let local = u32::MAX - THREADS_PID;
        let mapping = Some(CommMapping { local, global: 0 });
        assert_eq!(t.comms.len(), 1);
        assert_eq!(t.comms[0].name, "threads of 500");
        assert_eq!(
            t.locations
                .iter()
                .map(|l| l.thread_comm)
                .collect::<Vec<_>>(),
            vec![mapping, mapping]
        );
        assert_eq!(t.unclosed, 1);
        let recorded = |tid: u32| -> Vec<Timed> {
            events.0[&tid]
                .iter()
                .filter(|e| !matches!(e.event, Event::CriticalPath { .. }))
                .cloned()
                .collect()
        };
        let main = recorded(THREADS_PID);
        let create = Event::ThreadCreate {
            comm: local,
            sequence: 0,
        };
        assert_eq!(
            main.iter().map(|e| &e.event).collect::<Vec<_>>(),
            vec![
                &create,
                &Event::Enter { region: 0 },
                &Event::Leave { region: 0 }
            ]
        );
        assert_eq!(main[0].ts_ns, clone_ts);
        assert!(events.0[&THREADS_PID]
            .windows(2)
            .all(|w| w[0].ts_ns <= w[1].ts_ns));
        let thread = recorded(501);
        let begin = Event::ThreadBegin {
            comm: local,
            sequence: 0,
        };
        let end = Event::ThreadEnd {
            comm: local,
            sequence: 0,
        };
        assert_eq!(
            thread.iter().map(|e| &e.event).collect::<Vec<_>>(),
            vec![&begin, &end]
        );
        assert_eq!(thread[0].ts_ns, clone_ts);
    }

    /// A message as one side knows it: its sender and receiver (pids), its size, and
    /// when that side sent or received it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct SeenMessage {
        from: u32,
        to: u32,
        bytes: u64,
        ts: u64,
    }

    /// Blocking, nonblocking (MPI_Isend and MPI_Irecv, completed by MPI_Wait,
    /// MPI_Waitany, MPI_Testany, MPI_Waitsome and MPI_Testall), persistent (MPI_Send_init
    /// and MPI_Recv_init, started by MPI_Start and MPI_Startall, one send started twice)
    /// and matched-probe messages between three ranks: the export writes every message
    /// the matcher pairs, each send at its call's entry as the matcher posts it (an
    /// MpiIsend, at the exit where its request is known, is the send of the call it
    /// leaves) and each receive where the matcher completes it.
    #[test]
    fn the_export_writes_the_messages_the_matcher_pairs() {
        let mut s = SyntheticRun::new(3, &[]);
        // Blocking.
        s.message(0, 1, 5);
        // Nonblocking, completed by MPI_Wait.
        s.irecv(2, 1, 6, 0xa);
        s.isend(1, 2, 6, 0xb);
        s.wait(1, 0xb);
        s.wait(2, 0xa);
        // A persistent send, started twice by MPI_Start.
        s.send_init(2, 0, 7, 0xc);
        for _ in 0..2 {
            s.start(2, 0xc);
            s.recv(0, 2, 7);
            s.wait(2, 0xc);
        }
        // A persistent send and receive started by MPI_Startall, completed by
        // MPI_Testall and MPI_Waitany.
        s.recv_init(1, 0, 8, 0xd);
        s.send_init(0, 1, 8, 0xe);
        s.startall(1, &[0xd]);
        s.startall(0, &[0xe]);
        s.testall(0, &[0xe], 1);
        s.waitany(1, &[0xd], 0);
        // Two receives on rank 0, completed by MPI_Testany then MPI_Waitsome (the first
        // request is MPI_REQUEST_NULL by then); their sends by MPI_Testall and
        // MPI_Waitany, a Testany and a Testall that completed nothing before them.
        s.irecv(0, 1, 9, 0x10);
        s.irecv(0, 2, 9, 0x11);
        s.isend(1, 0, 9, 0x12);
        s.isend(2, 0, 9, 0x13);
        s.testany(0, &[0x10, 0x11], -1);
        s.testall(1, &[0x12], 0);
        s.testany(0, &[0x10, 0x11], 0);
        s.waitsome(0, &[0, 0x11], &[1]);
        s.testall(1, &[0x12], 1);
        s.waitany(2, &[0x13], 0);
        // A matched probe's message.
        s.send(1, 2, 10);
        s.mprobe_and_mrecv(2, 1, 10);
        const MESSAGES: usize = 8;

        let mut analyzer = Analyzer::with_model(ClockKind::Cpu, NoPaths);
        analyzer.matcher.log_matches();
        for item in &s.items {
            analyzer.item(item);
        }
        let matched = analyzer.matcher.take_matches();
        assert_eq!(matched.len(), MESSAGES, "{matched:?}");
        assert_eq!(analyzer.matcher.stats.unmatched, 0);
        let seen = |m: &crate::analysis::matcher::MatchedMessage, ts: u64| SeenMessage {
            from: m.from_pid,
            to: m.to_pid,
            bytes: m.bytes.expect("every synthetic message has its size"),
            ts,
        };
        let mut matcher_sends: Vec<SeenMessage> =
            matched.iter().map(|m| seen(m, m.send_ts)).collect();
        let mut matcher_receives: Vec<SeenMessage> =
            matched.iter().map(|m| seen(m, m.recv_ts)).collect();

        let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
        let mut events = Events::default();
        let plan = Otf2Plan::new(&rg, RecordingMeta::default());
        let trace = plan
            .stream(s.items.iter().cloned().map(Ok), &mut events)
            .unwrap();
        assert_eq!(trace.comms[0].members, vec![0, 1, 2]);
        // Ranks in MPI_COMM_WORLD are pid - 100.
        let pid_of_rank = |rank: u32| 100 + rank;
        let mut export_sends = Vec::new();
        let mut export_receives = Vec::new();
        for (&tid, located) in &events.0 {
            let mut entered_at = 0;
            for e in located {
                match &e.event {
                    Event::Enter { .. } => entered_at = e.ts_ns,
                    Event::MpiSend(m) | Event::MpiIsend { message: m, .. } => {
                        export_sends.push(SeenMessage {
                            from: tid,
                            to: pid_of_rank(m.peer),
                            bytes: m.bytes,
                            ts: entered_at,
                        })
                    }
                    Event::MpiRecv(m) | Event::MpiIrecv { message: m, .. } => {
                        export_receives.push(SeenMessage {
                            from: pid_of_rank(m.peer),
                            to: tid,
                            bytes: m.bytes,
                            ts: e.ts_ns,
                        })
                    }
                    _ => {}
                }
            }
        }
        // Isend's three and the persistent sends' three starts.
        assert_eq!(count(&events, |e| matches!(e, Event::MpiIsend { .. })), 6);
        assert_eq!(
            count(&events, |e| matches!(e, Event::MpiIsendComplete { .. })),
            6
        );
        // Irecv's three and the persistent receive's start.
        assert_eq!(
            count(&events, |e| matches!(e, Event::MpiIrecvRequest { .. })),
            4
        );
        assert_eq!(export_sends.len(), MESSAGES);
        for list in [
            &mut matcher_sends,
            &mut matcher_receives,
            &mut export_sends,
            &mut export_receives,
        ] {
            list.sort();
        }
        assert_eq!(export_sends, matcher_sends);
        assert_eq!(export_receives, matcher_receives);
    }
}
