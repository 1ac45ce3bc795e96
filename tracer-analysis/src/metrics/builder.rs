//! The streaming builder: items in recording order go through the analysis's reorder
//! window; each record, once in timestamp order, goes to the analyzer (call pairing,
//! communicator directory, message matching) and then to the per-thread accounts.
//!
//! Traffic comes from the matcher itself rather than from a second matcher or a path
//! model: the matcher logs every point-to-point match (sender and receiver process,
//! bytes, send entry time, receive completion time; `MessageMatcher::log_matches`),
//! and the builder drains that log after each record. A path model only sees path
//! states and headers, not message sizes, and could not tell a message from a
//! collective's dependency without repeating the matcher's work; the log is one
//! `Option<Vec>` that costs nothing when the critical-path analysis runs without it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::blocking::{BlockingDists, BlockingTables};
use super::dist::{Hist, Precision};
use super::levels::Sums;
use super::sites::SiteMap;
use super::thread::{Activation, ThreadAcc};
use super::traffic::TrafficAcc;
use super::{
    Events, MachineMetrics, Metrics, ProcedureInProcess, ProcedureMetrics, ProcessMetrics,
    ThreadMetrics, SCHEMA_VERSION,
};
use crate::analysis::directory::Directory;
use crate::analysis::matcher::MatchedMessage;
use crate::analysis::reorder::ReorderBuffer;
use crate::analysis::workclock::ClockKind;
use crate::analysis::{futex_waits, Analyzer, NoPaths, PathModel, Procedures, REORDER_WINDOW_NS};
use crate::format::calls::split_call_field;
use crate::format::node::GlobalId;
use crate::format::recording::{FunctionProbe, Item, RecordingMeta};
use crate::format::records::{self, Record};
use crate::format::ProcessInfo;

/// Builds [`Metrics`] from a recording's items, streamed in file order.
pub(crate) struct MetricsBuilder {
    analyzer: Analyzer<NoPaths>,
    reorder: ReorderBuffer,
    acc: Accounts,
}

impl MetricsBuilder {
    pub(super) fn new(meta: &RecordingMeta) -> Self {
        let mut analyzer = Analyzer::with_model(ClockKind::Cpu, NoPaths);
        analyzer.matcher.log_matches();
        let hosts = meta
            .nodes()
            .into_iter()
            .map(|node| {
                if node.hostname.is_empty() {
                    "localhost".to_string()
                } else {
                    node.hostname
                }
            })
            .collect();
        MetricsBuilder {
            analyzer,
            reorder: ReorderBuffer::new(REORDER_WINDOW_NS),
            acc: Accounts::new(hosts),
        }
    }

    /// One item in recording order (records may be up to the reorder window out of
    /// timestamp order, as the ring buffer delivers them).
    pub(super) fn item(&mut self, item: &Item) {
        match item {
            Item::Record(r) => {
                self.reorder.push(r);
                let (a, acc) = (&mut self.analyzer, &mut self.acc);
                self.reorder.ready(|r| acc.record(a, &r));
            }
            Item::Process(p) => {
                self.analyzer.process(p);
                self.acc.process(p);
            }
            Item::Probe(p) => {
                self.analyzer.probe(p);
                self.acc.probe(p);
            }
        }
    }

    /// Records the probes dropped (the recording's trailer), for the report.
    pub(super) fn events_lost(&mut self, n: u64) {
        self.acc.lost = n;
    }

    pub(super) fn finish(mut self) -> Metrics {
        let (a, acc) = (&mut self.analyzer, &mut self.acc);
        self.reorder.flush(|r| acc.record(a, &r));
        // Receives still waiting for a late send (`analysis::late`) end as unmatched;
        // the records they held are replayed, and may complete other messages.
        a.end_waits();
        for m in a.matcher.take_matches() {
            acc.matched(&m);
        }
        self.acc.build(&self.analyzer)
    }
}

#[derive(Default)]
struct ProcedureAcc {
    calls: u64,
    elapsed: u64,
    cpu: u64,
}

/// Everything accumulated from records in timestamp order.
struct Accounts {
    /// Machine names: the recording's nodes, in node order (`machine_of`).
    machines: Vec<String>,
    /// Distinct CPUs seen per machine.
    cpus: Vec<BTreeSet<u32>>,
    threads: HashMap<u32, ThreadAcc>,
    /// Threads whose id was reused by a later thread.
    ended: Vec<ThreadAcc>,
    commands: HashMap<u32, String>,
    sites: SiteMap,
    execs: HashMap<u32, String>,
    /// Processes that call MPI/PVM or enter a selected procedure.
    participants: HashSet<u32>,
    /// Selected procedures, keyed by symbol and named as the analysis does.
    procedures_selected: Procedures,
    procedures: HashMap<(usize, u32), ProcedureAcc>,
    durations: Vec<Hist>,
    /// Blocking intervals of program processes.
    blocking: BlockingDists,
    /// Futex waits of other processes, used when the recording has no program
    /// processes (then every process is the program).
    outside: BlockingDists,
    traffic: TrafficAcc,
    events: u64,
    lost: u64,
    /// Threads cloned while traced whose first own record has not come yet: the process
    /// of their creator.
    clones: HashMap<u32, u32>,
}

impl Accounts {
    /// `hosts`: the recording's nodes, node 0 first (at least one).
    fn new(hosts: Vec<String>) -> Self {
        Accounts {
            cpus: hosts.iter().map(|_| BTreeSet::new()).collect(),
            machines: hosts,
            threads: HashMap::new(),
            ended: Vec::new(),
            commands: HashMap::new(),
            sites: SiteMap::default(),
            execs: HashMap::new(),
            participants: HashSet::new(),
            procedures_selected: Procedures::default(),
            procedures: HashMap::new(),
            durations: Vec::new(),
            blocking: BlockingDists::default(),
            outside: BlockingDists::default(),
            traffic: TrafficAcc::default(),
            events: 0,
            lost: 0,
            clones: HashMap::new(),
        }
    }

    /// The node a process runs on: its id says (`format::node`).
    fn machine_of(&self, pid: u32) -> usize {
        let node = usize::from(GlobalId(pid).node().0);
        if node < self.machines.len() {
            node
        } else {
            0
        }
    }

    fn process(&mut self, p: &ProcessInfo) {
        self.sites.process(p);
        if !p.command.is_empty() {
            self.commands.insert(p.pid, p.command.clone());
        }
    }

    /// One symbol probed in several files is one procedure (as in the analysis).
    fn probe(&mut self, p: &FunctionProbe) {
        let n = self.procedures_selected.add(p);
        self.durations.resize_with(n, || Hist::new(Precision::Fine));
    }

    /// The live thread `tid`. `starts` says whether the record proves a live thread (a
    /// switch or wakeup of a thread that exited does not, a call or a new thread does:
    /// then the id was reused and the old thread is set aside).
    fn thread(&mut self, tid: u32, ts: u64, starts: bool) -> Option<&mut ThreadAcc> {
        if self.threads.get(&tid).is_some_and(|t| t.exited) {
            if !starts {
                return None;
            }
            let old = self.threads.remove(&tid).expect("just seen");
            self.ended.push(old);
        }
        Some(
            self.threads
                .entry(tid)
                .or_insert_with(|| ThreadAcc::new(tid, ts)),
        )
    }

    fn record<M: PathModel>(&mut self, analyzer: &mut Analyzer<M>, r: &Record) {
        analyzer.record(r);
        for m in analyzer.matcher.take_matches() {
            self.matched(&m);
        }
        self.account(r);
    }

    fn matched(&mut self, m: &MatchedMessage) {
        self.traffic.add(m);
    }

    fn account(&mut self, r: &Record) {
        // Counted as a record read; otherwise a sample observes a thread and is no event
        // of it, as for the analysis: the metrics are the same with and without sampling.
        self.events += 1;
        if let Record::Sample(_) = r {
            return;
        }
        let h = *r.header();
        let ts = h.ts_ns;
        let m = self.machine_of(h.tgid);
        self.cpus[m].insert(h.cpu);
        if let Record::Wakeup(w) | Record::WakeupNew(w) = r {
            // The header is the waker (possibly untraced); the wakee is in the payload. A
            // thread waking itself is running.
            if w.wakee_tid != h.tid {
                let new = matches!(r, Record::WakeupNew(_));
                if let Some(t) = self.thread(w.wakee_tid, ts, new) {
                    if w.wakee_tgid != 0 {
                        t.pid = w.wakee_tgid;
                    }
                    t.woken(ts);
                }
            }
            return;
        }
        // How a process ended, after its last thread's EXIT: no event of that thread (it
        // would count as a new thread reusing the id).
        if let Record::ProcessEnd(_) = r {
            return;
        }
        let procedure = match r {
            Record::FuncEnter(_) | Record::FuncExit(_) => self.procedures_selected.of_probe(h.call),
            _ => None,
        };
        let switch = matches!(r, Record::SwitchIn(_) | Record::SwitchOut(_));
        let switch_in = matches!(r, Record::SwitchIn(_));
        if let Record::Fork(f) = r {
            self.clones.insert(f.child_tid, h.tgid);
        }
        if self.thread(h.tid, ts, !switch).is_none() {
            return;
        }
        // Whether the thread was cloned while traced (`start_work_clock` below); asked
        // once the record is known to be a live thread's, as the analysis asks.
        let clone_creator = (!switch_in).then(|| self.clones.remove(&h.tid)).flatten();
        let t = self
            .threads
            .get_mut(&h.tid)
            .expect("a live thread, just seen");
        // A switch-in may not know the process yet (tgid 0); the thread's clock is valid.
        t.own(ts, h.tgid, h.cpu_ns);
        // The thread's work counts from where the analysis starts it (so that a
        // thread's work here is the report's): at its first record other than a
        // switch-in, or at its clone (CPU clock 0) for a thread its process created
        // while traced (`SyncTracker::first_event`). The switch-ins before the first
        // other record of a new process are its launcher's fork getting ready to exec
        // (up to 1.3 ms of CPU that is not the program's work; it stays in `cpu`).
        if !switch_in {
            let cloned_here = clone_creator == Some(h.tgid) && h.tid != h.tgid;
            t.start_work_clock(if cloned_here { 0 } else { h.cpu_ns });
        }
        t.settle_poll(r);
        match r {
            Record::SwitchOut(s) => t.switch_out(ts, h.cpu_ns, s.prev_state),
            Record::SwitchIn(_) => t.switch_in(ts),
            _ => t.ran(ts, h.cpu_ns),
        }
        let pid = t.pid;
        let mut blocking = None;
        let mut activation = None;
        match (r, procedure) {
            (Record::CallEnter(e), _) => t.call_enter(split_call_field(h.call).id, e),
            (Record::CallExit(x), _) => blocking = t.call_exit(x),
            (Record::CallsUnwound(u), _) => t.calls_unwound(u.calls),
            (Record::FutexEnter(f), _) if futex_waits(f.op) => t.futex_wait(ts, h.cpu_ns, f.site),
            (Record::FutexExit(_), _) => blocking = t.futex_exit(ts, h.cpu_ns),
            (Record::FuncEnter(_), Some(p)) => t.enter(p, ts, h.cpu_ns),
            (Record::FuncExit(_), Some(p)) => activation = t.exit(p, ts, h.cpu_ns),
            (Record::Exit(_), _) => {
                t.end();
                t.exited = true;
            }
            (Record::Exec(e), _) => {
                let name = records::exec_filename(e);
                self.execs.insert(pid, name);
            }
            _ => {}
        }
        if crate::analysis::makes_participant(r) {
            self.participants.insert(pid);
        }
        if let (Record::FuncEnter(_), Some(p)) = (r, procedure) {
            self.procedures.entry((p, pid)).or_default().calls += 1;
        }
        if let Some(b) = blocking {
            let place = (b.site != 0).then(|| self.sites.place(pid, b.site));
            if self.participants.contains(&pid) {
                self.blocking.add(&b, place);
            } else {
                self.outside.add(&b, place);
            }
        }
        if let Some(a) = activation {
            self.activation(pid, &a);
        }
    }

    fn activation(&mut self, pid: u32, a: &Activation) {
        self.durations[a.procedure].record(a.wall_ns);
        if a.outermost {
            let acc = self.procedures.entry((a.procedure, pid)).or_default();
            acc.elapsed += a.wall_ns;
            acc.cpu += a.cpu_ns;
        }
    }

    fn command(&self, pid: u32) -> String {
        self.commands
            .get(&pid)
            .or_else(|| self.execs.get(&pid))
            .cloned()
            .unwrap_or_default()
    }

    /// Each procedure in total and per process (in the order of the process table).
    fn procedure_tables(
        &self,
        dir: &Directory,
        order: &HashMap<u32, usize>,
    ) -> Vec<ProcedureMetrics> {
        let selected = &self.procedures_selected;
        selected
            .names
            .iter()
            .zip(&selected.symbols)
            .enumerate()
            .map(|(p, (name, symbol))| {
                let mut rows: Vec<ProcedureInProcess> = self
                    .procedures
                    .iter()
                    .filter(|((q, _), _)| *q == p)
                    .map(|(&(_, pid), a)| ProcedureInProcess {
                        pid,
                        rank: dir.world_rank(pid),
                        calls: a.calls,
                        elapsed_ns: a.elapsed,
                        cpu_ns: a.cpu,
                    })
                    .collect();
                rows.sort_by_key(|r| (order.get(&r.pid).copied().unwrap_or(usize::MAX), r.pid));
                ProcedureMetrics {
                    name: name.clone(),
                    symbol: symbol.clone(),
                    calls: rows.iter().map(|r| r.calls).sum(),
                    elapsed_ns: rows.iter().map(|r| r.elapsed_ns).sum(),
                    cpu_ns: rows.iter().map(|r| r.cpu_ns).sum(),
                    duration: self.durations[p].summary(),
                    processes: rows,
                }
            })
            .collect()
    }

    fn build<M: PathModel>(&mut self, analyzer: &Analyzer<M>) -> Metrics {
        let dir = &analyzer.matcher.directory;
        for t in self.threads.values_mut() {
            t.end();
        }
        let mut threads: Vec<&ThreadAcc> = self
            .threads
            .values()
            .chain(&self.ended)
            .filter(|t| t.pid != 0)
            .collect();
        threads.sort_by_key(|t| (t.pid, t.tid, t.first_ts));
        let mut by_pid: BTreeMap<u32, Vec<&ThreadAcc>> = BTreeMap::new();
        for t in &threads {
            by_pid.entry(t.pid).or_default().push(t);
        }
        let everyone = self.participants.is_empty();
        let in_program = |pid: u32| everyone || self.participants.contains(&pid);
        let machine_cpus: Vec<u32> = self.cpus.iter().map(|s| s.len().max(1) as u32).collect();

        // Processes and threads.
        let mut process_sums: BTreeMap<u32, Sums> = BTreeMap::new();
        let mut processes = Vec::new();
        for (&pid, ts) in &by_pid {
            let mut sums = Sums::default();
            for t in ts {
                sums.add_thread(t);
            }
            sums.processes = 1;
            let m = self.machine_of(pid);
            processes.push(ProcessMetrics {
                pid,
                machine: self.machines[m].clone(),
                rank: dir.world_rank(pid),
                pvm_tid: dir.pvm_tid(pid),
                command: self.command(pid),
                participant: self.participants.contains(&pid),
                measures: sums.measures(machine_cpus[m]),
            });
            process_sums.insert(pid, sums);
        }
        processes.sort_by_key(|p| (!in_program(p.pid), p.rank.is_none(), p.rank, p.pid));
        let order: HashMap<u32, usize> = processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.pid, i))
            .collect();
        threads.sort_by_key(|t| (order[&t.pid], t.tid, t.first_ts));
        let thread_rows = threads
            .iter()
            .map(|t| {
                let mut s = Sums::default();
                s.add_thread(t);
                s.processes = 1;
                ThreadMetrics {
                    tid: t.tid,
                    pid: t.pid,
                    measures: s.measures(machine_cpus[self.machine_of(t.pid)]),
                }
            })
            .collect();

        // Machines and the program: the program's processes only.
        let mut machine_sums: Vec<Sums> = self.machines.iter().map(|_| Sums::default()).collect();
        for (&pid, s) in &process_sums {
            if in_program(pid) {
                machine_sums[self.machine_of(pid)].add(s);
            }
        }
        let mut program = Sums::default();
        for s in &machine_sums {
            program.add(s);
        }
        let cpus: u32 = machine_cpus.iter().sum();
        let machines = self
            .machines
            .iter()
            .zip(&machine_sums)
            .zip(&machine_cpus)
            .map(|((name, s), &c)| MachineMetrics {
                name: name.clone(),
                cpus: c,
                measures: s.measures(c),
            })
            .collect();
        let program = program.measures(cpus);

        let procedures = self.procedure_tables(dir, &order);

        // Blocking distributions: the program's, or everyone's.
        if everyone {
            let outside = std::mem::take(&mut self.outside);
            self.blocking.merge(&outside);
        }
        let BlockingTables { calls, call_sites } = self.blocking.tables(&self.sites);

        let machine_names = &self.machines;
        let traffic = self.traffic.finish(
            |pid| dir.world_rank(pid),
            |pid| machine_names[self.machine_of(pid)].clone(),
            program.elapsed_ns,
            analyzer.matcher.final_stats(),
        );
        Metrics {
            schema_version: SCHEMA_VERSION,
            cpus,
            program,
            machines,
            processes,
            threads: thread_rows,
            procedures,
            calls,
            call_sites,
            traffic,
            events: Events {
                analyzed: self.events,
                lost: self.lost,
            },
        }
    }
}
