//! Random small graphs and brute force for the property tests of the offline analyses.
//!
//! The graphs are small enough (at most a dozen events) to enumerate every
//! source-to-sink path, yet have what makes the algorithms hard: parallel arcs (distinct
//! paths between the same two vertices), zero weights and ties, dead ends (arcs that
//! never reach the sink), several threads ending, and arcs in several procedure
//! contexts. A fixed xorshift generator keeps every run the same, so a failure names a
//! seed to replay.

use super::{
    ArcId, ArcKind, Context, ContextId, Graph, GraphBuilder, Vertex, VertexId, NO_PROCEDURE,
};

/// Procedures used by the contexts of [`random_graph`].
pub(crate) const PROCEDURES: usize = 3;

/// Marsaglia's xorshift64* generator: deterministic, no dependency.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // Spread small seeds over the state; the state must not be zero.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0); the bias is irrelevant for tests.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A random multigraph of 1 to `max_events` events.
pub(crate) fn random_graph(rng: &mut XorShift, max_events: u64) -> Graph {
    let mut b = GraphBuilder::new();
    let n = 1 + rng.below(max_events);
    let vs: Vec<VertexId> = (0..n).map(|_| b.add_vertex(Vertex::default())).collect();
    let contexts: Vec<ContextId> = [vec![], vec![0], vec![1], vec![0, 1], vec![2], vec![0, 1, 2]]
        .into_iter()
        .map(|procedures| b.context_of(&procedures))
        .collect();
    // Weights from a small set: zeros and many ties.
    const WEIGHTS: [u64; 7] = [0, 1, 2, 2, 3, 5, 8];
    let arcs = n + rng.below(2 * n + 1);
    let mut last: Option<(u64, u64)> = None;
    for _ in 0..arcs {
        let (u, v) = match last {
            // A parallel arc a quarter of the time.
            Some(pair) if rng.below(4) == 0 => pair,
            _ => {
                let u = rng.below(n);
                if u + 1 >= n {
                    continue;
                }
                (u, u + 1 + rng.below(n - u - 1))
            }
        };
        let weight = WEIGHTS[rng.below(WEIGHTS.len() as u64) as usize];
        let kind = if rng.below(5) == 0 {
            ArcKind::Dependency
        } else {
            ArcKind::Program
        };
        let context = contexts[rng.below(contexts.len() as u64) as usize];
        b.add_arc(vs[u as usize], vs[v as usize], weight, context, kind);
        last = Some((u, v));
    }
    for &v in &vs {
        if rng.below(3) == 0 {
            b.mark_end(v);
        }
    }
    // Now and then nothing ends at the last event (or at all: no path).
    if rng.below(10) != 0 {
        b.mark_end(vs[vs.len() - 1]);
    }
    b.finish()
}

/// Every source-to-sink path as its arcs, by depth-first search.
pub(crate) fn all_paths(g: &Graph) -> Vec<Vec<ArcId>> {
    let mut paths = Vec::new();
    let mut prefix = Vec::new();
    extend(g, g.source(), &mut prefix, &mut paths);
    paths
}

fn extend(g: &Graph, v: VertexId, prefix: &mut Vec<ArcId>, paths: &mut Vec<Vec<ArcId>>) {
    if v == g.sink() {
        paths.push(prefix.clone());
        return;
    }
    for id in g.out_arcs(v) {
        prefix.push(id);
        extend(g, g.arc(id).to, prefix, paths);
        prefix.pop();
    }
}

/// Longest path from the source to each vertex, over every prefix (also those that
/// never reach the sink).
pub(crate) fn brute_early(g: &Graph) -> Vec<u64> {
    fn visit(g: &Graph, v: VertexId, len: u64, early: &mut [u64]) {
        early[v as usize] = early[v as usize].max(len);
        for id in g.out_arcs(v) {
            let a = g.arc(id);
            visit(g, a.to, len + a.weight, early);
        }
    }
    let mut early = vec![0; g.vertex_count()];
    visit(g, g.source(), 0, &mut early);
    early
}

pub(crate) fn length(g: &Graph, path: &[ArcId]) -> u64 {
    path.iter().map(|&id| g.arc(id).weight).sum()
}

/// All path lengths, longest first.
pub(crate) fn sorted_lengths(g: &Graph, paths: &[Vec<ArcId>]) -> Vec<u64> {
    let mut lengths: Vec<u64> = paths.iter().map(|p| length(g, p)).collect();
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    lengths
}

/// Whether `path` is a source-to-sink path of `g`.
pub(crate) fn is_path(g: &Graph, path: &[ArcId]) -> bool {
    let mut at = g.source();
    for &id in path {
        if g.arc(id).from != at {
            return false;
        }
        at = g.arc(id).to;
    }
    at == g.sink()
}

/// A trace-shaped graph bigger than brute force can handle: `threads` chains of events
/// with random work, and messages from an event of one thread to a later event of
/// another (the benchmark's generator in small).
pub(crate) fn trace_graph(rng: &mut XorShift, threads: usize, events: usize) -> Graph {
    assert!(threads >= 2, "messages need two threads");
    let mut b = GraphBuilder::new();
    let in_p0 = b.context(Context {
        procedures: vec![0],
        innermost: Some(0),
        stack: vec![0],
    });
    let mut last: Vec<Option<VertexId>> = vec![None; threads];
    let mut inbox: Vec<std::collections::VecDeque<VertexId>> = vec![Default::default(); threads];
    for _ in 0..events {
        let t = rng.below(threads as u64) as usize;
        let v = b.add_vertex(Vertex::default());
        if let Some(u) = last[t] {
            let context = if rng.below(3) == 0 {
                in_p0
            } else {
                NO_PROCEDURE
            };
            b.add_arc(u, v, 1 + rng.below(100), context, ArcKind::Program);
        }
        last[t] = Some(v);
        if rng.below(2) == 0 {
            let to = (t + 1 + rng.below(threads as u64 - 1) as usize) % threads;
            inbox[to].push_back(v);
        } else if let Some(from) = inbox[t].pop_front() {
            b.add_arc(from, v, 0, NO_PROCEDURE, ArcKind::Dependency);
        }
    }
    for v in last.into_iter().flatten() {
        b.mark_end(v);
    }
    b.finish()
}
