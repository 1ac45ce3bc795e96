//! The records of several nodes made one stream while they arrive (issue 41's collector):
//! each node's stream is in its own time order, already moved onto the collector's ids
//! and clock ([`crate::node::Relocation`]); the merge hands on, in time order, what no
//! node can still precede. A node tells how far it has been read with its watermark: its
//! clock (on the collector's) up to which it has sent every record. What is older than
//! every open node's watermark can go.
//!
//! A watermark is when a node's read started; a record a probe was writing then can
//! come in the node's next batch, behind it. The analysis's reorder window (50 ms) puts
//! such a record in its place, so the merge counts a record as late only when it comes
//! more than that window after a later record went on.
//!
//! Each node numbers its selected procedures (`--func`) from 1: the merge gives them one
//! numbering as it hands them on (`format::probe_ids`, as `tracer merge` does), so a
//! procedure that several nodes probed in the same binary is one procedure of the job.
//!
//! A node that falls behind the most advanced one by more than the merge's lag bound
//! holds the others back no longer: its records, when they come, go on at once (late, if
//! by more than the reorder window: counted). So the merge holds at most the lag bound's
//! worth of records, whatever a link does.

use std::collections::VecDeque;

use crate::analysis::reorder::REORDER_WINDOW_NS;
use crate::format::probe_ids::{NodeProbeIds, ProbeIds};
use crate::format::recording::Item;

/// What one node has sent and the merge has not handed on yet.
#[derive(Default)]
struct NodeQueue {
    items: VecDeque<Item>,
    /// Every record of the node at or before this time (ns, the collector's clock) has
    /// been pushed.
    watermark_ns: u64,
    /// Nothing more comes from it (its stream ended, or its link failed).
    closed: bool,
    /// Its probe ids -> the merged stream's.
    probe_ids: NodeProbeIds,
}

impl NodeQueue {
    /// The time of the record at the head, None when the head is no record (a process
    /// or probe, handed on at once) or nothing waits.
    fn head_time(&self) -> Option<u64> {
        match self.items.front() {
            Some(Item::Record(r)) => Some(r.header().ts_ns),
            _ => None,
        }
    }
}

/// The merge of every node's stream (node 0 first); see the module's comment.
pub struct LiveMerge {
    nodes: Vec<NodeQueue>,
    max_lag_ns: u64,
    /// The time of the last record handed on.
    released_ns: u64,
    /// Records that came more than the reorder window after a later one had been
    /// handed on.
    late: u64,
    held: usize,
    /// The merged stream's probe ids.
    probes: ProbeIds,
}

impl LiveMerge {
    /// A merge of `nodes` streams, each read up to `start_ns` so far (the collector's
    /// clock when the nodes started: a node that has not said more yet is waited for
    /// from there); a node more than `max_lag_ns` behind the most advanced holds the
    /// others back no longer.
    pub fn new(nodes: usize, max_lag_ns: u64, start_ns: u64) -> Self {
        LiveMerge {
            nodes: (0..nodes)
                .map(|_| NodeQueue {
                    watermark_ns: start_ns,
                    ..NodeQueue::default()
                })
                .collect(),
            max_lag_ns,
            released_ns: 0,
            late: 0,
            held: 0,
            probes: ProbeIds::default(),
        }
    }

    /// One item of node `node`'s stream, in its order.
    pub fn push(&mut self, node: usize, item: Item) {
        self.held += 1;
        self.nodes[node].items.push_back(item);
    }

    /// Node `node` has sent every record up to `watermark_ns` (never moves back).
    pub fn advance(&mut self, node: usize, watermark_ns: u64) {
        let n = &mut self.nodes[node];
        n.watermark_ns = n.watermark_ns.max(watermark_ns);
    }

    /// Nothing more comes from node `node`: what it sent goes on in order, and it holds
    /// no other back.
    pub fn close(&mut self, node: usize) {
        self.nodes[node].closed = true;
    }

    /// Items waiting.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Records that came more than the analysis's reorder window after a later record
    /// had been handed on: they reach it out of time order.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Hands on, in time order, every item no node can still precede.
    pub fn ready(&mut self, f: impl FnMut(Item)) {
        let newest = self.nodes.iter().map(|n| n.watermark_ns).max().unwrap_or(0);
        let floor = newest.saturating_sub(self.max_lag_ns);
        // The open nodes within the lag bound are waited for up to their watermarks.
        let limit = self
            .nodes
            .iter()
            .filter(|n| !n.closed && n.watermark_ns >= floor)
            .map(|n| n.watermark_ns)
            .min()
            .unwrap_or(u64::MAX);
        self.release_up_to(limit, f);
    }

    /// Hands on everything left, in time order.
    pub fn flush(&mut self, f: impl FnMut(Item)) {
        self.release_up_to(u64::MAX, f);
    }

    fn release_up_to(&mut self, limit: u64, mut f: impl FnMut(Item)) {
        loop {
            // Processes and probes at a head go first: they come before the records
            // that need them.
            for node in 0..self.nodes.len() {
                while self.nodes[node]
                    .items
                    .front()
                    .is_some_and(|i| !matches!(i, Item::Record(_)))
                {
                    self.hand_on_head(node, &mut f);
                }
            }
            let earliest = self
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| n.head_time().map(|t| (t, i)))
                .min();
            let Some((ts, node)) = earliest else {
                return;
            };
            if ts > limit {
                return;
            }
            if ts.saturating_add(REORDER_WINDOW_NS) < self.released_ns {
                self.late += 1;
            }
            self.released_ns = self.released_ns.max(ts);
            self.hand_on_head(node, &mut f);
        }
    }

    /// Hands on node `node`'s first item, with the merged stream's probe ids (a probe
    /// another node announced already goes no further).
    fn hand_on_head(&mut self, node: usize, f: &mut impl FnMut(Item)) {
        let n = &mut self.nodes[node];
        let mut item = n.items.pop_front().expect("a head");
        self.held -= 1;
        // Past 65,536 procedures over the nodes (Err) a probe keeps its node's id.
        if self.probes.renumber(&mut item, &mut n.probe_ids) != Ok(false) {
            f(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LiveMerge;
    use crate::format::recording::Item;
    use crate::format::records::Record;
    use crate::ProcessInfo;
    use tracer_common::{kind, EventHeader};

    fn rec(tgid: u32, ts_ns: u64) -> Item {
        Item::Record(Record::FuncEnter(EventHeader {
            kind: kind::FUNC_ENTER,
            ts_ns,
            tgid,
            tid: tgid,
            ..Default::default()
        }))
    }

    fn times(items: &[Item]) -> Vec<(u32, u64)> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Record(r) => Some((r.header().tgid, r.header().ts_ns)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn records_go_in_time_order_once_every_node_is_past_them() {
        let mut m = LiveMerge::new(2, 1_000, 0);
        for t in [10, 20, 30] {
            m.push(0, rec(1, t));
        }
        m.push(1, rec(2, 15));
        m.advance(0, 30);
        m.advance(1, 15);
        let mut out = Vec::new();
        m.ready(|i| out.push(i));
        // Node 1 may still send a record after 15: 20 and 30 wait.
        assert_eq!(times(&out), [(1, 10), (2, 15)]);
        assert_eq!(m.held(), 2);
        m.push(1, rec(2, 25));
        m.advance(1, 40);
        m.ready(|i| out.push(i));
        assert_eq!(times(&out), [(1, 10), (2, 15), (1, 20), (2, 25), (1, 30)]);
        assert_eq!((m.held(), m.late()), (0, 0));
    }

    #[test]
    fn a_node_that_said_nothing_yet_is_waited_for_from_the_start() {
        let mut m = LiveMerge::new(2, 1_000, 100);
        m.push(0, rec(1, 150));
        m.advance(0, 200);
        let mut out = Vec::new();
        m.ready(|i| out.push(i));
        assert!(out.is_empty(), "node 1 may still send a record after 100");
        m.push(1, rec(2, 120));
        m.advance(1, 160);
        m.ready(|i| out.push(i));
        assert_eq!(times(&out), [(2, 120), (1, 150)]);
        assert_eq!(m.late(), 0);
    }

    /// Node 0 and node 1 both probed `work` in one binary (each as its id 1), node 1 also
    /// `idle` (its id 2): the merged stream has one probe per procedure, numbered once,
    /// and each node's FUNC records carry the merged ids.
    #[test]
    fn a_procedure_probed_on_two_nodes_is_one_procedure() {
        use crate::format::recording::FunctionProbe;
        let probe = |id: u16, symbol: &str, vaddr: u64| {
            Item::Probe(FunctionProbe {
                id,
                symbol: symbol.into(),
                path: "/bin/app".into(),
                vaddr,
            })
        };
        let enter = |tgid: u32, ts_ns: u64, call: u16| match rec(tgid, ts_ns) {
            Item::Record(Record::FuncEnter(h)) => {
                Item::Record(Record::FuncEnter(EventHeader { call, ..h }))
            }
            _ => unreachable!(),
        };
        let mut m = LiveMerge::new(2, 1_000, 0);
        m.push(1, probe(1, "idle", 0x20));
        m.push(1, probe(2, "work", 0x10));
        m.push(1, enter(2, 5, 2));
        m.push(1, enter(2, 6, 1));
        m.push(0, probe(1, "work", 0x10));
        m.push(0, enter(1, 7, 1));
        let mut out = Vec::new();
        m.flush(|i| out.push(i));
        let probes: Vec<(u16, &str)> = out
            .iter()
            .filter_map(|i| match i {
                Item::Probe(p) => Some((p.id, p.symbol.as_str())),
                _ => None,
            })
            .collect();
        // Node 0's heads go first: its `work` is met first.
        assert_eq!(probes, [(0, "work"), (1, "idle")]);
        let calls: Vec<(u32, u16)> = out
            .iter()
            .filter_map(|i| match i {
                Item::Record(r) => Some((r.header().tgid, r.header().call)),
                _ => None,
            })
            .collect();
        assert_eq!(calls, [(2, 0), (2, 1), (1, 0)]);
    }

    #[test]
    fn a_process_goes_before_the_records_that_follow_it() {
        let mut m = LiveMerge::new(2, 1_000, 0);
        m.push(1, Item::Process(ProcessInfo::default()));
        m.push(1, rec(2, 5));
        m.push(0, rec(1, 3));
        m.advance(0, 10);
        m.advance(1, 10);
        let mut out = Vec::new();
        m.ready(|i| out.push(i));
        assert!(matches!(out[0], Item::Process(_)));
        assert_eq!(times(&out), [(1, 3), (2, 5)]);
    }

    #[test]
    fn a_node_too_far_behind_or_closed_holds_the_others_back_no_longer() {
        let ms = 1_000_000;
        let mut m = LiveMerge::new(3, 100 * ms, 450 * ms);
        m.push(0, rec(1, 500 * ms));
        m.advance(0, 600 * ms);
        m.advance(1, 550 * ms);
        // Node 2 said nothing since the start: 150 ms behind, past the 100 ms bound.
        let mut out = Vec::new();
        m.ready(|i| out.push(i));
        assert_eq!(times(&out), [(1, 500 * ms)]);
        // Its records come late and go on at once: 20 ms late is within the analysis's
        // reorder window, 100 ms late is counted.
        m.push(2, rec(3, 480 * ms));
        m.push(2, rec(3, 490 * ms));
        m.ready(|i| out.push(i));
        assert_eq!(m.late(), 0);
        m.push(2, rec(3, 400 * ms));
        m.ready(|i| out.push(i));
        assert_eq!(times(&out)[3], (3, 400 * ms));
        assert_eq!(m.late(), 1);
        // Node 1 is within the bound and holds 700 back until it closes.
        m.push(0, rec(1, 700 * ms));
        m.advance(0, 640 * ms);
        m.ready(|i| out.push(i));
        assert_eq!(out.len(), 4);
        m.close(1);
        m.close(2);
        m.ready(|i| out.push(i));
        assert_eq!(out.len(), 4, "node 0's own watermark is 640 ms");
        m.flush(|i| out.push(i));
        assert_eq!(times(&out)[4], (1, 700 * ms));
    }
}
