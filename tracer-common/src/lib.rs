//! The event ABI shared by the eBPF probes (`tracer-ebpf`) and userspace (`tracer-user`).
//!
//! Every record that crosses the ring buffer starts with an [`EventHeader`]; its `kind`
//! says which fixed-size record follows. Kind ids and call ids are never reused: a
//! recording made today must decode the same way forever (see docs/recording-format.md).
//! All structs are `#[repr(C)]` with explicit fields and no implicit padding, so the
//! byte image is the same on both sides and in the trace file.
#![no_std]

/// Record kinds. The numbers are part of the recording format.
pub mod kind {
    /// MPI/PVM call entry: [`super::CallRecord`].
    pub const CALL_ENTER: u16 = 1;
    /// MPI/PVM call exit: [`super::CallRecord`].
    pub const CALL_EXIT: u16 = 2;
    /// Request handles of Waitall/Waitany, task ids of pvm_mcast: [`super::HandleArrayRecord`].
    pub const HANDLE_ARRAY: u16 = 3;
    /// Statuses written by MPI_Waitall: [`super::StatusArrayRecord`].
    pub const STATUS_ARRAY: u16 = 4;
    /// Selected procedure entry: [`super::EventHeader`] only, `call` = probe id.
    pub const FUNC_ENTER: u16 = 5;
    /// Selected procedure exit: [`super::EventHeader`] only, `call` = probe id.
    pub const FUNC_EXIT: u16 = 6;
    /// futex(2) entry: [`super::FutexRecord`].
    pub const FUTEX_ENTER: u16 = 7;
    /// futex(2) exit: [`super::FutexRecord`] (only `ret` is meaningful).
    pub const FUTEX_EXIT: u16 = 8;
    /// A traced thread leaves the CPU: [`super::SwitchRecord`].
    pub const SWITCH_OUT: u16 = 9;
    /// A traced thread gets the CPU: [`super::SwitchRecord`].
    pub const SWITCH_IN: u16 = 10;
    /// A thread makes a traced thread runnable: [`super::WakeRecord`].
    pub const WAKEUP: u16 = 11;
    /// A new traced thread becomes runnable for the first time: [`super::WakeRecord`].
    pub const WAKEUP_NEW: u16 = 12;
    /// fork/clone by a traced thread: [`super::ForkRecord`].
    pub const FORK: u16 = 13;
    /// execve by a traced process: [`super::ExecRecord`].
    pub const EXEC: u16 = 14;
    /// A traced thread exits: [`super::ExitRecord`].
    pub const EXIT: u16 = 15;
    // The kinds below exist only in the ring buffer: userspace turns each into the
    // `CALL_*`/`FUTEX_*` records above before anything else sees it, so recordings never
    // hold them. 16 (a call pair as two whole `CallRecord`s) and 17 (a futex pair as two
    // whole `FutexRecord`s) were their first, longer forms: retired.
    /// A call that cannot block, entry and exit in one: [`super::CallPairRecord`].
    pub const CALL_PAIR: u16 = 18;
    /// A call's exit without the entry's fields: [`super::CallReturnRecord`].
    pub const CALL_RETURN: u16 = 19;
    /// A futex call that did not sleep, enter and exit in one: [`super::FutexPairRecord`].
    pub const FUTEX_PAIR: u16 = 20;
    /// Half of a CPU's slots are unread: wake up and read them ([`super::EventHeader`]
    /// only, in the ring; it stands for no record).
    pub const SLOTS_NUDGE: u16 = 21;
    /// dlopen returned in a traced process held for it (`maps::HOLD_ON_LOAD`): it is
    /// stopped until userspace probed the libraries it now maps ([`super::EventHeader`]
    /// only, in the ring; it stands for no record).
    pub const LIBRARY_LOADED: u16 = 22;
}

/// Library families whose calls the probes understand. Part of the cookie of a call probe.
pub mod flavor {
    pub const OPEN_MPI: u8 = 1;
    pub const MPICH: u8 = 2;
    pub const PVM: u8 = 3;
    /// glibc's pthread calls (in libc.so.6 since glibc 2.34, libpthread.so.0 before).
    pub const GLIBC_PTHREAD: u8 = 4;
    /// Number of slots in the flavor table (index 0 unused).
    pub const COUNT: u32 = 5;
}

/// MPI, PVM and pthread call ids. Part of the recording format: never renumber, never
/// reuse.
pub mod call {
    pub const MPI_INIT: u16 = 1;
    pub const MPI_INIT_THREAD: u16 = 2;
    pub const MPI_FINALIZE: u16 = 3;
    pub const MPI_COMM_RANK: u16 = 4;
    pub const MPI_COMM_SIZE: u16 = 5;
    pub const MPI_COMM_DUP: u16 = 6;
    pub const MPI_COMM_SPLIT: u16 = 7;
    pub const MPI_COMM_CREATE: u16 = 8;
    pub const MPI_SEND: u16 = 10;
    pub const MPI_SSEND: u16 = 11;
    pub const MPI_BSEND: u16 = 12;
    pub const MPI_RSEND: u16 = 13;
    pub const MPI_ISEND: u16 = 14;
    pub const MPI_RECV: u16 = 15;
    pub const MPI_IRECV: u16 = 16;
    pub const MPI_SENDRECV: u16 = 17;
    pub const MPI_WAIT: u16 = 20;
    pub const MPI_WAITALL: u16 = 21;
    pub const MPI_WAITANY: u16 = 22;
    pub const MPI_TEST: u16 = 23;
    pub const MPI_BARRIER: u16 = 30;
    pub const MPI_BCAST: u16 = 31;
    pub const MPI_REDUCE: u16 = 32;
    pub const MPI_ALLREDUCE: u16 = 33;
    pub const MPI_GATHER: u16 = 34;
    pub const MPI_SCATTER: u16 = 35;
    pub const MPI_ALLGATHER: u16 = 36;
    pub const MPI_ALLTOALL: u16 = 37;
    pub const PVM_MYTID: u16 = 100;
    pub const PVM_SEND: u16 = 101;
    pub const PVM_PSEND: u16 = 102;
    pub const PVM_MCAST: u16 = 103;
    pub const PVM_RECV: u16 = 104;
    pub const PVM_NRECV: u16 = 105;
    pub const PVM_TRECV: u16 = 106;
    pub const PVM_PRECV: u16 = 107;
    pub const PVM_EXIT: u16 = 108;
    // pthread synchronization calls (`tracer record --locks`): `handle` is the object's
    // address (lock, condition variable, barrier), `comm` the mutex of a condition wait.
    pub const PTHREAD_MUTEX_LOCK: u16 = 110;
    pub const PTHREAD_MUTEX_TRYLOCK: u16 = 111;
    pub const PTHREAD_MUTEX_UNLOCK: u16 = 112;
    pub const PTHREAD_RWLOCK_RDLOCK: u16 = 113;
    pub const PTHREAD_RWLOCK_WRLOCK: u16 = 114;
    pub const PTHREAD_RWLOCK_UNLOCK: u16 = 115;
    pub const PTHREAD_SPIN_LOCK: u16 = 116;
    pub const PTHREAD_SPIN_UNLOCK: u16 = 117;
    pub const PTHREAD_COND_WAIT: u16 = 118;
    pub const PTHREAD_COND_TIMEDWAIT: u16 = 119;
    pub const PTHREAD_COND_SIGNAL: u16 = 120;
    pub const PTHREAD_COND_BROADCAST: u16 = 121;
    pub const PTHREAD_BARRIER_WAIT: u16 = 122;
    // Thread creation and joins (probed by default: a join orders the joiner after the
    // joined thread even when it does not block). pthread_create: `handle` (exit) is the
    // new thread's pthread_t; the joins: `handle` is the pthread_t joined.
    pub const PTHREAD_CREATE: u16 = 123;
    pub const PTHREAD_JOIN: u16 = 124;
    pub const PTHREAD_TRYJOIN_NP: u16 = 125;
    pub const PTHREAD_TIMEDJOIN_NP: u16 = 126;
    pub const PTHREAD_CLOCKJOIN_NP: u16 = 127;
    // POSIX semaphores (`--locks`): `handle` is the sem_t's address; sem_init's initial
    // value is in `peer`.
    pub const SEM_INIT: u16 = 200;
    pub const SEM_WAIT: u16 = 201;
    pub const SEM_TRYWAIT: u16 = 202;
    pub const SEM_TIMEDWAIT: u16 = 203;
    pub const SEM_CLOCKWAIT: u16 = 204;
    pub const SEM_POST: u16 = 205;
    // Groups and the communicators made from them (the matcher follows the group algebra
    // to learn a new communicator's members). Group calls: the input group is in `comm`,
    // a second one in `handle`, the ranks in a handle array, the new group at exit in
    // `handle`.
    pub const MPI_COMM_GROUP: u16 = 130;
    pub const MPI_GROUP_INCL: u16 = 131;
    pub const MPI_GROUP_EXCL: u16 = 132;
    pub const MPI_GROUP_RANGE_INCL: u16 = 133;
    pub const MPI_GROUP_RANGE_EXCL: u16 = 134;
    pub const MPI_GROUP_UNION: u16 = 135;
    pub const MPI_GROUP_INTERSECTION: u16 = 136;
    pub const MPI_GROUP_DIFFERENCE: u16 = 137;
    /// Entry: the group in `handle`, the tag in `tag`.
    pub const MPI_COMM_CREATE_GROUP: u16 = 138;
    /// Entry: the dimensions in a handle array (`count` of them).
    pub const MPI_CART_CREATE: u16 = 139;
    /// Entry: the communicator in `handle`.
    pub const MPI_COMM_FREE: u16 = 140;
    // More collectives, as their blocking forms.
    pub const MPI_ALLTOALLV: u16 = 141;
    pub const MPI_ALLTOALLW: u16 = 142;
    pub const MPI_GATHERV: u16 = 143;
    pub const MPI_SCATTERV: u16 = 144;
    pub const MPI_ALLGATHERV: u16 = 145;
    pub const MPI_REDUCE_SCATTER: u16 = 146;
    pub const MPI_REDUCE_SCATTER_BLOCK: u16 = 147;
    pub const MPI_SCAN: u16 = 148;
    pub const MPI_EXSCAN: u16 = 149;
    /// As MPI_Sendrecv: the receive side in `peer2`/`tag2`.
    pub const MPI_SENDRECV_REPLACE: u16 = 150;
    /// Entry: the requests in a handle array. Exit: `out` = the index (MPI_UNDEFINED
    /// when none completed).
    pub const MPI_TESTANY: u16 = 151;
    /// Exit: `out` = the flag.
    pub const MPI_TESTALL: u16 = 152;
    /// Entry: the requests in a handle array; exit: `out` = how many completed, and their
    /// indices in a second handle array written just before the exit.
    pub const MPI_TESTSOME: u16 = 153;
    pub const MPI_WAITSOME: u16 = 154;
    /// Exit: `out` = the flag, and the status of the message found.
    pub const MPI_IPROBE: u16 = 155;
    pub const MPI_PROBE: u16 = 156;
    /// Entry: `handle` = the request.
    pub const MPI_CANCEL: u16 = 157;
    /// Persistent requests: as Isend/Irecv; `MPI_Start` (`handle`) and `MPI_Startall`
    /// (a handle array) post them.
    pub const MPI_SEND_INIT: u16 = 158;
    pub const MPI_RECV_INIT: u16 = 159;
    pub const MPI_START: u16 = 160;
    pub const MPI_STARTALL: u16 = 161;
    /// Nonblocking collectives: the entry is the arrival, the request (exit `handle`)
    /// completes at a Wait/Test.
    pub const MPI_IBARRIER: u16 = 162;
    pub const MPI_IBCAST: u16 = 163;
    pub const MPI_IREDUCE: u16 = 164;
    pub const MPI_IALLREDUCE: u16 = 165;
    pub const MPI_IGATHER: u16 = 166;
    pub const MPI_ISCATTER: u16 = 167;
    pub const MPI_IALLGATHER: u16 = 168;
    pub const MPI_IALLTOALL: u16 = 169;
    /// One-sided communication: windows over a communicator; a fence is a collective
    /// over the window's members; Put and Get are counted as waits.
    pub const MPI_WIN_CREATE: u16 = 170;
    pub const MPI_WIN_FENCE: u16 = 171;
    pub const MPI_PUT: u16 = 172;
    pub const MPI_GET: u16 = 173;
    pub const MPI_WIN_FREE: u16 = 174;
    /// Matched probes (mpi4py receives every pickled object with them): Mprobe and
    /// Improbe (exit: `out` = the flag) take the message they find off the queue, and are
    /// where a receive matches its send; the Mrecv/Imrecv that follows copies it in.
    pub const MPI_MPROBE: u16 = 175;
    pub const MPI_IMPROBE: u16 = 176;
    pub const MPI_MRECV: u16 = 177;
    pub const MPI_IMRECV: u16 = 178;
    /// OpenMP (libgomp). A parallel region's start (`GOMP_parallel` and its combined
    /// loop/sections forms): `comm` = the outlined function, `handle` = its data
    /// argument, `peer` = the requested number of threads. These and the outlined
    /// function's records never reach a recording: userspace lowers them into the
    /// waits below (`openmp::lowering`).
    pub const GOMP_PARALLEL: u16 = 180;
    pub const GOMP_PARALLEL_LOOP_STATIC: u16 = 181;
    pub const GOMP_PARALLEL_LOOP_DYNAMIC: u16 = 182;
    pub const GOMP_PARALLEL_LOOP_GUIDED: u16 = 183;
    pub const GOMP_PARALLEL_LOOP_RUNTIME: u16 = 184;
    pub const GOMP_PARALLEL_LOOP_NONMONOTONIC_DYNAMIC: u16 = 185;
    pub const GOMP_PARALLEL_LOOP_NONMONOTONIC_GUIDED: u16 = 186;
    pub const GOMP_PARALLEL_SECTIONS: u16 = 187;
    pub const GOMP_PARALLEL_REDUCTIONS: u16 = 188;
    /// A compiler-outlined function (the body of a parallel region or task, e.g.
    /// `main._omp_fn.0`): `comm` = its address ([`ARG_IP`]), `handle` = its data argument.
    pub const OMP_OUTLINED: u16 = 190;
    /// Team barriers: explicit, and the implicit ones at the end of worksharing
    /// constructs. Lowered: `comm`/`handle` = the region, `tag` = the barrier's index
    /// within the region, `peer` = [`omp_wait::SUSPENDED`]/[`omp_wait::RESUMED`] or 0.
    pub const GOMP_BARRIER: u16 = 191;
    pub const GOMP_BARRIER_CANCEL: u16 = 192;
    pub const GOMP_LOOP_END: u16 = 193;
    pub const GOMP_LOOP_END_CANCEL: u16 = 194;
    pub const GOMP_SECTIONS_END: u16 = 195;
    pub const GOMP_SECTIONS_END_CANCEL: u16 = 196;
    /// Lowered only (userspace): the master forks a region (a call that does not wait),
    /// the master waits at the region's end for its team, a worker waits between the
    /// regions it works in. `comm`/`handle` = the region.
    pub const OMP_FORK: u16 = 197;
    pub const OMP_JOIN: u16 = 198;
    pub const OMP_IDLE: u16 = 199;
    /// Size of the call layout table (ids are below this; the probes keep the id in the
    /// low byte of `EventHeader::call`).
    pub const TABLE_SIZE: u32 = 256;
}

/// Packs what a call probe needs to know about its attachment into the 64-bit cookie:
/// the call id, the library flavor, and the symbol's virtual address in its file (so the
/// probe can compute the library's load bias from the instruction pointer).
pub const fn call_cookie(call: u16, flavor: u8, symbol_vaddr: u32) -> u64 {
    (call as u64) | ((flavor as u64) << 16) | ((symbol_vaddr as u64) << 32)
}

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
    /// One of [`kind`].
    pub kind: u16,
    /// Call id ([`call`]) for call records, probe id for procedure records, else 0.
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

// Short forms for the ring buffer. Writing a record costs the probe about as much per
// cache line it touches as everything else it does (docs/benchmarks.md, round 4), so
// the ring carries what a call's exit learns and not the fields that are always unset
// there; userspace rebuilds the whole records (`tracer_user::records::unpair`).

/// What a call's exit learns: its return value, what it wrote through the pointers its
/// entry kept, and its call site. The fields of a `CALL_EXIT` [`CallRecord`] that are not
/// in the header or always unset at exit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallResult {
    pub handle: u64,
    pub bytes: i64,
    /// The return address, taken from the return probe's instruction pointer.
    pub site: u64,
    pub ret: i32,
    pub peer: i32,
    pub tag: i32,
    /// The CPU of the exit (a [`CallPairRecord`]'s header has the entry's).
    pub cpu: u32,
    /// The int the call wrote through its output pointer, [`UNSET32`] when none.
    pub out: i32,
    pub _reserved: u32,
}

/// A call's exit: `CALL_EXIT` in short ([`kind::CALL_RETURN`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallReturnRecord {
    pub header: EventHeader,
    pub result: CallResult,
}

/// A call that cannot block (`CallLayout::cannot_block`), whole. Its entry record waits
/// in the thread's state (`ThreadState::held`) and goes out with the exit: one
/// ring-buffer reservation per call instead of two. Any other record of the thread
/// between the two writes the entry on its own first, so a thread's records stay in
/// order. The header is the entry's, with `kind` [`kind::CALL_PAIR`]; the entry's other
/// fields are the ones such a call sets (no `peer2`, `tag2`, `site`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallPairRecord {
    pub header: EventHeader,
    pub comm: u64,
    pub handle: u64,
    pub bytes: i64,
    pub peer: i32,
    pub tag: i32,
    pub count: i32,
    pub elem_size: i32,
    pub exit_ts_ns: u64,
    pub exit_cpu_ns: u64,
    pub result: CallResult,
}

/// A futex call that did not sleep, whole: as [`CallPairRecord`], for every futex call
/// whose enter record is still held at its exit (a wait that sleeps writes its enter
/// before its switch-out). `enter.header.kind` is [`kind::FUTEX_PAIR`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexPairRecord {
    pub enter: FutexRecord,
    pub exit_ts_ns: u64,
    pub exit_cpu_ns: u64,
    pub ret: i64,
    pub exit_cpu: u32,
    pub _reserved: u32,
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

/// Byte size of the record of each kind, or None for an unknown kind.
pub const fn record_size(kind: u16) -> Option<usize> {
    use core::mem::size_of;
    Some(match kind {
        kind::CALL_ENTER | kind::CALL_EXIT => size_of::<CallRecord>(),
        kind::CALL_PAIR => size_of::<CallPairRecord>(),
        kind::CALL_RETURN => size_of::<CallReturnRecord>(),
        kind::FUTEX_PAIR => size_of::<FutexPairRecord>(),
        kind::HANDLE_ARRAY => size_of::<HandleArrayRecord>(),
        kind::STATUS_ARRAY => size_of::<StatusArrayRecord>(),
        kind::FUNC_ENTER | kind::FUNC_EXIT | kind::SLOTS_NUDGE | kind::LIBRARY_LOADED => {
            size_of::<EventHeader>()
        }
        kind::FUTEX_ENTER | kind::FUTEX_EXIT => size_of::<FutexRecord>(),
        kind::SWITCH_OUT | kind::SWITCH_IN => size_of::<SwitchRecord>(),
        kind::WAKEUP | kind::WAKEUP_NEW => size_of::<WakeRecord>(),
        kind::FORK => size_of::<ForkRecord>(),
        kind::EXEC => size_of::<ExecRecord>(),
        kind::EXIT => size_of::<ExitRecord>(),
        _ => return None,
    })
}

/// Marks an argument slot as unused in a [`CallLayout`].
pub const NO_ARG: u8 = 0xff;
/// An argument slot that is the probed address itself (the function's address in the
/// process: an OpenMP outlined function's identity).
pub const ARG_IP: u8 = 0xfe;

/// `peer` of a lowered OpenMP wait call (see [`call::GOMP_BARRIER`]): a wait that a task
/// interrupts ends SUSPENDED and goes on RESUMED after it; neither is an arrival or a
/// release.
pub mod omp_wait {
    pub const SUSPENDED: i32 = 1;
    pub const RESUMED: i32 = 2;
}

/// How a call's exit learns the actual source, tag and size of what it received.
pub mod status_mode {
    pub const NONE: u8 = 0;
    /// Argument `status` points to an MPI_Status (layout from the flavor table).
    pub const MPI_STATUS: u8 = 1;
    /// Arguments `status`, `status + 1`, `status + 2` point to int source, tag, length
    /// (pvm_precv).
    pub const INT_POINTERS: u8 = 2;
    /// The library's current receive buffer global (PVM's `pvmrbuf`).
    pub const PVM_RBUF: u8 = 3;
    /// Argument `status` points to an array of MPI_Status, length in argument `count`.
    pub const MPI_STATUS_ARRAY: u8 = 4;
    /// Argument `status` points to an int array whose length is the int the call wrote
    /// through `out` (Waitsome/Testsome's indices): a handle array before the exit.
    pub const INDEX_ARRAY: u8 = 5;
}

/// Which argument (0-based, `NO_ARG` if none) of a call holds each field. One entry per
/// call id, written by userspace into the probes' layout table.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLayout {
    pub peer: u8,
    pub tag: u8,
    pub peer2: u8,
    pub tag2: u8,
    pub comm: u8,
    pub count: u8,
    pub dtype: u8,
    /// Pointer to a request handle read at entry (Wait, Test); for a flavor with
    /// `handle_by_value`, the argument is the handle itself (a lock's address).
    pub handle_in: u8,
    /// Pointer to a handle the call writes (Isend/Irecv request, new communicator).
    pub handle_out: u8,
    /// Pointer to an int the call writes (rank, size, index, flag).
    pub out: u8,
    /// Array argument read at entry (requests or task ids), length in `count`.
    pub array: u8,
    pub status: u8,
    /// One of [`status_mode`].
    pub status_mode: u8,
    /// Nonzero if the entry record should carry the library's load bias in `handle`.
    pub want_bias: u8,
    /// Bytes of one element of `array` (4 or 8); 0 means the flavor's handle size.
    pub array_elem: u8,
    /// Nonzero if the call never waits for another thread or process (MPI_Comm_rank,
    /// MPI_Isend, an unlock): its entry record may wait for its exit ([`CallPairRecord`]).
    pub cannot_block: u8,
    /// Nonzero: the `handle_in` argument is a handle passed by value (an MPI_Group, the
    /// second group of MPI_Group_union), read like `comm`, not a pointer to one.
    pub handle_in_by_value: u8,
    /// Values of `array` per unit of `count` (3 for MPI_Group_range_incl's rank
    /// triples); 0 means 1.
    pub array_per_count: u8,
    pub _reserved: [u8; 2],
}

impl CallLayout {
    pub const EMPTY: CallLayout = CallLayout {
        peer: NO_ARG,
        tag: NO_ARG,
        peer2: NO_ARG,
        tag2: NO_ARG,
        comm: NO_ARG,
        count: NO_ARG,
        dtype: NO_ARG,
        handle_in: NO_ARG,
        handle_out: NO_ARG,
        out: NO_ARG,
        array: NO_ARG,
        status: NO_ARG,
        status_mode: status_mode::NONE,
        want_bias: 0,
        array_elem: 0,
        cannot_block: 0,
        handle_in_by_value: 0,
        array_per_count: 0,
        _reserved: [0; 2],
    };
}

/// How the probes turn a datatype argument into an element size.
pub mod dtype_mode {
    pub const NONE: u32 = 0;
    /// The datatype is a pointer to an object with a size_t size at `dtype_size_off`
    /// (Open MPI's `opal_datatype_t::size`).
    pub const POINTER_TO_SIZE: u32 = 1;
    /// MPICH builtin handles carry the size in bits 8-15.
    pub const MPICH_HANDLE: u32 = 2;
    /// PVM type codes (PVM_BYTE, PVM_INT, ...).
    pub const PVM_CODE: u32 = 3;
}

/// How a status struct stores the received byte count.
pub mod count_mode {
    /// A size_t at `status_count_off` (Open MPI `_ucount`).
    pub const SIZE_T: u32 = 1;
    /// MPICH: int count_lo, then count_hi_and_cancelled (bit 0 = cancelled).
    pub const MPICH_SPLIT: u32 = 2;
}

/// Per-library-family facts, written by userspace into the probes' flavor table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlavorConfig {
    /// Bytes of an MPI_Comm / MPI_Request handle (8 for pointers, 4 for int handles).
    pub handle_size: u32,
    pub dtype_mode: u32,
    pub dtype_size_off: u32,
    pub count_mode: u32,
    pub status_size: u32,
    pub status_source_off: u32,
    pub status_tag_off: u32,
    pub status_count_off: u32,
    /// PVM: virtual address of the `pvmrbuf` global in libpvm3 (0 if unknown).
    pub rbuf_vaddr: u64,
    /// PVM: offsets of source, tag and length in `struct pmsg`.
    pub pmsg_src_off: u32,
    pub pmsg_tag_off: u32,
    pub pmsg_len_off: u32,
    /// 1: a layout's `handle_in` argument is the handle itself, not a pointer to it (the
    /// pthread calls take the address of the lock, which is what identifies it).
    pub handle_by_value: u32,
}

/// Global probe settings, including tracepoint field offsets read from tracefs (they
/// change between kernel versions; see `tracer_user::probes::tracefs`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeConfig {
    /// 1: MPI/PVM/procedure probes fire in every process (system-wide mode); a process
    /// becomes traced by its first such call.
    pub trace_all: u32,
    /// 1: stop a traced process at exec (SIGSTOP) so userspace can attach procedure
    /// probes before the new program runs; userspace sends SIGCONT.
    pub hold_on_exec: u32,
    /// The tracer's own process, never traced.
    pub self_tgid: u32,
    pub switch_prev_pid: u32,
    pub switch_prev_state: u32,
    pub switch_next_pid: u32,
    pub waking_pid: u32,
    pub waking_target_cpu: u32,
    pub fork_child_pid: u32,
    pub exec_filename: u32,
    pub exec_old_pid: u32,
    pub exit_pid: u32,
    pub exit_group_dead: u32,
    pub futex_uaddr: u32,
    pub futex_op: u32,
    pub futex_val: u32,
    pub futex_ret: u32,
    /// Offset of `se.sum_exec_runtime` in `task_struct` (from kernel BTF); 0 if unknown.
    pub task_cpu_time: u32,
    /// Where the time the hypervisor stole from this CPU is, from kernel BTF (0 if
    /// unknown): `se.cfs_rq` in `task_struct`, `rq` in `cfs_rq`, `prev_steal_time_rq` in
    /// `rq` (the steal the run queue's clock has left out, updated at least every tick).
    pub task_cfs_rq: u32,
    pub cfs_rq_rq: u32,
    pub rq_stolen: u32,
    /// How far the kernel's count of a running thread's CPU time may lag behind (a tick):
    /// the probes' clock never runs more than this ahead of that count. 0: no bound
    /// (CPUs without a regular tick, `nohz_full`).
    pub kernel_clock_lag_ns: u32,
    /// Wake the reader each time a CPU has written another this many bytes of records, a
    /// power of two (0: the probes' default).
    pub wakeup_bytes: u32,
    /// Slots per CPU in `SLOTS`, a power of two; 0: every record goes to the ring.
    pub slots_per_cpu: u32,
}

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

/// Per-thread state the probes keep to stamp each event with the thread's CPU time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadClock {
    /// On-CPU ns up to `slice_start_ns`.
    pub on_cpu_ns: u64,
    /// When the current slice began, or the clock was last checked in it (valid if
    /// `running`).
    pub slice_start_ns: u64,
    /// The CPU's stolen time (`ProbeConfig::rq_stolen`) at `slice_start_ns`, or
    /// [`STOLEN_UNKNOWN`].
    pub stolen_at_start_ns: u64,
    /// The last CPU time stamped on one of the thread's events: the clock never goes back.
    pub last_ns: u64,
    /// 0 when unknown (a freshly forked thread before its first event).
    pub tgid: u32,
    /// One of [`clock_state`].
    pub running: u32,
}

/// [`ThreadClock::stolen_at_start_ns`] when the kernel's count of stolen time is unknown.
pub const STOLEN_UNKNOWN: u64 = u64::MAX;

/// Where a thread's [`ThreadClock`] stands.
pub mod clock_state {
    /// Off the CPU, or not known to be on it.
    pub const OFF_CPU: u32 = 0;
    /// On the CPU since `slice_start_ns`.
    pub const RUNNING: u32 = 1;
    /// On the CPU, and the clock was checked against the kernel's counts at
    /// `slice_start_ns`.
    pub const CHECKED: u32 = 2;
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
    /// The caller's return address, read at the entry of a call that can block (0 for
    /// the others): where a futex wait inside the call comes from. The stack no longer
    /// says once the return probe has put its trampoline's address there.
    pub site: u64,
}

/// Slots of the probes' direct-mapped table of thread states (`THREAD_SLOTS`, indexed by
/// thread id modulo this power of two); a thread whose slot is taken gets an entry in
/// `THREADS` instead.
pub const THREAD_SLOTS_LEN: u32 = 4096;

/// MPI calls can nest (ROMIO, profiling wrappers); deeper nesting is counted, not kept.
pub const MAX_CALL_DEPTH: usize = 4;

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
    /// call that cannot block in `held_entry` ([`CallPairRecord`]), or a futex call in
    /// `held_futex` ([`FutexPairRecord`]).
    pub held: u32,
    /// In `THREAD_SLOTS`: the thread whose state this is, 0 for a free slot (unused in
    /// `THREADS`); 64 bits for the alignment of what follows.
    pub owner: u64,
    pub frames: [CallFrame; MAX_CALL_DEPTH],
    pub held_entry: CallRecord,
    pub held_futex: FutexRecord,
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
    pub const LOST: &str = "LOST";
    pub const TRACED: &str = "TRACED";
    pub const THREADS: &str = "THREADS";
    pub const CONFIG: &str = "CONFIG";
    pub const LAYOUTS: &str = "LAYOUTS";
    pub const FLAVORS: &str = "FLAVORS";
    pub const SLOTS: &str = "SLOTS";
    pub const CURSORS: &str = "CURSORS";
    pub const HOLD_ON_LOAD: &str = "HOLD_ON_LOAD";
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    unsafe impl aya::Pod for CallLayout {}
    unsafe impl aya::Pod for FlavorConfig {}
    unsafe impl aya::Pod for ProbeConfig {}
    unsafe impl aya::Pod for ThreadClock {}
    unsafe impl aya::Pod for ThreadState {}
}

// The layouts are part of the recording format: fail the build if one changes size.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<EventHeader>() == 32);
    assert!(size_of::<CallRecord>() == 104);
    assert!(size_of::<HandleArrayRecord>() == 104);
    assert!(size_of::<StatusArrayRecord>() == 168);
    assert!(size_of::<FutexRecord>() == 64);
    assert!(size_of::<SwitchRecord>() == 40);
    assert!(size_of::<WakeRecord>() == 48);
    assert!(size_of::<ForkRecord>() == 40);
    assert!(size_of::<ExecRecord>() == 168);
    assert!(size_of::<ExitRecord>() == 40);
    assert!(size_of::<CallLayout>() == 20);
    assert!(size_of::<FlavorConfig>() == 56);
    assert!(size_of::<ProbeConfig>() == 96);
    assert!(size_of::<SlotCursor>() == 128);
    assert!(size_of::<CallPairRecord>() <= SLOT_BYTES);
    // Map values: no padding either (the kernel copies them byte for byte).
    assert!(size_of::<ThreadClock>() == 40);
    assert!(size_of::<CallFrame>() == 64);
    assert!(size_of::<CallResult>() == 48);
    assert!(size_of::<CallReturnRecord>() == 80);
    assert!(size_of::<CallPairRecord>() == 136);
    assert!(size_of::<FutexPairRecord>() == 96);
    assert!(size_of::<ThreadState>() == 56 + 64 * MAX_CALL_DEPTH + 104 + 64);
};
