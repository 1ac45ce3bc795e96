//! An agent's stream to its collector as a consumer (docs/multinode.md): every item in
//! order, cut into a batch on each tick of the event loop (about every 50 ms) with the
//! node's clock at the cut as its watermark, and the loss and failure counts about once
//! a second and at the end.

use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;

use super::consumer::{ConsumerOutcome, CountsSoFar, RecordConsumer, SessionEnd};
use crate::probes::monotonic_ns;
use crate::remote::{Batch, SkewedClock, WireItem};
use crate::session::SessionError;
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::recording::{FunctionProbe, Trailer};
use tracer_analysis::records::Record;
use tracer_analysis::ProcessInfo;

/// The most record bytes waiting for a link that takes none (the collector stopped
/// reading): past it, records are dropped and counted as the tracer's memory-limit drops.
const MAX_WAITING_BYTES: usize = 64 << 20;
/// How often the counts go out while nothing changes them.
const COUNTS_EVERY: Duration = Duration::from_secs(1);
/// How long the last batch may wait for room on the link.
const LAST_BATCH_WAIT: Duration = Duration::from_secs(5);

pub(super) struct StreamConsumer {
    batches: Sender<Batch>,
    /// Testing only: how the node misreports every time it sends (`tracer agent`'s
    /// hidden clock options), so that a test sees a node whose clock is off.
    clock: SkewedClock,
    /// Items not sent yet, in order.
    waiting: Vec<WireItem>,
    waiting_bytes: usize,
    next_seq: u64,
    counts_sent: Option<Instant>,
    /// Records dropped because the link took nothing for `MAX_WAITING_BYTES`.
    dropped: u64,
}

impl StreamConsumer {
    pub(super) fn new(batches: Sender<Batch>, clock: SkewedClock) -> Self {
        StreamConsumer {
            batches,
            clock,
            waiting: Vec::new(),
            waiting_bytes: 0,
            next_seq: 0,
            counts_sent: None,
            dropped: 0,
        }
    }

    fn shifted(&self, ns: u64) -> u64 {
        self.clock.read(ns)
    }

    fn trailer(&self, events_total: u64, failures: &FailureCounts) -> Trailer {
        let mut failures = *failures;
        failures.add(tracer_common::ProbeFailure::MemoryLimit, self.dropped);
        Trailer {
            events_total,
            events_lost: failures.lost(),
            probe_failures: failures.named(),
        }
    }

    /// The items waiting, as the next batch; the session has read every record written
    /// before `read_up_to_ns`.
    fn cut(&mut self, read_up_to_ns: u64, last: bool) -> Batch {
        let batch = Batch {
            seq: self.next_seq,
            watermark_ns: self.shifted(read_up_to_ns),
            items: std::mem::take(&mut self.waiting),
            last,
        };
        self.waiting_bytes = 0;
        self.next_seq += 1;
        batch
    }
}

impl RecordConsumer for StreamConsumer {
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        self.waiting.push(WireItem::Probe(probe.clone()));
        Ok(())
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        self.waiting.push(WireItem::Process(info.clone()));
        Ok(())
    }

    fn record(&mut self, raw: &[u8], _record: &Record) -> Result<(), SessionError> {
        if self.waiting_bytes >= MAX_WAITING_BYTES {
            self.dropped += 1;
            return Ok(());
        }
        if !matches!(self.waiting.last(), Some(WireItem::Records(_))) {
            self.waiting
                .push(WireItem::Records(Vec::with_capacity(64 << 10)));
        }
        let Some(WireItem::Records(bytes)) = self.waiting.last_mut() else {
            unreachable!("pushed above");
        };
        let at = bytes.len();
        bytes.extend_from_slice(raw);
        if !self.clock.is_exact() {
            // The header's time is the record's first 8 bytes (tracer_common's
            // EventHeader, `ts_ns` first).
            let ts = u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            let shifted = self.clock.read(ts);
            bytes[at..at + 8].copy_from_slice(&shifted.to_ne_bytes());
        }
        self.waiting_bytes += raw.len();
        Ok(())
    }

    /// Sends what waits as one batch, every tick, even empty: its watermark tells the
    /// collector how far this node has been read.
    fn flush_if_due(&mut self, counts: &mut CountsSoFar) -> Result<(), SessionError> {
        if self.counts_sent.is_none_or(|t| t.elapsed() >= COUNTS_EVERY) {
            let failures = (counts.failures)()?;
            let trailer = self.trailer(counts.events_total, &failures);
            self.waiting.push(WireItem::Counts(trailer));
            self.counts_sent = Some(Instant::now());
        }
        // Not the time now: records written since the last read started (the reader
        // may have waited for a CPU since) come in the next batch.
        let batch = self.cut(counts.read_up_to_ns, false);
        match self.batches.try_send(batch) {
            Ok(()) => {}
            // The link is behind: the items wait for the next tick, bounded above.
            Err(TrySendError::Full(batch)) => {
                self.next_seq -= 1;
                self.waiting_bytes = batch
                    .items
                    .iter()
                    .map(|i| match i {
                        WireItem::Records(b) => b.len(),
                        _ => 0,
                    })
                    .sum();
                let mut items = batch.items;
                items.append(&mut self.waiting);
                self.waiting = items;
            }
            // The collector is gone: the agent stops this session.
            Err(TrySendError::Closed(_)) => {}
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        let trailer = self.trailer(end.events_total, end.failures);
        self.waiting.push(WireItem::Counts(trailer));
        let mut batch = self.cut(monotonic_ns(), true);
        let deadline = Instant::now() + LAST_BATCH_WAIT;
        loop {
            match self.batches.try_send(batch) {
                Ok(()) | Err(TrySendError::Closed(_)) => break,
                Err(TrySendError::Full(b)) if Instant::now() < deadline => {
                    batch = b;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TrySendError::Full(_)) => {
                    log::warn!(
                        "the collector took no batch for {} s: the last one is not sent",
                        LAST_BATCH_WAIT.as_secs()
                    );
                    break;
                }
            }
        }
        Ok(ConsumerOutcome::Recorded)
    }
}
