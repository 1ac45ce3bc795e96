//! The analyzer: pairs each thread's calls, keeps its work clock, matches messages and
//! shared-memory dependencies, and tells a path model what depends on what.

// The maps here are looked up several times per record, keyed by thread and process ids
// and handles: a fast non-cryptographic hash (Fx) in place of std's SipHash, which took
// about a tenth of the live tracer's time. The keys come from the traced programs on
// this machine, not from an adversary, so there is no flooding to defend against.
use rustc_hash::{FxHashMap, FxHashSet};

use tracer_common::{call, futex_waits, CallRecord, EventHeader, SampleRecord};

use super::directory::Directory;
use super::engine::{CriticalEnd, CriticalPathEngine};
use super::faults::{signal_name, Death, Killed};
use super::late::{HeldProcesses, HoldBack};
use super::matcher::{MessageMatcher, ReceivedStatus};
use super::model::{Clocks, Milestone, PathModel, ProcId, Sched};
use super::sampled::{Columns, LiveSampleCounts, LiveSamples, TrackRule, HOT};
use super::sync::{futex_wakes, SyncTracker};
use super::workclock::{self, ClockKind, WorkClock};
use crate::format::call_facts::{RequestsIn, Sends};
use crate::format::calls::{self, split_call_field, CallField, Family, Role};
use crate::format::node::ShownId;
use crate::format::openmp::RegionKey;
use crate::format::pairing::{close_call, drop_unwound, Resynchronised};
use crate::format::recording::{FunctionProbe, Item};
use crate::format::records::Record;
use crate::format::ProcessInfo;
use crate::symbolize::CodeLocator;

struct OpenCall {
    entry: CallRecord,
    handles: Vec<u64>,
    /// The statuses the call wrote per request (MPI_Waitall, MPI_Testall), which the
    /// probes emit before its exit.
    statuses: Vec<ReceivedStatus>,
}

/// What the analysis keeps per live thread.
struct ThreadCalls {
    clock: WorkClock,
    /// MPI/PVM calls in progress (calls nest inside libraries).
    open: Vec<OpenCall>,
    /// The futex(2) operation in progress, if any.
    futex: Option<u32>,
    /// CPU clock at the thread's first record and at its latest.
    first_cpu: u64,
    cpu: u64,
    /// Selected procedures active now, for the CPU column.
    active: Vec<ProcId>,
    /// Whether a record of the thread went through [`Analyzer::record`] yet.
    analysed: bool,
    /// The thread it cloned last: inside pthread_create, the one it creates.
    cloned: Option<u32>,
    /// The exited thread whose exit ended its latest futex wait (a join that blocked).
    woken_by_exit: Option<u32>,
}

impl ThreadCalls {
    /// Inside an MPI/PVM call (a pthread call probed with `--locks` does not count: its
    /// futex waits and wakes are the program's own synchronization).
    fn in_library_call(&self) -> bool {
        self.open
            .first()
            .is_some_and(|c| thread_call_role(split_call_field(c.entry.header.call).id).is_none())
    }
}

/// Whether a record shows its process is part of the program (it may end the critical
/// path): an MPI/PVM call or a selected procedure. Launchers call pthreads too
/// (`--locks`), which does not make them part of the program.
pub(crate) fn makes_participant(r: &Record) -> bool {
    match r {
        Record::CallEnter(e) => thread_call_role(split_call_field(e.header.call).id).is_none(),
        Record::FuncEnter(_) => true,
        _ => false,
    }
}

/// The role of a pthread or OpenMP call; None for MPI/PVM calls.
fn thread_call_role(id: u16) -> Option<Role> {
    calls::spec(id)
        .filter(|s| matches!(s.family, Family::Threads | Family::OpenMp))
        .map(|s| s.role)
}

/// The OpenMP region a lowered call record names.
fn region(c: &CallRecord) -> RegionKey {
    RegionKey {
        function: c.comm,
        data: c.handle,
    }
}

/// Procedures selected with `--func`, by symbol (one symbol probed in two files is one
/// procedure), and the sampled functions the live profile follows on the path
/// ([`super::sampled`]).
#[derive(Default)]
pub struct Procedures {
    /// Shown names ([`FunctionProbe::name`]), by `ProcId`.
    pub names: Vec<String>,
    /// Symbols as the binaries have them, by `ProcId`.
    pub symbols: Vec<String>,
    /// Whether the procedure is a sampled function rather than a probed one, by `ProcId`.
    pub sampled: Vec<bool>,
    by_probe: FxHashMap<u16, ProcId>,
}

impl Procedures {
    /// Adds probe `p`; returns how many procedures there are now.
    pub(crate) fn add(&mut self, p: &FunctionProbe) -> usize {
        let id = match self.symbols.iter().position(|s| *s == p.symbol) {
            Some(i) => i,
            None => {
                self.names.push(p.name());
                self.symbols.push(p.symbol.clone());
                self.sampled.push(false);
                self.names.len() - 1
            }
        };
        self.by_probe.insert(p.id, id);
        self.names.len()
    }

    /// Adds the sampled function `name`; returns its id.
    pub(crate) fn add_sampled(&mut self, name: &str) -> ProcId {
        self.names.push(name.to_string());
        self.symbols.push(name.to_string());
        self.sampled.push(true);
        self.names.len() - 1
    }

    /// The procedure probe `id` enters or leaves.
    pub(crate) fn of_probe(&self, id: u16) -> Option<ProcId> {
        self.by_probe.get(&id).copied()
    }
}

/// The columns of the sampled functions the profile follows: procedures of the analyzer,
/// columns of its path model.
struct SampledColumns<'a, M> {
    procedures: &'a mut Procedures,
    engine: &'a mut M,
    cpu_in: &'a mut Vec<u64>,
    /// What [`Analyzer::counts`] decides by.
    thread_pids: &'a FxHashMap<u32, u32>,
    participants: &'a FxHashSet<u32>,
}

impl<M: PathModel> Columns for SampledColumns<'_, M> {
    fn add(&mut self, name: &str) -> ProcId {
        let p = self.procedures.add_sampled(name);
        self.engine.set_procedures(p + 1);
        self.cpu_in.resize(p + 1, 0);
        p
    }

    fn unused(&self, p: ProcId) -> bool {
        let only = !self.participants.is_empty();
        let include = |tid| counted(self.thread_pids, self.participants, tid, only);
        self.engine.unused(p, &include, only)
    }

    fn reuse(&mut self, p: ProcId, name: &str) {
        self.procedures.names[p] = name.to_string();
        self.procedures.symbols[p] = name.to_string();
        self.engine.reuse(p);
    }
}

/// Whether thread `tid`'s path counts ([`Analyzer::counts`]).
fn counted(
    thread_pids: &FxHashMap<u32, u32>,
    participants: &FxHashSet<u32>,
    tid: u32,
    only_participants: bool,
) -> bool {
    !only_participants
        || thread_pids
            .get(&tid)
            .is_some_and(|p| participants.contains(p))
}

/// A thread's state, created at its first record `h`.
fn thread_state<'a>(
    threads: &'a mut FxHashMap<u32, ThreadCalls>,
    pids: &mut FxHashMap<u32, u32>,
    kind: ClockKind,
    h: &EventHeader,
) -> &'a mut ThreadCalls {
    threads.entry(h.tid).or_insert_with(|| {
        pids.insert(h.tid, h.tgid);
        ThreadCalls {
            clock: WorkClock::new(kind),
            open: Vec::new(),
            futex: None,
            first_cpu: h.cpu_ns,
            cpu: h.cpu_ns,
            active: Vec::new(),
            analysed: false,
            cloned: None,
            woken_by_exit: None,
        }
    })
}

/// The most CPU time between a poll that found nothing and the thread's next MPI/PVM
/// call for that time to be the polling loop's, hence waiting: a loop around MPI_Test
/// or MPI_Iprobe takes about 1 us between calls here, nearly all of it our probes' traps.
/// Work done between polls (a computation overlapped with a transfer) takes longer, and
/// stays work.
const POLL_LOOP_GAP_CPU_NS: u64 = 10_000;

/// Whether the time since a poll found nothing (the thread's CPU clock then `poll_cpu`)
/// was the polling loop's, as the thread's next record `r` shows: it was if the thread
/// polls again (any MPI/PVM call, not made inside another: `in_call` false) within
/// [`POLL_LOOP_GAP_CPU_NS`]; anything else it did makes it work. Scheduler records are
/// not the thread's doing, and decide nothing (None). The metrics decide the same way.
pub(crate) fn poll_loop_went_on(r: &Record, in_call: bool, poll_cpu: u64) -> Option<bool> {
    match r {
        Record::SwitchIn(_) | Record::SwitchOut(_) | Record::Wakeup(_) | Record::WakeupNew(_) => {
            None
        }
        Record::CallEnter(e) => Some(
            !in_call
                && calls::is_mpi_or_pvm(split_call_field(e.header.call).id)
                && e.header.cpu_ns.saturating_sub(poll_cpu) < POLL_LOOP_GAP_CPU_NS,
        ),
        _ => Some(false),
    }
}

/// Pairs calls, keeps work clocks and matches messages, and tells a [`PathModel`] (the
/// online engine, or the graph builder) what depends on what.
pub struct Analyzer<M: PathModel = CriticalPathEngine> {
    clock: ClockKind,
    pub engine: M,
    pub matcher: MessageMatcher<M::Mark>,
    /// Shared-memory dependencies: wakeups, thread creation, lock hand-offs.
    pub sync: SyncTracker<M::Mark>,
    pub procedures: Procedures,
    threads: FxHashMap<u32, ThreadCalls>,
    /// Process of every thread seen (kept after the thread ends, for the report).
    thread_pids: FxHashMap<u32, u32>,
    /// Processes of the program itself: they call MPI/PVM or a selected procedure.
    /// When there are any, launchers and helpers (mpirun, pvmd, shells) do not compete
    /// for the critical path.
    participants: FxHashSet<u32>,
    /// Per CPU: how long it ran work outside the program (see [`workclock::OtherWork`]).
    cpus: FxHashMap<u32, workclock::OtherWork>,
    /// CPU time (not work) spent in each procedure, all threads.
    cpu_in: Vec<u64>,
    /// CPU time of threads that ended, while traced.
    cpu_ended: u64,
    pub events: u64,
    /// Calls whose entry or exit is missing, dropped so that the rest pair up.
    pub resynchronised: Resynchronised,
    /// The bound on held state that the tests check.
    #[cfg(test)]
    peak_entries: usize,
    pub first_ts: Option<u64>,
    pub last_ts: u64,
    /// Processes a signal killed, in order of death.
    deaths: Vec<Death>,
    /// The killed processes and what they left undone, as of the last flush.
    pub killed: Vec<Killed>,
    /// The sampled functions, when the caller can name them
    /// ([`Self::follow_sampled_functions`]).
    sampled: Option<LiveSamples>,
    /// Processes whose exit waits for what the clocks put later (`analysis::late`).
    held: HeldProcesses,
}

impl Analyzer {
    pub fn new(clock: ClockKind) -> Self {
        Analyzer::with_model(clock, CriticalPathEngine::new())
    }
}

impl<M: PathModel> Analyzer<M> {
    pub(crate) fn with_model(clock: ClockKind, model: M) -> Self {
        Analyzer {
            clock,
            engine: model,
            matcher: MessageMatcher::new(Directory::new()),
            sync: SyncTracker::default(),
            procedures: Procedures::default(),
            threads: FxHashMap::default(),
            thread_pids: FxHashMap::default(),
            participants: Default::default(),
            cpus: Default::default(),
            cpu_in: Vec::new(),
            cpu_ended: 0,
            events: 0,
            resynchronised: Resynchronised::default(),
            #[cfg(test)]
            peak_entries: 0,
            first_ts: None,
            last_ts: 0,
            deaths: Vec::new(),
            killed: Vec::new(),
            sampled: None,
            held: HeldProcesses::default(),
        }
    }

    /// Names the SAMPLE records through `locator` and follows the hot functions on the
    /// critical path (the live profile's `sampled_functions`).
    pub fn follow_sampled_functions(&mut self, locator: Box<dyn CodeLocator>) {
        self.follow_sampled_functions_when(locator, HOT);
    }

    /// [`Self::follow_sampled_functions`], a function followed once `rule` holds.
    pub(crate) fn follow_sampled_functions_when(
        &mut self,
        locator: Box<dyn CodeLocator>,
        rule: TrackRule,
    ) {
        self.sampled = Some(LiveSamples::new(locator, rule));
    }

    /// What the samples so far amount to, when sampled functions are followed.
    pub(crate) fn sample_counts(&self) -> Option<LiveSampleCounts> {
        self.sampled.as_ref().map(LiveSamples::counts)
    }

    /// CPU time of the samples in sampled function `p`.
    pub(crate) fn sampled_cpu(&self, p: ProcId) -> u64 {
        self.sampled.as_ref().map_or(0, |s| s.cpu_of(p))
    }

    /// Whether `p` is a sampled function's column released for the next hot function.
    pub(crate) fn is_released_sampled_column(&self, p: ProcId) -> bool {
        self.sampled.as_ref().is_some_and(|s| s.is_free(p))
    }

    /// The live sampled functions and the columns they are followed in (None when the
    /// analyzer follows none).
    fn sampled_columns(&mut self) -> Option<(&mut LiveSamples, SampledColumns<'_, M>)> {
        let live = self.sampled.as_mut()?;
        let columns = SampledColumns {
            procedures: &mut self.procedures,
            engine: &mut self.engine,
            cpu_in: &mut self.cpu_in,
            thread_pids: &self.thread_pids,
            participants: &self.participants,
        };
        Some((live, columns))
    }

    /// Releases the columns of the followed functions no path that counts has time in.
    fn release_sampled_columns(&mut self) {
        if let Some((live, mut columns)) = self.sampled_columns() {
            live.release_unused(&mut columns);
        }
    }

    fn sample(&mut self, r: &SampleRecord) {
        // A thread is known from its first event on; a sample before it has no path.
        let thread = self.threads.get(&r.header.tid);
        let first_cpu = thread.map(|t| t.first_cpu);
        let may_follow = thread.is_some_and(|t| !t.in_library_call()) && self.counts(r.header.tid);
        let Some((live, mut columns)) = self.sampled_columns() else {
            return;
        };
        let stack = live.sample(r, first_cpu, may_follow, &mut columns);
        // Also a sample in no followed function: it takes its part of the thread's work,
        // which the next sample would otherwise take.
        if first_cpu.is_some() {
            self.engine.sampled(r.header.tid, r.header.cpu_ns, &stack);
        }
    }

    pub fn item(&mut self, item: &Item) {
        match item {
            Item::Record(r) => self.record(r),
            Item::Process(p) => self.process(p),
            Item::Probe(p) => self.probe(p),
        }
    }

    /// Sets [`Self::killed`] from what the records so far left undone (called when the
    /// pipeline is flushed: at the end of a recording or a session). Commands are left
    /// for the caller, who knows them.
    pub(crate) fn settle_killed(&mut self) {
        self.end_waits();
        let first = self.first_ts.unwrap_or(0);
        self.killed = self
            .deaths
            .iter()
            .map(|d| {
                let undone = self.matcher.left_undone(d.pid);
                let rank = self.matcher.directory.world_rank(d.pid);
                let left_undone = undone.sends_unreceived
                    + undone.sends_to_it_unreceived
                    + undone.collectives_incomplete
                    > 0;
                Killed {
                    pid: d.pid,
                    rank,
                    command: String::new(),
                    signal: d.signal,
                    signal_name: signal_name(d.signal),
                    at_ns: d.ts_ns.saturating_sub(first),
                    sends_unreceived: undone.sends_unreceived,
                    sends_to_it_unreceived: undone.sends_to_it_unreceived,
                    collectives_incomplete: undone.collectives_incomplete,
                    cut_short: rank.is_some() || left_undone || self.participants.is_empty(),
                }
            })
            .collect();
    }

    pub fn process(&mut self, info: &ProcessInfo) {
        self.matcher.directory.process(info);
        if let Some(s) = &mut self.sampled {
            s.process(info);
        }
    }

    pub fn probe(&mut self, p: &FunctionProbe) {
        let n = self.procedures.add(p);
        self.engine.set_procedures(n);
        self.cpu_in.resize(n, 0);
    }

    fn thread(&mut self, h: &EventHeader) -> &mut ThreadCalls {
        thread_state(&mut self.threads, &mut self.thread_pids, self.clock, h)
    }

    /// Feeds one record (records must come in timestamp order; see `reorder`). The
    /// records of a process whose exit waits for what the nodes' clocks put later are
    /// held until it arrives (`analysis::late`).
    pub fn record(&mut self, r: &Record) {
        // Every record counts as an event read (the recording's count).
        self.events += 1;
        if self.held.is_empty() {
            self.take(r);
            return;
        }
        for pid in self.held.overdue(r.header().ts_ns) {
            self.matcher.give_up_waiting(pid);
            self.held.release(pid);
        }
        match self.held.hold_back(r) {
            HoldBack::NotHeld => self.take(r),
            HoldBack::Held => {}
            HoldBack::Full(pid) => {
                self.matcher.give_up_waiting(pid);
                self.held.release(pid);
            }
        }
        self.go_on_late();
    }

    /// Gives the dependencies that arrived to the exits that waited for them, and
    /// replays the records of the processes that wait no longer.
    fn go_on_late(&mut self) {
        loop {
            for arrival in self.matcher.take_late_arrivals() {
                match self.held.arrived(arrival.pid) {
                    Some(exit) => self
                        .engine
                        .merge_message(exit.tid, &arrival.state, exit.bytes),
                    None => log::debug!(
                        "a late dependency of pid {} arrived, which waits no longer",
                        ShownId(arrival.pid)
                    ),
                }
            }
            let Some(released) = self.held.next_ready() else {
                break;
            };
            self.matcher.set_held(released.pid, false);
            let mut records = released.records;
            while let Some(r) = records.pop_front() {
                if self.held.is_held(released.pid) {
                    // A replayed exit waits again: the rest waits with it.
                    records.push_front(r);
                    self.held.hold_rest(released.pid, records);
                    break;
                }
                self.take(&r);
            }
        }
    }

    /// Ends every wait (the end of the stream): what is still missing is counted.
    pub(crate) fn end_waits(&mut self) {
        for pid in self.held.all() {
            self.matcher.give_up_waiting(pid);
            self.held.release(pid);
        }
        self.go_on_late();
    }

    /// One record, in its turn.
    fn take(&mut self, r: &Record) {
        // A sample observes a thread and is no event of it: it neither cuts the thread's
        // work nor settles a poll, so the path is the same with and without sampling (the
        // graph's reader keeps samples aside, `graph::attribution`).
        if let Record::Sample(s) = r {
            self.sample(s);
            return;
        }
        let h = *r.header();
        #[cfg(test)]
        if self.events.is_multiple_of(256) {
            self.peak_entries = self.peak_entries.max(self.entries_held());
        }
        self.first_ts.get_or_insert(h.ts_ns);
        self.last_ts = self.last_ts.max(h.ts_ns);
        match r {
            // The header of a wakeup is the waker: a traced thread goes on below; anything
            // else (an untraced thread, an interrupt) matters only if it is a thread that
            // just exited and wakes its joiner.
            Record::Wakeup(w) if !self.threads.contains_key(&h.tid) => {
                self.exit_wakeup(h.tid, w.wakee_tid);
                return;
            }
            // A new thread's first wakeup (its creation is the fork record); a switch-in
            // may not know its process yet.
            Record::WakeupNew(_) => return,
            // How a process ended: it follows the EXIT of its last thread, and is no event
            // of that thread (it would start a new path for the id).
            Record::ProcessEnd(e) => {
                self.deaths
                    .extend(Death::from_status(h.tgid, h.ts_ns, e.status));
                if let Some(s) = &mut self.sampled {
                    s.end_process(h.tgid);
                }
                return;
            }
            Record::SwitchIn(_) => {
                if let Some(t) = self.threads.get_mut(&h.tid) {
                    let other = t
                        .clock
                        .waits_on()
                        .map_or(0, |c| self.cpus.entry(c).or_default().at(h.ts_ns));
                    t.clock.switched_in(h.ts_ns, other);
                    if self.participants.contains(&h.tgid) {
                        self.cpus.entry(h.cpu).or_default().runs(h.tid, h.ts_ns);
                    }
                    self.engine.scheduled(h.tid, Sched::Running);
                }
                return;
            }
            // The switches of a thread after its exit record (the kernel still tears it
            // down, and may preempt it meanwhile) are no new thread's: they would start
            // a path for the id with the teardown's CPU time as work, which the metrics
            // do not count. A thread that reuses the id shows itself by another record.
            Record::SwitchOut(_)
                if !self.threads.contains_key(&h.tid) && self.sync.exited(h.tid).is_some() =>
            {
                return;
            }
            _ => {}
        }
        if self.participants.contains(&h.tgid) && !matches!(r, Record::SwitchOut(_)) {
            self.cpus.entry(h.cpu).or_default().runs(h.tid, h.ts_ns);
        }
        let t = thread_state(&mut self.threads, &mut self.thread_pids, self.clock, &h);
        let first = !std::mem::replace(&mut t.analysed, true);
        t.clock.ran();
        if let Some(poll_cpu) = t.clock.poll_ended_cpu() {
            if let Some(went_on) = poll_loop_went_on(r, !t.open.is_empty(), poll_cpu) {
                t.clock.settle_poll(went_on, h.ts_ns, h.cpu_ns);
            }
        }
        let clocks = if self.engine.all_clocks() {
            t.clock.clocks(h.ts_ns, h.cpu_ns)
        } else {
            Clocks::default()
        };
        let work = t.clock.work(h.ts_ns, h.cpu_ns);
        // CPU time inside selected procedures (any thread), for the profile's CPU column.
        let delta = h.cpu_ns.saturating_sub(t.cpu);
        t.cpu = t.cpu.max(h.cpu_ns);
        for (i, &p) in t.active.iter().enumerate() {
            if !t.active[..i].contains(&p) {
                self.cpu_in[p] += delta;
            }
        }
        if first {
            // A thread its process created while traced starts where its creator cloned
            // it, with all its work (its clock started at the clone).
            if let Some(creator) = self.sync.first_event(h.tgid, h.tid) {
                self.engine.advance_clocks(h.tid, 0, &Clocks::default(), &h);
                self.engine.merge(h.tid, &creator);
            }
        }
        self.engine.advance_clocks(h.tid, work, &clocks, &h);
        if makes_participant(r) && self.participants.insert(h.tgid) && self.participants.len() == 1
        {
            // From now on only the program's processes count: what the launcher's
            // functions hold on the path no longer matters.
            self.release_sampled_columns();
        }
        match r {
            Record::CallEnter(e) => self.call_enter(e),
            Record::HandleArray(a) => {
                let vals =
                    &a.values[..(a.total.saturating_sub(a.first) as usize).min(a.values.len())];
                let pid = h.tgid;
                let Some(t) = self.threads.get_mut(&h.tid) else {
                    return;
                };
                let outermost = t.open.len() == 1;
                let Some(open) = t.open.last_mut() else {
                    return;
                };
                open.handles.extend_from_slice(vals);
                let id = split_call_field(open.entry.header.call).id;
                // The sends whose destinations or requests are in the array.
                match calls::spec(id).and_then(|s| s.sends) {
                    Some(Sends::Multicast) if outermost => {
                        let tag = open.entry.tag;
                        let state = self.engine.snapshot(h.tid);
                        self.matcher.on_mcast_targets(pid, tag, vals, &state);
                    }
                    Some(Sends::Persistent(RequestsIn::HandleArray)) if outermost => {
                        let entry = open.entry;
                        let state = self.engine.snapshot(h.tid);
                        self.matcher.on_startall(pid, &entry, vals, &state);
                    }
                    _ => {}
                }
            }
            Record::StatusArray(a) => {
                let Some(open) = self.threads.get_mut(&h.tid).and_then(|t| t.open.last_mut())
                else {
                    return;
                };
                let first = a.first as usize;
                let n = (a.total.saturating_sub(a.first) as usize).min(a.source.len());
                if open.statuses.len() < first + n {
                    open.statuses.resize(first + n, ReceivedStatus::UNSET);
                }
                for j in 0..n {
                    open.statuses[first + j] = ReceivedStatus {
                        source: a.source[j],
                        tag: a.tag[j],
                        bytes: a.bytes[j],
                    };
                }
            }
            Record::CallExit(x) => self.call_exit(x),
            Record::CallsUnwound(u) => self.calls_unwound(&h, u.calls),
            Record::FuncEnter(_) | Record::FuncExit(_) => {
                if let Some(p) = self.procedures.of_probe(h.call) {
                    let active = &mut self.thread(&h).active;
                    if matches!(r, Record::FuncEnter(_)) {
                        active.push(p);
                        self.engine.enter(h.tid, p);
                    } else {
                        if let Some(i) = active.iter().rposition(|&q| q == p) {
                            active.remove(i);
                        }
                        self.engine.exit(h.tid, p);
                    }
                }
            }
            Record::FutexEnter(f) => {
                let t = self.thread(&h);
                t.futex = Some(f.op);
                if futex_waits(f.op) {
                    t.clock.begin_blocking(h.ts_ns, h.cpu_ns);
                }
            }
            Record::FutexExit(_) => {
                let t = self.thread(&h);
                if t.futex.take().is_some_and(futex_waits) {
                    t.clock.end_blocking(h.ts_ns, h.cpu_ns);
                    if let Some(wake) = self.sync.wait_returned(h.tid) {
                        self.thread(&h).woken_by_exit = wake.exited;
                        self.engine.merge(h.tid, &wake.mark);
                    }
                }
            }
            Record::Wakeup(w) => self.futex_wakeup(h.tid, w.wakee_tid),
            Record::SwitchOut(s) => {
                let cpu = self.cpus.entry(h.cpu).or_default();
                cpu.left(h.tid, h.ts_ns);
                let other = cpu.at(h.ts_ns);
                let clock = &mut self.thread(&h).clock;
                clock.switched_out(h.ts_ns, s.prev_state, h.cpu, other);
                let what = match s.prev_state {
                    0 => Sched::Yielded,
                    p if workclock::still_runnable(p) => Sched::Preempted,
                    _ => Sched::Asleep,
                };
                self.engine.scheduled(h.tid, what);
            }
            Record::Fork(f) => {
                self.thread(&h).cloned = Some(f.child_tid);
                let creator = self.engine.snapshot(h.tid);
                self.sync.clone_thread(h.tgid, f.child_tid, creator);
            }
            // Traced from its start: everything it sends is seen.
            Record::Exec(_) => self.matcher.traced_from_start(h.tgid),
            Record::Exit(_) => {
                let last = self.engine.snapshot(h.tid);
                self.sync.exit(h.tid, last);
                if let Some(t) = self.threads.remove(&h.tid) {
                    self.cpu_ended += t.cpu - t.first_cpu;
                }
                if let Some(s) = &mut self.sampled {
                    s.end_thread(h.tid);
                }
                let participant = self.participants.contains(&h.tgid);
                self.engine.end_thread(h.tid, participant);
            }
            _ => {}
        }
    }

    /// Whether thread `tid` is blocked in a futex wait of its own: one inside an MPI/PVM
    /// call is the library's internal synchronization (with its helper threads), which
    /// the matcher's dependencies stand for.
    fn in_futex_wait(&self, tid: u32) -> bool {
        self.threads
            .get(&tid)
            .is_some_and(|t| !t.in_library_call() && t.futex.is_some_and(futex_waits))
    }

    /// Traced thread `waker` (advanced to this event) woke `wakee`: a dependency when the
    /// waker is in a futex wake call and the wakee in a futex wait, neither inside an
    /// MPI/PVM call.
    fn futex_wakeup(&mut self, waker: u32, wakee: u32) {
        // A wake from inside an MPI/PVM call is the library's own business too.
        let waking = self
            .threads
            .get(&waker)
            .is_some_and(|t| !t.in_library_call() && t.futex.is_some_and(futex_wakes));
        if waking && self.in_futex_wait(wakee) {
            let mark = self.engine.snapshot(waker);
            self.sync.wake(wakee, mark, None);
        }
    }

    /// A thread that exited wakes `wakee` (a join on its thread-id futex).
    fn exit_wakeup(&mut self, waker: u32, wakee: u32) {
        if !self.in_futex_wait(wakee) {
            return;
        }
        if let Some(mark) = self.sync.exited(waker).cloned() {
            self.sync.wake(wakee, mark, Some(waker));
        }
    }

    fn call_enter(&mut self, e: &CallRecord) {
        let h = e.header;
        let CallField { id, .. } = split_call_field(h.call);
        let t = self.thread(&h);
        let outermost = t.open.is_empty();
        t.open.push(OpenCall {
            entry: *e,
            handles: Vec::new(),
            statuses: Vec::new(),
        });
        if !outermost {
            return; // a call made by the library itself
        }
        // Every MPI/PVM call is communication, and a pthread call waits: its time is not
        // work on the path. Creating a thread is the creator's work.
        if calls::waits(id) {
            t.clock.begin_blocking(h.ts_ns, h.cpu_ns);
        }
        if id == call::MPI_FINALIZE {
            self.engine.milestone(h.tid, Milestone::Finalizing);
        }
        if let Some(role) = thread_call_role(id) {
            self.lock_call_enter(role, e);
            return;
        }
        let state =
            MessageMatcher::<M::Mark>::wants_snapshot(id).then(|| self.engine.snapshot(h.tid));
        self.matcher.on_enter(h.tgid, e, state);
    }

    /// A pthread call begins: a release (an unlock, or the mutex a condition wait gives
    /// up) or a signal is what the next acquisition or wake-up depends on.
    fn lock_call_enter(&mut self, role: Role, e: &CallRecord) {
        let h = e.header;
        match role {
            Role::LockRelease => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.release(h.tgid, e.handle, mark);
            }
            Role::CondWait => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.release(h.tgid, e.comm, mark);
            }
            Role::CondSignal => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.signal(h.tgid, e.handle, h.ts_ns, mark);
            }
            Role::ThreadJoin => self.thread(&h).woken_by_exit = None,
            Role::SemPost => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.sem_post(h.tgid, e.handle, mark);
            }
            // OpenMP (lowered records): a thread's part of a region ended, or it arrived
            // at a barrier. A wait resumed after a task is neither.
            Role::OmpJoin | Role::OmpIdle if e.peer == 0 => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.omp_arrived(h.tgid, region(e), mark);
            }
            Role::OmpBarrier if e.peer == 0 => {
                let mark = self.engine.snapshot(h.tid);
                self.sync
                    .omp_barrier_arrived(h.tgid, region(e), e.tag, mark);
            }
            _ => {}
        }
    }

    /// A pthread call returns: an acquisition depends on the lock's previous release, a
    /// condition wait on the signal since it began and on its mutex's release.
    fn lock_call_exit(&mut self, role: Role, entry: &CallRecord, x: &CallRecord) {
        let h = x.header;
        let mut incoming = Vec::new();
        match role {
            // Trylock returns non-zero when it did not take the lock.
            Role::LockAcquire if x.ret == 0 => {
                incoming.extend(self.sync.acquire(h.tgid, entry.handle));
            }
            Role::CondWait => {
                let since = entry.header.ts_ns;
                incoming.extend(self.sync.cond_returned(h.tgid, entry.handle, since));
                incoming.extend(self.sync.acquire(h.tgid, entry.comm));
            }
            Role::SemInit if x.ret == 0 => {
                self.sync
                    .sem_init(h.tgid, entry.handle, entry.peer.max(0) as u64);
            }
            Role::SemWait if x.ret == 0 => {
                incoming.extend(self.sync.sem_taken(h.tgid, entry.handle));
            }
            Role::ThreadCreate if x.ret == 0 => {
                if let Some(child) = self.thread(&h).cloned.take() {
                    self.sync.created(h.tgid, x.handle, child);
                }
            }
            // The joiner goes on after the joined thread's end, whether or not it had to
            // wait for it (a join of a thread that has exited, or a try-join, does not):
            // a dependency unless the thread's exit already woke it from its wait here.
            Role::ThreadJoin if x.ret == 0 => {
                let woken_by = self.thread(&h).woken_by_exit.take();
                if let Some(joined) = self.sync.joined(h.tgid, entry.handle) {
                    if woken_by != Some(joined.tid) {
                        incoming.push(joined.end);
                    }
                }
            }
            // OpenMP: the fork is what the workers' parts depend on; the end of a region
            // and a barrier's exit depend on every arrival. (A wait suspended for a task
            // is not released.)
            Role::OmpFork => {
                let mark = self.engine.snapshot(h.tid);
                self.sync.omp_fork(h.tgid, region(entry), mark);
            }
            Role::OmpIdle if x.peer == 0 => {
                incoming.extend(self.sync.omp_started(h.tgid, region(x)));
            }
            Role::OmpJoin if x.peer == 0 => {
                incoming.extend(self.sync.omp_joined(h.tgid, region(entry)));
            }
            Role::OmpBarrier if x.peer == 0 => {
                incoming.extend(self.sync.omp_barrier_left(h.tgid, region(entry), entry.tag));
            }
            _ => {}
        }
        for m in &incoming {
            self.engine.merge(h.tid, m);
        }
    }

    fn call_exit(&mut self, x: &CallRecord) {
        let h = x.header;
        let t = thread_state(&mut self.threads, &mut self.thread_pids, self.clock, &h);
        // Paired by call id: an exit the probes did not write drops its call here, rather
        // than leaving it open around every later call of the thread.
        let exit_id = split_call_field(h.call).id;
        let closed = close_call(&mut t.open, exit_id, |c| {
            split_call_field(c.entry.header.call).id
        });
        self.resynchronised.count(closed.as_ref());
        let Some(closed) = closed else { return };
        let open = closed.entry;
        if !t.open.is_empty() {
            return;
        }
        let CallField { id, .. } = split_call_field(open.entry.header.call);
        if calls::polled_nothing(id, x) {
            t.clock.end_blocking_after_poll(h.ts_ns, h.cpu_ns);
        } else if calls::waits(id) {
            t.clock.end_blocking(h.ts_ns, h.cpu_ns);
        }
        let pid = h.tgid;
        if let Some(role) = thread_call_role(id) {
            self.lock_call_exit(role, &open.entry, x);
            return;
        }
        if calls::spec(id).is_some_and(|s| s.role == Role::Setup) {
            self.matcher
                .directory
                .setup_call(pid, &open.entry, x, &open.handles);
            if matches!(id, call::MPI_INIT | call::MPI_INIT_THREAD) {
                self.engine.milestone(h.tid, Milestone::Initialized);
            }
        }
        // Bytes received (from the status), else the bytes the call was given.
        let bytes = [x.bytes, open.entry.bytes]
            .into_iter()
            .find(|&b| b >= 0)
            .map(|b| b as u64);
        for incoming in self
            .matcher
            .on_exit(pid, &open.entry, &open.handles, &open.statuses, x)
        {
            self.engine.merge_message(h.tid, &incoming, bytes);
        }
        let late = self.matcher.take_late_waits();
        if late > 0 {
            self.held.hold(pid, h.tid, bytes, late, h.ts_ns);
            self.matcher.set_held(pid, true);
        }
    }

    /// The probes found the thread's `calls` innermost open calls returned without their
    /// exits (`CALLS_UNWOUND`): they are dropped, as the probes dropped them, so that the
    /// thread's later calls pair and count as outermost again. A dropped outermost call
    /// that waited ends its wait here, when it was found out: its true end is unknown.
    fn calls_unwound(&mut self, h: &EventHeader, calls: u32) {
        let t = thread_state(&mut self.threads, &mut self.thread_pids, self.clock, h);
        let outermost = (t.open.len() <= calls as usize)
            .then(|| t.open.first().map(|o| o.entry))
            .flatten();
        self.resynchronised.exits_missing += drop_unwound(&mut t.open, calls);
        if let Some(entry) = outermost {
            if calls::waits(split_call_field(entry.header.call).id) {
                t.clock.end_blocking(h.ts_ns, h.cpu_ns);
            }
        }
    }

    /// Whether thread `tid` may end the critical path: when the trace has participants
    /// (processes that call MPI/PVM or a selected procedure), only their threads may.
    pub fn counts(&self, tid: u32) -> bool {
        self.counts_if(tid, !self.participants.is_empty())
    }

    /// Processes of the program itself (see `participants`).
    pub fn participants(&self) -> &FxHashSet<u32> {
        &self.participants
    }

    /// Whether the trace has participant processes.
    pub(crate) fn has_participants(&self) -> bool {
        !self.participants.is_empty()
    }

    pub(crate) fn counts_if(&self, tid: u32, only_participants: bool) -> bool {
        counted(
            &self.thread_pids,
            &self.participants,
            tid,
            only_participants,
        )
    }

    /// CPU time of all traced threads while they were traced.
    pub(crate) fn cpu_total(&self) -> u64 {
        self.cpu_ended
            + self
                .threads
                .values()
                .map(|t| t.cpu - t.first_cpu)
                .sum::<u64>()
    }

    /// The process of a thread, if it was seen.
    pub(crate) fn pid_of(&self, tid: u32) -> Option<u32> {
        self.thread_pids.get(&tid).copied()
    }

    /// Every thread seen and its process.
    pub(crate) fn thread_pids(&self) -> &FxHashMap<u32, u32> {
        &self.thread_pids
    }

    /// CPU time spent inside procedure `p` by all threads.
    pub(crate) fn cpu_in(&self, p: ProcId) -> u64 {
        self.cpu_in.get(p).copied().unwrap_or(0)
    }

    /// The most entries held at any sample point (every 256 records).
    #[cfg(test)]
    pub(crate) fn peak_entries(&self) -> usize {
        self.peak_entries.max(self.entries_held())
    }

    /// Entries the analysis holds (threads, messages in flight, open requests and
    /// collectives): bounded by the program's shape, not by the length of the run.
    #[cfg(test)]
    pub(crate) fn entries_held(&self) -> usize {
        self.engine.threads_held()
            + self.threads.len()
            + self.matcher.entries_held()
            + self.sync.entries_held()
    }
}

impl Analyzer<CriticalPathEngine> {
    /// The critical path so far: the thread it ends in and the path.
    pub fn critical(&self) -> Option<CriticalEnd> {
        let only = !self.participants.is_empty();
        self.engine.critical(&|tid| self.counts_if(tid, only), only)
    }

    /// Length of the critical path if procedure `p` took no time.
    pub fn zeroed_length(&self, p: ProcId) -> u64 {
        let only = !self.participants.is_empty();
        self.engine
            .zeroed_length(p, &|tid| self.counts_if(tid, only), only)
    }
}
