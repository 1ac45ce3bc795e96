//! The frozen recording records: what recordings hold, byte for byte
//! (docs/recording-format.md).

/// First 32 bytes of every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventHeader {
    /// `bpf_ktime_get_ns`: one monotonic clock for the whole machine.
    pub ts_ns: u64,
    /// The thread's on-CPU time since the tracer first saw it (ns).
    pub cpu_ns: u64,
    pub tgid: u32,
    pub tid: u32,
    /// One of [`crate::kind`].
    pub kind: u16,
    /// Call id ([`crate::call`]) for call records, probe id for procedure records, else 0.
    pub call: u16,
    /// The CPU the event happened on.
    pub cpu: u32,
}

/// Entry or exit of an MPI, PVM or pthread call. Which fields are set depends on the call;
/// unset integers are [`UNSET`] (or 0 for handles).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallRecord {
    pub header: EventHeader,
    /// Communicator handle as the process sees it (Open MPI: pointer, MPICH: int).
    /// Entry of pthread_cond_wait/timedwait: the mutex's address.
    pub comm: u64,
    /// Entry of Wait/Test: the request handle; exit of Isend/Irecv: the new request;
    /// exit of Comm_dup/split/create: the new communicator; entry of MPI_Init*: the load
    /// bias of the MPI library; entry of the PVM calls: the load bias of libpvm3; entry of
    /// the pthread calls: the address of the lock, condition variable or barrier.
    pub handle: u64,
    /// Entry: message bytes (count x element size) when known. Exit: bytes received,
    /// from the status. [`UNSET`] when unknown.
    pub bytes: i64,
    /// Exit: the call's return value.
    pub ret: i64,
    /// Exit: the int the call wrote through its output pointer (rank, size, index, flag).
    pub out: i64,
    /// Entry: destination, source or root (MPI rank or PVM task id). Exit: actual source.
    pub peer: i32,
    /// Entry: requested tag. Exit: actual tag.
    pub tag: i32,
    /// MPI_Sendrecv entry: the receive side's source; MPI_Comm_split entry: the key.
    pub peer2: i32,
    /// MPI_Sendrecv entry: the receive side's tag.
    pub tag2: i32,
    /// Entry: element count (array length for Waitall/Waitany/pvm_mcast).
    pub count: i32,
    /// Entry: element size in bytes when known, else [`UNSET`] (as i32).
    pub elem_size: i32,
    /// Entry: the call site, i.e. the caller's return address (the u64 at the stack
    /// pointer when the uprobe fires on the function's first instruction); 0 at exit or
    /// when it could not be read. Symbolize `site - 1` to get the line of the call.
    pub site: u64,
}

/// Marker for "not set / unknown" in signed fields.
pub const UNSET: i64 = i64::MIN;
/// Marker for "not set / unknown" in 32-bit signed fields.
pub const UNSET32: i32 = i32::MIN;

impl CallRecord {
    /// A record with every optional field unset.
    pub const fn unset(header: EventHeader) -> Self {
        CallRecord {
            header,
            comm: 0,
            handle: 0,
            bytes: UNSET,
            ret: UNSET,
            out: UNSET,
            peer: UNSET32,
            tag: UNSET32,
            peer2: UNSET32,
            tag2: UNSET32,
            count: UNSET32,
            elem_size: UNSET32,
            site: 0,
        }
    }
}

/// How many values one array record carries.
pub const ARRAY_CHUNK: usize = 8;
/// At most this many array records are emitted per call (bounded loop in the probe).
pub const ARRAY_MAX_CHUNKS: u32 = 8;

/// A slice of an array argument: request handles (Waitall/Waitany entry) or task ids
/// (pvm_mcast entry). Arrays longer than one chunk produce several records.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandleArrayRecord {
    pub header: EventHeader,
    /// Index of `values[0]` in the whole array.
    pub first: u32,
    /// Length of the whole array.
    pub total: u32,
    pub values: [u64; ARRAY_CHUNK],
}

/// A slice of the statuses MPI_Waitall wrote.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusArrayRecord {
    pub header: EventHeader,
    pub first: u32,
    pub total: u32,
    pub source: [i32; ARRAY_CHUNK],
    pub tag: [i32; ARRAY_CHUNK],
    pub bytes: [i64; ARRAY_CHUNK],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexRecord {
    pub header: EventHeader,
    /// Entry: the futex word's address.
    pub uaddr: u64,
    /// Entry: op (FUTEX_WAIT, FUTEX_WAKE, ... with flags).
    pub op: u32,
    /// Entry: val (expected value for waits, count for wakes).
    pub val: u32,
    /// Exit: the syscall's result.
    pub ret: i64,
    /// Entry of a wait ([`futex_waits`]): a user-space code address for the wait: the
    /// first word on the user stack that points outside libc's code and the stack, just
    /// after a call instruction (the return address into the caller of pthreads), or the
    /// syscall instruction's address when the scan found none. 0 for other operations
    /// (the scan costs a third of a wake's probes, and only waits are reported by site),
    /// at exit, or when the user registers could not be read. A bounded scan (see
    /// tracer-ebpf's `futex_site`), not an unwind.
    pub site: u64,
}

/// futex(2) operations that wait (FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET,
/// FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2), without the private/clock flags.
pub const fn futex_waits(op: u32) -> bool {
    matches!(op & 0x7f, 0 | 6 | 9 | 11 | 13)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchRecord {
    pub header: EventHeader,
    /// SWITCH_OUT: the thread's state as the kernel reports it (0 = still runnable).
    pub prev_state: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeRecord {
    /// The waker (the thread running when the wakeup happened; may be untraced).
    pub header: EventHeader,
    pub wakee_tid: u32,
    /// 0 when the probe did not know the wakee's process yet.
    pub wakee_tgid: u32,
    pub target_cpu: i32,
    pub _reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkRecord {
    /// The parent thread.
    pub header: EventHeader,
    /// The new thread's id (a new process when its first event shows tgid == tid).
    pub child_tid: u32,
    pub _reserved: u32,
}

/// Bytes of the executable path kept in an exec record (longer paths are cut).
pub const EXEC_PATH_LEN: usize = 128;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecRecord {
    pub header: EventHeader,
    /// The thread id before exec (a non-leader thread that execs takes the leader's id).
    pub old_tid: u32,
    /// Bytes used in `filename` (without the NUL).
    pub filename_len: u32,
    pub filename: [u8; EXEC_PATH_LEN],
}

impl Default for ExecRecord {
    fn default() -> Self {
        Self {
            header: EventHeader::default(),
            old_tid: 0,
            filename_len: 0,
            filename: [0; EXEC_PATH_LEN],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitRecord {
    pub header: EventHeader,
    /// 1 when this was the last thread of its process.
    pub group_dead: u32,
    pub _reserved: u32,
}

/// How a traced process ended, written with the EXIT record of its last thread (added in
/// recording format 3 as a kind of its own: EXIT's layout is frozen).
/// Calls the probes found returned without their exit (see
/// [`crate::RecordKind::CallsUnwound`]). The header is the thread's, stamped when the
/// probes found out: at the entry of a call made from the frame the lost ones had
/// left, or at the exit of a call around them; `call` is the innermost lost call's
/// (flavor in the high byte, as in [`CallRecord`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwoundRecord {
    pub header: EventHeader,
    /// How many of the thread's open calls, innermost first, have no exit to come.
    pub calls: u32,
    pub _reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessEndRecord {
    pub header: EventHeader,
    /// The kernel's `task_struct.exit_code` of the last thread, as wait(2) reports it:
    /// the exit code in bits 8-15, or the signal that killed the process in bits 0-6
    /// (bit 7: a core was dumped). `u32::MAX` when the kernel's BTF did not say
    /// where it is.
    pub status: u32,
    pub _reserved: u32,
}

/// Most frames a [`SampleRecord`] holds: the innermost ones when a stack is deeper.
pub const SAMPLE_MAX_FRAMES: usize = 64;

/// How the unwinding of a sampled stack ended ([`SampleRecord::end`]).
pub mod unwind_end {
    /// The unwinder reached the stack's root (the outermost frame has no caller: the
    /// thread's start, `_start`, `clone`): every frame is in the record.
    pub const COMPLETE: u16 = 0;
    /// The stack had more than [`crate::SAMPLE_MAX_FRAMES`] frames: the innermost are
    /// kept, the outermost lost.
    pub const TRUNCATED: u16 = 1;
    /// The copied stack bytes ran out before the root.
    pub const STACK_END: u16 = 2;
    /// An address outside every mapped file with unwind information (JIT code, a
    /// library mapped after the tracer last read the process's mappings), or unwind
    /// information that did not lead to a caller.
    pub const NO_UNWIND_INFO: u16 = 3;
    /// The probe could not read the thread's user registers or stack: no frames.
    pub const NO_USER_STATE: u16 = 4;
}

/// A sampled user call stack of a traced thread (kind [`crate::kind::SAMPLE`]): what the
/// sampler saw, unwound by the tracer from the stack bytes the probe copied
/// ([`crate::RawSampleRecord`]). The header is the thread's, stamped when the sample was
/// taken: `cpu_ns` is the thread's CPU clock then, the clock the critical path is
/// measured in; `call` is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleRecord {
    pub header: EventHeader,
    /// Frames used in `frames`.
    pub depth: u16,
    /// How the unwinding ended: one of [`unwind_end`].
    pub end: u16,
    /// Bytes of user stack the probe copied (what the unwinder had).
    pub stack_bytes: u32,
    /// Run-time code addresses, innermost first: `frames[0]` is the interrupted
    /// instruction pointer, every later one a return address (symbolize `addr - 1` for
    /// the line of the call).
    pub frames: [u64; SAMPLE_MAX_FRAMES],
}

impl Default for SampleRecord {
    fn default() -> Self {
        Self {
            header: EventHeader::default(),
            depth: 0,
            end: unwind_end::NO_USER_STATE,
            stack_bytes: 0,
            frames: [0; SAMPLE_MAX_FRAMES],
        }
    }
}

/// Byte size of the record of each kind, or None for an unknown kind
/// ([`crate::RecordKind::size`]).
pub const fn record_size(kind: u16) -> Option<usize> {
    match crate::RecordKind::from_id(kind) {
        Some(k) => Some(k.size()),
        None => None,
    }
}
