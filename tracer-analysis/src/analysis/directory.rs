//! Who is who, for the matcher and the exports that name communicators: processes,
//! their ranks and PVM task ids, and their communicator and group handles, interned to
//! small ids that every member of a communicator shares.

use crate::format::node::ShownId;
use rustc_hash::FxHashMap;

use tracer_common::{call, CallRecord};

use crate::format::calls::{
    split_call_field, CallField, Flavor, MPICH_COMM_SELF, MPICH_COMM_WORLD,
};
use crate::format::ProcessInfo;

/// A communicator as every member knows it, interned to a small id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CommDef {
    /// MPI_COMM_WORLD of a job (see [`job_key`]).
    World {
        job: u64,
    },
    /// MPI_COMM_SELF of a process: itself alone.
    OnlySelf {
        pid: u32,
    },
    Dup {
        parent: u32,
        seq: u32,
    },
    Split {
        parent: u32,
        seq: u32,
        color: i32,
    },
    /// MPI_Comm_create: its members are the group it was given (see
    /// [`Directory::group_members`]). Since MPI-2.2 the members of disjoint groups may
    /// call it together; `leader`, the group's first process, tells them apart.
    Create {
        parent: u32,
        seq: u32,
        leader: u32,
    },
    /// MPI_Comm_create_group: called by the group's members only, so it is not in the
    /// parent's creation order; numbered per (parent, group leader, tag) instead.
    CreateGroup {
        parent: u32,
        leader: u32,
        tag: i32,
        seq: u32,
    },
    /// MPI_Cart_create: the parent's first `size` ranks (the product of the dimensions)
    /// in their order. Both libraries ignore `reorder` (Open MPI 4.1's topo/basic and
    /// MPICH 4.0's default `MPIR_Cart_map` keep each rank).
    Cart {
        parent: u32,
        seq: u32,
        size: u32,
    },
    /// MPI_Win_create: a window's members are its communicator's; its fences are
    /// numbered apart from the communicator's collectives.
    Window {
        parent: u32,
        seq: u32,
    },
    /// MPI_Cart_sub of cartesian communicator `parent`: its members whose coordinates in
    /// the dimensions not kept (`remain`: a bit per dimension kept) have linear index
    /// `color` there, by their rank in `parent` (which orders them as their coordinates
    /// in the kept dimensions do: both are row-major).
    CartSub {
        parent: u32,
        seq: u32,
        remain: u64,
        color: u32,
    },
    /// MPI_Intercomm_create: two groups, each knowing the other only through its leader.
    /// Known by what both leaders know (see [`Directory::intercomm_leader_enters`]): the
    /// peer communicator, the two leaders (the lower process first), the tag, and the
    /// place among the creations with the same three.
    Inter {
        peer: u32,
        leaders: (u32, u32),
        tag: i32,
        seq: u32,
    },
    /// MPI_Intercomm_merge of intercommunicator `parent`: the group that passed `high`
    /// false, then the other.
    Merge {
        parent: u32,
        seq: u32,
    },
    /// MPI_Dist_graph_create(_adjacent) without reordering (not asked to, or MPICH): the
    /// parent's members in their order (the graph matters to neighbourhood collectives only, which are not probed).
    DistGraph {
        parent: u32,
        seq: u32,
    },
}

/// The two groups of an intercommunicator: the side of its lower leader, then the other
/// (each learned at its leader's entry into MPI_Intercomm_create).
type InterGroups = [Option<Vec<u32>>; 2];

/// The linear index, row-major, of the coordinates of `rank` in a cartesian grid of
/// `dims` over the dimensions whose `remain` is 0 (MPI_Cart_sub's color: the processes
/// sharing it form one new communicator), with the kept dimensions as a bit mask. None
/// when a dimension is not positive, there are more than 64, or `rank` is off the grid.
fn cart_sub_color(dims: &[u32], remain: &[u64], rank: usize) -> Option<(u64, u32)> {
    if dims.len() > 64 || dims.contains(&0) || remain.len() < dims.len() {
        return None;
    }
    let size = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))?;
    if rank >= size {
        return None;
    }
    let mut coords = vec![0u32; dims.len()];
    let mut left = rank;
    for (c, &d) in coords.iter_mut().zip(dims).rev() {
        *c = (left % d as usize) as u32;
        left /= d as usize;
    }
    let mut mask = 0u64;
    let mut color = 0u32;
    for (i, (&c, &d)) in coords.iter().zip(dims).enumerate() {
        if remain[i] as u32 != 0 {
            mask |= 1 << i;
        } else {
            color = color * d + c;
        }
    }
    Some((mask, color))
}

/// A creating call in progress: its parent and its place in the parent's creation
/// order, taken at entry.
#[derive(Clone, Copy, Debug)]
struct Creation {
    parent: u32,
    seq: u32,
}

/// What a group call makes of its input group (MPI's group algebra, on processes).
#[derive(Clone, Copy, Debug)]
enum GroupOp<'a> {
    Incl(&'a [i32]),
    Excl(&'a [i32]),
    /// (first, last, stride) triples, flattened.
    RangeIncl(&'a [i32]),
    RangeExcl(&'a [i32]),
    Union(&'a [u32]),
    Intersection(&'a [u32]),
    Difference(&'a [u32]),
}

/// The ranks that (first, last, stride) triples name, in order; None for a malformed
/// triple or more ranks than the group has.
fn expand_ranges(triples: &[i32], group_size: usize) -> Option<Vec<i32>> {
    let mut ranks = Vec::new();
    for t in triples.chunks(3) {
        let &[first, last, stride] = t else {
            return None;
        };
        if stride == 0 || (last - first).signum() * stride.signum() < 0 {
            return None;
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            ranks.push(r);
            if ranks.len() > group_size {
                return None;
            }
            r += stride;
        }
    }
    Some(ranks)
}

/// The group (processes by group rank) that `op` makes of `base`; None when a rank is
/// out of range.
fn apply_group_op(base: &[u32], op: GroupOp) -> Option<Vec<u32>> {
    let pick = |ranks: &[i32]| -> Option<Vec<u32>> {
        ranks
            .iter()
            .map(|&r| usize::try_from(r).ok().and_then(|r| base.get(r).copied()))
            .collect()
    };
    let without = |ranks: &[i32]| -> Option<Vec<u32>> {
        if ranks
            .iter()
            .any(|&r| usize::try_from(r).map_or(true, |r| r >= base.len()))
        {
            return None;
        }
        Some(
            base.iter()
                .enumerate()
                .filter(|(i, _)| !ranks.contains(&(*i as i32)))
                .map(|(_, &p)| p)
                .collect(),
        )
    };
    match op {
        GroupOp::Incl(ranks) => pick(ranks),
        GroupOp::Excl(ranks) => without(ranks),
        GroupOp::RangeIncl(t) => pick(&expand_ranges(t, base.len())?),
        GroupOp::RangeExcl(t) => without(&expand_ranges(t, base.len())?),
        GroupOp::Union(other) => {
            let mut v = base.to_vec();
            v.extend(other.iter().filter(|p| !base.contains(p)));
            Some(v)
        }
        GroupOp::Intersection(other) => {
            Some(base.iter().copied().filter(|p| other.contains(p)).collect())
        }
        GroupOp::Difference(other) => Some(
            base.iter()
                .copied()
                .filter(|p| !other.contains(p))
                .collect(),
        ),
    }
}

/// The job of a process: the one its launcher names in the environment, else the
/// ranks that share a parent (the launcher or its daemon) are one job.
fn job_key(info: &ProcessInfo) -> u64 {
    use std::hash::{Hash, Hasher};
    match &info.env_job {
        Some(name) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            name.hash(&mut h);
            // Named jobs never collide with parent pids (below 2^32).
            h.finish() | 1 << 63
        }
        None => info.ppid as u64,
    }
}

#[derive(Default, Clone, Debug)]
struct ProcFacts {
    job: u64,
    /// The process called MPI (a rank, not a helper the launcher started with the same
    /// environment, such as a wrapper script's subshell).
    calls_mpi: bool,
    world_rank: Option<i32>,
    env_rank: Option<i32>,
    world_size: Option<i32>,
    world_handle: Option<u64>,
    /// Open MPI: the process's MPI_COMM_SELF handle.
    self_handle: Option<u64>,
    pvm_tid: Option<i32>,
}

/// A process's part in a Comm_split.
#[derive(Clone, Copy, Debug)]
struct SplitMember {
    pid: u32,
    color: i32,
    key: i32,
}

/// `MPI_UNDEFINED` (both libraries): a split color that yields `MPI_COMM_NULL`.
const MPI_UNDEFINED: i32 = -32766;

/// The color of an MPI_Comm_split_type member whose type groups processes by what the
/// tracer cannot see (a socket, a cache, a NUMA node): its communicator stays unknown.
const UNKNOWN_SPLIT_TYPE: i32 = i32::MIN + 1;

/// MPI_Comm_split_type as a split: `MPI_COMM_TYPE_SHARED` groups the processes that can
/// share memory, and the tracer sees one machine, so every member passing it has one
/// color; MPI_UNDEFINED stays itself (MPI_COMM_NULL); other types are not followed.
fn split_type_color(split_type: i32, flavor: Option<Flavor>) -> i32 {
    if split_type == MPI_UNDEFINED {
        MPI_UNDEFINED
    } else if flavor.and_then(Flavor::comm_type_shared) == Some(split_type) {
        0
    } else {
        UNKNOWN_SPLIT_TYPE
    }
}

/// Who is who: processes, their ranks and task ids, and their communicator handles.
#[derive(Default)]
pub struct Directory {
    procs: FxHashMap<u32, ProcFacts>,
    handles: FxHashMap<(u32, u64), u32>,
    comms: Vec<CommDef>,
    interned: FxHashMap<CommDef, u32>,
    creation_seq: FxHashMap<(u32, u32), u32>,
    /// (parent, seq) -> members' parts of a Comm_split, registered at their entries.
    splits: FxHashMap<(u32, u32), Vec<SplitMember>>,
    /// Thread -> its communicator-creating call in progress (known at entry, mapped to
    /// the new handle at exit).
    creating: FxHashMap<u32, Creation>,
    /// Groups as each process holds them: (pid, group handle) -> processes by group rank.
    groups: FxHashMap<(u32, u64), Vec<u32>>,
    /// Members of communicators made from a group (Create, CreateGroup), by rank.
    group_members: FxHashMap<u32, Vec<u32>>,
    /// (pid, parent, group leader, tag) -> MPI_Comm_create_group calls so far.
    create_group_seq: FxHashMap<(u32, u32, u32, i32), u32>,
    /// Dimensions of the cartesian communicators (Cart_create, Cart_sub).
    cart_dims: FxHashMap<u32, Vec<u32>>,
    /// Intercommunicators by their two groups.
    inter_groups: FxHashMap<u32, InterGroups>,
    /// (local communicator, seq) of an MPI_Intercomm_create -> the intercommunicator its
    /// leader's entry made known: where the other members learn which one they are in.
    inter_pending: FxHashMap<(u32, u32), u32>,
    /// (peer communicator, leader, remote leader, tag) -> the leader's
    /// MPI_Intercomm_create calls so far.
    inter_seq: FxHashMap<(u32, u32, u32, i32), u32>,
    /// (intercommunicator, seq) of an MPI_Intercomm_merge -> members' `high`, by process.
    merge_highs: FxHashMap<(u32, u32), Vec<(u32, bool)>>,
    /// (distributed graph communicator, member) -> its in-neighbours' ranks, as it gave
    /// them to MPI_Dist_graph_create_adjacent.
    in_neighbors: FxHashMap<(u32, u32), Vec<i32>>,
    members_cache: FxHashMap<u32, Vec<u32>>,
    pvm_pids: FxHashMap<i32, u32>,
}

impl Directory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn process(&mut self, info: &ProcessInfo) {
        let f = self.procs.entry(info.pid).or_default();
        f.job = job_key(info);
        f.env_rank = info.env_rank.or(f.env_rank);
        f.world_size = f.world_size.or(info.env_size);
        f.world_handle = info.mpi_world_handle.or(f.world_handle);
        f.self_handle = info.mpi_self_handle.or(f.self_handle);
        self.members_cache.clear();
    }

    /// Process `pid` entered an MPI call.
    pub(crate) fn calls_mpi(&mut self, pid: u32) {
        let f = self.procs.entry(pid).or_default();
        if !f.calls_mpi {
            f.calls_mpi = true;
            self.members_cache.clear();
        }
    }

    /// A communicator-creating call begins. Its place in the parent's creation order,
    /// and a split's color and key, are taken here rather than at its exit: every member
    /// enters MPI_Comm_split before any member can leave it (the call exchanges every
    /// member's color and key), so once any member has left, and a fortiori once any
    /// traffic on the new communicator exists, every member's part is known. Taken at the
    /// exits, a member that starts sending at once would see a communicator with only
    /// the members that had left so far, and its ranks would name the wrong processes.
    /// (MPI_Comm_create_group is not collective over its parent: numbered at exit.)
    pub(crate) fn setup_enter(&mut self, pid: u32, entry: &CallRecord) {
        let CallField { id, flavor } = split_call_field(entry.header.call);
        let flavor = Flavor::from_id(flavor);
        if !matches!(
            id,
            call::MPI_COMM_DUP
                | call::MPI_COMM_SPLIT
                | call::MPI_COMM_SPLIT_TYPE
                | call::MPI_COMM_CREATE
                | call::MPI_CART_CREATE
                | call::MPI_CART_SUB
                | call::MPI_INTERCOMM_CREATE
                | call::MPI_INTERCOMM_MERGE
                | call::MPI_DIST_GRAPH_CREATE_ADJACENT
                | call::MPI_DIST_GRAPH_CREATE
                | call::MPI_WIN_CREATE
        ) {
            return;
        }
        let Some(parent) = self.comm_of(pid, entry.comm, flavor) else {
            return;
        };
        let counter = self.creation_seq.entry((pid, parent)).or_default();
        let seq = *counter;
        *counter += 1;
        let color = match id {
            call::MPI_COMM_SPLIT => Some(entry.peer),
            call::MPI_COMM_SPLIT_TYPE => Some(split_type_color(entry.peer, flavor)),
            _ => None,
        };
        if let Some(color) = color {
            self.splits
                .entry((parent, seq))
                .or_default()
                .push(SplitMember {
                    pid,
                    color,
                    key: entry.peer2,
                });
            self.members_cache.clear();
        }
        match id {
            call::MPI_INTERCOMM_CREATE => self.intercomm_leader_enters(pid, parent, seq, entry),
            // Every member's `high` is in before any member leaves: the groups exchange
            // theirs through their leaders first.
            call::MPI_INTERCOMM_MERGE => self
                .merge_highs
                .entry((parent, seq))
                .or_default()
                .push((pid, entry.peer != 0)),
            _ => {}
        }
        self.creating
            .insert(entry.header.tid, Creation { parent, seq });
    }

    /// A member enters MPI_Intercomm_create on local communicator `local`: if it is the
    /// local leader (only there are the peer communicator and the remote leader
    /// significant), the intercommunicator becomes known, with this side's group. The
    /// other members leave the call only after their leader entered (it tells them the
    /// remote group), so at their exits `inter_pending` names it; and no member leaves
    /// before both leaders entered (they exchange their groups), so both groups are known
    /// before any traffic on it.
    fn intercomm_leader_enters(&mut self, pid: u32, local: u32, seq: u32, entry: &CallRecord) {
        let flavor = Flavor::from_id(split_call_field(entry.header.call).flavor);
        let group = self.members(local);
        let leader = usize::try_from(entry.peer)
            .ok()
            .and_then(|r| group.get(r).copied());
        if leader != Some(pid) {
            return;
        }
        let Some(peer) = self.comm_of(pid, entry.handle, flavor) else {
            return;
        };
        let remote = usize::try_from(entry.peer2)
            .ok()
            .and_then(|r| self.members(peer).get(r).copied());
        let Some(remote) = remote.filter(|&r| r != pid) else {
            return;
        };
        // Both leaders count the creations between them on this peer communicator and
        // tag alike: the n-th of one pairs with the n-th of the other.
        let counter = self
            .inter_seq
            .entry((peer, pid, remote, entry.tag))
            .or_default();
        let n = *counter;
        *counter += 1;
        let leaders = (pid.min(remote), pid.max(remote));
        let gid = self.intern(CommDef::Inter {
            peer,
            leaders,
            tag: entry.tag,
            seq: n,
        });
        let side = usize::from(pid != leaders.0);
        self.inter_groups.entry(gid).or_default()[side] = Some(group);
        self.inter_pending.insert((local, seq), gid);
    }

    /// Facts learned from setup calls (init, rank, task id, groups, communicator
    /// creation). `values` is the call's array argument (group ranks, dimensions).
    pub(crate) fn setup_call(
        &mut self,
        pid: u32,
        entry: &CallRecord,
        exit: &CallRecord,
        values: &[u64],
    ) {
        let CallField { id, flavor } = split_call_field(entry.header.call);
        let flavor = Flavor::from_id(flavor);
        match id {
            call::MPI_COMM_RANK if exit.ret == 0 && self.is_world(pid, entry.comm, flavor) => {
                self.procs.entry(pid).or_default().world_rank = Some(exit.out as i32);
                self.members_cache.clear();
            }
            call::MPI_COMM_SIZE if exit.ret == 0 && self.is_world(pid, entry.comm, flavor) => {
                self.procs.entry(pid).or_default().world_size = Some(exit.out as i32);
                self.members_cache.clear();
            }
            call::PVM_MYTID if exit.ret > 0 => {
                self.procs.entry(pid).or_default().pvm_tid = Some(exit.ret as i32);
                self.pvm_pids.insert(exit.ret as i32, pid);
            }
            call::MPI_COMM_DUP
            | call::MPI_COMM_SPLIT
            | call::MPI_COMM_SPLIT_TYPE
            | call::MPI_COMM_CREATE
            | call::MPI_CART_CREATE
            | call::MPI_CART_SUB
            | call::MPI_INTERCOMM_CREATE
            | call::MPI_INTERCOMM_MERGE
            | call::MPI_DIST_GRAPH_CREATE_ADJACENT
            | call::MPI_DIST_GRAPH_CREATE
            | call::MPI_WIN_CREATE => {
                let Some(creation) = self.creating.remove(&entry.header.tid) else {
                    return;
                };
                if exit.ret != 0 || exit.handle == 0 {
                    return;
                }
                if let Some(def) = self.created(pid, id, creation, entry, values) {
                    let gid = self.intern(def);
                    self.handles.insert((pid, exit.handle), gid);
                }
            }
            call::MPI_COMM_CREATE_GROUP if exit.ret == 0 && exit.handle != 0 => {
                let Some(parent) = self.comm_of(pid, entry.comm, flavor) else {
                    return;
                };
                let Some(members) = self.groups.get(&(pid, entry.handle)).cloned() else {
                    return;
                };
                let Some(&leader) = members.first() else {
                    return;
                };
                let counter = self
                    .create_group_seq
                    .entry((pid, parent, leader, entry.tag))
                    .or_default();
                let seq = *counter;
                *counter += 1;
                let def = CommDef::CreateGroup {
                    parent,
                    leader,
                    tag: entry.tag,
                    seq,
                };
                self.map_group_comm(pid, def, members, exit.handle);
            }
            // Windows are in the communicators' map (their handles are distinct
            // objects: pointers in Open MPI, handles of another kind in MPICH).
            call::MPI_COMM_FREE | call::MPI_WIN_FREE if exit.ret == 0 => {
                self.handles.remove(&(pid, entry.handle));
            }
            call::MPI_COMM_GROUP if exit.ret == 0 => {
                let members = self
                    .comm_of(pid, entry.comm, flavor)
                    .map(|gid| self.members(gid))
                    .filter(|m| !m.is_empty());
                self.set_group(pid, exit.handle, members);
            }
            call::MPI_GROUP_INCL
            | call::MPI_GROUP_EXCL
            | call::MPI_GROUP_RANGE_INCL
            | call::MPI_GROUP_RANGE_EXCL
            | call::MPI_GROUP_UNION
            | call::MPI_GROUP_INTERSECTION
            | call::MPI_GROUP_DIFFERENCE
                if exit.ret == 0 =>
            {
                let group = self.derived_group(pid, id, entry, values);
                self.set_group(pid, exit.handle, group);
            }
            _ => {}
        }
    }

    /// Records what group handle `handle` of `pid` holds; an unknown group forgets what
    /// an earlier group of the same (reused) handle held.
    fn set_group(&mut self, pid: u32, handle: u64, members: Option<Vec<u32>>) {
        match members {
            Some(m) => self.groups.insert((pid, handle), m),
            None => self.groups.remove(&(pid, handle)),
        };
    }

    /// The group a group call made, from its input group(s) and rank list.
    fn derived_group(
        &self,
        pid: u32,
        id: u16,
        entry: &CallRecord,
        values: &[u64],
    ) -> Option<Vec<u32>> {
        let base = self.groups.get(&(pid, entry.comm))?;
        let per_count = if matches!(id, call::MPI_GROUP_RANGE_INCL | call::MPI_GROUP_RANGE_EXCL) {
            3
        } else {
            1
        };
        // The probes read at most ARRAY_MAX_CHUNKS * ARRAY_CHUNK values: a longer list is
        // not known whole.
        let want = usize::try_from(entry.count).ok()? * per_count;
        let ranks: Vec<i32> = values.iter().map(|&v| v as u32 as i32).collect();
        let ranks = ranks.get(..want);
        let other = || self.groups.get(&(pid, entry.handle));
        let op = match id {
            call::MPI_GROUP_INCL => GroupOp::Incl(ranks?),
            call::MPI_GROUP_EXCL => GroupOp::Excl(ranks?),
            call::MPI_GROUP_RANGE_INCL => GroupOp::RangeIncl(ranks?),
            call::MPI_GROUP_RANGE_EXCL => GroupOp::RangeExcl(ranks?),
            call::MPI_GROUP_UNION => GroupOp::Union(other()?),
            call::MPI_GROUP_INTERSECTION => GroupOp::Intersection(other()?),
            call::MPI_GROUP_DIFFERENCE => GroupOp::Difference(other()?),
            _ => return None,
        };
        apply_group_op(base, op)
    }

    /// The communicator a collective creating call of `pid` made, or None when the
    /// process is not in it (it got MPI_COMM_NULL) or its members cannot be known.
    fn created(
        &mut self,
        pid: u32,
        id: u16,
        Creation { parent, seq }: Creation,
        entry: &CallRecord,
        values: &[u64],
    ) -> Option<CommDef> {
        match id {
            call::MPI_COMM_DUP => Some(CommDef::Dup { parent, seq }),
            call::MPI_WIN_CREATE => Some(CommDef::Window { parent, seq }),
            // MPI_UNDEFINED color gives MPI_COMM_NULL: nothing to map.
            call::MPI_COMM_SPLIT => (entry.peer != MPI_UNDEFINED).then_some(CommDef::Split {
                parent,
                seq,
                color: entry.peer,
            }),
            call::MPI_COMM_SPLIT_TYPE => {
                let flavor = Flavor::from_id(split_call_field(entry.header.call).flavor);
                let color = split_type_color(entry.peer, flavor);
                (color != MPI_UNDEFINED && color != UNKNOWN_SPLIT_TYPE).then_some(CommDef::Split {
                    parent,
                    seq,
                    color,
                })
            }
            call::MPI_COMM_CREATE => {
                let members = self.groups.get(&(pid, entry.handle))?.clone();
                let leader = *members.first()?;
                let def = CommDef::Create {
                    parent,
                    seq,
                    leader,
                };
                self.map_group_comm(pid, def, members, 0)
            }
            call::MPI_CART_CREATE => {
                let dims = values.get(..usize::try_from(entry.count).ok()?)?;
                let dims: Vec<u32> = dims
                    .iter()
                    .map(|&d| u32::try_from(d as u32 as i32).ok())
                    .collect::<Option<_>>()?;
                let size = dims.iter().try_fold(1u32, |n, &d| n.checked_mul(d))?;
                let rank = self.members(parent).iter().position(|&p| p == pid)?;
                let def = ((rank as u32) < size).then_some(CommDef::Cart { parent, seq, size })?;
                let gid = self.intern(def);
                self.cart_dims.insert(gid, dims);
                Some(def)
            }
            // Every member derives its own communicator from the grid: remain_dims is
            // the same at all of them (MPI requires it).
            call::MPI_CART_SUB => {
                let dims = self.cart_dims_of(parent)?.clone();
                let rank = self.members(parent).iter().position(|&p| p == pid)?;
                let (remain, color) = cart_sub_color(&dims, values, rank)?;
                let def = CommDef::CartSub {
                    parent,
                    seq,
                    remain,
                    color,
                };
                let gid = self.intern(def);
                let kept = (0..dims.len()).filter(|i| remain >> i & 1 != 0);
                self.cart_dims.insert(gid, kept.map(|i| dims[i]).collect());
                Some(def)
            }
            call::MPI_INTERCOMM_CREATE => {
                let gid = *self.inter_pending.get(&(parent, seq))?;
                self.comms.get(gid as usize).copied()
            }
            call::MPI_INTERCOMM_MERGE => Some(CommDef::Merge { parent, seq }),
            // Asked to, Open MPI may reorder the ranks (its topo/treematch does): then they
            // are not known. MPICH never does (both its implementations copy the old
            // communicator's ranks, `reorder` unused).
            call::MPI_DIST_GRAPH_CREATE_ADJACENT | call::MPI_DIST_GRAPH_CREATE => {
                let flavor = Flavor::from_id(split_call_field(entry.header.call).flavor);
                let def = (entry.peer == 0 || flavor == Some(Flavor::Mpich))
                    .then_some(CommDef::DistGraph { parent, seq })?;
                // The sources whole (the probes read up to 64), else the neighbourhood
                // collectives' dependencies stay unknown.
                let sources = usize::try_from(entry.count)
                    .ok()
                    .and_then(|n| values.get(..n));
                if let (call::MPI_DIST_GRAPH_CREATE_ADJACENT, Some(sources)) = (id, sources) {
                    let gid = self.intern(def);
                    let ranks = sources.iter().map(|&r| r as u32 as i32).collect();
                    self.in_neighbors.insert((gid, pid), ranks);
                }
                Some(def)
            }
            _ => None,
        }
    }

    /// A communicator whose members are a group `pid` holds: known, and mapped to
    /// `handle` (unless 0), when `pid` is one of them (else it got MPI_COMM_NULL).
    fn map_group_comm(
        &mut self,
        pid: u32,
        def: CommDef,
        members: Vec<u32>,
        handle: u64,
    ) -> Option<CommDef> {
        if !members.contains(&pid) {
            return None;
        }
        let gid = self.intern(def);
        self.group_members.entry(gid).or_insert(members);
        self.members_cache.remove(&gid);
        if handle != 0 {
            self.handles.insert((pid, handle), gid);
        }
        Some(def)
    }

    fn intern(&mut self, def: CommDef) -> u32 {
        if let Some(&id) = self.interned.get(&def) {
            return id;
        }
        let id = self.comms.len() as u32;
        self.comms.push(def);
        self.interned.insert(def, id);
        id
    }

    /// The dimensions of cartesian communicator `gid` (or of the one it duplicates).
    fn cart_dims_of(&self, gid: u32) -> Option<&Vec<u32>> {
        match self.comms.get(gid as usize)? {
            CommDef::Dup { parent, .. } => self.cart_dims_of(*parent),
            _ => self.cart_dims.get(&gid),
        }
    }

    /// The in-neighbours of `pid` on distributed graph communicator `gid` (or a dup of
    /// one), by process; None when unknown (a graph from MPI_Dist_graph_create, whose
    /// edges any member may give, or a cartesian one).
    pub(crate) fn in_neighbors(&mut self, pid: u32, gid: u32) -> Option<Vec<u32>> {
        let mut topo = gid;
        while let Some(CommDef::Dup { parent, .. }) = self.comms.get(topo as usize) {
            topo = *parent;
        }
        let ranks = self.in_neighbors.get(&(topo, pid))?.clone();
        let members = self.members(gid);
        ranks
            .iter()
            .map(|&r| {
                usize::try_from(r)
                    .ok()
                    .and_then(|r| members.get(r).copied())
            })
            .collect()
    }

    /// The intercommunicator `gid` is (or duplicates), if it is one.
    fn inter_of(&self, gid: u32) -> Option<u32> {
        match self.comms.get(gid as usize)? {
            CommDef::Inter { .. } => Some(gid),
            CommDef::Dup { parent, .. } => self.inter_of(*parent),
            _ => None,
        }
    }

    /// The processes that point-to-point ranks on communicator `gid` name for process
    /// `pid`, by rank: its members, or on an intercommunicator the group `pid` is not
    /// in (ranks there name the remote group). Empty while unknown.
    pub(crate) fn peers(&mut self, pid: u32, gid: u32) -> Vec<u32> {
        if self.inter_of(gid).is_none() {
            return self.members(gid);
        }
        self.inter_sides(pid, gid)
            .map(|(_, remote)| remote.to_vec())
            .unwrap_or_default()
    }

    /// On an intercommunicator (or a dup of one) whose groups are known: the group of
    /// `pid` and the other one.
    pub(crate) fn inter_sides(&self, pid: u32, gid: u32) -> Option<(&[u32], &[u32])> {
        match self.inter_groups.get(&self.inter_of(gid)?)? {
            [Some(a), Some(b)] if a.contains(&pid) => Some((a, b)),
            [Some(a), Some(b)] if b.contains(&pid) => Some((b, a)),
            _ => None,
        }
    }

    fn is_world(&self, pid: u32, handle: u64, flavor: Option<Flavor>) -> bool {
        match flavor {
            Some(Flavor::Mpich) => handle == MPICH_COMM_WORLD,
            Some(Flavor::OpenMpi) => {
                self.procs.get(&pid).and_then(|f| f.world_handle) == Some(handle)
            }
            _ => false,
        }
    }

    fn is_self(&self, pid: u32, handle: u64, flavor: Option<Flavor>) -> bool {
        match flavor {
            Some(Flavor::Mpich) => handle == MPICH_COMM_SELF,
            Some(Flavor::OpenMpi) => {
                self.procs.get(&pid).and_then(|f| f.self_handle) == Some(handle)
            }
            _ => false,
        }
    }

    /// The global id of a communicator handle of process `pid`.
    pub(crate) fn comm_of(&mut self, pid: u32, handle: u64, flavor: Option<Flavor>) -> Option<u32> {
        if let Some(&g) = self.handles.get(&(pid, handle)) {
            return Some(g);
        }
        if self.is_world(pid, handle, flavor) {
            let job = self.procs.get(&pid)?.job;
            return Some(self.intern(CommDef::World { job }));
        }
        if self.is_self(pid, handle, flavor) {
            return Some(self.intern(CommDef::OnlySelf { pid }));
        }
        None
    }

    fn rank_in_world(&self, pid: u32) -> Option<i32> {
        let f = self.procs.get(&pid)?;
        f.world_rank.or(f.env_rank)
    }

    /// Members of a communicator, by rank.
    pub fn members(&mut self, gid: u32) -> Vec<u32> {
        if let Some(m) = self.members_cache.get(&gid) {
            return m.clone();
        }
        let m = match self.comms.get(gid as usize).copied() {
            Some(CommDef::World { job }) => {
                // A rank claimed by several processes of the job (the launcher's
                // environment reaches wrapper scripts too) is the one that calls MPI.
                let mut v: Vec<(i32, bool, u32)> = self
                    .procs
                    .iter()
                    .filter(|(_, f)| f.job == job)
                    .filter_map(|(&pid, f)| Some((self.rank_in_world(pid)?, !f.calls_mpi, pid)))
                    .collect();
                v.sort_unstable();
                v.dedup_by(|b, a| a.0 == b.0 && !a.1 && b.1);
                let v: Vec<(i32, u32)> = v.into_iter().map(|(r, _, p)| (r, p)).collect();
                // Ranks must be exactly 0..size for rank -> process to mean anything;
                // until every member is known the world stays unresolved (and uncached).
                let size = self
                    .procs
                    .values()
                    .filter(|f| f.job == job)
                    .find_map(|f| f.world_size);
                let complete = v.iter().enumerate().all(|(i, (r, _))| *r == i as i32)
                    && size.is_none_or(|n| v.len() == n as usize);
                if !complete {
                    return Vec::new();
                }
                v.into_iter().map(|(_, p)| p).collect()
            }
            Some(CommDef::OnlySelf { pid }) => vec![pid],
            Some(CommDef::Dup { parent, .. } | CommDef::Window { parent, .. }) => {
                self.members(parent)
            }
            Some(CommDef::Split { parent, seq, color }) => {
                let parent_members = self.members(parent);
                let regs = self.splits.get(&(parent, seq)).map_or(&[][..], |r| &r[..]);
                // Ranks follow (key, parent rank) over the whole color, so they mean
                // something only once every member of the parent took part (causally
                // true before any traffic on it, see `setup_enter`; not when tracing
                // began inside the split). Until then: unresolved and uncached.
                if parent_members.is_empty() || regs.len() < parent_members.len() {
                    return Vec::new();
                }
                let mut v: Vec<(i32, usize, u32)> = regs
                    .iter()
                    .filter(|m| m.color == color)
                    .filter_map(|m| {
                        let parent_rank = parent_members.iter().position(|&p| p == m.pid)?;
                        Some((m.key, parent_rank, m.pid))
                    })
                    .collect();
                v.sort_unstable();
                v.into_iter().map(|(_, _, p)| p).collect()
            }
            Some(CommDef::Create { .. } | CommDef::CreateGroup { .. }) => {
                self.group_members.get(&gid).cloned().unwrap_or_default()
            }
            Some(CommDef::Cart { parent, size, .. }) => {
                let mut m = self.members(parent);
                if m.len() < size as usize {
                    return Vec::new();
                }
                m.truncate(size as usize);
                m
            }
            Some(CommDef::CartSub {
                parent,
                remain,
                color,
                ..
            }) => {
                let m = self.members(parent);
                let Some(dims) = self.cart_dims_of(parent) else {
                    return Vec::new();
                };
                // The grid whole, or unresolved (and uncached) until it is.
                if m.len() != dims.iter().map(|&d| d as usize).product::<usize>() {
                    return Vec::new();
                }
                let remain: Vec<u64> = (0..dims.len()).map(|i| remain >> i & 1).collect();
                m.iter()
                    .enumerate()
                    .filter(|&(r, _)| {
                        cart_sub_color(dims, &remain, r).is_some_and(|(_, c)| c == color)
                    })
                    .map(|(_, &p)| p)
                    .collect()
            }
            // Not an intracommunicator: its ranks name a group of their own per side
            // (`peers`), and its collectives are not followed.
            Some(CommDef::Inter { .. }) => Vec::new(),
            Some(CommDef::Merge { parent, seq }) => {
                // Known once a `high` of each group is in (causally so before any member
                // leaves, see `setup_enter`); until then unresolved and uncached. Groups
                // that passed the same `high` are ordered as the library likes: unknown.
                let groups = self
                    .inter_of(parent)
                    .and_then(|g| self.inter_groups.get(&g));
                let Some([Some(a), Some(b)]) = groups else {
                    return Vec::new();
                };
                let highs = self.merge_highs.get(&(parent, seq));
                let high_of = |side: &[u32]| {
                    highs
                        .into_iter()
                        .flatten()
                        .find(|(p, _)| side.contains(p))
                        .map(|&(_, h)| h)
                };
                match (high_of(a), high_of(b)) {
                    (Some(false), Some(true)) => [&a[..], &b[..]].concat(),
                    (Some(true), Some(false)) => [&b[..], &a[..]].concat(),
                    _ => return Vec::new(),
                }
            }
            Some(CommDef::DistGraph { parent, .. }) => self.members(parent),
            None => Vec::new(),
        };
        self.members_cache.insert(gid, m.clone());
        m
    }

    /// A communicator's name for a reader (the OTF2 export): what made it.
    pub(crate) fn comm_name(&self, gid: u32) -> String {
        match self.comms.get(gid as usize) {
            Some(CommDef::World { .. }) => "MPI_COMM_WORLD".into(),
            Some(CommDef::OnlySelf { pid }) => format!("MPI_COMM_SELF of {}", ShownId(*pid)),
            Some(CommDef::Dup { parent, seq }) => format!("MPI_Comm_dup #{seq} of comm {parent}"),
            Some(CommDef::Split { parent, seq, color }) => {
                format!("MPI_Comm_split #{seq} of comm {parent}, color {color}")
            }
            Some(CommDef::Create { parent, seq, .. }) => {
                format!("MPI_Comm_create #{seq} of comm {parent}")
            }
            Some(CommDef::CreateGroup {
                parent, tag, seq, ..
            }) => {
                format!("MPI_Comm_create_group #{seq} of comm {parent}, tag {tag}")
            }
            Some(CommDef::Cart { parent, seq, .. }) => {
                format!("MPI_Cart_create #{seq} of comm {parent}")
            }
            Some(CommDef::Window { parent, seq }) => {
                format!("MPI_Win_create #{seq} of comm {parent}")
            }
            Some(CommDef::CartSub {
                parent, seq, color, ..
            }) => {
                format!("MPI_Cart_sub #{seq} of comm {parent}, color {color}")
            }
            Some(CommDef::Inter {
                leaders: (a, b),
                tag,
                seq,
                ..
            }) => {
                format!("MPI_Intercomm_create #{seq} of leaders {a} and {b}, tag {tag}")
            }
            Some(CommDef::Merge { parent, seq }) => {
                format!("MPI_Intercomm_merge #{seq} of comm {parent}")
            }
            Some(CommDef::DistGraph { parent, seq }) => {
                format!("MPI_Dist_graph_create #{seq} of comm {parent}")
            }
            None => format!("comm {gid}"),
        }
    }

    pub fn pvm_tid(&self, pid: u32) -> Option<i32> {
        self.procs.get(&pid)?.pvm_tid
    }

    /// The MPI_COMM_WORLD rank of a process, from MPI_Comm_rank or the launcher.
    pub(crate) fn world_rank(&self, pid: u32) -> Option<i32> {
        let f = self.procs.get(&pid)?;
        f.world_rank.or(f.env_rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_algebra_follows_mpi() {
        let world = [100, 101, 102, 103, 104, 105];
        assert_eq!(
            apply_group_op(&world, GroupOp::Incl(&[3, 1, 2])),
            Some(vec![103, 101, 102])
        );
        assert_eq!(apply_group_op(&world, GroupOp::Incl(&[6])), None);
        assert_eq!(
            apply_group_op(&world, GroupOp::Excl(&[0, 4])),
            Some(vec![101, 102, 103, 105])
        );
        // (0, 4, 2) and (5, 3, -2): 0 2 4 5 3.
        assert_eq!(
            apply_group_op(&world, GroupOp::RangeIncl(&[0, 4, 2, 5, 3, -2])),
            Some(vec![100, 102, 104, 105, 103])
        );
        assert_eq!(
            apply_group_op(&world, GroupOp::RangeExcl(&[1, 5, 2])),
            Some(vec![100, 102, 104])
        );
        assert_eq!(apply_group_op(&world, GroupOp::RangeIncl(&[0, 4, 0])), None);
        let a = [103, 101];
        assert_eq!(
            apply_group_op(&a, GroupOp::Union(&[100, 101, 105])),
            Some(vec![103, 101, 100, 105])
        );
        assert_eq!(
            apply_group_op(&world, GroupOp::Intersection(&a)),
            Some(vec![101, 103])
        );
        assert_eq!(
            apply_group_op(&world, GroupOp::Difference(&a)),
            Some(vec![100, 102, 104, 105])
        );
    }

    /// A 2 x 3 grid, ranks row-major: keeping dimension 1 groups each row, keeping
    /// dimension 0 each column; keeping none leaves each rank alone, keeping all the grid.
    #[test]
    fn cart_sub_groups_the_ranks_sharing_the_dropped_coordinates() {
        let dims = [2, 3];
        let color = |remain: [u64; 2], r| cart_sub_color(&dims, &remain, r).unwrap();
        // Rank 4 is at (1, 1).
        assert_eq!(color([0, 1], 4), (0b10, 1));
        assert_eq!(color([1, 0], 4), (0b01, 1));
        assert_eq!(color([0, 0], 4), (0, 4));
        assert_eq!(color([1, 1], 4), (0b11, 0));
        let row: Vec<usize> = (0..6).filter(|&r| color([0, 1], r).1 == 1).collect();
        assert_eq!(row, [3, 4, 5]);
        let column: Vec<usize> = (0..6).filter(|&r| color([1, 0], r).1 == 1).collect();
        assert_eq!(column, [1, 4]);
        assert_eq!(cart_sub_color(&dims, &[0, 1], 6), None, "off the grid");
        assert_eq!(
            cart_sub_color(&dims, &[0], 1),
            None,
            "remain_dims read short"
        );
    }
}
