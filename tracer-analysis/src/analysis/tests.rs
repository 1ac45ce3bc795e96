//! Property tests on synthetic event streams: the online engine against an exhaustive
//! longest-path computation over the same event graph, and the memory bound.

use tracer_common::{call, kind};

use super::engine::CriticalEnd;
use super::workclock::ClockKind;
use super::{analyze, Analyzer};
use crate::format::recording::Item;
use crate::format::records::Record;
use crate::format::synth::SyntheticRun;
use crate::graph::cpm::Schedule;
use crate::graph::recorded::RecordedGraph;

/// xorshift64*: deterministic randomness without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A synthetic MPI run whose records the generator writes while it builds the same
/// run's event graph by hand.
struct Synth {
    run: SyntheticRun,
    funcs: usize,
    /// Reference graph: node values are computed as nodes are added (time order is a
    /// topological order). Per rank: its last node and the work since then, in total and
    /// per procedure.
    value: Vec<u64>,
    shares: Vec<Vec<u64>>,
    last: Vec<Option<usize>>,
    since: Vec<(u64, Vec<u64>)>,
}

impl Synth {
    fn new(procs: usize, funcs: usize) -> Self {
        let names: Vec<String> = (0..funcs).map(|f| format!("f{f}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut s = Synth {
            run: SyntheticRun::new(procs, &names),
            funcs,
            value: Vec::new(),
            shares: Vec::new(),
            last: vec![None; procs],
            since: vec![(0, vec![0; funcs]); procs],
        };
        // Each rank's path starts at its first record (the engine starts a thread there).
        for r in 0..procs {
            s.compute(r, 0, None);
        }
        s
    }

    /// `w` ns of CPU work on `rank`, inside procedure `f` if given.
    fn compute(&mut self, rank: usize, w: u64, f: Option<usize>) {
        self.run.compute(rank, w, f);
        self.since[rank].0 += w;
        if let Some(f) = f {
            self.since[rank].1[f] += w;
        }
    }

    /// A reference node on `rank` now, with an optional incoming message node.
    fn node(&mut self, rank: usize, incoming: Option<usize>) -> usize {
        let (w, per) = std::mem::replace(&mut self.since[rank], (0, vec![0; self.funcs]));
        let (mut v, mut sh) = match self.last[rank] {
            Some(p) => (
                self.value[p] + w,
                self.shares[p]
                    .iter()
                    .zip(&per)
                    .map(|(a, b)| a + b)
                    .collect(),
            ),
            None => (w, per),
        };
        if let Some(m) = incoming {
            // Ties keep the receiver's own path, as the engine does.
            if self.value[m] > v {
                v = self.value[m];
                sh = self.shares[m].clone();
            }
        }
        self.value.push(v);
        self.shares.push(sh);
        self.last[rank] = Some(self.value.len() - 1);
        self.value.len() - 1
    }

    /// A message from `src` to `dst`, received right away (time order = causal order).
    fn message(&mut self, src: usize, dst: usize, tag: i32) {
        self.run.call(src, call::MPI_SEND, dst as i32, tag, false);
        let sent = self.node(src, None);
        self.run.call(src, call::MPI_SEND, 0, 0, true);
        self.run.recv(dst, src, tag);
        self.node(dst, Some(sent));
    }

    /// Closes every rank with a final node; returns the longest path.
    fn finish(&mut self) -> LongestPath {
        for r in 0..self.last.len() {
            self.node(r, None);
        }
        let i = (0..self.value.len())
            .max_by_key(|&i| self.value[i])
            .unwrap();
        LongestPath {
            length: self.value[i],
            shares: self.shares[i].clone(),
        }
    }
}

/// The longest path of a synthetic run, computed by exhaustion: its length and each
/// procedure's share of it.
struct LongestPath {
    length: u64,
    shares: Vec<u64>,
}

/// A random run's records and its longest path.
struct RandomRun {
    items: Vec<Item>,
    longest: LongestPath,
}

/// Longest path with procedure `f`'s work removed: a second synthetic run with the same
/// schedule and that procedure's compute set to zero.
fn random_run(
    seed: u64,
    procs: usize,
    funcs: usize,
    steps: usize,
    zero: Option<usize>,
) -> RandomRun {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut s = Synth::new(procs, funcs);
    let mut tag = 0;
    for _ in 0..steps {
        let r = rng.below(procs as u64) as usize;
        if rng.below(2) == 0 {
            let f = rng.below(funcs as u64 + 1) as usize;
            let f = (f < funcs).then_some(f);
            let w = 1 + rng.below(1_000_000);
            let w = if zero.is_some() && f == zero { 0 } else { w };
            s.compute(r, w, f);
        } else {
            let d = rng.below(procs as u64) as usize;
            if d != r {
                tag += 1;
                s.message(r, d, tag);
            }
        }
    }
    let longest = s.finish();
    RandomRun {
        items: s.run.items,
        longest,
    }
}

#[test]
fn online_engine_equals_exhaustive_longest_path() {
    for seed in 0..300 {
        let procs = 2 + (seed % 4) as usize;
        let funcs = 1 + (seed % 3) as usize;
        let RandomRun {
            items,
            longest:
                LongestPath {
                    length: len,
                    shares,
                },
        } = random_run(seed, procs, funcs, 80, None);
        let a = analyze(&items, ClockKind::Cpu);
        let path = a.critical().unwrap().path;
        assert_eq!(path.longest, len, "seed {seed}: length");
        assert_eq!(path.inclusive, shares, "seed {seed}: shares");
        let threads = &path.by_thread;
        assert_eq!(
            threads.iter().map(|t| t.ns).sum::<u64>(),
            len,
            "seed {seed}: the threads' times add up to the path {threads:?}"
        );
        assert!(
            threads
                .iter()
                .all(|t| threads.iter().filter(|u| u.tid == t.tid).count() == 1),
            "seed {seed}: one entry per thread {threads:?}"
        );
        assert_eq!(
            path.exclusive, shares,
            "seed {seed}: no nesting, exclusive = inclusive"
        );
        assert_eq!(a.matcher.final_stats().unmatched, 0, "seed {seed}");
        // The recorded graph of the same stream has the same longest path.
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let sched = Schedule::new(&rg.graph);
        assert_eq!(sched.length, len, "seed {seed}: graph length");
        for f in 0..funcs {
            let zeroed_len = random_run(seed, procs, funcs, 80, Some(f)).longest.length;
            assert_eq!(a.zeroed_length(f), zeroed_len, "seed {seed}: zeroing f{f}");
            let contexts = &rg.graph.contexts;
            let zeroed = Schedule::with_weights(&rg.graph, |_, arc| {
                if contexts[arc.context as usize].procedures.contains(&f) {
                    0
                } else {
                    arc.weight
                }
            });
            assert_eq!(zeroed.length, zeroed_len, "seed {seed}: graph zeroing f{f}");
        }
    }
}

/// `items` as two nodes would record them: the odd ranks on node 1, whose clock reads
/// `behind_ns` behind node 0's (its records come that much earlier in the merged order),
/// each process seen to exec at the start if `execs`.
fn odd_ranks_on_a_node_behind(items: &[Item], behind_ns: u64, execs: bool) -> Vec<Item> {
    use crate::format::node::{GlobalId, NodeId};
    use tracer_common::ExecRecord;
    let on_node1 = |pid: u32| pid % 2 == 1;
    let global = |pid: u32| GlobalId::new(NodeId(on_node1(pid) as u16), pid).0;
    let mut facts = Vec::new();
    let mut records = Vec::new();
    for item in items {
        match item {
            Item::Process(p) => {
                let pid = global(p.pid);
                facts.push(Item::Process(crate::format::ProcessInfo {
                    pid,
                    ..p.clone()
                }));
                if execs {
                    let mut exec = ExecRecord::default();
                    exec.header.kind = kind::EXEC;
                    (exec.header.tgid, exec.header.tid) = (pid, pid);
                    exec.header.ts_ns = 1_000;
                    records.push(Record::Exec(Box::new(exec)));
                }
            }
            Item::Record(r) => {
                let mut r = r.clone();
                let h = r.header_mut();
                // Both clocks well after the execs (at 1 us).
                h.ts_ns += 100_000_000;
                if on_node1(h.tgid) {
                    h.ts_ns -= behind_ns;
                }
                (h.tgid, h.tid) = (global(h.tgid), global(h.tid));
                records.push(r);
            }
            Item::Probe(_) => facts.push(item.clone()),
        }
    }
    // The merged order: by each node's own clock.
    records.sort_by_key(|r| r.header().ts_ns);
    facts.extend(records.into_iter().map(Item::Record));
    facts
}

/// Half the ranks on a node whose clock reads up to 3 ms behind: the receives on it then
/// complete before their sends start (records are 1 us apart). Each waits for its send,
/// its process with it, and the path, the shares and the zeroing are those of the run on
/// one clock, live and in the recorded graph; every message matched.
#[test]
fn receives_the_clocks_put_before_their_sends_wait_for_them() {
    let mut corrected = 0;
    for seed in 0..200 {
        let procs = 2 + (seed % 4) as usize;
        let funcs = 1 + (seed % 3) as usize;
        let run = random_run(seed, procs, funcs, 80, None);
        let behind_ns = 10_000 + seed * 15_000;
        let items = odd_ranks_on_a_node_behind(&run.items, behind_ns, true);
        let a = analyze(&items, ClockKind::Cpu);
        let path = a.critical().unwrap().path;
        assert_eq!(path.longest, run.longest.length, "seed {seed}: length");
        assert_eq!(path.inclusive, run.longest.shares, "seed {seed}: shares");
        let stats = a.matcher.final_stats();
        assert_eq!(
            (stats.unmatched, stats.received),
            (0, stats.matched),
            "seed {seed}"
        );
        corrected += stats.clock_corrected;
        for f in 0..funcs {
            let zeroed = random_run(seed, procs, funcs, 80, Some(f)).longest.length;
            assert_eq!(a.zeroed_length(f), zeroed, "seed {seed}: zeroing f{f}");
        }
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let sched = Schedule::new(&rg.graph);
        assert_eq!(
            sched.length, run.longest.length,
            "seed {seed}: graph length"
        );
        assert_eq!(rg.messages, stats, "seed {seed}: graph's messages");
    }
    assert!(corrected > 1_000, "{corrected} messages corrected");
}

/// The same runs, but nothing says the processes were traced from their start (tracing
/// began mid-run: a receive may take a message sent before it), or the clocks put the
/// receives more than the window before their sends: nothing waits, and those receives
/// are unmatched as before.
#[test]
fn receives_before_their_sends_wait_only_within_the_window_and_for_whole_processes() {
    for seed in 0..50 {
        let run = random_run(seed, 4, 1, 80, None);
        let unmatched = |items: &[Item]| analyze(items, ClockKind::Cpu).matcher.final_stats();
        let mid_run = unmatched(&odd_ranks_on_a_node_behind(&run.items, 100_000, false));
        let too_far = super::late::LATE_WINDOW_NS + 1_000_000;
        let beyond = unmatched(&odd_ranks_on_a_node_behind(&run.items, too_far, true));
        assert_eq!(mid_run.clock_corrected, 0, "seed {seed}: {mid_run:?}");
        for stats in [mid_run, beyond] {
            assert!(stats.unmatched > 0, "seed {seed}: {stats:?}");
        }
    }
}

/// A barrier of two ranks, rank 1 on a node whose clock reads 3 ms behind: its exit
/// comes before rank 0's entry (records are 1 us apart), waits for it, and the path
/// through rank 0's 5 ms before the barrier and rank 1's 2 ms after it is the one of
/// the same run on one clock, the collective complete. Traced from the middle (no exec
/// seen), the exit cannot wait: the collective is incomplete and the path shorter.
#[test]
fn a_collective_exit_the_clocks_put_before_a_members_entry_waits_for_it() {
    let mut s = SyntheticRun::new(2, &[]);
    // Each rank's path starts at its first record.
    s.compute(0, 0, None);
    s.compute(1, 0, None);
    s.compute(0, 5_000_000, None);
    s.compute(1, 1_000_000, None);
    s.call(1, call::MPI_BARRIER, 0, 0, false);
    s.call(0, call::MPI_BARRIER, 0, 0, false);
    s.call(0, call::MPI_BARRIER, 0, 0, true);
    s.call(1, call::MPI_BARRIER, 0, 0, true);
    s.compute(1, 2_000_000, None);
    s.compute(0, 0, None);
    let on_one_clock = analyze(&s.items, ClockKind::Cpu);
    let longest = on_one_clock.critical().unwrap().path.longest;
    assert!(longest >= 7_000_000, "{longest}");
    let behind = odd_ranks_on_a_node_behind(&s.items, 3_000_000, true);
    let a = analyze(&behind, ClockKind::Cpu);
    assert_eq!(a.critical().unwrap().path.longest, longest);
    let stats = a.matcher.final_stats();
    assert_eq!(
        (
            stats.collectives,
            stats.collectives_incomplete,
            stats.clock_corrected
        ),
        (2, 0, 1),
        "{stats:?}"
    );
    let mid_run = analyze(
        &odd_ranks_on_a_node_behind(&s.items, 3_000_000, false),
        ClockKind::Cpu,
    );
    assert_eq!(mid_run.matcher.final_stats().collectives_incomplete, 1);
    assert!(mid_run.critical().unwrap().path.longest < longest);
}

#[test]
fn engine_memory_does_not_grow_with_run_length() {
    // A ring over 4 ranks, 100 rounds vs 1,000 rounds: the entries the analysis holds at
    // the end and at its peak are the same.
    fn ring(rounds: usize) -> Analyzer {
        let mut s = Synth::new(4, 1);
        for round in 0..rounds {
            for r in 0..4 {
                s.compute(r, 1000, Some(0));
                s.message(r, (r + 1) % 4, round as i32);
            }
        }
        let mut a = Analyzer::new(ClockKind::Cpu);
        for i in &s.run.items {
            a.item(i);
        }
        a
    }
    let short = ring(100);
    let long = ring(1000);
    assert!(short.entries_held() > 0);
    assert_eq!(short.entries_held(), long.entries_held());
    assert_eq!(short.peak_entries(), long.peak_entries());
    assert_eq!(long.critical().unwrap().path.longest, 1000 * 4 * 1000);
}

/// Shared-memory dependencies on a fork/join with a condition-variable style hand-off:
/// creation, a futex wake, and a join (the exiting thread's wakeup) carry the path
/// across threads; an interrupt's wakeup carries nothing.
#[test]
fn wakeups_creation_and_joins_carry_the_path() {
    use crate::format::synth::{SyntheticThreads, THREADS_PID as MAIN};
    let ms = 1_000_000;
    let mut s = SyntheticThreads::new(&["setup", "worker", "consume"]);
    s.compute(MAIN, 2 * ms, Some(0));
    s.clone(MAIN, 501);
    s.clone(MAIN, 502);
    // Main waits for a signal from 501; 502 works longer but only ends with an exit.
    s.wait(MAIN);
    s.compute(501, 10 * ms, Some(1));
    s.compute(502, 15 * ms, Some(1));
    // An interrupt wakes main spuriously first: no dependency.
    s.wakeup(502, MAIN, true);
    s.wake(501, MAIN);
    s.resume(MAIN);
    s.compute(MAIN, 3 * ms, Some(2));
    // Join 502: main blocks until 502's exit wakes it.
    s.wait(MAIN);
    s.compute(502, 20 * ms, Some(1));
    s.exit(502);
    s.wakeup(502, MAIN, false);
    s.resume(MAIN);
    s.compute(MAIN, ms, None);
    s.exit(501);
    s.exit(MAIN);
    let a = analyze(&s.items, ClockKind::Cpu);
    let CriticalEnd { tid, path } = a.critical().unwrap();
    // setup 2, then 502's 15 + 20 ms of worker, then main's last 1 ms.
    assert_eq!(path.longest, (2 + 35 + 1) * ms, "ends in {tid}");
    assert_eq!(path.inclusive, vec![2 * ms, 35 * ms, 0]);
    assert_eq!(a.sync.stats.creations, 2);
    assert_eq!(
        a.sync.stats.wakeups, 2,
        "the signal and the join, not the interrupt"
    );
    assert_eq!(a.sync.stats.exit_wakeups, 1);
    // Zeroing the workers leaves main's own path: 2 + 3 + 1 ms.
    assert_eq!(a.zeroed_length(1), 6 * ms);
    // The recorded graph agrees.
    let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
    assert_eq!(Schedule::new(&rg.graph).length, path.longest);
}

/// `--locks`: an uncontended hand-off (the second thread takes the mutex after the first
/// released it, without blocking) still orders the critical sections.
#[test]
fn uncontended_lock_handoffs_order_critical_sections() {
    use crate::format::synth::{SyntheticThreads, THREADS_PID as MAIN};
    use tracer_common::call::{PTHREAD_MUTEX_LOCK as LOCK, PTHREAD_MUTEX_UNLOCK as UNLOCK};
    let ms = 1_000_000;
    let mutex = 0x7000;
    let mut s = SyntheticThreads::new(&["critical"]);
    s.clone(MAIN, 501);
    s.clone(MAIN, 502);
    s.compute(501, 5 * ms, None);
    s.pthread(501, LOCK, mutex);
    s.compute(501, 10 * ms, Some(0));
    s.pthread(501, UNLOCK, mutex);
    s.compute(502, 2 * ms, None);
    s.pthread(502, LOCK, mutex);
    s.compute(502, 10 * ms, Some(0));
    s.pthread(502, UNLOCK, mutex);
    let a = analyze(&s.items, ClockKind::Cpu);
    let CriticalEnd { tid, path } = a.critical().unwrap();
    // 501's 5 + 10 ms, then 502's critical section: 25 ms, not 502's own 12.
    assert_eq!((tid, path.longest), (502, 25 * ms));
    assert_eq!(path.inclusive, vec![20 * ms]);
    assert_eq!(a.sync.stats.lock_handoffs, 1);
    let rg = RecordedGraph::from_items(&s.items, ClockKind::Cpu);
    assert_eq!(Schedule::new(&rg.graph).length, 25 * ms);
}

/// An exit the probes did not write (a call nested too deep, a return probe attached
/// while the thread was inside the call) or an entry they did not write costs that call
/// alone: the thread's later calls pair up, and their messages and waits count.
#[test]
fn calls_the_probes_unwound_are_dropped_and_later_calls_are_outermost_again() {
    let ms = 1_000_000;
    let mut s = SyntheticRun::new(2, &[]);
    // Rank 0 enters a barrier whose exit never comes (its return probe was attached
    // while it was inside), then the probes find it returned, at its next call's entry.
    s.call(0, call::MPI_BARRIER, 0, 0, false);
    let h = s.header(0, kind::CALLS_UNWOUND, call::MPI_BARRIER);
    s.items.push(Item::Record(Record::CallsUnwound(
        tracer_common::UnwoundRecord {
            header: h,
            calls: 1,
            _reserved: 0,
        },
    )));
    // Then rank 0's work reaches rank 1 through a message: the send is outermost (it
    // would be a call made inside the barrier without the unwinding), so it matches.
    s.cpu[0] += 5 * ms;
    s.send(0, 1, 8);
    s.recv(1, 0, 8);
    s.cpu[1] += ms;
    s.compute(1, 0, None);
    let a = analyze(&s.items, ClockKind::Cpu);
    assert_eq!(
        a.resynchronised,
        crate::format::pairing::Resynchronised {
            exits_missing: 1,
            entries_missing: 0
        }
    );
    let stats = a.matcher.final_stats();
    assert_eq!((stats.matched, stats.unmatched), (1, 0));
    let CriticalEnd { tid, path } = a.critical().unwrap();
    assert_eq!((tid, path.longest), (101, 6 * ms));
}

#[test]
fn a_missing_exit_or_entry_does_not_shift_later_pairings() {
    let ms = 1_000_000;
    let mut s = SyntheticRun::new(2, &[]);
    // Rank 1: an exit whose entry is missing.
    s.call(1, call::MPI_BARRIER, 0, 0, true);
    // Rank 0: inside MPI_Send, a nested call whose exit is missing.
    s.call(0, call::MPI_SEND, 1, 7, false);
    s.call(0, call::MPI_COMM_RANK, 0, 0, false);
    s.call(0, call::MPI_SEND, 0, 0, true);
    s.recv(1, 0, 7);
    // Then rank 0's work reaches rank 1 through a message.
    s.cpu[0] += 5 * ms;
    s.send(0, 1, 8);
    s.recv(1, 0, 8);
    s.cpu[1] += ms;
    s.compute(1, 0, None);
    let a = analyze(&s.items, ClockKind::Cpu);
    assert_eq!(
        a.resynchronised,
        crate::format::pairing::Resynchronised {
            exits_missing: 1,
            entries_missing: 1
        }
    );
    let stats = a.matcher.final_stats();
    assert_eq!((stats.matched, stats.unmatched), (2, 0));
    // Rank 0's 5 ms is work (its send returned), and rank 1 waited for it.
    let CriticalEnd { tid, path } = a.critical().unwrap();
    assert_eq!((tid, path.longest), (101, 6 * ms));
}
