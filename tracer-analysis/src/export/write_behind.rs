//! Writing an export's bytes on a thread of its own. Copying a large export into the page
//! cache is kernel time of the thread that calls `write`: 27 % of the Chrome export's
//! samples on the throughput recording (486 MB, perf). Handed to another thread, it
//! overlaps the formatting of what follows.

use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Bytes gathered before they are handed over.
const CHUNK: usize = 1 << 20;

/// Bytes a formatter gathers before it writes them to a [`WriteBehind`]: small enough to
/// stay in the core's cache until they are copied into the chunk. A 1 MiB buffer made
/// every byte go through memory twice (the copy was 6 % of the Chrome and Perfetto
/// exports' formatting thread).
pub(crate) const FORMATTED_BYTES: usize = 32 << 10;

/// Chunks waiting for the writing thread at most: memory stays bounded when the disk is
/// slower than the formatting.
const CHUNKS_AHEAD: usize = 4;

/// A writer that hands `out` its bytes in chunks of [`CHUNK`] on another thread, in
/// order. An error of `out` is returned by the next write after it, or by
/// [`WriteBehind::finish`].
pub struct WriteBehind<W: Write + Send + 'static> {
    buf: Vec<u8>,
    /// To the writing thread; None once finished.
    full: Option<SyncSender<Vec<u8>>>,
    /// Chunks written, back for reuse (no allocation and page faults per chunk).
    empty: Receiver<Vec<u8>>,
    writing: Option<JoinHandle<io::Result<W>>>,
}

impl<W: Write + Send + 'static> WriteBehind<W> {
    pub fn new(mut out: W) -> Self {
        let (full, chunks) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD);
        let (give_back, empty) = sync_channel(CHUNKS_AHEAD + 1);
        let writing = std::thread::spawn(move || {
            for mut chunk in chunks {
                out.write_all(&chunk)?;
                chunk.clear();
                // The other side may have stopped (it returns an error): not ours.
                let _ = give_back.try_send(chunk);
            }
            out.flush()?;
            Ok(out)
        });
        WriteBehind {
            buf: Vec::with_capacity(CHUNK),
            full: Some(full),
            empty,
            writing: Some(writing),
        }
    }

    /// Hands the buffer to the writing thread; a failed write there ends that thread,
    /// and its error is returned here.
    fn hand_over(&mut self) -> io::Result<()> {
        let next = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let chunk = std::mem::replace(&mut self.buf, next);
        let sent = match &self.full {
            Some(full) => full.send(chunk).is_ok(),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            self.join().map(|_| ())?;
            Err(io::Error::other("the export's writing thread has stopped"))
        }
    }

    /// Ends the writing thread: what it wrote to, or its error.
    fn join(&mut self) -> io::Result<W> {
        self.full = None;
        match self.writing.take() {
            Some(writing) => match writing.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            None => Err(io::Error::other("the export's writing thread has stopped")),
        }
    }

    /// Writes what is left, waits for the writing thread and returns `out`, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.buf.is_empty() {
            self.hand_over()?;
        }
        self.join()
    }
}

impl<W: Write + Send + 'static> Write for WriteBehind<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.hand_over()?;
        }
        Ok(bytes.len())
    }

    /// Nothing to do: the bytes are written in order by the writing thread, and
    /// [`WriteBehind::finish`] waits for them.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write + Send + 'static> Drop for WriteBehind<W> {
    /// An export that failed drops its writer: the thread ends with the channel.
    fn drop(&mut self) {
        self.full = None;
        if let Some(writing) = self.writing.take() {
            let _ = writing.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that fails after `limit` bytes.
    #[derive(Debug)]
    struct Limited {
        bytes: Vec<u8>,
        limit: usize,
    }

    impl Write for Limited {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.bytes.len() + b.len() > self.limit {
                return Err(io::Error::other("full"));
            }
            self.bytes.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_every_byte_in_order() {
        let mut w = WriteBehind::new(Vec::new());
        let mut expected = Vec::new();
        for i in 0..20_000u32 {
            let line = format!("{i} {}\n", "x".repeat((i % 700) as usize));
            w.write_all(line.as_bytes()).unwrap();
            expected.extend_from_slice(line.as_bytes());
        }
        assert!(expected.len() > 2 * CHUNK);
        assert_eq!(w.finish().unwrap(), expected);
    }

    #[test]
    fn an_error_of_the_writer_is_returned() {
        let mut w = WriteBehind::new(Limited {
            bytes: Vec::new(),
            limit: CHUNK + 10,
        });
        let block = vec![7u8; 4096];
        let failed = (0..10 * CHUNK / block.len()).find_map(|_| w.write_all(&block).err());
        let e = match failed {
            Some(e) => e,
            None => w.finish().unwrap_err(),
        };
        assert_eq!(e.to_string(), "full");
    }
}
