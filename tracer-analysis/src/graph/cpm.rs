//! The critical path method on a [`Graph`]: a forward sweep in id order gives every
//! vertex its early time (the longest path from the source), a backward sweep its tail
//! (the longest path to the sink). For an arc `u -> v` of weight `w`:
//!
//! - early start `ES = early(u)`, early finish `EF = ES + w`;
//! - late finish `LF = L - tail(v)`, late start `LS = LF - w`;
//! - total slack `TS = LS - ES` (zero on a critical arc);
//! - free slack `FS = early(v) - EF`.
//!
//! Weights come from a function so that what-if edits recompute without copying the
//! graph.

use super::{Arc, ArcId, ArcKind, Graph, VertexId};

/// Marks a vertex with no path to the sink (its arcs can slip forever).
pub(crate) const UNREACHABLE: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub struct Schedule {
    /// Longest path from the source to each vertex.
    pub early: Vec<u64>,
    /// Longest path from each vertex to the sink ([`UNREACHABLE`] if there is none).
    pub tail: Vec<u64>,
    /// Length of the critical path.
    pub length: u64,
}

/// Timing of one arc under a [`Schedule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArcTimes {
    pub early_start: u64,
    pub early_finish: u64,
    /// `None` when the arc cannot reach the sink.
    pub late_start: Option<u64>,
    pub late_finish: Option<u64>,
    pub total_slack: Option<u64>,
    pub free_slack: u64,
}

impl Schedule {
    /// Both sweeps, with the graph's own weights.
    pub fn new(g: &Graph) -> Schedule {
        Self::with_weights(g, |_, a| a.weight)
    }

    /// Both sweeps, with `weight(id, arc)` in place of each arc's weight.
    pub(crate) fn with_weights(g: &Graph, weight: impl Fn(ArcId, &Arc) -> u64) -> Schedule {
        let n = g.vertex_count();
        let mut early = vec![0u64; n];
        for v in 0..n as VertexId {
            let e = early[v as usize];
            for id in g.out_arcs(v) {
                let a = g.arc(id);
                let f = e + weight(id, a);
                let t = &mut early[a.to as usize];
                *t = (*t).max(f);
            }
        }
        let mut tail = vec![UNREACHABLE; n];
        let sink = g.sink();
        tail[sink as usize] = 0;
        for v in (0..sink).rev() {
            let mut best = UNREACHABLE;
            for id in g.out_arcs(v) {
                let a = g.arc(id);
                let t = tail[a.to as usize];
                if t != UNREACHABLE {
                    let through = t + weight(id, a);
                    if best == UNREACHABLE || through > best {
                        best = through;
                    }
                }
            }
            tail[v as usize] = best;
        }
        let length = early[sink as usize];
        Schedule {
            early,
            tail,
            length,
        }
    }

    pub(crate) fn arc_times(&self, a: &Arc, weight: u64) -> ArcTimes {
        let es = self.early[a.from as usize];
        let ef = es + weight;
        let t = self.tail[a.to as usize];
        let lf = (t != UNREACHABLE).then(|| self.length - t);
        let ls = lf.map(|lf| lf - weight);
        ArcTimes {
            early_start: es,
            early_finish: ef,
            late_start: ls,
            late_finish: lf,
            total_slack: ls.map(|ls| ls - es),
            free_slack: self.early[a.to as usize] - ef,
        }
    }

    /// The critical path as arc ids from the source to the sink, walked back from the
    /// sink along a maximal incoming arc. Ties prefer the same thread's own program
    /// order (as the online engine keeps its own path on a tie), then the older source.
    pub fn critical_arcs(&self, g: &Graph, weight: impl Fn(ArcId, &Arc) -> u64) -> Vec<ArcId> {
        let mut path = Vec::new();
        // A recording with no events: the sink has nothing to come from, and no path.
        if g.in_arcs(g.sink()).is_empty() {
            return path;
        }
        let mut v = g.sink();
        while v != g.source() {
            let target = self.early[v as usize];
            let mut best: Option<(ArcId, (bool, u64, u32))> = None;
            for &id in g.in_arcs(v) {
                let a = g.arc(id);
                if self.early[a.from as usize] + weight(id, a) != target {
                    continue;
                }
                // At the sink: the thread with the longest path, lowest tid on a tie.
                let rank = (
                    a.kind == ArcKind::Program,
                    u64::MAX - g.vertices[a.from as usize].tid as u64,
                    u32::MAX - a.from,
                );
                if best.is_none_or(|(_, r)| rank > r) {
                    best = Some((id, rank));
                }
            }
            let (id, _) = best.expect("every vertex but the source has a tight in-arc");
            path.push(id);
            v = g.arc(id).from;
        }
        path.reverse();
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{ArcKind, GraphBuilder, Vertex, NO_PROCEDURE};

    /// a(3) -> c, b(5) -> c, c(2) -> end; a also ends the path on its own.
    #[test]
    fn slack_on_a_small_network() {
        let mut b = GraphBuilder::new();
        let a = b.add_vertex(Vertex::default());
        let bb = b.add_vertex(Vertex::default());
        let c = b.add_vertex(Vertex::default());
        let d = b.add_vertex(Vertex::default());
        b.add_arc(a, c, 3, NO_PROCEDURE, ArcKind::Program);
        b.add_arc(bb, c, 5, NO_PROCEDURE, ArcKind::Program);
        b.add_arc(c, d, 2, NO_PROCEDURE, ArcKind::Program);
        b.mark_end(d);
        let g = b.finish();
        let s = Schedule::new(&g);
        assert_eq!(s.length, 7);
        let times: Vec<(u64, u64, Option<u64>)> = g
            .arcs
            .iter()
            .map(|x| {
                let t = s.arc_times(x, x.weight);
                (t.early_start, t.free_slack, t.total_slack)
            })
            .collect();
        // Arcs sorted by source: src->a, src->b, a->c, b->c, c->d, d->sink.
        assert_eq!(
            times,
            vec![
                (0, 0, Some(2)),
                (0, 0, Some(0)),
                (0, 2, Some(2)),
                (0, 0, Some(0)),
                (5, 0, Some(0)),
                (7, 0, Some(0)),
            ]
        );
        let path: Vec<u64> = s
            .critical_arcs(&g, |_, a| a.weight)
            .iter()
            .map(|&i| g.arc(i).weight)
            .collect();
        assert_eq!(path, vec![0, 5, 2, 0]);
    }
}
