//! Replays a recorded program activity graph under another placement of processes on
//! CPUs and/or another network (Eom and Hollingsworth's LBF and NF).
//!
//! Every thread is a chain of its events. Between two events it has
//! - `work`: CPU time outside blocking calls (the cpu work clock), which needs a CPU;
//! - `off`: time asleep outside blocking calls (the awake clock minus the cpu clock:
//!   sleep, I/O) and, when nothing the thread waited for explains it, the time inside a
//!   blocking call (MPI_Init, an unmatched receive): it passes whatever the placement.
//!   Time the thread was runnable but not running (the wall clock minus the awake clock)
//!   is dropped: the replay works out CPU contention anew;
//! - then, at an event that depends on others (a receive's completion, a collective's
//!   exit, a wakeup), a wait until every source event has happened plus its latency.
//!
//! Time advances from event to event. The threads of processes placed on one CPU set
//! share it equally (processor sharing: each of n runnable threads on c CPUs runs at
//! min(1, c/n)); a thread is runnable while it works, and while it waits inside an
//! MPI call if its process busy-polls (as Open MPI and MPICH do by default: measured
//! from the recording). Threads of processes the placement does not name have a CPU
//! each.
//!
//! The latency of a dependency is what the recording shows: the time from the source
//! event to the target when the target was already waiting; when the target arrived
//! after the source, the time it then still took. Where a receiver's CPUs are shared
//! otherwise than recorded, a message costs no more than the least latency its size
//! class had with a waiting receiver (`sim::Transport`). A network cost function
//! replaces both for messages. With no change, the replay reproduces every recorded
//! event time.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::placement::{GroupId, Placement};
use super::sim::{
    held_time, is_mpi_or_pvm_exit, is_rendezvous, is_setup_exit, keeps_other_work, notice_delay,
    off_time, rate, Phase, Shape, Transport, DEFAULT_SLICE_NS,
};
use crate::analysis::Milestone;
use crate::graph::recorded::RecordedGraph;
use crate::graph::{ArcId, ArcKind, ContextId, Graph, VertexId};

/// Why a replay cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReplayError {
    #[error("the recording has no events of the program")]
    Empty,
    #[error("the graph was built without the clocks the replay needs")]
    NoClocks,
    #[error(
        "the network table has no {scope} rows, but messages go {scope} (pids {from} -> {to})"
    )]
    NoCost {
        scope: &'static str,
        from: u32,
        to: u32,
    },
    /// A placement puts processes on CPUs; the threads of one process go where the
    /// scheduler puts them, as they did when recorded: such a prediction would be the
    /// measured run again, whatever the placement said.
    #[error(
        "a placement moves the program's processes among CPUs, and this program has {}: \
         nothing to move (threads are placed by the scheduler, not by a placement; \
         docs/whatif.md)",
        if *processes == 0 { "none (no process called MPI, PVM or a selected procedure)" } else { "a single one" }
    )]
    NothingToMove { processes: usize },
}

/// The cost of a message in the predicted network: (remote?, bytes) -> one-way latency
/// in ns, or None when the cost model has nothing for that scope.
pub(crate) type MessageCost<'a> = &'a dyn Fn(bool, u64) -> Option<u64>;

/// A dependency of an event: the source event and the latency after it.
#[derive(Clone, Copy, Debug)]
struct Dep {
    arc: ArcId,
    from: VertexId,
    latency: f64,
    /// The part of `latency` the waiting thread was held back by other work (dropped
    /// where the placement drops that work: see [`keeps_other_work`]).
    held: f64,
    /// The CPU hand-off after it (see [`Shape::handoff`]), kept with the CPU set's
    /// recorded sharing (see [`keeps_other_work`]).
    handoff: f64,
    /// A message sent by rendezvous (see [`is_rendezvous`]).
    rendezvous: bool,
    /// A message's size class (see [`Transport::class`]); None for other dependencies.
    class: Option<u32>,
    /// The thread was already waiting in its call when the source happened: the
    /// latency is the whole time the message took to be noticed.
    waited: bool,
}

/// What a thread does before reaching one of its events.
#[derive(Clone, Debug, Default)]
struct Step {
    work: f64,
    other: f64,
    spun: f64,
    off: f64,
    other_off: f64,
    deps: Vec<Dep>,
    /// The thread waits inside an MPI/PVM call of a busy-polling process.
    spins: bool,
    /// The program arc from the thread's previous event (none for its first event).
    program: Option<ArcId>,
}

/// The replay's view of a recording.
pub struct Replay<'g> {
    g: &'g Graph,
    /// The CPUs each process ran on (see [`keeps_other_work`]).
    pub ran_on: HashMap<u32, BTreeSet<u32>>,
    /// Per vertex (indexed by id; the virtual source and sink are unused).
    steps: Vec<Step>,
    /// Each thread's events, in program order.
    chains: Vec<Vec<VertexId>>,
    /// Process of each chain.
    chain_pid: Vec<u32>,
    /// Vertices that may end the run.
    ends: Vec<VertexId>,
    /// Where processes' parallel sections begin and end (MPI_Init returns, MPI_Finalize
    /// is called).
    initialized: Vec<VertexId>,
    finalizing: Vec<VertexId>,
    t0: u64,
    /// The scheduler's time slice (see [`DEFAULT_SLICE_NS`]).
    pub slice_ns: f64,
    /// What the transport itself costs, from the recording's messages.
    transport: Transport,
}

/// Which constraint decided when an event happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Start,
    Program(ArcId),
    Dependency(ArcId),
}

/// One piece of the predicted critical path.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PathPiece {
    /// A thread between two of its events: its work (`work_ns` of CPU, stretched to
    /// `running_ns` by sharing the CPU) and its time off CPU.
    Thread {
        pid: u32,
        tid: u32,
        context: ContextId,
        start_ns: f64,
        end_ns: f64,
        work_ns: f64,
        running_ns: f64,
        off_ns: f64,
    },
    /// The path moves to the thread that sent a message or woke this one.
    Dependency {
        from_pid: u32,
        to_pid: u32,
        latency_ns: f64,
        message: bool,
    },
}

/// The parallel section of a run: from `start` to the event `end` (at `end_at`); and
/// the whole run's length, `total`.
struct Span {
    start: f64,
    end: Option<VertexId>,
    end_at: f64,
    total: f64,
}

impl Span {
    fn length(&self) -> f64 {
        (self.end_at - self.start).max(0.0)
    }
}

/// The outcome of a replay.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Prediction {
    /// Recorded runtime of the parallel section: from the first MPI_Init return to the
    /// last MPI_Finalize call (for programs without them, the whole run).
    pub measured_ns: u64,
    /// The same span in the replay.
    pub predicted_ns: f64,
    /// Recorded time from the first event to the last event that may end the run
    /// (launch and setup included).
    pub measured_total_ns: u64,
    pub predicted_total_ns: f64,
    /// The predicted critical path of the parallel section, from its first piece to its
    /// last.
    pub path: Vec<PathPiece>,
    /// Largest difference between a replayed event time and its recorded time (only
    /// meaningful for an unchanged replay, where it should be about 0).
    pub max_shift_ns: f64,
}

impl<'g> Replay<'g> {
    /// `cpu`: a recording's graph with every clock per vertex
    /// ([`RecordedGraph::read_with_clocks`]); `polling`: the processes that busy-poll
    /// inside blocking calls.
    pub fn new(cpu: &'g RecordedGraph, polling: HashSet<u32>) -> Result<Self, ReplayError> {
        let g = &cpu.graph;
        if cpu.vertex_clocks.is_empty() {
            return Err(ReplayError::NoClocks);
        }
        let n = g.vertex_count();
        if n <= 2 {
            return Err(ReplayError::Empty);
        }
        let ts = |v: VertexId| g.vertices[v as usize].ts_ns;
        let t0 = (1..n as VertexId - 1).map(ts).min().unwrap_or(0);
        let mut steps = vec![Step::default(); n];
        let mut chain_of: HashMap<u32, usize> = HashMap::new();
        let (mut chains, mut chain_pid) = (Vec::new(), Vec::new());
        for v in 1..n as VertexId - 1 {
            let tid = g.vertices[v as usize].tid;
            let c = *chain_of.entry(tid).or_insert_with(|| {
                chains.push(Vec::new());
                chain_pid.push(cpu.pid_of(tid));
                chains.len() - 1
            });
            chains[c].push(v);
            let s = &mut steps[v as usize];
            let mut deps = Vec::new();
            for &a in g.in_arcs(v) {
                let arc = g.arc(a);
                match arc.kind {
                    ArcKind::Program => s.program = Some(a),
                    // A collective's exit also depends on the thread's own entry, which
                    // program order already implies.
                    ArcKind::Dependency if g.vertices[arc.from as usize].tid != tid => {
                        deps.push((a, arc.from))
                    }
                    ArcKind::Dependency => {}
                    ArcKind::Virtual => {}
                }
            }
            let Some(p) = s.program else {
                // A thread's first event: it starts when it started, or its creator's
                // clone plus the measured creation time.
                s.off = (ts(v) - t0) as f64;
                s.deps = deps
                    .into_iter()
                    .map(|(arc, from)| Dep {
                        arc,
                        from,
                        latency: ts(v).saturating_sub(ts(from)) as f64,
                        held: 0.0,
                        handoff: 0.0,
                        rendezvous: false,
                        class: None,
                        waited: false,
                    })
                    .collect();
                continue;
            };
            let u = g.arc(p).from;
            let lats: Vec<u64> = deps
                .iter()
                .map(|&(_, from)| ts(v).saturating_sub(ts(from)))
                .collect();
            let clocks = cpu
                .vertex_clocks
                .get(v as usize)
                .copied()
                .unwrap_or_default();
            let vertex = &g.vertices[v as usize];
            let polls = is_mpi_or_pvm_exit(vertex.label) && polling.contains(&cpu.pid_of(tid));
            let setup = is_setup_exit(vertex.label);
            let shape = Shape::new(ts(v).saturating_sub(ts(u)), &clocks, &lats, polls, setup);
            (s.work, s.other, s.spun, s.off) = (shape.work, shape.other, shape.spun, shape.off);
            s.other_off = shape.other_off;
            s.deps = deps
                .into_iter()
                .zip(lats)
                .map(|((arc, from), lat)| Dep {
                    arc,
                    from,
                    latency: shape.latency(lat),
                    held: shape.latency_held(lat),
                    handoff: shape.handoff(lat),
                    rendezvous: is_rendezvous(
                        vertex.label,
                        cpu.message_arcs.get(&(from, v)).copied(),
                    ),
                    class: cpu
                        .message_arcs
                        .get(&(from, v))
                        .map(|&b| Transport::class(b)),
                    waited: ts(from) >= ts(u),
                })
                .collect();
            s.spins = !s.deps.is_empty() && polls;
        }
        let ends = g.in_arcs(g.sink()).iter().map(|&a| g.arc(a).from).collect();
        let milestones = |which| {
            cpu.milestones
                .iter()
                .filter(|m| m.milestone == which)
                .map(|m| m.vertex)
                .collect()
        };
        let mut transport = Transport::default();
        for d in steps.iter().flat_map(|s| &s.deps) {
            if let (Some(class), true) = (d.class, d.waited) {
                transport.note(class, d.latency);
            }
        }
        Ok(Replay {
            g,
            ran_on: HashMap::new(),
            steps,
            chains,
            chain_pid,
            ends,
            initialized: milestones(Milestone::Initialized),
            finalizing: milestones(Milestone::Finalizing),
            slice_ns: DEFAULT_SLICE_NS,
            t0,
            transport,
        })
    }

    /// Replaces the latency of every message with `cost` (remote when the placement puts
    /// its two processes on different nodes).
    pub fn set_network(
        &mut self,
        rg: &RecordedGraph,
        placement: &Placement,
        cost: MessageCost,
    ) -> Result<(), ReplayError> {
        for v in 1..self.g.vertex_count() - 1 {
            let to_pid = rg.pid_of(self.g.vertices[v].tid);
            for d in &mut self.steps[v].deps {
                let Some(bytes) = rg.message_arcs.get(&(d.from, v as VertexId)) else {
                    continue;
                };
                let from_pid = rg.pid_of(self.g.vertices[d.from as usize].tid);
                let remote = placement.node_of(from_pid) != placement.node_of(to_pid);
                let latency = cost(remote, bytes.unwrap_or(0)).ok_or(ReplayError::NoCost {
                    scope: if remote { "remote" } else { "local" },
                    from: from_pid,
                    to: to_pid,
                })?;
                (d.latency, d.held, d.handoff) = (latency as f64, 0.0, 0.0);
                // The table's latency is the transport's.
                d.class = None;
            }
        }
        Ok(())
    }

    /// Runs the replay with `placement`.
    pub fn run(&self, placement: &Placement) -> Prediction {
        let sim = Simulation::new(self, placement).run();
        let g = self.g;
        let recorded = |v: VertexId| (g.vertices[v as usize].ts_ns - self.t0) as f64;
        let max_shift_ns = (1..g.vertex_count() as VertexId - 1)
            .map(|v| (sim.at[v as usize] - recorded(v)).abs())
            .fold(0.0, f64::max);
        let simulated = |v: VertexId| sim.at[v as usize];
        let measured = self.span(&recorded);
        let predicted = self.span(&simulated);
        let path = predicted
            .end
            .map(|v| self.path(&sim, v, predicted.start))
            .unwrap_or_default();
        Prediction {
            measured_ns: measured.length().round() as u64,
            predicted_ns: predicted.length(),
            measured_total_ns: measured.total.round() as u64,
            predicted_total_ns: predicted.total,
            path,
            max_shift_ns,
        }
    }

    /// The parallel section's span with event times `at`: from the first MPI_Init return
    /// to the last MPI_Finalize call (without them, the whole run).
    fn span(&self, at: &dyn Fn(VertexId) -> f64) -> Span {
        let latest = |vs: &[VertexId]| vs.iter().copied().max_by(|&a, &b| at(a).total_cmp(&at(b)));
        let last = latest(&self.ends);
        let total = last.map(at).unwrap_or(0.0);
        let end = latest(&self.finalizing).or(last);
        let start = self
            .initialized
            .iter()
            .map(|&v| at(v))
            .fold(f64::INFINITY, f64::min);
        Span {
            start: if start.is_finite() { start } else { 0.0 },
            end,
            end_at: end.map(at).unwrap_or(0.0),
            total,
        }
    }

    /// Walks back from `end` along the constraints that decided each event's time, until
    /// the time `start`.
    fn path(&self, sim: &Outcome, end: VertexId, start: f64) -> Vec<PathPiece> {
        let g = self.g;
        let pid = |v: VertexId| self.chain_pid[sim.chain_of[v as usize]];
        let mut pieces = Vec::new();
        let mut v = end;
        while sim.at[v as usize] > start {
            match sim.cause[v as usize] {
                Cause::Start => break,
                Cause::Dependency(a) => {
                    let from = g.arc(a).from;
                    pieces.push(PathPiece::Dependency {
                        from_pid: pid(from),
                        to_pid: pid(v),
                        latency_ns: sim.at[v as usize] - sim.at[from as usize],
                        message: is_mpi_or_pvm_exit(g.vertices[v as usize].label),
                    });
                    v = from;
                }
                Cause::Program(a) => {
                    let u = g.arc(a).from;
                    let s = &self.steps[v as usize];
                    pieces.push(PathPiece::Thread {
                        pid: pid(v),
                        tid: g.vertices[v as usize].tid,
                        context: g.arc(a).context,
                        start_ns: sim.at[u as usize],
                        end_ns: sim.at[v as usize],
                        work_ns: s.work,
                        // Time held back by other work is time waiting for a CPU too.
                        running_ns: sim.running[v as usize] + sim.held[v as usize],
                        off_ns: sim.off[v as usize],
                    });
                    v = u;
                }
            }
        }
        pieces.reverse();
        pieces
    }
}

struct Outcome {
    /// Replayed time of every vertex (ns from the recording's first event).
    at: Vec<f64>,
    cause: Vec<Cause>,
    /// Time each event's work took to run, CPU sharing included.
    running: Vec<f64>,
    /// Time each event was held (spinning, or behind other work).
    held: Vec<f64>,
    /// Time each event was off CPU.
    off: Vec<f64>,
    chain_of: Vec<usize>,
}

struct Simulation<'r, 'g> {
    r: &'r Replay<'g>,
    /// CPU group of each chain (None: a CPU of its own).
    group: Vec<Option<GroupId>>,
    /// Whether each chain keeps the time other work held it back.
    keep: Vec<bool>,
    capacity: Vec<f64>,
    /// Index in its chain of each chain's next event.
    next: Vec<usize>,
    phase: Vec<Phase>,
    /// When the current phase began (for the Work phase: when the work began).
    since: Vec<f64>,
    passed: Vec<bool>,
    /// Runnable threads in each group now.
    load: Vec<usize>,
    out: Outcome,
}

/// When a chain's next event can happen: the time its last dependency is met (plus the
/// delay to notice it), and the arc that met it last.
struct Ready {
    at: f64,
    by: Option<ArcId>,
}

impl<'r, 'g> Simulation<'r, 'g> {
    fn new(r: &'r Replay<'g>, placement: &Placement) -> Self {
        let n = r.g.vertex_count();
        let mut chain_of = vec![usize::MAX; n];
        for (c, chain) in r.chains.iter().enumerate() {
            for &v in chain {
                chain_of[v as usize] = c;
            }
        }
        let chains = r.chains.len();
        let mut s = Simulation {
            r,
            group: r
                .chain_pid
                .iter()
                .map(|p| placement.of_pid.get(p).copied())
                .collect(),
            keep: r
                .chain_pid
                .iter()
                .map(|p| {
                    let group = placement.of_pid.get(p).copied();
                    let placed = group.map(|g| &placement.groups[g]);
                    let members = placement
                        .of_pid
                        .iter()
                        .filter(|(_, &g)| Some(g) == group)
                        .map(|(q, _)| r.ran_on.get(q));
                    keeps_other_work(placed, members)
                })
                .collect(),
            capacity: (0..placement.groups.len())
                .map(|g| placement.capacity(g))
                .collect(),
            next: vec![0; chains],
            phase: vec![Phase::Done; chains],
            since: vec![0.0; chains],
            passed: vec![false; n],
            load: vec![0; placement.groups.len()],
            out: Outcome {
                at: vec![0.0; n],
                cause: vec![Cause::Start; n],
                running: vec![0.0; n],
                held: vec![0.0; n],
                off: vec![0.0; n],
                chain_of,
            },
        };
        for c in 0..chains {
            s.begin(c, 0.0);
        }
        s
    }

    /// Chain `c` heads for its next event at time `t`.
    fn begin(&mut self, c: usize, t: f64) {
        let Some(&v) = self.r.chains[c].get(self.next[c]) else {
            self.phase[c] = Phase::Done;
            return;
        };
        let s = &self.r.steps[v as usize];
        self.since[c] = t;
        self.out.off[v as usize] = self.off(c, s);
        self.phase[c] = Phase::start(s.work, self.held(c, s), self.out.off[v as usize], t);
    }

    /// Time chain `c` is held before its event `s`.
    fn held(&self, c: usize, s: &Step) -> f64 {
        held_time(s.spun, s.other, self.keep[c])
    }

    /// Time chain `c` is off CPU before its event `s`.
    fn off(&self, c: usize, s: &Step) -> f64 {
        off_time(s.off, s.other_off, self.keep[c])
    }

    fn head(&self, c: usize) -> VertexId {
        self.r.chains[c][self.next[c]]
    }

    fn runnable(&self, c: usize) -> bool {
        let spins =
            matches!(self.phase[c], Phase::Wait) && self.r.steps[self.head(c) as usize].spins;
        self.phase[c].runnable(spins)
    }

    /// When the dependencies of chain `c`'s next event are met, if all sources happened.
    fn ready_at(&self, c: usize) -> Option<Ready> {
        let mut best = Ready {
            at: f64::NEG_INFINITY,
            by: None,
        };
        let mut rendezvous_beside = false;
        for d in &self.r.steps[self.head(c) as usize].deps {
            if !self.passed[d.from as usize] {
                return None;
            }
            let held = if self.keep[c] { 0.0 } else { d.held };
            let handoff = if self.keep[c] { d.handoff } else { 0.0 };
            let latency = self.r.transport.latency(d.class, d.latency, self.keep[c]);
            let t = self.out.at[d.from as usize] + latency - held + handoff;
            if t > best.at {
                best = Ready {
                    at: t,
                    by: Some(d.arc),
                };
                rendezvous_beside =
                    d.rendezvous && self.group[self.out.chain_of[d.from as usize]] == self.group[c];
            }
        }
        let busy = self.group[c].is_some_and(|g| self.load[g] as f64 > self.capacity[g]);
        let spins = self.r.steps[self.head(c) as usize].spins;
        best.at += notice_delay(self.r.slice_ns, busy, spins, rendezvous_beside);
        Some(best)
    }

    fn run(mut self) -> Outcome {
        let chains = self.r.chains.len();
        let mut t = 0.0f64;
        loop {
            let mut load = vec![0usize; self.capacity.len()];
            for c in 0..chains {
                if let (Some(g), true) = (self.group[c], self.runnable(c)) {
                    load[g] += 1;
                }
            }
            let rates: Vec<f64> = self
                .group
                .iter()
                .map(|g| g.map_or(1.0, |g| rate(self.capacity[g], load[g])))
                .collect();
            self.load = load;
            // The next moment a phase ends.
            let mut next = f64::INFINITY;
            let mut live = false;
            for (c, (&phase, &rate)) in self.phase.iter().zip(&rates).enumerate() {
                let end = match phase {
                    Phase::Wait => self.ready_at(c).map_or(f64::INFINITY, |r| r.at.max(t)),
                    Phase::Done | Phase::Idle => continue,
                    _ => phase.end(t, rate).unwrap_or(f64::INFINITY),
                };
                live = true;
                next = next.min(end);
            }
            if !live {
                break;
            }
            assert!(
                next.is_finite(),
                "replay stalled: a dependency is never met"
            );
            let dt = next - t;
            t = next;
            for (phase, &rate) in self.phase.iter_mut().zip(&rates) {
                phase.advance(dt, rate);
            }
            for c in 0..chains {
                self.settle(c, t);
            }
        }
        self.out
    }

    /// Moves chain `c` through every phase that has ended by time `t`.
    fn settle(&mut self, c: usize, t: f64) {
        loop {
            let v = match self.phase[c] {
                Phase::Done => return,
                _ => self.head(c),
            };
            let s = &self.r.steps[v as usize];
            if let Some(next) = self.phase[c].ended(self.held(c, s), self.off(c, s), t) {
                if let Phase::Work(_) = self.phase[c] {
                    self.out.running[v as usize] = t - self.since[c];
                    self.out.held[v as usize] = self.held(c, s);
                }
                self.phase[c] = next;
                continue;
            }
            match self.phase[c] {
                Phase::Wait => {
                    let Some(Ready { at: ready, by: arc }) = self.ready_at(c) else {
                        return;
                    };
                    if ready > t {
                        return;
                    }
                    let v = v as usize;
                    self.out.at[v] = t;
                    self.out.cause[v] = match (arc, s.program) {
                        // A dependency decided the time when the thread had arrived earlier.
                        (Some(a), _) if ready >= self.arrival(c, t) => Cause::Dependency(a),
                        (_, Some(p)) => Cause::Program(p),
                        (Some(a), None) => Cause::Dependency(a),
                        (None, None) => Cause::Start,
                    };
                    self.passed[v] = true;
                    self.next[c] += 1;
                    self.begin(c, t);
                }
                _ => return,
            }
        }
    }

    /// When chain `c` finished its work and time off before its next event (at most `t`).
    fn arrival(&self, c: usize, t: f64) -> f64 {
        let v = self.head(c) as usize;
        let s = &self.r.steps[v];
        if s.program.is_none() {
            return s.off;
        }
        let prev = self.r.chains[c][self.next[c] - 1] as usize;
        (self.out.at[prev] + self.out.running[v] + self.held(c, s) + self.off(c, s)).min(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::format::recording::Item;
    use crate::format::records::Record;
    use crate::format::synth::SyntheticRun;
    use crate::graph::recorded::RecordedGraph;
    use crate::predict::placement::{PlacementSpec, ProgramProcess};
    use tracer_common::{call, kind, SwitchRecord};

    const MS: u64 = 1_000_000;

    /// Ranks with clocks of their own: work takes wall time, a receive returns no
    /// earlier than the message's send.
    struct Timed {
        s: SyntheticRun,
        clock: Vec<u64>,
    }

    impl Timed {
        /// Ranks that all start (with a first record) at the same time.
        fn new(ranks: usize) -> Self {
            let mut t = Timed {
                s: SyntheticRun::new(ranks, &[]),
                clock: vec![1_000_000; ranks],
            };
            (0..ranks).for_each(|r| t.work(r, 0));
            t
        }

        fn on(&mut self, r: usize, f: impl FnOnce(&mut SyntheticRun)) {
            self.s.ts = self.clock[r];
            f(&mut self.s);
            self.clock[r] = self.s.ts;
        }

        /// Switched in, `ns` of work, switched out asleep.
        fn work(&mut self, r: usize, ns: u64) {
            self.on(r, |s| {
                let header = s.header(r, kind::SWITCH_IN, 0);
                let switch = SwitchRecord {
                    header,
                    prev_state: 0,
                };
                s.items.push(Item::Record(Record::SwitchIn(switch)));
            });
            self.clock[r] += ns;
            self.on(r, |s| s.compute(r, ns, None));
        }

        /// Sends to `dst`; returns the send's time.
        fn send(&mut self, r: usize, dst: usize) -> u64 {
            self.on(r, |s| s.send(r, dst, 7));
            self.clock[r]
        }

        fn recv_enter(&mut self, r: usize, src: usize) {
            self.on(r, |s| s.call(r, call::MPI_RECV, src as i32, 7, false));
        }

        fn recv_exit(&mut self, r: usize, src: usize, sent: u64) {
            self.clock[r] = self.clock[r].max(sent);
            self.on(r, |s| s.call(r, call::MPI_RECV, src as i32, 7, true));
        }

        /// MPI_Init waiting `asleep` for the launcher, after `ns` on CPU in it.
        fn init(&mut self, r: usize, ns: u64, asleep: u64) {
            self.on(r, |s| s.call(r, call::MPI_INIT, -1, 0, false));
            self.work(r, ns);
            self.clock[r] += asleep;
            self.on(r, |s| s.call(r, call::MPI_INIT, -1, 0, true));
        }

        /// The records in timestamp order.
        fn items(self) -> Vec<Item> {
            let mut items = self.s.items;
            let ts = |i: &Item| match i {
                Item::Record(r) => r.header().ts_ns,
                _ => 0,
            };
            items.sort_by_key(ts);
            items
        }

        fn graph(self) -> RecordedGraph {
            RecordedGraph::from_items_with_clocks(&self.items())
        }
    }

    fn predict(t: Timed, spec: Option<&str>, polling: &[u32]) -> Prediction {
        let cpu = t.graph();
        let replay = Replay::new(&cpu, polling.iter().copied().collect()).unwrap();
        let placement = match spec {
            Some(s) => {
                let spec: PlacementSpec = s.parse().unwrap();
                let program: Vec<ProgramProcess> = cpu
                    .participants
                    .iter()
                    .map(|&pid| ProgramProcess {
                        pid,
                        rank: cpu.processes[&pid].rank,
                    })
                    .collect();
                Placement::bind(&spec, &program).unwrap()
            }
            None => Placement::unconstrained(),
        };
        replay.run(&placement)
    }

    fn near(a: f64, b: f64) {
        assert!((a - b).abs() < 20_000.0, "{a} is not {b} within 20 us");
    }

    /// Rank 0 works 100 ms and sends to rank 1, which works 100 ms meanwhile, receives
    /// and works 50 ms more.
    fn overlapped() -> Timed {
        let mut t = Timed::new(2);
        t.work(0, 100 * MS);
        t.work(1, 100 * MS);
        let sent = t.send(0, 1);
        t.recv_enter(1, 0);
        t.recv_exit(1, 0, sent);
        t.work(1, 50 * MS);
        t
    }

    /// Rank 1 waits in a receive while rank 0 works 100 ms; then rank 1 works 100 ms.
    fn handoff() -> Timed {
        let mut t = Timed::new(2);
        t.recv_enter(1, 0);
        t.work(0, 100 * MS);
        let sent = t.send(0, 1);
        t.recv_exit(1, 0, sent + 30_000);
        t.work(1, 100 * MS);
        t
    }

    /// As [`handoff`], but rank 1 polls on the CPU for 60 ms inside its receive and
    /// then falls asleep there, 40 ms before rank 0's message.
    fn polls_then_sleeps() -> Timed {
        let mut t = Timed::new(2);
        t.recv_enter(1, 0);
        t.work(1, 60 * MS);
        t.work(0, 100 * MS);
        let sent = t.send(0, 1);
        t.recv_exit(1, 0, sent + 30_000);
        t.work(1, 100 * MS);
        t
    }

    /// Both ranks sleep in MPI_Init (on CPU for a moment of it), rank 1 works while rank
    /// 0 is still there, then each polls in a receive: their first waits are in a setup
    /// call, which says nothing of polling.
    fn init_sleeps_then_polls() -> Timed {
        let mut t = Timed::new(2);
        t.init(0, MS, 40 * MS);
        t.init(1, MS, 5 * MS);
        t.work(1, 30 * MS);
        t.recv_enter(1, 0);
        t.work(1, 60 * MS);
        t.work(0, 100 * MS);
        let sent = t.send(0, 1);
        t.recv_exit(1, 0, sent);
        t.recv_enter(0, 1);
        t.work(0, 45 * MS);
        t.work(1, 50 * MS);
        let sent = t.send(1, 0);
        t.recv_exit(0, 1, sent);
        t
    }

    #[test]
    fn an_unchanged_replay_reproduces_the_recording() {
        for t in [overlapped(), handoff()] {
            let p = predict(t, None, &[]);
            assert!(p.max_shift_ns < 1.0, "shift {}", p.max_shift_ns);
            assert_eq!(p.predicted_ns.round() as u64, p.measured_ns);
        }
        // Each rank on a CPU of its own is no change either.
        let p = predict(overlapped(), Some("0@0;1@1"), &[100, 101]);
        assert!(p.max_shift_ns < 1.0);
    }

    #[test]
    fn ranks_on_one_cpu_share_it() {
        let p = predict(overlapped(), None, &[]);
        near(p.measured_ns as f64, 150.0 * MS as f64);
        // Both work at half speed until both are done, then rank 1 alone.
        let p = predict(overlapped(), Some("*@0"), &[]);
        near(p.predicted_ns, 250.0 * MS as f64);
        // 150 ms of work on the path (whichever rank it runs through first) took 250 ms
        // to run.
        let (work, running) = p.path.iter().fold((0.0, 0.0), |(w, r), x| match x {
            PathPiece::Thread {
                work_ns,
                running_ns,
                ..
            } => (w + work_ns, r + running_ns),
            _ => (w, r),
        });
        near(work, 150.0 * MS as f64);
        near(running, 250.0 * MS as f64);
        // Two CPUs for the two ranks: no change.
        let p = predict(overlapped(), Some("*@0-1"), &[]);
        near(p.predicted_ns, p.measured_ns as f64);
    }

    #[test]
    fn a_polling_receiver_takes_its_share_of_the_cpu() {
        // Blocked receivers leave the CPU to the sender: no slower on one CPU.
        let p = predict(handoff(), Some("*@0"), &[]);
        near(p.predicted_ns, p.measured_ns as f64);
        // A polling receiver halves the sender's speed while it waits.
        let p = predict(handoff(), Some("*@0"), &[100, 101]);
        near(p.predicted_ns, p.measured_ns as f64 + 100.0 * MS as f64);
        // The path runs through rank 0's work, then the message, then rank 1.
        let pids: Vec<u32> = p
            .path
            .iter()
            .filter_map(|x| match x {
                PathPiece::Thread {
                    pid, running_ns, ..
                } if *running_ns > 0.0 => Some(*pid),
                _ => None,
            })
            .collect();
        assert_eq!(pids.first(), Some(&100));
        assert_eq!(pids.last(), Some(&101));
        assert!(p.path.iter().any(|x| matches!(
            x,
            PathPiece::Dependency {
                from_pid: 100,
                to_pid: 101,
                message: true,
                ..
            }
        )));
    }

    /// The online replay (bounded memory, steps as they come) against the offline one.
    #[test]
    fn online_and_offline_replays_agree() {
        use crate::predict::online::{OnlineReplay, OnlineWhatIf};
        // The last field: whether the processes poll, or None for the online replay to
        // work it out from what it sees (then both poll in the offline replay).
        type Case = (fn() -> Timed, Option<&'static str>, Option<bool>);
        let cases: [Case; 12] = [
            (overlapped, None, Some(false)),
            (overlapped, Some("*@0"), Some(false)),
            (overlapped, Some("*@0-1"), Some(true)),
            (handoff, None, Some(true)),
            (handoff, Some("*@0"), Some(false)),
            (handoff, Some("*@0"), Some(true)),
            // A thread asleep inside a call still waits there, spinning if it polls.
            (polls_then_sleeps, None, Some(true)),
            (polls_then_sleeps, Some("*@0"), Some(false)),
            (polls_then_sleeps, Some("*@0"), Some(true)),
            // Its first wait is enough to tell that it polls.
            (polls_then_sleeps, Some("*@0"), None),
            // MPI_Init's wait is not: sleeping there, the ranks poll later.
            (init_sleeps_then_polls, Some("*@0"), Some(true)),
            (init_sleeps_then_polls, Some("*@0"), None),
        ];
        for (run, spec, polls) in cases {
            let polling: &[u32] = if polls.unwrap_or(true) {
                &[100, 101]
            } else {
                &[]
            };
            let offline = predict(run(), spec, polling);
            let replay = OnlineReplay::new(spec.map(|s| s.parse().unwrap()), None, polls);
            let mut online = OnlineWhatIf::new(replay);
            for item in run().items() {
                online.item(&item);
            }
            let online = online.finish().unwrap();
            // Offline has a vertex at every call's entry, the online replay only where the
            // analysis needs one (not at a receive's, nor MPI_Init's): a step may begin a
            // few records (1 us each) apart.
            assert!(
                (online.predicted_ns - offline.predicted_ns).abs() <= 5000.0,
                "{spec:?} polling {polls:?}: online {} offline {}",
                online.predicted_ns,
                offline.predicted_ns
            );
            assert_eq!(online.measured_ns, offline.measured_ns);
        }
    }

    /// The online replay forgets what it simulated: a ten times longer run holds no
    /// more steps at once.
    #[test]
    fn online_replay_memory_does_not_grow_with_run_length() {
        use crate::predict::online::{OnlineReplay, OnlineWhatIf};
        let peak = |rounds: usize| {
            let mut t = Timed::new(2);
            for _ in 0..rounds {
                t.work(0, 10 * MS);
                let sent = t.send(0, 1);
                t.recv_enter(1, 0);
                t.recv_exit(1, 0, sent);
                t.work(1, 10 * MS);
                let sent = t.send(1, 0);
                t.recv_enter(0, 1);
                t.recv_exit(0, 1, sent);
            }
            let spec = Some("*@0".parse().unwrap());
            let mut online = OnlineWhatIf::new(OnlineReplay::new(spec, None, Some(true)));
            for item in t.items() {
                online.item(&item);
            }
            let p = online.finish().unwrap();
            // Each rank's 10 ms of work takes 20 ms while the other polls, and each
            // message is noticed half a time slice late.
            let want = rounds as f64 * (40.0 * MS as f64 + DEFAULT_SLICE_NS);
            assert!((p.predicted_ns - want).abs() < 0.005 * want, "{p:?}");
            p.peak_steps
        };
        let (short, long) = (peak(20), peak(200));
        assert!(
            short > 0 && long <= short,
            "{short} steps held, then {long}"
        );
    }

    #[test]
    fn a_network_table_replaces_message_latency() {
        let cpu = handoff().graph();
        let mut replay = Replay::new(&cpu, HashSet::new()).unwrap();
        let placement = Placement::unconstrained();
        let before = replay.run(&placement);
        let cost = |remote: bool, bytes: u64| {
            assert!(!remote);
            assert_eq!(bytes, crate::format::synth::MESSAGE_BYTES as u64);
            Some(5 * MS)
        };
        replay.set_network(&cpu, &placement, &cost).unwrap();
        let after = replay.run(&placement);
        // The recorded latency (30 us plus the exit's 1 us) becomes 5 ms.
        near(
            after.predicted_ns - before.predicted_ns,
            5.0 * MS as f64 - 31_000.0,
        );
        // Moving a rank to another node needs remote costs.
        let spec: PlacementSpec = "0@a:0;1@b:0".parse().unwrap();
        let far = Placement::bind(
            &spec,
            &[
                ProgramProcess::ranked(100, 0),
                ProgramProcess::ranked(101, 1),
            ],
        )
        .unwrap();
        let local_only = |remote: bool, _| (!remote).then_some(MS);
        assert!(matches!(
            replay.set_network(&cpu, &far, &local_only),
            Err(ReplayError::NoCost {
                scope: "remote",
                ..
            })
        ));
    }
}
