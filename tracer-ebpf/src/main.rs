//! The probes. Each entry point is a thin wrapper around a `try_*` function; all of them
//! write fixed-size records from `tracer-common` into one ring buffer and count every
//! record that could not be reserved in `LOST`.
//!
//! Only traced processes produce events: a process is traced when userspace put its tgid
//! in `TRACED` (`--pid`, `-- COMMAND`), when a traced thread forked it, or, in
//! system-wide mode, when it first calls a probed MPI/PVM function or procedure.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::{pt_regs, task_struct, BPF_F_MMAPABLE},
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes, bpf_probe_read_user, generated,
        generated::bpf_find_vma, generated::bpf_get_attach_cookie,
        generated::bpf_get_current_task_btf, generated::bpf_send_signal,
        generated::bpf_task_pt_regs,
    },
    macros::{map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
    EbpfContext,
};
use core::{
    ffi::c_void,
    ptr::{read_volatile, write_volatile},
};
use tracer_common::{
    call, clock_state, count_mode, dtype_mode, flavor, held, kind, status_mode, CallFrame,
    CallLayout, CallPairRecord, CallRecord, CallResult, CallReturnRecord, EventHeader, ExecRecord,
    ExitRecord, FlavorConfig, ForkRecord, FutexPairRecord, FutexRecord, HandleArrayRecord,
    ProbeConfig, Slot, SlotCursor, StatusArrayRecord, SwitchRecord, ThreadClock, ThreadState,
    WakeRecord, ARG_IP, ARRAY_CHUNK, ARRAY_MAX_CHUNKS, MAX_CALL_DEPTH, NO_ARG, SLOT_BYTES,
    STOLEN_UNKNOWN, THREAD_SLOTS_LEN, UNSET, UNSET32,
};

/// Default ring size; userspace may change it at load time (`--buffer-mib`).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);
/// Every CPU's run of slots, one run after the other, and where each CPU stands in its
/// run (userspace sizes both at load time and maps them into its memory).
#[map]
static SLOTS: Array<Slot> = Array::with_max_entries(1, BPF_F_MMAPABLE);
#[map]
static CURSORS: Array<SlotCursor> = Array::with_max_entries(1, BPF_F_MMAPABLE);
#[map]
static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: bytes of records written, to wake the reader every `wakeup_bytes`.
#[map]
static WRITTEN: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Traced tgids (and the tids of threads forked by traced threads).
#[map]
static TRACED: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);
/// Per traced thread: its CPU clock and the calls in progress (read again at their exit).
/// A thread's state is in `THREAD_SLOTS` at its id's index when that slot was free when
/// the probes met the thread, else in `THREADS`. The array comes first because the
/// verifier inlines an array lookup, while a hash lookup hashes the key and walks a
/// bucket: two per probed call, 2.6 % of a traced loop of `MPI_Comm_rank`.
#[map]
static THREAD_SLOTS: Array<ThreadState> = Array::with_max_entries(THREAD_SLOTS_LEN, 0);
#[map]
static THREADS: HashMap<u32, ThreadState> = HashMap::with_max_entries(65536, 0);
/// The slots of `THREAD_SLOTS` in use, and by which thread: claimed by inserting here.
#[map]
static SLOT_OWNERS: HashMap<u32, u32> = HashMap::with_max_entries(THREAD_SLOTS_LEN, 0);
/// `bpf_map_update_elem` flag: only if the key is not there yet.
const BPF_NOEXIST: u64 = 1;
#[map]
static CONFIG: Array<ProbeConfig> = Array::with_max_entries(1, 0);
/// Traced processes to stop after each dlopen (userspace's choice: those that map no
/// MPI/PVM library yet, such as a Python interpreter before it imports mpi4py).
#[map]
static HOLD_ON_LOAD: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);
#[map]
static LAYOUTS: Array<CallLayout> = Array::with_max_entries(call::TABLE_SIZE, 0);
#[map]
static FLAVORS: Array<FlavorConfig> = Array::with_max_entries(flavor::COUNT, 0);
/// Per CPU: the top of the user stack the futex probe scans for a call site (too big for
/// the 512-byte BPF stack).
#[map]
static STACK_WORDS: PerCpuArray<[u64; SCAN_WORDS]> = PerCpuArray::with_max_entries(1, 0);

const SIGSTOP: u32 = 19;
/// Pointers below this are sentinels (MPI_STATUS_IGNORE is 0 in Open MPI, 1 in MPICH).
const MIN_POINTER: u64 = 4096;
const EMPTY_FRAME: CallFrame = CallFrame {
    call: 0,
    flavor: 0,
    count: 0,
    bias: 0,
    handle_out: 0,
    out: 0,
    status: [0; 3],
    site: 0,
};
const EMPTY_HEADER: EventHeader = EventHeader {
    ts_ns: 0,
    cpu_ns: 0,
    tgid: 0,
    tid: 0,
    kind: 0,
    call: 0,
    cpu: 0,
};
/// A call record with nothing set: where every call record starts.
static UNSET_CALL: CallRecord = CallRecord::unset(EMPTY_HEADER);
const NO_FUTEX: FutexRecord = FutexRecord {
    header: EMPTY_HEADER,
    uaddr: 0,
    op: 0,
    val: 0,
    ret: 0,
    site: 0,
};
static EMPTY_FUTEX: FutexRecord = NO_FUTEX;
static EMPTY_HANDLE_ARRAY: HandleArrayRecord = HandleArrayRecord {
    header: EMPTY_HEADER,
    first: 0,
    total: 0,
    values: [0; ARRAY_CHUNK],
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
};

// ---------------------------------------------------------------------------------------
// Shared helpers

fn config() -> Option<&'static ProbeConfig> {
    CONFIG.get(0)
}

fn current_ids() -> (u32, u32) {
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
fn known_thread(tid: u32) -> Option<&'static mut ThreadState> {
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
fn new_thread(tid: u32) -> Option<&'static mut ThreadState> {
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
    let _ = THREADS.insert(&tid, &NEW_THREAD, 0);
    THREADS.get_ptr_mut(&tid).map(|t| unsafe { &mut *t })
}

/// Forgets an exiting thread: frees its slot or removes its entry (both, in case
/// userspace also gave it an entry when it attached).
fn forget_thread(tid: u32) {
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
fn traced_thread(tgid: u32, tid: u32) -> Option<&'static mut ThreadState> {
    match known_thread(tid) {
        Some(t) => Some(t),
        None if is_traced(tgid) => new_thread(tid),
        None => None,
    }
}

/// [`traced_thread`] for uprobes, which in system-wide mode also admit new processes.
fn uprobe_thread(tgid: u32, tid: u32) -> Option<&'static mut ThreadState> {
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
            let _ = TRACED.insert(&tgid, &1, 0);
            true
        }
        _ => false,
    }
}

fn count_lost() {
    if let Some(n) = LOST.get_ptr_mut(0) {
        unsafe { *n += 1 };
    }
}

/// The current thread's CPU time as the kernel counts it (`se.sum_exec_runtime`), when
/// BTF told userspace where it is. It is exact at a context switch and lags by at most a
/// scheduler tick in between.
fn kernel_cpu_time() -> Option<u64> {
    let off = config()?.task_cpu_time;
    if off == 0 {
        return None;
    }
    let task = unsafe { bpf_get_current_task() } as *const u8;
    unsafe { bpf_probe_read_kernel(task.add(off as usize) as *const u64) }.ok()
}

/// The time the hypervisor has stolen from this CPU, as the kernel's run queue counts
/// it (it leaves that time out of every thread's CPU time); None without BTF for it.
fn cpu_stolen_ns() -> Option<u64> {
    let c = config()?;
    if c.task_cfs_rq == 0 {
        return None;
    }
    // The current task's run queue is this CPU's.
    let task = unsafe { bpf_get_current_task() } as *const u8;
    unsafe {
        let cfs_rq: *const u8 =
            bpf_probe_read_kernel(task.add(c.task_cfs_rq as usize) as _).ok()?;
        let rq: *const u8 = bpf_probe_read_kernel(cfs_rq.add(c.cfs_rq_rq as usize) as _).ok()?;
        bpf_probe_read_kernel(rq.add(c.rq_stolen as usize) as *const u64).ok()
    }
}

/// Starts a slice of the thread's time on this CPU at `now`.
fn start_slice(c: &mut ThreadClock, now: u64) {
    c.slice_start_ns = now;
    c.stolen_at_start_ns = cpu_stolen_ns().unwrap_or(STOLEN_UNKNOWN);
}

/// Check the clock against the kernel's counts at least this often while a thread runs.
const RECHECK_NS: u64 = 1_000_000;

/// The current thread's CPU time: the time since its switch-in added to its CPU time at
/// that switch, checked against the kernel's counts at the slice's first event and then
/// every [`RECHECK_NS`]. Those counts correct two errors of the plain estimate:
/// - time the hypervisor stole from the CPU, which the kernel leaves out of CPU time;
/// - switch events the probes missed (a tracepoint program is skipped while another BPF
///   program holds the CPU's recursion guard, and syscall tracepoints can be
///   preempted): a thread whose switch-out and switch-in were both missed looks as if
///   it ran all the while. The kernel's count (`sum_exec_runtime`), which lags a running
///   thread by at most a tick, bounds the estimate from both sides.
///
/// Between checks the clock only moves with the time, and it never goes back.
fn cpu_clock(c: &mut ThreadClock, tgid: u32, now: u64) -> u64 {
    if c.tgid == 0 {
        c.tgid = tgid;
    }
    if c.running == clock_state::OFF_CPU {
        // It is running now, so its switch-in was missed (or this is its first event).
        c.running = clock_state::RUNNING;
        start_slice(c, now);
    }
    let elapsed = now.saturating_sub(c.slice_start_ns);
    let mut cpu = c.on_cpu_ns + elapsed;
    if c.running == clock_state::CHECKED && elapsed < RECHECK_NS {
        c.last_ns = cpu;
        return cpu;
    }
    c.running = clock_state::CHECKED;
    let stolen_at_start = c.stolen_at_start_ns;
    start_slice(c, now);
    if stolen_at_start != STOLEN_UNKNOWN && c.stolen_at_start_ns != STOLEN_UNKNOWN {
        cpu -= c
            .stolen_at_start_ns
            .saturating_sub(stolen_at_start)
            .min(elapsed);
    }
    if let Some(k) = kernel_cpu_time() {
        let lag = config().map_or(0, |c| c.kernel_clock_lag_ns as u64);
        if lag != 0 {
            cpu = cpu.min(k + lag);
        }
        cpu = cpu.max(k);
    }
    cpu = cpu.max(c.last_ns);
    c.on_cpu_ns = cpu;
    c.last_ns = cpu;
    cpu
}

/// Header for an event of the current thread, whose state is `t`. A call entry the
/// thread holds back is written first, so the thread's records stay in order. (Inlined:
/// a BPF function takes at most five arguments, and the returned header is a sixth.)
#[inline(always)]
fn header(t: &mut ThreadState, kind: u16, call: u16, tgid: u32, tid: u32) -> EventHeader {
    write_held_entry(t);
    let now = unsafe { bpf_ktime_get_ns() };
    EventHeader {
        ts_ns: now,
        cpu_ns: cpu_clock(&mut t.clock, tgid, now),
        tgid,
        tid,
        kind,
        call,
        cpu: unsafe { bpf_get_smp_processor_id() },
    }
}

const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_FORCE_WAKEUP: u64 = 2;
/// Wake the reader each time a CPU has written another this much (a power of two),
/// unless userspace set `ProbeConfig::wakeup_bytes`; it also drains on a short timer.
/// Waking it for every record would make it preempt the traced threads all the time (and
/// each wakeup shows up as scheduler records of its own).
const WAKEUP_BYTES: u64 = 128 << 10;
/// Ring-buffer space of a record: an 8-byte header, then the record rounded up to 8.
const fn ring_size<T>() -> u64 {
    (8 + core::mem::size_of::<T>() as u64 + 7) & !7
}

/// A wakeup only when this CPU's records cross another multiple of the wakeup size.
/// (Waking for every record once 256 KiB waited, as the first version did, sent an
/// interrupt per record while the reader was behind: on this VM an APIC write that exits
/// to the hypervisor, about 1 us per record; docs/benchmarks.md. Waking once per 4 KiB a
/// CPU wrote while the reader was behind, the second version, still put 2.6 % of a
/// traced MPI loop's time in that APIC write: a reader that is behind is awake already.)
fn wakeup_flags(size: u64) -> u64 {
    // A per-CPU count of bytes written (an array lookup the verifier inlines) rather
    // than `bpf_ringbuf_query`, which reads the reader's position: a cache line the
    // reader's CPU keeps writing.
    let Some(written) = WRITTEN.get_ptr_mut(0) else {
        return BPF_RB_NO_WAKEUP;
    };
    let written = unsafe { &mut *written };
    let every = match config() {
        Some(c) if c.wakeup_bytes != 0 => c.wakeup_bytes as u64,
        _ => WAKEUP_BYTES,
    };
    let before = *written;
    *written += size;
    // `every` is a power of two: the count crossed a multiple of it when a bit at or
    // above it changed (cheaper than dividing).
    if before ^ *written >= every {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

/// Where a record is built: the next slot of this CPU or, when its slots are full or in
/// use, the ring buffer. A struct whose fields are set on both paths rather than an enum:
/// the compiler merges the two ways of filling a record, and the verifier rejects a
/// register that only one of them set.
struct Place<T: 'static> {
    record: *mut T,
    /// The CPU's cursor; null for a record in the ring.
    cursor: *mut SlotCursor,
    /// The slot's sequence number, or for the ring the flags to submit with.
    head_or_flags: u64,
}

impl<T> Place<T> {
    fn record(&mut self) -> &mut T {
        unsafe { &mut *self.record }
    }

    /// Hands the record to userspace.
    fn submit(self) {
        if self.cursor.is_null() {
            unsafe {
                generated::bpf_ringbuf_submit(self.record as *mut c_void, self.head_or_flags)
            };
            return;
        }
        unsafe {
            // Userspace reads the slots below the head: the record's stores must come
            // first. The compiler keeps them there (it cannot tell the two map values
            // apart, so it does not move stores past this volatile one; BPF has no fence
            // instruction), and x86-64 keeps stores in program order.
            write_volatile(&mut (*self.cursor).head, self.head_or_flags + 1);
            write_volatile(&mut (*self.cursor).busy, 0);
        }
    }
}

/// A place for a record of type `T`; None (and counted in `LOST`) when there is none.
fn reserve<T: 'static>() -> Option<Place<T>> {
    if core::mem::size_of::<T>() <= SLOT_BYTES {
        if let Some(place) = next_slot::<T>() {
            return Some(place);
        }
    }
    let flags = wakeup_flags(ring_size::<T>());
    match EVENTS.reserve::<T>(0) {
        Some(mut entry) => Some(Place {
            record: entry.as_mut_ptr(),
            cursor: core::ptr::null_mut(),
            head_or_flags: flags,
        }),
        None => {
            count_lost();
            None
        }
    }
}

/// This CPU's next slot, unless userspace has not read its slots yet or another program
/// on this CPU is filling one (this program interrupted it, or it was preempted): the
/// `busy` mark is set and checked by programs of one CPU only, so plain stores do.
fn next_slot<T>() -> Option<Place<T>> {
    let per_cpu = config()?.slots_per_cpu;
    if per_cpu == 0 {
        return None;
    }
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let cursor = CURSORS.get_ptr_mut(cpu)?;
    unsafe {
        if read_volatile(&(*cursor).busy) != 0 {
            return None;
        }
        write_volatile(&mut (*cursor).busy, 1);
        let head = read_volatile(&(*cursor).head);
        let unread = head.wrapping_sub(read_volatile(&(*cursor).tail));
        let slot = if unread < per_cpu as u64 {
            SLOTS.get_ptr_mut(cpu * per_cpu + (head as u32 & (per_cpu - 1)))
        } else {
            None
        };
        if slot.is_some() && unread == per_cpu as u64 / 2 {
            nudge_reader();
        }
        match slot {
            Some(record) => Some(Place {
                record: record as *mut T,
                cursor,
                head_or_flags: head,
            }),
            None => {
                write_volatile(&mut (*cursor).busy, 0);
                None
            }
        }
    }
}

/// Wakes the reader when half of a CPU's slots are unread. It reads them every 50 ms,
/// which a CPU writing more records than that in 50 ms would outrun, and its records
/// would then go to the ring, at the ring's cost. Through the
/// ring, which is what the reader waits on. Only then: each wakeup is an interrupt (an
/// APIC write that exits to the hypervisor on a VM; a wakeup per 2,048 records was 1 %
/// of a traced loop of MPI_Comm_rank).
fn nudge_reader() {
    // From static memory: a header built on the stack is a `memset` (a byte loop).
    static NUDGE: EventHeader = EventHeader {
        kind: kind::SLOTS_NUDGE,
        ..EMPTY_HEADER
    };
    let _ = EVENTS.output::<EventHeader>(&NUDGE, BPF_RB_FORCE_WAKEUP);
}

fn emit<T: 'static>(record: &T) {
    if let Some(mut place) = reserve::<T>() {
        copy_words(place.record(), record);
        place.submit();
    }
}

/// Writes the entry record the thread held back in the hope of writing it with the
/// call's exit (`CallPairRecord`, `FutexPairRecord`), if it holds one.
fn write_held_entry(t: &mut ThreadState) {
    match t.held {
        held::CALL => emit(&t.held_entry),
        held::FUTEX => emit(&t.held_futex),
        _ => return,
    }
    t.held = held::NOTHING;
}

/// Copies a record word by word. A struct assignment between a map value and ring
/// memory (which the compiler cannot tell apart) is a call of compiler-builtins'
/// `memmove`, and zeroing a few fields one of its `memset`: in BPF both are loops over
/// bytes (3.5 % of a traced loop of MPI calls, more than the program's own code).
#[inline(always)]
fn copy_words<T>(dst: &mut T, src: &T) {
    const { assert!(core::mem::size_of::<T>() % 8 == 0) };
    let (d, s) = (dst as *mut T as *mut u64, src as *const T as *const u64);
    for i in 0..core::mem::size_of::<T>() / 8 {
        unsafe { core::ptr::write_volatile(d.add(i), core::ptr::read_volatile(s.add(i))) };
    }
}

/// `*src`, copied word by word ([`copy_words`]): where the compiler can see that a value
/// is mostly zeros, a plain copy becomes a `memset`.
#[inline(always)]
fn copy_of<T>(src: &T) -> T {
    let mut v = core::mem::MaybeUninit::<T>::uninit();
    // SAFETY: copy_words writes every byte of `v` (its size is a multiple of 8).
    unsafe {
        copy_words(&mut *v.as_mut_ptr(), src);
        v.assume_init()
    }
}

/// `*rec = CallRecord::unset(h)`, without a `memset` ([`copy_words`]).
#[inline(always)]
fn start_call_record(rec: &mut CallRecord, h: EventHeader) {
    copy_words(rec, &UNSET_CALL);
    rec.header = h;
}

/// `*dst = *addr` from user memory, or `*dst = unset` when `addr` cannot be read. The
/// kernel writes `dst` itself (a ring record): reading the value back right after the
/// helper wrote it stalls the CPU (its copy cannot be forwarded to a load; a quarter of
/// a traced MPI_Comm_rank's exit program went there).
#[inline(always)]
fn read_user_into<T: Copy>(dst: &mut T, addr: u64, unset: T) {
    let failed = addr < MIN_POINTER
        || unsafe {
            generated::bpf_probe_read_user(
                dst as *mut T as *mut c_void,
                core::mem::size_of::<T>() as u32,
                addr as *const c_void,
            )
        } != 0;
    if failed {
        *dst = unset;
    }
}

fn read_user<T>(addr: u64) -> Option<T> {
    if addr < MIN_POINTER {
        return None;
    }
    unsafe { bpf_probe_read_user(addr as *const T) }.ok()
}

// ---------------------------------------------------------------------------------------
// MPI, PVM and pthread calls: one entry and one exit program for every call; the cookie
// says which call and library family, the layout table says where each argument is.

fn arg(regs: &pt_regs, index: u8) -> u64 {
    match index {
        0 => regs.rdi,
        1 => regs.rsi,
        2 => regs.rdx,
        3 => regs.rcx,
        4 => regs.r8,
        5 => regs.r9,
        // x86-64 System V: at entry rsp points at the return address, then arguments 7..
        6..=13 => read_user::<u64>(regs.rsp + 8 * (index as u64 - 5)).unwrap_or(0),
        _ => 0,
    }
}

fn int_arg(regs: &pt_regs, index: u8) -> i32 {
    if index == NO_ARG {
        UNSET32
    } else {
        arg(regs, index) as i32
    }
}

fn handle_value(raw: u64, flavor: &FlavorConfig) -> u64 {
    if flavor.handle_size == 4 {
        raw & 0xffff_ffff
    } else {
        raw
    }
}

fn read_handle(addr: u64, flavor: &FlavorConfig) -> u64 {
    if flavor.handle_size == 4 {
        read_user::<u32>(addr).map(|v| v as u64).unwrap_or(0)
    } else {
        read_user::<u64>(addr).unwrap_or(0)
    }
}

fn element_size(dtype: u64, flavor: &FlavorConfig) -> i32 {
    match flavor.dtype_mode {
        dtype_mode::POINTER_TO_SIZE => read_user::<u64>(dtype + flavor.dtype_size_off as u64)
            .map(|s| s as i32)
            .unwrap_or(UNSET32),
        // Builtin MPICH handles (kind bits 30-31 == 01) carry the size in bits 8-15.
        dtype_mode::MPICH_HANDLE if (dtype as u32) >> 30 == 1 => ((dtype >> 8) & 0xff) as i32,
        dtype_mode::PVM_CODE => match dtype as u32 {
            1 => 1,
            2 | 9 => 2,
            3 | 4 | 10 => 4,
            5 | 6 | 8 | 11 => 8,
            7 => 16,
            _ => UNSET32,
        },
        _ => UNSET32,
    }
}

#[uprobe]
pub fn call_enter(ctx: ProbeContext) -> u32 {
    let _ = try_call_enter(&ctx);
    0
}

fn try_call_enter(ctx: &ProbeContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let call_id = cookie as u16 & 0xff;
    let flavor_id = (cookie >> 16) as u8;
    // An MPI/PVM call makes its process traced in system-wide mode; a pthread call (the
    // thread creation and join probes fire in every process) never does.
    let thread = if flavor_id == flavor::GLIBC_PTHREAD {
        traced_thread(tgid, tid)
    } else {
        uprobe_thread(tgid, tid)
    };
    let Some(thread) = thread else {
        return Ok(());
    };
    let layout = LAYOUTS.get(call_id as u32).ok_or(())?;
    let flavor = FLAVORS.get(flavor_id as u32).ok_or(())?;
    let regs = unsafe { &*ctx.regs };
    // The uprobe fires with rip at the symbol, so rip minus the symbol's address in the
    // file is where the library is loaded.
    let bias = regs.rip.wrapping_sub(cookie >> 32);

    // Call records carry the flavor in the high byte of `call`.
    let h = header(
        thread,
        kind::CALL_ENTER,
        call_id | ((flavor_id as u16) << 8),
        tgid,
        tid,
    );
    // A call that cannot block is built where it waits for its exit (`held_entry`).
    let hold = layout.cannot_block != 0
        && layout.array == NO_ARG
        && layout.peer2 == NO_ARG
        && layout.tag2 == NO_ARG;
    let mut local = UNSET_CALL;
    let rec = if hold {
        start_call_record(&mut thread.held_entry, h);
        &mut thread.held_entry
    } else {
        local.header = h;
        &mut local
    };
    rec.peer = int_arg(regs, layout.peer);
    rec.tag = int_arg(regs, layout.tag);
    rec.peer2 = int_arg(regs, layout.peer2);
    rec.tag2 = int_arg(regs, layout.tag2);
    rec.count = int_arg(regs, layout.count);
    if layout.comm == ARG_IP {
        rec.comm = regs.rip;
    } else if layout.comm != NO_ARG {
        rec.comm = handle_value(arg(regs, layout.comm), flavor);
    }
    if layout.dtype != NO_ARG {
        rec.elem_size = element_size(arg(regs, layout.dtype), flavor);
        if rec.elem_size != UNSET32 && rec.count != UNSET32 {
            rec.bytes = rec.elem_size as i64 * rec.count as i64;
        }
    }
    if layout.handle_in != NO_ARG {
        let a = arg(regs, layout.handle_in);
        // pthread calls: the lock's address is its identity; MPI: a pointer to a request.
        rec.handle = if flavor.handle_by_value != 0 {
            a
        } else if layout.handle_in_by_value != 0 {
            handle_value(a, flavor)
        } else {
            read_handle(a, flavor)
        };
    } else if layout.want_bias != 0 {
        rec.handle = bias;
    }
    let (count, header) = (rec.count, rec.header);
    let mut site = 0;
    if hold {
        // Written with the exit, unless another record of the thread comes first.
        thread.held = held::CALL;
    } else {
        // At the function's first instruction the return address is on top of the stack.
        // The exit record has it for free (the kernel puts it back in rip before the
        // return probe), but a call that can block may never return: one that hangs
        // keeps its site this way.
        site = read_user::<u64>(regs.rsp).unwrap_or(0);
        rec.site = site;
        emit(rec);
    }

    if layout.array != NO_ARG && count > 0 {
        let elem = if layout.array_elem == 0 {
            flavor.handle_size
        } else {
            layout.array_elem as u32
        };
        // Group_range_incl/excl: `count` triples of ints.
        let per_count = if layout.array_per_count == 0 {
            1
        } else {
            layout.array_per_count as u32
        };
        let total = (count as u32).saturating_mul(per_count);
        emit_handle_array(&header, arg(regs, layout.array), total, elem);
    }

    let mut frame = EMPTY_FRAME;
    frame.call = call_id;
    frame.flavor = flavor_id as u16;
    frame.count = count;
    frame.bias = bias;
    frame.site = site;
    if layout.handle_out != NO_ARG {
        frame.handle_out = arg(regs, layout.handle_out);
    }
    if layout.out != NO_ARG {
        frame.out = arg(regs, layout.out);
    }
    if layout.status != NO_ARG {
        frame.status[0] = arg(regs, layout.status);
        if layout.status_mode == status_mode::INT_POINTERS {
            frame.status[1] = arg(regs, layout.status + 1);
            frame.status[2] = arg(regs, layout.status + 2);
        }
    }
    push_frame(thread, &frame);
    Ok(())
}

fn emit_handle_array(h: &EventHeader, base: u64, total: u32, elem: u32) {
    let mut rec = copy_of(&EMPTY_HANDLE_ARRAY);
    rec.header = *h;
    rec.header.kind = kind::HANDLE_ARRAY;
    rec.total = total;
    for chunk in 0..ARRAY_MAX_CHUNKS {
        let first = chunk * ARRAY_CHUNK as u32;
        if first >= total {
            break;
        }
        rec.first = first;
        for j in 0..ARRAY_CHUNK {
            let i = first + j as u32;
            rec.values[j] = if i >= total {
                0
            } else if elem == 4 {
                read_user::<u32>(base + 4 * i as u64).unwrap_or(0) as u64
            } else {
                read_user::<u64>(base + 8 * i as u64).unwrap_or(0)
            };
        }
        emit(&rec);
    }
}

fn push_frame(t: &mut ThreadState, frame: &CallFrame) {
    let depth = t.depth as usize;
    if depth < MAX_CALL_DEPTH {
        t.frames[depth] = *frame;
    }
    // Count frames beyond MAX_CALL_DEPTH too, so the matching exits pop them.
    t.depth += 1;
}

fn pop_frame(t: &mut ThreadState) -> Option<CallFrame> {
    if t.depth == 0 {
        return None;
    }
    t.depth -= 1;
    let depth = t.depth as usize;
    if depth < MAX_CALL_DEPTH {
        Some(t.frames[depth])
    } else {
        None
    }
}

#[uretprobe]
pub fn call_exit(ctx: RetProbeContext) -> u32 {
    let _ = try_call_exit(&ctx);
    0
}

fn try_call_exit(ctx: &RetProbeContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    // Only threads of traced processes have frames (the entry probe admitted them), so
    // the thread's state is the filter: no lookup in TRACED.
    let thread = known_thread(tid).ok_or(())?;
    let frame = pop_frame(thread).ok_or(())?;
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let call_id = cookie as u16 & 0xff;
    if frame.call != call_id {
        return Err(());
    }
    let layout = LAYOUTS.get(call_id as u32).ok_or(())?;
    let flavor = FLAVORS.get(frame.flavor as u32).ok_or(())?;
    let ret: u64 = ctx.ret();
    // The kernel put the return address back in rip before running this program.
    let site = unsafe { (*ctx.regs).rip };
    // Nothing of the thread was written since this call's entry was held: the two go out
    // as one record (taken out of `thread` first, or `header` would write it alone).
    let paired = thread.held == held::CALL && thread.held_entry.header.call & 0xff == call_id;
    if paired {
        thread.held = held::NOTHING;
    }
    let h = header(
        thread,
        kind::CALL_EXIT,
        call_id | (frame.flavor << 8),
        tgid,
        tid,
    );
    if paired {
        // Built in place, field by field ([`copy_words`]).
        let Some(mut place) = reserve::<CallPairRecord>() else {
            return Ok(());
        };
        let r = place.record();
        let e = &thread.held_entry;
        copy_words(&mut r.header, &e.header);
        r.header.kind = kind::CALL_PAIR;
        r.comm = e.comm;
        r.handle = e.handle;
        r.bytes = e.bytes;
        r.peer = e.peer;
        r.tag = e.tag;
        r.count = e.count;
        r.elem_size = e.elem_size;
        r.exit_ts_ns = h.ts_ns;
        r.exit_cpu_ns = h.cpu_ns;
        call_result(&mut r.result, ret, site, h.cpu, &frame, layout, flavor);
        place.submit();
        return Ok(());
    }
    if layout.status_mode == status_mode::INDEX_ARRAY {
        // Waitsome/Testsome: the indices of the requests that completed, written before
        // the exit so that userspace reads them while the call is still open.
        if let Some(n) = read_user::<i32>(frame.out) {
            if n > 0 {
                emit_handle_array(&h, frame.status[0], n as u32, 4);
            }
        }
    }
    let Some(mut place) = reserve::<CallReturnRecord>() else {
        return Ok(());
    };
    let r = place.record();
    r.header = h;
    r.header.kind = kind::CALL_RETURN;
    call_result(&mut r.result, ret, site, h.cpu, &frame, layout, flavor);
    place.submit();
    if layout.status_mode == status_mode::MPI_STATUS_ARRAY && frame.count > 0 {
        emit_status_array(&h, frame.status[0], frame.count as u32, flavor);
    }
    Ok(())
}

/// Fills what a call's exit learns (in the ring): its return value, what it wrote
/// through the pointers its entry kept in `frame`, and its site. (Inlined: a BPF function
/// takes at most five arguments.)
#[inline(always)]
fn call_result(
    r: &mut CallResult,
    ret: u64,
    site: u64,
    cpu: u32,
    frame: &CallFrame,
    layout: &CallLayout,
    flavor: &FlavorConfig,
) {
    // PVM, MPI and pthread calls all return int.
    r.ret = ret as i32;
    r.site = site;
    r.cpu = cpu;
    r._reserved = 0;
    r.handle = 0;
    if frame.handle_out != 0 {
        if flavor.handle_size == 4 {
            // Little-endian: the low half of `handle`.
            let low = unsafe { &mut *(&mut r.handle as *mut u64 as *mut u32) };
            read_user_into(low, frame.handle_out, 0);
        } else {
            read_user_into(&mut r.handle, frame.handle_out, 0);
        }
    }
    read_user_into(&mut r.out, frame.out, UNSET32);
    r.peer = UNSET32;
    r.tag = UNSET32;
    r.bytes = UNSET;
    match layout.status_mode {
        status_mode::MPI_STATUS => read_status(frame.status[0], flavor, r),
        status_mode::INT_POINTERS => {
            read_user_into(&mut r.peer, frame.status[0], UNSET32);
            read_user_into(&mut r.tag, frame.status[1], UNSET32);
            if let Some(v) = read_user::<i32>(frame.status[2]) {
                r.bytes = v as i64;
            }
        }
        status_mode::PVM_RBUF if r.ret > 0 && flavor.rbuf_vaddr != 0 => {
            if let Some(msg) = read_user::<u64>(frame.bias.wrapping_add(flavor.rbuf_vaddr)) {
                read_user_into(&mut r.peer, msg + flavor.pmsg_src_off as u64, UNSET32);
                read_user_into(&mut r.tag, msg + flavor.pmsg_tag_off as u64, UNSET32);
                if let Some(v) = read_user::<i32>(msg + flavor.pmsg_len_off as u64) {
                    r.bytes = v as i64;
                }
            }
        }
        _ => {}
    }
}

/// The message size an MPI_Status at `status` says.
fn status_bytes(status: u64, flavor: &FlavorConfig) -> i64 {
    let at = status + flavor.status_count_off as u64;
    match flavor.count_mode {
        count_mode::SIZE_T => read_user::<u64>(at).map(|v| v as i64).unwrap_or(UNSET),
        count_mode::MPICH_SPLIT => match read_user::<u64>(at) {
            Some(v) => mpich_count(v),
            None => UNSET,
        },
        _ => UNSET,
    }
}

/// MPICH keeps a status's byte count in two words: the low 32 bits, then the high bits
/// shifted left by one above the "cancelled" bit.
fn mpich_count(v: u64) -> i64 {
    ((v & 0xffff_ffff) | (((v >> 32) >> 1) << 32)) as i64
}

/// The source, tag and size an MPI_Status says, written by the kernel straight into the
/// ring record ([`read_user_into`]).
fn read_status(status: u64, flavor: &FlavorConfig, r: &mut CallResult) {
    if status < MIN_POINTER {
        return;
    }
    read_user_into(
        &mut r.peer,
        status + flavor.status_source_off as u64,
        UNSET32,
    );
    read_user_into(&mut r.tag, status + flavor.status_tag_off as u64, UNSET32);
    let count = status + flavor.status_count_off as u64;
    match flavor.count_mode {
        count_mode::SIZE_T => read_user_into(&mut r.bytes, count, UNSET),
        count_mode::MPICH_SPLIT => {
            if let Some(v) = read_user::<u64>(count) {
                r.bytes = mpich_count(v);
            }
        }
        _ => {}
    }
}

fn emit_status_array(h: &EventHeader, base: u64, total: u32, flavor: &FlavorConfig) {
    if base < MIN_POINTER {
        return;
    }
    let mut rec = StatusArrayRecord {
        header: *h,
        first: 0,
        total,
        source: [UNSET32; ARRAY_CHUNK],
        tag: [UNSET32; ARRAY_CHUNK],
        bytes: [UNSET; ARRAY_CHUNK],
    };
    rec.header.kind = kind::STATUS_ARRAY;
    let size = flavor.status_size as u64;
    for chunk in 0..ARRAY_MAX_CHUNKS {
        let first = chunk * ARRAY_CHUNK as u32;
        if first >= total {
            break;
        }
        rec.first = first;
        for j in 0..ARRAY_CHUNK {
            let i = first + j as u32;
            if i >= total {
                rec.source[j] = UNSET32;
                rec.tag[j] = UNSET32;
                rec.bytes[j] = UNSET;
                continue;
            }
            let s = base + size * i as u64;
            rec.source[j] =
                read_user::<i32>(s + flavor.status_source_off as u64).unwrap_or(UNSET32);
            rec.tag[j] = read_user::<i32>(s + flavor.status_tag_off as u64).unwrap_or(UNSET32);
            rec.bytes[j] = status_bytes(s, flavor);
        }
        emit(&rec);
    }
}

// ---------------------------------------------------------------------------------------
// Selected procedures (--func): the cookie is the probe id.

#[uprobe]
pub fn func_enter(ctx: ProbeContext) -> u32 {
    func_event(ctx.as_ptr(), kind::FUNC_ENTER);
    0
}

#[uretprobe]
pub fn func_exit(ctx: RetProbeContext) -> u32 {
    func_event(ctx.as_ptr(), kind::FUNC_EXIT);
    0
}

fn func_event(ctx: *mut core::ffi::c_void, kind: u16) {
    let (tgid, tid) = current_ids();
    let Some(thread) = uprobe_thread(tgid, tid) else {
        return;
    };
    let probe = unsafe { bpf_get_attach_cookie(ctx) } as u16;
    emit(&header(thread, kind, probe, tgid, tid));
}

// ---------------------------------------------------------------------------------------
// Tracepoints. Field offsets come from tracefs via CONFIG.

fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, ()> {
    unsafe { ctx.read_at::<T>(offset as usize) }.map_err(|_| ())
}

/// `prev_state` bits of a thread that has exited (the kernel's `exit_state` values, as
/// `sched_switch` reports them: a reaped thread, a process waiting for its parent).
const EXIT_DEAD: i64 = 0x10;
const EXIT_ZOMBIE: i64 = 0x20;

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let _ = try_sched_switch(&ctx);
    0
}

fn try_sched_switch(ctx: &TracePointContext) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let prev: u32 = field(ctx, c.switch_prev_pid)?;
    let next: u32 = field(ctx, c.switch_next_pid)?;
    let now = unsafe { bpf_ktime_get_ns() };
    let cpu = unsafe { bpf_get_smp_processor_id() };
    if let Some(thread) = known_thread(prev) {
        // `prev` is the current task: a call entry it holds goes before its switch-out.
        write_held_entry(thread);
        let clock = &mut thread.clock;
        // `prev` is the current task; the scheduler has just brought its CPU time up to
        // date, so the kernel's count is exact here.
        match kernel_cpu_time() {
            Some(k) => clock.on_cpu_ns = k.max(clock.last_ns),
            None if clock.running != clock_state::OFF_CPU => {
                clock.on_cpu_ns += now.saturating_sub(clock.slice_start_ns)
            }
            None => {}
        }
        clock.last_ns = clock.on_cpu_ns;
        clock.running = clock_state::OFF_CPU;
        let state: i64 = field(ctx, c.switch_prev_state)?;
        emit(&SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns: clock.on_cpu_ns,
                tgid: current_ids().0,
                tid: prev,
                kind: kind::SWITCH_OUT,
                call: 0,
                cpu,
            },
            prev_state: state,
        });
        if state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
            // Its last switch: the thread never runs again.
            forget_thread(prev);
        }
    }
    if let Some(thread) = known_thread(next) {
        let clock = &mut thread.clock;
        clock.running = clock_state::RUNNING;
        start_slice(clock, now);
        emit(&SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns: clock.on_cpu_ns,
                tgid: clock.tgid,
                tid: next,
                kind: kind::SWITCH_IN,
                call: 0,
                cpu,
            },
            prev_state: 0,
        });
    }
    Ok(())
}

#[tracepoint]
pub fn sched_waking(ctx: TracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP);
    0
}

#[tracepoint]
pub fn sched_wakeup_new(ctx: TracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP_NEW);
    0
}

fn try_wakeup(ctx: &TracePointContext, kind: u16) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let wakee: u32 = field(ctx, c.waking_pid)?;
    let wakee_tgid = match known_thread(wakee) {
        Some(t) => t.clock.tgid,
        None => return Ok(()),
    };
    let (tgid, tid) = current_ids();
    // The waker may be an untraced thread or an interrupt: stamp it without giving it a
    // clock.
    let h = if let Some(thread) = traced_thread(tgid, tid) {
        header(thread, kind, 0, tgid, tid)
    } else {
        EventHeader {
            ts_ns: unsafe { bpf_ktime_get_ns() },
            cpu_ns: 0,
            tgid,
            tid,
            kind,
            call: 0,
            cpu: unsafe { bpf_get_smp_processor_id() },
        }
    };
    emit(&WakeRecord {
        header: h,
        wakee_tid: wakee,
        wakee_tgid,
        target_cpu: field(ctx, c.waking_target_cpu)?,
        _reserved: 0,
    });
    Ok(())
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let _ = try_fork(&ctx);
    0
}

fn try_fork(ctx: &TracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let child: u32 = field(ctx, c.fork_child_pid)?;
    // The child may be a thread or a process: either way its id joins the traced set, and
    // its clock starts when it first runs.
    let _ = TRACED.insert(&child, &1, 0);
    let _ = new_thread(child);
    emit(&ForkRecord {
        header: header(thread, kind::FORK, 0, tgid, tid),
        child_tid: child,
        _reserved: 0,
    });
    Ok(())
}

#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let _ = try_exec(&ctx);
    0
}

fn try_exec(ctx: &TracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    // Before the reservation: the header may write a held call entry.
    let h = header(thread, kind::EXEC, 0, tgid, tid);
    let Some(mut rec) = EVENTS.reserve::<ExecRecord>(0) else {
        count_lost();
        return Ok(());
    };
    let r = unsafe { &mut *rec.as_mut_ptr() };
    r.header = h;
    r.old_tid = field(ctx, c.exec_old_pid).unwrap_or(0);
    // __data_loc: low 16 bits offset from the record start, high 16 bits length.
    let loc: u32 = field(ctx, c.exec_filename).unwrap_or(0);
    let src = unsafe { (ctx.as_ptr() as *const u8).add((loc & 0xffff) as usize) };
    r.filename_len = match unsafe { bpf_probe_read_kernel_str_bytes(src, &mut r.filename) } {
        Ok(s) => s.len() as u32,
        Err(_) => 0,
    };
    // Wake the reader now: with hold_on_exec the process waits for it.
    rec.submit(BPF_RB_FORCE_WAKEUP);
    if c.hold_on_exec != 0 {
        // Userspace attaches the procedure probes to the new program, then sends SIGCONT.
        unsafe { bpf_send_signal(SIGSTOP) };
    }
    Ok(())
}

/// dlopen returned (a uretprobe on the C library's dlopen, in every process). In a process
/// userspace holds, the library and what it needs are mapped now but none of their code
/// ran: stop the process and tell userspace, which probes the MPI/PVM libraries among
/// them before the program can call one (mpi4py's MPI module calls MPI_Init as it is
/// imported), then lets it go on.
#[uretprobe]
pub fn library_loaded(ctx: RetProbeContext) -> u32 {
    let _ = try_library_loaded(&ctx);
    0
}

fn try_library_loaded(ctx: &RetProbeContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    if unsafe { HOLD_ON_LOAD.get(&tgid) }.is_none() {
        return Ok(());
    }
    let handle: u64 = ctx.ret();
    if handle == 0 {
        return Ok(()); // dlopen failed: nothing new is mapped
    }
    let header = EventHeader {
        ts_ns: unsafe { bpf_ktime_get_ns() },
        cpu_ns: 0,
        tgid,
        tid,
        kind: kind::LIBRARY_LOADED,
        call: 0,
        cpu: unsafe { bpf_get_smp_processor_id() },
    };
    // Straight to the reader (it must act before the process can go on).
    if EVENTS
        .output::<EventHeader>(&header, BPF_RB_FORCE_WAKEUP)
        .is_err()
    {
        count_lost();
        return Ok(()); // not stopped: nobody would know to let it go on
    }
    unsafe { bpf_send_signal(SIGSTOP) };
    Ok(())
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let _ = try_exit(&ctx);
    0
}

fn try_exit(ctx: &TracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let group_dead: u8 = field(ctx, c.exit_group_dead).unwrap_or(0);
    emit(&ExitRecord {
        header: header(thread, kind::EXIT, 0, tgid, tid),
        group_dead: group_dead as u32,
        _reserved: 0,
    });
    // The state lives on until the thread's last switch-out (`try_sched_switch`): after
    // this tracepoint the exiting thread still wakes its joiner (the kernel's futex wake
    // of `clear_child_tid`), and freeing the state here made that wakeup claim a fresh
    // one that nothing freed again, left to whichever thread later got the same id.
    if tid != tgid {
        let _ = TRACED.remove(&tid);
    }
    if group_dead != 0 {
        let _ = TRACED.remove(&tgid);
    }
    Ok(())
}

#[tracepoint]
pub fn sys_enter_futex(ctx: TracePointContext) -> u32 {
    let _ = try_futex(&ctx, kind::FUTEX_ENTER);
    0
}

#[tracepoint]
pub fn sys_exit_futex(ctx: TracePointContext) -> u32 {
    let _ = try_futex(&ctx, kind::FUTEX_EXIT);
    0
}

fn try_futex(ctx: &TracePointContext, kind: u16) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    // An enter still held at the exit: the call did not sleep (a wait that sleeps writes
    // its enter before its switch-out), and the two go out as one record.
    let paired = kind == tracer_common::kind::FUTEX_EXIT && thread.held == held::FUTEX;
    if paired {
        thread.held = held::NOTHING;
    }
    let h = header(thread, kind, 0, tgid, tid);
    if kind == tracer_common::kind::FUTEX_ENTER {
        let call_site = innermost_call_site(thread);
        // Built where it waits for the exit.
        let rec = &mut thread.held_futex;
        copy_words(rec, &EMPTY_FUTEX);
        rec.header = h;
        rec.uaddr = field(ctx, c.futex_uaddr)?;
        rec.op = field::<u64>(ctx, c.futex_op)? as u32;
        rec.val = field::<u64>(ctx, c.futex_val)? as u32;
        if tracer_common::futex_waits(rec.op) {
            // Inside a probed call (pthread_join, an MPI call), the program's line is
            // that call's: its return probe hid the return address from the scan.
            rec.site = match call_site {
                0 => futex_site(),
                site => site,
            };
        }
        thread.held = held::FUTEX;
        return Ok(());
    }
    let ret = field(ctx, c.futex_ret)?;
    if !paired {
        let mut rec = copy_of(&EMPTY_FUTEX);
        rec.header = h;
        rec.ret = ret;
        emit(&rec);
        return Ok(());
    }
    let Some(mut place) = reserve::<FutexPairRecord>() else {
        return Ok(());
    };
    let r = place.record();
    copy_words(&mut r.enter, &thread.held_futex);
    r.enter.header.kind = tracer_common::kind::FUTEX_PAIR;
    r.exit_ts_ns = h.ts_ns;
    r.exit_cpu_ns = h.cpu_ns;
    r.ret = ret;
    r.exit_cpu = h.cpu;
    r._reserved = 0;
    place.submit();
    Ok(())
}

/// 64-bit words of user stack scanned above the stack pointer for a call site (glibc's
/// condition-variable wait needs between 16 and 32).
const SCAN_WORDS: usize = 64;
/// Without the stack's mapping, words closer than this to the stack pointer are taken to
/// point into the stack (saved frame pointers, addresses of locals), not at code.
const STACK_SPAN: u64 = 1 << 20;
/// Without libc's mapping, return addresses closer than this to the syscall instruction
/// are taken to be in the same object (libc; its text is 1.3 MiB).
const LIBRARY_SPAN: u64 = 2 << 20;
/// Highest user-space address on x86-64 (4-level paging; 5-level is larger but rare).
const USER_TOP: u64 = 0x0000_7fff_ffff_ffff;

/// A user code address for the futex syscall being entered. The syscall instruction sits
/// in libc, which says little; the first caller outside libc is what a user wants.
/// `bpf_get_stack(BPF_F_USER_STACK)` walks frame pointers, and Debian's libc has none: on
/// threads_pingpong no frame of 1,198 futex waits and wakes got out of libc. So the top
/// of the user stack is scanned instead: the first word that is outside libc's code
/// mapping and the thread's stack mapping (`bpf_find_vma`) and just after a call
/// instruction is taken as the return address into the caller (threads_pingpong: every
/// site on the line of the program's pthread call; docs/design-decisions.md). Bounded:
/// `SCAN_WORDS` words read at once, and one 8-byte read of code per candidate. Falls back
/// to the syscall instruction's address; 0 if the user registers cannot be read.
/// The call site of the innermost probed call the thread is in, if it read one (0 if none).
fn innermost_call_site(t: &ThreadState) -> u64 {
    let depth = t.depth as usize;
    if depth > MAX_CALL_DEPTH {
        return 0;
    }
    depth
        .checked_sub(1)
        .and_then(|i| t.frames.get(i))
        .map_or(0, |f| f.site)
}

fn futex_site() -> u64 {
    let task = unsafe { bpf_get_current_task_btf() };
    let regs = unsafe { bpf_task_pt_regs(task) } as *const pt_regs;
    if regs.is_null() {
        return 0;
    }
    let Ok(ip) = (unsafe { bpf_probe_read_kernel(&(*regs).rip) }) else {
        return 0;
    };
    let Ok(sp) = (unsafe { bpf_probe_read_kernel(&(*regs).rsp) }) else {
        return ip;
    };
    // The code mapping holding the syscall instruction (libc's text) and the thread's
    // stack mapping; if the process's memory map is busy, everything within LIBRARY_SPAN
    // of the instruction and STACK_SPAN of the stack pointer.
    let libc = mapping_bounds(task, ip, LIBRARY_SPAN);
    let stack = mapping_bounds(task, sp, STACK_SPAN);
    let Some(buf) = STACK_WORDS.get_ptr_mut(0) else {
        return ip;
    };
    let words = unsafe { &mut *buf };
    // The whole window, or, near the top of a stack, its first eighth.
    let valid = if read_user_words(words, sp, SCAN_WORDS) {
        SCAN_WORDS
    } else if read_user_words(words, sp, SCAN_WORDS / 8) {
        SCAN_WORDS / 8
    } else {
        return ip;
    };
    for i in 0..SCAN_WORDS {
        if i >= valid {
            break;
        }
        let v = words[i];
        if v < MIN_POINTER
            || v > USER_TOP
            || (v >= libc[0] && v < libc[1])
            || (v >= stack[0] && v < stack[1])
        {
            continue;
        }
        if follows_call(v) {
            return v;
        }
    }
    ip
}

/// The bounds of the memory mapping of the current process that holds `addr`, or `addr`
/// ± `span` when the kernel could not look (its memory map lock was taken).
fn mapping_bounds(task: *mut task_struct, addr: u64, span: u64) -> [u64; 2] {
    let mut bounds: [u64; 2] = [addr.saturating_sub(span), addr.saturating_add(span + 1)];
    unsafe {
        bpf_find_vma(
            task,
            addr,
            vma_bounds as *mut core::ffi::c_void,
            &mut bounds as *mut [u64; 2] as *mut core::ffi::c_void,
            0,
        )
    };
    bounds
}

/// `bpf_find_vma` callback: copies the mapping's bounds (`vm_start`, `vm_end`, the first
/// two fields of `struct vm_area_struct`) to `out`.
#[inline(never)]
extern "C" fn vma_bounds(
    _task: *mut core::ffi::c_void,
    vma: *mut core::ffi::c_void,
    out: *mut core::ffi::c_void,
) -> i64 {
    if let Ok(bounds) = unsafe { bpf_probe_read_kernel(vma as *const [u64; 2]) } {
        unsafe { *(out as *mut [u64; 2]) = bounds };
    }
    0
}

fn read_user_words(words: &mut [u64; SCAN_WORDS], sp: u64, n: usize) -> bool {
    let dst = words.as_mut_ptr() as *mut core::ffi::c_void;
    let ret = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            dst,
            (n * 8) as u32,
            sp as *const core::ffi::c_void,
        )
    };
    ret == 0
}

/// Whether the instruction before `ret` is a call (x86-64): `call rel32`, or `call` with a
/// register or memory operand (opcode FF /2) of 2, 3, 4, 6 or 7 bytes.
fn follows_call(ret: u64) -> bool {
    let Some(code) = read_user::<[u8; 8]>(ret - 8) else {
        return false;
    };
    // FF /2: reg field of ModRM is 2; `len` is the instruction length, `m` its ModRM byte.
    let ff2 = |len: usize, mod_bits: u8| {
        let m = code[8 - len + 1];
        code[8 - len] == 0xff && (m >> 3) & 7 == 2 && m >> 6 == mod_bits
    };
    code[3] == 0xe8
        || ff2(2, 3)
        || ff2(3, 1)
        || (ff2(4, 1) && code[5] & 7 == 4)
        || (ff2(6, 0) && code[3] & 7 == 5)
        || ff2(6, 2)
        || (ff2(7, 2) && code[2] & 7 == 4)
}

// ---------------------------------------------------------------------------------------
// The floor (`tracer record --probes floor`, for `cargo xtask bench`): empty programs that
// userspace attaches where the real probes attach, so the benchmarks can set the cost of
// our probes against the cost of a probe that does nothing.

#[uprobe]
pub fn floor_uprobe(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn floor_uretprobe(_ctx: RetProbeContext) -> u32 {
    0
}

#[tracepoint]
pub fn floor_tracepoint(_ctx: TracePointContext) -> u32 {
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
