//! The summary of a recording (`tracer record --summary-json`): what was seen, per
//! process, with MPI ranks and PVM task ids. Schema: docs/summary-json.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracer_common::{call, unwind_end, RecordKind};

use crate::format::calls::{self, Flavor, MPICH_COMM_WORLD};
use crate::format::cost::RunCost;
use crate::format::node::{GlobalId, NodeInfo};
use crate::format::recording::{FunctionProbe, Item};
use crate::format::records::{self, Record};
use crate::format::ProcessInfo;

pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Kind ids are small; one slot each, and slot 0 for any other.
const KIND_SLOTS: usize = 32;
// A kind at or above `KIND_SLOTS` would be counted as unknown: give it a slot.
const _: () = {
    let mut i = 0;
    while i < RecordKind::ALL.len() {
        assert!((RecordKind::ALL[i] as usize) < KIND_SLOTS);
        i += 1;
    }
};

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub schema_version: u32,
    pub events: EventCounts,
    /// Completed calls (entry and exit seen) per MPI/PVM function name.
    pub calls: BTreeMap<String, u64>,
    /// Entries per selected procedure (`--func`), by name (demangled).
    pub functions: BTreeMap<String, u64>,
    pub processes: Vec<ProcessSummary>,
    /// CPU time of the tracer itself (user + system, all its threads, not the traced
    /// programs): set by `tracer record`, None for a summary of a recording.
    pub tracer_cpu_ns: Option<u64>,
    /// MPI calls that traced programs import and no probe covers (their time counts as
    /// work, their traffic is unmatched), with how many programs held at exec import
    /// each: set by `tracer record`, None for a summary of a recording.
    pub unprobed_mpi_calls: Option<BTreeMap<String, u64>>,
    /// What the session cost: set by `tracer record`; left out of the JSON of a summary
    /// of a recording, which is as it was before the field came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<RunCost>,
    /// The sampled stacks (SAMPLE records) and how their unwinding ended; left out of
    /// the JSON when there are none, which keeps summaries without samples as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<SampleCounts>,
}

/// How many stacks the sampler took and how many unwound to the stack's root.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SampleCounts {
    pub total: u64,
    /// Those whose unwinding reached the stack's root (`end` complete).
    pub complete: u64,
    /// `complete` in percent of `total`.
    pub complete_pct: f64,
    /// The samples by how their unwinding ended: `complete`, `truncated`, `stack_end`,
    /// `no_unwind_info`, `no_user_state` (only those that happened).
    pub by_end: BTreeMap<String, u64>,
}

impl SampleCounts {
    /// The line `tracer record` and `tracer summary` print.
    pub fn text_line(&self) -> String {
        format!(
            "samples: {} ({:.1} % unwound to the stack's root)",
            self.total, self.complete_pct
        )
    }
}

/// The name of an `end` of a SAMPLE record ([`tracer_common::unwind_end`]).
pub fn unwind_end_name(end: u16) -> &'static str {
    match end {
        unwind_end::COMPLETE => "complete",
        unwind_end::TRUNCATED => "truncated",
        unwind_end::STACK_END => "stack_end",
        unwind_end::NO_UNWIND_INFO => "no_unwind_info",
        unwind_end::NO_USER_STATE => "no_user_state",
        _ => "unknown",
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EventCounts {
    pub total: u64,
    pub lost: u64,
    pub by_kind: BTreeMap<String, u64>,
    /// How often the probes failed, by reason (only those that happened; left out of
    /// the JSON when nothing failed).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcessSummary {
    pub pid: u32,
    pub command: String,
    /// Rank in MPI_COMM_WORLD, when known.
    pub rank: Option<i32>,
    /// Size of MPI_COMM_WORLD, when known.
    pub size: Option<i32>,
    pub pvm_tid: Option<i32>,
    /// Distinct threads seen.
    pub threads: usize,
    /// In a recording of several nodes: the machine the process ran on (`pid` is then
    /// the recording's id, which has the node in its high bits; docs/multinode.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<ProcessNode>,
}

/// Where a process of a job across nodes ran, and the id its machine gave it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProcessNode {
    /// The node's row in the recording's node table (node 0: the collector's, or the
    /// first recording merged). Host names alone may repeat (containers, namespaces).
    pub index: u16,
    pub hostname: String,
    pub pid: u32,
}

#[derive(Default)]
struct ProcessState {
    info: Option<ProcessInfo>,
    exec: Option<String>,
    threads: BTreeSet<u32>,
    rank: Option<i32>,
    size: Option<i32>,
    pvm_tid: Option<i32>,
    /// Open MPI: this process's MPI_COMM_WORLD handle.
    ompi_world: Option<u64>,
}

/// Builds a [`Summary`] from the items of a recording, in order.
#[derive(Default)]
pub struct SummaryBuilder {
    counts: EventCounts,
    /// Records per kind id, named only in [`Self::finish`]: a name looked up in a map of
    /// strings per record (an allocation and string comparisons) cost more than the
    /// rest of the summary. Index 0 (no kind has it) stands for unknown kinds.
    by_kind: [u64; KIND_SLOTS],
    /// Completed calls per call id, named in [`Self::finish`] (no String per call).
    calls_by_id: FxHashMap<u16, u64>,
    /// Entries per probe id, named in [`Self::finish`] (no String per entry).
    entries_by_probe: FxHashMap<u16, u64>,
    probe_names: HashMap<u16, String>,
    /// The thread of the latest record, already in `processes`: most records come from
    /// the same thread as the one before, and skip the two tree lookups.
    last_thread: Option<(u32, u32)>,
    processes: BTreeMap<u32, ProcessState>,
    /// The communicator of each call in progress, per thread (calls nest in some
    /// libraries): all an exit needs of its entry, 8 bytes kept instead of a record.
    open_calls: FxHashMap<u32, Vec<u64>>,
    /// SAMPLE records by their `end` (index: the end's value; the last slot: unknown).
    samples_by_end: [u64; 6],
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn item(&mut self, item: &Item) {
        match item {
            Item::Record(r) => self.record(r),
            Item::Process(p) => self.process(p),
            Item::Probe(p) => self.probe(p),
        }
    }

    pub fn probe(&mut self, p: &FunctionProbe) {
        self.probe_names.insert(p.id, p.name());
    }

    pub fn process(&mut self, info: &ProcessInfo) {
        let st = self.processes.entry(info.pid).or_default();
        st.ompi_world = info.mpi_world_handle.or(st.ompi_world);
        // A later inspection (after exec) replaces an earlier one, but keeps what it knew.
        let mut info = info.clone();
        if let Some(old) = &st.info {
            if info.command.is_empty() {
                info.command = old.command.clone();
            }
            info.env_rank = info.env_rank.or(old.env_rank);
            info.env_size = info.env_size.or(old.env_size);
        }
        st.info = Some(info);
    }

    pub fn record(&mut self, r: &Record) {
        let h = *r.header();
        self.counts.total += 1;
        let slot = usize::from(h.kind);
        self.by_kind[if slot < KIND_SLOTS { slot } else { 0 }] += 1;
        match r {
            Record::Wakeup(w) | Record::WakeupNew(w) => {
                // The header is the waker, which may be untraced; the wakee is traced.
                if w.wakee_tgid != 0 {
                    self.processes
                        .entry(w.wakee_tgid)
                        .or_default()
                        .threads
                        .insert(w.wakee_tid);
                }
                return;
            }
            Record::SwitchIn(_) if h.tgid == 0 => return,
            _ => {}
        }
        if self.last_thread != Some((h.tgid, h.tid)) {
            let st = self.processes.entry(h.tgid).or_default();
            st.threads.insert(h.tid);
            self.last_thread = Some((h.tgid, h.tid));
        }
        match r {
            Record::Exec(e) => {
                let st = self.processes.entry(h.tgid).or_default();
                st.exec = Some(records::exec_filename(e));
            }
            Record::Sample(x) => {
                self.samples_by_end[usize::from(x.end).min(self.samples_by_end.len() - 1)] += 1
            }
            Record::FuncEnter(_) => *self.entries_by_probe.entry(h.call).or_default() += 1,
            Record::CallEnter(c) => self.open_calls.entry(h.tid).or_default().push(c.comm),
            Record::CallExit(x) => {
                let Some(comm) = self.open_calls.get_mut(&h.tid).and_then(|s| s.pop()) else {
                    return;
                };
                let st = self.processes.entry(h.tgid).or_default();
                let calls::CallField { id, flavor } = calls::split_call_field(h.call);
                *self.calls_by_id.entry(id).or_default() += 1;
                let is_world = match Flavor::from_id(flavor) {
                    Some(Flavor::Mpich) => comm == MPICH_COMM_WORLD,
                    Some(Flavor::OpenMpi) => st.ompi_world == Some(comm),
                    _ => false,
                };
                match id {
                    call::MPI_COMM_RANK if is_world && x.ret == 0 => st.rank = Some(x.out as i32),
                    call::MPI_COMM_SIZE if is_world && x.ret == 0 => st.size = Some(x.out as i32),
                    call::PVM_MYTID if x.ret > 0 => st.pvm_tid = Some(x.ret as i32),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    pub fn finish(self, lost: u64) -> Summary {
        let mut counts = self.counts;
        counts.lost = lost;
        let mut call_counts = BTreeMap::new();
        for (id, n) in self.calls_by_id {
            *call_counts.entry(calls::name(id)).or_default() += n;
        }
        let mut functions = BTreeMap::new();
        for (id, n) in self.entries_by_probe {
            let name = self
                .probe_names
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("probe#{id}"));
            *functions.entry(name).or_default() += n;
        }
        for (k, &n) in self.by_kind.iter().enumerate() {
            if n > 0 {
                *counts
                    .by_kind
                    .entry(records::kind_name(k as u16).to_string())
                    .or_default() += n;
            }
        }
        let processes = self
            .processes
            .into_iter()
            .filter(|(pid, _)| *pid != 0)
            .map(|(pid, st)| {
                let info = st.info.unwrap_or_default();
                let command = if !info.command.is_empty() {
                    info.command
                } else {
                    st.exec.unwrap_or_default()
                };
                ProcessSummary {
                    pid,
                    command,
                    rank: st.rank.or(info.env_rank),
                    size: st.size.or(info.env_size),
                    pvm_tid: st.pvm_tid,
                    threads: st.threads.len(),
                    node: None,
                }
            })
            .collect();
        Summary {
            schema_version: SCHEMA_VERSION,
            events: counts,
            calls: call_counts,
            functions,
            processes,
            tracer_cpu_ns: None,
            unprobed_mpi_calls: None,
            cost: None,
            samples: sample_counts(&self.samples_by_end),
        }
    }
}

impl Summary {
    /// Names the node of every process, when the recording's node table (`nodes`, node 0
    /// first) has more than one.
    pub fn name_nodes(&mut self, nodes: &[NodeInfo]) {
        if nodes.len() < 2 {
            return;
        }
        for p in &mut self.processes {
            let id = GlobalId(p.pid);
            let index = id.node().0;
            p.node = Some(ProcessNode {
                index,
                hostname: nodes
                    .get(usize::from(index))
                    .map(|n| n.hostname.clone())
                    .unwrap_or_default(),
                pid: id.local(),
            });
        }
    }
}

/// The sample counts, None without samples.
fn sample_counts(by_end: &[u64]) -> Option<SampleCounts> {
    let total: u64 = by_end.iter().sum();
    if total == 0 {
        return None;
    }
    let complete = by_end[usize::from(unwind_end::COMPLETE)];
    Some(SampleCounts {
        total,
        complete,
        complete_pct: crate::units::percent(complete, total),
        by_end: by_end
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(end, &n)| (unwind_end_name(end as u16).to_string(), n))
            .collect(),
    })
}

/// Summarizes a whole recording.
pub fn summarize(items: &[Item], lost: u64) -> Summary {
    let mut b = SummaryBuilder::new();
    for item in items {
        b.item(item);
    }
    b.finish(lost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::node::NodeId;
    use tracer_common::{flavor, kind, CallRecord, EventHeader};

    fn header(k: u16, tid: u32, call: u16) -> EventHeader {
        EventHeader {
            kind: k,
            tgid: 5,
            tid,
            call,
            ..Default::default()
        }
    }

    /// Counts by kind, call and procedure are named at the end; threads are counted once
    /// however their records interleave.
    #[test]
    fn counts_calls_procedures_and_threads() {
        let mut b = SummaryBuilder::new();
        b.probe(&FunctionProbe {
            id: 1,
            symbol: "compute".into(),
            path: "/bin/x".into(),
            vaddr: 0,
        });
        let rank = call::MPI_COMM_RANK | (flavor::MPICH as u16) << 8;
        let mut enter = CallRecord::unset(header(kind::CALL_ENTER, 5, rank));
        enter.comm = MPICH_COMM_WORLD;
        let mut exit = CallRecord::unset(header(kind::CALL_EXIT, 5, rank));
        exit.ret = 0;
        exit.out = 3;
        for r in [
            Record::FuncEnter(header(kind::FUNC_ENTER, 5, 1)),
            Record::FuncEnter(header(kind::FUNC_ENTER, 6, 1)),
            Record::FuncEnter(header(kind::FUNC_ENTER, 5, 2)),
            Record::CallEnter(enter),
            Record::CallExit(exit),
            Record::FuncExit(header(kind::FUNC_EXIT, 6, 1)),
        ] {
            b.record(&r);
        }
        let s = b.finish(0);
        assert_eq!(s.events.total, 6);
        let by_kind: Vec<(&str, u64)> = s
            .events
            .by_kind
            .iter()
            .map(|(k, &n)| (k.as_str(), n))
            .collect();
        assert_eq!(
            by_kind,
            [
                ("call_enter", 1),
                ("call_exit", 1),
                ("func_enter", 3),
                ("func_exit", 1)
            ]
        );
        let functions: Vec<(&str, u64)> =
            s.functions.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        assert_eq!(functions, [("compute", 2), ("probe#2", 1)]);
        assert_eq!(s.calls.get(&calls::name(call::MPI_COMM_RANK)), Some(&1));
        assert_eq!(s.calls.len(), 1);
        assert_eq!(s.processes.len(), 1);
        assert_eq!(s.processes[0].threads, 2);
        assert_eq!(s.processes[0].rank, Some(3));
    }

    /// Samples are counted by how their unwinding ended; a summary without samples has
    /// no `samples` at all (its JSON is as it was before the field came).
    #[test]
    fn counts_samples_by_unwind_end() {
        let mut b = SummaryBuilder::new();
        let sample = |end| {
            Record::Sample(Box::new(tracer_common::SampleRecord {
                header: header(kind::SAMPLE, 5, 0),
                end,
                ..Default::default()
            }))
        };
        for end in [
            unwind_end::COMPLETE,
            unwind_end::COMPLETE,
            unwind_end::COMPLETE,
            unwind_end::STACK_END,
        ] {
            b.record(&sample(end));
        }
        let s = b.finish(0);
        let samples = s.samples.expect("samples");
        assert_eq!((samples.total, samples.complete), (4, 3));
        assert_eq!(samples.complete_pct, 75.0);
        assert_eq!(
            samples.by_end.into_iter().collect::<Vec<_>>(),
            [("complete".to_string(), 3), ("stack_end".to_string(), 1)]
        );
        assert_eq!(
            SampleCounts {
                total: 1234,
                complete: 1218,
                complete_pct: 98.7,
                by_end: BTreeMap::new(),
            }
            .text_line(),
            "samples: 1234 (98.7 % unwound to the stack's root)"
        );
        let none = SummaryBuilder::new().finish(0);
        assert!(none.samples.is_none());
        assert!(serde_json::to_value(&none)
            .unwrap()
            .get("samples")
            .is_none());
    }

    /// In a recording of several nodes every process names its machine and the pid that
    /// machine gave it; in a recording of one, nothing changes (nor its JSON).
    #[test]
    fn processes_name_their_node_when_there_are_several() {
        let mut b = SummaryBuilder::new();
        let remote = GlobalId::new(NodeId(1), 25392).0;
        for tgid in [25391, remote] {
            b.record(&Record::FuncEnter(EventHeader {
                tgid,
                tid: tgid,
                ..header(kind::FUNC_ENTER, 0, 1)
            }));
        }
        let host = |name: &str| NodeInfo {
            hostname: name.into(),
            ..Default::default()
        };
        let mut one = b.finish(0);
        let two = {
            let mut s = one.clone();
            s.name_nodes(&[host("node1"), host("node2")]);
            s
        };
        let nodes: Vec<Option<ProcessNode>> =
            two.processes.iter().map(|p| p.node.clone()).collect();
        let on = |index, hostname: &str, pid| {
            Some(ProcessNode {
                index,
                hostname: hostname.into(),
                pid,
            })
        };
        assert_eq!(nodes, [on(0, "node1", 25391), on(1, "node2", 25392)]);
        let before = one.clone();
        one.name_nodes(&[host("node1")]);
        assert_eq!(one, before);
        assert!(serde_json::to_value(&one).unwrap()["processes"][0]
            .get("node")
            .is_none());
        assert_eq!(
            serde_json::to_value(&two).unwrap()["processes"][1]["node"],
            serde_json::json!({ "index": 1, "hostname": "node2", "pid": 25392 })
        );
    }
}
