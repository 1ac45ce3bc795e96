//! The second pass's records put in time order on a thread of their own. The reorder
//! window and the summary were 12 % of the Chrome and Perfetto exports' samples on the
//! formatting thread, which is the one the export waits for; the machine has another
//! core.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::analysis::reorder::ReorderBuffer;
use crate::analysis::REORDER_WINDOW_NS;
use crate::format::recording::{Item, RecordingError};
use crate::format::records::Record;
use crate::format::summary::{Summary, SummaryBuilder};

/// What the timeline reads, in the order it reads it: the records as the reorder window
/// releases them, and each probe's name where its item was read (so that a record
/// released later finds every name read before it, as when the window ran inline).
pub(crate) enum Ordered {
    Record(Record),
    ProbeName { id: u16, symbol: String },
}

/// Entries handed over at a time: one hand-over per record would cost more than
/// ordering it.
const BATCH: usize = 4096;

/// Batches ordered ahead of the timeline at most (a few MB).
const BATCHES_AHEAD: usize = 4;

/// What the ordering thread sends: entries in order, then the recording's summary or
/// the error that stopped the reading.
pub(crate) enum Batch {
    Entries(Vec<Ordered>),
    End(Box<Summary>),
    Failed(RecordingError),
}

/// Orders `items` into `send`, in batches; stops early when the receiver is gone (the
/// timeline failed to write).
pub(crate) fn order(
    items: impl IntoIterator<Item = Result<Item, RecordingError>>,
    send: &SyncSender<Batch>,
) {
    let mut summary = SummaryBuilder::new();
    // The same reorder window as the analysis: the records reach the timeline in the
    // order the graph's vertices were made.
    let mut reorder = ReorderBuffer::new(REORDER_WINDOW_NS);
    let mut batch = Vec::with_capacity(BATCH);
    for item in items {
        let item = match item {
            Ok(item) => item,
            Err(e) => {
                let _ = send.send(Batch::Failed(e));
                return;
            }
        };
        summary.item(&item);
        match item {
            Item::Record(r) => {
                reorder.push(&r);
                reorder.ready(|r| batch.push(Ordered::Record(r)));
            }
            Item::Probe(p) => batch.push(Ordered::ProbeName {
                id: p.id,
                symbol: p.symbol,
            }),
            Item::Process(_) => {}
        }
        if batch.len() >= BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if send.send(Batch::Entries(full)).is_err() {
                return;
            }
        }
    }
    reorder.flush(|r| batch.push(Ordered::Record(r)));
    if !batch.is_empty() && send.send(Batch::Entries(batch)).is_err() {
        return;
    }
    let _ = send.send(Batch::End(Box::new(summary.finish(0))));
}

/// A channel for [`order`]'s batches.
pub(crate) fn channel() -> (SyncSender<Batch>, Receiver<Batch>) {
    sync_channel(BATCHES_AHEAD)
}
