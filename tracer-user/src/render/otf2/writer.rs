//! Writes an OTF2 archive: `DIR/traces.otf2` (the anchor file), `DIR/traces.def`
//! (global definitions) and `DIR/traces/` (a definition and an event file per location),
//! through the OTF2 library's serial writer. The events stream in as the model makes
//! them: an event writer per location, opened at its first event, whose buffer OTF2
//! flushes to its file chunk by chunk; the definitions, known only at the end, follow.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use rustc_hash::FxHashMap;

use tracer_analysis::otf2::{Event, Otf2Plan, Otf2Sink, Otf2Stats, Otf2Trace, Paradigm, Timed};
use tracer_analysis::recording::{Item, RecordingError};
use tracer_analysis::workclock::ClockKind;

use super::ffi;

/// The archive's name inside OUT (the OTF2 tools open `OUT/traces.otf2`).
pub(crate) const ARCHIVE_NAME: &str = "traces";

/// The metric class of the critical path (its only member is member 0).
const CRITICAL_METRIC: u32 = 0;

#[derive(Debug, thiserror::Error)]
pub enum Otf2Error {
    #[error("{0} exists and is not an empty directory: not writing an OTF2 archive into it")]
    NotEmpty(PathBuf),
    #[error("{0}: a path the OTF2 library cannot take (it holds a NUL byte)")]
    BadPath(PathBuf),
    #[error("the OTF2 library failed in {call} (error code {code})")]
    Library { call: &'static str, code: i32 },
    /// Reading the recording failed (its events are read while the archive is written).
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn check(code: ffi::ErrorCode, call: &'static str) -> Result<(), Otf2Error> {
    if code == ffi::SUCCESS {
        Ok(())
    } else {
        Err(Otf2Error::Library { call, code })
    }
}

fn non_null<T>(p: *mut T, call: &'static str) -> Result<*mut T, Otf2Error> {
    if p.is_null() {
        Err(Otf2Error::Library { call, code: -1 })
    } else {
        Ok(p)
    }
}

/// OTF2 asks before it flushes a full buffer to disk: always (an event, once written,
/// is final; flushing keeps the memory bounded).
extern "C" fn pre_flush(_: *mut c_void, _: u8, _: u64, _: *mut c_void, _: bool) -> u8 {
    ffi::FLUSH
}

static FLUSH_CALLBACKS: ffi::FlushCallbacks = ffi::FlushCallbacks {
    pre_flush,
    post_flush: None,
};

/// An open archive; closed (and its files finished) on drop.
struct Archive(*mut ffi::Archive);

impl Archive {
    fn create(dir: &Path) -> Result<Self, Otf2Error> {
        let path = CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| Otf2Error::BadPath(dir.to_path_buf()))?;
        let name = CString::new(ARCHIVE_NAME).unwrap();
        // SAFETY: both strings live across the call; OTF2 copies them.
        let p = unsafe {
            ffi::OTF2_Archive_Open(
                path.as_ptr(),
                name.as_ptr(),
                ffi::FILEMODE_WRITE,
                ffi::CHUNK_SIZE_EVENTS_DEFAULT,
                ffi::CHUNK_SIZE_DEFINITIONS_DEFAULT,
                ffi::SUBSTRATE_POSIX,
                ffi::COMPRESSION_NONE,
            )
        };
        let archive = Archive(non_null(p, "OTF2_Archive_Open")?);
        let creator = CString::new(concat!("tracer ", env!("CARGO_PKG_VERSION"))).unwrap();
        let description = CString::new("eBPF recording of a parallel program").unwrap();
        // SAFETY: a valid archive; the callbacks are static; the strings are copied.
        unsafe {
            check(
                ffi::OTF2_Archive_SetFlushCallbacks(archive.0, &FLUSH_CALLBACKS, ptr::null_mut()),
                "OTF2_Archive_SetFlushCallbacks",
            )?;
            check(
                ffi::OTF2_Archive_SetSerialCollectiveCallbacks(archive.0),
                "OTF2_Archive_SetSerialCollectiveCallbacks",
            )?;
            check(
                ffi::OTF2_Archive_SetCreator(archive.0, creator.as_ptr()),
                "OTF2_Archive_SetCreator",
            )?;
            check(
                ffi::OTF2_Archive_SetDescription(archive.0, description.as_ptr()),
                "OTF2_Archive_SetDescription",
            )?;
        }
        Ok(archive)
    }

    fn close(mut self) -> Result<(), Otf2Error> {
        let p = std::mem::replace(&mut self.0, ptr::null_mut());
        // SAFETY: a valid archive, closed once.
        check(unsafe { ffi::OTF2_Archive_Close(p) }, "OTF2_Archive_Close")
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a valid archive, closed once (after an error: the caller removes
            // what it wrote).
            unsafe { ffi::OTF2_Archive_Close(self.0) };
        }
    }
}

/// Strings of the global definitions, numbered in first-use order.
#[derive(Default)]
struct Strings {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.list.len() as u32;
        self.ids.insert(s.to_string(), id);
        self.list.push(s.to_string());
        id
    }
}

/// Writes the OTF2 archive of a recording in directory `dir` (created; it must not
/// exist or be empty): the events of `items` (the recording `plan` read, in file
/// order) as they come, then the definitions. On failure the caller removes `dir`.
pub fn write_otf2(
    plan: Otf2Plan,
    items: impl IntoIterator<Item = Result<Item, RecordingError>>,
    dir: &Path,
) -> Result<Otf2Stats, Otf2Error> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Otf2Error::NotEmpty(dir.to_path_buf()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)?,
        Err(_) => return Err(Otf2Error::NotEmpty(dir.to_path_buf())),
    }
    let archive = Archive::create(dir)?;
    let mut files = EventFiles::open(&archive)?;
    let trace = plan.stream(items, &mut files)?;
    let written = files.close(&trace)?;
    // The clock: nanoseconds of the recording, from its first event.
    let first = written.first.unwrap_or(trace.first_ts);
    let last = written.last.unwrap_or(first);
    write_definitions(&archive, &trace, &written.events, first, last)?;
    archive.close()?;
    Ok(Otf2Stats {
        locations: trace.locations.len(),
        regions: trace.regions.len(),
        comms: trace.comms.len(),
        events: written.events.values().sum(),
        critical_path_ns: trace.critical_path_ns,
        events_recorded: trace.events_recorded,
        events_lost: trace.events_lost,
    })
}

/// The event files: a writer per location, opened at its first event.
struct EventFiles {
    archive: *mut ffi::Archive,
    /// Looked up at every event: a fast hash of the thread id.
    writers: FxHashMap<u32, LocationEvents>,
    first: Option<u64>,
    last: Option<u64>,
}

struct LocationEvents {
    writer: *mut ffi::EvtWriter,
    count: u64,
}

/// What the event files hold: events per location and the first and last time.
struct Written {
    events: HashMap<u32, u64>,
    first: Option<u64>,
    last: Option<u64>,
}

impl EventFiles {
    fn open(archive: &Archive) -> Result<Self, Otf2Error> {
        // SAFETY: a valid archive.
        check(
            unsafe { ffi::OTF2_Archive_OpenEvtFiles(archive.0) },
            "OTF2_Archive_OpenEvtFiles",
        )?;
        Ok(EventFiles {
            archive: archive.0,
            writers: FxHashMap::default(),
            first: None,
            last: None,
        })
    }

    fn writer(&mut self, tid: u32) -> Result<&mut LocationEvents, Otf2Error> {
        let archive = self.archive;
        match self.writers.entry(tid) {
            std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(e) => {
                // SAFETY: a valid archive with its event files open.
                let writer = non_null(
                    unsafe { ffi::OTF2_Archive_GetEvtWriter(archive, tid as u64) },
                    "OTF2_Archive_GetEvtWriter",
                )?;
                Ok(e.insert(LocationEvents { writer, count: 0 }))
            }
        }
    }

    /// Closes every location's writer (a location without events gets its empty event
    /// file too), then the event files.
    fn close(mut self, trace: &Otf2Trace) -> Result<Written, Otf2Error> {
        for l in &trace.locations {
            self.writer(l.tid)?;
        }
        let mut events = HashMap::new();
        for (tid, w) in self.writers.drain() {
            // SAFETY: a writer of this archive, given back once.
            check(
                unsafe { ffi::OTF2_Archive_CloseEvtWriter(self.archive, w.writer) },
                "OTF2_Archive_CloseEvtWriter",
            )?;
            events.insert(tid, w.count);
        }
        // SAFETY: a valid archive whose event writers are all closed.
        check(
            unsafe { ffi::OTF2_Archive_CloseEvtFiles(self.archive) },
            "OTF2_Archive_CloseEvtFiles",
        )?;
        Ok(Written {
            events,
            first: self.first,
            last: self.last,
        })
    }
}

impl Otf2Sink for EventFiles {
    type Error = Otf2Error;

    fn event(&mut self, tid: u32, e: &Timed) -> Result<(), Otf2Error> {
        let w = self.writer(tid)?;
        // SAFETY: a writer of this archive, still open.
        unsafe { write_event(w.writer, e.ts_ns, &e.event)? };
        w.count += 1;
        self.first = Some(self.first.map_or(e.ts_ns, |f| f.min(e.ts_ns)));
        self.last = Some(self.last.map_or(e.ts_ns, |l| l.max(e.ts_ns)));
        Ok(())
    }
}

/// # Safety
/// `w` is a valid event writer.
unsafe fn write_event(w: *mut ffi::EvtWriter, t: u64, e: &Event) -> Result<(), Otf2Error> {
    let n = ptr::null_mut();
    // SAFETY: the caller's writer; the metric arrays live across their call.
    let (code, call) = unsafe {
        match *e {
            Event::Enter { region } => (
                ffi::OTF2_EvtWriter_Enter(w, n, t, region),
                "OTF2_EvtWriter_Enter",
            ),
            Event::Leave { region } => (
                ffi::OTF2_EvtWriter_Leave(w, n, t, region),
                "OTF2_EvtWriter_Leave",
            ),
            Event::MpiSend(m) => (
                ffi::OTF2_EvtWriter_MpiSend(w, n, t, m.peer, m.comm, m.tag, m.bytes),
                "OTF2_EvtWriter_MpiSend",
            ),
            Event::MpiIsend {
                message: m,
                request,
            } => (
                ffi::OTF2_EvtWriter_MpiIsend(w, n, t, m.peer, m.comm, m.tag, m.bytes, request),
                "OTF2_EvtWriter_MpiIsend",
            ),
            Event::MpiIsendComplete { request } => (
                ffi::OTF2_EvtWriter_MpiIsendComplete(w, n, t, request),
                "OTF2_EvtWriter_MpiIsendComplete",
            ),
            Event::MpiIrecvRequest { request } => (
                ffi::OTF2_EvtWriter_MpiIrecvRequest(w, n, t, request),
                "OTF2_EvtWriter_MpiIrecvRequest",
            ),
            Event::MpiRecv(m) => (
                ffi::OTF2_EvtWriter_MpiRecv(w, n, t, m.peer, m.comm, m.tag, m.bytes),
                "OTF2_EvtWriter_MpiRecv",
            ),
            Event::MpiIrecv {
                message: m,
                request,
            } => (
                ffi::OTF2_EvtWriter_MpiIrecv(w, n, t, m.peer, m.comm, m.tag, m.bytes, request),
                "OTF2_EvtWriter_MpiIrecv",
            ),
            Event::MpiCollectiveBegin => (
                ffi::OTF2_EvtWriter_MpiCollectiveBegin(w, n, t),
                "OTF2_EvtWriter_MpiCollectiveBegin",
            ),
            Event::MpiCollectiveEnd {
                op,
                comm,
                root,
                sent,
                received,
            } => (
                ffi::OTF2_EvtWriter_MpiCollectiveEnd(w, n, t, op as u8, comm, root, sent, received),
                "OTF2_EvtWriter_MpiCollectiveEnd",
            ),
            Event::ThreadCreate { comm, sequence } => (
                ffi::OTF2_EvtWriter_ThreadCreate(w, n, t, comm, sequence),
                "OTF2_EvtWriter_ThreadCreate",
            ),
            Event::ThreadBegin { comm, sequence } => (
                ffi::OTF2_EvtWriter_ThreadBegin(w, n, t, comm, sequence),
                "OTF2_EvtWriter_ThreadBegin",
            ),
            Event::ThreadEnd { comm, sequence } => (
                ffi::OTF2_EvtWriter_ThreadEnd(w, n, t, comm, sequence),
                "OTF2_EvtWriter_ThreadEnd",
            ),
            Event::CriticalPath { ns } => {
                let types = [ffi::TYPE_UINT64];
                let values = [ffi::MetricValue { unsigned_int: ns }];
                (
                    ffi::OTF2_EvtWriter_Metric(
                        w,
                        n,
                        t,
                        CRITICAL_METRIC,
                        1,
                        types.as_ptr(),
                        values.as_ptr(),
                    ),
                    "OTF2_EvtWriter_Metric",
                )
            }
        }
    };
    check(code, call)
}

/// The wall clock (Unix ns) at monotonic time `ts_ns`, from the pair the recording
/// read together at its start; `OTF2_UNDEFINED_TIMESTAMP` when it has none.
fn realtime(trace: &Otf2Trace, ts_ns: u64) -> u64 {
    if trace.start_unix_ns == 0 {
        return u64::MAX;
    }
    let at = trace.start_unix_ns as i128 + (ts_ns as i128 - trace.start_monotonic_ns as i128);
    u64::try_from(at).unwrap_or(u64::MAX)
}

/// A region's strings: its name (demangled) and its canonical name (the symbol).
struct RegionNames {
    name: u32,
    canonical: u32,
}

/// A group of the global definitions.
struct Group {
    name: u32,
    kind: u8,
    paradigm: u8,
    members: Vec<u64>,
}

fn write_definitions(
    archive: &Archive,
    trace: &Otf2Trace,
    events: &HashMap<u32, u64>,
    first: u64,
    last: u64,
) -> Result<(), Otf2Error> {
    let a = archive.0;
    let mut s = Strings::default();
    let empty = s.id("");
    let machine = s.id(&trace.machine);
    let node_class = s.id("node");
    let processes: Vec<u32> = trace.processes.iter().map(|p| s.id(&p.name)).collect();
    let locations: Vec<u32> = trace.locations.iter().map(|l| s.id(&l.name)).collect();
    let regions: Vec<RegionNames> = trace
        .regions
        .iter()
        .map(|r| RegionNames {
            name: s.id(&r.name),
            canonical: s.id(&r.canonical_name),
        })
        .collect();
    // Groups: per paradigm one of the locations taking part, then each communicator's
    // members as indices into it.
    let mut groups: Vec<Group> = Vec::new();
    let mut comm_groups: Vec<u32> = Vec::new();
    for (paradigm, locs, name) in [
        (Paradigm::Mpi, &trace.mpi_locations, "MPI ranks"),
        (Paradigm::Pthread, &trace.thread_locations, "threads"),
    ] {
        if !trace.comms.iter().any(|c| c.paradigm == paradigm) {
            continue;
        }
        groups.push(Group {
            name: s.id(name),
            kind: ffi::GROUP_TYPE_COMM_LOCATIONS,
            paradigm: paradigm as u8,
            members: locs.clone(),
        });
    }
    for c in &trace.comms {
        comm_groups.push(groups.len() as u32);
        groups.push(Group {
            name: s.id(&c.name),
            kind: ffi::GROUP_TYPE_COMM_GROUP,
            paradigm: c.paradigm as u8,
            members: c.members.clone(),
        });
    }
    let comm_names: Vec<u32> = trace.comms.iter().map(|c| s.id(&c.name)).collect();
    let metric_name = s.id("critical path");
    let metric_description = s.id(&format!(
        "work ({} clock) of this thread on the critical path so far",
        ClockKind::name(trace.clock)
    ));
    let metric_unit = s.id("ns");

    // SAFETY (this block): `a` is a valid archive and `w` its global definition writer;
    // every string and array lives across its call.
    unsafe {
        let w = non_null(
            ffi::OTF2_Archive_GetGlobalDefWriter(a),
            "OTF2_Archive_GetGlobalDefWriter",
        )?;
        check(
            ffi::OTF2_GlobalDefWriter_WriteClockProperties(
                w,
                1_000_000_000,
                first,
                last - first + 1,
                realtime(trace, first),
            ),
            "OTF2_GlobalDefWriter_WriteClockProperties",
        )?;
        for (id, text) in s.list.iter().enumerate() {
            // Names come from the recording: a NUL byte in one is cut there.
            let text = text.split('\0').next().unwrap_or("");
            let c = CString::new(text).unwrap();
            check(
                ffi::OTF2_GlobalDefWriter_WriteString(w, id as u32, c.as_ptr()),
                "OTF2_GlobalDefWriter_WriteString",
            )?;
        }
        check(
            ffi::OTF2_GlobalDefWriter_WriteSystemTreeNode(
                w,
                0,
                machine,
                node_class,
                ffi::UNDEFINED_UINT32,
            ),
            "OTF2_GlobalDefWriter_WriteSystemTreeNode",
        )?;
        for (i, &name) in processes.iter().enumerate() {
            check(
                ffi::OTF2_GlobalDefWriter_WriteLocationGroup(
                    w,
                    i as u32,
                    name,
                    ffi::LOCATION_GROUP_TYPE_PROCESS,
                    0,
                    ffi::UNDEFINED_UINT32,
                ),
                "OTF2_GlobalDefWriter_WriteLocationGroup",
            )?;
        }
        for (l, &name) in trace.locations.iter().zip(&locations) {
            check(
                ffi::OTF2_GlobalDefWriter_WriteLocation(
                    w,
                    l.tid as u64,
                    name,
                    ffi::LOCATION_TYPE_CPU_THREAD,
                    events.get(&l.tid).copied().unwrap_or(0),
                    l.process,
                ),
                "OTF2_GlobalDefWriter_WriteLocation",
            )?;
        }
        for (i, (r, names)) in trace.regions.iter().zip(&regions).enumerate() {
            check(
                ffi::OTF2_GlobalDefWriter_WriteRegion(
                    w,
                    i as u32,
                    names.name,
                    names.canonical,
                    empty,
                    r.role as u8,
                    r.paradigm as u8,
                    ffi::REGION_FLAG_NONE,
                    empty,
                    0,
                    0,
                ),
                "OTF2_GlobalDefWriter_WriteRegion",
            )?;
        }
        for (i, g) in groups.iter().enumerate() {
            check(
                ffi::OTF2_GlobalDefWriter_WriteGroup(
                    w,
                    i as u32,
                    g.name,
                    g.kind,
                    g.paradigm,
                    ffi::GROUP_FLAG_NONE,
                    g.members.len() as u32,
                    g.members.as_ptr(),
                ),
                "OTF2_GlobalDefWriter_WriteGroup",
            )?;
        }
        for (i, (&name, &group)) in comm_names.iter().zip(&comm_groups).enumerate() {
            check(
                ffi::OTF2_GlobalDefWriter_WriteComm(
                    w,
                    i as u32,
                    name,
                    group,
                    ffi::UNDEFINED_UINT32,
                    ffi::COMM_FLAG_NONE,
                ),
                "OTF2_GlobalDefWriter_WriteComm",
            )?;
        }
        check(
            ffi::OTF2_GlobalDefWriter_WriteMetricMember(
                w,
                0,
                metric_name,
                metric_description,
                ffi::METRIC_TYPE_OTHER,
                ffi::METRIC_ACCUMULATED_START,
                ffi::TYPE_UINT64,
                ffi::BASE_DECIMAL,
                0,
                metric_unit,
            ),
            "OTF2_GlobalDefWriter_WriteMetricMember",
        )?;
        let members = [0u32];
        check(
            ffi::OTF2_GlobalDefWriter_WriteMetricClass(
                w,
                CRITICAL_METRIC,
                1,
                members.as_ptr(),
                ffi::METRIC_ASYNCHRONOUS,
                ffi::RECORDER_KIND_ABSTRACT,
            ),
            "OTF2_GlobalDefWriter_WriteMetricClass",
        )?;
        // Every location has a local definition file: empty, or the mapping of the
        // thread contingent's local id in its events.
        check(
            ffi::OTF2_Archive_OpenDefFiles(a),
            "OTF2_Archive_OpenDefFiles",
        )?;
        for l in &trace.locations {
            let d = non_null(
                ffi::OTF2_Archive_GetDefWriter(a, l.tid as u64),
                "OTF2_Archive_GetDefWriter",
            )?;
            if let Some(m) = l.thread_comm {
                let map = non_null(
                    ffi::OTF2_IdMap_Create(ffi::ID_MAP_SPARSE, 1),
                    "OTF2_IdMap_Create",
                )?;
                let added = ffi::OTF2_IdMap_AddIdPair(map, m.local as u64, m.global as u64);
                let written = if added == ffi::SUCCESS {
                    ffi::OTF2_DefWriter_WriteMappingTable(d, ffi::MAPPING_COMM, map)
                } else {
                    added
                };
                ffi::OTF2_IdMap_Free(map);
                check(written, "OTF2_DefWriter_WriteMappingTable")?;
            }
            check(
                ffi::OTF2_Archive_CloseDefWriter(a, d),
                "OTF2_Archive_CloseDefWriter",
            )?;
        }
        check(
            ffi::OTF2_Archive_CloseDefFiles(a),
            "OTF2_Archive_CloseDefFiles",
        )?;
    }
    Ok(())
}
