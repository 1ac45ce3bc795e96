//! The maps the probes share with userspace (names in `tracer_common::maps`) and their
//! own per-CPU scratch space.

use crate::scratch::{ArrayScratch, SCAN_WORDS};
use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{Array, HashMap, PerCpuArray, ProgramArray, RingBuf},
};
use tracer_common::{
    call, flavor, CallLayout, FlavorConfig, ProbeConfig, ProbeFailure, Slot, SlotCursor,
    ThreadState, THREAD_SLOTS_LEN,
};

/// Default ring size; userspace may change it at load time (`--buffer-mib`).
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);
/// Every CPU's run of slots, one run after the other, and where each CPU stands in its
/// run (userspace sizes both at load time and maps them into its memory).
#[map]
pub static SLOTS: Array<Slot> = Array::with_max_entries(1, BPF_F_MMAPABLE);
#[map]
pub static CURSORS: Array<SlotCursor> = Array::with_max_entries(1, BPF_F_MMAPABLE);
/// Per CPU: how often a probe failed, by reason (the index is a `ProbeFailure`);
/// `ProbeFailure::RingFull` counts the records lost.
#[map]
pub static FAILURES: PerCpuArray<u64> = PerCpuArray::with_max_entries(ProbeFailure::COUNT, 0);
/// Per CPU: bytes of records written, to wake the reader every `wakeup_bytes`.
#[map]
pub static WRITTEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Traced tgids (and the tids of threads forked by traced threads).
#[map]
pub static TRACED: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);
/// Per traced thread: its CPU clock and the calls in progress (read again at their exit).
/// A thread's state is in `THREAD_SLOTS` at its id's index when that slot was free when
/// the probes met the thread, else in `THREADS`. The array comes first because the
/// verifier inlines an array lookup, while a hash lookup hashes the key and walks a
/// bucket: two per probed call, 2.6 % of a traced loop of `MPI_Comm_rank`.
#[map]
pub static THREAD_SLOTS: Array<ThreadState> = Array::with_max_entries(THREAD_SLOTS_LEN, 0);
#[map]
pub static THREADS: HashMap<u32, ThreadState> = HashMap::with_max_entries(65536, 0);
/// The slots of `THREAD_SLOTS` in use, and by which thread: claimed by inserting here.
#[map]
pub static SLOT_OWNERS: HashMap<u32, u32> = HashMap::with_max_entries(THREAD_SLOTS_LEN, 0);
#[map]
pub static CONFIG: Array<ProbeConfig> = Array::with_max_entries(1, 0);
/// Traced processes to stop after each dlopen (userspace's choice: those that map no
/// MPI/PVM library yet, such as a Python interpreter before it imports mpi4py).
#[map]
pub static HOLD_ON_LOAD: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);
/// Processes stopped for userspace, by tgid: since when (`tracer_common::maps::HELD`).
#[map]
pub static HELD: HashMap<u32, u64> = HashMap::with_max_entries(65536, 0);
#[map]
pub static LAYOUTS: Array<CallLayout> = Array::with_max_entries(call::TABLE_SIZE, 0);
#[map]
pub static FLAVORS: Array<FlavorConfig> = Array::with_max_entries(flavor::COUNT, 0);
/// Per CPU: the top of the user stack the futex probe scans for a call site (too big for
/// the 512-byte BPF stack).
#[map]
pub static STACK_WORDS: PerCpuArray<[u64; SCAN_WORDS]> = PerCpuArray::with_max_entries(1, 0);
/// The program that writes the arrays of a call (`call_arrays` or its twin: userspace puts
/// the one of its link kind at index 0), and per CPU the array it is to write.
#[map]
pub static ARRAY_PROGS: ProgramArray = ProgramArray::with_max_entries(1, 0);
#[map]
pub static ARRAY_SCRATCH: PerCpuArray<ArrayScratch> = PerCpuArray::with_max_entries(1, 0);

/// The settings userspace wrote at load time.
pub fn config() -> Option<&'static ProbeConfig> {
    CONFIG.get(0)
}

/// Counts a failure of this CPU's probes (userspace sums the CPUs' counts).
pub fn count_failure(reason: ProbeFailure) {
    if let Some(n) = FAILURES.get_ptr_mut(reason.index()) {
        unsafe { *n += 1 };
    }
}
