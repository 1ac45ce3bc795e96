//! Message matching: which send a receive completion depends on, which entries a
//! collective's exit depends on. MPI does not let messages overtake each other between
//! one sender and one receiver on one communicator and tag, so one FIFO queue per
//! (sender, receiver, communicator, tag) pairs the n-th send with the n-th receive. PVM
//! is FIFO per (source task, destination task, tag). What cannot be resolved is
//! counted, never guessed.

use crate::format::node::ShownId;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use tracer_common::{call, CallRecord, UNSET32};

use crate::format::call_facts::{
    AskedEnvelope, Collective, CollectiveShape, Completes, Receives, RequestsIn, Sends, StatusAt,
};
use crate::format::calls::{self, split_call_field, CallField, Family, Flavor};

use super::directory::Directory;
use super::faults::Undone;
use super::late::{LateArrival, LateReceive, LateWaits, P2pKey};

/// Counts of what the matcher saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MatchStats {
    pub sent: u64,
    pub received: u64,
    pub matched: u64,
    /// Receives with no send to match, plus sends never received.
    pub unmatched: u64,
    pub collectives: u64,
    /// Collective exits that found a member's entry missing (tracing began mid-call).
    pub collectives_incomplete: u64,
    /// Receives and collective exits that the nodes' clocks put before the send or a
    /// member's entry they depend on, paired once it was seen (`analysis::late`): how
    /// many needed the clocks corrected. Counted among the matched or complete.
    pub clock_corrected: u64,
}

type PvmKey = (i32, i32, i32);

/// A point-to-point message the matcher paired, for traffic and latency accounting
/// (`crate::metrics`). Logged only after [`MessageMatcher::log_matches`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatchedMessage {
    pub from_pid: u32,
    pub to_pid: u32,
    /// Bytes as the send described them, else as the receive's status reported them;
    /// None when neither knew.
    pub bytes: Option<u64>,
    /// Entry of the send.
    pub send_ts: u64,
    /// Exit of the call that completed the receive (Recv, Wait*, Test, pvm_*recv).
    pub recv_ts: u64,
}

/// A message in flight: what the sender leaves for the receiver, and who sent it when
/// (kept beside the path state so a match can be accounted).
struct Sent<S> {
    state: S,
    from: u32,
    ts: u64,
    bytes: Option<u64>,
}

/// One status a completion call wrote into its array of statuses (MPI_Waitall,
/// MPI_Testall), at the index of its request. UNSET fields were not read (the call was
/// given MPI_STATUSES_IGNORE, or the array was longer than the probes read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReceivedStatus {
    pub source: i32,
    pub tag: i32,
    pub bytes: i64,
}

impl ReceivedStatus {
    pub(crate) const UNSET: ReceivedStatus = ReceivedStatus {
        source: UNSET32,
        tag: UNSET32,
        bytes: tracer_common::UNSET,
    };
}

fn known_bytes(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

struct IrecvInfo {
    gid: Option<u32>,
    source: i32,
    tag: i32,
    flavor: Option<Flavor>,
}

impl IrecvInfo {
    /// A receive from MPI_ANY_SOURCE: its source is only known from its status.
    fn is_wildcard(&self) -> bool {
        self.flavor.is_some_and(|f| self.source == f.any_source())
    }
}

/// The root argument of a rooted collective as the matcher keeps it: a rank, or on an
/// intercommunicator [`ROOT_HERE`] for the root itself (its library's `MPI_ROOT`).
fn root_arg(root: i32, flavor: Option<Flavor>) -> i32 {
    if flavor.and_then(Flavor::mpi_root) == Some(root) {
        ROOT_HERE
    } else {
        root
    }
}

/// The root of a rooted collective on an intercommunicator, at the root (`MPI_ROOT`);
/// not [`UNSET32`], a root argument the probes did not read.
const ROOT_HERE: i32 = i32::MIN + 1;

/// Whose entries a member's exit from a collective on an intercommunicator depends on
/// (MPI-3.1 5.2.2): every one of the other group (`remote`) for the all-to-all shapes
/// (each group's results are the other's data); a bcast or scatter's root in the other
/// group (which the members there name by its rank in it; the root passes `MPI_ROOT`,
/// the rest of its group `MPI_PROC_NULL` and depend on nobody); the whole other group
/// for a reduce or gather's root. Scans are not defined on intercommunicators.
fn inter_collective_deps(shape: CollectiveShape, root: i32, remote: &[u32]) -> Vec<u32> {
    match shape {
        CollectiveShape::Everyone => remote.to_vec(),
        CollectiveShape::FromRoot => usize::try_from(root)
            .ok()
            .and_then(|r| remote.get(r))
            .map_or_else(Vec::new, |&p| vec![p]),
        CollectiveShape::ToRoot if root == ROOT_HERE => remote.to_vec(),
        CollectiveShape::ToRoot
        | CollectiveShape::NoData
        | CollectiveShape::Prefix { .. }
        | CollectiveShape::Neighbors => Vec::new(),
    }
}

/// A member's arrival at a collective: the communicator and the collective's sequence
/// number on it.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    gid: u32,
    seq: u32,
}

/// A nonblocking collective a process started, until the Wait/Test that completes it.
#[derive(Clone, Copy, Debug)]
struct PendingCollective {
    arrival: Arrival,
    shape: CollectiveShape,
    root: i32,
}

/// A collective some member is still in.
struct OpenCollective<S> {
    /// Entries by member process (ranks are resolved at exit, when all have entered).
    entries: FxHashMap<u32, S>,
    exits: usize,
}

/// Pairs dependencies. `S` is what a send carries (the engine's path state).
pub struct MessageMatcher<S> {
    pub directory: Directory,
    p2p: FxHashMap<P2pKey, VecDeque<Sent<S>>>,
    pvm: FxHashMap<PvmKey, VecDeque<Sent<S>>>,
    /// pvm_mcast entries by process: their time and size, for the copies posted when
    /// the destinations arrive.
    mcasts: FxHashMap<u32, (u64, Option<u64>)>,
    irecvs: FxHashMap<(u32, u64), IrecvInfo>,
    /// Persistent requests (Send_init, Recv_init) by (pid, request): their init entry,
    /// which each MPI_Start posts again.
    persistent: FxHashMap<(u32, u64), CallRecord>,
    collectives: FxHashMap<(u32, u32), OpenCollective<S>>,
    coll_seq: FxHashMap<(u32, u32), u32>,
    /// Nonblocking collectives between entry and exit, by thread.
    icoll_entering: FxHashMap<u32, Arrival>,
    /// Nonblocking collectives started, by (pid, request): completed by a Wait/Test.
    icollectives: FxHashMap<(u32, u64), PendingCollective>,
    pub stats: MatchStats,
    /// Every point-to-point match, when logging is on (see `log_matches`).
    matches: Option<Vec<MatchedMessage>>,
    /// Receives and collective exits waiting for what the clocks put after them.
    late: LateWaits,
    /// What arrived for them since the last [`Self::take_late_arrivals`].
    arrivals: Vec<LateArrival<S>>,
}

fn set(v: i32) -> Option<i32> {
    (v != UNSET32).then_some(v)
}

impl<S: Clone> MessageMatcher<S> {
    pub fn new(directory: Directory) -> Self {
        MessageMatcher {
            directory,
            p2p: FxHashMap::default(),
            pvm: FxHashMap::default(),
            irecvs: FxHashMap::default(),
            persistent: FxHashMap::default(),
            collectives: FxHashMap::default(),
            coll_seq: FxHashMap::default(),
            icoll_entering: FxHashMap::default(),
            icollectives: FxHashMap::default(),
            stats: MatchStats::default(),
            mcasts: FxHashMap::default(),
            matches: None,
            late: LateWaits::default(),
            arrivals: Vec::new(),
        }
    }

    /// From now on, log every point-to-point match (drain with `take_matches`).
    pub(crate) fn log_matches(&mut self) {
        self.matches.get_or_insert_with(Vec::new);
    }

    /// The matches logged since the last call.
    pub(crate) fn take_matches(&mut self) -> Vec<MatchedMessage> {
        self.matches
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Whether the entry of this call needs the sender's path state.
    pub(crate) fn wants_snapshot(id: u16) -> bool {
        use crate::format::calls::Role;
        matches!(
            crate::format::calls::spec(id).map(|s| s.role),
            Some(Role::Send | Role::SendRecv | Role::Collective)
        )
    }

    /// An outermost call's entry. `state` is the caller's path state if `wants_snapshot`.
    pub(crate) fn on_enter(&mut self, pid: u32, e: &CallRecord, state: Option<S>) {
        let CallField { id, flavor } = split_call_field(e.header.call);
        let flavor = Flavor::from_id(flavor);
        if matches!(flavor, Some(Flavor::OpenMpi | Flavor::Mpich)) {
            self.directory.calls_mpi(pid);
            self.directory.setup_enter(pid, e);
        }
        let Some(state) = state else { return };
        let sent = Sent {
            state,
            from: pid,
            ts: e.header.ts_ns,
            bytes: known_bytes(e.bytes),
        };
        let Some(spec) = calls::spec(id) else { return };
        // Every send is posted at its entry (`call_facts::SEND_POSTED_AT`).
        match spec.sends {
            Some(Sends::Message | Sends::MessageWithRequest) => match spec.family {
                Family::Pvm => self.post_pvm(pid, e.peer, e.tag, sent),
                _ => self.post_mpi(pid, e.comm, e.peer, e.tag, flavor, sent),
            },
            Some(Sends::Persistent(RequestsIn::Handle)) => {
                self.start_persistent(pid, e.handle, sent)
            }
            // The requests arrive in the handle array (`on_startall`).
            Some(Sends::Persistent(RequestsIn::HandleArray)) => {}
            Some(Sends::Multicast) => {
                // destinations arrive in the handle array
                self.mcasts.insert(pid, (sent.ts, sent.bytes));
            }
            None => {
                let Some(c) = spec.collective else { return };
                let arrival = self.collective_enter(pid, e.comm, flavor, sent.state);
                if let (true, Some(a)) = (c.nonblocking, arrival) {
                    self.icoll_entering.insert(e.header.tid, a);
                }
            }
        }
    }

    /// pvm_mcast destinations (from the handle array that follows the entry).
    pub(crate) fn on_mcast_targets(&mut self, pid: u32, tag: i32, tids: &[u64], state: &S) {
        let (ts, bytes) = self.mcasts.get(&pid).copied().unwrap_or_default();
        for &t in tids {
            let sent = Sent {
                state: state.clone(),
                from: pid,
                ts,
                bytes,
            };
            self.post_pvm(pid, t as u32 as i32, tag, sent);
        }
    }

    /// MPI_Startall's requests (from the handle array that follows the entry).
    pub(crate) fn on_startall(
        &mut self,
        pid: u32,
        entry: &CallRecord,
        requests: &[u64],
        state: &S,
    ) {
        for &r in requests {
            let sent = Sent {
                state: state.clone(),
                from: pid,
                ts: entry.header.ts_ns,
                bytes: None,
            };
            self.start_persistent(pid, r, sent);
        }
    }

    /// MPI_Start of a persistent request: a send posts its message (with the size its
    /// init described), a receive becomes an open receive request, as after Isend/Irecv.
    fn start_persistent(&mut self, pid: u32, request: u64, s: Sent<S>) {
        let Some(init) = self.persistent.get(&(pid, request)).copied() else {
            return;
        };
        let CallField { id, flavor } = split_call_field(init.header.call);
        let flavor = Flavor::from_id(flavor);
        if id == call::MPI_SEND_INIT {
            let s = Sent {
                bytes: known_bytes(init.bytes),
                ..s
            };
            self.post_mpi(pid, init.comm, init.peer, init.tag, flavor, s);
        } else {
            self.receive_posted(pid, request, &init, flavor);
        }
    }

    /// A receive request was posted (Irecv's exit, Start of a Recv_init's request).
    fn receive_posted(&mut self, pid: u32, request: u64, e: &CallRecord, flavor: Option<Flavor>) {
        if flavor.and_then(Flavor::proc_null) == Some(e.peer) {
            return; // MPI_PROC_NULL: nothing is received
        }
        let gid = self.directory.comm_of(pid, e.comm, flavor);
        self.irecvs.insert(
            (pid, request),
            IrecvInfo {
                gid,
                source: e.peer,
                tag: e.tag,
                flavor,
            },
        );
    }

    fn post_mpi(
        &mut self,
        pid: u32,
        comm: u64,
        dest: i32,
        tag: i32,
        flavor: Option<Flavor>,
        s: Sent<S>,
    ) {
        if flavor.and_then(Flavor::proc_null) == Some(dest) {
            return; // MPI_PROC_NULL: nothing is sent
        }
        self.stats.sent += 1;
        let Some(gid) = self.directory.comm_of(pid, comm, flavor) else {
            return;
        };
        let Some(&dst) = self.directory.peers(pid, gid).get(dest as usize) else {
            return;
        };
        let key = (pid, dst, gid, tag);
        match self.late.receive_waiting(&key) {
            Some(receive) => self.late_match(s, receive),
            None => self.p2p.entry(key).or_default().push_back(s),
        }
    }

    /// A send that a receive the clocks put before it was waiting for.
    fn late_match(&mut self, sent: Sent<S>, receive: LateReceive) {
        self.stats.clock_corrected += 1;
        // Where the correction moves the receive: no earlier than the send.
        let recv_ts = receive.ts.max(sent.ts);
        self.paired(&sent, receive.pid, receive.bytes, recv_ts);
        self.arrivals.push(LateArrival {
            pid: receive.pid,
            state: sent.state,
        });
    }

    fn post_pvm(&mut self, pid: u32, dest: i32, tag: i32, s: Sent<S>) {
        self.stats.sent += 1;
        let Some(src) = self.directory.pvm_tid(pid) else {
            return;
        };
        self.pvm.entry((src, dest, tag)).or_default().push_back(s);
    }

    /// The message a receive completion took. With the source or tag unknown (a wildcard
    /// receive whose status was ignored), the match is only made when exactly one queue
    /// holds a candidate: every send that could match has started by now (records come in
    /// time order), so a single candidate is certain; several are counted as unmatched.
    /// `x` is the record that completed the receive.
    fn take_mpi(
        &mut self,
        pid: u32,
        gid: Option<u32>,
        source: Option<i32>,
        tag: Option<i32>,
        x: &CallRecord,
    ) -> Option<S> {
        self.stats.received += 1;
        // The queue, when the receive names one.
        let mut definite: Option<P2pKey> = None;
        let found = (|| {
            let gid = gid?;
            let src = match source {
                Some(r) => Some(*self.directory.peers(pid, gid).get(r as usize)?),
                None => None,
            };
            let key = match (src, tag) {
                (Some(s), Some(t)) => {
                    definite = Some((s, pid, gid, t));
                    (s, pid, gid, t)
                }
                _ => {
                    let mut candidates = self.p2p.iter().filter(|((s, d, g, t), q)| {
                        *d == pid
                            && *g == gid
                            && !q.is_empty()
                            && src.is_none_or(|x| x == *s)
                            && tag.is_none_or(|x| x == *t)
                    });
                    let (key, _) = candidates.next()?;
                    if candidates.next().is_some() {
                        return None;
                    }
                    *key
                }
            };
            self.p2p.get_mut(&key)?.pop_front()
        })();
        if let (None, Some(key)) = (&found, definite) {
            if self.late.may_wait_for(pid, key.0) {
                let receive = LateReceive {
                    pid,
                    ts: x.header.ts_ns,
                    bytes: known_bytes(x.bytes),
                };
                self.late.wait_for_send(key, receive);
                return None;
            }
        }
        self.count(found, pid, x)
    }

    /// Counts a receive completion `x` of process `pid` and logs its match.
    fn count(&mut self, found: Option<Sent<S>>, pid: u32, x: &CallRecord) -> Option<S> {
        let Some(sent) = found else {
            self.stats.unmatched += 1;
            return None;
        };
        self.paired(&sent, pid, known_bytes(x.bytes), x.header.ts_ns);
        Some(sent.state)
    }

    /// `sent` paired with a receive of `to_pid` that completed at `recv_ts` (its status
    /// gave `recv_bytes`): counted, and logged when logging is on.
    fn paired(&mut self, sent: &Sent<S>, to_pid: u32, recv_bytes: Option<u64>, recv_ts: u64) {
        self.stats.matched += 1;
        if let Some(log) = &mut self.matches {
            log.push(MatchedMessage {
                from_pid: sent.from,
                to_pid,
                bytes: sent.bytes.or(recv_bytes),
                send_ts: sent.ts,
                recv_ts,
            });
        }
    }

    /// An outermost call's exit; `handles` are the request handles its entry named,
    /// `statuses` the statuses it wrote per request (MPI_Waitall, MPI_Testall).
    /// Returns the path states the caller now depends on.
    pub(crate) fn on_exit(
        &mut self,
        pid: u32,
        e: &CallRecord,
        handles: &[u64],
        statuses: &[ReceivedStatus],
        x: &CallRecord,
    ) -> Vec<S> {
        let CallField {
            id,
            flavor: flavor_id,
        } = split_call_field(e.header.call);
        let flavor = Flavor::from_id(flavor_id);
        let spec = calls::spec(id);
        if let Some(receives) = spec.and_then(|s| s.receives) {
            return self.receive_exit(pid, e, x, flavor, receives);
        }
        if let Some(completes) = spec.and_then(|s| s.completes) {
            return self.completion_exit(pid, e, handles, statuses, x, completes);
        }
        let mut out = Vec::new();
        match id {
            call::MPI_SEND_INIT | call::MPI_RECV_INIT if x.ret == 0 => {
                self.persistent.insert((pid, x.handle), *e);
            }
            _ => match spec.and_then(|s| s.collective) {
                Some(c) if c.nonblocking => {
                    let arrival = self.icoll_entering.remove(&e.header.tid);
                    if let (0, Some(arrival)) = (x.ret, arrival) {
                        let pending = PendingCollective {
                            arrival,
                            shape: c.shape,
                            root: root_arg(e.peer, flavor),
                        };
                        self.icollectives.insert((pid, x.handle), pending);
                    }
                }
                Some(c) => out.extend(self.collective_exit(pid, c, e, flavor)),
                None => {}
            },
        }
        out
    }

    /// A completing call's exit: the requests its exit completed, as the call table's
    /// column says ([`Completes::completed`]), each with its status; several completed
    /// by one call (those of an array) are completed together, as one exit depends on
    /// them all (see [`Self::complete_together`]).
    fn completion_exit(
        &mut self,
        pid: u32,
        e: &CallRecord,
        handles: &[u64],
        statuses: &[ReceivedStatus],
        x: &CallRecord,
        completes: Completes,
    ) -> Vec<S> {
        // A cancelled receive takes no message (a cancel that came too late leaves
        // the message it would have taken unmatched).
        if completes.cancelled(x) {
            self.irecvs.remove(&(pid, e.handle));
            return Vec::new();
        }
        let status_of = |at: StatusAt| match at {
            StatusAt::Exit => *x,
            StatusAt::Array(i) => {
                let s = statuses.get(i).copied().unwrap_or(ReceivedStatus::UNSET);
                CallRecord {
                    peer: s.source,
                    tag: s.tag,
                    bytes: s.bytes,
                    ..*x
                }
            }
            StatusAt::NotRead => CallRecord {
                peer: ReceivedStatus::UNSET.source,
                tag: ReceivedStatus::UNSET.tag,
                bytes: ReceivedStatus::UNSET.bytes,
                ..*x
            },
        };
        let done: Vec<(u64, CallRecord)> = completes
            .completed(e, handles, x)
            .into_iter()
            .map(|c| (c.request, status_of(c.status)))
            .collect();
        if completes.completes_several() {
            return self.complete_together(pid, &done, x);
        }
        let mut out = Vec::new();
        for (request, status) in &done {
            out.extend(self.complete(pid, *request, status));
        }
        out
    }

    /// A receiving call's exit (its message is known there: `call_facts::Receives`):
    /// the send it took, or the receive request it posted.
    fn receive_exit(
        &mut self,
        pid: u32,
        e: &CallRecord,
        x: &CallRecord,
        flavor: Option<Flavor>,
        receives: Receives,
    ) -> Vec<S> {
        let asked = match receives {
            Receives::Message { asked } => asked,
            // A matched probe that found a message: the receive (see call::MPI_MPROBE).
            Receives::ProbedMessage { .. } if receives.found_message(x) => AskedEnvelope::First,
            Receives::Request if x.ret == 0 => {
                self.receive_posted(pid, x.handle, e, flavor);
                return Vec::new();
            }
            Receives::PvmMessage { received } => {
                if !received.got_message(x.ret) {
                    return Vec::new();
                }
                self.stats.received += 1;
                let me = self.directory.pvm_tid(pid);
                let found = me.and_then(|me| self.pvm.get_mut(&(x.peer, me, x.tag))?.pop_front());
                return self.count(found, pid, x).into_iter().collect();
            }
            Receives::ProbedMessage { .. } | Receives::Request => return Vec::new(),
        };
        let (req_src, req_tag) = match asked {
            AskedEnvelope::First => (e.peer, e.tag),
            AskedEnvelope::Second => (e.peer2, e.tag2),
        };
        if flavor.and_then(Flavor::proc_null) == Some(req_src) {
            return Vec::new(); // MPI_PROC_NULL: nothing is received
        }
        let wildcard = flavor.is_some_and(|f| req_src == f.any_source()) || req_src == -1;
        let source = set(x.peer).or((!wildcard).then_some(req_src));
        let tag = set(x.tag).or((req_tag != -1).then_some(req_tag));
        let gid = self.directory.comm_of(pid, e.comm, flavor);
        self.take_mpi(pid, gid, source, tag, x)
            .into_iter()
            .collect()
    }

    /// A request completed: the message a receive request delivered, or the entries a
    /// nonblocking collective's completion depends on.
    fn complete(&mut self, pid: u32, handle: u64, status: &CallRecord) -> Vec<S> {
        if let Some(c) = self.icollectives.remove(&(pid, handle)) {
            return self.collective_complete(pid, c.arrival, c.shape, c.root);
        }
        let Some(info) = self.irecvs.remove(&(pid, handle)) else {
            return Vec::new();
        };
        let source = set(status.peer).or((!info.is_wildcard()).then_some(info.source));
        let tag = set(status.tag).or((info.tag != -1).then_some(info.tag));
        self.take_mpi(pid, info.gid, source, tag, status)
            .into_iter()
            .collect()
    }

    /// Requests completed by one call (Waitall, Testall, Waitsome, Testsome), each with
    /// its status. Receives whose source is known take their messages first; the
    /// wildcard receives whose status was ignored then take theirs together: which of
    /// them got which message is unknown, but the call's exit depends on all of them, so
    /// only the set matters. It is certain when the messages that could match (sent to
    /// this process on the communicator with a tag the receives accept, and not yet
    /// received) are exactly as many as the receives, every one then taken; or when they
    /// all come from one sender, whose messages arrive in order. Otherwise each is
    /// counted as unmatched, never guessed.
    fn complete_together(
        &mut self,
        pid: u32,
        done: &[(u64, CallRecord)],
        x: &CallRecord,
    ) -> Vec<S> {
        let mut out = Vec::new();
        // Wildcard receives of unknown source, by communicator: their tags (None: any).
        let mut blind: Vec<(Option<u32>, Option<i32>)> = Vec::new();
        for (h, status) in done {
            match self.irecvs.get(&(pid, *h)) {
                Some(info) if set(status.peer).is_none() && info.is_wildcard() => {
                    let info = self.irecvs.remove(&(pid, *h)).expect("just seen");
                    let tag = set(status.tag).or((info.tag != -1).then_some(info.tag));
                    blind.push((info.gid, tag));
                }
                _ => out.extend(self.complete(pid, *h, status)),
            }
        }
        let mut gids: Vec<Option<u32>> = blind.iter().map(|b| b.0).collect();
        gids.sort_unstable();
        gids.dedup();
        for gid in gids {
            let tags: Vec<Option<i32>> = blind.iter().filter(|b| b.0 == gid).map(|b| b.1).collect();
            out.extend(self.take_together(pid, gid, &tags, x));
        }
        out
    }

    /// The messages `tags.len()` wildcard receives of `pid` on `gid` took together (see
    /// [`Self::complete_together`]).
    fn take_together(
        &mut self,
        pid: u32,
        gid: Option<u32>,
        tags: &[Option<i32>],
        x: &CallRecord,
    ) -> Vec<S> {
        let wanted = tags.len();
        self.stats.received += wanted as u64;
        let accepts = |t: i32| tags.iter().any(|w| w.is_none_or(|w| w == t));
        let queues: Vec<(P2pKey, usize)> = match gid {
            Some(gid) => self
                .p2p
                .iter()
                .filter(|((_, d, g, t), q)| *d == pid && *g == gid && !q.is_empty() && accepts(*t))
                .map(|(k, q)| (*k, q.len()))
                .collect(),
            None => Vec::new(),
        };
        let candidates: usize = queues.iter().map(|q| q.1).sum();
        // One queue: one sender's messages, received in the order they were sent.
        let certain = candidates == wanted || (queues.len() == 1 && candidates > wanted);
        if !certain {
            log::debug!(
                "{wanted} wildcard receives of pid {} completed together with \
                 {candidates} messages in {} queues that could match: unmatched",
                ShownId(pid),
                queues.len()
            );
            return (0..wanted)
                .filter_map(|_| self.count(None, pid, x))
                .collect();
        }
        let mut out = Vec::new();
        let mut left = wanted;
        for (key, _) in queues {
            while left > 0 {
                let Some(sent) = self.p2p.get_mut(&key).and_then(|q| q.pop_front()) else {
                    break;
                };
                left -= 1;
                out.extend(self.count(Some(sent), pid, x));
            }
        }
        out
    }

    fn collective_enter(
        &mut self,
        pid: u32,
        comm: u64,
        flavor: Option<Flavor>,
        s: S,
    ) -> Option<Arrival> {
        let gid = self.directory.comm_of(pid, comm, flavor)?;
        let seq = self.coll_seq.entry((pid, gid)).or_default();
        let this = *seq;
        *seq += 1;
        let inst = self
            .collectives
            .entry((gid, this))
            .or_insert_with(|| OpenCollective {
                entries: FxHashMap::default(),
                exits: 0,
            });
        for waiter in self.late.entry_waiters(gid, this, pid) {
            self.stats.clock_corrected += 1;
            self.arrivals.push(LateArrival {
                pid: waiter,
                state: s.clone(),
            });
        }
        inst.entries.insert(pid, s);
        Some(Arrival { gid, seq: this })
    }

    /// A blocking collective's exit: the collective is the process's latest on the
    /// communicator.
    fn collective_exit(
        &mut self,
        pid: u32,
        collective: Collective,
        e: &CallRecord,
        flavor: Option<Flavor>,
    ) -> Vec<S> {
        let Some(gid) = self.directory.comm_of(pid, e.comm, flavor) else {
            return Vec::new();
        };
        let Some(seq) = self
            .coll_seq
            .get(&(pid, gid))
            .and_then(|s| s.checked_sub(1))
        else {
            return Vec::new();
        };
        let shape = if e.count == 0 && collective.count_at_every_member {
            CollectiveShape::NoData
        } else {
            collective.shape
        };
        self.collective_complete(pid, Arrival { gid, seq }, shape, root_arg(e.peer, flavor))
    }

    /// Member `pid` leaves (or completes) the collective it arrived at: the entries it
    /// depends on, by `shape` (`root` is the root's rank for rooted ones).
    fn collective_complete(
        &mut self,
        pid: u32,
        Arrival { gid, seq }: Arrival,
        shape: CollectiveShape,
        root: i32,
    ) -> Vec<S> {
        let mut incomplete = false;
        let (deps, members) = if let Some((local, remote)) = self.directory.inter_sides(pid, gid) {
            (
                inter_collective_deps(shape, root, remote),
                local.len() + remote.len(),
            )
        } else if shape == CollectiveShape::Neighbors {
            let members = self.directory.members(gid);
            if !members.contains(&pid) {
                return Vec::new();
            }
            // Unknown in-neighbours: counted incomplete, never guessed.
            let deps = self.directory.in_neighbors(pid, gid);
            incomplete = deps.is_none();
            (deps.unwrap_or_default(), members.len())
        } else {
            let members = self.directory.members(gid);
            let Some(rank) = members.iter().position(|&p| p == pid) else {
                return Vec::new();
            };
            let root = usize::try_from(root).ok();
            let deps: &[u32] = match shape {
                CollectiveShape::Everyone => &members,
                CollectiveShape::FromRoot if root != Some(rank) => {
                    root.and_then(|r| members.get(r..=r)).unwrap_or(&[])
                }
                CollectiveShape::ToRoot if root == Some(rank) => &members,
                CollectiveShape::FromRoot
                | CollectiveShape::ToRoot
                | CollectiveShape::NoData
                | CollectiveShape::Neighbors => &[],
                CollectiveShape::Prefix { inclusive } => &members[..rank + inclusive as usize],
            };
            (deps.to_vec(), members.len())
        };
        let Some(inst) = self.collectives.get_mut(&(gid, seq)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut missing = Vec::new();
        for d in &deps {
            match inst.entries.get(d) {
                Some(s) => out.push(s.clone()),
                None => missing.push(*d),
            }
        }
        // Members the clocks put late are waited for, when every missing one may be.
        if !incomplete
            && !missing.is_empty()
            && missing.iter().all(|&d| self.late.may_wait_for(pid, d))
        {
            for &d in &missing {
                self.late.wait_for_entry(gid, seq, d, pid);
            }
        } else {
            incomplete |= !missing.is_empty();
        }
        inst.exits += 1;
        if inst.exits >= members {
            self.collectives.remove(&(gid, seq));
        }
        self.stats.collectives += 1;
        self.stats.collectives_incomplete += incomplete as u64;
        if incomplete {
            log::debug!(
                "collective {seq} of communicator {gid}: pid {} left without every \
                 entry it depends on ({deps:?}, {shape:?})",
                ShownId(pid)
            );
        }
        out
    }

    /// What the end of process `pid` left undone: its sends and the sends to it still
    /// waiting for a receive, and the open collectives of its communicators (one it
    /// entered, or one whose members it is among and that it never entered).
    pub(crate) fn left_undone(&mut self, pid: u32) -> Undone {
        let mut u = Undone::default();
        for (key, q) in &self.p2p {
            u.sends_unreceived += q.iter().filter(|s| s.from == pid).count() as u64;
            if key.1 == pid {
                u.sends_to_it_unreceived += q.len() as u64;
            }
        }
        let tid = self.directory.pvm_tid(pid);
        for (key, q) in &self.pvm {
            u.sends_unreceived += q.iter().filter(|s| s.from == pid).count() as u64;
            if Some(key.1) == tid {
                u.sends_to_it_unreceived += q.len() as u64;
            }
        }
        let open: Vec<(u32, bool)> = self
            .collectives
            .iter()
            .map(|(&(gid, _), c)| (gid, c.entries.contains_key(&pid)))
            .collect();
        for (gid, entered) in open {
            if entered
                || self.directory.members(gid).contains(&pid)
                || self.directory.inter_sides(pid, gid).is_some()
            {
                u.collectives_incomplete += 1;
            }
        }
        u
    }

    /// Process `pid` exec'd while traced: every message it sends is seen, so a receive
    /// on another node may wait for one the clocks put later (`analysis::late`).
    pub(crate) fn traced_from_start(&mut self, pid: u32) {
        self.late.traced_from_start(pid);
    }

    /// Process `pid` is held now (its records wait), or no longer.
    pub(crate) fn set_held(&mut self, pid: u32, held: bool) {
        self.late.set_held(pid, held);
    }

    /// How many dependencies the last exit waits for (its process is then held).
    pub(crate) fn take_late_waits(&mut self) -> usize {
        self.late.take_registered()
    }

    /// The path states that arrived for waiting processes since the last call.
    pub(crate) fn take_late_arrivals(&mut self) -> Vec<LateArrival<S>> {
        std::mem::take(&mut self.arrivals)
    }

    /// Process `pid` waits no longer (its window passed, or the stream ended): what it
    /// still waited for is counted unmatched or incomplete.
    pub(crate) fn give_up_waiting(&mut self, pid: u32) {
        let gave_up = self.late.give_up(pid);
        self.stats.unmatched += gave_up.receives;
        // Every entry one exit waited for belongs to that one exit (its process is held).
        self.stats.collectives_incomplete += u64::from(gave_up.entries > 0);
    }

    /// Sends still waiting for their receive (counted as unmatched at the end).
    pub fn in_flight(&self) -> usize {
        self.p2p.values().map(|q| q.len()).sum::<usize>()
            + self.pvm.values().map(|q| q.len()).sum::<usize>()
    }

    /// Entries held (messages in flight, open requests, open collectives).
    #[cfg(test)]
    pub(crate) fn entries_held(&self) -> usize {
        self.in_flight()
            + self.irecvs.len()
            + self.collectives.len()
            + self.icollectives.len()
            + self.persistent.len()
    }

    /// Final statistics: sends never received count as unmatched.
    pub(crate) fn final_stats(&self) -> MatchStats {
        let mut s = self.stats.clone();
        s.unmatched += self.in_flight() as u64;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::calls::MPICH_COMM_WORLD;
    use crate::format::ProcessInfo;
    use tracer_common::{flavor, kind, EventHeader};

    /// Four MPICH ranks, pid = tid = 100 + world rank, each told its rank by the launcher.
    fn four_ranks() -> MessageMatcher<u32> {
        let mut d = Directory::new();
        for r in 0..4 {
            d.process(&ProcessInfo {
                pid: 100 + r,
                ppid: 1,
                env_rank: Some(r as i32),
                env_size: Some(4),
                ..Default::default()
            });
        }
        MessageMatcher::new(d)
    }

    /// A call record of world rank `rank`, at `ts`.
    fn rec(rank: u32, id: u16, k: u16, ts: u64) -> CallRecord {
        let pid = 100 + rank;
        CallRecord::unset(EventHeader {
            ts_ns: ts,
            cpu_ns: 0,
            tgid: pid,
            tid: pid,
            kind: k,
            call: id | (flavor::MPICH as u16) << 8,
            cpu: 0,
        })
    }

    /// MPI_Comm_split(world, color, key) entry of `rank`.
    fn split_entry(rank: u32, color: i32, key: i32) -> CallRecord {
        CallRecord {
            comm: MPICH_COMM_WORLD,
            peer: color,
            peer2: key,
            ..rec(
                rank,
                call::MPI_COMM_SPLIT,
                kind::CALL_ENTER,
                10 + rank as u64,
            )
        }
    }

    /// Four ranks, and each rank's half of the world split by parity (even world ranks
    /// in one communicator, odd in the other), known as `half` in every rank.
    fn even_and_odd(half: u64) -> MessageMatcher<u32> {
        let mut m = four_ranks();
        let entries: Vec<CallRecord> = (0..4).map(|r| split_entry(r, r as i32 % 2, 0)).collect();
        for e in &entries {
            m.on_enter(e.header.tgid, e, None);
        }
        for e in &entries {
            let x = exit_with_handle(e, half);
            m.directory.setup_call(e.header.tgid, e, &x, &[]);
        }
        m
    }

    fn exit_with_handle(entry: &CallRecord, handle: u64) -> CallRecord {
        let CallField { id, .. } = split_call_field(entry.header.call);
        let rank = entry.header.tgid - 100;
        CallRecord {
            ret: 0,
            handle,
            ..rec(rank, id, kind::CALL_EXIT, 100 + rank as u64)
        }
    }

    /// Rank 3 leaves MPI_Comm_split first and sends on the new communicator at once,
    /// before the other members' exits are seen: the ranks in it still follow the keys of
    /// all four (key = 4 - rank reverses them), so new rank 0 (world 3) sending to new
    /// rank 1 reaches world rank 2, and world rank 2's receive from new rank 0 takes it.
    #[test]
    fn a_split_communicator_is_usable_before_the_other_members_leave_the_split() {
        const NEW: u64 = 0x8400_0001;
        let mut m = four_ranks();
        let entries: Vec<CallRecord> = (0..4).map(|r| split_entry(r, 0, 4 - r as i32)).collect();
        for e in &entries {
            m.on_enter(e.header.tgid, e, None);
        }
        let first = exit_with_handle(&entries[3], NEW);
        m.directory.setup_call(103, &entries[3], &first, &[]);
        let send = CallRecord {
            comm: NEW,
            peer: 1,
            tag: 9,
            ..rec(3, call::MPI_SEND, kind::CALL_ENTER, 200)
        };
        m.on_enter(103, &send, Some(3));
        for e in &entries[..3] {
            let x = exit_with_handle(e, NEW);
            m.directory.setup_call(e.header.tgid, e, &x, &[]);
        }
        let recv = CallRecord {
            comm: NEW,
            peer: 0,
            tag: 9,
            ..rec(2, call::MPI_RECV, kind::CALL_ENTER, 300)
        };
        let got = m.on_exit(
            102,
            &recv,
            &[],
            &[],
            &rec(2, call::MPI_RECV, kind::CALL_EXIT, 400),
        );
        assert_eq!(got, vec![3], "the message of world rank 3");
        let gid = m.directory.comm_of(102, NEW, Some(Flavor::Mpich)).unwrap();
        assert_eq!(m.directory.members(gid), vec![103, 102, 101, 100]);
        assert_eq!(m.final_stats().unmatched, 0);
    }

    /// What a dead rank left undone (mpi_killed.c in miniature): rank 2 sends twice to
    /// rank 0, rank 1 once to rank 2, nobody receives; ranks 0, 1 and 3 enter a barrier
    /// rank 2 never enters.
    #[test]
    fn a_dead_rank_leaves_its_messages_and_the_barrier_undone() {
        let mut m = four_ranks();
        let send = |from: u32, to: i32, ts| CallRecord {
            comm: MPICH_COMM_WORLD,
            peer: to,
            tag: 99,
            ..rec(from, call::MPI_SEND, kind::CALL_ENTER, ts)
        };
        m.on_enter(102, &send(2, 0, 10), Some(2));
        m.on_enter(102, &send(2, 0, 11), Some(2));
        m.on_enter(101, &send(1, 2, 12), Some(1));
        for r in [0, 1, 3] {
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                ..rec(r, call::MPI_BARRIER, kind::CALL_ENTER, 20)
            };
            m.on_enter(100 + r, &e, Some(r));
        }
        let dead = m.left_undone(102);
        assert_eq!(
            dead,
            Undone {
                sends_unreceived: 2,
                sends_to_it_unreceived: 1,
                collectives_incomplete: 1,
            }
        );
        let zero = m.left_undone(100);
        assert_eq!((zero.sends_unreceived, zero.sends_to_it_unreceived), (0, 2));
        assert_eq!(zero.collectives_incomplete, 1);
        assert_eq!(m.final_stats().unmatched, 3);
    }

    /// Until every member of the parent has entered the split, the new communicator's
    /// ranks are unresolved, never a guess from the members seen so far.
    #[test]
    fn a_split_seen_in_part_resolves_no_ranks() {
        const NEW: u64 = 0x8400_0001;
        let mut m = four_ranks();
        let entries: Vec<CallRecord> = (0..3).map(|r| split_entry(r, 0, 4 - r as i32)).collect();
        for e in &entries {
            m.on_enter(e.header.tgid, e, None);
        }
        let x = exit_with_handle(&entries[0], NEW);
        m.directory.setup_call(100, &entries[0], &x, &[]);
        let gid = m.directory.comm_of(100, NEW, Some(Flavor::Mpich)).unwrap();
        assert!(m.directory.members(gid).is_empty());
    }

    /// Rank 0 posts `receives` Irecv(MPI_ANY_SOURCE, tag 5) on world; each rank of
    /// `senders` sends it one message; a Waitall with MPI_STATUSES_IGNORE completes them.
    fn wildcards_completed_together(receives: u64, senders: &[u32]) -> MessageMatcher<u32> {
        let mut m = four_ranks();
        let any = Flavor::Mpich.any_source();
        let requests: Vec<u64> = (0..receives).map(|i| 0xac00_0000 + i).collect();
        for &r in &requests {
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                peer: any,
                tag: 5,
                ..rec(0, call::MPI_IRECV, kind::CALL_ENTER, 10)
            };
            m.on_exit(100, &e, &[], &[], &exit_with_handle(&e, r));
        }
        for (i, &s) in senders.iter().enumerate() {
            let send = CallRecord {
                comm: MPICH_COMM_WORLD,
                peer: 0,
                tag: 5,
                ..rec(s, call::MPI_RSEND, kind::CALL_ENTER, 20 + i as u64)
            };
            m.on_enter(100 + s, &send, Some(s));
        }
        let wait = CallRecord {
            count: receives as i32,
            ..rec(0, call::MPI_WAITALL, kind::CALL_ENTER, 30)
        };
        let got = m.on_exit(
            100,
            &wait,
            &requests,
            &[],
            &rec(0, call::MPI_WAITALL, kind::CALL_EXIT, 40),
        );
        assert_eq!(got.len() as u64, m.stats.matched);
        m
    }

    /// Three wildcard receives, three messages from three senders: which receive took
    /// which is unknown, but the three together took all three.
    #[test]
    fn wildcard_receives_completed_together_take_as_many_messages() {
        let m = wildcards_completed_together(3, &[1, 2, 3]);
        let s = m.final_stats();
        assert_eq!((s.matched, s.unmatched, s.received), (3, 0, 3), "{s:?}");
    }

    /// Two wildcard receives, one sender's three messages: its first two, in order.
    #[test]
    fn wildcard_receives_of_one_sender_take_its_first_messages() {
        let m = wildcards_completed_together(2, &[2, 2, 2]);
        let s = m.final_stats();
        assert_eq!((s.matched, s.unmatched), (2, 1), "{s:?}");
    }

    /// Two wildcard receives, three senders: which two messages is unknown; nothing is
    /// guessed (2 receives and 3 sends unmatched).
    #[test]
    fn wildcard_receives_fewer_than_their_candidates_are_unmatched() {
        let m = wildcards_completed_together(2, &[1, 2, 3]);
        let s = m.final_stats();
        assert_eq!((s.matched, s.unmatched), (0, 5), "{s:?}");
    }

    /// The creating call `e` enters and leaves, its exit giving `handle`.
    fn create(m: &mut MessageMatcher<u32>, e: CallRecord, handle: u64, values: &[u64]) {
        let pid = e.header.tgid;
        m.on_enter(pid, &e, None);
        let x = exit_with_handle(&e, handle);
        m.directory.setup_call(pid, &e, &x, values);
    }

    /// Even and odd world ranks split apart, joined by MPI_Intercomm_create (leaders world
    /// 0 and 1, over world; the non-leaders pass garbage where only the leaders' values
    /// count), then merged with the odd group first: on the intercommunicator ranks name
    /// the other group, on the merged one the odd ranks come first.
    #[test]
    fn an_intercommunicator_names_the_remote_group_and_merges_by_high() {
        const HALF: u64 = 0x8400_0001;
        const INTER: u64 = 0x8400_0002;
        const MERGED: u64 = 0x8400_0003;
        let mut m = even_and_odd(HALF);
        for r in 0..4u32 {
            let leader = r < 2;
            let e = CallRecord {
                comm: HALF,
                peer: 0,
                handle: if leader { MPICH_COMM_WORLD } else { 0 },
                peer2: if leader { 1 - r as i32 } else { 99 },
                tag: if leader { 7 } else { 0 },
                ..rec(r, call::MPI_INTERCOMM_CREATE, kind::CALL_ENTER, 20)
            };
            create(&mut m, e, INTER, &[]);
        }
        let gid = |m: &mut MessageMatcher<u32>, r: u32, h| {
            m.directory
                .comm_of(100 + r, h, Some(Flavor::Mpich))
                .unwrap()
        };
        let inter = gid(&mut m, 0, INTER);
        assert!((1..4).all(|r| gid(&mut m, r, INTER) == inter));
        assert_eq!(m.directory.peers(100, inter), vec![101, 103]);
        assert_eq!(m.directory.peers(103, inter), vec![100, 102]);
        // World 2 (even local rank 1) sends to remote rank 0 (world 1), which receives
        // from its remote rank 1.
        let send = CallRecord {
            comm: INTER,
            peer: 0,
            tag: 3,
            ..rec(2, call::MPI_SEND, kind::CALL_ENTER, 30)
        };
        m.on_enter(102, &send, Some(2));
        let recv = CallRecord {
            comm: INTER,
            peer: 1,
            tag: 3,
            ..rec(1, call::MPI_RECV, kind::CALL_ENTER, 31)
        };
        let got = m.on_exit(
            101,
            &recv,
            &[],
            &[],
            &rec(1, call::MPI_RECV, kind::CALL_EXIT, 40),
        );
        assert_eq!(got, vec![2]);
        // A barrier on it: each member's exit depends on the other group's entries.
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                ..rec(r, call::MPI_BARRIER, kind::CALL_ENTER, 41)
            };
            m.on_enter(100 + r, &e, Some(r));
        }
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                ..rec(r, call::MPI_BARRIER, kind::CALL_ENTER, 41)
            };
            let x = rec(r, call::MPI_BARRIER, kind::CALL_EXIT, 42);
            let mut got = m.on_exit(100 + r, &e, &[], &[], &x);
            got.sort();
            let other = if r % 2 == 0 { [1, 3] } else { [0, 2] };
            assert_eq!(got, other, "world {r}");
        }
        // A Bcast from the even group's rank 1 (world 2): the odd group names it by its
        // rank there, world 0 passes MPI_PROC_NULL and world 2 MPI_ROOT.
        let root = [Flavor::Mpich.proc_null().unwrap(), 1, -3, 1];
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                peer: root[r as usize],
                count: 1,
                ..rec(r, call::MPI_BCAST, kind::CALL_ENTER, 43)
            };
            m.on_enter(100 + r, &e, Some(r));
        }
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                peer: root[r as usize],
                count: 1,
                ..rec(r, call::MPI_BCAST, kind::CALL_ENTER, 43)
            };
            let x = rec(r, call::MPI_BCAST, kind::CALL_EXIT, 44);
            let got = m.on_exit(100 + r, &e, &[], &[], &x);
            let want: &[u32] = if r % 2 == 1 { &[2] } else { &[] };
            assert_eq!(got, want, "world {r}");
        }
        assert_eq!(m.stats.collectives, 8);
        assert_eq!(m.stats.collectives_incomplete, 0);
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                peer: (r % 2 == 0) as i32,
                ..rec(r, call::MPI_INTERCOMM_MERGE, kind::CALL_ENTER, 50)
            };
            create(&mut m, e, MERGED, &[]);
        }
        let merged = gid(&mut m, 2, MERGED);
        assert_eq!(m.directory.members(merged), vec![101, 103, 100, 102]);
        assert_eq!(m.final_stats().unmatched, 0);
    }

    /// A ring by MPI_Dist_graph_create_adjacent (world rank w's in-neighbour w - 1): a
    /// member leaving a Neighbor_allgather depends on its in-neighbour's entry alone; on a
    /// graph whose in-neighbours are unknown (MPI_Dist_graph_create) it is incomplete.
    #[test]
    fn a_neighbourhood_collective_depends_on_the_in_neighbours() {
        const RING: u64 = 0x8400_0001;
        const GRAPH: u64 = 0x8400_0002;
        let mut m = four_ranks();
        for r in 0..4u32 {
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                count: 1,
                peer: 0,
                ..rec(
                    r,
                    call::MPI_DIST_GRAPH_CREATE_ADJACENT,
                    kind::CALL_ENTER,
                    10,
                )
            };
            create(&mut m, e, RING, &[(r as u64 + 3) % 4]);
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                peer: 0,
                ..rec(r, call::MPI_DIST_GRAPH_CREATE, kind::CALL_ENTER, 11)
            };
            create(&mut m, e, GRAPH, &[]);
        }
        for comm in [RING, GRAPH] {
            let e = |r| CallRecord {
                comm,
                count: 1,
                ..rec(r, call::MPI_NEIGHBOR_ALLGATHER, kind::CALL_ENTER, 20)
            };
            for r in 0..4u32 {
                m.on_enter(100 + r, &e(r), Some(r));
            }
            for r in 0..4u32 {
                let x = rec(r, call::MPI_NEIGHBOR_ALLGATHER, kind::CALL_EXIT, 30);
                let got = m.on_exit(100 + r, &e(r), &[], &[], &x);
                let want = if comm == RING {
                    vec![(r + 3) % 4]
                } else {
                    vec![]
                };
                assert_eq!(got, want, "world {r}");
            }
        }
        assert_eq!(
            (m.stats.collectives, m.stats.collectives_incomplete),
            (8, 4)
        );
    }

    /// The same `high` in both groups: the order is the library's, the members unknown.
    #[test]
    fn a_merge_with_one_high_everywhere_is_unknown() {
        const HALF: u64 = 0x8400_0001;
        const INTER: u64 = 0x8400_0002;
        const MERGED: u64 = 0x8400_0003;
        let mut m = even_and_odd(HALF);
        for r in 0..4u32 {
            let e = CallRecord {
                comm: HALF,
                peer: 0,
                handle: MPICH_COMM_WORLD,
                peer2: if r % 2 == 0 { 1 } else { 0 },
                tag: 7,
                ..rec(r, call::MPI_INTERCOMM_CREATE, kind::CALL_ENTER, 20)
            };
            create(&mut m, e, INTER, &[]);
        }
        for r in 0..4u32 {
            let e = CallRecord {
                comm: INTER,
                peer: 0,
                ..rec(r, call::MPI_INTERCOMM_MERGE, kind::CALL_ENTER, 50)
            };
            create(&mut m, e, MERGED, &[]);
        }
        let merged = m
            .directory
            .comm_of(100, MERGED, Some(Flavor::Mpich))
            .unwrap();
        assert!(m.directory.members(merged).is_empty());
    }

    /// MPI_Comm_create from a group of ranks {3, 1, 2} of the world: rank 0 of the new
    /// communicator is world rank 3, and world rank 0 (not in the group) gets no mapping.
    #[test]
    fn comm_create_takes_its_members_from_the_group() {
        const WORLD_GROUP: u64 = 0x8800_0000;
        const SUBGROUP: u64 = 0x8800_0001;
        const NEW: u64 = 0x8400_0002;
        let mut m = four_ranks();
        for r in 0..4u32 {
            let pid = 100 + r;
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                ..rec(r, call::MPI_COMM_GROUP, kind::CALL_ENTER, 10)
            };
            let x = exit_with_handle(&e, WORLD_GROUP);
            m.on_enter(pid, &e, None);
            m.directory.setup_call(pid, &e, &x, &[]);
            let e = CallRecord {
                comm: WORLD_GROUP,
                count: 3,
                ..rec(r, call::MPI_GROUP_INCL, kind::CALL_ENTER, 20)
            };
            let x = exit_with_handle(&e, SUBGROUP);
            m.on_enter(pid, &e, None);
            m.directory.setup_call(pid, &e, &x, &[3, 1, 2]);
            let e = CallRecord {
                comm: MPICH_COMM_WORLD,
                handle: SUBGROUP,
                ..rec(r, call::MPI_COMM_CREATE, kind::CALL_ENTER, 30)
            };
            // MPICH's MPI_COMM_NULL for the process outside the group.
            let x = exit_with_handle(&e, if r == 0 { 0x0400_0000 } else { NEW });
            m.on_enter(pid, &e, None);
            m.directory.setup_call(pid, &e, &x, &[]);
        }
        let gid = m.directory.comm_of(101, NEW, Some(Flavor::Mpich)).unwrap();
        assert_eq!(m.directory.members(gid), vec![103, 101, 102]);
        assert_eq!(
            m.directory.comm_of(102, NEW, Some(Flavor::Mpich)),
            Some(gid)
        );
        assert_eq!(
            m.directory.comm_of(100, 0x0400_0000, Some(Flavor::Mpich)),
            None
        );
    }
}
