//! Synthetic recordings for unit tests: single-threaded MPICH ranks (pid = tid =
//! 100 + rank) whose records are written in causal order, with CPU clocks that advance
//! only where the test says work happens.

use std::path::Path;

use tracer_common::{
    call, flavor, kind, CallRecord, EventHeader, ExitRecord, ForkRecord, FutexRecord,
    HandleArrayRecord, SampleRecord, SwitchRecord, WakeRecord, ARRAY_CHUNK,
};

use crate::format::calls::MPICH_COMM_WORLD;
use crate::format::node::NodeInfo;
use crate::format::openmp::RegionKey;
use crate::format::recording::{FunctionProbe, Item, RecordingMeta, RecordingWriter};
use crate::format::records::Record;
use crate::format::ProcessInfo;

/// Bytes of every synthetic message.
pub(crate) const MESSAGE_BYTES: i64 = 64;

/// The record that ends a stretch of work: procedure `f`'s exit, or outside any
/// procedure, a switch-out (it carries the CPU clock forward and nothing else).
fn work_end(h: EventHeader, f: Option<usize>) -> Record {
    match f {
        Some(_) => Record::FuncExit(h),
        None => Record::SwitchOut(SwitchRecord {
            header: EventHeader {
                kind: kind::SWITCH_OUT,
                ..h
            },
            prev_state: 1,
        }),
    }
}

pub(crate) struct SyntheticRun {
    pub items: Vec<Item>,
    pub ts: u64,
    pub cpu: Vec<u64>,
}

impl SyntheticRun {
    /// `ranks` processes and selected procedures named `procedures` (probe ids 1, 2, ...).
    pub(crate) fn new(ranks: usize, procedures: &[&str]) -> Self {
        let mut items = Vec::new();
        for (f, name) in procedures.iter().enumerate() {
            items.push(Item::Probe(FunctionProbe {
                id: f as u16 + 1,
                symbol: name.to_string(),
                path: "/x".into(),
                vaddr: 0,
            }));
        }
        for r in 0..ranks {
            items.push(Item::Process(ProcessInfo {
                pid: 100 + r as u32,
                ppid: 1,
                command: "./app".into(),
                env_rank: Some(r as i32),
                env_size: Some(ranks as i32),
                ..Default::default()
            }));
        }
        SyntheticRun {
            items,
            ts: 1_000_000,
            cpu: vec![0; ranks],
        }
    }

    /// Every process maps `/app` at 0 (where the sampled tests' code locator puts its
    /// functions).
    pub(crate) fn map_app(&mut self) {
        for item in &mut self.items {
            if let Item::Process(p) = item {
                p.mappings = vec![crate::format::Mapping {
                    path: "/app".into(),
                    bias: 0,
                }];
            }
        }
    }

    /// A header on `rank`, 1 us after the previous record.
    pub(crate) fn header(&mut self, rank: usize, kind: u16, callf: u16) -> EventHeader {
        self.ts += 1000;
        let id = 100 + rank as u32;
        EventHeader {
            ts_ns: self.ts,
            cpu_ns: self.cpu[rank],
            tgid: id,
            tid: id,
            kind,
            call: callf,
            cpu: 0,
        }
    }

    /// `w` ns of CPU work on `rank`, inside selected procedure `f` if given (entry and
    /// exit records); outside, a switch-out record carries the clock forward.
    pub(crate) fn compute(&mut self, rank: usize, w: u64, f: Option<usize>) {
        if let Some(f) = f {
            let h = self.header(rank, kind::FUNC_ENTER, f as u16 + 1);
            self.items.push(Item::Record(Record::FuncEnter(h)));
        }
        self.cpu[rank] += w;
        let h = self.header(rank, kind::FUNC_EXIT, f.map(|f| f as u16 + 1).unwrap_or(0));
        self.items.push(Item::Record(work_end(h, f)));
    }

    /// Entry or exit of MPI call `id` on `rank` (MPI_COMM_WORLD; peer and tag on entry,
    /// and on a receive's exit the actual source and tag).
    pub(crate) fn call(&mut self, rank: usize, id: u16, peer: i32, tag: i32, exit: bool) {
        self.call_with(rank, id, exit, |c| {
            if !exit {
                c.comm = MPICH_COMM_WORLD;
                c.peer = peer;
                c.tag = tag;
                c.bytes = MESSAGE_BYTES;
            } else if id == call::MPI_RECV {
                c.peer = peer;
                c.tag = tag;
                c.bytes = MESSAGE_BYTES;
            }
        });
    }

    /// Entry or exit of MPI call `id` on `rank`, its arguments set by `fill` (an exit's
    /// `ret` is 0 before it).
    pub(crate) fn call_with(
        &mut self,
        rank: usize,
        id: u16,
        exit: bool,
        fill: impl FnOnce(&mut CallRecord),
    ) {
        let k = if exit {
            kind::CALL_EXIT
        } else {
            kind::CALL_ENTER
        };
        let h = self.header(rank, k, id | ((flavor::MPICH as u16) << 8));
        let mut c = CallRecord::unset(h);
        if exit {
            c.ret = 0;
        }
        fill(&mut c);
        self.items.push(Item::Record(if exit {
            Record::CallExit(c)
        } else {
            Record::CallEnter(c)
        }));
    }

    /// A call `id` on `rank` that describes a message to or from `peer` at its entry
    /// and writes `request` at its exit (MPI_Isend, MPI_Irecv, MPI_Send_init).
    fn request_call(&mut self, rank: usize, id: u16, peer: usize, tag: i32, request: u64) {
        self.call(rank, id, peer as i32, tag, false);
        self.call_with(rank, id, true, |c| c.handle = request);
    }

    /// MPI_Isend's entry and exit on `src`, its exit writing `request`.
    pub(crate) fn isend(&mut self, src: usize, dst: usize, tag: i32, request: u64) {
        self.request_call(src, call::MPI_ISEND, dst, tag, request);
    }

    /// MPI_Irecv's entry and exit on `dst`, its exit writing `request`.
    pub(crate) fn irecv(&mut self, dst: usize, src: usize, tag: i32, request: u64) {
        self.request_call(dst, call::MPI_IRECV, src, tag, request);
    }

    /// MPI_Send_init's entry and exit on `src`: the persistent send `request`.
    pub(crate) fn send_init(&mut self, src: usize, dst: usize, tag: i32, request: u64) {
        self.request_call(src, call::MPI_SEND_INIT, dst, tag, request);
    }

    /// MPI_Start of persistent `request` on `rank`.
    pub(crate) fn start(&mut self, rank: usize, request: u64) {
        self.call_with(rank, call::MPI_START, false, |c| c.handle = request);
        self.call_with(rank, call::MPI_START, true, |_| {});
    }

    /// MPI_Wait on `request` of `rank`, its status ignored (MPI_STATUS_IGNORE).
    pub(crate) fn wait(&mut self, rank: usize, request: u64) {
        self.call_with(rank, call::MPI_WAIT, false, |c| c.handle = request);
        self.call_with(rank, call::MPI_WAIT, true, |_| {});
    }

    /// MPI_Recv_init's entry and exit on `dst`: the persistent receive `request`.
    pub(crate) fn recv_init(&mut self, dst: usize, src: usize, tag: i32, request: u64) {
        self.request_call(dst, call::MPI_RECV_INIT, src, tag, request);
    }

    /// The handle array a probe writes after an entry (or, indices, before an exit) on
    /// `rank`: `values`, in one record (at most `ARRAY_CHUNK`).
    fn handle_array(&mut self, rank: usize, values: &[u64]) {
        let header = self.header(rank, kind::HANDLE_ARRAY, 0);
        let mut array = HandleArrayRecord {
            header,
            first: 0,
            total: values.len() as u32,
            values: [0; ARRAY_CHUNK],
        };
        array.values[..values.len()].copy_from_slice(values);
        self.items
            .push(Item::Record(Record::HandleArray(Box::new(array))));
    }

    /// Call `id` on `rank` over the array `requests` (its entry's count, the array after
    /// it), `written` the handle array its exit writes before it (Waitsome's indices),
    /// `out` its exit's `out` (a flag, an index or a count).
    fn array_call(&mut self, rank: usize, id: u16, requests: &[u64], written: &[u64], out: i64) {
        self.call_with(rank, id, false, |c| c.count = requests.len() as i32);
        self.handle_array(rank, requests);
        if !written.is_empty() {
            self.handle_array(rank, written);
        }
        self.call_with(rank, id, true, |c| c.out = out);
    }

    /// MPI_Startall of the persistent `requests` on `rank`.
    pub(crate) fn startall(&mut self, rank: usize, requests: &[u64]) {
        self.array_call(rank, call::MPI_STARTALL, requests, &[], 0);
    }

    /// MPI_Waitany on `requests` of `rank`, returning `index` (its status ignored).
    pub(crate) fn waitany(&mut self, rank: usize, requests: &[u64], index: i64) {
        self.array_call(rank, call::MPI_WAITANY, requests, &[], index);
    }

    /// MPI_Testany on `requests` of `rank`, returning `index` (-1: none completed).
    pub(crate) fn testany(&mut self, rank: usize, requests: &[u64], index: i64) {
        self.array_call(rank, call::MPI_TESTANY, requests, &[], index);
    }

    /// MPI_Testall on `requests` of `rank`, its flag `flag` (statuses ignored).
    pub(crate) fn testall(&mut self, rank: usize, requests: &[u64], flag: i64) {
        self.array_call(rank, call::MPI_TESTALL, requests, &[], flag);
    }

    /// MPI_Waitsome on `requests` of `rank`, the ones at `indices` completing.
    pub(crate) fn waitsome(&mut self, rank: usize, requests: &[u64], indices: &[u64]) {
        let n = indices.len() as i64;
        self.array_call(rank, call::MPI_WAITSOME, requests, indices, n);
    }

    /// MPI_Mprobe on `dst` finding the message from `src` with `tag`, then the MPI_Mrecv
    /// that copies it out.
    pub(crate) fn mprobe_and_mrecv(&mut self, dst: usize, src: usize, tag: i32) {
        self.call(dst, call::MPI_MPROBE, src as i32, tag, false);
        self.call_with(dst, call::MPI_MPROBE, true, |c| {
            c.peer = src as i32;
            c.tag = tag;
            c.bytes = MESSAGE_BYTES;
        });
        self.call_with(dst, call::MPI_MRECV, false, |c| {
            c.count = MESSAGE_BYTES as i32
        });
        self.call_with(dst, call::MPI_MRECV, true, |_| {});
    }

    /// MPI_Send's entry and exit on `src`.
    pub(crate) fn send(&mut self, src: usize, dst: usize, tag: i32) {
        self.call(src, call::MPI_SEND, dst as i32, tag, false);
        self.call(src, call::MPI_SEND, 0, 0, true);
    }

    /// MPI_Recv's entry and exit on `dst`, from `src`.
    pub(crate) fn recv(&mut self, dst: usize, src: usize, tag: i32) {
        self.call(dst, call::MPI_RECV, src as i32, tag, false);
        self.call(dst, call::MPI_RECV, src as i32, tag, true);
    }

    /// A sampled call stack of `rank` at its CPU clock now: `frames` innermost first
    /// (the interrupted instruction, then return addresses), unwound as `end` says.
    pub(crate) fn sample(&mut self, rank: usize, frames: &[u64], end: u16) {
        let header = self.header(rank, kind::SAMPLE, 0);
        let mut r = SampleRecord {
            header,
            depth: frames.len() as u16,
            end,
            stack_bytes: 4096,
            ..Default::default()
        };
        r.frames[..frames.len()].copy_from_slice(frames);
        self.items.push(Item::Record(Record::Sample(Box::new(r))));
    }

    /// A message from `src` to `dst`, received right away.
    pub(crate) fn message(&mut self, src: usize, dst: usize, tag: i32) {
        self.send(src, dst, tag);
        self.recv(dst, src, tag);
    }
}

/// A synthetic multithreaded process (pid 500): threads are added with [`Self::clone`],
/// block in futex waits, wake each other and exit.
pub(crate) struct SyntheticThreads {
    pub items: Vec<Item>,
    pub ts: u64,
    /// CPU clock per thread id.
    pub cpu: std::collections::HashMap<u32, u64>,
}

/// The process id of [`SyntheticThreads`] (its main thread has the same id).
pub(crate) const THREADS_PID: u32 = 500;

impl SyntheticThreads {
    pub(crate) fn new(procedures: &[&str]) -> Self {
        let mut s = SyntheticThreads {
            items: SyntheticRun::new(0, procedures).items,
            ts: 1_000_000,
            cpu: [(THREADS_PID, 0)].into_iter().collect(),
        };
        s.items.push(Item::Process(ProcessInfo {
            pid: THREADS_PID,
            ppid: 1,
            command: "./threads".into(),
            ..Default::default()
        }));
        s
    }

    pub(crate) fn header(&mut self, tid: u32, kind: u16, callf: u16) -> EventHeader {
        self.ts += 1000;
        EventHeader {
            ts_ns: self.ts,
            cpu_ns: self.cpu[&tid],
            tgid: THREADS_PID,
            tid,
            kind,
            call: callf,
            cpu: 0,
        }
    }

    /// `w` ns of work on `tid`, inside selected procedure `f` if given.
    pub(crate) fn compute(&mut self, tid: u32, w: u64, f: Option<usize>) {
        if let Some(f) = f {
            let h = self.header(tid, kind::FUNC_ENTER, f as u16 + 1);
            self.items.push(Item::Record(Record::FuncEnter(h)));
        }
        *self.cpu.get_mut(&tid).unwrap() += w;
        let h = self.header(tid, kind::FUNC_EXIT, f.map(|f| f as u16 + 1).unwrap_or(0));
        self.items.push(Item::Record(work_end(h, f)));
    }

    /// A sampled call stack of `tid` at its CPU clock now (see [`SyntheticRun::sample`]).
    pub(crate) fn sample(&mut self, tid: u32, frames: &[u64]) {
        let header = self.header(tid, kind::SAMPLE, 0);
        let mut r = SampleRecord {
            header,
            depth: frames.len() as u16,
            end: tracer_common::unwind_end::COMPLETE,
            stack_bytes: 4096,
            ..Default::default()
        };
        r.frames[..frames.len()].copy_from_slice(frames);
        self.items.push(Item::Record(Record::Sample(Box::new(r))));
    }

    /// `parent` creates thread `child` (its clock starts at 0).
    pub(crate) fn clone(&mut self, parent: u32, child: u32) {
        let h = self.header(parent, kind::FORK, 0);
        self.items.push(Item::Record(Record::Fork(ForkRecord {
            header: h,
            child_tid: child,
            _reserved: 0,
        })));
        self.cpu.insert(child, 0);
    }

    fn futex(&mut self, tid: u32, op: u32, exit: bool) {
        let k = if exit {
            kind::FUTEX_EXIT
        } else {
            kind::FUTEX_ENTER
        };
        let header = self.header(tid, k, 0);
        let r = FutexRecord {
            header,
            uaddr: 0x1000,
            op,
            val: 0,
            ret: 0,
            site: 0,
        };
        self.items.push(Item::Record(if exit {
            Record::FutexExit(r)
        } else {
            Record::FutexEnter(r)
        }));
    }

    /// `tid` blocks in FUTEX_WAIT (private).
    pub(crate) fn wait(&mut self, tid: u32) {
        self.futex(tid, 128, false);
    }

    /// `tid`'s wait returns.
    pub(crate) fn resume(&mut self, tid: u32) {
        self.futex(tid, 128, true);
    }

    /// A wakeup of `wakee` stamped by `waker` (a traced thread's header, or with
    /// `untraced`, an interrupt's).
    pub(crate) fn wakeup(&mut self, waker: u32, wakee: u32, untraced: bool) {
        let mut header = self.header(waker, kind::WAKEUP, 0);
        if untraced {
            header.tgid = 1;
            header.cpu_ns = 0;
        }
        self.items.push(Item::Record(Record::Wakeup(WakeRecord {
            header,
            wakee_tid: wakee,
            wakee_tgid: THREADS_PID,
            target_cpu: 0,
            _reserved: 0,
        })));
    }

    /// `waker` calls FUTEX_WAKE and wakes `wakee`.
    pub(crate) fn wake(&mut self, waker: u32, wakee: u32) {
        self.futex(waker, 129, false);
        self.wakeup(waker, wakee, false);
        self.futex(waker, 129, true);
    }

    /// Entry or exit of pthread call `id` (`--locks`) on object `addr`; a condition
    /// wait's mutex is `mutex`.
    pub(crate) fn pthread_call(&mut self, tid: u32, id: u16, addr: u64, mutex: u64, exit: bool) {
        let k = if exit {
            kind::CALL_EXIT
        } else {
            kind::CALL_ENTER
        };
        let h = self.header(tid, k, id | ((flavor::GLIBC_PTHREAD as u16) << 8));
        let mut c = CallRecord::unset(h);
        if exit {
            c.ret = 0;
        } else {
            c.handle = addr;
            c.comm = mutex;
        }
        self.items.push(Item::Record(if exit {
            Record::CallExit(c)
        } else {
            Record::CallEnter(c)
        }));
    }

    /// Entry or exit of lowered OpenMP call `id` (a barrier, `omp_join`, `omp_idle`) of
    /// `region`; a barrier's `index` within it.
    pub(crate) fn omp_call(
        &mut self,
        tid: u32,
        id: u16,
        region: RegionKey,
        index: i32,
        exit: bool,
    ) {
        let k = if exit {
            kind::CALL_EXIT
        } else {
            kind::CALL_ENTER
        };
        let h = self.header(tid, k, id | ((flavor::GLIBC_PTHREAD as u16) << 8));
        let mut c = CallRecord::unset(h);
        c.comm = region.function;
        c.handle = region.data;
        c.tag = index;
        c.peer = 0;
        if exit {
            c.ret = 0;
        }
        self.items.push(Item::Record(if exit {
            Record::CallExit(c)
        } else {
            Record::CallEnter(c)
        }));
    }

    /// A whole pthread call that does not block.
    pub(crate) fn pthread(&mut self, tid: u32, id: u16, addr: u64) {
        self.pthread_call(tid, id, addr, 0, false);
        self.pthread_call(tid, id, addr, 0, true);
    }

    pub(crate) fn exit(&mut self, tid: u32) {
        let header = self.header(tid, kind::EXIT, 0);
        self.items.push(Item::Record(Record::Exit(ExitRecord {
            header,
            group_dead: (tid == THREADS_PID) as u32,
            _reserved: 0,
        })));
    }
}

// The scenarios that several tests trace, written once.

/// Two ranks in a ring, 3 rounds: each rank works in `outer`, calls `inner` from it,
/// and works outside both; rank 1 works longer, so the path is mostly its.
pub(crate) fn nested_ring() -> Vec<Item> {
    let mut s = SyntheticRun::new(2, &["outer", "inner"]);
    for round in 0..3 {
        for r in 0..2 {
            let slow = 1 + r as u64;
            let h = s.header(r, kind::FUNC_ENTER, 1);
            s.items.push(Item::Record(Record::FuncEnter(h)));
            s.cpu[r] += 2_000 * slow;
            s.compute(r, 5_000 * slow, Some(1));
            s.cpu[r] += 1_000 * slow;
            let h = s.header(r, kind::FUNC_EXIT, 1);
            s.items.push(Item::Record(Record::FuncExit(h)));
            s.compute(r, 700, None);
            s.message(r, 1 - r, round);
        }
    }
    s.items
}

/// Code addresses of [`sampled_pair`]'s functions: each function's code is the 4 KiB
/// from its address (`main` at 0x1000, `a` at 0x2000, `b` at 0x3000, `c` at 0x4000).
pub(crate) const SAMPLED_FUNCTIONS: [(&str, u64); 4] = [
    ("main", 0x1000),
    ("a", 0x2000),
    ("b", 0x3000),
    ("c", 0x4000),
];

/// Two ranks and six samples, no procedure selected. Rank 0 works 30 us, then sends to
/// rank 1; rank 1 works 10 us, receives, works 20 us. The path is rank 0's 30 us, then
/// rank 1's last 20 us: 50 us; rank 1's first 10 us have slack. Rank 0 is sampled at
/// its CPU clock 10 and 20 us in `main > a`, at 30 us in `main > b`; rank 1 at 5 us and
/// 15 us in `main > c` (the second weighs 5-15 us: 5 us before the receive, off the
/// path, and 5 after it, on it), at 30 us in `main > a` (its unwinding truncated). Both
/// processes map `/app` at 0.
pub(crate) fn sampled_pair() -> Vec<Item> {
    use tracer_common::unwind_end;
    let frames = |f: u64| [f + 5, 0x1010];
    let (a, b, c) = (frames(0x2000), frames(0x3000), frames(0x4000));
    let mut s = SyntheticRun::new(2, &[]);
    s.map_app();
    s.compute(0, 0, None);
    s.compute(1, 0, None);
    for (cpu, stack) in [(10_000, a), (20_000, a), (30_000, b)] {
        s.cpu[0] = cpu;
        s.sample(0, &stack, unwind_end::COMPLETE);
    }
    s.cpu[1] = 5_000;
    s.sample(1, &c, unwind_end::COMPLETE);
    s.cpu[1] = 10_000;
    s.send(0, 1, 0);
    s.recv(1, 0, 0);
    s.cpu[1] = 15_000;
    s.sample(1, &c, unwind_end::COMPLETE);
    s.cpu[1] = 30_000;
    s.sample(1, &a, unwind_end::TRUNCATED);
    s.compute(1, 0, None);
    s.items
}

/// A ring over 3 ranks, 4 rounds: each rank works in `work` (rank r 10 + r us), then
/// `outside_ns` outside it if given, then sends to the next rank; 12 messages.
pub(crate) fn ring(outside_ns: Option<u64>) -> Vec<Item> {
    let mut s = SyntheticRun::new(3, &["work"]);
    for round in 0..4 {
        for r in 0..3 {
            s.compute(r, 10_000 + 1000 * r as u64, Some(0));
            if let Some(ns) = outside_ns {
                s.compute(r, ns, None);
            }
            s.message(r, (r + 1) % 3, round);
        }
    }
    s.items
}

/// A three-stage pipeline of 3 items whose middle stage (procedure 1, 100 ms an item)
/// is the bottleneck; the outer stages work 10 ms an item in procedure 0. Returned
/// unfinished, for a test to add to.
pub(crate) fn pipeline(procedures: &[&str]) -> SyntheticRun {
    let mut s = SyntheticRun::new(3, procedures);
    for item in 0..3 {
        s.compute(0, 10_000_000, Some(0));
        s.send(0, 1, item);
        s.recv(1, 0, item);
        s.compute(1, 100_000_000, Some(1));
        s.send(1, 2, item);
        s.recv(2, 1, item);
        s.compute(2, 10_000_000, Some(0));
    }
    s
}

/// A thread started and joined through a futex wakeup: the main thread works, creates
/// thread 501 and waits; 501 works, wakes it and exits; the main thread works and exits.
pub(crate) fn thread_fork_join() -> Vec<Item> {
    const MAIN: u32 = THREADS_PID;
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
    s.items
}

/// The node table of [`write_two_node_ring`]: nodes `a` and `b` with 2 CPUs each, one
/// wall clock; b booted 5 s earlier, so its monotonic clock is 5 s ahead of a's.
pub(crate) fn two_nodes() -> Vec<NodeInfo> {
    let node = |name: &str, monotonic_ns: u64| NodeInfo {
        hostname: name.into(),
        cpus: 2,
        start_unix_ns: 1_000_000_000_000,
        start_monotonic_ns: monotonic_ns,
        ..Default::default()
    };
    vec![node("a", 10_000_000_000), node("b", 15_000_000_000)]
}

/// A job of 4 MPICH ranks in a ring (3 rounds; rank r works 10 + 5r us in `work`, then
/// sends to r + 1), as one machine would record it (pids 100 to 103); [`on_its_node`]
/// puts it on two nodes.
fn ring_job() -> Vec<Item> {
    let mut run = SyntheticRun::new(4, &["work"]);
    for round in 0..3 {
        for r in 0..4 {
            run.compute(r, 10_000 + 5_000 * r as u64, Some(0));
            run.message(r, (r + 1) % 4, round);
        }
    }
    // One job: the launcher's daemons on the two nodes are different parents.
    for item in &mut run.items {
        if let Item::Process(p) = item {
            p.env_job = Some("job".into());
        }
    }
    run.items
}

/// An item of [`ring_job`] as a node of [`two_nodes`] records it: ranks 0 and 1 on node
/// a as pids 100 and 101, ranks 2 and 3 on node b as pids 100 and 101 again, with b's
/// clock. A probe is on the node `current` (the node of the items around it).
struct NodeItem {
    node: u32,
    item: Item,
}

fn on_its_node(item: &Item, current: u32) -> NodeItem {
    let nodes = two_nodes();
    let node_of = |pid: u32| u32::from(pid >= 102);
    let local = |pid: u32| if pid >= 102 { pid - 2 } else { pid };
    let shift = nodes[1].start_monotonic_ns - nodes[0].start_monotonic_ns;
    match item {
        Item::Record(r) => {
            let node = node_of(r.header().tgid);
            let mut r = r.clone();
            if node == 1 {
                let h = r.header_mut();
                (h.tgid, h.tid) = (local(h.tgid), local(h.tid));
                h.ts_ns += shift;
            }
            NodeItem {
                node,
                item: Item::Record(r),
            }
        }
        Item::Process(p) => {
            let mut p = p.clone();
            let node = node_of(p.pid);
            p.pid = local(p.pid);
            NodeItem {
                node,
                item: Item::Process(p),
            }
        }
        Item::Probe(_) => NodeItem {
            node: current,
            item: item.clone(),
        },
    }
}

fn write_item(w: &mut RecordingWriter, item: &Item) {
    match item {
        Item::Record(r) => w.record(r.as_bytes()).unwrap(),
        Item::Process(p) => w.process(p).unwrap(),
        Item::Probe(f) => w.probe(f).unwrap(),
    }
}

/// [`ring_job`] written to `path` as one recording of two nodes ([`two_nodes`]) whose
/// processes have the same pids, as a collector merging the two nodes' streams in time
/// order would write it. Returns the job as one machine would record it.
pub(crate) fn write_two_node_ring(path: &Path) -> Vec<Item> {
    let job = ring_job();
    let nodes = two_nodes();
    let meta = RecordingMeta {
        hostname: nodes[0].hostname.clone(),
        start_unix_ns: nodes[0].start_unix_ns,
        start_monotonic_ns: nodes[0].start_monotonic_ns,
        nodes,
        ..Default::default()
    };
    let mut w = RecordingWriter::create(path, &meta).unwrap();
    let mut current = 0;
    for item in &job {
        let NodeItem { node, item } = on_its_node(item, current);
        if node != current {
            w.begin_node(node).unwrap();
            current = node;
        }
        write_item(&mut w, &item);
    }
    w.finish(&Default::default()).unwrap();
    job
}

/// [`ring_job`] as each node of [`two_nodes`] records it on its own: one recording per
/// node, with that node's host name and clocks, and the `work` probe on both. Returns
/// the job as one machine would record it.
pub(crate) fn write_two_node_ring_apart(paths: [&Path; 2]) -> Vec<Item> {
    let job = ring_job();
    for ((node, info), path) in two_nodes().into_iter().enumerate().zip(paths) {
        let meta = RecordingMeta {
            hostname: info.hostname.clone(),
            start_unix_ns: info.start_unix_ns,
            start_monotonic_ns: info.start_monotonic_ns,
            nodes: vec![info],
            ..Default::default()
        };
        let mut w = RecordingWriter::create(path, &meta).unwrap();
        let mut events = 0;
        for item in &job {
            let mine = on_its_node(item, node as u32);
            if mine.node == node as u32 {
                events += u64::from(matches!(mine.item, Item::Record(_)));
                write_item(&mut w, &mine.item);
            }
        }
        w.finish(&crate::format::recording::Trailer {
            events_total: events,
            ..Default::default()
        })
        .unwrap();
    }
    job
}
