//! The collector's side of a job across nodes (docs/multinode.md): the agents' links,
//! each node's records moved onto this tracer's ids and clock as they arrive and handed
//! to the sink's merge, and what each node reports of its losses.

use std::time::Duration;

use super::memory::MemoryLimit;
use super::sink::Sink;
use super::{ClockCorrection, Collecting, SessionError};
use crate::remote::{
    measure_period, ClockFit, ClockOffset, Collector, LinkEvent, RemoteNode, TraceRequest, WireItem,
};
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::node::{NodeInfo, Relocation};
use tracer_analysis::recording::{Item, Trailer};
use tracer_analysis::records::{self, Record};

/// How one node's stream ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NodeEnd {
    /// Its last batch came.
    Ended,
    /// Its link failed first: what it traced after is missing.
    Lost(String),
}

/// What the collector knows of one agent's node.
struct RemoteNodeState {
    address: String,
    hostname: String,
    /// Its ids made this job's, its clock moved onto this tracer's.
    relocation: Relocation,
    /// Its clock's measurements, when the relocation follows them (not for a node on
    /// this kernel, whose clock is ours).
    clock: Option<ClockFit>,
    /// The latest time of the node's clock moved so far: where a new measurement
    /// steers from.
    latest_ns: u64,
    /// Its loss and failure counts, as it last sent them.
    counts: Trailer,
    end: Option<NodeEnd>,
}

/// The agents of a collector's session.
pub(super) struct RemoteNodes {
    collector: Collector,
    nodes: Vec<RemoteNodeState>,
    /// Whether the agents trace every process of their nodes (`--all`): no job.
    every_process: bool,
    /// Whether they were told the job.
    job_told: bool,
}

/// A node's clock known less well than this is warned about: a message between nodes
/// takes tens of microseconds on a LAN, so a receive may then seem to end before its send
/// began (counted unmatched; docs/multinode.md, "Clocks").
const CLOCK_WARN_NS: u64 = 1_000_000;

/// How long the session waits, once it stops, for the agents' last batches.
pub(super) const LAST_BATCH_WAIT: Duration = Duration::from_secs(5);

/// How a node's records are moved onto this node's clock.
struct ClockHandling {
    /// The shift at the start.
    shift_ns: i64,
    /// Whether its clock is measured again and its drift followed.
    follow: bool,
}

fn clock_handling(correction: ClockCorrection, this_boot: &str, n: &RemoteNode) -> ClockHandling {
    let ours = !this_boot.is_empty()
        && n.node.boot_id == this_boot
        && n.clock.offset_ns.unsigned_abs() <= n.clock.round_trip_ns / 2;
    let (shift_ns, follow) = match correction {
        ClockCorrection::None => (0, false),
        // One kernel (containers, the lab's namespaces): one CLOCK_MONOTONIC, and the
        // measurement agrees with 0 within its error, so 0 exactly, for good, and never
        // measured again. A measured offset tens of microseconds off put the last rank's
        // entry into a collective after the others' exits: incomplete.
        _ if ours => (0, false),
        ClockCorrection::Offset => (n.clock.offset_ns, false),
        ClockCorrection::Drift => (n.clock.offset_ns, true),
    };
    ClockHandling { shift_ns, follow }
}

impl RemoteNodes {
    /// Connects to every agent and has it start tracing (before the command starts, so
    /// that the ranks it launches on other nodes are traced from their first call).
    pub(super) fn connect(
        collecting: &Collecting,
        request: &TraceRequest,
    ) -> Result<RemoteNodes, SessionError> {
        let this_boot = crate::probes::this_node_now().boot_id;
        let correction = collecting.clock_correction;
        let collector = Collector::connect(&collecting.agents, request, |n| {
            clock_handling(correction, &this_boot, n).follow
        })?;
        let nodes = collector
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ClockHandling { shift_ns, follow } = clock_handling(correction, &this_boot, n);
                let relocation = Relocation::measured(1 + i as u32, shift_ns)?;
                let clock = follow.then(|| {
                    let mut fit = ClockFit::default();
                    fit.add(n.clock);
                    fit
                });
                log::info!(
                    "node {} ({}): clock offset {} ns, measured over a {} ns round trip",
                    n.node.hostname,
                    n.address,
                    n.clock.offset_ns,
                    n.clock.round_trip_ns
                );
                Ok(RemoteNodeState {
                    address: n.address.clone(),
                    hostname: n.node.hostname.clone(),
                    relocation,
                    clock,
                    latest_ns: n.clock.agent_ns,
                    counts: Trailer::default(),
                    end: None,
                })
            })
            .collect::<Result<Vec<_>, SessionError>>()?;
        Ok(RemoteNodes {
            collector,
            nodes,
            every_process: request.every_process,
            job_told: false,
        })
    }

    /// The agents' nodes, in the node table's order after this one.
    pub(super) fn node_infos(&self) -> Vec<NodeInfo> {
        self.collector
            .nodes()
            .iter()
            .map(|n| n.node.clone())
            .collect()
    }

    /// The next batch or failure of any link; None once every link is done.
    pub(super) async fn next_event(&mut self) -> Option<LinkEvent> {
        self.collector.events().recv().await
    }

    /// Whether every node's stream has ended (or failed).
    pub(super) fn all_done(&self) -> bool {
        self.nodes.iter().all(|n| n.end.is_some())
    }

    /// Whether every node's stream ended with its last batch (no node lost).
    pub(super) fn all_ended(&self) -> bool {
        self.nodes.iter().all(|n| n.end == Some(NodeEnd::Ended))
    }

    /// Asks every agent to end its session; its last batches follow.
    pub(super) fn stop(&self) {
        self.collector.stop();
    }

    /// Tells the agents the job, the first time it is known (`job`: the first a
    /// process named), unless the session traces every process (`--all`).
    pub(super) fn tell_job(&mut self, job: Option<&str>) {
        let (Some(job), false, false) = (job, self.job_told, self.every_process) else {
            return;
        };
        log::info!("the job is {job}: the agents leave out other jobs' processes");
        self.collector.tell_job(job);
        self.job_told = true;
    }

    /// Takes one event of a link: a batch's items into the sink's merge, on this
    /// tracer's ids and clock (its records dropped and counted past the memory limit,
    /// as this node's are); a failure said at once, by node.
    pub(super) fn take(
        &mut self,
        event: LinkEvent,
        sink: &mut Sink,
        memory: &mut MemoryLimit,
    ) -> Result<(), SessionError> {
        match event {
            LinkEvent::Batch { node, batch } => {
                let state = &mut self.nodes[node];
                let merge_node = 1 + node;
                for item in batch.items {
                    match item {
                        WireItem::Records(bytes) => {
                            for_each_record(&bytes, |mut rec| {
                                state.latest_ns = state.latest_ns.max(rec.header().ts_ns);
                                if memory.over() {
                                    memory.dropped += 1;
                                    return;
                                }
                                state.relocation.record(&mut rec);
                                sink.take_from_node(merge_node, Item::Record(rec));
                            })?;
                        }
                        WireItem::Process(mut p) => {
                            state.relocation.process(&mut p);
                            sink.take_from_node(merge_node, Item::Process(p));
                        }
                        WireItem::Probe(p) => sink.take_from_node(merge_node, Item::Probe(p)),
                        WireItem::Counts(t) => state.counts = t,
                    }
                }
                state.latest_ns = state.latest_ns.max(batch.watermark_ns);
                sink.node_read_up_to(merge_node, state.relocation.time(batch.watermark_ns));
                if batch.last {
                    state.end = Some(NodeEnd::Ended);
                    sink.node_closed(merge_node);
                }
            }
            LinkEvent::Failed { node, error } => {
                let state = &mut self.nodes[node];
                if state.end.is_none() {
                    log::warn!(
                        "node {} ({}) lost: {error}; what it sent so far is kept, the rest of \
                         the job is analyzed without it",
                        state.hostname,
                        state.address
                    );
                    state.end = Some(NodeEnd::Lost(error));
                }
                sink.node_closed(1 + node);
            }
            LinkEvent::Clock { node, offset } => {
                self.nodes[node].follow(offset);
                return Ok(());
            }
        }
        sink.release(false)
    }

    /// Measures every node's clock again, now that its session ended, and says how the
    /// records were moved: the offset at the start and the end, and for a node whose
    /// drift was followed, the fitted drift and how far the line may be off (a warning
    /// past `CLOCK_WARN_NS`, where messages between nodes may look received before sent).
    pub(super) fn tell_clocks(&self) {
        let start = self.collector.nodes();
        for ((now, then), n) in self
            .collector
            .measure_clocks()
            .into_iter()
            .zip(start)
            .zip(&self.nodes)
        {
            match now {
                Ok(now) => log::info!(
                    "node {} ({}): clock offset {} ns at the end, {} ns at the start \
                     (round trips {} and {} ns); its last records were moved by {} ns",
                    n.hostname,
                    n.address,
                    now.offset_ns,
                    then.clock.offset_ns,
                    now.round_trip_ns,
                    then.clock.round_trip_ns,
                    n.relocation.shift_at(n.latest_ns)
                ),
                Err(e) => log::info!(
                    "node {} ({}): its clock could not be measured again: {e}",
                    n.hostname,
                    n.address
                ),
            }
            let Some(line) = n.clock.as_ref().and_then(ClockFit::line) else {
                continue;
            };
            let said = format!(
                "node {} ({}): its clock runs {:+.1} ppm against ours, followed; within {} us \
                 ({} measurements, {} disturbed ones left out)",
                n.hostname,
                n.address,
                // collector = agent + offset: a clock that runs slow has a growing offset.
                -line.drift * 1e6,
                line.uncertainty_ns / 1000,
                line.samples,
                n.clock.as_ref().map_or(0, ClockFit::disturbed),
            );
            if line.uncertainty_ns > CLOCK_WARN_NS {
                log::warn!("{said}: messages between nodes may look received before sent");
            } else {
                log::info!("{said}");
            }
        }
    }

    /// A node whose stream never ended is lost too (it did not answer the stop in time).
    pub(super) fn give_up_on_the_rest(&mut self, sink: &mut Sink) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if n.end.is_none() {
                log::warn!(
                    "node {} ({}) sent no last batch within {} s of the stop; what it sent so \
                     far is kept",
                    n.hostname,
                    n.address,
                    LAST_BATCH_WAIT.as_secs()
                );
                n.end = Some(NodeEnd::Lost("no last batch".into()));
                sink.node_closed(1 + i);
            }
        }
    }

    /// Adds what the nodes counted (their lost records and probe failures, a lost link
    /// as `node_lost`) to this tracer's counts.
    pub(super) fn add_counts(&self, failures: &mut FailureCounts) {
        for n in &self.nodes {
            for unknown in failures.add_named(&n.counts.probe_failures) {
                log::warn!(
                    "node {} reported failures of a kind this tracer does not know: {unknown}",
                    n.hostname
                );
            }
            if matches!(n.end, Some(NodeEnd::Lost(_))) {
                failures.add(tracer_common::ProbeFailure::NodeLost, 1);
            }
        }
    }
}

impl RemoteNodeState {
    /// Takes a new measurement of the node's clock: from the latest time moved so far
    /// (no jump), the shift now heads for the fitted line, which it meets when the next
    /// measurement is due.
    fn follow(&mut self, offset: ClockOffset) {
        let Some(fit) = &mut self.clock else {
            return;
        };
        fit.add(offset);
        let Some(line) = fit.line() else {
            return;
        };
        // The next measurement's wait: the connection's was the first added.
        let period_ns = measure_period(fit.added() - 1).as_nanos() as u64;
        let anchor = self.latest_ns;
        let now = self.relocation.shift_at(anchor) as f64;
        let target = line.offset_at(anchor + period_ns);
        let rate_ppb = (target - now) / period_ns as f64 * 1e9;
        self.relocation = self.relocation.steered(anchor, rate_ppb.round() as i64);
    }
}

/// Calls `f` with each record of `bytes` (records back to back, as a recording holds
/// them), decoded.
fn for_each_record(bytes: &[u8], mut f: impl FnMut(Record)) -> Result<(), SessionError> {
    let mut at = 0;
    while at < bytes.len() {
        let kind = records::peek_kind(&bytes[at..])?;
        let len =
            tracer_common::record_size(kind).ok_or(records::DecodeError::UnknownKind(kind))?;
        let end = at + len;
        let raw = bytes.get(at..end).ok_or(records::DecodeError::WrongSize {
            kind,
            got: bytes.len() - at,
            want: len,
        })?;
        f(records::decode(raw)?);
        at = end;
    }
    Ok(())
}
