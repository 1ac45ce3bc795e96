//! The next step of the design across nodes, simulated on a recording (docs/multinode.md,
//! "Scale"): each node's agent runs the online engine for its own processes, and only
//! the dependencies between nodes travel, each as the path value its source left (the
//! send's or the collective entry's [`PathState`]: Hollingsworth's piggybacked value, sent
//! out of band). The online engine is already written that way: a thread's path changes
//! by its own events and by the values that reach it, so the engine run over the merged
//! recording computes what the agents together would, and each dependency it merges
//! whose two ends are on different nodes is one value on the wire. This replays a
//! recording through the engine and counts those values and their size as
//! [`PathValue`] encodes them (protobuf), against the records each node sends today.

use prost::Message;
use serde::Serialize;

use super::engine::{CriticalPathEngine, PathState};
use super::model::{Clocks, PathModel, ProcId, Sched, StackProcs};
use super::pipeline::Pipeline;
use super::workclock::ClockKind;
use crate::format::node::GlobalId;
use crate::format::recording::{Item, RecordingError, RecordingReader};
use crate::symbolize::CodeLocator;
use tracer_common::EventHeader;

/// A path value on the wire: who sent it to whom (the receiving agent pairs it with its
/// receive by the sender and the message's number between the two), and the path. The
/// per-thread shares of the path are not in it: they grow with the ranks the path went
/// through, and stay with the nodes that add them (reported at the end).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathValue {
    #[prost(uint32, tag = "1")]
    pub from_tid: u32,
    #[prost(uint32, tag = "2")]
    pub to_tid: u32,
    /// The dependency's number from this sender to this receiver.
    #[prost(uint64, tag = "3")]
    pub seq: u64,
    #[prost(uint64, tag = "4")]
    pub longest_ns: u64,
    /// Per procedure (selected or followed by samples): its time on the path.
    #[prost(uint64, repeated, tag = "5")]
    pub inclusive_ns: Vec<u64>,
    #[prost(uint64, repeated, tag = "6")]
    pub exclusive_ns: Vec<u64>,
    /// Per procedure: how much shorter the path is without it (the longest path minus
    /// the zeroed one: small numbers, short varints).
    #[prost(uint64, repeated, tag = "7")]
    pub zeroing_gain_ns: Vec<u64>,
}

/// A [`PathValue`] sent as its difference from the previous one between the same two
/// threads (zigzag varints: a path that grew a little takes a byte or two a field).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathValueDelta {
    #[prost(uint32, tag = "1")]
    pub from_tid: u32,
    #[prost(uint32, tag = "2")]
    pub to_tid: u32,
    #[prost(sint64, tag = "3")]
    pub longest_ns: i64,
    #[prost(sint64, repeated, tag = "4")]
    pub inclusive_ns: Vec<i64>,
    #[prost(sint64, repeated, tag = "5")]
    pub exclusive_ns: Vec<i64>,
    #[prost(sint64, repeated, tag = "6")]
    pub zeroing_gain_ns: Vec<i64>,
}

/// `now - before`, element by element (a missing element counts as 0).
fn differences(now: &[u64], before: &[u64]) -> Vec<i64> {
    now.iter()
        .enumerate()
        .map(|(i, &v)| v as i64 - before.get(i).copied().unwrap_or(0) as i64)
        .collect()
}

impl PathValueDelta {
    fn between(now: &PathValue, before: &PathValue) -> PathValueDelta {
        PathValueDelta {
            from_tid: now.from_tid,
            to_tid: now.to_tid,
            longest_ns: now.longest_ns as i64 - before.longest_ns as i64,
            inclusive_ns: differences(&now.inclusive_ns, &before.inclusive_ns),
            exclusive_ns: differences(&now.exclusive_ns, &before.exclusive_ns),
            zeroing_gain_ns: differences(&now.zeroing_gain_ns, &before.zeroing_gain_ns),
        }
    }
}

impl PathValue {
    fn of(from_tid: u32, to_tid: u32, seq: u64, path: &PathState) -> PathValue {
        PathValue {
            from_tid,
            to_tid,
            seq,
            longest_ns: path.longest,
            inclusive_ns: path.inclusive.clone(),
            exclusive_ns: path.exclusive.clone(),
            zeroing_gain_ns: path
                .zeroed
                .iter()
                .map(|z| path.longest.saturating_sub(*z))
                .collect(),
        }
    }
}

/// What the design would send between nodes for one recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathValueTraffic {
    pub nodes: usize,
    /// From the first record to the last.
    pub span_ns: u64,
    /// Records of each node (node 0 first): what each agent sends the collector today.
    pub records_by_node: Vec<u64>,
    /// Dependencies the engine merged (messages, collective entries, wakeups, thread
    /// creations), and those whose two ends are on different nodes.
    pub dependencies: u64,
    pub cross_node: u64,
    /// Bytes of the cross-node values, encoded ([`PathValue`]), in all and the largest.
    pub value_bytes: u64,
    pub value_bytes_max: u64,
    /// The same values, each sent as its difference from the previous one between the
    /// same two threads ([`PathValueDelta`]; the first in full).
    pub delta_bytes: u64,
    /// The procedures a value carries (its vectors' length at the end).
    pub procedures: usize,
    /// The most threads a path value had gone through (its per-thread shares, which
    /// stay on the nodes).
    pub path_threads_max: usize,
    /// The critical path's length, as `tracer analyze` gives it.
    pub critical_path_ns: u64,
}

/// The engine, counting the values that cross nodes.
struct CrossNodeCounter {
    engine: CriticalPathEngine,
    traffic: PathValueTraffic,
    /// The last value per (source thread, target thread) across nodes, and how many.
    last: rustc_hash::FxHashMap<(u32, u32), LastValue>,
}

/// The last value sent from one thread to another, and how many were.
struct LastValue {
    value: PathValue,
    sent: u64,
}

/// A dependency's source: its path and its thread.
#[derive(Clone)]
struct Sent {
    path: PathState,
    tid: u32,
}

impl CrossNodeCounter {
    fn count(&mut self, tid: u32, incoming: &Sent) {
        self.traffic.dependencies += 1;
        if GlobalId(tid).node() == GlobalId(incoming.tid).node() {
            return;
        }
        let pair = (incoming.tid, tid);
        let sent = self.last.get(&pair).map_or(0, |l| l.sent) + 1;
        let value = PathValue::of(incoming.tid, tid, sent, &incoming.path);
        let bytes = value.encoded_len() as u64;
        let delta_bytes = match self.last.get(&pair) {
            Some(l) => PathValueDelta::between(&value, &l.value).encoded_len() as u64,
            None => bytes,
        };
        self.last.insert(pair, LastValue { value, sent });
        let t = &mut self.traffic;
        t.cross_node += 1;
        t.value_bytes += bytes;
        t.delta_bytes += delta_bytes;
        t.value_bytes_max = t.value_bytes_max.max(bytes);
        t.path_threads_max = t.path_threads_max.max(incoming.path.by_thread.len());
    }
}

impl PathModel for CrossNodeCounter {
    type Mark = Sent;

    fn set_procedures(&mut self, n: usize) {
        self.engine.set_procedures(n);
        self.traffic.procedures = n;
    }
    fn advance(&mut self, tid: u32, work: u64, at: &EventHeader) {
        PathModel::advance(&mut self.engine, tid, work, at);
    }
    fn advance_clocks(&mut self, tid: u32, work: u64, clocks: &Clocks, at: &EventHeader) {
        self.engine.advance_clocks(tid, work, clocks, at);
    }
    fn scheduled(&mut self, tid: u32, what: Sched) {
        self.engine.scheduled(tid, what);
    }
    fn enter(&mut self, tid: u32, p: ProcId) {
        PathModel::enter(&mut self.engine, tid, p);
    }
    fn exit(&mut self, tid: u32, p: ProcId) {
        PathModel::exit(&mut self.engine, tid, p);
    }
    fn sampled(&mut self, tid: u32, cpu_ns: u64, stack: &StackProcs) {
        PathModel::sampled(&mut self.engine, tid, cpu_ns, stack);
    }
    fn unused(&self, p: ProcId, include: &dyn Fn(u32) -> bool, only_participants: bool) -> bool {
        PathModel::unused(&self.engine, p, include, only_participants)
    }
    fn reuse(&mut self, p: ProcId) {
        PathModel::reuse(&mut self.engine, p);
    }
    fn snapshot(&mut self, tid: u32) -> Sent {
        Sent {
            path: PathModel::snapshot(&mut self.engine, tid),
            tid,
        }
    }
    fn merge(&mut self, tid: u32, incoming: &Sent) {
        self.count(tid, incoming);
        PathModel::merge(&mut self.engine, tid, &incoming.path);
    }
    fn merge_message(&mut self, tid: u32, incoming: &Sent, bytes: Option<u64>) {
        self.count(tid, incoming);
        self.engine.merge_message(tid, &incoming.path, bytes);
    }
    fn milestone(&mut self, tid: u32, m: super::model::Milestone) {
        self.engine.milestone(tid, m);
    }
    fn end_thread(&mut self, tid: u32, participant: bool) {
        PathModel::end_thread(&mut self.engine, tid, participant);
    }
    fn threads_held(&self) -> usize {
        PathModel::threads_held(&self.engine)
    }
}

/// Replays `reader`'s recording (as `tracer analyze` does, the sampled functions named
/// by `functions` when given) and counts what the design would send between nodes.
pub fn simulate_path_values(
    reader: &mut RecordingReader,
    functions: Option<Box<dyn CodeLocator>>,
) -> Result<PathValueTraffic, RecordingError> {
    let nodes = reader.meta.nodes().len();
    let counter = CrossNodeCounter {
        engine: CriticalPathEngine::new(),
        traffic: PathValueTraffic {
            nodes,
            ..Default::default()
        },
        last: Default::default(),
    };
    let mut pipeline = Pipeline::with_model(ClockKind::Cpu, counter);
    if let Some(locator) = functions {
        pipeline.analyzer.follow_sampled_functions(locator);
    }
    let mut records_by_node = vec![0; nodes];
    while let Some(item) = reader.next_item()? {
        if let Item::Record(r) = &item {
            let node = usize::from(GlobalId(r.header().tgid).node().0);
            if let Some(n) = records_by_node.get_mut(node) {
                *n += 1;
            }
        }
        pipeline.item(&item);
    }
    let analyzer = pipeline.flush();
    let mut traffic = analyzer.engine.traffic.clone();
    traffic.records_by_node = records_by_node;
    traffic.span_ns = analyzer
        .first_ts
        .map_or(0, |first| analyzer.last_ts.saturating_sub(first));
    let only = analyzer.has_participants();
    traffic.critical_path_ns = analyzer
        .engine
        .engine
        .critical(&|tid| analyzer.counts_if(tid, only), only)
        .map_or(0, |end| end.path.longest);
    Ok(traffic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::format::synth::write_two_node_ring;

    /// A ring of 4 ranks over two nodes (ranks 0 and 1 on one, 2 and 3 on the other), 3
    /// rounds: of its 12 messages, 1 -> 2 and 3 -> 0 cross nodes, 6 values; the path is
    /// the one `analyze` finds, every value a few bytes (one procedure).
    #[test]
    fn a_ring_over_two_nodes_sends_a_value_per_message_between_them() {
        let dir = std::env::temp_dir().join(format!("tracer-path-values-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ring.trace");
        let one_machine = write_two_node_ring(&path);
        let mut reader = RecordingReader::open(&path).unwrap();
        let traffic = simulate_path_values(&mut reader, None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(traffic.nodes, 2);
        assert_eq!(traffic.cross_node, 6, "{traffic:?}");
        assert_eq!(traffic.dependencies, 12, "{traffic:?}");
        let records = one_machine
            .iter()
            .filter(|i| matches!(i, Item::Record(_)))
            .count() as u64;
        assert_eq!(traffic.records_by_node.iter().sum::<u64>(), records);
        assert!(
            traffic.records_by_node.iter().all(|&n| n > 0),
            "{traffic:?}"
        );
        let longest = analyze(&one_machine, ClockKind::Cpu).critical().unwrap();
        assert_eq!(traffic.critical_path_ns, longest.path.longest);
        assert_eq!(traffic.procedures, 1);
        // Two thread ids, a number, the length, and one procedure's three values: under
        // 40 bytes.
        assert!(
            (10..40).contains(&traffic.value_bytes_max),
            "{}",
            traffic.value_bytes_max
        );
        // Sent as differences, the later ones are smaller.
        assert!(traffic.delta_bytes < traffic.value_bytes, "{traffic:?}");
    }
}
