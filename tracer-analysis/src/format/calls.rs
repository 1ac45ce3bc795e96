//! The MPI, PVM and pthread calls we probe: their symbols, where their arguments are (the
//! layout table the probes read), what each sends, receives or takes part in (the
//! columns of `call_facts`), and the per-library facts (handle sizes, status layouts).

use super::call_facts::{
    AskedEnvelope, Collective, CollectiveOp, CollectiveShape, Completes, PvmReceived, Receives,
    RequestsIn, Sends,
};
use tracer_common::{
    array_when, call, count_mode, dtype_mode, flavor, status_mode, CallLayout, CallRecord,
    FlavorConfig, ARG_IP,
};

/// Which family of libraries defines a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Mpi,
    Pvm,
    /// The C library's pthread synchronization calls (`tracer record --locks`).
    Threads,
    /// OpenMP: the runtime's (libgomp's or libomp's) parallel regions and barriers, and
    /// the compiler-outlined functions that run in them.
    #[serde(rename = "openmp")]
    OpenMp,
}

/// What a call does, for the matcher and the work clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Setup,
    Send,
    Recv,
    SendRecv,
    Completion,
    Collective,
    /// One-sided access (MPI_Put, MPI_Get): a wait, with no dependency of its own (the
    /// window's fences carry them).
    OneSided,
    /// Takes a lock (mutex, rwlock, spinlock; trylock too: `ret` 0 means it was taken).
    LockAcquire,
    /// Releases a lock.
    LockRelease,
    /// Waits on a condition variable (`handle`), releasing and retaking a mutex (`comm`).
    CondWait,
    /// Wakes waiters of a condition variable.
    CondSignal,
    /// Waits until every thread of a barrier arrived.
    BarrierWait,
    /// Creates a thread (`handle` at exit: its pthread_t). Work of the creator, not a wait.
    ThreadCreate,
    /// Joins a thread (`handle`: its pthread_t; `ret` 0 means it was joined).
    ThreadJoin,
    /// Sets a semaphore's count (`handle`; the value in `peer`).
    SemInit,
    /// Takes one of a semaphore's tokens (`ret` 0 means it did).
    SemWait,
    /// Gives a semaphore a token.
    SemPost,
    /// Starts an OpenMP parallel region (probed; lowered into `OmpFork` and `OmpJoin`).
    OmpParallel,
    /// Runs a compiler-outlined function (probed; lowered into the end of a wait).
    OmpOutlined,
    /// Waits at an OpenMP team barrier until every thread of the team arrived.
    OmpBarrier,
    /// Lowered: the master starts a region's team (its work, not a wait).
    OmpFork,
    /// Lowered: the master waits at the end of its region for the team.
    OmpJoin,
    /// Lowered: a worker waits between two regions (spinning or asleep in libgomp).
    OmpIdle,
    /// Brackets an OpenMP region its master runs alone, calling the outlined function
    /// itself (libomp's `__kmpc_serialized_parallel` and its end; probed; dropped by the
    /// lowering, which then knows that function's return is no worker's arrival).
    OmpSerialized,
}

pub struct CallSpec {
    pub id: u16,
    pub symbol: &'static str,
    pub family: Family,
    pub role: Role,
    pub layout: CallLayout,
    /// Probed only for programs that import it (see `libraries::ImportedCalls`): each
    /// probe costs about 0.1 s to remove at the end, and most programs call few of the
    /// less common MPI calls.
    pub on_demand: bool,
    /// What it sends (`Role::Send` and `Role::SendRecv` calls only).
    pub sends: Option<Sends>,
    /// What it receives (`Role::Recv` and `Role::SendRecv` calls only).
    pub receives: Option<Receives>,
    /// Its collective (`Role::Collective` calls only).
    pub collective: Option<Collective>,
    /// The requests it completes or cancels (`Role::Completion` calls that take
    /// requests).
    pub completes: Option<Completes>,
}

const fn layout() -> CallLayout {
    CallLayout::EMPTY
}

macro_rules! spec {
    ($id:expr, $sym:literal, $fam:ident, $role:ident, { $($field:ident : $val:expr),* $(,)? }) => {
        CallSpec {
            id: $id,
            symbol: $sym,
            family: Family::$fam,
            role: Role::$role,
            layout: CallLayout { $($field: $val,)* ..layout() },
            on_demand: false,
            sends: None,
            receives: None,
            collective: None,
            completes: None,
        }
    };
}

/// A call probed only for programs that import it ([`CallSpec::on_demand`]).
const fn on_demand(spec: CallSpec) -> CallSpec {
    CallSpec {
        on_demand: true,
        ..spec
    }
}

impl CallSpec {
    /// Thread creation and joins: probed in every traced program, where the lock calls
    /// wait for `--locks`.
    pub fn is_thread_lifecycle(&self) -> bool {
        matches!(self.role, Role::ThreadCreate | Role::ThreadJoin)
    }

    /// The call, sending `sends`.
    const fn sends(self, sends: Sends) -> CallSpec {
        CallSpec {
            sends: Some(sends),
            ..self
        }
    }

    /// The call, receiving `receives`.
    const fn receives(self, receives: Receives) -> CallSpec {
        CallSpec {
            receives: Some(receives),
            ..self
        }
    }

    /// The call, completing (or cancelling) requests as `completes` says.
    const fn completes(self, completes: Completes) -> CallSpec {
        CallSpec {
            completes: Some(completes),
            ..self
        }
    }

    /// The call, a member's part in `collective`.
    const fn collective(self, collective: Collective) -> CallSpec {
        CallSpec {
            collective: Some(collective),
            ..self
        }
    }
}

const S: u8 = status_mode::MPI_STATUS;

/// Receives the message the status names, of those its `peer` and `tag` accept.
const RECV: Receives = Receives::Message {
    asked: AskedEnvelope::First,
};
/// MPI_Sendrecv's receive: `peer2` and `tag2` (its first pair is its send's).
const SENDRECV_RECV: Receives = Receives::Message {
    asked: AskedEnvelope::Second,
};
const PVM_RECV_BUFFER: Receives = Receives::PvmMessage {
    received: PvmReceived::BufferId,
};

use CollectiveOp as Op;
use CollectiveShape::{Everyone, FromRoot, Neighbors, ToRoot};
/// MPI_Scan's: rank r depends on ranks 0..=r.
const INCLUSIVE_PREFIX: CollectiveShape = CollectiveShape::Prefix { inclusive: true };
/// MPI_Exscan's: rank r depends on ranks 0..r.
const EXCLUSIVE_PREFIX: CollectiveShape = CollectiveShape::Prefix { inclusive: false };

/// Every probed call. Argument positions are 0-based C argument indexes.
pub static CALLS: &[CallSpec] = &[
    spec!(call::MPI_INIT, "MPI_Init", Mpi, Setup, { want_bias: 1 }),
    spec!(call::MPI_INIT_THREAD, "MPI_Init_thread", Mpi, Setup, { want_bias: 1, out: 3 }),
    spec!(call::MPI_FINALIZE, "MPI_Finalize", Mpi, Setup, {}),
    spec!(call::MPI_COMM_RANK, "MPI_Comm_rank", Mpi, Setup, { comm: 0, out: 1, cannot_block: 1 }),
    spec!(call::MPI_COMM_SIZE, "MPI_Comm_size", Mpi, Setup, { comm: 0, out: 1, cannot_block: 1 }),
    spec!(call::MPI_COMM_DUP, "MPI_Comm_dup", Mpi, Setup, { comm: 0, handle_out: 1 }),
    // color in `peer`, key in `peer2`
    spec!(call::MPI_COMM_SPLIT, "MPI_Comm_split", Mpi, Setup,
        { comm: 0, peer: 1, peer2: 2, handle_out: 3 }),
    // The split type in `peer`, key in `peer2` (the info argument is not read).
    on_demand(
        spec!(call::MPI_COMM_SPLIT_TYPE, "MPI_Comm_split_type", Mpi, Setup,
        { comm: 0, peer: 1, peer2: 2, handle_out: 4 }),
    ),
    // The group, passed by value, in `handle`.
    spec!(call::MPI_COMM_CREATE, "MPI_Comm_create", Mpi, Setup,
        { comm: 0, handle_in: 1, handle_in_by_value: 1, handle_out: 2 }),
    on_demand(
        spec!(call::MPI_COMM_CREATE_GROUP, "MPI_Comm_create_group", Mpi, Setup,
        { comm: 0, handle_in: 1, handle_in_by_value: 1, tag: 2, handle_out: 3 }),
    ),
    // ndims in `count`, dims[] in the handle array.
    on_demand(spec!(call::MPI_CART_CREATE, "MPI_Cart_create", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, handle_out: 5 })),
    // remain_dims (as many ints as the cartesian communicator has dimensions) in the
    // handle array.
    on_demand(spec!(call::MPI_CART_SUB, "MPI_Cart_sub", Mpi, Setup,
        { comm: 0, array: 1, array_elem: 4, array_unsized: 1, handle_out: 2 })),
    // The local leader in `peer`, the peer communicator (by value) in `handle`, the
    // remote leader in `peer2`.
    on_demand(
        spec!(call::MPI_INTERCOMM_CREATE, "MPI_Intercomm_create", Mpi, Setup,
        { comm: 0, peer: 1, handle_in: 2, handle_in_by_value: 1, peer2: 3, tag: 4,
          handle_out: 5 }),
    ),
    // `high` in `peer`.
    on_demand(
        spec!(call::MPI_INTERCOMM_MERGE, "MPI_Intercomm_merge", Mpi, Setup,
        { comm: 0, peer: 1, handle_out: 2 }),
    ),
    // `reorder` in `peer`; the in-neighbours (indegree, sources) in the handle array, for
    // the neighbourhood collectives (their outgoing edges are the other members' sources).
    on_demand(
        spec!(call::MPI_DIST_GRAPH_CREATE_ADJACENT, "MPI_Dist_graph_create_adjacent", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, peer: 8, handle_out: 9 }),
    ),
    on_demand(
        spec!(call::MPI_DIST_GRAPH_CREATE, "MPI_Dist_graph_create", Mpi, Setup,
        { comm: 0, peer: 7, handle_out: 8 }),
    ),
    on_demand(spec!(call::MPI_COMM_FREE, "MPI_Comm_free", Mpi, Setup, { handle_in: 0 })),
    on_demand(
        spec!(call::MPI_NEIGHBOR_ALLGATHER, "MPI_Neighbor_allgather", Mpi, Collective,
        { count: 1, dtype: 2, comm: 6 }).collective(Collective::without_op(Neighbors)),
    ),
    on_demand(
        spec!(call::MPI_NEIGHBOR_ALLGATHERV, "MPI_Neighbor_allgatherv", Mpi, Collective,
        { count: 1, dtype: 2, comm: 7 }).collective(Collective::without_op(Neighbors)),
    ),
    on_demand(
        spec!(call::MPI_NEIGHBOR_ALLTOALL, "MPI_Neighbor_alltoall", Mpi, Collective,
        { count: 1, dtype: 2, comm: 6 }).collective(Collective::without_op(Neighbors)),
    ),
    on_demand(
        spec!(call::MPI_NEIGHBOR_ALLTOALLV, "MPI_Neighbor_alltoallv", Mpi, Collective,
        { comm: 8 }).collective(Collective::without_op(Neighbors)),
    ),
    on_demand(
        spec!(call::MPI_NEIGHBOR_ALLTOALLW, "MPI_Neighbor_alltoallw", Mpi, Collective,
        { comm: 8 }).collective(Collective::without_op(Neighbors)),
    ),
    // Groups: local calls. The input group (by value) in `comm`, ranks in the array.
    on_demand(spec!(call::MPI_COMM_GROUP, "MPI_Comm_group", Mpi, Setup,
        { comm: 0, handle_out: 1, cannot_block: 1 })),
    on_demand(spec!(call::MPI_GROUP_INCL, "MPI_Group_incl", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, handle_out: 3 })),
    on_demand(spec!(call::MPI_GROUP_EXCL, "MPI_Group_excl", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, handle_out: 3 })),
    on_demand(
        spec!(call::MPI_GROUP_RANGE_INCL, "MPI_Group_range_incl", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, array_per_count: 3, handle_out: 3 }),
    ),
    on_demand(
        spec!(call::MPI_GROUP_RANGE_EXCL, "MPI_Group_range_excl", Mpi, Setup,
        { comm: 0, count: 1, array: 2, array_elem: 4, array_per_count: 3, handle_out: 3 }),
    ),
    on_demand(spec!(call::MPI_GROUP_UNION, "MPI_Group_union", Mpi, Setup,
        { comm: 0, handle_in: 1, handle_in_by_value: 1, handle_out: 2, cannot_block: 1 })),
    on_demand(
        spec!(call::MPI_GROUP_INTERSECTION, "MPI_Group_intersection", Mpi, Setup,
        { comm: 0, handle_in: 1, handle_in_by_value: 1, handle_out: 2, cannot_block: 1 }),
    ),
    on_demand(
        spec!(call::MPI_GROUP_DIFFERENCE, "MPI_Group_difference", Mpi, Setup,
        { comm: 0, handle_in: 1, handle_in_by_value: 1, handle_out: 2, cannot_block: 1 }),
    ),
    spec!(call::MPI_SEND, "MPI_Send", Mpi, Send, { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5 })
        .sends(Sends::Message),
    spec!(call::MPI_SSEND, "MPI_Ssend", Mpi, Send, { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5 })
        .sends(Sends::Message),
    spec!(call::MPI_BSEND, "MPI_Bsend", Mpi, Send, { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5 })
        .sends(Sends::Message),
    spec!(call::MPI_RSEND, "MPI_Rsend", Mpi, Send, { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5 })
        .sends(Sends::Message),
    spec!(call::MPI_ISEND, "MPI_Isend", Mpi, Send,
        { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5, handle_out: 6, cannot_block: 1 })
            .sends(Sends::MessageWithRequest),
    spec!(call::MPI_RECV, "MPI_Recv", Mpi, Recv,
        { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5, status: 6, status_mode: S }).receives(RECV),
    spec!(call::MPI_IRECV, "MPI_Irecv", Mpi, Recv,
        { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5, handle_out: 6, cannot_block: 1 })
            .receives(Receives::Request),
    spec!(call::MPI_SENDRECV, "MPI_Sendrecv", Mpi, SendRecv,
        { count: 1, dtype: 2, peer: 3, tag: 4, peer2: 8, tag2: 9, comm: 10, status: 11, status_mode: S })
            .sends(Sends::Message).receives(SENDRECV_RECV),
    spec!(call::MPI_WAIT, "MPI_Wait", Mpi, Completion, { handle_in: 0, status: 1, status_mode: S })
        .completes(Completes::Request { polls: false }),
    spec!(call::MPI_WAITALL, "MPI_Waitall", Mpi, Completion,
        { count: 0, array: 1, status: 2, status_mode: status_mode::MPI_STATUS_ARRAY })
            .completes(Completes::EveryRequest { polls: false }),
    spec!(call::MPI_WAITANY, "MPI_Waitany", Mpi, Completion,
        { count: 0, array: 1, out: 2, status: 3, status_mode: S })
            .completes(Completes::RequestAtIndex),
    spec!(call::MPI_TEST, "MPI_Test", Mpi, Completion,
        { handle_in: 0, out: 1, status: 2, status_mode: S, cannot_block: 1 })
            .completes(Completes::Request { polls: true }),
    spec!(call::MPI_BARRIER, "MPI_Barrier", Mpi, Collective, { comm: 0 })
        .collective(Collective::blocking(Everyone, Op::Barrier)),
    spec!(call::MPI_BCAST, "MPI_Bcast", Mpi, Collective, { count: 1, dtype: 2, peer: 3, comm: 4 })
        .collective(Collective::blocking(FromRoot, Op::Bcast).same_count_everywhere()),
    spec!(call::MPI_REDUCE, "MPI_Reduce", Mpi, Collective, { count: 2, dtype: 3, peer: 5, comm: 6 })
        .collective(Collective::blocking(ToRoot, Op::Reduce).same_count_everywhere()),
    spec!(call::MPI_ALLREDUCE, "MPI_Allreduce", Mpi, Collective, { count: 2, dtype: 3, comm: 5 })
        .collective(Collective::blocking(Everyone, Op::Allreduce).same_count_everywhere()),
    spec!(call::MPI_GATHER, "MPI_Gather", Mpi, Collective, { count: 1, dtype: 2, peer: 6, comm: 7 })
        .collective(Collective::blocking(ToRoot, Op::Gather).same_count_everywhere()),
    spec!(call::MPI_SCATTER, "MPI_Scatter", Mpi, Collective, { count: 1, dtype: 2, peer: 6, comm: 7 })
        .collective(Collective::blocking(FromRoot, Op::Scatter)),
    spec!(call::MPI_ALLGATHER, "MPI_Allgather", Mpi, Collective, { count: 1, dtype: 2, comm: 6 })
        .collective(Collective::blocking(Everyone, Op::Allgather).same_count_everywhere()),
    spec!(call::MPI_ALLTOALL, "MPI_Alltoall", Mpi, Collective, { count: 1, dtype: 2, comm: 6 })
        .collective(Collective::blocking(Everyone, Op::Alltoall).same_count_everywhere()),
    on_demand(spec!(call::MPI_ALLTOALLV, "MPI_Alltoallv", Mpi, Collective, { comm: 8 })
        .collective(Collective::blocking(Everyone, Op::Alltoallv))),
    on_demand(spec!(call::MPI_ALLTOALLW, "MPI_Alltoallw", Mpi, Collective, { comm: 8 })
        .collective(Collective::blocking(Everyone, Op::Alltoallw))),
    on_demand(
        spec!(call::MPI_GATHERV, "MPI_Gatherv", Mpi, Collective, { count: 1, dtype: 2, peer: 7, comm: 8 })
            .collective(Collective::blocking(ToRoot, Op::Gatherv)),
    ),
    on_demand(
        spec!(call::MPI_SCATTERV, "MPI_Scatterv", Mpi, Collective, { count: 5, dtype: 6, peer: 7, comm: 8 })
            .collective(Collective::blocking(FromRoot, Op::Scatterv)),
    ),
    on_demand(
        spec!(call::MPI_ALLGATHERV, "MPI_Allgatherv", Mpi, Collective, { count: 1, dtype: 2, comm: 7 })
            .collective(Collective::blocking(Everyone, Op::Allgatherv)),
    ),
    on_demand(spec!(call::MPI_REDUCE_SCATTER, "MPI_Reduce_scatter", Mpi, Collective, { comm: 5 })
        .collective(Collective::blocking(Everyone, Op::ReduceScatter))),
    on_demand(
        spec!(call::MPI_REDUCE_SCATTER_BLOCK, "MPI_Reduce_scatter_block", Mpi, Collective,
        { count: 2, dtype: 3, comm: 5 })
            .collective(
                Collective::blocking(Everyone, Op::ReduceScatterBlock).same_count_everywhere(),
            ),
    ),
    on_demand(spec!(call::MPI_SCAN, "MPI_Scan", Mpi, Collective, { count: 2, dtype: 3, comm: 5 })
        .collective(Collective::blocking(INCLUSIVE_PREFIX, Op::Scan).same_count_everywhere())),
    on_demand(
        spec!(call::MPI_EXSCAN, "MPI_Exscan", Mpi, Collective, { count: 2, dtype: 3, comm: 5 })
            .collective(Collective::blocking(EXCLUSIVE_PREFIX, Op::Exscan).same_count_everywhere()),
    ),
    on_demand(
        spec!(call::MPI_SENDRECV_REPLACE, "MPI_Sendrecv_replace", Mpi, SendRecv,
        { count: 1, dtype: 2, peer: 3, tag: 4, peer2: 5, tag2: 6, comm: 7, status: 8, status_mode: S })
            .sends(Sends::Message).receives(SENDRECV_RECV),
    ),
    // Tests write their requests only when one completed (`array_when`): a polling loop
    // is then one record per call.
    on_demand(spec!(call::MPI_TESTANY, "MPI_Testany", Mpi, Completion,
        { count: 0, array: 1, out: 2, status: 4, status_mode: S,
          array_when: array_when::IF_OUT_NOT_NEGATIVE })
        .completes(Completes::RequestAtIndex)),
    on_demand(spec!(call::MPI_TESTALL, "MPI_Testall", Mpi, Completion,
        { count: 0, array: 1, out: 2, status: 3, status_mode: status_mode::MPI_STATUS_ARRAY,
          array_when: array_when::IF_OUT_POSITIVE })
        .completes(Completes::EveryRequest { polls: true })),
    // The completed requests' indices (argument 3) are read at exit.
    on_demand(spec!(call::MPI_TESTSOME, "MPI_Testsome", Mpi, Completion,
        { count: 0, array: 1, out: 2, status: 3, status_mode: status_mode::INDEX_ARRAY,
          array_when: array_when::IF_OUT_POSITIVE })
        .completes(Completes::RequestsAtIndices)),
    on_demand(spec!(call::MPI_WAITSOME, "MPI_Waitsome", Mpi, Completion,
        { count: 0, array: 1, out: 2, status: 3, status_mode: status_mode::INDEX_ARRAY })
        .completes(Completes::RequestsAtIndices)),
    // Probes find a message without receiving it: waits, not matched.
    on_demand(spec!(call::MPI_IPROBE, "MPI_Iprobe", Mpi, Completion,
        { peer: 0, tag: 1, comm: 2, out: 3, status: 4, status_mode: S, cannot_block: 1 })),
    on_demand(spec!(call::MPI_PROBE, "MPI_Probe", Mpi, Completion,
        { peer: 0, tag: 1, comm: 2, status: 3, status_mode: S })),
    // Matched probes do receive: the message they find is theirs alone.
    on_demand(spec!(call::MPI_MPROBE, "MPI_Mprobe", Mpi, Recv,
        { peer: 0, tag: 1, comm: 2, status: 4, status_mode: S })
            .receives(Receives::ProbedMessage { polls: false })),
    on_demand(spec!(call::MPI_IMPROBE, "MPI_Improbe", Mpi, Recv,
        { peer: 0, tag: 1, comm: 2, out: 3, status: 5, status_mode: S, cannot_block: 1 })
            .receives(Receives::ProbedMessage { polls: true })),
    on_demand(spec!(call::MPI_MRECV, "MPI_Mrecv", Mpi, Completion, { count: 1, dtype: 2 })),
    on_demand(spec!(call::MPI_IMRECV, "MPI_Imrecv", Mpi, Completion,
        { count: 1, dtype: 2, cannot_block: 1 })),
    on_demand(
        spec!(call::MPI_CANCEL, "MPI_Cancel", Mpi, Completion, { handle_in: 0, cannot_block: 1 })
            .completes(Completes::Cancels),
    ),
    on_demand(spec!(call::MPI_SEND_INIT, "MPI_Send_init", Mpi, Setup,
        { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5, handle_out: 6, cannot_block: 1 })),
    on_demand(spec!(call::MPI_RECV_INIT, "MPI_Recv_init", Mpi, Setup,
        { count: 1, dtype: 2, peer: 3, tag: 4, comm: 5, handle_out: 6, cannot_block: 1 })),
    on_demand(spec!(call::MPI_START, "MPI_Start", Mpi, Send, { handle_in: 0, cannot_block: 1 })
        .sends(Sends::Persistent(RequestsIn::Handle))),
    on_demand(spec!(call::MPI_STARTALL, "MPI_Startall", Mpi, Send, { count: 0, array: 1 })
        .sends(Sends::Persistent(RequestsIn::HandleArray))),
    on_demand(spec!(call::MPI_IBARRIER, "MPI_Ibarrier", Mpi, Collective,
        { comm: 0, handle_out: 1 }).collective(Collective::nonblocking(Everyone, Op::Barrier))),
    on_demand(spec!(call::MPI_IBCAST, "MPI_Ibcast", Mpi, Collective,
        { count: 1, dtype: 2, peer: 3, comm: 4, handle_out: 5 })
            .collective(Collective::nonblocking(FromRoot, Op::Bcast))),
    on_demand(spec!(call::MPI_IREDUCE, "MPI_Ireduce", Mpi, Collective,
        { count: 2, dtype: 3, peer: 5, comm: 6, handle_out: 7 })
            .collective(Collective::nonblocking(ToRoot, Op::Reduce))),
    on_demand(
        spec!(call::MPI_IALLREDUCE, "MPI_Iallreduce", Mpi, Collective,
        { count: 2, dtype: 3, comm: 5, handle_out: 6 })
            .collective(Collective::nonblocking(Everyone, Op::Allreduce)),
    ),
    on_demand(spec!(call::MPI_IGATHER, "MPI_Igather", Mpi, Collective,
        { count: 1, dtype: 2, peer: 6, comm: 7, handle_out: 8 })
            .collective(Collective::nonblocking(ToRoot, Op::Gather))),
    on_demand(spec!(call::MPI_ISCATTER, "MPI_Iscatter", Mpi, Collective,
        { count: 1, dtype: 2, peer: 6, comm: 7, handle_out: 8 })
            .collective(Collective::nonblocking(FromRoot, Op::Scatter))),
    on_demand(
        spec!(call::MPI_IALLGATHER, "MPI_Iallgather", Mpi, Collective,
        { count: 1, dtype: 2, comm: 6, handle_out: 7 })
            .collective(Collective::nonblocking(Everyone, Op::Allgather)),
    ),
    on_demand(spec!(call::MPI_IALLTOALL, "MPI_Ialltoall", Mpi, Collective,
        { count: 1, dtype: 2, comm: 6, handle_out: 7 })
            .collective(Collective::nonblocking(Everyone, Op::Alltoall))),
    on_demand(
        spec!(call::MPI_WIN_CREATE, "MPI_Win_create", Mpi, Setup, { comm: 4, handle_out: 5 }),
    ),
    // The window (by value) in `comm`: the matcher maps it to the window's members.
    on_demand(spec!(call::MPI_WIN_FENCE, "MPI_Win_fence", Mpi, Collective, { comm: 1 })
        .collective(Collective::without_op(Everyone))),
    on_demand(spec!(call::MPI_PUT, "MPI_Put", Mpi, OneSided, { peer: 3, comm: 7 })),
    on_demand(spec!(call::MPI_GET, "MPI_Get", Mpi, OneSided, { peer: 3, comm: 7 })),
    on_demand(spec!(call::MPI_WIN_FREE, "MPI_Win_free", Mpi, Setup, { handle_in: 0 })),
    spec!(call::PVM_MYTID, "pvm_mytid", Pvm, Setup, { want_bias: 1 }),
    spec!(call::PVM_SEND, "pvm_send", Pvm, Send, { peer: 0, tag: 1, want_bias: 1 })
        .sends(Sends::Message),
    spec!(call::PVM_PSEND, "pvm_psend", Pvm, Send,
        { peer: 0, tag: 1, count: 3, dtype: 4, want_bias: 1 }).sends(Sends::Message),
    spec!(call::PVM_MCAST, "pvm_mcast", Pvm, Send,
        { array: 0, count: 1, tag: 2, array_elem: 4, want_bias: 1 }).sends(Sends::Multicast),
    spec!(call::PVM_RECV, "pvm_recv", Pvm, Recv,
        { peer: 0, tag: 1, status_mode: status_mode::PVM_RBUF, want_bias: 1 })
            .receives(PVM_RECV_BUFFER),
    spec!(call::PVM_NRECV, "pvm_nrecv", Pvm, Recv,
        { peer: 0, tag: 1, status_mode: status_mode::PVM_RBUF, want_bias: 1, cannot_block: 1 })
            .receives(PVM_RECV_BUFFER),
    spec!(call::PVM_TRECV, "pvm_trecv", Pvm, Recv,
        { peer: 0, tag: 1, status_mode: status_mode::PVM_RBUF, want_bias: 1 })
            .receives(PVM_RECV_BUFFER),
    spec!(call::PVM_PRECV, "pvm_precv", Pvm, Recv,
        { peer: 0, tag: 1, count: 3, dtype: 4, status: 5,
          status_mode: status_mode::INT_POINTERS, want_bias: 1 })
              .receives(Receives::PvmMessage { received: PvmReceived::Zero }),
    spec!(call::PVM_EXIT, "pvm_exit", Pvm, Setup, { want_bias: 1 }),
    // pthreads (the C library): the object's address is argument 0, taken by value
    // (`FlavorConfig::handle_by_value`); a condition wait's mutex is argument 1.
    spec!(call::PTHREAD_MUTEX_LOCK, "pthread_mutex_lock", Threads, LockAcquire, { handle_in: 0 }),
    spec!(call::PTHREAD_MUTEX_TRYLOCK, "pthread_mutex_trylock", Threads, LockAcquire,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_MUTEX_UNLOCK, "pthread_mutex_unlock", Threads, LockRelease,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_RWLOCK_RDLOCK, "pthread_rwlock_rdlock", Threads, LockAcquire,
        { handle_in: 0 }),
    spec!(call::PTHREAD_RWLOCK_WRLOCK, "pthread_rwlock_wrlock", Threads, LockAcquire,
        { handle_in: 0 }),
    spec!(call::PTHREAD_RWLOCK_UNLOCK, "pthread_rwlock_unlock", Threads, LockRelease,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_SPIN_LOCK, "pthread_spin_lock", Threads, LockAcquire, { handle_in: 0 }),
    spec!(call::PTHREAD_SPIN_UNLOCK, "pthread_spin_unlock", Threads, LockRelease,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_COND_WAIT, "pthread_cond_wait", Threads, CondWait,
        { handle_in: 0, comm: 1 }),
    spec!(call::PTHREAD_COND_TIMEDWAIT, "pthread_cond_timedwait", Threads, CondWait,
        { handle_in: 0, comm: 1 }),
    spec!(call::PTHREAD_COND_SIGNAL, "pthread_cond_signal", Threads, CondSignal,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_COND_BROADCAST, "pthread_cond_broadcast", Threads, CondSignal,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_BARRIER_WAIT, "pthread_barrier_wait", Threads, BarrierWait,
        { handle_in: 0 }),
    // POSIX semaphores: sem_t by value, like the locks; sem_init's value is argument 2.
    spec!(call::SEM_INIT, "sem_init", Threads, SemInit, { handle_in: 0, peer: 2, cannot_block: 1 }),
    spec!(call::SEM_WAIT, "sem_wait", Threads, SemWait, { handle_in: 0 }),
    spec!(call::SEM_TRYWAIT, "sem_trywait", Threads, SemWait, { handle_in: 0, cannot_block: 1 }),
    spec!(call::SEM_TIMEDWAIT, "sem_timedwait", Threads, SemWait, { handle_in: 0 }),
    spec!(call::SEM_CLOCKWAIT, "sem_clockwait", Threads, SemWait, { handle_in: 0 }),
    spec!(call::SEM_POST, "sem_post", Threads, SemPost, { handle_in: 0, cannot_block: 1 }),
    // Thread creation and joins, probed without --locks (they are rare). glibc's four
    // joins share one internal function that has no symbol, so each is probed.
    spec!(call::PTHREAD_CREATE, "pthread_create", Threads, ThreadCreate, { handle_out: 0 }),
    spec!(call::PTHREAD_JOIN, "pthread_join", Threads, ThreadJoin, { handle_in: 0 }),
    spec!(call::PTHREAD_TRYJOIN_NP, "pthread_tryjoin_np", Threads, ThreadJoin,
        { handle_in: 0, cannot_block: 1 }),
    spec!(call::PTHREAD_TIMEDJOIN_NP, "pthread_timedjoin_np", Threads, ThreadJoin,
        { handle_in: 0 }),
    spec!(call::PTHREAD_CLOCKJOIN_NP, "pthread_clockjoin_np", Threads, ThreadJoin,
        { handle_in: 0 }),
    // OpenMP (libgomp). The region's outlined function and its data in `comm` and
    // `handle` (flavor Glibc: passed by value).
    spec!(call::GOMP_PARALLEL, "GOMP_parallel", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_STATIC, "GOMP_parallel_loop_static", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_DYNAMIC, "GOMP_parallel_loop_dynamic", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_GUIDED, "GOMP_parallel_loop_guided", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_RUNTIME, "GOMP_parallel_loop_runtime", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_NONMONOTONIC_DYNAMIC, "GOMP_parallel_loop_nonmonotonic_dynamic",
        OpenMp, OmpParallel, { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_LOOP_NONMONOTONIC_GUIDED, "GOMP_parallel_loop_nonmonotonic_guided",
        OpenMp, OmpParallel, { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_SECTIONS, "GOMP_parallel_sections", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    spec!(call::GOMP_PARALLEL_REDUCTIONS, "GOMP_parallel_reductions", OpenMp, OmpParallel,
        { comm: 0, handle_in: 1, peer: 2 }),
    // Probed at each `*._omp_fn.*` symbol of the program (not a libgomp symbol).
    spec!(call::OMP_OUTLINED, "omp_outlined_function", OpenMp, OmpOutlined,
        { comm: ARG_IP, handle_in: 0 }),
    spec!(call::GOMP_BARRIER, "GOMP_barrier", OpenMp, OmpBarrier, {}),
    spec!(
        call::GOMP_BARRIER_CANCEL,
        "GOMP_barrier_cancel",
        OpenMp,
        OmpBarrier,
        {}
    ),
    spec!(call::GOMP_LOOP_END, "GOMP_loop_end", OpenMp, OmpBarrier, {}),
    spec!(
        call::GOMP_LOOP_END_CANCEL,
        "GOMP_loop_end_cancel",
        OpenMp,
        OmpBarrier,
        {}
    ),
    spec!(
        call::GOMP_SECTIONS_END,
        "GOMP_sections_end",
        OpenMp,
        OmpBarrier,
        {}
    ),
    spec!(
        call::GOMP_SECTIONS_END_CANCEL,
        "GOMP_sections_end_cancel",
        OpenMp,
        OmpBarrier,
        {}
    ),
    // OpenMP (LLVM's libomp). __kmpc_fork_call(loc, argc, microtask, shared...): the
    // microtask and its first shared argument name the region, as GOMP_parallel's
    // function and data do; `peer` = argc (with none, the lowering keys on 0).
    spec!(call::KMPC_FORK_CALL, "__kmpc_fork_call", OpenMp, OmpParallel,
        { peer: 1, comm: 2, handle_in: 3 }),
    // Probed at each `.omp_outlined.*` and `.omp_task_entry.*` symbol of the program:
    // microtask(&gtid, &btid, shared...).
    spec!(call::KMP_OUTLINED, "kmp_outlined_function", OpenMp, OmpOutlined,
        { comm: ARG_IP, handle_in: 2 }),
    spec!(call::KMPC_BARRIER, "__kmpc_barrier", OpenMp, OmpBarrier, {}),
    spec!(
        call::KMPC_CANCEL_BARRIER,
        "__kmpc_cancel_barrier",
        OpenMp,
        OmpBarrier,
        {}
    ),
    spec!(call::KMPC_REDUCE, "__kmpc_reduce", OpenMp, OmpBarrier, {}),
    spec!(
        call::KMPC_END_REDUCE,
        "__kmpc_end_reduce",
        OpenMp,
        OmpBarrier,
        {}
    ),
    spec!(
        call::KMPC_SERIALIZED_PARALLEL,
        "__kmpc_serialized_parallel",
        OpenMp,
        OmpSerialized,
        {}
    ),
    spec!(
        call::KMPC_END_SERIALIZED_PARALLEL,
        "__kmpc_end_serialized_parallel",
        OpenMp,
        OmpSerialized,
        {}
    ),
    // Lowered from the records above (never probed).
    spec!(call::OMP_FORK, "omp_fork", OpenMp, OmpFork, {}),
    spec!(call::OMP_JOIN, "omp_join", OpenMp, OmpJoin, {}),
    spec!(call::OMP_IDLE, "omp_idle", OpenMp, OmpIdle, {}),
];

/// The call with id `id` (looked up on every call record: an index, not a search).
pub fn spec(id: u16) -> Option<&'static CallSpec> {
    static BY_ID: std::sync::OnceLock<Vec<Option<&'static CallSpec>>> = std::sync::OnceLock::new();
    BY_ID
        .get_or_init(|| {
            let mut by_id = vec![None; call::TABLE_SIZE as usize];
            for c in CALLS {
                by_id[c.id as usize] = Some(c);
            }
            by_id
        })
        .get(id as usize)
        .copied()
        .flatten()
}

/// Whether time inside call `id` is waiting, not work: every probed call but
/// pthread_create, an OpenMP fork, and the raw OpenMP records (lowered before anything
/// reads them). Unknown ids wait, as MPI/PVM calls do.
pub fn waits(id: u16) -> bool {
    spec(id).is_none_or(|s| {
        !matches!(
            s.role,
            Role::ThreadCreate
                | Role::OmpFork
                | Role::OmpParallel
                | Role::OmpOutlined
                | Role::OmpSerialized
        )
    })
}

/// Whether a call that polls (tests a request, probes for a message, or receives without
/// waiting) returned with nothing, as its exit record `exit` shows: the flag it wrote is
/// 0, the index MPI_UNDEFINED (negative), the count 0, or pvm_nrecv/pvm_trecv's buffer
/// id 0. A call that failed found nothing either, but is no polling loop: false.
pub fn polled_nothing(id: u16, exit: &CallRecord) -> bool {
    let succeeded = match spec(id).map(|s| s.family) {
        Some(Family::Pvm) => exit.ret >= 0,
        _ => exit.ret == 0,
    };
    succeeded
        && match id {
            call::MPI_TEST | call::MPI_TESTALL | call::MPI_IPROBE | call::MPI_IMPROBE => {
                exit.out == 0
            }
            call::MPI_TESTANY => exit.out < 0,
            call::MPI_TESTSOME => exit.out <= 0,
            call::PVM_NRECV | call::PVM_TRECV => exit.ret == 0,
            _ => false,
        }
}

/// Whether call id `id` is an MPI or PVM call (not a pthread call). Ids are not ordered
/// by family: MPI calls were added after the pthread ones (130 and up).
pub fn is_mpi_or_pvm(id: u16) -> bool {
    spec(id).is_some_and(|s| matches!(s.family, Family::Mpi | Family::Pvm))
}

/// Name of a call id, or "call#N".
pub fn name(id: u16) -> String {
    spec(id)
        .map(|c| c.symbol.to_string())
        .unwrap_or_else(|| format!("call#{id}"))
}

/// A call record header's `call` field, split: the call id in the low byte, the library
/// flavor in the high one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallField {
    pub id: u16,
    pub flavor: u8,
}

/// Split the header's `call` field of a call record into its call id and flavor.
pub fn split_call_field(field: u16) -> CallField {
    CallField {
        id: field & 0xff,
        flavor: (field >> 8) as u8,
    }
}

/// A library family as the probes see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    OpenMpi,
    Mpich,
    Pvm,
    /// glibc's pthread calls.
    Glibc,
}

impl Flavor {
    /// Every flavor.
    const ALL: [Flavor; 4] = [Flavor::OpenMpi, Flavor::Mpich, Flavor::Pvm, Flavor::Glibc];

    /// The flavor's id in the probes' tables and in call records (the one mapping between
    /// the two: [`Flavor::from_id`] searches it).
    pub fn id(self) -> u8 {
        match self {
            Flavor::OpenMpi => flavor::OPEN_MPI,
            Flavor::Mpich => flavor::MPICH,
            Flavor::Pvm => flavor::PVM,
            Flavor::Glibc => flavor::GLIBC_PTHREAD,
        }
    }

    pub fn from_id(id: u8) -> Option<Flavor> {
        Flavor::ALL.into_iter().find(|f| f.id() == id)
    }

    pub fn family(self) -> Family {
        match self {
            Flavor::OpenMpi | Flavor::Mpich => Family::Mpi,
            Flavor::Pvm => Family::Pvm,
            Flavor::Glibc => Family::Threads,
        }
    }

    /// `MPI_PROC_NULL` (Open MPI -2, MPICH -1): a send or receive that moves nothing.
    pub(crate) fn proc_null(self) -> Option<i32> {
        match self {
            Flavor::OpenMpi => Some(-2),
            Flavor::Mpich => Some(-1),
            Flavor::Pvm | Flavor::Glibc => None,
        }
    }

    /// `MPI_ROOT` (Open MPI -4, MPICH -3): the root of a rooted collective on an
    /// intercommunicator, as the root passes it.
    pub(crate) fn mpi_root(self) -> Option<i32> {
        match self {
            Flavor::OpenMpi => Some(-4),
            Flavor::Mpich => Some(-3),
            Flavor::Pvm | Flavor::Glibc => None,
        }
    }

    /// `MPI_COMM_TYPE_SHARED` (Open MPI 0, the first of its enum; MPICH 1).
    pub(crate) fn comm_type_shared(self) -> Option<i32> {
        match self {
            Flavor::OpenMpi => Some(0),
            Flavor::Mpich => Some(1),
            Flavor::Pvm | Flavor::Glibc => None,
        }
    }

    /// `MPI_ANY_SOURCE` (Open MPI -1, MPICH -2; PVM's wildcard task id is -1).
    pub fn any_source(self) -> i32 {
        match self {
            Flavor::Mpich => -2,
            _ => -1,
        }
    }

    /// The probes' facts about this family. `rbuf_vaddr` is PVM's `pvmrbuf` global.
    pub fn config(self, rbuf_vaddr: u64) -> FlavorConfig {
        match self {
            // MPI_Status { int MPI_SOURCE; int MPI_TAG; int MPI_ERROR; int _cancelled;
            // size_t _ucount; }; MPI_Datatype points at an opal_datatype_t whose size_t
            // `size` is at offset 24 (non-debug build).
            Flavor::OpenMpi => FlavorConfig {
                handle_size: 8,
                dtype_mode: dtype_mode::POINTER_TO_SIZE,
                dtype_size_off: 24,
                count_mode: count_mode::SIZE_T,
                status_size: 24,
                status_source_off: 0,
                status_tag_off: 4,
                status_count_off: 16,
                ..Default::default()
            },
            // MPI_Status { int count_lo; int count_hi_and_cancelled; int MPI_SOURCE;
            // int MPI_TAG; int MPI_ERROR; }; handles are ints.
            Flavor::Mpich => FlavorConfig {
                handle_size: 4,
                dtype_mode: dtype_mode::MPICH_HANDLE,
                count_mode: count_mode::MPICH_SPLIT,
                status_size: 20,
                status_source_off: 8,
                status_tag_off: 12,
                status_count_off: 0,
                ..Default::default()
            },
            // struct pmsg (PVM 3.4 lpvm): m_len at 48, m_tag at 56, m_src at 64.
            Flavor::Pvm => FlavorConfig {
                handle_size: 4,
                dtype_mode: dtype_mode::PVM_CODE,
                rbuf_vaddr,
                pmsg_len_off: 48,
                pmsg_tag_off: 56,
                pmsg_src_off: 64,
                ..Default::default()
            },
            // Pointers to the objects, taken as they are: no datatype, no status.
            Flavor::Glibc => FlavorConfig {
                handle_size: 8,
                handle_by_value: 1,
                ..Default::default()
            },
        }
    }
}

/// Open MPI's MPI_COMM_WORLD is the address of this data symbol in libmpi.
pub const OMPI_COMM_WORLD_SYMBOL: &str = "ompi_mpi_comm_world";
/// Open MPI's MPI_COMM_SELF is the address of this data symbol in libmpi.
pub const OMPI_COMM_SELF_SYMBOL: &str = "ompi_mpi_comm_self";
/// MPICH's MPI_COMM_WORLD handle.
pub(crate) const MPICH_COMM_WORLD: u64 = 0x4400_0000;
/// MPICH's MPI_COMM_SELF handle.
pub(crate) const MPICH_COMM_SELF: u64 = 0x4400_0001;
/// PVM's current receive buffer (struct pmsg *).
pub const PVM_RBUF_SYMBOL: &str = "pvmrbuf";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::call_facts::{CollectiveShape, Completes, Moment, SEND_POSTED_AT};
    use tracer_common::NO_ARG;

    /// What a call sends, receives, completes or takes part in is filled for the calls
    /// whose role says they do, and for no other; and each fact finds the arguments it
    /// needs.
    #[test]
    fn message_and_collective_facts_are_those_of_the_role() {
        assert_eq!(SEND_POSTED_AT, Moment::Entry);
        for c in CALLS {
            let l = &c.layout;
            let name = c.symbol;
            let sends = matches!(c.role, Role::Send | Role::SendRecv);
            let receives = matches!(c.role, Role::Recv | Role::SendRecv);
            assert_eq!(c.sends.is_some(), sends, "{name}");
            assert_eq!(c.receives.is_some(), receives, "{name}");
            assert_eq!(c.collective.is_some(), c.role == Role::Collective, "{name}");
            match c.sends {
                Some(Sends::Message) => assert_ne!(l.tag, NO_ARG, "{name}"),
                Some(Sends::MessageWithRequest) => {
                    assert_eq!(
                        c.sends.and_then(Sends::request_known_at),
                        Some(Moment::Exit)
                    );
                    assert_ne!(l.handle_out, NO_ARG, "{name}: the request, at exit");
                    assert_ne!(l.tag, NO_ARG, "{name}");
                }
                Some(Sends::Persistent(RequestsIn::Handle)) => assert_ne!(l.handle_in, NO_ARG),
                Some(Sends::Persistent(RequestsIn::HandleArray)) => assert_ne!(l.array, NO_ARG),
                Some(Sends::Multicast) => {
                    assert_eq!(c.family, Family::Pvm, "{name}");
                    assert_ne!(l.array, NO_ARG, "{name}: the tasks");
                }
                None => {}
            }
            match c.receives {
                Some(Receives::Message { asked }) => {
                    let (peer, tag) = match asked {
                        AskedEnvelope::First => (l.peer, l.tag),
                        AskedEnvelope::Second => (l.peer2, l.tag2),
                    };
                    assert!(peer != NO_ARG && tag != NO_ARG, "{name}");
                    assert_ne!(l.status, NO_ARG, "{name}: what came is in the status");
                }
                Some(Receives::ProbedMessage { polls }) => {
                    assert_eq!(polls, l.cannot_block != 0, "{name}");
                    assert_ne!(l.status, NO_ARG, "{name}");
                }
                Some(Receives::Request) => assert_ne!(l.handle_out, NO_ARG, "{name}"),
                Some(Receives::PvmMessage { .. }) => assert_eq!(c.family, Family::Pvm),
                None => {}
            }
            // Every completion that takes requests says which it completes, from where.
            let takes_requests = l.handle_in != NO_ARG || l.array != NO_ARG;
            assert_eq!(
                c.completes.is_some(),
                c.role == Role::Completion && takes_requests,
                "{name}"
            );
            match c.completes {
                Some(Completes::Request { polls }) => {
                    assert_ne!(l.handle_in, NO_ARG, "{name}");
                    assert_eq!(polls, l.out != NO_ARG, "{name}: the flag");
                    assert_eq!(l.status_mode, S, "{name}");
                }
                Some(Completes::RequestAtIndex) => {
                    assert_ne!(l.out, NO_ARG, "{name}: the index");
                    assert_eq!(l.status_mode, S, "{name}");
                }
                Some(Completes::EveryRequest { polls }) => {
                    assert_eq!(polls, l.out != NO_ARG, "{name}: the flag");
                    assert_eq!(l.status_mode, status_mode::MPI_STATUS_ARRAY, "{name}");
                }
                Some(Completes::RequestsAtIndices) => {
                    assert_ne!(l.out, NO_ARG, "{name}: how many");
                    assert_eq!(l.status_mode, status_mode::INDEX_ARRAY, "{name}");
                }
                Some(Completes::Cancels) => assert_ne!(l.handle_in, NO_ARG, "{name}"),
                None => {}
            }
            if let Some(done) = c.completes {
                assert_eq!(done.takes_array(), l.array != NO_ARG, "{name}");
                assert_eq!(done.takes_array(), l.count != NO_ARG, "{name}: how many");
            }
            if let Some(coll) = c.collective {
                assert_eq!(c.family, Family::Mpi, "{name}");
                assert_ne!(coll.shape, CollectiveShape::NoData, "{name}");
                assert_ne!(l.comm, NO_ARG, "{name}");
                // A nonblocking collective's request is written at its exit.
                assert_eq!(coll.nonblocking, l.handle_out != NO_ARG, "{name}");
                if coll.count_at_every_member {
                    assert_ne!(l.count, NO_ARG, "{name}");
                    assert!(!coll.nonblocking, "{name}");
                }
                // A rooted collective reads its root.
                let rooted = matches!(
                    coll.shape,
                    CollectiveShape::FromRoot | CollectiveShape::ToRoot
                );
                assert_eq!(rooted, l.peer != NO_ARG, "{name}");
            }
        }
    }

    #[test]
    fn calls_that_cannot_block_are_written_whole() {
        // The probes hold such a call's entry back until its exit, which only works for
        // a single record: no array of handles or statuses after it.
        let whole: Vec<&str> = CALLS
            .iter()
            .filter(|c| c.layout.cannot_block != 0)
            .map(|c| c.symbol)
            .collect();
        for c in CALLS.iter().filter(|c| c.layout.cannot_block != 0) {
            assert_eq!(c.layout.array, NO_ARG, "{}", c.symbol);
            assert_ne!(c.layout.status_mode, status_mode::MPI_STATUS_ARRAY);
            assert!(!matches!(
                c.role,
                Role::Collective | Role::CondWait | Role::BarrierWait
            ));
        }
        assert_eq!(
            whole,
            [
                "MPI_Comm_rank",
                "MPI_Comm_size",
                "MPI_Comm_group",
                "MPI_Group_union",
                "MPI_Group_intersection",
                "MPI_Group_difference",
                "MPI_Isend",
                "MPI_Irecv",
                "MPI_Test",
                "MPI_Iprobe",
                "MPI_Improbe",
                "MPI_Imrecv",
                "MPI_Cancel",
                "MPI_Send_init",
                "MPI_Recv_init",
                "MPI_Start",
                "pvm_nrecv",
                "pthread_mutex_trylock",
                "pthread_mutex_unlock",
                "pthread_rwlock_unlock",
                "pthread_spin_unlock",
                "pthread_cond_signal",
                "pthread_cond_broadcast",
                "sem_init",
                "sem_trywait",
                "sem_post",
                "pthread_tryjoin_np",
            ]
        );
    }

    #[test]
    fn thread_creation_and_joins_read_the_pthread_t_only() {
        let lifecycle: Vec<&CallSpec> = CALLS.iter().filter(|c| c.is_thread_lifecycle()).collect();
        let names: Vec<&str> = lifecycle.iter().map(|c| c.symbol).collect();
        assert_eq!(
            names,
            [
                "pthread_create",
                "pthread_join",
                "pthread_tryjoin_np",
                "pthread_timedjoin_np",
                "pthread_clockjoin_np"
            ]
        );
        for c in lifecycle {
            let l = &c.layout;
            assert_eq!(c.family, Family::Threads);
            // pthread_create writes the new pthread_t through argument 0; a join takes it
            // by value in argument 0.
            let create = c.role == Role::ThreadCreate;
            assert_eq!(
                l.handle_out,
                if create { 0 } else { NO_ARG },
                "{}",
                c.symbol
            );
            assert_eq!(l.handle_in, if create { NO_ARG } else { 0 }, "{}", c.symbol);
            assert_eq!(waits(c.id), !create, "{}", c.symbol);
        }
    }

    #[test]
    fn call_ids_are_unique_and_fit_the_table() {
        let mut ids: Vec<u16> = CALLS.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CALLS.len());
        assert!(ids
            .iter()
            .all(|&id| (id as u32) < call::TABLE_SIZE && id < 256));
    }

    #[test]
    fn pthread_calls_read_only_the_object_and_a_condition_waits_mutex() {
        let threads: Vec<&CallSpec> = CALLS
            .iter()
            .filter(|c| c.family == Family::Threads && !c.is_thread_lifecycle())
            .collect();
        assert_eq!(threads.len(), 19);
        for c in threads {
            let l = &c.layout;
            assert_eq!(l.handle_in, 0, "{}: the object is argument 0", c.symbol);
            let cond_wait = c.role == Role::CondWait;
            assert_eq!(l.comm, if cond_wait { 1 } else { NO_ARG }, "{}", c.symbol);
            // sem_init's initial value.
            let sem_init = c.role == Role::SemInit;
            assert_eq!(l.peer, if sem_init { 2 } else { NO_ARG }, "{}", c.symbol);
            for a in [
                l.tag,
                l.peer2,
                l.tag2,
                l.count,
                l.dtype,
                l.handle_out,
                l.out,
            ]
            .into_iter()
            .chain([l.array, l.status])
            {
                assert_eq!(a, NO_ARG, "{}", c.symbol);
            }
            assert_eq!(l.status_mode, status_mode::NONE);
            assert_eq!(l.want_bias, 0);
        }
        let f = Flavor::Glibc;
        assert_eq!(Flavor::from_id(f.id()), Some(f));
        assert_eq!(f.family(), Family::Threads);
        assert!((f.id() as u32) < flavor::COUNT);
        let cfg = f.config(0);
        assert_eq!((cfg.handle_size, cfg.handle_by_value), (8, 1));
        assert_eq!(cfg.dtype_mode, dtype_mode::NONE);
    }

    #[test]
    fn flavor_ids_round_trip_and_fit_the_flavor_table() {
        for f in Flavor::ALL {
            assert_eq!(Flavor::from_id(f.id()), Some(f));
            assert!(f.id() != 0 && (f.id() as u32) < flavor::COUNT, "{f:?}");
        }
        assert_eq!(Flavor::from_id(0), None);
        assert_eq!(Flavor::from_id(flavor::COUNT as u8), None);
    }

    #[test]
    fn argument_positions_are_within_what_the_probe_reads() {
        for c in CALLS {
            let l = &c.layout;
            // `comm` may be the probed address itself (the probe reads it for `comm`).
            assert!(
                l.comm == ARG_IP || l.comm == NO_ARG || l.comm <= 13,
                "{}",
                c.symbol
            );
            for a in [
                l.peer,
                l.tag,
                l.peer2,
                l.tag2,
                l.count,
                l.dtype,
                l.handle_in,
                l.handle_out,
                l.out,
                l.array,
                l.status,
            ] {
                assert!(a == NO_ARG || a <= 13, "{}: argument {a}", c.symbol);
            }
        }
    }
}
