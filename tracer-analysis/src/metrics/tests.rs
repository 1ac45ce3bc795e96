//! Unit tests on synthetic item streams whose every timestamp and CPU clock the test
//! sets, so the expected metrics are exact.

use tracer_common::{
    call, flavor, kind, CallRecord, EventHeader, ExitRecord, ForkRecord, FutexRecord, SwitchRecord,
    WakeRecord, UNSET,
};

use super::{Cause, Metrics};
use crate::format::calls::MPICH_COMM_WORLD;
use crate::format::recording::{FunctionProbe, Item, RecordingMeta};
use crate::format::records::Record;
use crate::format::ProcessInfo;

fn meta() -> RecordingMeta {
    RecordingMeta {
        hostname: "node1".into(),
        ..Default::default()
    }
}

/// Writes records with explicit times; `cpu` is the CPU id stamped on headers.
#[derive(Default)]
struct Gen {
    items: Vec<Item>,
    cpu: u32,
}

impl Gen {
    fn rank(&mut self, pid: u32, rank: i32, size: i32) {
        self.items.push(Item::Process(ProcessInfo {
            pid,
            ppid: 1,
            command: format!("./app rank{rank}"),
            env_rank: Some(rank),
            env_size: Some(size),
            ..Default::default()
        }));
    }

    fn h(&self, ts: u64, cpu_ns: u64, pid: u32, tid: u32, kind: u16, callf: u16) -> EventHeader {
        EventHeader {
            ts_ns: ts,
            cpu_ns,
            tgid: pid,
            tid,
            kind,
            call: callf,
            cpu: self.cpu,
        }
    }

    fn push(&mut self, r: Record) {
        self.items.push(Item::Record(r));
    }

    /// An MPICH call entry of single-threaded process `pid` on MPI_COMM_WORLD.
    fn enter(&mut self, ts: u64, cpu: u64, pid: u32, id: u16, set: impl FnOnce(&mut CallRecord)) {
        let fl = if id >= 100 {
            flavor::PVM
        } else {
            flavor::MPICH
        };
        let h = self.h(ts, cpu, pid, pid, kind::CALL_ENTER, id | ((fl as u16) << 8));
        let mut c = CallRecord::unset(h);
        c.comm = MPICH_COMM_WORLD;
        set(&mut c);
        self.push(Record::CallEnter(c));
    }

    fn exit(&mut self, ts: u64, cpu: u64, pid: u32, id: u16, set: impl FnOnce(&mut CallRecord)) {
        let fl = if id >= 100 {
            flavor::PVM
        } else {
            flavor::MPICH
        };
        let h = self.h(ts, cpu, pid, pid, kind::CALL_EXIT, id | ((fl as u16) << 8));
        let mut c = CallRecord::unset(h);
        c.ret = 0;
        set(&mut c);
        self.push(Record::CallExit(c));
    }

    fn futex(&mut self, ts: u64, cpu: u64, pid: u32, tid: u32, op: Option<u32>) {
        let k = if op.is_some() {
            kind::FUTEX_ENTER
        } else {
            kind::FUTEX_EXIT
        };
        let f = FutexRecord {
            header: self.h(ts, cpu, pid, tid, k, 0),
            op: op.unwrap_or(0),
            site: if op.is_some() { 0x4000 } else { 0 },
            ..Default::default()
        };
        self.push(if op.is_some() {
            Record::FutexEnter(f)
        } else {
            Record::FutexExit(f)
        });
    }

    fn switch(&mut self, ts: u64, cpu: u64, pid: u32, tid: u32, out: Option<i64>) {
        let k = if out.is_some() {
            kind::SWITCH_OUT
        } else {
            kind::SWITCH_IN
        };
        let r = SwitchRecord {
            header: self.h(ts, cpu, pid, tid, k, 0),
            prev_state: out.unwrap_or(0),
        };
        self.push(if out.is_some() {
            Record::SwitchOut(r)
        } else {
            Record::SwitchIn(r)
        });
    }

    fn wake(&mut self, ts: u64, waker: u32, wakee_pid: u32, wakee: u32, new: bool) {
        let k = if new { kind::WAKEUP_NEW } else { kind::WAKEUP };
        let w = WakeRecord {
            header: self.h(ts, 0, waker, waker, k, 0),
            wakee_tid: wakee,
            wakee_tgid: wakee_pid,
            target_cpu: 0,
            _reserved: 0,
        };
        self.push(if new {
            Record::WakeupNew(w)
        } else {
            Record::Wakeup(w)
        });
    }

    fn thread_exit(&mut self, ts: u64, cpu: u64, pid: u32, tid: u32) {
        self.push(Record::Exit(ExitRecord {
            header: self.h(ts, cpu, pid, tid, kind::EXIT, 0),
            group_dead: 0,
            _reserved: 0,
        }));
    }

    /// Thread `parent` of process `pid` creates thread `child`.
    fn clone_thread(&mut self, ts: u64, cpu: u64, pid: u32, parent: u32, child: u32) {
        self.push(Record::Fork(ForkRecord {
            header: self.h(ts, cpu, pid, parent, kind::FORK, 0),
            child_tid: child,
            _reserved: 0,
        }));
    }

    fn func(&mut self, ts: u64, cpu: u64, pid: u32, probe: u16, enter: bool) {
        let k = if enter {
            kind::FUNC_ENTER
        } else {
            kind::FUNC_EXIT
        };
        let h = self.h(ts, cpu, pid, pid, k, probe);
        self.push(if enter {
            Record::FuncEnter(h)
        } else {
            Record::FuncExit(h)
        });
    }

    fn metrics(&self) -> Metrics {
        Metrics::from_items(&self.items, &meta())
    }
}

fn call_row<'a>(m: &'a Metrics, name: &str) -> &'a super::CallMetrics {
    m.calls
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", m.calls))
}

#[test]
fn blocked_time_by_cause_work_and_ratios() {
    let mut g = Gen::default();
    g.rank(100, 0, 1);
    let p = 100;
    g.enter(1_000, 0, p, call::MPI_INIT, |_| {});
    g.exit(3_000, 1_500, p, call::MPI_INIT, |_| {}); // other: 2000 wall, 1500 cpu
    g.futex(4_000, 2_000, p, p, Some(0)); // FUTEX_WAIT outside calls
    g.futex(9_000, 2_100, p, p, None); // futex: 5000 wall, 100 cpu
    g.enter(10_000, 3_000, p, call::MPI_RECV, |c| {
        c.peer = 0;
        c.tag = 1;
        c.site = 0x1234;
    });
    g.futex(12_000, 4_000, p, p, Some(0)); // inside MPI_Recv: the call's time
    g.futex(15_000, 4_000, p, p, None);
    g.exit(20_000, 8_000, p, call::MPI_RECV, |_| {}); // message: 10000 wall, 5000 cpu
    g.enter(21_000, 9_000, p, call::MPI_ALLREDUCE, |_| {});
    g.exit(26_000, 9_500, p, call::MPI_ALLREDUCE, |_| {}); // collective: 5000, 500 cpu
    g.thread_exit(30_000, 12_000, p, p);
    // A launcher (no MPI calls) waits on a futex: a traced process, not the program.
    g.futex(2_000, 0, 50, 50, Some(0));
    g.futex(40_000, 10, 50, 50, None);

    let m = g.metrics();
    let prog = &m.program;
    assert_eq!((prog.processes, prog.threads), (1, 1));
    assert_eq!(prog.elapsed_ns, 29_000);
    assert_eq!(prog.cpu_ns, 12_000);
    assert_eq!(prog.work_ns, 12_000 - (1_500 + 100 + 5_000 + 500));
    let b = &prog.blocked;
    assert_eq!(
        (
            b.message_ns,
            b.collective_ns,
            b.futex_ns,
            b.other_ns,
            b.total_ns
        ),
        (10_000, 5_000, 5_000, 2_000, 22_000)
    );
    assert_eq!(prog.cpu_wait_ns, 0);
    assert_eq!(m.cpus, 1);
    assert_eq!(prog.parallelism, Some(12_000.0 / 29_000.0));
    assert_eq!(prog.response_ratio, Some(29_000.0 / 12_000.0));
    assert_eq!(prog.utilization, prog.parallelism);
    assert_eq!(prog.load_factor, Some(1.0));
    assert_eq!(m.machines[0].name, "node1");
    assert_eq!(m.machines[0].measures, *prog);

    // Both processes are listed, the program's first; the launcher's futex wait counts
    // in its own row but not in the program's distributions.
    let pids: Vec<(u32, Option<i32>, bool)> = m
        .processes
        .iter()
        .map(|p| (p.pid, p.rank, p.participant))
        .collect();
    assert_eq!(pids, vec![(100, Some(0), true), (50, None, false)]);
    assert_eq!(m.processes[1].measures.blocked.futex_ns, 38_000);
    assert_eq!(m.threads.len(), 2);

    let names: Vec<&str> = m.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["MPI_Recv", "MPI_Allreduce", "futex", "MPI_Init"]);
    let recv = call_row(&m, "MPI_Recv");
    assert_eq!(recv.cause, Cause::Message);
    assert_eq!(
        (recv.blocked.count, recv.blocked.max_ns, recv.blocked.p50_ns),
        (1, 10_000, 10_000)
    );
    assert_eq!(call_row(&m, "futex").blocked.count, 1);
    assert_eq!(call_row(&m, "MPI_Allreduce").cause, Cause::Collective);
    assert_eq!(call_row(&m, "MPI_Init").cause, Cause::Other);
    // Per call site: the receive's caller and the futex wait's site.
    // No mappings recorded here: the sites stay addresses of their process.
    let sites: Vec<(&str, &str, Option<u32>, u64)> = m
        .call_sites
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.address.as_str(),
                s.pid,
                s.blocked.total_ns,
            )
        })
        .collect();
    assert_eq!(
        sites,
        vec![
            ("MPI_Recv", "0x1234", Some(100), 10_000),
            ("futex", "0x4000", Some(100), 5_000)
        ]
    );
}

#[test]
fn no_program_processes_means_every_process_counts() {
    let mut g = Gen::default();
    g.futex(1_000, 0, 7, 7, Some(0x80)); // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
    g.futex(4_000, 0, 7, 7, None);
    g.futex(5_000, 0, 7, 7, Some(1)); // FUTEX_WAKE: not a wait
    g.futex(6_000, 0, 7, 7, None);
    let m = g.metrics();
    assert_eq!(m.program.processes, 1);
    assert_eq!(m.program.blocked.futex_ns, 3_000);
    assert_eq!(call_row(&m, "futex").blocked.count, 1);
}

/// A switch-in the kernel did not report (two switch-outs in a row): the wait it ended
/// is recovered from the CPU clock, which says how long the thread ran since.
#[test]
fn cpu_wait_across_a_missed_switch_in() {
    let mut g = Gen::default();
    let p = 200;
    g.switch(1_000, 0, p, p, None);
    g.switch(5_000, 4_000, p, p, Some(0)); // preempted at CPU 4000
    g.switch(10_000, 6_000, p, p, Some(0)); // in at 8000 (not reported), out again
    g.switch(11_000, 6_000, p, p, None); // waited 1000
    g.switch(12_000, 7_000, p, p, Some(0x100)); // preempted at CPU 7000
    g.futex(14_000, 7_500, p, p, Some(1)); // in at 13_500 (not reported), no switch
    g.futex(14_100, 7_600, p, p, None);
    g.thread_exit(15_000, 8_500, p, p);
    let m = g.metrics();
    let t = &m.threads[0].measures;
    assert_eq!(t.cpu_wait_ns, 3_000 + 1_000 + 1_500);
    assert_eq!(t.elapsed_ns, 14_000);
    assert_eq!(t.cpu_ns, 8_500);
    assert_eq!(
        t.elapsed_ns,
        t.cpu_ns + t.cpu_wait_ns,
        "nothing unaccounted"
    );
}

#[test]
fn cpu_wait_from_switches_and_wakeups() {
    let mut g = Gen::default();
    let p = 200;
    g.switch(1_000, 0, p, p, None); // first record: running
    g.wake(2_000, p, p, 201, true); // a new thread, runnable ...
    g.switch(2_600, 0, 0, 201, None); // ... until its first switch-in (process unknown yet)
    g.futex(3_000, 100, p, 201, Some(1));
    g.futex(3_100, 120, p, 201, None);
    g.thread_exit(4_000, 300, p, 201);
    g.cpu = 1;
    g.switch(5_000, 4_000, p, p, Some(0)); // gave up the CPU while runnable
    g.switch(8_000, 4_000, p, p, None); // waited 3000
    g.switch(9_000, 5_000, p, p, Some(1)); // sleeps
    g.wake(12_000, 300, 0, p, false); // an untraced waker
    g.wake(12_500, 300, 0, p, false); // already runnable: no change
    g.switch(14_000, 5_000, p, p, None); // waited 2000
    g.wake(15_000, 300, 0, p, false); // running: no change
    g.switch(16_000, 7_000, p, p, Some(0x100)); // preempted (TASK_REPORT_MAX)
    g.switch(17_000, 7_000, p, p, None); // waited 1000
    g.thread_exit(20_000, 10_000, p, p);
    g.switch(20_001, 10_000, p, p, Some(0x10)); // the exiting thread's last switch: ignored

    let m = g.metrics();
    let tids: Vec<(u32, u32)> = m.threads.iter().map(|t| (t.pid, t.tid)).collect();
    assert_eq!(
        tids,
        vec![(200, 200), (200, 201)],
        "the waker is not a thread"
    );
    let main = &m.threads[0].measures;
    assert_eq!(main.cpu_wait_ns, 6_000);
    assert_eq!(main.elapsed_ns, 19_000);
    assert_eq!(main.cpu_ns, 10_000);
    assert_eq!(main.load_factor, Some(1.6));
    let new = &m.threads[1].measures;
    assert_eq!(new.cpu_wait_ns, 600);
    assert_eq!(
        new.elapsed_ns, 2_000,
        "from the wakeup that made it runnable"
    );
    assert_eq!(new.cpu_ns, 300);
    let prog = &m.program;
    assert_eq!((prog.processes, prog.threads), (1, 2));
    assert_eq!(prog.cpu_wait_ns, 6_600);
    assert_eq!(prog.cpu_ns, 10_300);
    assert_eq!(prog.elapsed_ns, 19_000);
    assert_eq!(m.cpus, 2, "CPUs 0 and 1 seen");
    assert_eq!(prog.utilization, Some(10_300.0 / 19_000.0 / 2.0));
}

/// Three MPICH ranks and two PVM tasks exchanging messages with known latencies.
fn traffic_run() -> Gen {
    let mut g = Gen::default();
    for r in 0..3 {
        g.rank(100 + r, r as i32, 3);
    }
    // pvm_mytid: task ids 0x40001 (pid 200) and 0x40002 (pid 201).
    for (pid, tid) in [(200, 0x40001), (201, 0x40002)] {
        g.enter(500, 0, pid, call::PVM_MYTID, |_| {});
        g.exit(600, 0, pid, call::PVM_MYTID, |c| c.ret = tid);
    }
    let send = |g: &mut Gen, ts: u64, from: u32, to: i32, tag: i32, bytes: i64| {
        g.enter(ts, 0, from, call::MPI_SEND, |c| {
            c.peer = to;
            c.tag = tag;
            c.bytes = bytes;
        });
        g.exit(ts + 100, 0, from, call::MPI_SEND, |_| {});
    };
    let recv = |g: &mut Gen, enter: u64, done: u64, at: u32, from: i32, tag: i32| {
        g.enter(enter, 0, at, call::MPI_RECV, |c| {
            c.peer = from;
            c.tag = tag;
        });
        g.exit(done, 0, at, call::MPI_RECV, |_| {});
    };
    // Latencies below 2048 ns, which the histogram keeps exactly.
    // rank 0 -> rank 1: three 64-byte messages, latencies 1, 1.2 and 1.4 us.
    for (i, lat) in [1_000u64, 1_200, 1_400].into_iter().enumerate() {
        let t = 10_000 * (i as u64 + 1);
        send(&mut g, t, 100, 1, i as i32, 64);
        recv(&mut g, t + 200, t + lat, 101, 0, i as i32);
    }
    // rank 1 -> rank 2: 100 bytes, 1.6 us.
    send(&mut g, 50_000, 101, 2, 9, 100);
    recv(&mut g, 50_200, 51_600, 102, 1, 9);
    // rank 2 -> rank 0 through Irecv and Wait: 8 bytes, 1.8 us.
    g.enter(60_000, 0, 100, call::MPI_IRECV, |c| {
        c.peer = 2;
        c.tag = 3;
    });
    g.exit(60_100, 0, 100, call::MPI_IRECV, |c| c.handle = 0xabc);
    send(&mut g, 61_000, 102, 0, 3, 8);
    g.enter(61_200, 0, 100, call::MPI_WAIT, |c| c.handle = 0xabc);
    g.exit(62_800, 0, 100, call::MPI_WAIT, |_| {});
    // PVM: task 0x40001 -> 0x40002, size from the receive (32 bytes), 2 us.
    g.enter(70_000, 0, 200, call::PVM_SEND, |c| {
        c.peer = 0x40002;
        c.tag = 7;
        c.bytes = UNSET;
    });
    g.exit(70_100, 0, 200, call::PVM_SEND, |c| c.ret = 0);
    g.enter(70_200, 0, 201, call::PVM_RECV, |c| {
        c.peer = -1;
        c.tag = -1;
    });
    g.exit(72_000, 0, 201, call::PVM_RECV, |c| {
        c.ret = 5;
        c.peer = 0x40001;
        c.tag = 7;
        c.bytes = 32;
    });
    g
}

#[test]
fn traffic_matrix_and_latency_percentiles() {
    let m = traffic_run().metrics();
    let t = &m.traffic;
    type Row = (u32, u32, Option<i32>, Option<i32>, u64, u64);
    let pairs: Vec<Row> = t
        .processes
        .iter()
        .map(|p| {
            (
                p.from_pid,
                p.to_pid,
                p.from_rank,
                p.to_rank,
                p.messages,
                p.bytes,
            )
        })
        .collect();
    assert_eq!(
        pairs,
        vec![
            (100, 101, Some(0), Some(1), 3, 192),
            (101, 102, Some(1), Some(2), 1, 100),
            (102, 100, Some(2), Some(0), 1, 8),
            (200, 201, None, None, 1, 32),
        ]
    );
    assert_eq!((t.messages, t.bytes, t.messages_unknown_size), (6, 332, 0));
    assert_eq!(t.machines.len(), 1);
    assert_eq!(
        (t.machines[0].from.as_str(), t.machines[0].to.as_str()),
        ("node1", "node1")
    );
    assert_eq!((t.machines[0].messages, t.machines[0].bytes), (6, 332));
    let l = &t.latency;
    assert_eq!(
        (l.count, l.total_ns, l.mean_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.max_ns),
        (6, 9_000, 1_500, 1_400, 2_000, 2_000, 2_000)
    );
    assert_eq!(t.matching.matched, 6);
    assert_eq!(t.matching.unmatched, 0);
    // Receives and the wait are message waits; the receive times are known.
    let recv = call_row(&m, "MPI_Recv");
    assert_eq!(recv.blocked.count, 4);
    assert_eq!(
        recv.blocked.total_ns,
        (800 + 1_000 + 1_200) + (51_600 - 50_200)
    );
    assert_eq!(call_row(&m, "MPI_Wait").blocked.total_ns, 1_600);
    assert_eq!(call_row(&m, "pvm_recv").cause, Cause::Message);
    let text = m.text();
    assert!(text.contains("messages from\\to"), "{text}");
    assert!(
        text.contains("machines node1 -> node1: 6 messages, 332 bytes"),
        "{text}"
    );
}

#[test]
fn reordered_records_give_the_same_metrics() {
    let g = traffic_run();
    // Swap neighbouring records (the ring buffer delivers records from different CPUs
    // slightly out of order): the reorder window puts them back.
    let mut items = g.items.clone();
    let first = items
        .iter()
        .position(|i| matches!(i, Item::Record(_)))
        .unwrap();
    for i in (first..items.len() - 1).step_by(3) {
        items.swap(i, i + 1);
    }
    assert_eq!(Metrics::from_items(&items, &meta()), g.metrics());
}

#[test]
fn procedure_counts_durations_and_recursion() {
    let mut g = Gen::default();
    for (id, name) in [(1, "f"), (2, "g"), (3, "f")] {
        // f is probed in two files: one procedure.
        g.items.push(Item::Probe(FunctionProbe {
            id,
            symbol: name.into(),
            path: format!("/lib{id}"),
            vaddr: 0,
        }));
    }
    g.rank(300, 0, 1);
    let p = 300;
    g.func(1_000, 0, p, 1, true);
    g.func(2_000, 500, p, 3, true); // recursion, through the other probe
    g.func(3_000, 1_500, p, 3, false); // 1000 ns
    g.func(5_000, 4_000, p, 1, false); // 4000 ns, 4000 cpu
    g.func(6_000, 4_000, p, 2, true);
    g.func(6_500, 4_500, p, 2, false);
    g.func(7_000, 4_500, p, 2, false); // exit without entry: ignored
    let m = g.metrics();
    let names: Vec<&str> = m.procedures.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["f", "g"]);
    let f = &m.procedures[0];
    assert_eq!((f.calls, f.elapsed_ns, f.cpu_ns), (2, 4_000, 4_000));
    assert_eq!(
        (
            f.duration.count,
            f.duration.p50_ns,
            f.duration.max_ns,
            f.duration.mean_ns
        ),
        (2, 1_000, 4_000, 2_500)
    );
    assert_eq!(f.processes.len(), 1);
    assert_eq!((f.processes[0].pid, f.processes[0].rank), (300, Some(0)));
    let g_ = &m.procedures[1];
    assert_eq!((g_.calls, g_.elapsed_ns, g_.cpu_ns), (1, 500, 500));
    assert_eq!(
        m.program.processes, 1,
        "a procedure makes a process part of the program"
    );
}

#[test]
fn open_calls_count_until_the_thread_ends() {
    let mut g = Gen::default();
    g.rank(400, 0, 1);
    g.enter(1_000, 0, 400, call::MPI_BARRIER, |_| {});
    g.thread_exit(9_000, 300, 400, 400);
    // A helper thread killed in a futex wait.
    g.futex(2_000, 0, 400, 401, Some(0));
    g.thread_exit(5_000, 0, 400, 401);
    let m = g.metrics();
    assert_eq!(m.program.blocked.collective_ns, 8_000);
    assert_eq!(m.program.blocked.futex_ns, 3_000);
    assert_eq!(
        m.program.work_ns, 0,
        "the CPU inside the barrier is not work"
    );
    // Not completed: not in the distributions.
    assert!(m.calls.is_empty(), "{:?}", m.calls);
    assert_eq!(m.traffic.matching.collectives, 0);
}

#[test]
fn one_line_in_every_rank_is_one_call_site() {
    let mut g = Gen::default();
    for (pid, exe) in [(500u32, 0x5500_0000_0000u64), (501, 0x5600_0000_0000)] {
        g.items.push(Item::Process(ProcessInfo {
            pid,
            ppid: 1,
            env_rank: Some((pid - 500) as i32),
            env_size: Some(2),
            mappings: vec![crate::format::Mapping {
                path: "/bin/app".into(),
                bias: exe,
            }],
            ..Default::default()
        }));
        let t = 1_000 * (pid as u64 - 499);
        g.enter(t, 0, pid, call::MPI_BARRIER, |c| c.site = exe + 0x11ec);
        g.exit(t + 10_000, 0, pid, call::MPI_BARRIER, |_| {});
    }
    let m = g.metrics();
    assert_eq!(m.call_sites.len(), 1, "{:?}", m.call_sites);
    let s = &m.call_sites[0];
    assert_eq!(
        (s.object.as_deref(), s.address.as_str(), s.pid),
        (Some("/bin/app"), "0x11ec", None)
    );
    assert_eq!((s.blocked.count, s.blocked.total_ns), (2, 20_000));
    assert!(
        m.text().contains("MPI_Barrier @ app+0x11ec"),
        "{}",
        m.text()
    );
}

/// A thread's work in the recorded graph (what `tracer report` lists per thread): its
/// program arcs.
fn graph_work(items: &[Item], tid: u32) -> u64 {
    use crate::analysis::workclock::ClockKind;
    use crate::graph::{recorded::RecordedGraph, ArcKind};
    let rg = RecordedGraph::from_items(items, ClockKind::Cpu);
    let g = &rg.graph;
    g.arcs
        .iter()
        .filter(|a| a.kind == ArcKind::Program && g.vertices[a.to as usize].tid == tid)
        .map(|a| a.weight)
        .sum()
}

#[test]
fn work_counts_from_where_the_analysis_starts_the_thread_to_its_exit() {
    let mut g = Gen::default();
    let p = 300;
    // A process its launcher forked: switched in, 1.3 ms of CPU getting ready to exec,
    // then the program's first record (here a futex wake) ...
    g.switch(1_000, 0, p, p, None);
    g.futex(3_000, 1_300_000, p, p, Some(1));
    g.futex(3_100, 1_310_000, p, p, None);
    // ... 4 ms of CPU in all until its exit ...
    g.thread_exit(10_000, 5_300_000, p, p);
    // ... then the kernel tears it down, preempted once meanwhile.
    g.switch(10_100, 5_400_000, p, p, Some(0x100));
    g.switch(10_200, 5_400_000, p, p, None);
    g.switch(10_300, 5_450_000, p, p, Some(0x10));

    let m = g.metrics();
    let t = &m.threads[0].measures;
    assert_eq!(t.work_ns, 4_000_000);
    assert_eq!(t.work_ns, graph_work(&g.items, p));
    // The CPU time is all the thread used while traced up to its exit.
    assert_eq!(t.cpu_ns, 5_300_000);
}

#[test]
fn a_thread_created_while_traced_works_from_its_creation_even_with_a_reused_id() {
    let mut g = Gen::default();
    let p = 400;
    g.futex(1_000, 10_000, p, p, Some(1));
    g.futex(1_100, 11_000, p, p, None);
    // Thread 401 runs 2 ms of CPU from its creation, its first record at 0.5 ms.
    g.clone_thread(2_000, 20_000, p, p, 401);
    g.switch(2_100, 0, p, 401, None);
    g.futex(3_000, 500_000, p, 401, Some(1));
    g.futex(3_100, 510_000, p, 401, None);
    g.thread_exit(4_000, 2_000_000, p, 401);
    g.switch(4_100, 2_050_000, p, 401, Some(0x10));
    // The id comes back for a new thread, switched out once before its first other
    // record: 3 ms of CPU from its creation.
    g.clone_thread(5_000, 30_000, p, p, 401);
    g.switch(5_100, 0, p, 401, None);
    g.switch(5_200, 200_000, p, 401, Some(0x100));
    g.switch(5_300, 200_000, p, 401, None);
    g.futex(6_000, 700_000, p, 401, Some(1));
    g.futex(6_100, 710_000, p, 401, None);
    g.thread_exit(7_000, 3_000_000, p, 401);
    g.thread_exit(8_000, 40_000, p, p);

    let m = g.metrics();
    let works: Vec<(u32, u64)> = m
        .threads
        .iter()
        .map(|t| (t.tid, t.measures.work_ns))
        .collect();
    assert_eq!(
        works,
        vec![(400, 30_000), (401, 2_000_000), (401, 3_000_000)]
    );
    // The graph counts the two lives of 401 under one id.
    assert_eq!(graph_work(&g.items, 401), 5_000_000);
    assert_eq!(graph_work(&g.items, 400), 30_000);
}

/// A call whose exit the probes did not write (nested too deep, or its return probe came
/// late) is dropped at its caller's exit: the later calls keep their own durations.
#[test]
fn a_missing_exit_leaves_later_calls_their_durations() {
    let mut g = Gen::default();
    g.rank(100, 0, 1);
    let p = 100;
    g.enter(1_000, 0, p, call::MPI_SEND, |c| c.peer = 0);
    g.enter(1_500, 0, p, call::MPI_COMM_RANK, |_| {}); // its exit is missing
    g.exit(2_000, 0, p, call::MPI_SEND, |_| {});
    g.enter(10_000, 100, p, call::MPI_RECV, |c| {
        c.peer = 0;
        c.tag = 1;
    });
    g.exit(20_000, 200, p, call::MPI_RECV, |_| {});
    g.enter(21_000, 300, p, call::MPI_ALLREDUCE, |_| {});
    g.exit(26_000, 400, p, call::MPI_ALLREDUCE, |_| {});
    g.thread_exit(30_000, 500, p, p);
    let m = g.metrics();
    let recv = call_row(&m, "MPI_Recv");
    assert_eq!((recv.blocked.count, recv.blocked.max_ns), (1, 10_000));
    let allreduce = call_row(&m, "MPI_Allreduce");
    assert_eq!(
        (allreduce.blocked.count, allreduce.blocked.max_ns),
        (1, 5_000)
    );
}
