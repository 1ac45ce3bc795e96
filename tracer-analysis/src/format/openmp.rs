//! Lowering the OpenMP probes' records into waits that every reader understands.
//!
//! The OpenMP runtimes' threads wait by spinning before they sleep (libgomp's default
//! wait policy; libomp's KMP_BLOCKTIME, 200 ms), so a worker waiting for the next region
//! or for a barrier looks busy, and the releases leave no futex wake behind. What the
//! probes see instead are the region's start (`GOMP_parallel` or libomp's
//! `__kmpc_fork_call`, on the master), its outlined function (`main._omp_fn.0`,
//! `.omp_outlined.`, on every thread of the team, the master included) and the team
//! barriers (`GOMP_barrier`, `__kmpc_barrier`, ...). A thread of a team works only inside an
//! outlined function; outside one, inside libgomp, it waits. This pass turns those
//! records into ordinary calls that wait, before anything else reads them (the session
//! lowers as it reads the ring; recordings hold the lowered records):
//!
//! | probed                               | lowered                                  |
//! |--------------------------------------|------------------------------------------|
//! | master enters GOMP_parallel (fork)   | `omp_fork` (entry and exit: not a wait)  |
//! | master returns from its outlined fn  | `omp_join` begins (arrival)              |
//! | master returns from GOMP_parallel    | `omp_join` ends (release by the team)    |
//! | worker returns from its outlined fn  | `omp_idle` begins (arrival)              |
//! | worker enters an outlined fn         | `omp_idle` ends (release by the fork)    |
//! | a barrier call                       | the same call, with region and index     |
//!
//! Every lowered record names its region (`comm` = outlined function, `handle` = its
//! data: the same on every thread of the team, and different for two teams running at
//! once); a barrier's `tag` is its index within the region. An outlined function entered
//! while a thread waits (a task run at a barrier) suspends the wait and resumes it
//! afterwards (`peer` = [`omp_wait::SUSPENDED`] / [`omp_wait::RESUMED`]), which the
//! analysis takes for neither an arrival nor a release.
//!
//! libomp has no data pointer: its region records name the first shared argument, or 0
//! when there is none ([`region_of`]). A region libomp runs on its master alone
//! (`if(0)`) brackets the master's own call of the outlined function with
//! `__kmpc_serialized_parallel` and its end; the lowering drops both and takes the
//! function's return for no wait. In libomp's tree reduction (more than 4 threads) the
//! workers wait inside `__kmpc_reduce` and skip `__kmpc_end_reduce` (it returns 0 to
//! them): their barrier count skips it too, so later barriers keep their index.

use rustc_hash::FxHashMap;
use tracer_common::{call, kind, omp_wait, CallRecord, EventHeader};

use crate::format::calls::{self, split_call_field, CallField, Role};
use crate::format::records::Record;

/// A parallel region as its records name it: the outlined function and its data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegionKey {
    pub function: u64,
    pub data: u64,
}

/// What a thread is inside, innermost last.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// The master's GOMP_parallel call.
    Parallel(RegionKey),
    /// A region run by the master alone (libomp's serialized parallel): the outlined
    /// function it calls itself ends in no wait.
    Serialized,
    /// An outlined function; `suspended` is the wait it interrupted, if any.
    Outlined {
        region: RegionKey,
        suspended: Option<Wait>,
        barriers: i32,
    },
}

/// A lowered wait in progress.
#[derive(Clone, Copy, Debug)]
struct Wait {
    call: u16,
    region: RegionKey,
    index: i32,
}

#[derive(Default)]
struct ThreadState {
    frames: Vec<Frame>,
    wait: Option<Wait>,
}

/// The per-thread state of the lowering: bounded by the threads alive and their nesting.
#[derive(Default)]
pub struct OpenMpLowering {
    threads: FxHashMap<u32, ThreadState>,
}

/// Whether a record is one the lowering replaces or must see.
pub fn concerns(r: &Record) -> bool {
    match r {
        Record::CallEnter(c) | Record::CallExit(c) => {
            calls::spec(split_call_field(c.header.call).id).is_some_and(|s| {
                matches!(
                    s.role,
                    Role::OmpParallel | Role::OmpOutlined | Role::OmpBarrier | Role::OmpSerialized
                )
            })
        }
        Record::Exit(_) => true,
        _ => false,
    }
}

impl OpenMpLowering {
    /// The records that stand for `r` (in order), given to `out`. Records the lowering
    /// has no business with are handed on unchanged.
    pub fn lower(&mut self, r: &Record, mut out: impl FnMut(Record)) {
        if !concerns(r) {
            out(r.clone());
            return;
        }
        let tid = r.header().tid;
        match r {
            Record::Exit(_) => {
                // A worker waits in libgomp until the process ends.
                if let Some(t) = self.threads.remove(&tid) {
                    if let Some(w) = t.wait {
                        let exit = with_kind(r.header(), kind::CALL_EXIT);
                        out(Record::CallExit(lowered(&exit, w, 0)));
                    }
                }
                out(r.clone());
            }
            Record::CallEnter(c) => {
                let t = self.threads.entry(tid).or_default();
                enter(t, c, &mut out);
            }
            Record::CallExit(c) => {
                let t = self.threads.entry(tid).or_default();
                exit(t, c, &mut out);
                if t.frames.is_empty() && t.wait.is_none() {
                    self.threads.remove(&tid);
                }
            }
            _ => out(r.clone()),
        }
    }
}

fn role(c: &CallRecord) -> Option<Role> {
    calls::spec(split_call_field(c.header.call).id).map(|s| s.role)
}

/// The lowest address a process can map (Linux's `vm.mmap_min_addr`, 64 KiB by
/// default): a libomp region argument below it is no pointer.
const LOWEST_MAPPABLE_ADDRESS: u64 = 0x1_0000;

/// The region an entry record names. libgomp passes one data pointer, the same in
/// `GOMP_parallel` and in every thread's call of the outlined function. libomp passes
/// the shared arguments one by one: the first one is that pointer. A region without
/// shared arguments has none: `__kmpc_fork_call` says so (`peer` = 0), and the outlined
/// function's third register then holds a small leftover of libomp's
/// `__kmp_invoke_microtask` (an alignment remainder below 128), not an address. A
/// scalar passed by value (a small `firstprivate` int) is keyed on 0 by both sides too.
pub(crate) fn region_of(c: &CallRecord) -> RegionKey {
    let id = split_call_field(c.header.call).id;
    let mut data = c.handle;
    let libomp = matches!(id, call::KMPC_FORK_CALL | call::KMP_OUTLINED);
    if libomp && ((id == call::KMPC_FORK_CALL && c.peer <= 0) || data < LOWEST_MAPPABLE_ADDRESS) {
        data = 0;
    }
    RegionKey {
        function: c.comm,
        data,
    }
}

/// The innermost outlined function a thread works in: its barriers belong to its region.
fn innermost_outlined(t: &mut ThreadState) -> Option<&mut Frame> {
    t.frames
        .iter_mut()
        .rev()
        .find(|f| matches!(f, Frame::Outlined { .. }))
}

/// A lowered call record of wait `w` at `h`'s time.
fn lowered(h: &EventHeader, w: Wait, flag: i32) -> CallRecord {
    let mut rec = CallRecord::unset(*h);
    let CallField { flavor, .. } = split_call_field(h.call);
    rec.header.call = w.call | ((flavor as u16) << 8);
    rec.comm = w.region.function;
    rec.handle = w.region.data;
    rec.tag = w.index;
    rec.peer = flag;
    if h.kind == kind::CALL_EXIT {
        rec.ret = 0;
    }
    rec
}

fn with_kind(h: &EventHeader, k: u16) -> EventHeader {
    EventHeader { kind: k, ..*h }
}

fn enter(t: &mut ThreadState, c: &CallRecord, out: &mut impl FnMut(Record)) {
    let h = &c.header;
    let region = region_of(c);
    match role(c) {
        Some(Role::OmpParallel) => {
            t.frames.push(Frame::Parallel(region));
            let fork = Wait {
                call: call::OMP_FORK,
                region,
                index: 0,
            };
            out(Record::CallEnter(lowered(h, fork, 0)));
            out(Record::CallExit(lowered(
                &with_kind(h, kind::CALL_EXIT),
                fork,
                0,
            )));
        }
        Some(Role::OmpOutlined) => {
            // Running an outlined function ends a wait: a worker's idle time (the fork
            // releases it), or, for a task run while the thread waits at a barrier or
            // for its team, an interruption of that wait.
            let mut suspended = None;
            if let Some(w) = t.wait.take() {
                let exit = with_kind(h, kind::CALL_EXIT);
                if w.call == call::OMP_IDLE {
                    let idle = Wait { region, ..w };
                    out(Record::CallExit(lowered(&exit, idle, 0)));
                } else {
                    out(Record::CallExit(lowered(&exit, w, omp_wait::SUSPENDED)));
                    suspended = Some(w);
                }
            }
            t.frames.push(Frame::Outlined {
                region,
                suspended,
                barriers: 0,
            });
        }
        Some(Role::OmpBarrier) => {
            // The barrier belongs to the innermost region the thread works in.
            let mut w = Wait {
                call: split_call_field(h.call).id,
                region: RegionKey::default(),
                index: 0,
            };
            if let Some(Frame::Outlined {
                region, barriers, ..
            }) = innermost_outlined(t)
            {
                w.region = *region;
                w.index = *barriers;
                *barriers += 1;
            }
            t.wait = Some(w);
            let mut rec = lowered(h, w, 0);
            rec.site = c.site;
            out(Record::CallEnter(rec));
        }
        Some(Role::OmpSerialized) => {
            if split_call_field(h.call).id == call::KMPC_SERIALIZED_PARALLEL {
                t.frames.push(Frame::Serialized);
            } else if let Some(i) = t
                .frames
                .iter()
                .rposition(|f| matches!(f, Frame::Serialized))
            {
                t.frames.truncate(i);
            }
        }
        _ => out(Record::CallEnter(*c)),
    }
}

fn exit(t: &mut ThreadState, c: &CallRecord, out: &mut impl FnMut(Record)) {
    let h = &c.header;
    match role(c) {
        Some(Role::OmpParallel) => {
            // Back from the region: the master's wait for its team ends.
            while let Some(f) = t.frames.pop() {
                if matches!(f, Frame::Parallel(_)) {
                    break;
                }
            }
            if let Some(w) = t.wait.take() {
                out(Record::CallExit(lowered(h, w, 0)));
            }
        }
        Some(Role::OmpOutlined) => {
            let Some(i) = t
                .frames
                .iter()
                .rposition(|f| matches!(f, Frame::Outlined { .. }))
            else {
                return;
            };
            let Frame::Outlined {
                region, suspended, ..
            } = t.frames[i]
            else {
                return;
            };
            t.frames.truncate(i);
            let enter = with_kind(h, kind::CALL_ENTER);
            if let Some(w) = suspended {
                t.wait = Some(w);
                out(Record::CallEnter(lowered(&enter, w, omp_wait::RESUMED)));
                return;
            }
            let call = match t.frames.last() {
                // The master's part of the region is done: it waits for its team.
                Some(Frame::Parallel(r)) if *r == region => call::OMP_JOIN,
                // A worker's part is done: it waits for the next region.
                None => call::OMP_IDLE,
                // A function run inside another one (an undeferred task): no wait.
                _ => return,
            };
            let w = Wait {
                call,
                region,
                index: 0,
            };
            t.wait = Some(w);
            out(Record::CallEnter(lowered(&enter, w, 0)));
        }
        Some(Role::OmpBarrier) => {
            if let Some(w) = t.wait.take() {
                out(Record::CallExit(lowered(h, w, 0)));
            }
            // A tree reduction's worker: released inside __kmpc_reduce, it does not call
            // __kmpc_end_reduce, whose barrier the master counts.
            if split_call_field(h.call).id == call::KMPC_REDUCE && c.ret == 0 {
                if let Some(Frame::Outlined { barriers, .. }) = innermost_outlined(t) {
                    *barriers += 1;
                }
            }
        }
        Some(Role::OmpSerialized) => {}
        _ => out(Record::CallExit(*c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::flavor;

    fn call(k: u16, id: u16, tid: u32, ts: u64, function: u64, data: u64) -> Record {
        let h = EventHeader {
            kind: k,
            call: id | ((flavor::GLIBC_PTHREAD as u16) << 8),
            tgid: 1,
            tid,
            ts_ns: ts,
            cpu_ns: ts,
            ..Default::default()
        };
        let mut c = CallRecord::unset(h);
        c.comm = function;
        c.handle = data;
        if k == kind::CALL_ENTER {
            Record::CallEnter(c)
        } else {
            Record::CallExit(c)
        }
    }

    /// A lowered call record as the checks see it.
    #[derive(Debug, PartialEq)]
    struct LoweredCall {
        tid: u32,
        call: String,
        enter: bool,
        peer: i32,
        tag: i32,
    }

    /// A lowered call record with the region it belongs to and its barrier index.
    #[derive(Debug, PartialEq)]
    struct LoweredRegionCall {
        tid: u32,
        call: String,
        enter: bool,
        region: RegionKey,
        index: i32,
    }

    fn lowered(records: &[Record]) -> Vec<LoweredCall> {
        let mut l = OpenMpLowering::default();
        let mut out = Vec::new();
        for r in records {
            l.lower(r, |r| {
                let (enter, c) = match &r {
                    Record::CallEnter(c) => (true, c),
                    Record::CallExit(c) => (false, c),
                    _ => return,
                };
                assert_eq!((c.comm, c.handle), (0xf, 0xd));
                let id = split_call_field(c.header.call).id;
                out.push(LoweredCall {
                    tid: c.header.tid,
                    call: calls::name(id),
                    enter,
                    peer: c.peer,
                    tag: c.tag,
                });
            });
        }
        out
    }

    #[test]
    fn a_region_becomes_fork_join_and_idle() {
        use kind::{CALL_ENTER as E, CALL_EXIT as X};
        const P: u16 = call::GOMP_PARALLEL;
        const F: u16 = call::OMP_OUTLINED;
        const B: u16 = call::GOMP_BARRIER;
        let got = lowered(&[
            call(E, P, 1, 0, 0xf, 0xd),
            call(E, F, 1, 1, 0xf, 0xd),
            call(E, F, 2, 2, 0xf, 0xd),
            call(E, B, 2, 3, 0, 0),
            call(E, B, 1, 4, 0, 0),
            call(X, B, 1, 5, 0, 0),
            call(X, B, 2, 5, 0, 0),
            call(X, F, 2, 6, 0, 0),
            call(X, F, 1, 7, 0, 0),
            call(X, P, 1, 8, 0, 0),
            // The next region releases the idle worker.
            call(E, F, 2, 9, 0xf, 0xd),
        ]);
        let s = |tid, n: &str, enter, peer, tag| LoweredCall {
            tid,
            call: n.to_string(),
            enter,
            peer,
            tag,
        };
        assert_eq!(
            got,
            [
                s(1, "omp_fork", true, 0, 0),
                s(1, "omp_fork", false, 0, 0),
                s(2, "GOMP_barrier", true, 0, 0),
                s(1, "GOMP_barrier", true, 0, 0),
                s(1, "GOMP_barrier", false, 0, 0),
                s(2, "GOMP_barrier", false, 0, 0),
                s(2, "omp_idle", true, 0, 0),
                s(1, "omp_join", true, 0, 0),
                s(1, "omp_join", false, 0, 0),
                s(2, "omp_idle", false, 0, 0),
            ]
        );
    }

    #[test]
    fn a_task_run_at_a_barrier_suspends_the_wait() {
        use kind::{CALL_ENTER as E, CALL_EXIT as X};
        const F: u16 = call::OMP_OUTLINED;
        const B: u16 = call::GOMP_BARRIER;
        let mut records = vec![
            call(E, F, 2, 0, 0xf, 0xd),
            call(E, B, 2, 1, 0, 0),
            call(E, F, 2, 2, 0xf, 0xd), // a task (same names here, for the check)
            call(X, F, 2, 3, 0, 0),
            call(X, B, 2, 4, 0, 0),
        ];
        records.push(call(E, B, 2, 5, 0, 0));
        let got = lowered(&records);
        let s = |n: &str, enter, peer, tag| LoweredCall {
            tid: 2,
            call: n.to_string(),
            enter,
            peer,
            tag,
        };
        assert_eq!(
            got,
            [
                s("GOMP_barrier", true, 0, 0),
                s("GOMP_barrier", false, omp_wait::SUSPENDED, 0),
                s("GOMP_barrier", true, omp_wait::RESUMED, 0),
                s("GOMP_barrier", false, 0, 0),
                s("GOMP_barrier", true, 0, 1),
            ]
        );
    }

    fn lowered_regions(records: &[Record]) -> Vec<LoweredRegionCall> {
        let mut l = OpenMpLowering::default();
        let mut out = Vec::new();
        for r in records {
            l.lower(r, |r| {
                let (enter, c) = match &r {
                    Record::CallEnter(c) => (true, c),
                    Record::CallExit(c) => (false, c),
                    _ => return,
                };
                let id = split_call_field(c.header.call).id;
                let region = RegionKey {
                    function: c.comm,
                    data: c.handle,
                };
                out.push(LoweredRegionCall {
                    tid: c.header.tid,
                    call: calls::name(id),
                    enter,
                    region,
                    index: c.tag,
                });
            });
        }
        out
    }

    fn with_peer(mut r: Record, peer: i32) -> Record {
        if let Record::CallEnter(c) = &mut r {
            c.peer = peer;
        }
        r
    }

    fn with_ret(mut r: Record, ret: i64) -> Record {
        if let Record::CallExit(c) = &mut r {
            c.ret = ret;
        }
        r
    }

    #[test]
    fn a_libomp_region_without_shared_arguments_is_keyed_on_its_function() {
        use kind::{CALL_ENTER as E, CALL_EXIT as X};
        const P: u16 = call::KMPC_FORK_CALL;
        const F: u16 = call::KMP_OUTLINED;
        const B: u16 = call::KMPC_BARRIER;
        // argc 0: the fork's fourth register and each thread's third are leftovers.
        let got = lowered_regions(&[
            with_peer(call(E, P, 1, 0, 0xf, 0x7fff_0000_1234), 0),
            call(E, F, 1, 1, 0xf, 0x40),
            call(E, F, 2, 2, 0xf, 0x10),
            call(E, B, 2, 3, 0, 0),
            call(E, B, 1, 4, 0, 0),
            call(X, B, 1, 5, 0, 0),
            call(X, B, 2, 5, 0, 0),
            call(X, F, 2, 6, 0, 0),
            call(X, F, 1, 7, 0, 0),
            call(X, P, 1, 8, 0, 0),
        ]);
        let key = RegionKey {
            function: 0xf,
            data: 0,
        };
        let s = |tid, n: &str, enter, index| LoweredRegionCall {
            tid,
            call: n.to_string(),
            enter,
            region: key,
            index,
        };
        assert_eq!(
            got,
            [
                s(1, "omp_fork", true, 0),
                s(1, "omp_fork", false, 0),
                s(2, "__kmpc_barrier", true, 0),
                s(1, "__kmpc_barrier", true, 0),
                s(1, "__kmpc_barrier", false, 0),
                s(2, "__kmpc_barrier", false, 0),
                s(2, "omp_idle", true, 0),
                s(1, "omp_join", true, 0),
                s(1, "omp_join", false, 0),
            ]
        );
        // With a shared argument, the fork and the outlined function agree on it.
        let data = 0x7ffd_0000_0010;
        let fork = with_peer(call(E, P, 1, 0, 0xf, data), 2);
        let Record::CallEnter(fork) = fork else {
            unreachable!()
        };
        let Record::CallEnter(outlined) = call(E, F, 2, 0, 0xf, data) else {
            unreachable!()
        };
        assert_eq!(region_of(&fork), region_of(&outlined));
        assert_eq!(region_of(&fork).data, data);
    }

    #[test]
    fn a_serialized_region_ends_in_no_wait() {
        use kind::{CALL_ENTER as E, CALL_EXIT as X};
        const S: u16 = call::KMPC_SERIALIZED_PARALLEL;
        const T: u16 = call::KMPC_END_SERIALIZED_PARALLEL;
        const F: u16 = call::KMP_OUTLINED;
        let got = lowered_regions(&[
            call(E, S, 1, 0, 0, 0),
            call(X, S, 1, 1, 0, 0),
            call(E, F, 1, 2, 0xf, 0x10),
            call(X, F, 1, 3, 0, 0),
            call(E, T, 1, 4, 0, 0),
            call(X, T, 1, 5, 0, 0),
        ]);
        assert_eq!(got, []);
    }

    #[test]
    fn a_tree_reduction_worker_skips_the_end_barrier() {
        use kind::{CALL_ENTER as E, CALL_EXIT as X};
        const F: u16 = call::KMP_OUTLINED;
        const R: u16 = call::KMPC_REDUCE;
        const ER: u16 = call::KMPC_END_REDUCE;
        const B: u16 = call::KMPC_BARRIER;
        let data = 0x7ffd_0000_0010;
        let got = lowered_regions(&[
            // The master combines (1) and ends the reduction; the worker gets 0.
            call(E, F, 1, 0, 0xf, data),
            call(E, F, 2, 0, 0xf, data),
            call(E, R, 1, 1, 0, 0),
            call(E, R, 2, 1, 0, 0),
            with_ret(call(X, R, 1, 2, 0, 0), 1),
            with_ret(call(X, R, 2, 3, 0, 0), 0),
            call(E, ER, 1, 4, 0, 0),
            call(X, ER, 1, 5, 0, 0),
            call(E, B, 1, 6, 0, 0),
            call(E, B, 2, 6, 0, 0),
        ]);
        let index = |name: &str, tid: u32| {
            got.iter()
                .find(|l| l.tid == tid && l.call == name && l.enter)
                .map(|l| l.index)
        };
        assert_eq!(index("__kmpc_reduce", 1), Some(0));
        assert_eq!(index("__kmpc_reduce", 2), Some(0));
        assert_eq!(index("__kmpc_end_reduce", 1), Some(1));
        assert_eq!(index("__kmpc_barrier", 1), Some(2));
        assert_eq!(index("__kmpc_barrier", 2), Some(2));
    }
}
