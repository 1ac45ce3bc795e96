//! The Maximum Benefit Metric of Alexander et al. (1994): how much the program could
//! gain from speeding up one class of activities, judged over the k longest paths
//! instead of the critical path alone.
//!
//! With `d_j` the length of the j-th longest path, `d_j(a)` the time of class `a` on it
//! and `d_cp = d_1` the critical path length,
//!
//! `MBM_k(a) = min over j <= k of (d_j(a) + (d_cp - d_j))`.
//!
//! Why this is the right number: zeroing class `a` shortens path `j` to `d_j - d_j(a)`,
//! so the program gets `d_cp - max_j (d_j - d_j(a)) = min_j (d_j(a) + d_cp - d_j)`
//! shorter, the minimum taken over *all* paths. Over the k longest paths only, the
//! minimum can only be larger: `MBM_k` is an upper bound on the gain of zeroing `a`,
//! and exact as soon as it is no larger than the k-th path's slack `d_cp - d_k` (every
//! path beyond the k-th is no longer than `d_k`, so it cannot bound the gain more
//! tightly). The critical path alone (`k = 1`) gives `d_1(a)`, which can overstate the
//! gain by far when a second path is nearly as long.
//!
//! Classes are the selected procedures (inclusive: an arc counts for every procedure
//! active on it) and the work outside every selected procedure (program arcs whose
//! context has no procedure).
//!
//! Paths are not walked one by one (k paths of a long run would take O(k n)): a path
//! is its parent's prefix, one deviation arc and a min-slack completion (see
//! [`super::kpaths`]), so with `below(v)`, the class time on the completion from `v`,
//! `d_j(a) = d_parent(a) - below(from) + time(deviation) + below(to)`. One sweep per
//! class: O(classes * (n + k)) time, O(n + k) memory whatever the number of classes.

use super::kpaths::{Deviation, NearCriticalPaths};
use super::{Arc, ArcKind, Graph};

/// The benefit of speeding up one class of activities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassBenefit {
    /// A selected procedure, or `None` for work outside every selected procedure.
    pub class: Option<usize>,
    /// The class's time on the critical path (the first of the near-critical paths).
    pub on_critical_ns: u64,
    /// `MBM_k`: at most this much is gained by zeroing the class.
    pub mbm_ns: u64,
    /// `mbm_ns` is exactly the gain of zeroing the class (it is within the k-th path's
    /// slack, or the paths are all the graph's paths).
    pub exact: bool,
}

/// `MBM_k` of procedures `0..procedures` (in that order) and of the work outside them
/// (last) over the near-critical paths `paths` of `g`. With no path, every value is 0.
pub fn maximum_benefit(
    g: &Graph,
    paths: &NearCriticalPaths,
    procedures: usize,
) -> Vec<ClassBenefit> {
    let classes = (0..procedures).map(Some).chain([None]);
    if paths.is_empty() {
        return classes
            .map(|class| ClassBenefit {
                class,
                on_critical_ns: 0,
                mbm_ns: 0,
                exact: true,
            })
            .collect();
    }
    let last_slack = paths.slack(paths.len() - 1);
    let mut below = vec![0u64; g.vertex_count()];
    let mut on_path = vec![0u64; paths.len()];
    classes
        .map(|class| {
            let member: Vec<bool> = g
                .contexts
                .iter()
                .map(|c| match class {
                    Some(p) => c.procedures.binary_search(&p).is_ok(),
                    None => c.procedures.is_empty(),
                })
                .collect();
            let time = |a: &Arc| {
                let counts =
                    member[a.context as usize] && (class.is_some() || a.kind == ArcKind::Program);
                if counts {
                    a.weight
                } else {
                    0
                }
            };
            // Completions in reverse topological order: a tree arc's head comes later.
            below[g.sink() as usize] = 0;
            for v in (0..g.sink()).rev() {
                if let Some(id) = paths.tree_arc(v) {
                    let a = g.arc(id);
                    below[v as usize] = below[a.to as usize] + time(a);
                }
            }
            let mut mbm = u64::MAX;
            for j in 0..paths.len() {
                on_path[j] = match paths.deviation(j) {
                    None => below[g.source() as usize],
                    Some(Deviation { parent, arc }) => {
                        let a = g.arc(arc);
                        on_path[parent] - below[a.from as usize] + time(a) + below[a.to as usize]
                    }
                };
                mbm = mbm.min(on_path[j] + paths.slack(j));
            }
            ClassBenefit {
                class,
                on_critical_ns: on_path[0],
                mbm_ns: mbm,
                exact: paths.is_complete() || mbm <= last_slack,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::cpm::Schedule;
    use crate::graph::testgraphs::{all_paths, random_graph, trace_graph, XorShift, PROCEDURES};
    use crate::graph::{ArcId, Context, GraphBuilder, Vertex, NO_PROCEDURE};

    fn in_class(g: &Graph, a: &Arc, class: Option<usize>) -> bool {
        let procs = &g.contexts[a.context as usize].procedures;
        match class {
            Some(p) => procs.contains(&p),
            None => procs.is_empty() && a.kind == ArcKind::Program,
        }
    }

    /// The times of one path: `d(a)`, the class's, and `d`, all of it.
    #[derive(Default)]
    struct PathTimes {
        class: u64,
        length: u64,
    }

    fn times(g: &Graph, path: &[ArcId], class: Option<usize>) -> PathTimes {
        path.iter().fold(PathTimes::default(), |t, &id| {
            let a = g.arc(id);
            PathTimes {
                class: t.class + if in_class(g, a, class) { a.weight } else { 0 },
                length: t.length + a.weight,
            }
        })
    }

    /// The formula evaluated path by path.
    fn formula(g: &Graph, paths: &[Vec<ArcId>], cp: u64, class: Option<usize>) -> u64 {
        paths
            .iter()
            .map(|p| {
                let t = times(g, p, class);
                t.class + cp - t.length
            })
            .min()
            .unwrap_or(0)
    }

    /// L minus the longest path with the class's arcs weighted 0.
    fn zeroing_gain(g: &Graph, class: Option<usize>) -> u64 {
        let zeroed =
            Schedule::with_weights(g, |_, a| if in_class(g, a, class) { 0 } else { a.weight });
        Schedule::new(g).length - zeroed.length
    }

    /// On random multigraphs: the incremental sums equal the formula on the search's
    /// own paths (for k = 1, 3, all); over all paths they equal the formula on the
    /// enumeration and the gain of zeroing; `exact` is right, and never understates.
    #[test]
    fn mbm_matches_formula_and_zeroing() {
        let mut rng = XorShift::new(11);
        for seed in 0..600 {
            let g = random_graph(&mut rng, 12);
            let s = Schedule::new(&g);
            let every = all_paths(&g);
            let all = every.len();
            for k in [1, 3, all, all + 1] {
                let found = NearCriticalPaths::search(&g, &s, k);
                let mine: Vec<Vec<ArcId>> = (0..found.len()).map(|j| found.arcs(&g, j)).collect();
                let got = maximum_benefit(&g, &found, PROCEDURES);
                assert_eq!(got.len(), PROCEDURES + 1);
                for b in &got {
                    let why = format!("graph {seed}, k = {k}, class {:?}", b.class);
                    assert_eq!(b.mbm_ns, formula(&g, &mine, s.length, b.class), "{why}");
                    let critical = mine.first().map_or(0, |p| times(&g, p, b.class).class);
                    assert_eq!(b.on_critical_ns, critical, "{why}");
                    let gain = zeroing_gain(&g, b.class);
                    assert!(b.mbm_ns >= gain || mine.is_empty(), "{why}");
                    if b.exact && !mine.is_empty() {
                        assert_eq!(b.mbm_ns, gain, "{why}");
                    }
                    if k > all {
                        // The search saw there were no more paths.
                        assert!(b.exact, "{why}");
                    }
                    if k >= all && all > 0 {
                        assert_eq!(b.mbm_ns, formula(&g, &every, s.length, b.class), "{why}");
                    }
                }
            }
        }
    }

    /// Two threads of 10: one all in procedure 0, one outside. The critical path puts
    /// all 10 in procedure 0, but the other path bounds the gain of zeroing it to 1.
    #[test]
    fn a_second_path_bounds_the_benefit() {
        let mut b = GraphBuilder::new();
        let p0 = b.context(Context {
            procedures: vec![0],
            innermost: Some(0),
            stack: vec![0],
        });
        let (x0, x1) = (
            b.add_vertex(Vertex::default()),
            b.add_vertex(Vertex::default()),
        );
        let (y0, y1) = (
            b.add_vertex(Vertex::default()),
            b.add_vertex(Vertex::default()),
        );
        b.add_arc(x0, x1, 10, p0, ArcKind::Program);
        b.add_arc(y0, y1, 9, NO_PROCEDURE, ArcKind::Program);
        b.mark_end(x1);
        b.mark_end(y1);
        let g = b.finish();
        let s = Schedule::new(&g);
        let one = maximum_benefit(&g, &NearCriticalPaths::search(&g, &s, 1), 1);
        assert_eq!(
            (one[0].on_critical_ns, one[0].mbm_ns, one[0].exact),
            (10, 10, false)
        );
        let two = maximum_benefit(&g, &NearCriticalPaths::search(&g, &s, 2), 1);
        assert_eq!(two[0].class, Some(0));
        assert_eq!(
            (two[0].on_critical_ns, two[0].mbm_ns, two[0].exact),
            (10, 1, true)
        );
        assert_eq!(two[1].class, None);
        assert_eq!((two[1].on_critical_ns, two[1].mbm_ns), (0, 0));
    }

    /// On a trace-shaped graph far beyond brute force, the incremental sums still equal
    /// the formula on the materialized paths.
    #[test]
    fn mbm_on_a_trace_graph() {
        let mut rng = XorShift::new(12);
        let g = trace_graph(&mut rng, 6, 3000);
        let s = Schedule::new(&g);
        let found = NearCriticalPaths::search(&g, &s, 300);
        let mine: Vec<Vec<ArcId>> = (0..found.len()).map(|j| found.arcs(&g, j)).collect();
        for b in maximum_benefit(&g, &found, 1) {
            assert_eq!(b.mbm_ns, formula(&g, &mine, s.length, b.class));
        }
    }

    #[test]
    fn no_paths_no_benefit() {
        let g = GraphBuilder::new().finish();
        let s = Schedule::new(&g);
        let got = maximum_benefit(&g, &NearCriticalPaths::search(&g, &s, 4), 2);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|b| b.mbm_ns == 0 && b.on_critical_ns == 0));
    }
}
