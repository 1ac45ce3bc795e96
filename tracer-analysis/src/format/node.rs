//! Which machine a record comes from.
//!
//! A recording holds the records of one or more nodes (machines). Its META chunk has the
//! node table ([`NodeInfo`]: host name, machine id, boot id, kernel, CPUs, clock), and a
//! NODE chunk says which node the chunks after it come from (node 0 until the first;
//! a recording of one machine has none). Two nodes of one job reuse process ids, thread
//! ids and CPU numbers, and each has its own monotonic clock, so the reader makes every
//! record of node `n` unique as it reads it ([`Relocation`]): a process, thread or CPU
//! id `i` of node `n` becomes `n << 22 | i` (a [`GlobalId`]; Linux never hands out a
//! pid at or above 2^22, its `PID_MAX_LIMIT`), and its times move onto node 0's clock.
//! Process and thread id 0 (the idle task, or "not known") stays 0 on every node.
//! Node 0's ids and times are its own, so a recording of one machine reads as it always
//! did, and everything downstream keys processes and threads by one `u32` that has the
//! node in it.

use serde::{Deserialize, Serialize};

use crate::format::records::Record;
use crate::format::ProcessInfo;

/// Bits of a node's own process, thread or CPU id in a [`GlobalId`].
pub const LOCAL_ID_BITS: u32 = 22;
/// How many nodes one recording can hold: ids stay below 2^30, where the timeline
/// exports number tracks of their own (the critical path's, `export::timeline`).
pub const MAX_NODES: u32 = 256;
const LOCAL_MASK: u32 = (1 << LOCAL_ID_BITS) - 1;

/// A node's index in the recording's node table.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct NodeId(pub u16);

/// A process, thread or CPU id made unique across the nodes of a recording: the node in
/// the high bits, the node's own id in the low [`LOCAL_ID_BITS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalId(pub u32);

impl GlobalId {
    /// `local` of `node`; node 0's ids are unchanged.
    pub fn new(node: NodeId, local: u32) -> GlobalId {
        GlobalId(u32::from(node.0) << LOCAL_ID_BITS | (local & LOCAL_MASK))
    }

    pub fn node(self) -> NodeId {
        NodeId((self.0 >> LOCAL_ID_BITS) as u16)
    }

    /// The id the node itself gave (its pid, tid or CPU number).
    pub fn local(self) -> u32 {
        self.0 & LOCAL_MASK
    }
}

/// How outputs for people show a process, thread or CPU id ([`GlobalId`]): node 0's ids
/// as they are, any other node's as the id its node gave and the node's index,
/// `101@node1` (`tracer summary` names each node's host). A recording of one machine
/// shows exactly the ids the kernel gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShownId(pub u32);

impl std::fmt::Display for ShownId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = GlobalId(self.0);
        let text = match id.node() {
            NodeId(0) => id.local().to_string(),
            NodeId(n) => format!("{}@node{n}", id.local()),
        };
        // Through `pad`, so that column widths and alignment apply.
        f.pad(&text)
    }
}

/// What the recording knows of one machine it traced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub hostname: String,
    /// /etc/machine-id: one machine across boots (empty when the machine has none).
    pub machine_id: String,
    /// /proc/sys/kernel/random/boot_id: one boot (its monotonic clock starts at boot).
    pub boot_id: String,
    /// The kernel's release (`uname -r`).
    pub kernel: String,
    /// CPUs the kernel may run on: the highest possible CPU number plus one (what the
    /// machine's records' `cpu` numbers index).
    pub cpus: u32,
    /// The node's wall clock (Unix ns) and probe clock (CLOCK_MONOTONIC ns), read
    /// together when its tracing started: how its records' times map onto node 0's.
    pub start_unix_ns: u128,
    pub start_monotonic_ns: u64,
}

impl NodeInfo {
    /// Wall clock minus monotonic clock at start: the offset that turns the node's probe
    /// times into wall-clock times.
    fn wall_offset_ns(&self) -> i128 {
        // Saturating: a damaged META may hold any numbers.
        i128::try_from(self.start_unix_ns)
            .unwrap_or(i128::MAX)
            .saturating_sub(i128::from(self.start_monotonic_ns))
    }
}

/// The node a recording of one machine holds when its META has no node table (versions
/// before 6): its host name and clock, from META.
pub fn implied_node(hostname: &str, start_unix_ns: u128, start_monotonic_ns: u64) -> NodeInfo {
    NodeInfo {
        hostname: hostname.to_string(),
        start_unix_ns,
        start_monotonic_ns,
        ..Default::default()
    }
}

/// Why a NODE chunk cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeError {
    #[error("node {node} is not in the recording's node table ({nodes} nodes)")]
    Unknown { node: u32, nodes: usize },
    #[error("a recording holds at most {MAX_NODES} nodes, node {0} is beyond")]
    TooMany(u32),
}

/// The fastest a steered relocation's shift may change: 10 % of the time passing, far
/// beyond any clock's drift (tens of ppm), and short of reordering a node's times.
const MAX_RATE_PPB: i64 = 100_000_000;

/// How the records of one node are made unique and moved onto node 0's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    node: NodeId,
    /// Added to the node's time `anchor_ns` (ns): the difference of its wall-clock
    /// offset from node 0's, or what a collector measured.
    shift_ns: i64,
    /// Where `shift_ns` holds; past it, the shift grows by `rate_ppb` parts per billion
    /// of the time since (a collector following the node's drift, `steered`).
    anchor_ns: u64,
    rate_ppb: i64,
}

impl Relocation {
    /// Node 0: nothing changes.
    pub const NONE: Relocation = Relocation {
        node: NodeId(0),
        shift_ns: 0,
        anchor_ns: 0,
        rate_ppb: 0,
    };

    /// The relocation of node `node` of table `nodes` (node 0 first).
    pub fn of(nodes: &[NodeInfo], node: u32) -> Result<Relocation, NodeError> {
        if node >= MAX_NODES {
            return Err(NodeError::TooMany(node));
        }
        let (Some(first), Some(this)) = (nodes.first(), nodes.get(node as usize)) else {
            return Err(NodeError::Unknown {
                node,
                nodes: nodes.len(),
            });
        };
        let shift = this.wall_offset_ns().saturating_sub(first.wall_offset_ns());
        Ok(Relocation {
            node: NodeId(node as u16),
            shift_ns: shift.clamp(i64::MIN.into(), i64::MAX.into()) as i64,
            anchor_ns: 0,
            rate_ppb: 0,
        })
    }

    /// The relocation of node `node` whose clock reads `shift_ns` behind node 0's, as
    /// measured (a collector's ping-pongs with its agent) rather than from the clocks
    /// read at start.
    pub fn measured(node: u32, shift_ns: i64) -> Result<Relocation, NodeError> {
        if node >= MAX_NODES {
            return Err(NodeError::TooMany(node));
        }
        Ok(Relocation {
            node: NodeId(node as u16),
            shift_ns,
            anchor_ns: 0,
            rate_ppb: 0,
        })
    }

    /// The same node from its time `anchor_ns` on: the shift there stays what it is
    /// (so that times never jump), then changes by `rate_ppb` parts per billion of the
    /// time past the anchor. `rate_ppb` is kept within 10 %: times keep their order.
    pub fn steered(&self, anchor_ns: u64, rate_ppb: i64) -> Relocation {
        Relocation {
            node: self.node,
            shift_ns: self.shift_at(anchor_ns),
            anchor_ns,
            rate_ppb: rate_ppb.clamp(-MAX_RATE_PPB, MAX_RATE_PPB),
        }
    }

    /// What `time` adds to the node's time `ns`.
    pub fn shift_at(&self, ns: u64) -> i64 {
        let past = i128::from(ns) - i128::from(self.anchor_ns);
        let shift = i128::from(self.shift_ns) + past * i128::from(self.rate_ppb) / 1_000_000_000;
        shift.clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    pub fn is_none(&self) -> bool {
        *self == Relocation::NONE
    }

    /// A process or thread id: 0 (the idle task, or "none") stays 0, which every reader
    /// takes as no process of the program.
    fn id(&self, local: u32) -> u32 {
        if local == 0 {
            0
        } else {
            GlobalId::new(self.node, local).0
        }
    }

    /// A CPU number (CPU 0 is a CPU).
    fn cpu(&self, local: u32) -> u32 {
        GlobalId::new(self.node, local).0
    }

    /// A time of the node's clock on node 0's.
    pub fn time(&self, ns: u64) -> u64 {
        if self.rate_ppb == 0 {
            ns.saturating_add_signed(self.shift_ns)
        } else {
            ns.saturating_add_signed(self.shift_at(ns))
        }
    }

    /// Makes `rec`'s process, thread and CPU ids unique and moves its time.
    pub fn record(&self, rec: &mut Record) {
        if self.is_none() {
            return;
        }
        let h = rec.header_mut();
        h.tgid = self.id(h.tgid);
        h.tid = self.id(h.tid);
        h.cpu = self.cpu(h.cpu);
        h.ts_ns = self.time(h.ts_ns);
        match rec {
            Record::Wakeup(w) | Record::WakeupNew(w) => {
                w.wakee_tid = self.id(w.wakee_tid);
                // 0: the probe did not know the wakee's process.
                w.wakee_tgid = self.id(w.wakee_tgid);
                if w.target_cpu >= 0 {
                    w.target_cpu = self.cpu(w.target_cpu as u32) as i32;
                }
            }
            Record::Fork(f) => f.child_tid = self.id(f.child_tid),
            Record::Exec(e) => e.old_tid = self.id(e.old_tid),
            _ => {}
        }
    }

    /// Makes a process's ids unique (its parent is on the same node).
    pub fn process(&self, p: &mut ProcessInfo) {
        if self.is_none() {
            return;
        }
        p.pid = self.id(p.pid);
        p.ppid = self.id(p.ppid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{kind, EventHeader, WakeRecord};

    use crate::format::synth::two_nodes as nodes;

    #[test]
    fn ids_of_other_nodes_are_shown_with_their_node() {
        assert_eq!(ShownId(101).to_string(), "101");
        assert_eq!(
            ShownId(GlobalId::new(NodeId(1), 101).0).to_string(),
            "101@node1"
        );
        assert_eq!(format!("{:<12}|", ShownId(1 << 22 | 7)), "7@node1     |");
        assert_eq!(format!("{:>5}|", ShownId(7)), "    7|");
    }

    #[test]
    fn node_zero_is_left_as_it_is() {
        let r = Relocation::of(&nodes(), 0).unwrap();
        assert!(r.is_none());
        let mut rec = Record::FuncEnter(EventHeader {
            ts_ns: 7,
            tgid: 100,
            tid: 101,
            cpu: 1,
            ..Default::default()
        });
        let before = rec.clone();
        r.record(&mut rec);
        assert_eq!(rec, before);
    }

    #[test]
    fn a_steered_node_keeps_its_times_continuous_and_in_order() {
        let r = Relocation::measured(1, -37_000_000).unwrap();
        assert_eq!(r.time(1_000_000_000), 963_000_000);
        // From 1 s on, the shift falls 50 ppm of the time passing.
        let s = r.steered(1_000_000_000, -50_000);
        assert_eq!(s.time(1_000_000_000), r.time(1_000_000_000), "no jump");
        assert_eq!(s.time(3_000_000_000), 3_000_000_000 - 37_000_000 - 100_000);
        assert_eq!(s.node(), NodeId(1));
        // A wild rate is held to 10 %: later stays later.
        let wild = r.steered(1_000_000_000, -5_000_000_000);
        assert!(wild.time(1_000_000_001) >= wild.time(1_000_000_000));
        assert!(wild.time(2_000_000_000) > wild.time(1_000_000_000));
    }

    #[test]
    fn another_node_gets_ids_of_its_own_and_node_zeros_clock() {
        let r = Relocation::of(&nodes(), 1).unwrap();
        let mut rec = Record::Wakeup(WakeRecord {
            header: EventHeader {
                ts_ns: 15_000_000_100,
                tgid: 100,
                tid: 101,
                kind: kind::WAKEUP,
                cpu: 1,
                ..Default::default()
            },
            wakee_tid: 102,
            wakee_tgid: 0,
            target_cpu: 0,
            _reserved: 0,
        });
        r.record(&mut rec);
        let Record::Wakeup(w) = rec else {
            unreachable!()
        };
        assert_eq!(GlobalId(w.header.tgid).node(), NodeId(1));
        assert_eq!(GlobalId(w.header.tgid).local(), 100);
        assert_eq!(w.header.tid, 1 << 22 | 101);
        assert_eq!(w.header.cpu, 1 << 22 | 1);
        assert_eq!(w.wakee_tid, 1 << 22 | 102);
        assert_eq!(w.wakee_tgid, 0, "an unknown process stays unknown");
        assert_eq!(w.target_cpu, 1 << 22);
        // 100 ns after b's start is 100 ns after a's start too.
        assert_eq!(w.header.ts_ns, 10_000_000_100);
        // The idle task is no process on any node; CPU 0 is a CPU.
        let mut idle = Record::SwitchIn(tracer_common::SwitchRecord {
            header: EventHeader {
                kind: kind::SWITCH_IN,
                ..Default::default()
            },
            prev_state: 0,
        });
        r.record(&mut idle);
        let h = idle.header();
        assert_eq!((h.tgid, h.tid, h.cpu), (0, 0, 1 << 22));
    }

    /// A job of 4 MPICH ranks in a ring, written as two nodes of 2 ranks each whose
    /// processes have the same pids (100 and 101): read back, it is 4 processes, every
    /// message matched, the critical path of the same job recorded on one machine, and a
    /// machine of two processes per node in the metrics.
    #[test]
    fn two_nodes_with_colliding_pids_are_four_processes() {
        use crate::analysis::analyze;
        use crate::analysis::profile::Profile;
        use crate::analysis::workclock::ClockKind;
        use crate::export::chrome::{ChromeExport, CRITICAL_PID};
        use crate::format::recording::{Item, RecordingReader};
        use crate::format::synth::write_two_node_ring;
        use crate::graph::recorded::RecordedGraph;
        use crate::metrics::Metrics;
        use crate::report::{Report, ReportOptions};
        use std::collections::{BTreeSet, HashMap};

        let dir = std::env::temp_dir().join(format!("tracer-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("two-nodes.trace");
        let one_machine = write_two_node_ring(&path);
        let mut reader = RecordingReader::open(&path).unwrap();
        let mut items = Vec::new();
        while let Some(item) = reader.next_item().unwrap() {
            items.push(item);
        }
        // The metrics: a machine per node, two processes on each.
        let metrics = Metrics::from_items(&items, &reader.meta);
        let machines: Vec<(&str, u32)> = metrics
            .machines
            .iter()
            .map(|m| (m.name.as_str(), m.cpus))
            .collect();
        assert_eq!(machines, [("a", 1), ("b", 1)]);
        let on = |host: &str| {
            metrics
                .processes
                .iter()
                .filter(|p| p.machine == host)
                .count()
        };
        assert_eq!((on("a"), on("b")), (2, 2));
        let pids: BTreeSet<u32> = items
            .iter()
            .filter_map(|i| match i {
                Item::Process(p) => Some(p.pid),
                _ => None,
            })
            .collect();
        let b = |pid| GlobalId::new(NodeId(1), pid).0;
        assert_eq!(pids, BTreeSet::from([100, 101, b(100), b(101)]));

        // The profile: every message matched, the one-machine critical path.
        let one = Profile::new(
            &analyze(&one_machine, ClockKind::Cpu),
            ClockKind::Cpu,
            0,
            &HashMap::new(),
        );
        let two = Profile::new(
            &analyze(&items, ClockKind::Cpu),
            ClockKind::Cpu,
            0,
            &HashMap::new(),
        );
        assert_eq!(one.messages.matched, 12, "{:?}", one.messages);
        assert_eq!(two.messages.matched, 12, "{:?}", two.messages);
        assert_eq!(two.messages.unmatched, 0);
        assert_eq!(two.critical_path.length_ns, one.critical_path.length_ns);
        let path_pids: BTreeSet<u32> = two.threads.iter().map(|t| t.pid).collect();
        assert!(path_pids.iter().all(|p| pids.contains(p)), "{path_pids:?}");

        // The report and the Chrome export: four processes.
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let report = Report::new(&rg, &ReportOptions::default(), None);
        assert_eq!(
            report.critical_path.path.length_ns,
            one.critical_path.length_ns
        );
        let bytes = ChromeExport::read(&path, ClockKind::Cpu)
            .unwrap()
            .write(&mut RecordingReader::open(&path).unwrap(), Vec::new())
            .unwrap()
            .out;
        std::fs::remove_dir_all(&dir).unwrap();
        let chrome: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let chrome_pids: BTreeSet<u64> = chrome["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .filter_map(|e| e["pid"].as_u64())
            .filter(|&pid| pid != u64::from(CRITICAL_PID))
            .collect();
        assert_eq!(chrome_pids, pids.iter().map(|&p| u64::from(p)).collect());
    }

    #[test]
    fn clocks_of_any_size_do_not_overflow() {
        let mut table = nodes();
        table[0].start_unix_ns = u128::MAX;
        table[1].start_monotonic_ns = u64::MAX;
        let r = Relocation::of(&table, 1).unwrap();
        assert_eq!(r.time(5), 0, "moved back past the start of the clock");
        table[0].start_unix_ns = 0;
        table[1].start_unix_ns = u128::MAX;
        table[1].start_monotonic_ns = 0;
        assert_eq!(
            Relocation::of(&table, 1).unwrap().time(5),
            5 + i64::MAX as u64
        );
    }

    #[test]
    fn a_node_outside_the_table_is_an_error() {
        assert_eq!(
            Relocation::of(&nodes(), 2),
            Err(NodeError::Unknown { node: 2, nodes: 2 })
        );
        assert_eq!(
            Relocation::of(&nodes(), MAX_NODES),
            Err(NodeError::TooMany(MAX_NODES))
        );
    }
}
