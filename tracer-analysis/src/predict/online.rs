//! The what-if replay online (`tracer record --whatif-placement`): the analysis tells
//! this model each thread's events as they come; it turns them into the replay's steps
//! (the same [`Shape`] as offline: the model is `sim.rs`) and runs the processor-sharing simulation as far as
//! what it knows allows, forgetting what it has simulated. Memory holds the threads,
//! the steps not simulated yet and the sources of dependencies still in flight (Eom and
//! Hollingsworth keep "only the part of the graph not yet processed").
//!
//! The simulation cannot pass a moment where a thread's next step is unknown and the
//! thread may be working. A thread asleep in the recording (switched out, not runnable)
//! holds nothing back: its work so far is cut into a step when it falls asleep, and a
//! step that arrives after the simulation went past its start begins late. A thread that
//! falls asleep inside an MPI/PVM call is the exception: the call stays one step, as
//! offline, because what it waits for is only known at its exit; meanwhile it waits in
//! the replay, and takes its share of the CPU if its process polls. Whether a process
//! polls is decided from its waits in communication calls seen so far (offline: from
//! the whole run).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, OnceLock};

use tracer_common::{kind, EventHeader};

use super::network::{NetworkTable, Scope};
use super::placement::{CpuSet, PlacementSpec};
use super::replay::ReplayError;
use super::sim::{
    held_time, is_mpi_or_pvm_exit, is_rendezvous, is_setup_exit, keeps_other_work, notice_delay,
    off_time, rate, Phase, Shape, Transport, DEFAULT_SLICE_NS,
};
use crate::analysis::workclock::ClockKind;
use crate::analysis::{Clocks, Milestone, PathModel, Pipeline, Sched};
use crate::format::calls::split_call_field;
use crate::format::recording::Item;
use crate::format::ProcessInfo;
use crate::units::ms_tenths;

/// Time a process spent inside the waits of MPI/PVM calls: on CPU, and awake (on CPU or
/// runnable); their ratio tells whether it polls.
#[derive(Clone, Copy, Default)]
struct WaitTime {
    cpu: u64,
    awake: u64,
}

/// An event other events depend on; `at` is its replayed time once simulated.
#[derive(Debug)]
pub struct Source {
    ts: u64,
    tid: u32,
    pid: u32,
    at: OnceLock<f64>,
}

pub(crate) type Mark = Arc<Source>;

/// A message's cost in the predicted network (see [`super::replay::MessageCost`]).
pub type OwnedCost = Box<dyn Fn(bool, u64) -> Option<u64> + Send>;

/// A network table as the replay's message cost: a remote message costs what the table
/// says of `remote` messages of its size, any other what it says of `local` ones.
pub fn network_cost(table: NetworkTable) -> OwnedCost {
    Box::new(move |remote, bytes| {
        table.latency_ns(if remote { Scope::Remote } else { Scope::Local }, bytes)
    })
}

/// A dependency of an open vertex; `bytes` is Some for messages (bytes when known).
struct OpenDep {
    mark: Mark,
    bytes: Option<Option<u64>>,
}

/// A thread's latest event, open for the dependencies of its record.
struct Open {
    ts: u64,
    label: u32,
    first: bool,
    /// Since the thread's previous event: elapsed time, work on each clock, and time
    /// inside blocking calls on the cpu and awake raw clocks.
    elapsed: u64,
    clocks: Clocks,
    deps: Vec<OpenDep>,
    source: Option<Mark>,
    milestone: Option<Milestone>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Made {
    Cut,
    Snapshot,
    Merge,
}

struct Track {
    pid: u32,
    open: Option<Open>,
    made: Made,
    made_at: u64,
    /// Time of the thread's latest event.
    last_ts: u64,
    last: Clocks,
    /// Work and raw clock time since the latest event.
    pending: Clocks,
    /// The MPI/PVM call the thread is inside (between its entry and exit records).
    mpi_call: Option<u16>,
    stack: Vec<usize>,
}

/// What a thread does before its next event (see [`Shape`]).
struct Step {
    /// A thread's first event: `off` is its start, from the recording's first event.
    first: bool,
    work: f64,
    other: f64,
    spun: f64,
    off: f64,
    /// See [`Shape::other_off`]: added to `off` when the step begins, if kept.
    other_off: f64,
    deps: Vec<StepDep>,
    spins: bool,
    source: Option<Mark>,
    milestone: Option<Milestone>,
    ts: u64,
}

/// A dependency of a step: its source, the latency after it, and whether it is a
/// message above the eager limit (see [`super::replay::notice_delay`]).
struct StepDep {
    mark: Mark,
    latency: f64,
    /// The part of `latency` other work held the thread back (see [`Shape::latency_held`]).
    held: f64,
    /// The CPU hand-off after it (see [`Shape::handoff`]).
    handoff: f64,
    rendezvous: bool,
    /// A message's size class (see [`Transport::class`]); None for other dependencies
    /// and where a network table gave the latency.
    class: Option<u32>,
}

impl Step {
    /// Time held before the event (see [`held_time`]).
    fn held(&self, keep_other: bool) -> f64 {
        held_time(self.spun, self.other, keep_other)
    }
}

struct Chain {
    pid: u32,
    /// Whether the current step keeps the time other work held the thread back.
    keep: bool,
    queue: VecDeque<Step>,
    phase: Phase,
    /// When the chain passed its latest event.
    prev_at: f64,
    ended: bool,
    asleep: bool,
    /// Asleep inside an MPI/PVM call whose exit has not come yet, in a process that polls
    /// as far as that call's waiting so far tells: it spins there.
    spins_asleep: bool,
}

impl Chain {
    fn new(pid: u32) -> Self {
        Chain {
            pid,
            keep: false,
            queue: VecDeque::new(),
            phase: Phase::Idle,
            prev_at: 0.0,
            ended: false,
            asleep: false,
            spins_asleep: false,
        }
    }
}

/// The replay's figures so far (ns; see [`super::replay::Prediction`]).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct OnlinePrediction {
    pub measured_ns: u64,
    pub predicted_ns: f64,
    pub measured_total_ns: u64,
    pub predicted_total_ns: f64,
    /// Most steps held at once (the memory bound: they are freed once simulated).
    pub peak_steps: usize,
}

impl OnlinePrediction {
    /// One line for a person.
    pub fn text_line(&self) -> String {
        format!(
            "what-if (online): parallel section measured {}, predicted {} ({:+.1} %); \
             at most {} steps held",
            ms_tenths(self.measured_ns as f64),
            ms_tenths(self.predicted_ns),
            100.0 * (self.predicted_ns / self.measured_ns.max(1) as f64 - 1.0),
            self.peak_steps
        )
    }
}

/// The online replay: a [`PathModel`] for the analysis.
pub struct OnlineReplay {
    spec: Option<PlacementSpec>,
    cost: Option<OwnedCost>,
    /// What the transport costs, from the messages seen so far (offline: from all).
    transport: Transport,
    /// None: decide from the recording; Some: every process polls, or none.
    polling: Option<bool>,
    groups: Vec<(CpuSet, f64)>,
    group_of: HashMap<u32, Option<usize>>,
    ranks: HashMap<u32, i32>,
    /// Processes of the program, in the order they became so.
    program: Vec<u32>,
    /// Per process: time inside the waits of MPI/PVM communication calls so far, and how
    /// often its threads yielded the CPU inside them.
    waits: HashMap<u32, WaitTime>,
    yields: HashMap<u32, u64>,
    tracks: HashMap<u32, Track>,
    chains: HashMap<u32, Chain>,
    /// Threads that made an MPI/PVM communication call, and the CPUs their processes ran
    /// on since (as offline, [`super::RecordedRun::ran_on`]).
    talked: HashSet<u32>,
    ran_on: HashMap<u32, BTreeSet<u32>>,
    steps_held: usize,
    /// Runnable threads in each group now, and the scheduler's time slice.
    load: Vec<usize>,
    slice_ns: f64,
    serial: u64,
    at: EventHeader,
    t0: Option<u64>,
    t: f64,
    /// Parallel section: replayed and recorded (first MPI_Init return, last MPI_Finalize
    /// call), and the latest event of all.
    start: (f64, u64),
    end: (f64, u64),
    last: (f64, u64),
    out: OnlinePrediction,
    error: Option<ReplayError>,
}

impl OnlineReplay {
    pub fn new(
        spec: Option<PlacementSpec>,
        cost: Option<OwnedCost>,
        polling: Option<bool>,
    ) -> Self {
        OnlineReplay {
            spec,
            cost,
            transport: Transport::default(),
            polling,
            groups: Vec::new(),
            group_of: HashMap::new(),
            ranks: HashMap::new(),
            program: Vec::new(),
            waits: HashMap::new(),
            yields: HashMap::new(),
            tracks: HashMap::new(),
            chains: HashMap::new(),
            talked: HashSet::new(),
            ran_on: HashMap::new(),
            steps_held: 0,
            load: Vec::new(),
            slice_ns: DEFAULT_SLICE_NS,
            serial: 0,
            at: EventHeader::default(),
            t0: None,
            t: 0.0,
            start: (f64::INFINITY, u64::MAX),
            end: (f64::NEG_INFINITY, 0),
            last: (0.0, 0),
            out: OnlinePrediction::default(),
            error: None,
        }
    }

    /// The replay `tracer record --whatif-placement/--whatif-network` runs while it
    /// traces, polling as the recording shows; None when neither changes anything.
    pub fn asked(spec: Option<PlacementSpec>, table: Option<NetworkTable>) -> Option<Self> {
        if spec.is_none() && table.is_none() {
            return None;
        }
        Some(OnlineReplay::new(spec, table.map(network_cost), None))
    }

    /// What the recording says about a process (its MPI rank).
    pub fn process(&mut self, info: &ProcessInfo) {
        // An MPI rank is part of the program from its start (it calls MPI only later).
        if let Some(r) = info.env_rank {
            self.ranks.insert(info.pid, r);
            self.group_of.remove(&info.pid);
            self.participant(info.pid);
        }
    }

    /// Process `pid` calls MPI/PVM or a selected procedure: it is part of the program.
    fn participant(&mut self, pid: u32) {
        if !self.program.contains(&pid) {
            self.program.push(pid);
            self.group_of.remove(&pid);
        }
    }

    fn group(&mut self, pid: u32) -> Option<usize> {
        if let Some(&g) = self.group_of.get(&pid) {
            return g;
        }
        let k = self.program.iter().position(|&p| p == pid);
        let set = match (&self.spec, k) {
            (Some(spec), Some(k)) => spec.cpu_set(k, self.ranks.get(&pid).copied()),
            _ => None,
        };
        let g = set.map(
            |set| match self.groups.iter().position(|(s, _)| *s == set) {
                Some(g) => g,
                None => {
                    let capacity = set.cpus.len() as f64;
                    self.groups.push((set, capacity));
                    self.groups.len() - 1
                }
            },
        );
        self.group_of.insert(pid, g);
        g
    }

    fn node(&mut self, pid: u32) -> String {
        match self.group(pid) {
            Some(g) if !self.groups[g].0.node.starts_with("#each") => self.groups[g].0.node.clone(),
            _ => String::new(),
        }
    }

    /// Whether process `pid` and those placed with it stay on the CPUs they ran on so
    /// far (as offline, [`keeps_other_work`]).
    fn keeps_other_work(&mut self, pid: u32) -> bool {
        let group = self.group(pid);
        let placed = group.map(|g| self.groups[g].0.clone());
        let members = self
            .group_of
            .iter()
            .filter(|(_, &g)| g.is_some() && g == group)
            .map(|(q, _)| self.ran_on.get(q));
        keeps_other_work(placed.as_ref(), members)
    }

    fn polls(&self, pid: u32) -> bool {
        self.polls_with(pid, WaitTime::default())
    }

    /// [`Self::polls`] counting also the time of a wait still going on.
    fn polls_with(&self, pid: u32, current: WaitTime) -> bool {
        self.polling.unwrap_or_else(|| {
            let yields = self.yields.get(&pid).copied().unwrap_or(0);
            let before = self.waits.get(&pid).copied().unwrap_or_default();
            super::polls(
                before.cpu + current.cpu,
                before.awake + current.awake,
                yields,
            )
        })
    }

    /// A new open vertex for the current record on thread `tid`, after the work pending.
    fn cut(&mut self, tid: u32, made: Made) {
        self.seal(tid);
        let (serial, at) = (self.serial, self.at);
        let t = self.tracks.get_mut(&tid).expect("advanced first");
        let p = std::mem::take(&mut t.pending);
        t.open = Some(Open {
            ts: at.ts_ns,
            label: ((at.kind as u32) << 16) | at.call as u32,
            first: false,
            elapsed: at.ts_ns.saturating_sub(t.last_ts),
            clocks: p,
            deps: Vec::new(),
            source: None,
            milestone: None,
        });
        (t.made, t.made_at, t.last_ts) = (made, serial, at.ts_ns);
    }

    /// Hands thread `tid`'s open vertex to the simulation.
    fn seal(&mut self, tid: u32) {
        let Some(t) = self.tracks.get_mut(&tid) else {
            return;
        };
        let Some(o) = t.open.take() else { return };
        let pid = t.pid;
        let lats: Vec<u64> = o
            .deps
            .iter()
            .map(|d| o.ts.saturating_sub(d.mark.ts))
            .collect();
        // As offline: only communication calls (not setup calls) tell how the library
        // waits.
        let mpi_wait = !o.deps.is_empty() && is_mpi_or_pvm_exit(o.label);
        let setup = is_setup_exit(o.label);
        if mpi_wait && !setup {
            let w = self.waits.entry(pid).or_default();
            w.cpu += o.clocks.raw[0].saturating_sub(o.clocks.work[0]);
            w.awake += o.clocks.raw[1].saturating_sub(o.clocks.work[1]);
        }
        let polls = is_mpi_or_pvm_exit(o.label) && self.polls(pid);
        let (work, other, spun, off, shape) = if o.first {
            (
                0.0,
                0.0,
                0.0,
                o.ts.saturating_sub(self.t0.unwrap_or(o.ts)) as f64,
                None,
            )
        } else {
            let shape = Shape::new(o.elapsed, &o.clocks, &lats, polls, setup);
            (shape.work, shape.other, shape.spun, shape.off, Some(shape))
        };
        let other_off = shape.as_ref().map_or(0.0, |s| s.other_off);
        let mut deps = Vec::with_capacity(o.deps.len());
        for (d, lat) in o.deps.into_iter().zip(lats) {
            let rendezvous = is_rendezvous(o.label, d.bytes);
            let mut latency = shape.as_ref().map_or(lat as f64, |s| s.latency(lat));
            let mut held = shape.as_ref().map_or(0.0, |s| s.latency_held(lat));
            let mut handoff = shape.as_ref().map_or(0.0, |s| s.handoff(lat));
            let mut class = d.bytes.map(Transport::class);
            // As offline: the thread was in its call (entered at its previous event)
            // when the source happened.
            let waited = !o.first && d.mark.ts >= o.ts.saturating_sub(o.elapsed);
            if let (Some(class), true) = (class, waited) {
                self.transport.note(class, latency);
            }
            if let (Some(bytes), true) = (d.bytes, self.cost.is_some()) {
                class = None;
                let remote = self.node(d.mark.pid) != self.node(pid);
                match (self.cost.as_ref().unwrap())(remote, bytes.unwrap_or(0)) {
                    Some(l) => (latency, held, handoff) = (l as f64, 0.0, 0.0),
                    None => {
                        self.error.get_or_insert(ReplayError::NoCost {
                            scope: if remote { "remote" } else { "local" },
                            from: d.mark.pid,
                            to: pid,
                        });
                    }
                }
            }
            deps.push(StepDep {
                mark: d.mark,
                latency,
                held,
                handoff,
                rendezvous,
                class,
            });
        }
        let step = Step {
            first: o.first,
            work,
            other,
            spun,
            off,
            other_off,
            deps,
            spins: mpi_wait && polls,
            source: o.source,
            milestone: o.milestone,
            ts: o.ts,
        };
        self.chains
            .entry(tid)
            .or_insert_with(|| Chain::new(pid))
            .queue
            .push_back(step);
        self.steps_held += 1;
        self.out.peak_steps = self.out.peak_steps.max(self.steps_held);
    }

    /// Runs the simulation as far as what is known allows (to the end when `finishing`).
    fn simulate(&mut self, finishing: bool) {
        loop {
            // In thread id order: a map's order changes from run to run, and which
            // chain settles first decides whether a receive passes in this round or the
            // next, under the next round's CPU load (its notice delay).
            let mut settling: Vec<u32> = self.chains.keys().copied().collect();
            settling.sort_unstable();
            for tid in settling {
                self.settle(tid);
            }
            // Settling drops the chains of ended threads that are done.
            let tids: Vec<u32> = self.chains.keys().copied().collect();
            let unknown = self
                .chains
                .values()
                .any(|c| c.phase == Phase::Idle && !c.ended && !c.asleep);
            if unknown && !finishing {
                return;
            }
            let mut groups = HashMap::new();
            for &tid in &tids {
                let g = self.group(self.chains[&tid].pid);
                groups.insert(tid, g);
            }
            let mut load = vec![0usize; self.groups.len()];
            for &tid in &tids {
                if let (Some(g), true) = (groups[&tid], self.runnable(tid)) {
                    load[g] += 1;
                }
            }
            self.load.clone_from(&load);
            let rate = |g: Option<usize>, groups: &[(CpuSet, f64)]| {
                g.map_or(1.0, |g| rate(groups[g].1, load[g]))
            };
            let mut next = f64::INFINITY;
            for &tid in &tids {
                let c = &self.chains[&tid];
                let end = match c.phase {
                    Phase::Wait => self.ready(c).map_or(f64::INFINITY, |r| r.max(self.t)),
                    Phase::Idle | Phase::Done => continue,
                    p => p
                        .end(self.t, rate(groups[&tid], &self.groups))
                        .unwrap_or(f64::INFINITY),
                };
                next = next.min(end);
            }
            if !next.is_finite() {
                return;
            }
            let dt = next - self.t;
            self.t = next;
            for &tid in &tids {
                let r = rate(groups[&tid], &self.groups);
                self.chains.get_mut(&tid).unwrap().phase.advance(dt, r);
            }
        }
    }

    fn runnable(&self, tid: u32) -> bool {
        let c = &self.chains[&tid];
        match c.phase {
            // Waiting inside an MPI/PVM call whose step is not known yet: a polling
            // process spins there, as its step will say.
            Phase::Idle => c.spins_asleep,
            p => p.runnable(c.queue.front().is_some_and(|s| s.spins)),
        }
    }

    /// When the dependencies of a chain's next event are met, if every source happened.
    fn ready(&self, c: &Chain) -> Option<f64> {
        let step = c.queue.front()?;
        let mut ready = f64::NEG_INFINITY;
        let group = self.group_of.get(&c.pid).copied().flatten();
        let mut rendezvous_beside = false;
        for d in &step.deps {
            let held = if c.keep { 0.0 } else { d.held };
            let handoff = if c.keep { d.handoff } else { 0.0 };
            let latency = self.transport.latency(d.class, d.latency, c.keep);
            let t = d.mark.at.get()? + latency - held + handoff;
            if t > ready {
                ready = t;
                rendezvous_beside =
                    d.rendezvous && self.group_of.get(&d.mark.pid).copied().flatten() == group;
            }
        }
        // As offline: a polling thread on an oversubscribed CPU set notices what it
        // waited for when it next gets a CPU.
        let busy = group.is_some_and(|g| {
            self.load
                .get(g)
                .is_some_and(|&l| l as f64 > self.groups[g].1)
        });
        Some(ready + notice_delay(self.slice_ns, busy, step.spins, rendezvous_beside))
    }

    /// Moves chain `tid` through every phase that has ended by now.
    fn settle(&mut self, tid: u32) {
        let t = self.t;
        loop {
            let c = self.chains.get_mut(&tid).unwrap();
            let Some(step) = c.queue.front() else {
                c.phase = Phase::Idle;
                if c.ended {
                    self.chains.remove(&tid);
                }
                return;
            };
            match c.phase {
                Phase::Idle => {
                    // A step that comes after the simulation went past its start (the
                    // thread slept meanwhile) has slept that long already.
                    let late = (t - c.prev_at).max(0.0);
                    let pid = c.pid;
                    let keep = self.keeps_other_work(pid);
                    let c = self.chains.get_mut(&tid).unwrap();
                    c.keep = keep;
                    let step = c.queue.front_mut().unwrap();
                    step.off = off_time(step.off, step.other_off, keep);
                    step.other_off = 0.0;
                    // Asleep in a call, it spent that time in the call's wait: spinning
                    // through it first, then off CPU.
                    let spun = step.spun.min(late);
                    step.spun -= spun;
                    step.off = (step.off - (late - spun)).max(0.0);
                    c.phase = if step.first {
                        Phase::Off(step.off + late)
                    } else {
                        Phase::start(step.work, step.held(keep), step.off, t)
                    };
                }
                p if p.ended(step.held(c.keep), step.off, t).is_some() => {
                    c.phase = p.ended(step.held(c.keep), step.off, t).unwrap();
                }
                Phase::Wait => {
                    let c = &self.chains[&tid];
                    if !self.ready(c).is_some_and(|r| r <= t) {
                        return;
                    }
                    let c = self.chains.get_mut(&tid).unwrap();
                    let step = c.queue.pop_front().unwrap();
                    c.phase = Phase::Idle;
                    c.prev_at = t;
                    self.steps_held -= 1;
                    self.passed(&step, t);
                }
                _ => return,
            }
        }
    }

    /// A step's event happened at replayed time `t`.
    fn passed(&mut self, step: &Step, t: f64) {
        if let Some(s) = &step.source {
            let _ = s.at.set(t);
        }
        if step.ts >= self.last.1 {
            self.last = (t, step.ts);
        }
        match step.milestone {
            Some(Milestone::Initialized) => {
                self.start = (self.start.0.min(t), self.start.1.min(step.ts));
            }
            Some(Milestone::Finalizing) => {
                self.end = (self.end.0.max(t), self.end.1.max(step.ts));
            }
            None => {}
        }
    }

    /// The scheduler's time slice (default [`DEFAULT_SLICE_NS`]).
    pub fn with_slice(mut self, slice_ns: f64) -> Self {
        self.slice_ns = slice_ns;
        self
    }

    /// Replays what is left and returns the prediction.
    pub fn finish(&mut self) -> Result<OnlinePrediction, ReplayError> {
        let tids: Vec<u32> = self.tracks.keys().copied().collect();
        for tid in tids {
            if self.tracks[&tid].pending.work.iter().any(|&w| w > 0) {
                self.cut(tid, Made::Cut);
            }
            self.seal(tid);
            if let Some(c) = self.chains.get_mut(&tid) {
                c.ended = true;
            }
        }
        self.tracks.clear();
        self.simulate(true);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.spec.is_some() && self.program.len() <= 1 {
            return Err(ReplayError::NothingToMove {
                processes: self.program.len(),
            });
        }
        let t0 = self.t0.unwrap_or(0);
        let mut out = self.out.clone();
        out.predicted_total_ns = self.last.0;
        out.measured_total_ns = self.last.1.saturating_sub(t0);
        // As offline: from the first MPI_Init return (else the start) to the last
        // MPI_Finalize call (else the end).
        let start = if self.start.1 < u64::MAX {
            self.start
        } else {
            (0.0, t0)
        };
        let end = if self.end.1 > 0 { self.end } else { self.last };
        out.predicted_ns = (end.0 - start.0).max(0.0);
        out.measured_ns = end.1.saturating_sub(start.1);
        Ok(out)
    }
}

impl PathModel for OnlineReplay {
    type Mark = Mark;

    fn all_clocks(&self) -> bool {
        true
    }

    fn set_procedures(&mut self, _n: usize) {}

    fn advance(&mut self, tid: u32, _work: u64, at: &EventHeader) {
        self.advance_clocks(tid, 0, &Clocks::default(), at);
    }

    fn advance_clocks(&mut self, tid: u32, _work: u64, clocks: &Clocks, at: &EventHeader) {
        self.at = *at;
        self.serial += 1;
        self.t0.get_or_insert(at.ts_ns);
        if let Some(c) = self.chains.get_mut(&tid) {
            (c.asleep, c.spins_asleep) = (false, false);
        }
        // The program's processes call MPI/PVM or a selected procedure.
        let id = split_call_field(at.call).id;
        let mpi = matches!(at.kind, kind::CALL_ENTER | kind::CALL_EXIT)
            && crate::format::calls::is_mpi_or_pvm(id);
        if (mpi && at.kind == kind::CALL_ENTER) || at.kind == kind::FUNC_ENTER {
            self.participant(at.tgid);
        }
        if self.talked.contains(&tid) {
            self.ran_on.entry(at.tgid).or_default().insert(at.cpu);
        }
        if mpi && at.kind == kind::CALL_ENTER && super::communication_call(id) {
            self.talked.insert(tid);
        }
        if let Some(t) = self.tracks.get_mut(&tid) {
            if mpi {
                t.mpi_call = (at.kind == kind::CALL_ENTER).then_some(id);
            }
            t.pending.add_since(&mut t.last, clocks);
            return;
        }
        // A thread's replay starts at its first event; until its first step is known,
        // the simulation waits for it.
        self.chains
            .entry(tid)
            .or_insert_with(|| Chain::new(at.tgid));
        self.tracks.insert(
            tid,
            Track {
                pid: at.tgid,
                open: Some(Open {
                    ts: at.ts_ns,
                    label: ((at.kind as u32) << 16) | at.call as u32,
                    first: true,
                    elapsed: 0,
                    clocks: Clocks::default(),
                    deps: Vec::new(),
                    source: None,
                    milestone: None,
                }),
                made: Made::Cut,
                made_at: self.serial,
                last_ts: at.ts_ns,
                last: *clocks,
                pending: Clocks::default(),
                mpi_call: (mpi && at.kind == kind::CALL_ENTER).then_some(id),
                stack: Vec::new(),
            },
        );
    }

    fn scheduled(&mut self, tid: u32, what: Sched) {
        if let (Sched::Yielded, Some(t)) = (what, self.tracks.get(&tid)) {
            // As offline: yields inside communication calls tell how the library waits.
            if t.mpi_call.is_some_and(super::communication_call) {
                *self.yields.entry(t.pid).or_default() += 1;
            }
        }
        if what != Sched::Asleep {
            // Running, or runnable: it may work before its next record.
            if let Some(c) = self.chains.get_mut(&tid) {
                (c.asleep, c.spins_asleep) = (false, false);
            }
            return;
        }
        let Some(t) = self.tracks.get(&tid) else {
            return;
        };
        let in_mpi = t.mpi_call.is_some();
        // The first wait of a run decides whether its process polls, too.
        let waited = |i: usize| t.pending.raw[i].saturating_sub(t.pending.work[i]);
        let waiting = WaitTime {
            cpu: waited(0),
            awake: waited(1),
        };
        // As offline, where only a communication call's step that waited spins: a setup
        // call (MPI_Init waiting for the launcher) leaves the CPU to the others.
        let talking = t.mpi_call.is_some_and(super::communication_call);
        let spins = talking && self.polls_with(t.pid, waiting);
        if in_mpi {
            // The call's step ends at its exit, which brings what it waited for; the
            // steps before the call can go.
            self.seal(tid);
        } else {
            // What the thread did until it fell asleep is a step of its own.
            self.cut(tid, Made::Cut);
            self.seal(tid);
        }
        if let Some(c) = self.chains.get_mut(&tid) {
            (c.asleep, c.spins_asleep) = (true, spins);
        }
        self.simulate(false);
    }

    fn enter(&mut self, tid: u32, p: usize) {
        self.cut(tid, Made::Cut);
        self.tracks.get_mut(&tid).unwrap().stack.push(p);
    }

    fn exit(&mut self, tid: u32, p: usize) {
        let t = self.tracks.get_mut(&tid).unwrap();
        let Some(i) = t.stack.iter().rposition(|&q| q == p) else {
            return;
        };
        t.stack.remove(i);
        self.cut(tid, Made::Cut);
    }

    fn snapshot(&mut self, tid: u32) -> Mark {
        let t = &self.tracks[&tid];
        let reuse = t.open.is_some()
            && t.made_at == self.serial
            && t.pending.work.iter().all(|&w| w == 0)
            && t.made != Made::Cut;
        if !reuse {
            self.cut(tid, Made::Snapshot);
        }
        let t = self.tracks.get_mut(&tid).unwrap();
        t.made = Made::Snapshot;
        let o = t.open.as_mut().unwrap();
        o.source
            .get_or_insert_with(|| {
                Arc::new(Source {
                    ts: o.ts,
                    tid,
                    pid: t.pid,
                    at: OnceLock::new(),
                })
            })
            .clone()
    }

    fn merge(&mut self, tid: u32, incoming: &Mark) {
        self.merge_message_or_not(tid, incoming, None);
    }

    fn merge_message(&mut self, tid: u32, incoming: &Mark, bytes: Option<u64>) {
        self.merge_message_or_not(tid, incoming, Some(bytes));
    }

    fn milestone(&mut self, tid: u32, m: Milestone) {
        self.cut(tid, Made::Cut);
        self.tracks
            .get_mut(&tid)
            .unwrap()
            .open
            .as_mut()
            .unwrap()
            .milestone = Some(m);
    }

    fn end_thread(&mut self, tid: u32, _participant: bool) {
        if !self.tracks.contains_key(&tid) {
            return;
        }
        self.cut(tid, Made::Cut);
        self.seal(tid);
        self.tracks.remove(&tid);
        if let Some(c) = self.chains.get_mut(&tid) {
            c.ended = true;
        }
        self.simulate(false);
    }

    fn threads_held(&self) -> usize {
        self.tracks.len()
    }
}

impl OnlineReplay {
    fn merge_message_or_not(&mut self, tid: u32, incoming: &Mark, bytes: Option<Option<u64>>) {
        let t = &self.tracks[&tid];
        let reuse = t.open.is_some()
            && t.made == Made::Merge
            && t.made_at == self.serial
            && t.pending.work.iter().all(|&w| w == 0);
        if !reuse {
            self.cut(tid, Made::Merge);
        }
        let o = self.tracks.get_mut(&tid).unwrap().open.as_mut().unwrap();
        // Program order already orders a thread's own events (a collective's exit
        // depends on the thread's own entry too).
        if incoming.tid != tid && incoming.ts <= o.ts {
            o.deps.push(OpenDep {
                mark: incoming.clone(),
                bytes,
            });
        }
    }
}

/// The online replay behind the analysis pipeline, fed items as `tracer record` sees
/// them (or as a recording holds them).
pub struct OnlineWhatIf {
    pipeline: Pipeline<OnlineReplay>,
}

impl OnlineWhatIf {
    pub fn new(replay: OnlineReplay) -> Self {
        OnlineWhatIf {
            pipeline: Pipeline::with_model(ClockKind::Cpu, replay),
        }
    }

    pub fn item(&mut self, item: &Item) {
        if let Item::Process(p) = item {
            self.pipeline.analyzer.engine.process(p);
        }
        self.pipeline.item(item);
    }

    pub fn finish(mut self) -> Result<OnlinePrediction, ReplayError> {
        self.pipeline.flush();
        self.pipeline.analyzer.engine.finish()
    }
}
