//! The k longest source-to-sink paths of a [`Graph`] ("near-critical paths"): the
//! best-first search over slack of Alexander, Reese and Harden (1994, section III.D),
//! and their simpler "extended longest path algorithm" as a baseline.
//!
//! ## Why slack makes a best-first search possible
//!
//! With `L` the critical path length, a path's *cost* is `L - length`. For a prefix `P`
//! from the source to `u` and an arc `a = u -> v` leaving it, the longest full path that
//! starts with `P` and `a` costs `FS_sum(P) + TS(a)` (free slack of the prefix's arcs
//! plus the total slack of `a`): free slack telescopes, so `len(P) = early(u) -
//! FS_sum(P)`, and `TS(a) = L - early(u) - w(a) - tail(v)`. The cost of a partial path is
//! therefore exact, not a heuristic, and the search can output paths in order.
//!
//! Sort each vertex's out-arcs (only those that reach the sink) by total slack. The
//! first one (rank 0) lies on a longest path from its vertex to the sink, so following
//! rank-0 arcs gives a vertex's longest completion; these arcs form the *min-slack
//! tree* towards the sink. Taking the arc `b` of rank `r > 0` at `x` instead of rank 0
//! costs `delta(b) = TS(b) - TS(rank 0) = tail(x) - w(b) - tail(to b)`. Every path is
//! then its list of deviations (arcs that are not rank 0), and its cost is the sum of
//! their deltas. A path is stored as its parent (the path with its last deviation
//! removed), that last deviation and its cost: O(1) memory per path, O(k + e) in all.
//!
//! ## The search
//!
//! The critical path (no deviation) is output first. Whenever a path is output, its
//! children are offered as candidates: walking its completion (from the head of its
//! last deviation, or from the source), each vertex `x` offers the deviation via its
//! rank-1 arc at `cost + delta`. The rank-2 arc and beyond are offered lazily: when
//! the deviation via rank `r` at `x` is output, its sibling via rank `r + 1` (same
//! parent) becomes a candidate. Every candidate costs at least its generator, so
//! taking the cheapest candidate each time outputs paths in nondecreasing cost, each
//! exactly once.
//!
//! Only `k - output` candidates can still matter, so the candidates live in a bounded
//! double-ended priority queue (a `BTreeSet`: the cheapest is taken, the dearest is
//! evicted). Anything evicted or refused costs no less than every candidate kept, and
//! so do its descendants: dropping them is safe.
//!
//! Walks are pruned: once the queue is full, a deviation is worth offering only if it
//! costs less than the dearest candidate (the current bound). `suffix_min(x)`, the
//! smallest rank-1 delta on the completion from `x`, ends a walk at once when nothing
//! ahead can beat the bound. That is not enough on trace graphs: completions are long
//! (a path crosses the whole run) and the few deviations cheap enough to beat the bound
//! are spread all along them, so walking vertex by vertex costs O(n) per output path
//! (30 s instead of 1 s for k = 100,000 in docs/benchmarks.md). Instead each tree
//! vertex also has a skew-binary jump pointer (Myers, "An applicative random-access
//! stack", 1983) with the smallest rank-1 delta it jumps over, so the next vertex whose
//! deviation beats the bound is found in O(log n) steps. A walk thus costs O(log n) per
//! candidate offered, and at most the O(n) walk of the paper.

use std::collections::BTreeSet;

use super::cpm::{Schedule, UNREACHABLE};
use super::{ArcId, Graph, VertexId};

/// No vertex, arc or path.
const NONE: u32 = u32::MAX;
/// No deviation.
const INF: u64 = u64::MAX;

/// One of the k longest paths, stored against its parent.
#[derive(Clone, Copy, Debug)]
struct PathRecord {
    /// Index of the parent path ([`NONE`] for the critical path).
    parent: u32,
    /// The arc where this path leaves its parent's completion ([`NONE`] for the critical
    /// path).
    deviation: ArcId,
    /// Critical path length minus this path's length.
    cost: u64,
}

/// The k longest source-to-sink paths, longest first (ties in a fixed order).
#[derive(Clone, Debug)]
pub struct NearCriticalPaths {
    critical_length: u64,
    requested: usize,
    /// Each vertex's min-slack out-arc ([`NONE`] at the sink and where the sink cannot be
    /// reached): the completions every path follows between its deviations.
    tree_arc: Vec<ArcId>,
    paths: Vec<PathRecord>,
}

/// Summary of one near-critical path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathInfo {
    pub length: u64,
    /// Critical path length minus `length`.
    pub slack: u64,
    /// `length` as a percentage of the critical path length (100 for the critical
    /// path, also when the critical path has length 0).
    pub near_criticality_pct: f64,
}

impl NearCriticalPaths {
    /// The `k` longest paths of `g`, weighted with its own weights; `s` must be
    /// `Schedule::new(g)`. Fewer when `g` has fewer paths (none when no vertex ends a
    /// path). Memory O(k + e). Time: sorting the out-arcs, then per output path one walk
    /// of at most its completion's length, O(log k) per candidate kept: O(k e log k) at
    /// worst; on trace graphs the sort dominates up to k = 10,000 (docs/benchmarks.md).
    pub fn search(g: &Graph, s: &Schedule, k: usize) -> NearCriticalPaths {
        assert_eq!(s.tail.len(), g.vertex_count(), "schedule of another graph");
        // Path ids are u32.
        let k = k.min(NONE as usize - 1);
        let mut found = NearCriticalPaths {
            critical_length: s.length,
            requested: k,
            tree_arc: Vec::new(),
            paths: Vec::new(),
        };
        if k == 0 || s.tail[g.source() as usize] == UNREACHABLE {
            return found;
        }
        let tree = MinSlackTree::new(g, s);
        let mut queue = Candidates::new(k - 1);
        found.paths.push(PathRecord {
            parent: NONE,
            deviation: NONE,
            cost: 0,
        });
        tree.walk(g.source(), 0, 0, &mut queue);
        while let Some(c) = queue.take() {
            let id = found.paths.len() as u32;
            let deviation = tree.order[c.rank as usize];
            let a = g.arc(deviation);
            found.paths.push(PathRecord {
                parent: c.parent,
                deviation,
                cost: c.cost,
            });
            let next = c.rank + 1;
            if next < tree.start[a.from as usize + 1] {
                let prefix = c.cost - tree.delta(g, s, deviation);
                queue.offer(Candidate {
                    cost: prefix.saturating_add(tree.delta(g, s, tree.order[next as usize])),
                    parent: c.parent,
                    rank: next,
                });
            }
            tree.walk(a.to, id, c.cost, &mut queue);
        }
        found.tree_arc = tree.into_tree_arcs();
        found
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Whether these are all the paths of the graph (fewer than requested were found).
    pub(crate) fn is_complete(&self) -> bool {
        self.paths.len() < self.requested
    }

    pub fn critical_length(&self) -> u64 {
        self.critical_length
    }

    /// Length of the `j`-th longest path (`j = 0` is the critical path).
    pub fn length(&self, j: usize) -> u64 {
        self.critical_length - self.paths[j].cost
    }

    /// Critical path length minus the `j`-th path's length.
    pub fn slack(&self, j: usize) -> u64 {
        self.paths[j].cost
    }

    pub fn info(&self, j: usize) -> PathInfo {
        let length = self.length(j);
        let near_criticality_pct = if self.critical_length == 0 {
            100.0
        } else {
            length as f64 * 100.0 / self.critical_length as f64
        };
        PathInfo {
            length,
            slack: self.slack(j),
            near_criticality_pct,
        }
    }

    /// All path lengths, longest first.
    pub fn lengths(&self) -> Vec<u64> {
        (0..self.len()).map(|j| self.length(j)).collect()
    }

    /// The arcs of the `j`-th path from the source to the sink: its parents'
    /// deviations, joined by min-slack completions. O(path length).
    pub fn arcs(&self, g: &Graph, j: usize) -> Vec<ArcId> {
        let mut deviations = Vec::new();
        let mut p = j;
        while let Some(Deviation { parent, arc }) = self.deviation(p) {
            deviations.push(arc);
            p = parent;
        }
        let mut path = Vec::new();
        let mut at = g.source();
        for &d in deviations.iter().rev() {
            self.complete(g, &mut at, g.arc(d).from, &mut path);
            path.push(d);
            at = g.arc(d).to;
        }
        self.complete(g, &mut at, g.sink(), &mut path);
        path
    }

    /// Follows min-slack arcs from `at` to `until` (ids grow along a path, so the
    /// comparison also stops a walk on a graph this was not computed for).
    fn complete(&self, g: &Graph, at: &mut VertexId, until: VertexId, path: &mut Vec<ArcId>) {
        while *at < until {
            let Some(id) = self.tree_arc(*at) else { break };
            path.push(id);
            *at = g.arc(id).to;
        }
    }

    /// The min-slack out-arc of `v`: the first arc of its longest completion.
    pub(crate) fn tree_arc(&self, v: VertexId) -> Option<ArcId> {
        self.tree_arc
            .get(v as usize)
            .copied()
            .filter(|&a| a != NONE)
    }

    /// The `j`-th path's parent and the arc where it leaves the parent's completion;
    /// `None` for the critical path. Parents come before their children.
    pub(crate) fn deviation(&self, j: usize) -> Option<Deviation> {
        let p = self.paths[j];
        (p.parent != NONE).then_some(Deviation {
            parent: p.parent as usize,
            arc: p.deviation,
        })
    }
}

/// Where a path leaves its parent: the parent's index and the first arc not on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deviation {
    pub(crate) parent: usize,
    pub(crate) arc: ArcId,
}

/// A path offered for output: `parent`'s prefix, then the arc at position `rank` of
/// [`MinSlackTree::order`], then the min-slack completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    cost: u64,
    parent: u32,
    rank: u32,
}

/// The bounded double-ended priority queue of candidates: at most `room` (the number
/// of paths still to output) are kept.
struct Candidates {
    set: BTreeSet<Candidate>,
    room: usize,
}

impl Candidates {
    fn new(room: usize) -> Self {
        Candidates {
            set: BTreeSet::new(),
            room,
        }
    }

    /// Candidates must cost less than this to be kept.
    fn bound(&self) -> u64 {
        if self.set.len() < self.room {
            INF
        } else {
            self.set.last().map_or(0, |c| c.cost)
        }
    }

    fn offer(&mut self, c: Candidate) {
        if c.cost >= self.bound() {
            return;
        }
        if self.set.len() >= self.room {
            self.set.pop_last();
        }
        self.set.insert(c);
    }

    /// The cheapest candidate, which becomes an output path.
    fn take(&mut self) -> Option<Candidate> {
        let c = self.set.pop_first()?;
        self.room -= 1;
        Some(c)
    }
}

/// The sorted out-arcs and the min-slack tree with its jump pointers; lives only
/// during the search.
struct MinSlackTree {
    sink: VertexId,
    /// Out-arcs that reach the sink, by nondecreasing total slack (then id):
    /// `order[start[v]..start[v + 1]]` for vertex `v`.
    order: Vec<ArcId>,
    start: Vec<u32>,
    /// Tree parent: head of the rank-0 arc ([`NONE`] off the tree).
    next: Vec<VertexId>,
    /// Delta of the rank-1 arc ([`INF`] if there is none).
    delta1: Vec<u64>,
    /// Smallest `delta1` on the completion from each vertex (the vertex included).
    suffix_min: Vec<u64>,
    /// Skew-binary jump pointer towards the sink, and the smallest `delta1` on the
    /// completion from the vertex (included) to `jump` (excluded).
    jump: Vec<VertexId>,
    jump_min: Vec<u64>,
}

impl MinSlackTree {
    fn new(g: &Graph, s: &Schedule) -> Self {
        let n = g.vertex_count();
        let sink = g.sink();
        let reaches = |v: VertexId| s.tail[v as usize] != UNREACHABLE;
        let mut start = Vec::with_capacity(n + 1);
        let mut order = Vec::new();
        start.push(0u32);
        for v in 0..n as VertexId {
            let first = order.len();
            order.extend(g.out_arcs(v).filter(|&id| reaches(g.arc(id).to)));
            order[first..].sort_unstable_by_key(|&id| (Self::delta_of(g, s, id), id));
            start.push(order.len() as u32);
        }
        let mut tree = MinSlackTree {
            sink,
            order,
            start,
            next: vec![NONE; n],
            delta1: vec![INF; n],
            suffix_min: vec![INF; n],
            jump: vec![NONE; n],
            jump_min: vec![INF; n],
        };
        // Depths only serve to build the jump pointers.
        let mut depth = vec![0u32; n];
        tree.jump[sink as usize] = sink;
        for v in (0..sink).rev() {
            let (lo, hi) = (
                tree.start[v as usize] as usize,
                tree.start[v as usize + 1] as usize,
            );
            if lo == hi {
                continue; // The sink is unreachable from v.
            }
            let x = v as usize;
            let p = g.arc(tree.order[lo]).to;
            tree.next[x] = p;
            if hi - lo > 1 {
                tree.delta1[x] = Self::delta_of(g, s, tree.order[lo + 1]);
            }
            tree.suffix_min[x] = tree.delta1[x].min(tree.suffix_min[p as usize]);
            depth[x] = depth[p as usize] + 1;
            let j1 = tree.jump[p as usize];
            let j2 = tree.jump[j1 as usize];
            let (d, d1, d2) = (depth[p as usize], depth[j1 as usize], depth[j2 as usize]);
            if d - d1 == d1 - d2 {
                // Two equal jumps ahead: merge them with the step to p.
                tree.jump[x] = j2;
                tree.jump_min[x] = tree.delta1[x]
                    .min(tree.jump_min[p as usize])
                    .min(tree.jump_min[j1 as usize]);
            } else {
                tree.jump[x] = p;
                tree.jump_min[x] = tree.delta1[x];
            }
        }
        tree
    }

    /// What taking arc `id` costs compared with its tail's longest completion.
    fn delta_of(g: &Graph, s: &Schedule, id: ArcId) -> u64 {
        let a = g.arc(id);
        let through = s.tail[a.to as usize].saturating_add(a.weight);
        s.tail[a.from as usize].saturating_sub(through)
    }

    fn delta(&self, g: &Graph, s: &Schedule, id: ArcId) -> u64 {
        Self::delta_of(g, s, id)
    }

    /// Offers the rank-1 deviations on the completion from `from` of path `parent`
    /// (which costs `cost`), skipping those that cannot beat the queue's bound.
    fn walk(&self, from: VertexId, parent: u32, cost: u64, queue: &mut Candidates) {
        let mut x = from;
        while x != self.sink {
            let bound = queue.bound();
            if cost.saturating_add(self.suffix_min[x as usize]) >= bound {
                return;
            }
            let Some(y) = self.first_below(x, bound - cost) else {
                return;
            };
            queue.offer(Candidate {
                cost: cost + self.delta1[y as usize],
                parent,
                rank: self.start[y as usize] + 1,
            });
            x = self.next[y as usize];
        }
    }

    /// The first vertex on the completion from `x` (included) whose rank-1 delta is
    /// below `limit`. Myers' search: jump over a stretch when its minimum is too large,
    /// step otherwise; O(log depth) steps.
    fn first_below(&self, mut x: VertexId, limit: u64) -> Option<VertexId> {
        while x != self.sink {
            let i = x as usize;
            if self.delta1[i] < limit {
                return Some(x);
            }
            x = if self.jump_min[i] >= limit {
                self.jump[i]
            } else {
                self.next[i]
            };
        }
        None
    }

    fn into_tree_arcs(self) -> Vec<ArcId> {
        (0..self.start.len() - 1)
            .map(|v| {
                let lo = self.start[v];
                if lo < self.start[v + 1] {
                    self.order[lo as usize]
                } else {
                    NONE
                }
            })
            .collect()
    }
}

/// The k largest path lengths by Alexander's "extended longest path algorithm": in
/// topological order, each vertex gets the sorted `k` largest lengths of paths from
/// the source, merged from its in-arcs' tails. O(k e) time; a vertex's array is freed
/// once all its out-arcs have been merged, so memory is k times the frontier. Lengths
/// only (the benchmark's baseline and the tests' second opinion).
#[cfg(test)]
pub(crate) fn k_longest_lengths_baseline(g: &Graph, k: usize) -> Vec<u64> {
    k_longest_lengths_baseline_within(g, k, &mut |_| true).unwrap_or_default()
}

/// [`k_longest_lengths_baseline`] that asks `keep_going(arcs merged so far)` every
/// few thousand vertices and gives up (`None`) when it says no: the benchmark bounds
/// the baseline's time this way and extrapolates.
pub fn k_longest_lengths_baseline_within(
    g: &Graph,
    k: usize,
    keep_going: &mut dyn FnMut(usize) -> bool,
) -> Option<Vec<u64>> {
    if k == 0 {
        return Some(Vec::new());
    }
    let n = g.vertex_count();
    // Each live vertex's array sits in a slot of `lists`; freed slots and their
    // buffers are reused, so allocation follows the frontier, not the graph.
    let mut slot = vec![NONE; n];
    let mut lists: Vec<Vec<u64>> = Vec::new();
    let mut free_slots: Vec<u32> = Vec::new();
    let mut spare: Vec<Vec<u64>> = Vec::new();
    let mut pending: Vec<u32> = (0..n as VertexId)
        .map(|v| g.out_arcs(v).len() as u32)
        .collect();
    let mut merged = Vec::with_capacity(k);
    let mut arcs_done = 0usize;
    let sink = g.sink();
    for v in 0..n as VertexId {
        if v % 4096 == 0 && !keep_going(arcs_done) {
            return None;
        }
        let mut cur = spare.pop().unwrap_or_else(|| Vec::with_capacity(k));
        cur.clear();
        if v == g.source() {
            cur.push(0);
        }
        for &id in g.in_arcs(v) {
            let a = g.arc(id);
            let u = a.from as usize;
            let i = slot[u] as usize;
            merge_top(&cur, &lists[i], a.weight, k, &mut merged);
            std::mem::swap(&mut cur, &mut merged);
            pending[u] -= 1;
            if pending[u] == 0 {
                spare.push(std::mem::take(&mut lists[i]));
                free_slots.push(i as u32);
                slot[u] = NONE;
            }
            arcs_done += 1;
        }
        if v == sink {
            return Some(cur);
        }
        if pending[v as usize] == 0 {
            // No out-arc: nothing will read this array.
            spare.push(cur);
            continue;
        }
        slot[v as usize] = match free_slots.pop() {
            Some(i) => {
                lists[i as usize] = cur;
                i
            }
            None => {
                lists.push(cur);
                (lists.len() - 1) as u32
            }
        };
    }
    Some(Vec::new())
}

/// The `k` largest of `a` and `b + w` (both sorted descending) into `out`.
fn merge_top(a: &[u64], b: &[u64], w: u64, k: usize, out: &mut Vec<u64>) {
    out.clear();
    let (mut i, mut j) = (0, 0);
    while out.len() < k {
        let x = a.get(i).copied();
        let y = b.get(j).map(|&y| y + w);
        match (x, y) {
            (Some(x), Some(y)) if x >= y => {
                out.push(x);
                i += 1;
            }
            (_, Some(y)) => {
                out.push(y);
                j += 1;
            }
            (Some(x), None) => {
                out.push(x);
                i += 1;
            }
            (None, None) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::graph::testgraphs::{
        all_paths, brute_early, is_path, length, random_graph, sorted_lengths, trace_graph,
        XorShift,
    };
    use crate::graph::{ArcKind, GraphBuilder, Vertex, NO_PROCEDURE};

    const GRAPHS: u64 = 600;

    /// The search and the baseline give the k longest lengths of the enumeration, and
    /// the search's paths are distinct real paths of those lengths.
    #[test]
    fn k_longest_match_brute_force() {
        let mut rng = XorShift::new(1);
        let mut checked_paths = 0;
        for seed in 0..GRAPHS {
            let g = random_graph(&mut rng, 12);
            let s = Schedule::new(&g);
            let paths = all_paths(&g);
            let want = sorted_lengths(&g, &paths);
            let all = paths.len();
            checked_paths += all;
            for k in [1, 3, all, all + 5] {
                let top = &want[..k.min(all)];
                let found = NearCriticalPaths::search(&g, &s, k);
                assert_eq!(found.lengths(), top, "graph {seed}, k = {k}");
                assert_eq!(
                    k_longest_lengths_baseline(&g, k),
                    top,
                    "baseline, graph {seed}, k = {k}"
                );
                assert_eq!(found.is_complete(), k > all, "graph {seed}, k = {k}");
                let mut seen = BTreeSet::new();
                for j in 0..found.len() {
                    let arcs = found.arcs(&g, j);
                    assert!(
                        is_path(&g, &arcs),
                        "graph {seed}, k = {k}, path {j}: {arcs:?}"
                    );
                    assert_eq!(length(&g, &arcs), found.length(j), "graph {seed}, path {j}");
                    assert!(seen.insert(arcs), "graph {seed}, k = {k}: path {j} twice");
                }
                if k >= all {
                    let every: BTreeSet<Vec<ArcId>> = paths.iter().cloned().collect();
                    assert_eq!(seen, every, "graph {seed}");
                }
            }
        }
        assert!(
            checked_paths > 10 * GRAPHS as usize,
            "graphs too small: {checked_paths} paths"
        );
    }

    /// The slack the search relies on: total slack is L minus the longest path through
    /// the arc, free slack the gap between the arc's early finish and its head's
    /// longest prefix.
    #[test]
    fn slack_matches_brute_force() {
        let mut rng = XorShift::new(2);
        for seed in 0..GRAPHS {
            let g = random_graph(&mut rng, 12);
            let s = Schedule::new(&g);
            let paths = all_paths(&g);
            let early = brute_early(&g);
            let longest = paths.iter().map(|p| length(&g, p)).max().unwrap_or(0);
            assert_eq!(s.length, longest, "graph {seed}");
            for (id, a) in g.arcs.iter().enumerate() {
                let through = paths
                    .iter()
                    .filter(|p| p.contains(&(id as ArcId)))
                    .map(|p| length(&g, p))
                    .max();
                let t = s.arc_times(a, a.weight);
                assert_eq!(
                    t.total_slack,
                    through.map(|l| longest - l),
                    "graph {seed}, arc {id}"
                );
                let fs = early[a.to as usize] - early[a.from as usize] - a.weight;
                assert_eq!(t.free_slack, fs, "graph {seed}, arc {id}");
            }
        }
    }

    /// Parallel arcs are distinct paths, also with equal weights.
    #[test]
    fn parallel_arcs_are_distinct_paths() {
        let mut b = GraphBuilder::new();
        let x = b.add_vertex(Vertex::default());
        let y = b.add_vertex(Vertex::default());
        for w in [4, 4, 1] {
            b.add_arc(x, y, w, NO_PROCEDURE, ArcKind::Program);
        }
        b.mark_end(y);
        let g = b.finish();
        let s = Schedule::new(&g);
        let found = NearCriticalPaths::search(&g, &s, 10);
        assert_eq!(found.lengths(), vec![4, 4, 1]);
        assert!(found.is_complete());
        assert_ne!(found.arcs(&g, 0), found.arcs(&g, 1));
        let info = found.info(2);
        assert_eq!((info.length, info.slack), (1, 3));
        assert_eq!(info.near_criticality_pct, 25.0);
    }

    #[test]
    fn no_paths_without_an_end_or_k() {
        let mut b = GraphBuilder::new();
        let x = b.add_vertex(Vertex::default());
        let y = b.add_vertex(Vertex::default());
        b.add_arc(x, y, 3, NO_PROCEDURE, ArcKind::Program);
        let g = b.finish();
        let s = Schedule::new(&g);
        assert!(NearCriticalPaths::search(&g, &s, 5).is_empty());
        assert!(k_longest_lengths_baseline(&g, 5).is_empty());
        let mut b = GraphBuilder::new();
        let x = b.add_vertex(Vertex::default());
        b.mark_end(x);
        let g = b.finish();
        let s = Schedule::new(&g);
        assert!(NearCriticalPaths::search(&g, &s, 0).is_empty());
        assert_eq!(
            NearCriticalPaths::search(&g, &s, 1)
                .info(0)
                .near_criticality_pct,
            100.0
        );
    }

    /// On trace-shaped graphs with far more paths than k (where the bounded queue
    /// evicts and the walks are pruned), the search agrees with the baseline.
    #[test]
    fn agrees_with_baseline_on_trace_graphs() {
        let mut rng = XorShift::new(3);
        for (threads, events, k) in [(2, 300, 500), (4, 2000, 2000), (16, 3000, 700), (8, 500, 1)] {
            let g = trace_graph(&mut rng, threads, events);
            let s = Schedule::new(&g);
            let found = NearCriticalPaths::search(&g, &s, k);
            assert_eq!(found.len(), k);
            assert_eq!(
                found.lengths(),
                k_longest_lengths_baseline(&g, k),
                "{threads} threads"
            );
            for j in [0, k / 2, k - 1] {
                let arcs = found.arcs(&g, j);
                assert!(is_path(&g, &arcs));
                assert_eq!(length(&g, &arcs), found.length(j));
            }
        }
    }

    /// Giving up early returns nothing; going on returns the same as the plain call.
    #[test]
    fn baseline_can_be_stopped() {
        let mut rng = XorShift::new(4);
        let g = trace_graph(&mut rng, 4, 10_000);
        let mut calls = 0;
        let stopped = k_longest_lengths_baseline_within(&g, 10, &mut |done| {
            calls += 1;
            done == 0
        });
        assert_eq!(stopped, None);
        assert_eq!(calls, 2);
        let full = k_longest_lengths_baseline_within(&g, 10, &mut |_| true);
        assert_eq!(full, Some(k_longest_lengths_baseline(&g, 10)));
    }
}
