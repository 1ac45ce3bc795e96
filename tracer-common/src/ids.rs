//! Record kinds and call ids: part of the recording format. Never renumber, never reuse:
//! a retired id stays a gap (kinds 16, 17 and 27).

/// Declares the record kinds from one table, so that a new kind is one row: the
/// [`RecordKind`] enum, the [`kind`] numbers (for matching a header's `kind` field), and
/// each kind's record type (its byte size) and name. A duplicate id is an unreachable
/// pattern in [`RecordKind::from_id`], which the lints refuse.
macro_rules! record_kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $id:literal, $number:ident, $name:literal, $record:ty;
    )*) => {
        /// Record kinds: what follows an [`crate::EventHeader`]. The ids are part of the
        /// recording format.
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum RecordKind {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl RecordKind {
            /// Every kind, by id.
            pub const ALL: &'static [RecordKind] = &[$(RecordKind::$variant),*];

            /// The kind with id `id`; None for an unknown or retired id.
            pub const fn from_id(id: u16) -> Option<Self> {
                match id {
                    $( $id => Some(RecordKind::$variant), )*
                    _ => None,
                }
            }

            pub const fn id(self) -> u16 {
                self as u16
            }

            /// Byte size of a record of this kind.
            pub const fn size(self) -> usize {
                match self {
                    $( RecordKind::$variant => core::mem::size_of::<$record>(), )*
                }
            }

            /// The kind's name in summaries and dumps.
            pub const fn name(self) -> &'static str {
                match self {
                    $( RecordKind::$variant => $name, )*
                }
            }
        }

        /// Record kind ids as numbers, for a `match` on a header's `kind` (patterns
        /// cannot cast an enum). Made from the [`RecordKind`] table.
        pub mod kind {
            $( $(#[$doc])* pub const $number: u16 = super::RecordKind::$variant as u16; )*
        }
    };
}

record_kinds! {
    /// MPI/PVM call entry: [`crate::CallRecord`].
    CallEnter = 1, CALL_ENTER, "call_enter", crate::CallRecord;
    /// MPI/PVM call exit: [`crate::CallRecord`].
    CallExit = 2, CALL_EXIT, "call_exit", crate::CallRecord;
    /// Request handles of Waitall/Waitany, task ids of pvm_mcast: [`crate::HandleArrayRecord`].
    HandleArray = 3, HANDLE_ARRAY, "handle_array", crate::HandleArrayRecord;
    /// Statuses written by MPI_Waitall: [`crate::StatusArrayRecord`].
    StatusArray = 4, STATUS_ARRAY, "status_array", crate::StatusArrayRecord;
    /// Selected procedure entry: [`crate::EventHeader`] only, `call` = probe id.
    FuncEnter = 5, FUNC_ENTER, "func_enter", crate::EventHeader;
    /// Selected procedure exit: [`crate::EventHeader`] only, `call` = probe id.
    FuncExit = 6, FUNC_EXIT, "func_exit", crate::EventHeader;
    /// futex(2) entry: [`crate::FutexRecord`].
    FutexEnter = 7, FUTEX_ENTER, "futex_enter", crate::FutexRecord;
    /// futex(2) exit: [`crate::FutexRecord`] (only `ret` is meaningful).
    FutexExit = 8, FUTEX_EXIT, "futex_exit", crate::FutexRecord;
    /// A traced thread leaves the CPU: [`crate::SwitchRecord`].
    SwitchOut = 9, SWITCH_OUT, "switch_out", crate::SwitchRecord;
    /// A traced thread gets the CPU: [`crate::SwitchRecord`].
    SwitchIn = 10, SWITCH_IN, "switch_in", crate::SwitchRecord;
    /// A thread makes a traced thread runnable: [`crate::WakeRecord`].
    Wakeup = 11, WAKEUP, "wakeup", crate::WakeRecord;
    /// A new traced thread becomes runnable for the first time: [`crate::WakeRecord`].
    WakeupNew = 12, WAKEUP_NEW, "wakeup_new", crate::WakeRecord;
    /// fork/clone by a traced thread: [`crate::ForkRecord`].
    Fork = 13, FORK, "fork", crate::ForkRecord;
    /// execve by a traced process: [`crate::ExecRecord`].
    Exec = 14, EXEC, "exec", crate::ExecRecord;
    /// A traced thread exits: [`crate::ExitRecord`].
    Exit = 15, EXIT, "exit", crate::ExitRecord;
    // The kinds below exist only in the ring buffer (but `PROCESS_END`): userspace turns
    // each into the `CALL_*`/`FUTEX_*`/`SWITCH_*` records above before anything else sees
    // it, so recordings never hold them. 16 (a call pair as two whole `CallRecord`s) and
    // 17 (a futex pair as two whole `FutexRecord`s) were their first, longer forms, and 27
    // the sampler's record with 8 KiB of stack (`RAW_SAMPLE` has 16 KiB since): retired,
    // and left as gaps so that no old reader takes a new kind for them.
    /// A call that cannot block, entry and exit in one: [`crate::CallPairRecord`].
    CallPair = 18, CALL_PAIR, "call_pair", crate::CallPairRecord;
    /// A call's exit without the entry's fields: [`crate::CallReturnRecord`].
    CallReturn = 19, CALL_RETURN, "call_return", crate::CallReturnRecord;
    /// A futex call that did not sleep, enter and exit in one: [`crate::FutexPairRecord`].
    FutexPair = 20, FUTEX_PAIR, "futex_pair", crate::FutexPairRecord;
    /// Half of a CPU's slots are unread: wake up and read them ([`crate::EventHeader`]
    /// only, in the ring; it stands for no record).
    SlotsNudge = 21, SLOTS_NUDGE, "slots_nudge", crate::EventHeader;
    /// dlopen returned in a traced process held for it (`maps::HOLD_ON_LOAD`): it is
    /// stopped until userspace probed the libraries it now maps ([`crate::EventHeader`]
    /// only, in the ring; it stands for no record).
    LibraryLoaded = 22, LIBRARY_LOADED, "library_loaded", crate::EventHeader;
    /// How a traced process ended (exit code or signal), after the EXIT record of its
    /// last thread: [`crate::ProcessEndRecord`].
    ProcessEnd = 23, PROCESS_END, "process_end", crate::ProcessEndRecord;
    /// A switch between two traced threads, out and in in one: [`crate::SwitchPairRecord`]
    /// (ring only, as [`RecordKind::CallPair`]).
    SwitchPair = 24, SWITCH_PAIR, "switch_pair", crate::SwitchPairRecord;
    /// Calls of a thread that returned without their exit probe (a return probe
    /// attached while the thread was inside the call, a longjmp): the probes dropped
    /// them from the thread's open calls, innermost first: [`crate::UnwoundRecord`].
    CallsUnwound = 25, CALLS_UNWOUND, "calls_unwound", crate::UnwoundRecord;
    /// A sampled user call stack, unwound: [`crate::SampleRecord`] (recording format 7).
    Sample = 26, SAMPLE, "sample", crate::SampleRecord;
    /// What the sampler's probe copies for the unwinder: [`crate::RawSampleRecord`]
    /// (ring only: `tracer record` unwinds it into a [`RecordKind::Sample`]).
    RawSample = 28, RAW_SAMPLE, "raw_sample", crate::RawSampleRecord;
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
    /// OpenMP (LLVM's libomp, `clang -fopenmp`). A region's start: `comm` = the
    /// outlined function (the microtask), `handle` = its first shared argument, `peer` =
    /// the number of shared arguments. Lowered like [`GOMP_PARALLEL`] (tracer-analysis
    /// `format::openmp`).
    pub const KMPC_FORK_CALL: u16 = 210;
    /// A function clang outlined (`.omp_outlined.`, `.omp_task_entry.`): `comm` = its
    /// address ([`crate::ARG_IP`]), `handle` = its third argument (after the thread ids:
    /// the first shared argument, the same on every thread of the team).
    pub const KMP_OUTLINED: u16 = 211;
    /// libomp's team barriers: explicit and implicit ones (`__kmpc_barrier`), the
    /// cancellable one, and a blocking reduction's two halves (`__kmpc_reduce` waits for
    /// the team in the tree method, `__kmpc_end_reduce` ends in a barrier otherwise).
    /// Lowered like [`GOMP_BARRIER`].
    pub const KMPC_BARRIER: u16 = 212;
    pub const KMPC_CANCEL_BARRIER: u16 = 213;
    pub const KMPC_REDUCE: u16 = 214;
    pub const KMPC_END_REDUCE: u16 = 215;
    /// A region that runs on its master alone (`if(0)`): clang calls the outlined
    /// function itself between these two. Dropped by the lowering.
    pub const KMPC_SERIALIZED_PARALLEL: u16 = 216;
    pub const KMPC_END_SERIALIZED_PARALLEL: u16 = 217;
    /// MPI_Cart_sub: the cartesian communicator in `comm`, `remain_dims` in a handle
    /// array of as many ints as the probes could read (its length, the communicator's
    /// ndims, is no argument: `CallLayout::array_unsized`).
    pub const MPI_CART_SUB: u16 = 218;
    /// MPI_Intercomm_create: the local communicator in `comm`, the local leader in `peer`,
    /// the peer communicator in `handle`, the remote leader in `peer2`, the tag in `tag`
    /// (the last three significant at the local leader only).
    pub const MPI_INTERCOMM_CREATE: u16 = 219;
    /// MPI_Intercomm_merge: the intercommunicator in `comm`, `high` in `peer`.
    pub const MPI_INTERCOMM_MERGE: u16 = 220;
    /// MPI_Dist_graph_create_adjacent and MPI_Dist_graph_create: the old communicator in
    /// `comm`, `reorder` in `peer`; _adjacent: `sources` (the in-neighbours) in a handle
    /// array (`count` = indegree); the rest of the graph is not read.
    pub const MPI_DIST_GRAPH_CREATE_ADJACENT: u16 = 221;
    pub const MPI_DIST_GRAPH_CREATE: u16 = 222;
    /// Neighbourhood collectives: as the other collectives (`comm`; `count` and
    /// `bytes` for allgather and alltoall); a member's exit depends on its in-neighbours'
    /// entries (MPI_Dist_graph_create_adjacent's `sources`).
    pub const MPI_NEIGHBOR_ALLGATHER: u16 = 223;
    pub const MPI_NEIGHBOR_ALLGATHERV: u16 = 224;
    pub const MPI_NEIGHBOR_ALLTOALL: u16 = 225;
    pub const MPI_NEIGHBOR_ALLTOALLV: u16 = 226;
    pub const MPI_NEIGHBOR_ALLTOALLW: u16 = 227;
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
    /// As MPI_Comm_split: the split type in `peer` (its color), the key in `peer2`.
    pub const MPI_COMM_SPLIT_TYPE: u16 = 179;
    /// OpenMP (libgomp). A parallel region's start (`GOMP_parallel` and its combined
    /// loop/sections forms): `comm` = the outlined function, `handle` = its data
    /// argument, `peer` = the requested number of threads. These and the outlined
    /// function's records never reach a recording: userspace lowers them into the
    /// waits below (tracer-analysis `format::openmp`).
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
    /// `main._omp_fn.0`): `comm` = its address ([`crate::ARG_IP`]), `handle` = its data
    /// argument.
    pub const OMP_OUTLINED: u16 = 190;
    /// Team barriers: explicit, and the implicit ones at the end of worksharing
    /// constructs. Lowered: `comm`/`handle` = the region, `tag` = the barrier's index
    /// within the region, `peer` = [`crate::omp_wait`]'s SUSPENDED/RESUMED or 0.
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

/// `peer` of a lowered OpenMP wait call (see [`call::GOMP_BARRIER`]): a wait that a task
/// interrupts ends SUSPENDED and goes on RESUMED after it; neither is an arrival or a
/// release.
pub mod omp_wait {
    pub const SUSPENDED: i32 = 1;
    pub const RESUMED: i32 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_kinds_round_trip_and_retired_ids_stay_gaps() {
        for &k in RecordKind::ALL {
            assert_eq!(RecordKind::from_id(k.id()), Some(k));
            assert!(k.size() >= core::mem::size_of::<crate::EventHeader>());
        }
        assert_eq!(RecordKind::from_id(0), None);
        assert_eq!(RecordKind::from_id(16), None);
        assert_eq!(RecordKind::from_id(17), None);
        assert_eq!(RecordKind::from_id(27), None);
        // The first id past the table.
        assert_eq!(RecordKind::from_id(29), None);
        assert_eq!(crate::record_size(kind::SAMPLE), Some(552));
        assert_eq!(crate::record_size(kind::RAW_SAMPLE), Some(16448));
        assert_eq!(crate::record_size(kind::CALLS_UNWOUND), Some(40));
        assert_eq!(crate::record_size(kind::SWITCH_PAIR), Some(56));
        assert_eq!(crate::record_size(kind::PROCESS_END), Some(40));
        assert_eq!(kind::FORK, 13);
        assert_eq!(RecordKind::Fork.name(), "fork");
        assert_eq!(crate::record_size(kind::EXEC), Some(168));
        assert_eq!(crate::record_size(16), None);
    }
}
