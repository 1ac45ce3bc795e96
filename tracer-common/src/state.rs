//! Map state: the per-CPU slots and their cursors, and the per-thread state the probes
//! keep between events.

use crate::{CallRecord, FutexRecord, ThreadClock, ARRAY_CHUNK};

/// Records of at most this many bytes (all but the status-array and exec records) are
/// written to the writing CPU's run of slots in `SLOTS` when it has room, and to the
/// ring buffer otherwise. A slot is a plain store into memory userspace maps: no lock and
/// no commit, which the ring's reservation costs (about 50 ns per record here;
/// docs/design-decisions.md).
pub const SLOT_BYTES: usize = 136;
/// One slot: a record, from its first byte.
pub type Slot = [u64; SLOT_BYTES / 8];

/// Where a CPU stands in its run of slots (`CURSORS`, one per CPU). Each CPU's records
/// are consecutive slots, used in turn: slot `n % slots_per_cpu` holds its `n`th record.
/// The probes write `head` and `busy`, userspace writes `tail`; each is on a cache line
/// of its own.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCursor {
    /// Records written. A probe stores it after the record, so every slot below it is
    /// whole.
    pub head: u64,
    /// Non-zero while a probe on this CPU fills a slot. A probe that interrupts it (or
    /// that runs while it is preempted) writes to the ring instead.
    pub busy: u64,
    pub _pad1: [u64; 6],
    /// Records userspace has read; the slots from `tail` to `head` are unread.
    pub tail: u64,
    pub _pad2: [u64; 7],
}

/// What a call's exit probe needs from its entry: the call, and the pointers the call
/// writes its results through, read again at the return.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallFrame {
    pub call: u16,
    pub flavor: u16,
    pub count: i32,
    /// Load bias of the library the call is in.
    pub bias: u64,
    pub handle_out: u64,
    pub out: u64,
    pub status: [u64; 3],
    /// The caller's return address, read at the entry of a call that can block, and of
    /// every call while the sampler runs (0 otherwise): where a futex wait inside the
    /// call comes from, and what the sampler puts back in a copied stack. The stack no
    /// longer says once the return probe has put its trampoline's address there.
    pub site: u64,
    /// The stack pointer at the entry probe (the address of the return address). A
    /// call entered at or above it, or a return above it, means this call has returned
    /// without its exit probe: the probes then drop the frame (`CALLS_UNWOUND`).
    pub sp: u64,
}

/// Slots of the probes' direct-mapped table of thread states (`THREAD_SLOTS`, indexed by
/// thread id modulo this power of two); a thread whose slot is taken gets an entry in
/// `THREADS` instead.
pub const THREAD_SLOTS_LEN: u32 = 4096;

/// MPI calls can nest (ROMIO, profiling wrappers); deeper nesting is counted, not kept.
pub const MAX_CALL_DEPTH: usize = 4;

/// Selected procedures (`--func`) in progress whose return address a thread's state keeps
/// for the sampler, innermost last; a deeper one's samples stop at the return probe's
/// trampoline, as every one's did before.
pub const MAX_PROCEDURE_DEPTH: usize = 8;

/// A selected procedure in progress while the sampler runs: its caller's return address,
/// and where on the stack it is (which the return probe overwrites with its trampoline's
/// address; the sampler puts `site` back there in its copy of the stack).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcedureFrame {
    pub site: u64,
    pub sp: u64,
}

/// Per traced thread (in `THREAD_SLOTS` or `THREADS`): its CPU clock and its calls in
/// progress. One entry serves every probe of the thread, so a call's entry and exit each
/// need one lookup; having an entry also means the thread is traced.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadState {
    pub clock: ThreadClock,
    /// Calls in progress, innermost last (more than `MAX_CALL_DEPTH` are counted).
    pub depth: u32,
    /// Which entry record the thread holds back, not written yet (one of [`held`]): a
    /// call that cannot block in `held_entry` ([`crate::CallPairRecord`]), or a futex call
    /// in `held_futex` ([`crate::FutexPairRecord`]).
    pub held: u32,
    /// In `THREAD_SLOTS`: the thread whose state this is, 0 for a free slot (unused in
    /// `THREADS`); 64 bits for the alignment of what follows.
    pub owner: u64,
    pub frames: [CallFrame; MAX_CALL_DEPTH],
    pub held_entry: CallRecord,
    pub held_futex: FutexRecord,
    /// 1 + the frame index of the call whose handles `tested` holds, 0 for none: a call
    /// whose array is written only if it completed a request
    /// ([`crate::array_when::IF_OUT_POSITIVE`]).
    pub tested_frame: u32,
    /// How many of `tested` are the call's.
    pub tested_total: u32,
    pub tested: [u64; ARRAY_CHUNK],
    /// Selected procedures in progress (`procedures[..procedure_depth]`), kept only
    /// while the sampler runs.
    pub procedure_depth: u32,
    pub _pad: u32,
    pub procedures: [ProcedureFrame; MAX_PROCEDURE_DEPTH],
}

/// Values of [`ThreadState::held`].
pub mod held {
    pub const NOTHING: u32 = 0;
    pub const CALL: u32 = 1;
    pub const FUTEX: u32 = 2;
}

/// Names of the maps shared by both sides.
pub mod maps {
    pub const EVENTS: &str = "EVENTS";
    /// Per-CPU failure counters, indexed by [`crate::ProbeFailure`].
    pub const FAILURES: &str = "FAILURES";
    pub const TRACED: &str = "TRACED";
    pub const THREADS: &str = "THREADS";
    pub const CONFIG: &str = "CONFIG";
    pub const LAYOUTS: &str = "LAYOUTS";
    pub const FLAVORS: &str = "FLAVORS";
    pub const SLOTS: &str = "SLOTS";
    pub const CURSORS: &str = "CURSORS";
    pub const HOLD_ON_LOAD: &str = "HOLD_ON_LOAD";
    /// Processes the probes stopped for userspace (at exec, after dlopen), by tgid: when
    /// (`bpf_ktime_get_ns`). Userspace removes a process as it lets it go on, and lets
    /// go any still there at the hold's deadline.
    pub const HELD: &str = "HELD";
    /// The program that writes calls' arrays, at index 0.
    pub const ARRAY_PROGS: &str = "ARRAY_PROGS";
}
