//! Reading a recording on a thread of its own: the file's chunks are read and their
//! records decoded while the caller analyses or writes the items before them. A pass
//! over a large recording spends about a fifth of its time there (perf, the exports of
//! the throughput recording), and the machine has another core.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use super::recording::{Item, ItemSource, RecordingError, RecordingReader, Trailer};

/// Items handed over at a time: one hand-over per item would cost more than decoding it.
const BATCH: usize = 4096;

/// Batches read ahead of the caller at most: memory stays bounded (a few MB), whatever
/// the recording's length.
const BATCHES_AHEAD: usize = 4;

/// What the reading thread sends: items in file order, then the end (the recording's
/// totals) or the error that stopped it.
enum Batch {
    Items(Vec<Item>),
    End(Trailer),
    Failed(RecordingError),
}

/// The items of a [`RecordingReader`], read and decoded ahead on another thread; the
/// same items, errors and totals as the reader's own `next_item` and `totals`.
pub(crate) struct ReadAhead {
    batches: Receiver<Batch>,
    current: std::vec::IntoIter<Item>,
    /// Set once the end was reached.
    totals: Option<Trailer>,
    /// After an error or the end, nothing more comes.
    done: bool,
    reading: Option<JoinHandle<()>>,
}

impl ReadAhead {
    /// Starts reading `reader` (its META chunk already read) on a new thread.
    pub(crate) fn new(mut reader: RecordingReader) -> Self {
        let (send, batches) = sync_channel(BATCHES_AHEAD);
        let reading = std::thread::spawn(move || loop {
            let mut items = Vec::with_capacity(BATCH);
            let last = loop {
                match reader.next_item() {
                    Ok(Some(item)) => {
                        items.push(item);
                        if items.len() == BATCH {
                            break None;
                        }
                    }
                    Ok(None) => break Some(Batch::End(reader.totals())),
                    Err(e) => break Some(Batch::Failed(e)),
                }
            };
            // A caller that stopped early dropped the receiver: stop reading too.
            if !items.is_empty() && send.send(Batch::Items(items)).is_err() {
                return;
            }
            if let Some(last) = last {
                let _ = send.send(last);
                return;
            }
        });
        ReadAhead {
            batches,
            current: Vec::new().into_iter(),
            totals: None,
            done: false,
            reading: Some(reading),
        }
    }

    /// Waits for the reading thread, which has sent its last batch.
    fn finish(&mut self) {
        self.done = true;
        if let Some(reading) = self.reading.take() {
            if let Err(panic) = reading.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl ItemSource for ReadAhead {
    /// The next item, or None at the end; after an error, None.
    fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        loop {
            if let Some(item) = self.current.next() {
                return Ok(Some(item));
            }
            if self.done {
                return Ok(None);
            }
            match self.batches.recv() {
                Ok(Batch::Items(items)) => self.current = items.into_iter(),
                Ok(Batch::End(totals)) => {
                    self.totals = Some(totals);
                    self.finish();
                }
                Ok(Batch::Failed(e)) => {
                    self.finish();
                    return Err(e);
                }
                // The reading thread panicked: its panic is raised here.
                Err(_) => self.finish(),
            }
        }
    }

    /// The recording's totals ([`RecordingReader::totals`]), once `next_item` returned
    /// None.
    fn totals(&self) -> Trailer {
        self.totals.clone().unwrap_or_default()
    }
}

impl Iterator for ReadAhead {
    type Item = Result<Item, RecordingError>;

    /// The items, ending after the first error.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_item().transpose()
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{kind, ExitRecord};

    use super::*;
    use crate::format::recording::{RecordingMeta, RecordingWriter};
    use crate::format::records::Record;
    use crate::format::ProcessInfo;

    /// A recording of `n` exit records with a process every 1,000, complete or cut in
    /// the middle of its last chunk: its bytes.
    fn recording(n: u32, cut: bool) -> Vec<u8> {
        let path = std::env::temp_dir().join(format!("read-ahead-{n}-{}", std::process::id()));
        let mut w = RecordingWriter::create(&path, &RecordingMeta::default()).unwrap();
        for i in 0..n {
            let mut e = ExitRecord::default();
            e.header.kind = kind::EXIT;
            e.header.tid = i;
            e.header.ts_ns = u64::from(i);
            w.record(&Record::Exit(e).to_bytes()).unwrap();
            if i % 1000 == 0 {
                w.process(&ProcessInfo {
                    pid: i,
                    ..Default::default()
                })
                .unwrap();
            }
        }
        w.finish(&Trailer {
            events_total: u64::from(n),
            events_lost: 3,
            ..Default::default()
        })
        .unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        if cut {
            bytes.truncate(bytes.len() - 40);
        }
        bytes
    }

    /// What the reader itself reads: every item, then the totals.
    struct ReadDirectly {
        items: Vec<Item>,
        totals: Trailer,
    }

    fn read_directly(bytes: Vec<u8>) -> ReadDirectly {
        let mut r = RecordingReader::from_bytes(bytes).unwrap();
        let mut items = Vec::new();
        while let Some(item) = r.next_item().unwrap() {
            items.push(item);
        }
        ReadDirectly {
            items,
            totals: r.totals(),
        }
    }

    /// The same items in the same order, and the same totals, as the reader's own:
    /// over many batches, and for a recording cut short.
    #[test]
    fn reads_what_the_reader_reads() {
        for cut in [false, true] {
            let bytes = recording(3 * BATCH as u32 + 17, cut);
            let ReadDirectly {
                items: expected,
                totals,
            } = read_directly(bytes.clone());
            let mut ahead = ReadAhead::new(RecordingReader::from_bytes(bytes).unwrap());
            let mut items = Vec::new();
            while let Some(item) = ahead.next_item().unwrap() {
                items.push(item);
            }
            assert!(items.len() > 3 * BATCH);
            assert_eq!(items, expected);
            assert_eq!(ahead.totals(), totals);
            assert_eq!(ahead.next_item().unwrap(), None);
        }
    }

    /// A caller that stops early lets the reading thread end.
    #[test]
    fn stopping_early_ends_the_reading() {
        let bytes = recording(20 * BATCH as u32, false);
        let mut ahead = ReadAhead::new(RecordingReader::from_bytes(bytes).unwrap());
        assert!(ahead.next_item().unwrap().is_some());
        let reading = ahead.reading.take().unwrap();
        drop(ahead);
        reading.join().unwrap();
    }
}
