//! What a probed call does with messages, requests and collectives: the columns of the call table
//! (`calls::CALLS`) that the matcher and the exports read, instead of lists of call ids
//! of their own. A column says what the call does and when its records show it (its
//! entry or its exit); what a reader makes of that (an OTF2 event at the exit, a
//! matcher queue at the entry) is the reader's, documented there.

use tracer_common::CallRecord;

/// A moment of a call: the one of its two records that shows a fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    Entry,
    Exit,
}

/// Which of a call's (peer, tag) argument pairs a receive asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskedEnvelope {
    /// `peer` and `tag` (MPI_Recv, a matched probe).
    First,
    /// `peer2` and `tag2`: MPI_Sendrecv's receive (its first pair is its send).
    Second,
}

/// Where the requests a call starts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestsIn {
    /// The `handle` of the entry (MPI_Start).
    Handle,
    /// The handle array after the entry (MPI_Startall).
    HandleArray,
}

/// What a call sends. Every send is posted at its call's entry ([`SEND_POSTED_AT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sends {
    /// The message the entry's arguments describe (`peer`, `tag`, `comm`, the count;
    /// PVM: the task id and tag), delivered or buffered before the call returns.
    Message,
    /// The message the entry's arguments describe, only started: the request the exit
    /// writes (`handle`) names the send until a Wait or Test completes it (MPI_Isend).
    /// The message is known at the entry, its request only at the exit
    /// ([`Sends::request_known_at`]).
    MessageWithRequest,
    /// The persistent requests it starts, each as its init described it (MPI_Send_init:
    /// a message sent; MPI_Recv_init: a receive request posted, as by MPI_Irecv).
    Persistent(RequestsIn),
    /// One copy of the message to each task in the handle array after the entry
    /// (pvm_mcast).
    Multicast,
}

/// When a send's message leaves, for every send: at its call's entry. The entry's
/// arguments are its whole envelope, and its receiver may complete before the sender's
/// exit is seen (an eager message; the exit of a rendezvous send can come after the
/// receive's): the receiver depends on the sender as it was at the entry. MPI orders
/// the messages between two processes on a communicator and tag by their sends' starts.
pub(crate) const SEND_POSTED_AT: Moment = Moment::Entry;

impl Sends {
    /// When the request that names the send is known: at the exit, which writes it, for
    /// a send that only starts ([`Sends::MessageWithRequest`]); none for the others (a
    /// persistent request was known at its init's exit, before it was started).
    pub fn request_known_at(self) -> Option<Moment> {
        match self {
            Sends::MessageWithRequest => Some(Moment::Exit),
            Sends::Message | Sends::Persistent(_) | Sends::Multicast => None,
        }
    }
}

/// How a PVM receive's return value says a message came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PvmReceived {
    /// A positive receive buffer id (pvm_recv, pvm_nrecv, pvm_trecv; 0: nothing came).
    BufferId,
    /// 0 (pvm_precv, which returns a status, not a buffer).
    Zero,
}

impl PvmReceived {
    /// Whether return value `ret` says a message came.
    pub fn got_message(self, ret: i64) -> bool {
        match self {
            PvmReceived::BufferId => ret > 0,
            PvmReceived::Zero => ret == 0,
        }
    }
}

/// What a call receives. A message received is known at the exit, whose status names
/// the message that came (the entry only names what the receive accepts: a wildcard
/// source or tag, a count that is an upper bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receives {
    /// The message its exit's status names, of those the `asked` pair accepts.
    Message { asked: AskedEnvelope },
    /// A matched probe: the message it found (at the exit), its own alone, which
    /// MPI_Mrecv or MPI_Imrecv then copies out. `polls`: it may find none (MPI_Improbe,
    /// whose flag, `out`, is then 0).
    ProbedMessage { polls: bool },
    /// A receive request, posted at the exit (which writes its `handle`), whose message
    /// the Wait or Test that completes it delivers (MPI_Irecv).
    Request,
    /// PVM: the message in the receive buffer at the exit, if one came.
    PvmMessage { received: PvmReceived },
}

impl Receives {
    /// Whether a matched probe's exit `exit` found the message it takes for its own: it
    /// returned 0 and, polling (MPI_Improbe), its flag (`out`) is 1. False for the other
    /// receives, whose exits say what came in their own ways.
    pub fn found_message(self, exit: &CallRecord) -> bool {
        match self {
            Receives::ProbedMessage { polls } => exit.ret == 0 && (!polls || exit.out == 1),
            Receives::Message { .. } | Receives::Request | Receives::PvmMessage { .. } => false,
        }
    }
}

/// Whom a member's exit from a collective depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveShape {
    /// Every member's entry (barrier, allreduce, alltoall(v/w), allgather(v),
    /// reduce_scatter, a window fence).
    Everyone,
    /// The root's entry, for the other members (bcast, scatter(v)).
    FromRoot,
    /// Every member's entry, for the root only (reduce, gather(v)).
    ToRoot,
    /// The entries of ranks 0..=r (scan) or 0..r (exscan) for rank r.
    Prefix { inclusive: bool },
    /// The member's in-neighbours' (neighbourhood collectives on a distributed graph).
    Neighbors,
    /// Nobody's: a collective of zero elements moves no data, and MPI libraries return
    /// from one at once (Open MPI's MPI_Bcast of 0 elements: a member left before the
    /// root arrived, in hpcc). No call's shape in the table: what the matcher makes of
    /// one whose count is 0 at every member ([`Collective::count_at_every_member`]).
    NoData,
}

/// An MPI collective operation, numbered as OTF2's `OTF2_CollectiveOp` (the OTF2 export
/// writes it as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CollectiveOp {
    Barrier = 0,
    Bcast = 1,
    Gather = 2,
    Gatherv = 3,
    Scatter = 4,
    Scatterv = 5,
    Allgather = 6,
    Allgatherv = 7,
    Alltoall = 8,
    Alltoallv = 9,
    Alltoallw = 10,
    Allreduce = 11,
    Reduce = 12,
    ReduceScatter = 13,
    Scan = 14,
    Exscan = 15,
    ReduceScatterBlock = 16,
}

/// A member's part in a collective. Every member's entry is its arrival, its exit (or,
/// nonblocking, the Wait or Test completing its request) its departure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collective {
    pub shape: CollectiveShape,
    /// Only starts: a nonblocking collective, completed by a Wait or Test on the
    /// request its exit writes.
    pub nonblocking: bool,
    /// The element count the probe reads is the same at every member (so that 0 at one
    /// member is 0 at all): not MPI_Scatter's send count, which only the root's call
    /// gives, nor the v/w collectives' count arrays.
    pub count_at_every_member: bool,
    /// The operation, as MPI's standard names it; none for those OTF2 has no
    /// operation for (neighbourhood collectives, window fences).
    pub op: Option<CollectiveOp>,
}

impl Collective {
    /// A blocking collective of operation `op`.
    pub const fn blocking(shape: CollectiveShape, op: CollectiveOp) -> Self {
        Collective {
            shape,
            nonblocking: false,
            count_at_every_member: false,
            op: Some(op),
        }
    }

    /// A nonblocking collective of operation `op`.
    pub const fn nonblocking(shape: CollectiveShape, op: CollectiveOp) -> Self {
        Collective {
            nonblocking: true,
            ..Self::blocking(shape, op)
        }
    }

    /// A blocking collective with no OTF2 operation.
    pub const fn without_op(shape: CollectiveShape) -> Self {
        Collective {
            op: None,
            ..Self::blocking(shape, CollectiveOp::Barrier)
        }
    }

    /// The same, with an element count the same at every member.
    pub const fn same_count_everywhere(self) -> Self {
        Collective {
            count_at_every_member: true,
            ..self
        }
    }
}

/// Which requests a call completes, and how its exit says which (`Role::Completion`
/// calls that take requests). The requests are the entry's `handle`, or the handle
/// array after the entry (`count` of them; Waitsome and Testsome write the indices of
/// those that completed after them, before their exit). What a completed request was
/// (a receive's message, a send, a nonblocking collective) is the reader's: this column
/// only names the requests, through [`Completes::completed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completes {
    /// The request its entry names (`handle`): MPI_Wait, always; MPI_Test (`polls`)
    /// when its flag (`out`) is 1. The exit's status is the request's.
    Request { polls: bool },
    /// The request at index `out` of the array (MPI_Waitany, MPI_Testany); none when
    /// `out` is negative (MPI_UNDEFINED, or a Testany that completed nothing). The exit's
    /// status is the request's.
    RequestAtIndex,
    /// Every request of the array: MPI_Waitall, always; MPI_Testall (`polls`) when its
    /// flag (`out`) is 1. Each request's status is at its index in the status array.
    EveryRequest { polls: bool },
    /// The requests at the `out` indices written after the array (MPI_Waitsome,
    /// MPI_Testsome); their statuses are not read.
    RequestsAtIndices,
    /// Cancels the request its entry names (`handle`) when it returns 0 (MPI_Cancel):
    /// a cancelled receive takes no message, and the Wait or Test that later completes
    /// its request completes nothing.
    Cancels,
}

/// Where the status of a completed request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusAt {
    /// In the exit record (`peer`, `tag`, `bytes`).
    Exit,
    /// At this index of the status array after the exit (unset if the call ignored it).
    Array(usize),
    /// Nowhere the probes read.
    NotRead,
}

/// A request a call's exit completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedRequest {
    pub request: u64,
    pub status: StatusAt,
}

impl Completes {
    /// Whether the call takes its requests from the handle array (several at once),
    /// rather than from the entry's `handle`.
    pub fn takes_array(self) -> bool {
        matches!(
            self,
            Completes::RequestAtIndex
                | Completes::EveryRequest { .. }
                | Completes::RequestsAtIndices
        )
    }

    /// Whether one exit may complete several requests (Waitall, Testall, Waitsome,
    /// Testsome), on all of which it then depends.
    pub fn completes_several(self) -> bool {
        matches!(
            self,
            Completes::EveryRequest { .. } | Completes::RequestsAtIndices
        )
    }

    /// The requests the exit `exit` of a call entered as `entry` completed, in the order
    /// of its array; `handles` is the handle array read between the two (the requests,
    /// then for Waitsome and Testsome the indices that completed). A call that returned
    /// an error is taken as its outputs say (MPI_ERR_IN_STATUS: some completed), as the
    /// matcher always took it. Empty for [`Completes::Cancels`], which completes nothing
    /// ([`Completes::cancelled`]).
    pub fn completed(
        self,
        entry: &CallRecord,
        handles: &[u64],
        exit: &CallRecord,
    ) -> Vec<CompletedRequest> {
        let n = usize::try_from(entry.count).unwrap_or(0).min(handles.len());
        let (requests, indices) = handles.split_at(n);
        let at_exit = |request| CompletedRequest {
            request,
            status: StatusAt::Exit,
        };
        match self {
            Completes::Request { polls } if !polls || exit.out == 1 => vec![at_exit(entry.handle)],
            // The array holds the requests alone.
            Completes::RequestAtIndex => usize::try_from(exit.out)
                .ok()
                .and_then(|i| handles.get(i))
                .map(|&r| at_exit(r))
                .into_iter()
                .collect(),
            Completes::EveryRequest { polls } if !polls || exit.out == 1 => requests
                .iter()
                .enumerate()
                .map(|(i, &request)| CompletedRequest {
                    request,
                    status: StatusAt::Array(i),
                })
                .collect(),
            Completes::RequestsAtIndices if exit.out > 0 => indices
                .iter()
                .filter_map(|&i| requests.get(i as u32 as usize))
                .map(|&request| CompletedRequest {
                    request,
                    status: StatusAt::NotRead,
                })
                .collect(),
            Completes::Request { .. }
            | Completes::EveryRequest { .. }
            | Completes::RequestsAtIndices
            | Completes::Cancels => Vec::new(),
        }
    }

    /// Whether the exit `exit` cancelled the request its entry named.
    pub fn cancelled(self, exit: &CallRecord) -> bool {
        self == Completes::Cancels && exit.ret == 0
    }
}
