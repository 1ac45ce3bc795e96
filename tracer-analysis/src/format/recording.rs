//! The recording file (`tracer record -o FILE`): a versioned stream of chunks. The format
//! is documented in docs/recording-format.md.
//!
//! ```text
//! "CPTRACE\0" | version: u32 | reserved: u32 | chunk*      (little endian)
//! chunk = sync: 8b 1f e6 5a | tag: u32 | len: u32 | crc32(tag, len, payload): u32
//!         | payload[len]                          (version 2: tag | len | payload)
//! ```
//! A complete file ends with an END chunk; a file without one was cut short, and reads up
//! to its last complete chunk. A damaged chunk (bad checksum or framing) is skipped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::format::calls::Flavor;
use crate::format::demangle::demangle;
use crate::format::node::{implied_node, NodeError, NodeInfo, Relocation};
use crate::format::records::{self, DecodeError, Record};
use crate::format::ProcessInfo;

pub const MAGIC: &[u8; 8] = b"CPTRACE\0";
/// Version 4 added the COUNTS chunk; its framing is version 3's. Version 5 added the
/// CALLS_UNWOUND record, which a version 4 reader would refuse mid-file.
pub const VERSION: u32 = 7;
/// What starts every chunk (version 3): a reader that met a damaged chunk finds the next
/// one by it.
pub const SYNC: [u8; 4] = [0x8b, 0x1f, 0xe6, 0x5a];

const TAG_META: u32 = 1;
const TAG_EVENTS: u32 = 2;
const TAG_PROCESS: u32 = 3;
const TAG_PROBE: u32 = 4;
const TAG_END: u32 = 5;
const TAG_COUNTS: u32 = 6;
/// (version 6) The node the chunks after it come from (`format::node`).
const TAG_NODE: u32 = 7;

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
    #[error("unsupported recording version {0} (this tracer reads versions 2 to {VERSION})")]
    Version(u32),
    #[error("recording is truncated: {0}")]
    Truncated(&'static str),
    #[error("recording is corrupt: {0}")]
    Corrupt(String),
    #[error("recording is corrupt at byte {offset}")]
    BadRecord { offset: u64, source: DecodeError },
    #[error("recording is corrupt: a NODE chunk")]
    Node(#[from] NodeError),
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
    /// (version 6) The machines traced, node 0 first (`format::node`); empty in older
    /// recordings, which are of one machine: [`RecordingMeta::nodes`] implies it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeInfo>,
}

impl RecordingMeta {
    /// The node table: the recorded one, or the one machine an older recording implies.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        if self.nodes.is_empty() {
            vec![implied_node(
                &self.hostname,
                self.start_unix_ns,
                self.start_monotonic_ns,
            )]
        } else {
            self.nodes.clone()
        }
    }
}

/// A NODE chunk: the node of the chunks that follow.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct NodeChunk {
    node: u32,
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
    /// As the binary has it (mangled for C++ and Rust): what `--func` matched.
    pub symbol: String,
    pub path: String,
    pub vaddr: u64,
}

impl FunctionProbe {
    /// The procedure's name as every output shows it: the symbol demangled (recordings
    /// keep the symbol, so older ones read the same way).
    pub fn name(&self) -> String {
        demangle(&self.symbol)
    }
}

/// Totals, written last (END), and so far (COUNTS, before a flush that follows a change).
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
    /// When the oldest byte not yet handed to the kernel was written (`None`: all were).
    unwritten_since: Option<Instant>,
}

/// How long a written record may wait in the writer's buffers before `flush_if_due`
/// hands it to the kernel: with the session's 50 ms tick, a `kill -9` loses at most about
/// a second of events.
pub const FLUSH_AFTER: Duration = Duration::from_millis(950);

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
            unwritten_since: None,
        };
        w.out.write_all(MAGIC)?;
        w.out.write_all(&VERSION.to_le_bytes())?;
        w.out.write_all(&0u32.to_le_bytes())?;
        w.json_chunk(TAG_META, meta)?;
        // From here on the file reads as a recording, whenever the tracer stops.
        w.out.flush()?;
        Ok(w)
    }

    /// Appends one raw record (already validated by the decoder).
    pub fn record(&mut self, raw: &[u8]) -> Result<(), RecordingError> {
        if self.unwritten_since.is_none() {
            self.unwritten_since = Some(Instant::now());
        }
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

    /// The records, processes and probes written next come from node `node` of META's
    /// node table (with the ids and clock of that node: the reader makes them unique).
    /// A recording of one machine never calls this: its chunks are node 0's.
    pub fn begin_node(&mut self, node: u32) -> Result<(), RecordingError> {
        self.flush_batch()?;
        self.json_chunk(TAG_NODE, &NodeChunk { node })
    }

    /// Whether what was written has waited `FLUSH_AFTER` (then `flush_if_due` flushes).
    pub fn flush_due(&self) -> bool {
        self.unwritten_since
            .is_some_and(|t| t.elapsed() >= FLUSH_AFTER)
    }

    /// Hands what was written to the kernel, as complete chunks, if the oldest of it has
    /// waited `FLUSH_AFTER`: called on every tick of the session's event loop, so that a
    /// tracer killed at any moment leaves a file readable up to about a second before.
    pub fn flush_if_due(&mut self) -> Result<(), RecordingError> {
        if self.flush_due() {
            self.flush_batch()?;
            self.out.flush()?;
            self.unwritten_since = None;
        }
        Ok(())
    }

    /// Writes the totals so far (a COUNTS chunk), after the events written before: a
    /// recording cut short says how many events the probes had lost by then.
    pub fn counts(&mut self, so_far: &Trailer) -> Result<(), RecordingError> {
        self.flush_batch()?;
        self.json_chunk(TAG_COUNTS, so_far)
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
        if self.unwritten_since.is_none() {
            self.unwritten_since = Some(Instant::now());
        }
        let len = payload.len() as u32;
        self.out.write_all(&SYNC)?;
        self.out.write_all(&tag.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out
            .write_all(&checksum(tag, len, payload).to_le_bytes())?;
        self.out.write_all(payload)?;
        Ok(())
    }
}

/// CRC-32 of a chunk's tag, length and payload.
fn checksum(tag: u32, len: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&tag.to_le_bytes());
    h.update(&len.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// How a recording ended, known once `next_item` returned `None`.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The END chunk was read.
    Complete,
    /// The file stops without an END chunk (the tracer was killed, the machine stopped,
    /// the disk filled up): every complete chunk was read.
    CutShort {
        /// Records read.
        events: u64,
        /// The last record's time after the recording's start (the largest `ts_ns`
        /// minus `start_monotonic_ns`), `None` without records.
        last_event_ns: Option<u64>,
        /// Bytes after the last complete chunk: a chunk being written, dropped.
        dropped_bytes: u64,
    },
}

/// What a reader found wrong with a recording it read to the end.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub ending: Ending,
    /// Chunks in the middle whose checksum or framing was wrong, skipped.
    pub corrupt_chunks: u64,
    /// Bytes those chunks held.
    pub corrupt_bytes: u64,
}

impl Condition {
    /// One line per thing wrong (none for a complete, sound recording), for the CLI to
    /// print.
    pub fn messages(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.corrupt_chunks > 0 {
            out.push(format!(
                "recording has {} corrupt chunk{} ({} bytes): skipped, the events in {} are missing",
                self.corrupt_chunks,
                if self.corrupt_chunks == 1 { "" } else { "s" },
                self.corrupt_bytes,
                if self.corrupt_chunks == 1 { "it" } else { "them" },
            ));
        }
        if let Ending::CutShort {
            events,
            last_event_ns,
            dropped_bytes,
        } = &self.ending
        {
            let at = match last_event_ns {
                Some(ns) => format!(" at {:.3} s", *ns as f64 / 1e9),
                None => String::new(),
            };
            let tail = if *dropped_bytes > 0 {
                format!("; the last partial chunk ({dropped_bytes} bytes) was dropped")
            } else {
                String::new()
            };
            out.push(format!(
                "recording cut short after {events} events{at} (no END chunk: the tracer did not finish){tail}"
            ));
        }
        out
    }
}

/// A chunk read whole, its framing (and in version 3 on, its checksum) sound.
struct SoundChunk {
    tag: u32,
    payload: Vec<u8>,
    /// Where the chunk after it starts.
    next: u64,
}

/// A sound chunk that resynchronising found past damaged bytes.
struct FoundChunk {
    /// Where it starts.
    at: u64,
    chunk: SoundChunk,
}

/// One step of reading chunks.
enum Chunk {
    Read(SoundChunk),
    /// Nothing more in the file.
    End,
    /// The file ends inside the chunk.
    Short,
    /// Not a chunk: bad framing or checksum.
    Bad,
}

/// Streams a recording. `meta` is read on open; `next_item` yields the rest; the trailer
/// is available once the END chunk was read, and `condition` once `next_item` returned
/// `None`. A file cut short (no END chunk) reads up to its last complete chunk; a chunk
/// in the middle whose checksum is wrong is skipped and counted (version 3).
pub struct RecordingReader {
    source: Source,
    version: u32,
    pub meta: RecordingMeta,
    pub trailer: Option<Trailer>,
    /// The last COUNTS chunk read.
    counts: Option<Trailer>,
    offset: u64,
    pending: std::collections::VecDeque<Item>,
    done: bool,
    events: u64,
    last_ts_ns: Option<u64>,
    dropped_bytes: u64,
    corrupt_chunks: u64,
    corrupt_bytes: u64,
    /// Only count records and note their times, without decoding them (`condition_of`).
    skim: bool,
    /// The node table ([`RecordingMeta::nodes`]) and how the current node's chunks are
    /// made unique (node 0 until a NODE chunk).
    nodes: Vec<NodeInfo>,
    relocation: Relocation,
}

/// How the recording at `path` ended and what in it is damaged: one pass over its chunks
/// that checks them and counts the records without decoding them, for a command to say
/// so before it reads the recording with its own readers.
pub fn condition_of(path: &Path) -> Result<Condition, RecordingError> {
    Ok(skim(RecordingReader::open(path)?)?.condition)
}

/// What one skim of a recording ([`skim_of`]) found.
#[derive(Clone, Debug, PartialEq)]
pub struct Skimmed {
    pub condition: Condition,
    /// The recording's totals ([`RecordingReader::totals`]): lost records and the probes'
    /// failures.
    pub totals: Trailer,
}

/// [`condition_of`], with the recording's totals, for a command that says both before
/// and after it reads the recording with its own readers.
pub fn skim_of(path: &Path) -> Result<Skimmed, RecordingError> {
    skim(RecordingReader::open(path)?)
}

/// [`condition_of`] a recording held in memory.
pub fn condition_of_bytes(bytes: Vec<u8>) -> Result<Condition, RecordingError> {
    Ok(skim(RecordingReader::from_bytes(bytes)?)?.condition)
}

fn skim(mut r: RecordingReader) -> Result<Skimmed, RecordingError> {
    r.skim = true;
    while r.next_item()?.is_some() {}
    Ok(Skimmed {
        condition: r.condition(),
        totals: r.totals(),
    })
}

/// Where a reader's bytes come from: a file (what the commands read), or bytes in memory
/// (the fuzz targets, fuzz/, feed every reader from bytes).
enum Source {
    File(File),
    Bytes(Vec<u8>),
}

impl Source {
    /// Reads `buf.len()` bytes at `offset`, fewer at the end: how many.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self {
            Source::File(file) => read_full_at(file, buf, offset),
            Source::Bytes(bytes) => {
                let start = usize::try_from(offset).map_or(bytes.len(), |o| o.min(bytes.len()));
                let n = buf.len().min(bytes.len() - start);
                buf[..n].copy_from_slice(&bytes[start..start + n]);
                Ok(n)
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        match self {
            Source::File(file) => Ok(file.metadata()?.len()),
            Source::Bytes(bytes) => Ok(bytes.len() as u64),
        }
    }
}

impl RecordingReader {
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let file = File::open(path).map_err(|source| RecordingError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_source(Source::File(file))
    }

    /// A reader of a recording held in memory: the same reading as [`Self::open`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, RecordingError> {
        Self::from_source(Source::Bytes(bytes))
    }

    fn from_source(source: Source) -> Result<Self, RecordingError> {
        let mut head = [0u8; 16];
        if source.read_at(&mut head, 0)? < head.len() {
            return Err(RecordingError::Truncated("no file header"));
        }
        if &head[..8] != MAGIC {
            return Err(RecordingError::BadMagic);
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if !(2..=VERSION).contains(&version) {
            return Err(RecordingError::Version(version));
        }
        let mut r = RecordingReader {
            source,
            version,
            meta: RecordingMeta::default(),
            trailer: None,
            counts: None,
            offset: 16,
            pending: Default::default(),
            done: false,
            events: 0,
            last_ts_ns: None,
            dropped_bytes: 0,
            corrupt_chunks: 0,
            corrupt_bytes: 0,
            skim: false,
            nodes: Vec::new(),
            relocation: Relocation::NONE,
        };
        match r.chunk_at(16)? {
            Chunk::Read(SoundChunk {
                tag: TAG_META,
                payload,
                next,
            }) => {
                r.meta = json(&payload, "meta")?;
                r.nodes = r.meta.nodes();
                r.offset = next;
            }
            Chunk::Read(_) | Chunk::Bad => {
                return Err(RecordingError::Corrupt("first chunk is not META".into()))
            }
            Chunk::End | Chunk::Short => return Err(RecordingError::Truncated("no META chunk")),
        }
        Ok(r)
    }

    /// The next item, or None at the end: after the END chunk, or at the end of a file
    /// cut short (`condition` says which).
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Ok(Some(item));
            }
            if self.done {
                return Ok(None);
            }
            let start = self.offset;
            let Some(SoundChunk { tag, payload, .. }) = self.next_chunk()? else {
                self.done = true;
                continue;
            };
            let body = start + if self.version == 2 { 8 } else { 16 };
            match tag {
                TAG_EVENTS => {
                    let mut at = 0usize;
                    while at < payload.len() {
                        let bad = |source| RecordingError::BadRecord {
                            offset: body + at as u64,
                            source,
                        };
                        let len = records::record_len(&payload[at..]).map_err(bad)?;
                        if at + len > payload.len() {
                            return Err(RecordingError::Corrupt(format!(
                                "record at byte {} runs past its chunk",
                                body + at as u64
                            )));
                        }
                        let raw = &payload[at..at + len];
                        let ts = if self.skim {
                            self.relocation
                                .time(u64::from_le_bytes(raw[..8].try_into().unwrap()))
                        } else {
                            let mut rec = records::decode(raw).map_err(bad)?;
                            self.relocation.record(&mut rec);
                            let ts = rec.header().ts_ns;
                            self.pending.push_back(Item::Record(rec));
                            ts
                        };
                        self.last_ts_ns = Some(self.last_ts_ns.map_or(ts, |t| t.max(ts)));
                        self.events += 1;
                        at += len;
                    }
                }
                TAG_PROCESS => {
                    let mut process: ProcessInfo = json(&payload, "process")?;
                    self.relocation.process(&mut process);
                    self.pending.push_back(Item::Process(process));
                }
                TAG_PROBE => self
                    .pending
                    .push_back(Item::Probe(json(&payload, "probe")?)),
                TAG_END => {
                    self.trailer = Some(json(&payload, "end")?);
                    self.done = true;
                }
                TAG_COUNTS if self.version >= 4 => self.counts = Some(json(&payload, "counts")?),
                TAG_NODE if self.version >= 6 => {
                    let chunk: NodeChunk = json(&payload, "node")?;
                    self.relocation = Relocation::of(&self.nodes, chunk.node)?;
                }
                TAG_META => return Err(RecordingError::Corrupt("second META chunk".into())),
                other => {
                    return Err(RecordingError::Corrupt(format!(
                        "unknown chunk tag {other}"
                    )))
                }
            }
        }
    }

    /// The recording's totals: its END chunk's, or in a recording cut short the last
    /// COUNTS chunk's (`events_total` then counts the events written up to it), or
    /// nothing lost if it has none. Final once `next_item` returned `None`.
    pub fn totals(&self) -> Trailer {
        self.trailer
            .clone()
            .or_else(|| self.counts.clone())
            .unwrap_or_default()
    }

    /// How the recording ended and what was skipped: final once `next_item` returned
    /// `None`.
    pub fn condition(&self) -> Condition {
        let ending = if self.trailer.is_some() {
            Ending::Complete
        } else {
            Ending::CutShort {
                events: self.events,
                last_event_ns: self
                    .last_ts_ns
                    .map(|t| t.saturating_sub(self.meta.start_monotonic_ns)),
                dropped_bytes: self.dropped_bytes,
            }
        };
        Condition {
            ending,
            corrupt_chunks: self.corrupt_chunks,
            corrupt_bytes: self.corrupt_bytes,
        }
    }

    /// The next sound chunk, skipping corrupt ones; None at the end of the file.
    fn next_chunk(&mut self) -> Result<Option<SoundChunk>, RecordingError> {
        let start = self.offset;
        match self.chunk_at(start)? {
            Chunk::Read(chunk) => {
                self.offset = chunk.next;
                return Ok(Some(chunk));
            }
            Chunk::End => return Ok(None),
            Chunk::Bad if self.version == 2 => {
                return Err(RecordingError::Corrupt(format!(
                    "bad chunk at byte {start}"
                )))
            }
            Chunk::Short | Chunk::Bad => {}
        }
        // Version 3: a sound chunk further on means this one was damaged; none means
        // the file was cut in the middle of this one.
        if self.version != 2 {
            if let Some(FoundChunk { at, chunk }) = self.resync(start + 1)? {
                self.corrupt_chunks += 1;
                self.corrupt_bytes += at - start;
                self.offset = chunk.next;
                return Ok(Some(chunk));
            }
        }
        let len = self.source.len()?;
        self.dropped_bytes = len.saturating_sub(start);
        self.offset = len;
        Ok(None)
    }

    /// The first sound chunk at or after `from`.
    fn resync(&self, from: u64) -> Result<Option<FoundChunk>, RecordingError> {
        let mut block = vec![0u8; 1 << 16];
        let mut base = from;
        loop {
            let n = self.source.read_at(&mut block, base)?;
            if n < SYNC.len() {
                return Ok(None);
            }
            for i in 0..=n - SYNC.len() {
                if block[i..i + SYNC.len()] == SYNC {
                    let at = base + i as u64;
                    if let Chunk::Read(chunk) = self.chunk_at(at)? {
                        return Ok(Some(FoundChunk { at, chunk }));
                    }
                }
            }
            if n < block.len() {
                return Ok(None);
            }
            base += (n - (SYNC.len() - 1)) as u64;
        }
    }

    fn chunk_at(&self, at: u64) -> Result<Chunk, RecordingError> {
        let v2 = self.version == 2;
        let mut head = [0u8; 16];
        let head = if v2 { &mut head[..8] } else { &mut head[..] };
        let n = self.source.read_at(head, at)?;
        if n == 0 {
            return Ok(Chunk::End);
        }
        let fields = if v2 { &head[..] } else { &head[4..] };
        if !v2 && n >= 4 && head[..4] != SYNC {
            return Ok(Chunk::Bad);
        }
        if n < head.len() {
            return Ok(Chunk::Short);
        }
        let tag = u32::from_le_bytes(fields[..4].try_into().unwrap());
        let len = u32::from_le_bytes(fields[4..8].try_into().unwrap());
        if len > MAX_CHUNK {
            return Ok(Chunk::Bad);
        }
        let start = at + head.len() as u64;
        // A length past the end is a cut (or damaged) chunk: allocate nothing for it.
        if start + u64::from(len) > self.source.len()? {
            return Ok(Chunk::Short);
        }
        let mut payload = vec![0u8; len as usize];
        if self.source.read_at(&mut payload, start)? < payload.len() {
            return Ok(Chunk::Short);
        }
        if !v2 {
            let crc = u32::from_le_bytes(fields[8..12].try_into().unwrap());
            if crc != checksum(tag, len, &payload) {
                return Ok(Chunk::Bad);
            }
        }
        Ok(Chunk::Read(SoundChunk {
            tag,
            payload,
            next: start + len as u64,
        }))
    }
}

fn json<T: for<'de> Deserialize<'de>>(payload: &[u8], what: &str) -> Result<T, RecordingError> {
    serde_json::from_slice(payload)
        .map_err(|e| RecordingError::Corrupt(format!("{what} chunk: {e}")))
}

/// Reads `buf.len()` bytes at `offset`, fewer at the end of the file: how many.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What a pass over a recording reads items from: the [`RecordingReader`] itself, its
/// items read ahead on another thread (`read_ahead::ReadAhead`), or items from an
/// iterator ([`ItemIter`]).
pub trait ItemSource {
    /// The next item, or None at the end.
    fn next_item(&mut self) -> Result<Option<Item>, RecordingError>;
    /// The recording's totals, final once `next_item` returned None.
    fn totals(&self) -> Trailer;
}

impl ItemSource for RecordingReader {
    fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        RecordingReader::next_item(self)
    }
    fn totals(&self) -> Trailer {
        RecordingReader::totals(self)
    }
}

/// Items from an iterator as a source (items in memory, a stream the caller cut): it
/// has no totals.
pub struct ItemIter<I>(pub I);

impl<I: Iterator<Item = Result<Item, RecordingError>>> ItemSource for ItemIter<I> {
    fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        self.0.next().transpose()
    }
    fn totals(&self) -> Trailer {
        Trailer::default()
    }
}

/// A whole recording, read into memory.
pub struct WholeRecording {
    pub meta: RecordingMeta,
    pub items: Vec<Item>,
    /// The END chunk's counts (when the recording was cut short: its last COUNTS chunk's).
    pub trailer: Trailer,
}

/// Reads a whole recording into memory.
pub fn read_all(path: &Path) -> Result<WholeRecording, RecordingError> {
    let mut reader = RecordingReader::open(path)?;
    let mut items = Vec::new();
    while let Some(item) = reader.next_item()? {
        items.push(item);
    }
    let trailer = reader.totals();
    Ok(WholeRecording {
        meta: reader.meta,
        items,
        trailer,
    })
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
        let WholeRecording {
            meta,
            items,
            trailer,
        } = read_all(&path).unwrap();
        assert_eq!(meta.hostname, "h");
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0], Item::Record(Record::Exit(e)) if e.header.tid == 42));
        assert!(matches!(&items[1], Item::Process(p) if p.pid == 42));
        assert_eq!(trailer.events_total, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rec-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn exit(tid: u32, ts_ns: u64) -> Vec<u8> {
        let mut e = ExitRecord::default();
        e.header.kind = kind::EXIT;
        e.header.tid = tid;
        e.header.ts_ns = ts_ns;
        Record::Exit(e).to_bytes()
    }

    /// A recording's bytes and its chunks, META first.
    struct Chunked {
        bytes: Vec<u8>,
        chunks: Vec<ChunkSpan>,
    }

    /// Where a chunk ends in the file and how many items it holds.
    #[derive(Clone, Copy)]
    struct ChunkSpan {
        end: usize,
        items: usize,
    }

    /// What reading a recording gave: every item, and the file's condition.
    #[derive(Debug, PartialEq)]
    struct ReadBack {
        items: Vec<Item>,
        condition: Condition,
    }

    /// A recording of six chunks after META: EVENTS (1 record), PROCESS, EVENTS (2),
    /// PROCESS, PROBE, END.
    fn chunked(path: &Path) -> Chunked {
        let meta = RecordingMeta {
            start_monotonic_ns: 1_000,
            ..Default::default()
        };
        let mut w = RecordingWriter::create(path, &meta).unwrap();
        w.record(&exit(1, 2_000)).unwrap();
        w.process(&ProcessInfo {
            pid: 1,
            ..Default::default()
        })
        .unwrap();
        w.record(&exit(2, 3_000)).unwrap();
        w.record(&exit(3, 5_000)).unwrap();
        w.process(&ProcessInfo {
            pid: 2,
            ..Default::default()
        })
        .unwrap();
        w.probe(&FunctionProbe {
            id: 1,
            symbol: "f".into(),
            path: "/p".into(),
            vaddr: 16,
        })
        .unwrap();
        w.finish(&Trailer {
            events_total: 3,
            ..Default::default()
        })
        .unwrap();
        let bytes = std::fs::read(path).unwrap();
        // Walk the framing: META first, then the six.
        let mut ends = Vec::new();
        let mut at = 16;
        while at < bytes.len() {
            assert_eq!(bytes[at..at + 4], SYNC);
            let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            at += 16 + len;
            ends.push(at);
        }
        assert_eq!(at, bytes.len());
        let counts = [0, 1, 1, 2, 1, 1, 0];
        let chunks = ends
            .into_iter()
            .zip(counts)
            .map(|(end, items)| ChunkSpan { end, items })
            .collect();
        Chunked { bytes, chunks }
    }

    /// Reads the file at `path`, and checks that its bytes read from memory
    /// (`from_bytes`, what the fuzz targets use) give the same items, condition or error.
    fn read_with_condition(path: &Path) -> Result<ReadBack, RecordingError> {
        let read = |r: Result<RecordingReader, RecordingError>| -> Result<_, RecordingError> {
            let mut r = r?;
            let mut items = Vec::new();
            while let Some(item) = r.next_item()? {
                items.push(item);
            }
            Ok(ReadBack {
                items,
                condition: r.condition(),
            })
        };
        let from_file = read(RecordingReader::open(path));
        let bytes = std::fs::read(path).unwrap();
        let from_bytes = read(RecordingReader::from_bytes(bytes.clone()));
        match (&from_file, &from_bytes) {
            (Ok(f), Ok(b)) => assert_eq!(f, b),
            (Err(f), Err(b)) => assert_eq!(f.to_string(), b.to_string()),
            _ => panic!("file and bytes read differently: {from_file:?} / {from_bytes:?}"),
        }
        if let Ok(read) = &from_file {
            assert_eq!(condition_of_bytes(bytes).unwrap(), read.condition);
        }
        from_file
    }

    /// Cut at every byte: before META's end the file is refused (not a recording yet);
    /// after it, every complete chunk is read, the partial one dropped, and the ending
    /// says so.
    #[test]
    fn a_file_cut_anywhere_reads_up_to_its_last_complete_chunk() {
        let dir = scratch("cut");
        let path = dir.join("a.trace");
        let Chunked { bytes, chunks } = chunked(&path);
        let ReadBack {
            items: all,
            condition: cond,
        } = read_with_condition(&path).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(cond.ending, Ending::Complete);
        assert!(cond.messages().is_empty());
        let meta_end = chunks[0].end;
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let read = read_with_condition(&path);
            if cut < meta_end {
                assert!(read.is_err(), "prefix of {cut} bytes accepted");
                continue;
            }
            let ReadBack {
                items,
                condition: cond,
            } = read.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let complete = chunks.iter().take_while(|c| c.end <= cut);
            let expected: usize = complete.clone().map(|c| c.items).sum();
            let last_end = complete.last().unwrap().end;
            assert_eq!(items[..], all[..expected], "cut at {cut}");
            let events = items
                .iter()
                .filter(|i| matches!(i, Item::Record(_)))
                .count() as u64;
            let last_event_ns = match events {
                0 => None,
                1 => Some(1_000),
                _ => Some(4_000),
            };
            assert_eq!(
                cond,
                Condition {
                    ending: Ending::CutShort {
                        events,
                        last_event_ns,
                        dropped_bytes: (cut - last_end) as u64,
                    },
                    corrupt_chunks: 0,
                    corrupt_bytes: 0,
                },
                "cut at {cut}"
            );
            assert!(cond.messages()[0]
                .starts_with(&format!("recording cut short after {events} events")));
            assert_eq!(condition_of(&path).unwrap(), cond);
        }
        std::fs::write(&path, b"CPTRACE\0").unwrap();
        assert!(matches!(read_all(&path), Err(RecordingError::Truncated(_))));
        let mut bad = bytes.clone();
        bad[0] = b'X';
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read_all(&path), Err(RecordingError::BadMagic)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A bit flipped anywhere in a chunk in the middle (framing, checksum or payload)
    /// loses that chunk only, counted; one flipped in END makes the file cut short.
    #[test]
    fn a_damaged_chunk_is_skipped_and_counted() {
        let dir = scratch("flip");
        let path = dir.join("a.trace");
        let Chunked { bytes, chunks } = chunked(&path);
        let ReadBack { items: all, .. } = read_with_condition(&path).unwrap();
        for (c, &ChunkSpan { end, items: n }) in chunks.iter().enumerate().skip(1) {
            let start = chunks[c - 1].end;
            // Items before and after the damaged chunk.
            let before: usize = chunks[1..c].iter().map(|c| c.items).sum();
            for byte in start..end {
                for bit in [0, 3, 7] {
                    let mut bad = bytes.clone();
                    bad[byte] ^= 1 << bit;
                    std::fs::write(&path, &bad).unwrap();
                    let ReadBack {
                        items,
                        condition: cond,
                    } = read_with_condition(&path)
                        .unwrap_or_else(|e| panic!("chunk {c}, byte {byte}: {e}"));
                    let mut expected = all[..before].to_vec();
                    expected.extend_from_slice(&all[before + n..]);
                    assert_eq!(items, expected, "chunk {c}, byte {byte}, bit {bit}");
                    assert_eq!(condition_of(&path).unwrap(), cond);
                    if c + 1 < chunks.len() {
                        assert_eq!(cond.corrupt_chunks, 1, "chunk {c}, byte {byte}");
                        assert_eq!(cond.corrupt_bytes, (end - start) as u64);
                        assert_eq!(cond.ending, Ending::Complete);
                        assert!(cond.messages()[0].starts_with("recording has 1 corrupt chunk"));
                    } else {
                        assert_eq!(cond.corrupt_chunks, 0);
                        assert!(matches!(
                            cond.ending,
                            Ending::CutShort { events: 3, dropped_bytes, .. }
                                if dropped_bytes == (end - start) as u64
                        ));
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The file reads as a recording from the moment the writer is created: a tracer
    /// killed before its first flush leaves META and nothing lost that was flushed.
    #[test]
    fn a_new_recording_reads_at_once() {
        let dir = scratch("new");
        let path = dir.join("a.trace");
        let mut w = RecordingWriter::create(&path, &RecordingMeta::default()).unwrap();
        w.record(&exit(1, 5)).unwrap();
        let ReadBack {
            items,
            condition: cond,
        } = read_with_condition(&path).unwrap();
        assert!(items.is_empty());
        assert_eq!(
            cond.ending,
            Ending::CutShort {
                events: 0,
                last_event_ns: None,
                dropped_bytes: 0
            }
        );
        w.unwritten_since = Some(Instant::now() - FLUSH_AFTER);
        w.flush_if_due().unwrap();
        let ReadBack { items, .. } = read_with_condition(&path).unwrap();
        assert_eq!(items.len(), 1);
        drop(w);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording cut short has the totals of its last COUNTS chunk; a complete one its
    /// END chunk's.
    #[test]
    fn totals_of_a_recording_cut_short_are_its_last_counts() {
        let dir = scratch("counts");
        let path = dir.join("a.trace");
        let mut w = RecordingWriter::create(&path, &RecordingMeta::default()).unwrap();
        let so_far = |lost| Trailer {
            events_total: 1,
            events_lost: lost,
            probe_failures: BTreeMap::from([("ring_full".to_string(), lost)]),
        };
        w.record(&exit(1, 5)).unwrap();
        w.counts(&so_far(3)).unwrap();
        w.record(&exit(1, 6)).unwrap();
        w.counts(&so_far(7)).unwrap();
        w.unwritten_since = Some(Instant::now() - FLUSH_AFTER);
        w.flush_if_due().unwrap();
        let mut r = RecordingReader::open(&path).unwrap();
        assert_eq!(r.totals(), Trailer::default());
        while r.next_item().unwrap().is_some() {}
        assert!(r.trailer.is_none());
        assert_eq!(r.totals(), so_far(7));
        let whole = read_all(&path).unwrap();
        assert_eq!((whole.items.len(), whole.trailer), (2, so_far(7)));
        let end = Trailer {
            events_total: 2,
            events_lost: 9,
            probe_failures: BTreeMap::new(),
        };
        w.finish(&end).unwrap();
        assert_eq!(read_all(&path).unwrap().trailer, end);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Version 2 files (no sync word, no checksum) still read, cut short too.
    #[test]
    fn version_2_reads() {
        let dir = scratch("v2");
        let path = dir.join("a.trace");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        let mut chunk = |tag: u32, payload: &[u8]| {
            bytes.extend_from_slice(&tag.to_le_bytes());
            bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes.extend_from_slice(payload);
        };
        chunk(
            TAG_META,
            &serde_json::to_vec(&RecordingMeta::default()).unwrap(),
        );
        chunk(TAG_EVENTS, &exit(7, 9));
        chunk(TAG_END, br#"{"events_total":1,"events_lost":0}"#);
        std::fs::write(&path, &bytes).unwrap();
        let ReadBack {
            items,
            condition: cond,
        } = read_with_condition(&path).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(cond.ending, Ending::Complete);
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let ReadBack {
            items,
            condition: cond,
        } = read_with_condition(&path).unwrap();
        assert_eq!(items.len(), 1);
        assert!(matches!(cond.ending, Ending::CutShort { events: 1, .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
