//! Recordings of one node each, made into one recording of every node (`tracer merge`):
//! the offline path for sites where each node records on its own (`tracer record -o` on
//! every node of a job, e.g. `--all` under the batch system).
//!
//! Each input becomes a node of the output, in the order given (the first is node 0,
//! whose clock the output's times are on). The inputs' records are written interleaved
//! in windows of [`WINDOW_NS`] of node 0's clock, each node's part of a window behind a
//! NODE chunk, so that a reader meets every node's records close to their time order:
//! its reorder window ([`crate::analysis::REORDER_WINDOW_NS`]) puts the rest in order.
//! Ids and clocks are not rewritten here: the reader makes each node's ids unique and
//! moves its times onto node 0's clock as it reads (`format::node`), so the output holds
//! what each node recorded, byte for byte, but the probe ids of FUNC records, which are
//! one numbering for the whole recording and are renumbered here: one id per procedure
//! (symbol, binary and address), so that a procedure every node probed in the same
//! binary is one procedure of the job.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::format::node::{NodeInfo, Relocation, MAX_NODES};
use crate::format::probe_ids::{NodeProbeIds, ProbeIds};
use crate::format::recording::{
    Condition, Item, RecordingError, RecordingMeta, RecordingReader, RecordingWriter, Trailer,
};

/// Width of the windows the nodes' records are interleaved in (node 0's clock): well
/// inside the readers' reorder window, and wide enough that a window of a busy node
/// fills whole EVENTS chunks.
pub const WINDOW_NS: u64 = 10_000_000;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("give at least two recordings to merge (got {0})")]
    TooFew(usize),
    #[error("at most {MAX_NODES} recordings can be merged (got {0})")]
    TooMany(usize),
    #[error("{} is given twice", .0.display())]
    Twice(PathBuf),
    #[error("{} holds {nodes} nodes already: merge recordings of one node each", path.display())]
    NotOneNode { path: PathBuf, nodes: usize },
    #[error(
        "the recordings select more than {} procedures together: probe ids run out",
        u16::MAX
    )]
    ProbeIds,
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        source: RecordingError,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        source: RecordingError,
    },
}

/// How one input read: what a command says of it (cut short, damaged chunks).
#[derive(Clone, Debug)]
pub struct InputCondition {
    pub path: PathBuf,
    pub condition: Condition,
}

/// What [`merge`] wrote.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The node table of the output, node 0 first (one row per input, in order).
    pub nodes: Vec<NodeInfo>,
    /// Records written, over all nodes.
    pub events: u64,
    /// The totals of the output's END chunk: the inputs' totals added up.
    pub trailer: Trailer,
    pub inputs: Vec<InputCondition>,
}

/// One input being read: its reader and the items read ahead of the current window.
struct Input {
    path: PathBuf,
    reader: RecordingReader,
    relocation: Relocation,
    /// Read but not yet written (the first record beyond the current window, and what
    /// precedes it).
    ahead: VecDeque<Item>,
    exhausted: bool,
    /// This node's probe ids -> the output's.
    probe_ids: NodeProbeIds,
}

impl Input {
    /// Reads until the next record (inclusive) or the end; the time of that record on
    /// node 0's clock, or None at the end.
    fn next_record_time(&mut self) -> Result<Option<u64>, MergeError> {
        loop {
            if let Some(Item::Record(r)) = self.ahead.back() {
                return Ok(Some(self.relocation.time(r.header().ts_ns)));
            }
            if self.exhausted {
                return Ok(None);
            }
            match self.reader.next_item() {
                Ok(Some(item)) => self.ahead.push_back(item),
                Ok(None) => self.exhausted = true,
                Err(source) => {
                    return Err(MergeError::Read {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
    }
}

/// Merges `inputs` (recordings of one node each) into `output`.
pub fn merge(inputs: &[PathBuf], output: &Path) -> Result<Merged, MergeError> {
    if inputs.len() < 2 {
        return Err(MergeError::TooFew(inputs.len()));
    }
    if inputs.len() > MAX_NODES as usize {
        return Err(MergeError::TooMany(inputs.len()));
    }
    let mut seen = Vec::new();
    for path in inputs {
        let same = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        if seen.contains(&same) {
            return Err(MergeError::Twice(path.clone()));
        }
        seen.push(same);
    }
    let mut readers = Vec::with_capacity(inputs.len());
    for path in inputs {
        let reader = RecordingReader::open(path).map_err(|source| MergeError::Read {
            path: path.clone(),
            source,
        })?;
        if reader.meta.nodes.len() > 1 {
            return Err(MergeError::NotOneNode {
                path: path.clone(),
                nodes: reader.meta.nodes.len(),
            });
        }
        readers.push(reader);
    }
    let nodes: Vec<NodeInfo> = readers.iter().map(|r| r.meta.nodes()[0].clone()).collect();
    let meta = merged_meta(readers.iter().map(|r| &r.meta), &nodes);
    let mut inputs: Vec<Input> = inputs
        .iter()
        .zip(readers)
        .enumerate()
        .map(|(i, (path, reader))| Input {
            path: path.clone(),
            reader,
            relocation: Relocation::of(&nodes, i as u32).expect("one node per input"),
            ahead: VecDeque::new(),
            exhausted: false,
            probe_ids: NodeProbeIds::new(),
        })
        .collect();
    let write_err = |source| MergeError::Write {
        path: output.to_path_buf(),
        source,
    };
    let mut w = RecordingWriter::create(output, &meta).map_err(write_err)?;
    let mut current_node = 0u32;
    let mut probes = ProbeIds::default();
    let mut events = 0u64;
    loop {
        // The window starts at the earliest record any node has left.
        let mut start = None;
        for input in inputs.iter_mut() {
            if let Some(t) = input.next_record_time()? {
                start = Some(start.map_or(t, |s: u64| s.min(t)));
            }
        }
        let end = start.map(|s| s.saturating_add(WINDOW_NS));
        for (node, input) in inputs.iter_mut().enumerate() {
            // Everything up to the first record at or beyond the window's end (all that
            // is left, after the last record).
            let mut take = Vec::new();
            loop {
                let beyond = match (input.next_record_time()?, end) {
                    (Some(t), Some(end)) => t >= end,
                    _ => false,
                };
                if beyond {
                    // Everything read ahead but that record is written now.
                    let last = input.ahead.pop_back();
                    take.extend(input.ahead.drain(..));
                    input.ahead.extend(last);
                    break;
                }
                take.extend(input.ahead.drain(..));
                if input.exhausted {
                    break;
                }
            }
            if take.is_empty() {
                continue;
            }
            if node as u32 != current_node {
                w.begin_node(node as u32).map_err(write_err)?;
                current_node = node as u32;
            }
            for mut item in take {
                // A PROBE chunk precedes the records that name it.
                let goes_on = probes
                    .renumber(&mut item, &mut input.probe_ids)
                    .map_err(|_| MergeError::ProbeIds)?;
                match item {
                    _ if !goes_on => {}
                    Item::Record(rec) => {
                        w.record(rec.as_bytes()).map_err(write_err)?;
                        events += 1;
                    }
                    Item::Process(p) => w.process(&p).map_err(write_err)?,
                    Item::Probe(p) => w.probe(&p).map_err(write_err)?,
                }
            }
        }
        if inputs.iter().all(|i| i.exhausted && i.ahead.is_empty()) {
            break;
        }
    }
    let mut trailer = Trailer::default();
    let mut conditions = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let t = input.reader.totals();
        trailer.events_total += t.events_total;
        trailer.events_lost += t.events_lost;
        for (reason, n) in t.probe_failures {
            *trailer.probe_failures.entry(reason).or_default() += n;
        }
        conditions.push(InputCondition {
            path: input.path.clone(),
            condition: input.reader.condition(),
        });
    }
    w.finish(&trailer).map_err(write_err)?;
    Ok(Merged {
        nodes,
        events,
        trailer,
        inputs: conditions,
    })
}

/// The output's META: node 0's host and clocks, every node's command, pids and
/// libraries (each library once), and the node table.
fn merged_meta<'a>(
    metas: impl Iterator<Item = &'a RecordingMeta>,
    nodes: &[NodeInfo],
) -> RecordingMeta {
    let mut out = RecordingMeta {
        tracer_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: nodes[0].hostname.clone(),
        start_unix_ns: nodes[0].start_unix_ns,
        start_monotonic_ns: nodes[0].start_monotonic_ns,
        nodes: nodes.to_vec(),
        ..Default::default()
    };
    let mut libraries = BTreeMap::new();
    for m in metas {
        if out.command.is_empty() {
            out.command.clone_from(&m.command);
        }
        out.pids.extend(&m.pids);
        out.system_wide |= m.system_wide;
        for lib in &m.libraries {
            libraries
                .entry(lib.path.clone())
                .or_insert_with(|| lib.clone());
        }
    }
    out.libraries = libraries.into_values().collect();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::analysis::analyze;
    use crate::analysis::profile::Profile;
    use crate::analysis::workclock::ClockKind;
    use crate::format::node::{GlobalId, NodeId};
    use crate::format::recording::read_all;
    use crate::format::synth::{two_nodes, write_two_node_ring_apart};

    /// Two nodes of one job recorded apart, with colliding pids and clocks 5 s apart,
    /// merged: four processes, every message matched, the critical path of the job
    /// recorded on one machine, and `work` one procedure of both nodes.
    #[test]
    fn two_nodes_recorded_apart_merge_into_the_job() {
        let dir = std::env::temp_dir().join(format!("tracer-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.trace"), dir.join("b.trace"));
        let one_machine = write_two_node_ring_apart([&a, &b]);
        let out = dir.join("all.trace");
        let merged = merge(&[a.clone(), b.clone()], &out).unwrap();
        assert_eq!(merged.nodes, two_nodes());
        let whole = read_all(&out).unwrap();
        let items = whole.items;
        let pids: BTreeSet<u32> = items
            .iter()
            .filter_map(|i| match i {
                Item::Process(p) => Some(p.pid),
                _ => None,
            })
            .collect();
        let on_b = |pid| GlobalId::new(NodeId(1), pid).0;
        assert_eq!(pids, BTreeSet::from([100, 101, on_b(100), on_b(101)]));
        let probes: Vec<u16> = items
            .iter()
            .filter_map(|i| match i {
                Item::Probe(p) => Some(p.id),
                _ => None,
            })
            .collect();
        assert_eq!(probes, [0], "one `work` procedure");
        let records = items
            .iter()
            .filter(|i| matches!(i, Item::Record(_)))
            .count() as u64;
        assert_eq!(merged.events, records);
        assert_eq!(whole.trailer.events_total, records);

        let profile = |items: &[Item]| {
            Profile::new(
                &analyze(items, ClockKind::Cpu),
                ClockKind::Cpu,
                0,
                &HashMap::new(),
            )
        };
        let (one, two) = (profile(&one_machine), profile(&items));
        assert_eq!(two.messages.matched, 12, "{:?}", two.messages);
        assert_eq!(two.messages.unmatched, 0);
        assert_eq!(two.critical_path.length_ns, one.critical_path.length_ns);
        assert_eq!(two.procedures.len(), 1);
        assert_eq!(
            two.procedures[0].cpu_ns, one.procedures[0].cpu_ns,
            "the work of both nodes' ranks"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merging_refuses_what_it_cannot_merge() {
        let dir = std::env::temp_dir().join(format!("tracer-merge-no-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.trace"), dir.join("b.trace"));
        write_two_node_ring_apart([&a, &b]);
        let out = dir.join("all.trace");
        merge(&[a.clone(), b.clone()], &out).unwrap();
        let err = |inputs: &[PathBuf]| merge(inputs, &dir.join("x.trace")).unwrap_err();
        assert!(matches!(
            err(std::slice::from_ref(&a)),
            MergeError::TooFew(1)
        ));
        assert!(matches!(
            err(&[a.clone(), a.clone()]),
            MergeError::Twice(p) if p == a
        ));
        assert!(matches!(
            err(&[out.clone(), b.clone()]),
            MergeError::NotOneNode { nodes: 2, .. }
        ));
        let missing = dir.join("missing.trace");
        assert!(matches!(
            err(&[a.clone(), missing.clone()]),
            MergeError::Read { path, .. } if path == missing
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
