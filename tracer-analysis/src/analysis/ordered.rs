//! A pass over a recording with its records put in time order on a thread of their own:
//! that thread reads, decodes and runs the reorder window while the caller's thread does
//! what the pass is for (build the graph, write a timeline), the part the pass waits
//! for. On that thread, the window alone was 7-8 % of the Chrome export's samples in
//! its first pass, and the window and the summary 12 % in its second; the machine has
//! another core.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use super::reorder::{ReorderBuffer, REORDER_WINDOW_NS};
use crate::format::recording::{Item, ItemSource, RecordingError, Trailer};
use crate::format::records::Record;
use crate::format::summary::{Summary, SummaryBuilder};

/// What the caller takes, in the order the analysis applies it ([`super::Pipeline`]):
/// the records as the reorder window releases them, and each fact (a process, a probe)
/// where it was read, before the records that were still waiting in the window.
pub(crate) enum Ordered {
    Record(Record),
    Fact(Item),
}

/// What the pass read besides its entries.
pub(crate) struct Ending {
    /// The recording's totals (the events the probes lost).
    pub(crate) totals: Trailer,
    /// The recording's summary, when asked for.
    pub(crate) summary: Option<Summary>,
}

/// Entries handed over at a time: one hand-over per record would cost more than
/// ordering it.
const BATCH: usize = 4096;

/// Batches ordered ahead of the caller at most (a few MB).
const BATCHES_AHEAD: usize = 4;

/// What the ordering thread sends: entries in order, then the end or the error that
/// stopped the reading.
enum Batch {
    Entries(Vec<Ordered>),
    End(Box<Ending>),
    Failed(RecordingError),
}

/// Reads `source` to its end on a new thread, ordering its records, and hands `take`
/// every entry in order on this one; `summarize` also builds the recording's summary
/// there. The first error, the source's or `take`'s, stops the reading and is returned.
pub(crate) fn read_ordered<E: From<RecordingError>>(
    source: &mut (impl ItemSource + Send),
    summarize: bool,
    mut take: impl FnMut(&Ordered) -> Result<(), E>,
) -> Result<Ending, E> {
    let (send, batches) = sync_channel(BATCHES_AHEAD);
    std::thread::scope(|scope| {
        // Named for profilers and debuggers.
        let ordering = std::thread::Builder::new()
            .name("ordering".into())
            .spawn_scoped(scope, move || order(source, summarize, &send))
            .map_err(|e| E::from(RecordingError::Io(e)))?;
        let ending = receive(&batches, &mut take);
        // An early return must let the ordering thread stop: it sends no more.
        drop(batches);
        if let Err(panic) = ordering.join() {
            std::panic::resume_unwind(panic);
        }
        ending.map(|e| e.expect("the ordering thread ends with the totals or an error"))
    })
}

/// The batches, entry by entry into `take`; None if the ordering thread panicked (its
/// join raises the panic).
fn receive<E: From<RecordingError>>(
    batches: &Receiver<Batch>,
    take: &mut impl FnMut(&Ordered) -> Result<(), E>,
) -> Result<Option<Ending>, E> {
    for batch in batches {
        match batch {
            // Taken in place: moving each 184-byte entry out of its batch was a good
            // part of the caller's memmove.
            Batch::Entries(entries) => {
                for entry in &entries {
                    take(entry)?;
                }
            }
            Batch::End(ending) => return Ok(Some(*ending)),
            Batch::Failed(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// Orders `source` into `send`, in batches; stops early when the receiver is gone.
fn order(source: &mut impl ItemSource, summarize: bool, send: &SyncSender<Batch>) {
    let mut summary = summarize.then(SummaryBuilder::new);
    // The same window as the live analysis: the records come out in the order the
    // live engine takes them.
    let mut reorder = ReorderBuffer::new(REORDER_WINDOW_NS);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let item = match source.next_item() {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(e) => {
                let _ = send.send(Batch::Failed(e));
                return;
            }
        };
        if let Some(s) = &mut summary {
            s.item(&item);
        }
        match item {
            Item::Record(r) => {
                reorder.push(&r);
                reorder.ready(|r| batch.push(Ordered::Record(r)));
            }
            fact => batch.push(Ordered::Fact(fact)),
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
    let ending = Ending {
        totals: source.totals(),
        summary: summary.map(|s| s.finish(0)),
    };
    let _ = send.send(Batch::End(Box::new(ending)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::format::recording::ItemIter;
    use crate::format::synth::SyntheticRun;
    use crate::graph::recorded::RecordedGraph;

    /// A ring over 4 ranks with `rounds` rounds, each pair of neighbouring records
    /// swapped: the window has records out of order to put back.
    fn shuffled_ring(rounds: i32) -> Vec<Item> {
        let mut s = SyntheticRun::new(4, &["work"]);
        for round in 0..rounds {
            for r in 0..4 {
                s.compute(r, 7_000 + 900 * r as u64, Some(0));
                s.compute(r, 300, None);
                s.message(r, (r + 1) % 4, round);
            }
        }
        let mut items = s.items;
        for pair in items.chunks_mut(2) {
            if let [Item::Record(_), Item::Record(_)] = pair {
                pair.swap(0, 1);
            }
        }
        items
    }

    fn source(
        items: &[Item],
    ) -> ItemIter<impl Iterator<Item = Result<Item, RecordingError>> + Send + '_> {
        ItemIter(items.iter().cloned().map(Ok))
    }

    #[test]
    fn a_graph_built_from_ordered_entries_is_the_inline_pipelines() {
        let items = shuffled_ring(6);
        let inline = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let ordered = RecordedGraph::read(&mut source(&items), ClockKind::Cpu).unwrap();
        assert!(inline.graph.arcs.len() > 50);
        assert_eq!(
            format!("{:?}", ordered.graph.vertices),
            format!("{:?}", inline.graph.vertices)
        );
        assert_eq!(
            format!("{:?}", ordered.graph.arcs),
            format!("{:?}", inline.graph.arcs)
        );
        assert_eq!(ordered.events, inline.events);
        assert_eq!(
            ordered.processes.get(&103).and_then(|p| p.rank),
            Some(3),
            "the process facts reached the graph"
        );
    }

    #[test]
    fn records_come_out_in_time_order_with_every_fact() {
        let items = shuffled_ring(3);
        let facts = items
            .iter()
            .filter(|i| !matches!(i, Item::Record(_)))
            .count();
        let mut times = Vec::new();
        let mut seen_facts = 0;
        let ending = read_ordered(&mut source(&items), true, |entry| {
            match entry {
                Ordered::Record(r) => times.push(r.header().ts_ns),
                Ordered::Fact(_) => seen_facts += 1,
            }
            Ok::<(), RecordingError>(())
        })
        .unwrap();
        assert_eq!(seen_facts, facts);
        assert_eq!(times.len(), items.len() - facts);
        assert!(times.is_sorted());
        let summary = ending.summary.expect("asked for");
        assert_eq!(summary.processes.len(), 4);
    }

    #[test]
    fn the_callers_error_stops_the_reading() {
        // More entries than the channel holds: the ordering thread would wait forever
        // on a caller that stopped taking them, unless it stops too.
        let items = shuffled_ring(2_000);
        assert!(items.len() > 2 * BATCH * BATCHES_AHEAD);
        let mut taken = 0;
        let result = read_ordered(&mut source(&items), false, |_| {
            taken += 1;
            if taken == 10 {
                return Err(RecordingError::Truncated("the caller's"));
            }
            Ok(())
        });
        assert!(matches!(
            result,
            Err(RecordingError::Truncated("the caller's"))
        ));
        assert_eq!(taken, 10);
    }

    #[test]
    fn the_sources_error_is_returned() {
        let items = shuffled_ring(2);
        let mut cut = ItemIter(
            items
                .iter()
                .take(20)
                .cloned()
                .map(Ok)
                .chain([Err(RecordingError::Truncated("test"))]),
        );
        let result = read_ordered(&mut cut, false, |_| Ok::<(), RecordingError>(()));
        assert!(matches!(result, Err(RecordingError::Truncated("test"))));
    }
}
