//! Hatchet's "literal" JSON (what `hatchet.GraphFrame.from_literal` reads): a list of
//! root nodes, each `{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}`.
//!
//! The tree is the one the folded stacks draw ([`super::flame`]), over all work instead
//! of the critical path's only: a root per process (named as the folded stacks name it:
//! program, MPI rank, pid), a node per thread under it, and under each thread the
//! stacks of its [`StackSource`], outermost first. Each node
//! carries the work and the critical path time of its stack, exclusive and inclusive,
//! and the zeroing gain of its procedure. docs/exports.md has the metrics and why the
//! roots are processes.

use crate::format::node::ShownId;
use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use super::flame::process_frame;
use super::stack_source::StackSource;
use super::written::Written;

/// Metric names (columns of Hatchet's dataframe). Hatchet takes a name with `(inc)`
/// for an inclusive metric, any other for an exclusive one.
pub const TIME: &str = "time";
pub const TIME_INC: &str = "time (inc)";
pub const CRITICAL_PATH: &str = "critical path";
pub const CRITICAL_PATH_INC: &str = "critical path (inc)";
pub const ZEROING_INC: &str = "zeroing (inc)";

/// The one root of a profile without any work: Hatchet cannot read an empty list.
pub const NO_WORK: &str = "(no work recorded)";

/// What a Hatchet export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HatchetStats {
    /// Root nodes: one per process with work.
    pub roots: usize,
    /// All nodes: processes, threads and stacks.
    pub nodes: usize,
    /// The critical path time of all nodes: the critical path's length.
    pub critical_path_ns: u64,
    /// All work of all nodes, on the clock the graph was weighed with.
    pub work_ns: u64,
}

#[derive(Serialize)]
struct Frame {
    name: String,
    /// `process`, `thread` or `function` (a selected procedure, or the work outside
    /// every one).
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The metrics of one node, in nanoseconds (field names as [`TIME`] etc.).
#[derive(Serialize, Default, Clone, Copy)]
struct Metrics {
    #[serde(rename = "time")]
    time: u64,
    #[serde(rename = "time (inc)")]
    time_inc: u64,
    #[serde(rename = "critical path")]
    critical: u64,
    #[serde(rename = "critical path (inc)")]
    critical_inc: u64,
    #[serde(rename = "zeroing (inc)")]
    zeroing: u64,
}

#[derive(Serialize)]
struct Node {
    frame: Frame,
    metrics: Metrics,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    children: Vec<Node>,
}

impl Node {
    fn new(name: String, kind: &'static str, zeroing: u64) -> Self {
        Node {
            frame: Frame { name, kind },
            metrics: Metrics {
                zeroing,
                ..Default::default()
            },
            children: Vec::new(),
        }
    }

    /// The child named `name`, added (last) if it is not there yet.
    fn child(&mut self, name: &str, kind: &'static str, zeroing: u64) -> &mut Node {
        let at = match self.children.iter().position(|c| c.frame.name == name) {
            Some(at) => at,
            None => {
                self.children
                    .push(Node::new(name.to_string(), kind, zeroing));
                self.children.len() - 1
            }
        };
        &mut self.children[at]
    }

    /// Sets the inclusive metrics (the node's and its descendants' exclusive ones) and
    /// returns the number of nodes in the subtree.
    fn finish(&mut self) -> usize {
        let mut nodes = 1;
        let (mut time, mut critical) = (self.metrics.time, self.metrics.critical);
        for c in &mut self.children {
            nodes += c.finish();
            time += c.metrics.time_inc;
            critical += c.metrics.critical_inc;
        }
        self.metrics.time_inc = time;
        self.metrics.critical_inc = critical;
        nodes
    }
}

/// The call tree: a root per process, in the order of the profile's rows (by pid).
fn tree(source: &dyn StackSource) -> Vec<Node> {
    let gains: HashMap<&str, u64> = source
        .zeroing()
        .iter()
        .map(|z| (z.procedure.as_str(), z.zeroing_ns))
        .collect();
    let mut roots: Vec<(u32, Node)> = Vec::new();
    for s in source.stacks() {
        if roots.last().is_none_or(|(pid, _)| *pid != s.pid) {
            let name = process_frame(source, s.pid);
            roots.push((s.pid, Node::new(name, "process", 0)));
        }
        let (_, process) = roots.last_mut().expect("a root was just pushed");
        let mut node = process.child(&format!("tid {}", ShownId(s.tid)), "thread", 0);
        for f in &s.frames {
            let gain = gains.get(f.as_str()).copied().unwrap_or(0);
            node = node.child(f, "function", gain);
        }
        node.metrics.time += s.weights.work_ns;
        node.metrics.critical += s.weights.critical_path_ns;
    }
    roots.into_iter().map(|(_, n)| n).collect()
}

/// Writes the literal JSON (indented) and returns the writer.
pub fn write_hatchet<W: Write>(
    source: &dyn StackSource,
    mut out: W,
) -> io::Result<Written<HatchetStats, W>> {
    let mut roots = tree(source);
    if roots.is_empty() {
        roots.push(Node::new(NO_WORK.to_string(), "function", 0));
    }
    let stats = HatchetStats {
        roots: roots.len(),
        nodes: roots.iter_mut().map(Node::finish).sum(),
        critical_path_ns: roots.iter().map(|r| r.metrics.critical_inc).sum(),
        work_ns: roots.iter().map(|r| r.metrics.time_inc).sum(),
    };
    serde_json::to_writer_pretty(&mut out, &roots)?;
    writeln!(out)?;
    Ok(Written { stats, out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::export::stacks::GraphStacks;
    use crate::format::synth::nested_ring;
    use crate::graph::path::OUTSIDE;
    use crate::graph::recorded::RecordedGraph;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// The export, its JSON parsed.
    fn export(profile: &GraphStacks) -> Written<HatchetStats, Value> {
        let Written { stats, out: bytes } = write_hatchet(profile, Vec::new()).unwrap();
        Written {
            stats,
            out: serde_json::from_slice(&bytes).expect("JSON"),
        }
    }

    /// A node of the tree and the names on its way from the root, its own last.
    struct NodeAt<'a> {
        path: Vec<&'a str>,
        node: &'a Value,
    }

    /// Every node under `node` (itself first), depth first.
    fn walk<'a>(node: &'a Value, path: &mut Vec<&'a str>, out: &mut Vec<NodeAt<'a>>) {
        path.push(node["frame"]["name"].as_str().unwrap());
        out.push(NodeAt {
            path: path.clone(),
            node,
        });
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, path, out);
        }
        path.pop();
    }

    fn nodes(v: &Value) -> Vec<NodeAt<'_>> {
        let mut out = Vec::new();
        for root in v.as_array().unwrap() {
            walk(root, &mut Vec::new(), &mut out);
        }
        out
    }

    fn metric(node: &Value, name: &str) -> u64 {
        node["metrics"][name].as_u64().unwrap()
    }

    #[test]
    fn the_tree_holds_the_profile() {
        let rg = RecordedGraph::from_items(&nested_ring(), ClockKind::Cpu);
        let profile = GraphStacks::new(&rg);
        let Written { stats, out: v } = export(&profile);
        let all = nodes(&v);
        // Processes, threads, and each distinct stack prefix of each thread.
        let prefixes: BTreeSet<(u32, u32, &[String])> = profile
            .stacks()
            .iter()
            .flat_map(|s| (1..=s.frames.len()).map(move |n| (s.pid, s.tid, &s.frames[..n])))
            .collect();
        let threads: BTreeSet<u32> = profile.stacks().iter().map(|s| s.tid).collect();
        assert_eq!(all.len(), 2 + threads.len() + prefixes.len());
        assert_eq!(stats.nodes, all.len());
        assert_eq!((stats.roots, v.as_array().unwrap().len()), (2, 2));
        // Exclusive metrics add up to the totals, and so do the roots' inclusive ones.
        let sum = |m: &str| -> u64 { all.iter().map(|a| metric(a.node, m)).sum() };
        let work: u64 = profile.stacks().iter().map(|s| s.weights.work_ns).sum();
        assert_eq!(sum(CRITICAL_PATH), profile.summary().critical_path_ns);
        assert_eq!(sum(TIME), work);
        let roots = v.as_array().unwrap();
        let inc = |m: &str| -> u64 { roots.iter().map(|r| metric(r, m)).sum() };
        assert_eq!(inc(CRITICAL_PATH_INC), profile.summary().critical_path_ns);
        assert_eq!(inc(TIME_INC), work);
        assert_eq!(
            (stats.critical_path_ns, stats.work_ns),
            (profile.summary().critical_path_ns, work)
        );
        // A node's inclusive metric is its own plus its children's.
        for NodeAt { node: n, .. } in &all {
            for (exc, inc) in [(TIME, TIME_INC), (CRITICAL_PATH, CRITICAL_PATH_INC)] {
                let children: u64 = n["children"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| metric(c, inc))
                    .sum();
                assert_eq!(metric(n, inc), metric(n, exc) + children);
            }
        }
        // Each stack is a path with its own figures.
        for s in profile.stacks() {
            let mut path = vec![
                process_frame(&profile, s.pid),
                format!("tid {}", ShownId(s.tid)),
            ];
            path.extend(s.frames.iter().cloned());
            let n = all
                .iter()
                .find(|a| a.path == path)
                .unwrap_or_else(|| panic!("{path:?}"))
                .node;
            assert_eq!(
                (metric(n, CRITICAL_PATH), metric(n, TIME)),
                (s.weights.critical_path_ns, s.weights.work_ns)
            );
            assert_eq!(n["frame"]["type"], "function");
        }
        let inner = ["app rank 1 pid 101", "tid 101", "outer", "inner"];
        let n = all.iter().find(|a| a.path == inner).unwrap().node;
        assert_eq!(
            (metric(n, CRITICAL_PATH_INC), metric(n, TIME_INC)),
            (30_000, 30_000)
        );
        // The zeroing gain of a procedure is on each of its nodes, 0 on the others.
        for NodeAt { path, node: n } in &all {
            let name = *path.last().unwrap();
            let gain = profile.zeroing().iter().find(|z| z.procedure == name);
            let want = match n["frame"]["type"].as_str().unwrap() {
                "function" => gain.unwrap().zeroing_ns,
                "process" | "thread" => 0,
                other => panic!("{other}"),
            };
            assert_eq!(metric(n, ZEROING_INC), want, "{path:?}");
        }
        assert!(all.iter().any(|a| a.path.last() == Some(&OUTSIDE)));
        // Hatchet reads metric names off the nodes: every node has all five.
        for NodeAt { node: n, .. } in &all {
            assert_eq!(n["metrics"].as_object().unwrap().len(), 5);
        }
    }

    #[test]
    fn an_empty_profile_is_one_empty_root() {
        let rg = RecordedGraph::from_items(&[], ClockKind::Wall);
        let Written { stats, out: v } = export(&GraphStacks::new(&rg));
        assert_eq!((stats.roots, stats.nodes, stats.work_ns), (1, 1, 0));
        assert_eq!(v[0]["frame"]["name"], NO_WORK);
        assert_eq!(v[0]["metrics"][TIME_INC], 0);
    }
}
