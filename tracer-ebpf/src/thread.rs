//! Per-thread state: which threads are traced, and where each one's state lives
//! (`THREAD_SLOTS` or `THREADS`).

use crate::{
    emit::{EMPTY_HEADER, NO_FUTEX},
    maps::{config, count_failure, SLOT_OWNERS, THREADS, THREAD_SLOTS, TRACED},
    mem::copy_words,
};
use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use core::ptr::{read_volatile, write_volatile};
use tracer_common::{
    clock_state, held, CallFrame, CallRecord, ProbeFailure, ProcedureFrame, ThreadClock,
    ThreadState, ARRAY_CHUNK, MAX_CALL_DEPTH, MAX_PROCEDURE_DEPTH, STOLEN_UNKNOWN,
    THREAD_SLOTS_LEN,
};

/// `bpf_map_update_elem` flag: only if the key is not there yet.
const BPF_NOEXIST: u64 = 1;
/// A call frame with nothing set.
pub const EMPTY_FRAME: CallFrame = CallFrame {
    call: 0,
    flavor: 0,
    count: 0,
    bias: 0,
    handle_out: 0,
    out: 0,
    status: [0; 3],
    site: 0,
    sp: 0,
};
/// A thread new to the probes: its clock starts at its first event (`cpu_clock`).
static NEW_THREAD: ThreadState = ThreadState {
    clock: ThreadClock {
        on_cpu_ns: 0,
        slice_start_ns: 0,
        stolen_at_start_ns: STOLEN_UNKNOWN,
        last_ns: 0,
        tgid: 0,
        running: clock_state::OFF_CPU,
    },
    depth: 0,
    held: held::NOTHING,
    owner: 0,
    frames: [EMPTY_FRAME; MAX_CALL_DEPTH],
    held_entry: CallRecord::unset(EMPTY_HEADER),
    held_futex: NO_FUTEX,
    tested_frame: 0,
    tested_total: 0,
    tested: [0; ARRAY_CHUNK],
    procedure_depth: 0,
    _pad: 0,
    procedures: [ProcedureFrame { site: 0, sp: 0 }; MAX_PROCEDURE_DEPTH],
};

pub fn current_ids() -> (u32, u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    ((pid_tgid >> 32) as u32, pid_tgid as u32)
}

fn is_traced(id: u32) -> bool {
    unsafe { TRACED.get(&id).is_some() }
}

/// `tid`'s slot in `THREAD_SLOTS`, whoever owns it.
fn thread_slot(tid: u32) -> Option<&'static mut ThreadState> {
    THREAD_SLOTS
        .get_ptr_mut(tid & (THREAD_SLOTS_LEN - 1))
        .map(|t| unsafe { &mut *t })
}

/// The state of a thread the probes already know; only traced threads have one.
pub fn known_thread(tid: u32) -> Option<&'static mut ThreadState> {
    if let Some(t) = thread_slot(tid) {
        // Thread id 0 (the idle tasks) never owns a slot: 0 marks a free one.
        if tid != 0 && unsafe { read_volatile(&t.owner) } == tid as u64 {
            return Some(t);
        }
    }
    THREADS.get_ptr_mut(&tid).map(|t| unsafe { &mut *t })
}

/// A fresh state for a traced thread the probes meet for the first time (or a new
/// thread that reuses the id of one they knew): its slot if that is free or its own,
/// else an entry in `THREADS`.
pub fn new_thread(tid: u32) -> Option<&'static mut ThreadState> {
    if let Some(t) = thread_slot(tid) {
        // Programs on other CPUs may claim the same slot for another thread at the same
        // moment, and the BPF target has no compare-and-swap: the claim is an insertion
        // into `SLOT_OWNERS` that fails when the key exists, which the kernel makes atomic.
        let index = tid & (THREAD_SLOTS_LEN - 1);
        let ours = unsafe { read_volatile(&t.owner) } == tid as u64;
        if tid != 0 && (ours || SLOT_OWNERS.insert(&index, &tid, BPF_NOEXIST).is_ok()) {
            // The rest of the state is read only below `depth` and when `held` says so.
            copy_words(&mut t.clock, &NEW_THREAD.clock);
            t.depth = 0;
            t.held = held::NOTHING;
            unsafe { write_volatile(&mut t.owner, tid as u64) };
            return Some(t);
        }
    }
    if THREADS.insert(&tid, &NEW_THREAD, 0).is_err() {
        // Full: the thread goes untraced.
        count_failure(ProbeFailure::MapInsert);
        return None;
    }
    THREADS.get_ptr_mut(&tid).map(|t| unsafe { &mut *t })
}

/// Forgets an exiting thread: frees its slot or removes its entry (both, in case
/// userspace also gave it an entry when it attached).
pub fn forget_thread(tid: u32) {
    if let Some(t) = thread_slot(tid) {
        if tid != 0 && unsafe { read_volatile(&t.owner) } == tid as u64 {
            unsafe { write_volatile(&mut t.owner, 0) };
            let _ = SLOT_OWNERS.remove(&(tid & (THREAD_SLOTS_LEN - 1)));
        }
    }
    let _ = THREADS.remove(&tid);
}

/// The current thread's state if its process is traced: one lookup for a thread the
/// probes know, the traced set only for the others.
pub fn traced_thread(tgid: u32, tid: u32) -> Option<&'static mut ThreadState> {
    match known_thread(tid) {
        Some(t) => Some(t),
        None if is_traced(tgid) => new_thread(tid),
        None => None,
    }
}

/// [`traced_thread`] for uprobes, which in system-wide mode also admit new processes.
pub fn uprobe_thread(tgid: u32, tid: u32) -> Option<&'static mut ThreadState> {
    match known_thread(tid) {
        Some(t) => Some(t),
        None if admit_uprobe(tgid) => new_thread(tid),
        None => None,
    }
}

/// Whether a uprobe hit in `tgid` should be recorded. In system-wide mode the first hit
/// makes the process traced, so its futex and scheduler events follow.
fn admit_uprobe(tgid: u32) -> bool {
    if is_traced(tgid) {
        return true;
    }
    match config() {
        Some(c) if c.trace_all != 0 && tgid != c.self_tgid => {
            if TRACED.insert(&tgid, &1, 0).is_err() {
                // Full: this thread is traced, its process's other threads are not.
                count_failure(ProbeFailure::MapInsert);
            }
            true
        }
        _ => false,
    }
}
