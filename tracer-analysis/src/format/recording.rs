//! The recording file (`tracer record -o FILE`): a versioned stream of chunks. The format
//! is documented in docs/recording-format.md.
//!
//! ```text
//! "CPTRACE\0" | version: u32 | reserved: u32 | chunk*      (little endian)
//! chunk = tag: u32 | len: u32 | payload[len]
//! ```
//! A complete file ends with an END chunk; a file without one was cut short.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::format::calls::Flavor;
use crate::format::records::{self, DecodeError, Record};
use crate::format::ProcessInfo;

pub const MAGIC: &[u8; 8] = b"CPTRACE\0";
pub const VERSION: u32 = 2;

const TAG_META: u32 = 1;
const TAG_EVENTS: u32 = 2;
const TAG_PROCESS: u32 = 3;
const TAG_PROBE: u32 = 4;
const TAG_END: u32 = 5;

/// Largest chunk a reader accepts (a corrupt length must not allocate gigabytes).
const MAX_CHUNK: u32 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot open {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error("{0} is being written by another tracer")]
    Busy(PathBuf),
    #[error("I/O error")]
    Io(#[from] io::Error),
    #[error("not a recording (bad magic)")]
    BadMagic,
    #[error("unsupported recording version {0} (this tracer reads version {VERSION})")]
    Version(u32),
    #[error("recording is truncated: {0}")]
    Truncated(&'static str),
    #[error("recording is corrupt: {0}")]
    Corrupt(String),
    #[error("recording is corrupt at byte {offset}")]
    BadRecord { offset: u64, source: DecodeError },
}

/// Facts about the session, written first.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RecordingMeta {
    pub tracer_version: String,
    pub hostname: String,
    /// The traced command (`-- COMMAND`), empty otherwise.
    pub command: Vec<String>,
    /// PIDs given with `--pid`.
    pub pids: Vec<u32>,
    pub system_wide: bool,
    /// Wall clock (Unix ns) and probe clock (CLOCK_MONOTONIC ns) read together at start.
    pub start_unix_ns: u128,
    pub start_monotonic_ns: u64,
    pub libraries: Vec<LibraryInfo>,
}

/// An MPI or PVM library the probes were attached to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LibraryInfo {
    pub path: String,
    pub flavor: Flavor,
    /// Open MPI: virtual address of `ompi_mpi_comm_world` (MPI_COMM_WORLD = bias + this).
    pub comm_world_vaddr: Option<u64>,
    /// Open MPI: virtual address of `ompi_mpi_comm_self` (absent in older recordings).
    #[serde(default)]
    pub comm_self_vaddr: Option<u64>,
}

/// A selected-procedure probe (`--func`): events of kind FUNC_* carry its id.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FunctionProbe {
    pub id: u16,
    pub symbol: String,
    pub path: String,
    pub vaddr: u64,
}

/// Totals, written last.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Trailer {
    pub events_total: u64,
    pub events_lost: u64,
    /// How often the probes failed, by reason name (`tracer_common::ProbeFailure`; only
    /// those that happened): absent when nothing failed, and in older recordings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub probe_failures: BTreeMap<String, u64>,
}

/// What a reader yields, in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Record(Record),
    Process(ProcessInfo),
    Probe(FunctionProbe),
}

pub struct RecordingWriter {
    out: BufWriter<File>,
    batch: Vec<u8>,
}

impl RecordingWriter {
    pub fn create(path: &Path, meta: &RecordingMeta) -> Result<Self, RecordingError> {
        let open_err = |source| RecordingError::Open {
            path: path.to_path_buf(),
            source,
        };
        // Lock before truncating: two sessions writing one file would interleave records.
        // Readable by its owner only: it holds command lines, paths and host names.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(open_err)?;
        file.try_lock()
            .map_err(|_| RecordingError::Busy(path.to_path_buf()))?;
        file.set_len(0).map_err(open_err)?;
        let mut w = RecordingWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            batch: Vec::with_capacity(1 << 20),
        };
        w.out.write_all(MAGIC)?;
        w.out.write_all(&VERSION.to_le_bytes())?;
        w.out.write_all(&0u32.to_le_bytes())?;
        w.json_chunk(TAG_META, meta)?;
        Ok(w)
    }

    /// Appends one raw record (already validated by the decoder).
    pub fn record(&mut self, raw: &[u8]) -> Result<(), RecordingError> {
        self.batch.extend_from_slice(raw);
        if self.batch.len() >= (1 << 20) {
            self.flush_batch()?;
        }
        Ok(())
    }

    pub fn process(&mut self, info: &ProcessInfo) -> Result<(), RecordingError> {
        self.flush_batch()?;
        self.json_chunk(TAG_PROCESS, info)
    }

    pub fn probe(&mut self, probe: &FunctionProbe) -> Result<(), RecordingError> {
        self.flush_batch()?;
        self.json_chunk(TAG_PROBE, probe)
    }

    pub fn finish(mut self, trailer: &Trailer) -> Result<(), RecordingError> {
        self.flush_batch()?;
        self.json_chunk(TAG_END, trailer)?;
        self.out.flush()?;
        self.out.get_ref().sync_all()?;
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<(), RecordingError> {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.chunk(TAG_EVENTS, &batch)?;
            self.batch = batch;
            self.batch.clear();
        }
        Ok(())
    }

    fn json_chunk<T: Serialize>(&mut self, tag: u32, value: &T) -> Result<(), RecordingError> {
        let bytes =
            serde_json::to_vec(value).map_err(|e| RecordingError::Corrupt(e.to_string()))?;
        self.chunk(tag, &bytes)
    }

    fn chunk(&mut self, tag: u32, payload: &[u8]) -> Result<(), RecordingError> {
        self.out.write_all(&tag.to_le_bytes())?;
        self.out.write_all(&(payload.len() as u32).to_le_bytes())?;
        self.out.write_all(payload)?;
        Ok(())
    }
}

/// Streams a recording. `meta` is read on open; `next_item` yields the rest; the trailer
/// is available once the END chunk was read.
pub struct RecordingReader {
    input: BufReader<File>,
    pub meta: RecordingMeta,
    pub trailer: Option<Trailer>,
    offset: u64,
    pending: std::collections::VecDeque<Item>,
}

impl RecordingReader {
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let file = File::open(path).map_err(|source| RecordingError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let mut head = [0u8; 16];
        read_exact_or(&mut input, &mut head, "no file header")?;
        if &head[..8] != MAGIC {
            return Err(RecordingError::BadMagic);
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(RecordingError::Version(version));
        }
        let mut r = RecordingReader {
            input,
            meta: RecordingMeta::default(),
            trailer: None,
            offset: 16,
            pending: Default::default(),
        };
        match r.chunk()? {
            Some((TAG_META, payload)) => r.meta = json(&payload, "meta")?,
            Some(_) => return Err(RecordingError::Corrupt("first chunk is not META".into())),
            None => return Err(RecordingError::Truncated("no META chunk")),
        }
        Ok(r)
    }

    /// The next item, or None after the END chunk. A file that ends before END is an error.
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Ok(Some(item));
            }
            if self.trailer.is_some() {
                return Ok(None);
            }
            let start = self.offset;
            let Some((tag, payload)) = self.chunk()? else {
                return Err(RecordingError::Truncated(
                    "no END chunk: the recording was cut short",
                ));
            };
            match tag {
                TAG_EVENTS => {
                    let mut at = 0usize;
                    while at < payload.len() {
                        let bad = |source| RecordingError::BadRecord {
                            offset: start + 8 + at as u64,
                            source,
                        };
                        let len = records::record_len(&payload[at..]).map_err(bad)?;
                        if at + len > payload.len() {
                            return Err(RecordingError::Corrupt(format!(
                                "record at byte {} runs past its chunk",
                                start + 8 + at as u64
                            )));
                        }
                        let rec = records::decode(&payload[at..at + len]).map_err(bad)?;
                        self.pending.push_back(Item::Record(rec));
                        at += len;
                    }
                }
                TAG_PROCESS => self
                    .pending
                    .push_back(Item::Process(json(&payload, "process")?)),
                TAG_PROBE => self
                    .pending
                    .push_back(Item::Probe(json(&payload, "probe")?)),
                TAG_END => self.trailer = Some(json(&payload, "end")?),
                TAG_META => return Err(RecordingError::Corrupt("second META chunk".into())),
                other => {
                    return Err(RecordingError::Corrupt(format!(
                        "unknown chunk tag {other}"
                    )))
                }
            }
        }
    }

    fn chunk(&mut self) -> Result<Option<(u32, Vec<u8>)>, RecordingError> {
        let mut head = [0u8; 8];
        let n = read_up_to(&mut self.input, &mut head)?;
        if n == 0 {
            return Ok(None);
        }
        if n < 8 {
            return Err(RecordingError::Truncated("partial chunk header"));
        }
        let tag = u32::from_le_bytes(head[..4].try_into().unwrap());
        let len = u32::from_le_bytes(head[4..].try_into().unwrap());
        if len > MAX_CHUNK {
            return Err(RecordingError::Corrupt(format!(
                "chunk of {len} bytes at byte {}",
                self.offset
            )));
        }
        let mut payload = vec![0u8; len as usize];
        read_exact_or(&mut self.input, &mut payload, "partial chunk")?;
        self.offset += 8 + len as u64;
        Ok(Some((tag, payload)))
    }
}

fn json<T: for<'de> Deserialize<'de>>(payload: &[u8], what: &str) -> Result<T, RecordingError> {
    serde_json::from_slice(payload)
        .map_err(|e| RecordingError::Corrupt(format!("{what} chunk: {e}")))
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn read_exact_or(
    r: &mut impl Read,
    buf: &mut [u8],
    what: &'static str,
) -> Result<(), RecordingError> {
    if read_up_to(r, buf)? < buf.len() {
        return Err(RecordingError::Truncated(what));
    }
    Ok(())
}

/// Reads a whole recording into memory.
pub fn read_all(path: &Path) -> Result<(RecordingMeta, Vec<Item>, Trailer), RecordingError> {
    let mut reader = RecordingReader::open(path)?;
    let mut items = Vec::new();
    while let Some(item) = reader.next_item()? {
        items.push(item);
    }
    let trailer = reader.trailer.take().unwrap_or_default();
    Ok((reader.meta, items, trailer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{kind, ExitRecord};

    fn sample(path: &Path) -> Vec<u8> {
        let meta = RecordingMeta {
            hostname: "h".into(),
            ..Default::default()
        };
        let mut w = RecordingWriter::create(path, &meta).unwrap();
        let mut e = ExitRecord::default();
        e.header.kind = kind::EXIT;
        e.header.tid = 42;
        e.group_dead = 1;
        w.record(&Record::Exit(e).to_bytes()).unwrap();
        w.process(&ProcessInfo {
            pid: 42,
            ..Default::default()
        })
        .unwrap();
        w.finish(&Trailer {
            events_total: 1,
            events_lost: 0,
            ..Default::default()
        })
        .unwrap();
        std::fs::read(path).unwrap()
    }

    /// A trailer without failures is the same JSON as before they were counted, and
    /// older recordings' trailers read.
    #[test]
    fn trailers_without_failures_read_and_write_as_before() {
        let old = br#"{"events_total":5,"events_lost":1}"#;
        let t: Trailer = serde_json::from_slice(old).unwrap();
        assert_eq!(
            t,
            Trailer {
                events_total: 5,
                events_lost: 1,
                probe_failures: BTreeMap::new(),
            }
        );
        assert_eq!(serde_json::to_vec(&t).unwrap(), old);
        let failed = Trailer {
            probe_failures: [("ring_full".to_string(), 1)].into(),
            ..t
        };
        let json = serde_json::to_vec(&failed).unwrap();
        assert_eq!(serde_json::from_slice::<Trailer>(&json).unwrap(), failed);
    }

    #[test]
    fn writes_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("rec-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.trace");
        sample(&path);
        let (meta, items, trailer) = read_all(&path).unwrap();
        assert_eq!(meta.hostname, "h");
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0], Item::Record(Record::Exit(e)) if e.header.tid == 42));
        assert!(matches!(&items[1], Item::Process(p) if p.pid == 42));
        assert_eq!(trailer.events_total, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_and_corrupt_files_are_errors() {
        let dir = std::env::temp_dir().join(format!("rec-test2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.trace");
        let bytes = sample(&path);
        // Every proper prefix is truncated or corrupt, never accepted.
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(read_all(&path).is_err(), "prefix of {cut} bytes accepted");
        }
        let mut bad = bytes.clone();
        bad[0] = b'X';
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read_all(&path), Err(RecordingError::BadMagic)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
