//! A recording session: load the probes, pick the targets (running processes, a command
//! we launch, or the whole system), stream what the probes write (per-CPU slots and the
//! ring buffer) into the recording and the summary, and stop cleanly when the targets
//! are gone, at the deadline or on a signal.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustc_hash::FxHashSet;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, SignalKind};

use std::collections::HashMap;

use crate::analysis::profile::Profile;
use crate::analysis::workclock::ClockKind;
use crate::analysis::Pipeline;
use crate::funcs::{FuncError, FunctionSelector};
use crate::libraries::{self, ImportedCalls, Library, LibrarySet, ThreadLibraries};
use crate::predict::online::{OnlinePrediction, OnlineReplay, OnlineWhatIf};
use crate::predict::replay::ReplayError;
use crate::probes::slots::CpuSlots;
use crate::probes::{ProbeError, ProbeOptions, Probes};
use crate::procfs;
use crate::recording::{
    Item, LibraryInfo, RecordingError, RecordingMeta, RecordingWriter, Trailer,
};
use crate::records::{self, Record};
use crate::summary::{Summary, SummaryBuilder};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("tracing needs root (CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN); run as root")]
    NotRoot,
    #[error("no process with PID {0}")]
    NoSuchProcess(u32),
    #[error("nothing to trace: give --pid PID, --all, or -- COMMAND")]
    NoTarget,
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("cannot read MPI/PVM library {path}: {reason}")]
    Library { path: PathBuf, reason: String },
    #[error("{0}")]
    Probe(#[from] ProbeError),
    #[error("{0}")]
    Func(#[from] FuncError),
    #[error("writing the recording: {0}")]
    Recording(#[from] RecordingError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("malformed record from the probes: {0}")]
    Decode(#[from] records::DecodeError),
}

pub struct RecordOptions {
    pub pids: Vec<u32>,
    pub command: Vec<String>,
    pub system_wide: bool,
    pub duration: Option<Duration>,
    pub output: Option<PathBuf>,
    /// Written before the probes are detached (which takes seconds).
    pub summary_json: Option<PathBuf>,
    pub profile_json: Option<PathBuf>,
    pub funcs: Vec<String>,
    pub libs: Vec<PathBuf>,
    /// Probe the C library's pthread lock, condition variable and barrier calls in every
    /// traced process (per-process probes).
    pub locks: bool,
    pub ring_mib: u32,
    /// Benchmarks only: empty programs instead of the per-call probes (`ProbeOptions::floor`).
    pub floor_probes: bool,
    /// Work clock of the critical path engine.
    pub clock: ClockKind,
    /// Also replay the run online under another placement and/or network
    /// (`--whatif-placement`, `--whatif-network`).
    pub whatif: Option<OnlineReplay>,
    /// Live samples: every `interval`, `on_sample` gets the profile so far.
    pub interval: Option<Duration>,
    pub on_sample: Option<SampleHook>,
    /// Called when the outputs are written and the probes are about to be detached.
    pub on_detach: Option<Box<dyn FnOnce(usize)>>,
    /// Called once every probe is attached and the targets are traced.
    pub on_ready: Option<ReadyHook>,
}

pub type ReadyHook = Box<dyn FnOnce(&Ready)>;
pub type SampleHook = Box<dyn FnMut(&Profile)>;

/// What is being traced, reported when tracing starts.
pub struct Ready {
    pub libraries: usize,
    pub probes: usize,
    pub processes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    TargetsExited,
    Deadline,
    Signal,
}

pub struct RecordOutcome {
    pub summary: Summary,
    /// The critical path profile computed online while tracing.
    pub profile: Profile,
    pub stop: StopReason,
    /// Exit status of the launched command, if it was reaped.
    pub command_status: Option<i32>,
    /// The online what-if prediction, when asked for.
    pub whatif: Option<Result<OnlinePrediction, ReplayError>>,
    /// `--func` patterns that matched no function anywhere.
    pub unmatched_funcs: Vec<String>,
    pub libraries: Vec<(PathBuf, crate::calls::Flavor, usize)>,
}

/// Runs a whole session. Synchronous set-up (including the fork of a launched command)
/// happens before the single-threaded runtime starts.
pub fn record(opts: RecordOptions) -> Result<RecordOutcome, SessionError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(SessionError::NotRoot);
    }
    if opts.pids.is_empty() && opts.command.is_empty() && !opts.system_wide {
        return Err(SessionError::NoTarget);
    }
    for &pid in &opts.pids {
        if pid == 0 || !procfs::is_alive(pid) {
            return Err(SessionError::NoSuchProcess(pid));
        }
    }
    let program = match opts.command.first() {
        Some(c) => Some(find_in_path(c).ok_or_else(|| SessionError::CommandNotFound(c.clone()))?),
        None => None,
    };
    let mut targets: Vec<u32> = opts
        .pids
        .iter()
        .flat_map(|&p| procfs::descendants(p))
        .collect();
    targets.sort_unstable();
    targets.dedup();

    let (user_libs, found_libs) = find_libraries(&opts.libs, &targets)?;
    let mut funcs = FunctionSelector::new(&opts.funcs)?;
    // Every traced exec is held until the libraries and procedures it needs are probed.
    let mut probes = Probes::load(&ProbeOptions {
        system_wide: opts.system_wide,
        hold_on_exec: !opts.system_wide,
        ring_bytes: opts.ring_mib.max(1) << 20,
        floor: opts.floor_probes,
    })?;
    let mut libs = LibrarySet::new(found_libs);
    // Libraries the user named, those the targets have loaded, and, system-wide, all.
    let mapped = libraries::mapped_candidates(&targets);
    libs.probe(
        &mut probes,
        |p| opts.system_wide || user_libs.contains(p) || mapped.contains(p),
        &ImportedCalls::All,
    )?;
    let mut locks = opts.locks.then(LockProbes::new);
    if let Some(locks) = &mut locks {
        for &pid in &targets {
            locks.attach_running(&mut probes, pid);
        }
    }
    let mut new_probes = funcs.attach_fixed_paths(&mut probes)?;
    for &pid in &targets {
        new_probes.extend(funcs.attach_in_process(&mut probes, pid)?);
    }
    if opts.system_wide {
        new_probes.extend(funcs.attach_everywhere(&mut probes)?);
    }

    let meta = RecordingMeta {
        tracer_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: hostname(),
        command: opts.command.clone(),
        pids: opts.pids.clone(),
        system_wide: opts.system_wide,
        start_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        start_monotonic_ns: monotonic_ns(),
        libraries: libs.infos(),
    };
    let open_mpi: Vec<LibraryInfo> = meta
        .libraries
        .iter()
        .filter(|l| l.flavor == crate::calls::Flavor::OpenMpi)
        .cloned()
        .collect();
    let mut sink = Sink::new(&meta, opts.output.as_deref(), open_mpi, opts.clock)?;
    sink.whatif = opts.whatif.map(OnlineWhatIf::new);
    for p in &new_probes {
        sink.probe(p)?;
    }
    for &pid in &targets {
        probes.trace_process(pid, &procfs::threads_of(pid))?;
        sink.see_process(pid)?;
    }

    let child = match program {
        Some(program) => Some(launch(&program, &opts.command, &mut probes)?),
        None => None,
    };

    if let Some(ready) = opts.on_ready {
        ready(&Ready {
            libraries: libs.probed().len(),
            probes: probes.attach_count,
            processes: targets.len() + child.is_some() as usize,
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut ctx = LoopContext {
        probes,
        funcs,
        libs,
        locks,
        sink,
        child,
        command_status: None,
        system_wide: opts.system_wide,
        on_sample: opts.on_sample,
        unprobed_mpi_calls: BTreeMap::new(),
    };
    let stop = runtime.block_on(event_loop(&mut ctx, opts.duration, opts.interval))?;
    let LoopContext {
        mut probes,
        funcs,
        libs,
        locks,
        sink,
        command_status,
        unprobed_mpi_calls,
        ..
    } = ctx;
    let lost = probes.lost()?;
    // Every output is complete before the probes go: detaching takes seconds.
    let (mut summary, profile, whatif) = sink.finish(lost)?;
    summary.tracer_cpu_ns = own_cpu_ns();
    summary.unprobed_mpi_calls = Some(unprobed_mpi_calls);
    write_json(opts.summary_json.as_deref(), &summary)?;
    write_json(opts.profile_json.as_deref(), &profile)?;
    let detacher = locks.map(|l| l.detacher);
    if let Some(detaching) = opts.on_detach {
        let pending = detacher.as_ref().map_or(0, Detacher::pending);
        detaching(probes.attach_count + pending);
    }
    drop(probes);
    if let Some(d) = detacher {
        d.finish();
    }
    Ok(RecordOutcome {
        summary,
        profile,
        whatif,
        stop,
        command_status,
        unmatched_funcs: funcs.unmatched(),
        libraries: libs.probed(),
    })
}

/// Where decoded records go: the recording file (if any) and the summary.
struct Sink {
    writer: Option<RecordingWriter>,
    /// Open MPI libraries, to find each process's MPI_COMM_WORLD handle.
    open_mpi: Vec<LibraryInfo>,
    summary: SummaryBuilder,
    /// The online critical path engine, fed in timestamp order.
    pipeline: Pipeline,
    /// The online what-if replay, fed the same items.
    whatif: Option<OnlineWhatIf>,
    clock: ClockKind,
    commands: HashMap<u32, String>,
    /// Processes inspected: looked up for every record (Fx: see `analysis`).
    seen: FxHashSet<u32>,
    inspected_after_mpi: FxHashSet<u32>,
    total: u64,
}

impl Sink {
    fn new(
        meta: &RecordingMeta,
        output: Option<&Path>,
        open_mpi: Vec<LibraryInfo>,
        clock: ClockKind,
    ) -> Result<Self, SessionError> {
        Ok(Sink {
            open_mpi,
            writer: output
                .map(|p| RecordingWriter::create(p, meta))
                .transpose()?,
            summary: SummaryBuilder::new(),
            pipeline: Pipeline::new(clock),
            whatif: None,
            clock,
            commands: HashMap::new(),
            seen: FxHashSet::default(),
            inspected_after_mpi: FxHashSet::default(),
            total: 0,
        })
    }

    fn probe(&mut self, p: &crate::recording::FunctionProbe) -> Result<(), SessionError> {
        self.summary.probe(p);
        self.pipeline.item(&Item::Probe(p.clone()));
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Probe(p.clone()));
        }
        if let Some(w) = &mut self.writer {
            w.probe(p)?;
        }
        Ok(())
    }

    /// Records what /proc says about a process the first time we see it.
    fn see_process(&mut self, pid: u32) -> Result<(), SessionError> {
        if pid == 0 || !self.seen.insert(pid) {
            return Ok(());
        }
        self.inspect(pid)
    }

    fn inspect(&mut self, pid: u32) -> Result<(), SessionError> {
        let mut info = procfs::inspect(pid);
        info.mpi_world_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_world_handle(l, &info));
        info.mpi_self_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_self_handle(l, &info));
        self.summary.process(&info);
        self.pipeline.item(&Item::Process(info.clone()));
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Process(info.clone()));
        }
        if !info.command.is_empty() {
            self.commands.insert(info.pid, info.command.clone());
        }
        if let Some(w) = &mut self.writer {
            w.process(&info)?;
        }
        Ok(())
    }

    fn record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        let h = rec.header();
        if from_traced_thread(rec) {
            self.see_process(h.tgid)?;
        }
        match rec {
            // After exec the command line and mappings are new; at the first MPI/PVM call
            // the libraries are mapped (they were not yet at exec).
            Record::Exec(_) => {
                self.inspected_after_mpi.remove(&h.tgid);
                self.inspect(h.tgid)?;
            }
            Record::CallEnter(_) if self.inspected_after_mpi.insert(h.tgid) => {
                self.inspect(h.tgid)?
            }
            _ => {}
        }
        self.total += 1;
        self.summary.record(rec);
        self.pipeline.record(rec);
        if let Some(w) = &mut self.whatif {
            w.item(&Item::Record(rec.clone()));
        }
        if let Some(w) = &mut self.writer {
            w.record(raw)?;
        }
        Ok(())
    }

    /// The profile so far (records still in the reorder window are not in it yet).
    fn profile(&self, lost: u64) -> Profile {
        Profile::new(&self.pipeline.analyzer, self.clock, lost, &self.commands)
    }

    #[allow(clippy::type_complexity)]
    fn finish(
        mut self,
        lost: u64,
    ) -> Result<
        (
            Summary,
            Profile,
            Option<Result<OnlinePrediction, ReplayError>>,
        ),
        SessionError,
    > {
        self.pipeline.flush();
        let profile = self.profile(lost);
        let whatif = self.whatif.take().map(OnlineWhatIf::finish);
        if let Some(w) = self.writer {
            w.finish(&Trailer {
                events_total: self.total,
                events_lost: lost,
            })?;
        }
        Ok((self.summary.finish(lost), profile, whatif))
    }
}

/// Whether a record's header is a traced thread (the waker of a wakeup may be untraced;
/// a switch-in record's header is the thread that leaves the CPU).
fn from_traced_thread(rec: &Record) -> bool {
    !matches!(
        rec,
        Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
    )
}

/// `--locks`: probes on the C library's pthread calls, scoped to each traced process
/// (uprobes with a pid: the kernel sets the breakpoints in that process's pages only, so
/// the rest of the machine never traps). A process is probed when the session first sees
/// it (at exec, while it is held, or at its first event after a fork), if its program or
/// libraries import one of the calls, and its probes are detached, on a thread of their
/// own, when it exits.
struct LockProbes {
    libs: ThreadLibraries,
    /// Processes seen (probed, or with nothing to probe), until they exit.
    probed: HashSet<u32>,
    detacher: Detacher,
}

impl LockProbes {
    fn new() -> Self {
        LockProbes {
            libs: ThreadLibraries::new(),
            probed: HashSet::new(),
            detacher: Detacher::spawn(),
        }
    }

    /// A running process: the C library it has mapped. (Records of a process that
    /// exited can still arrive: the switch away from its last thread.)
    fn attach_running(&mut self, probes: &mut Probes, pid: u32) {
        if !self.probed.contains(&pid) && procfs::is_alive(pid) {
            self.probed.insert(pid);
            let lib = self.libs.of_process(pid);
            Self::attach(probes, lib, pid);
        }
    }

    /// A process held at exec: the C library its new program loads. The probes of a
    /// process follow it through exec (they filter by process, and the kernel sets them
    /// in the new program's copy of the library when it maps it), so only a new library
    /// file adds probes.
    fn attach_exec(&mut self, probes: &mut Probes, pid: u32, needed: &BTreeSet<PathBuf>) {
        self.probed.insert(pid);
        let mut files = needed.clone();
        files.extend(
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .ok()
                .and_then(|p| p.canonicalize().ok()),
        );
        let lib = self.libs.for_program(&files);
        Self::attach(probes, lib, pid);
    }

    fn attach(probes: &mut Probes, lib: Option<&libraries::ThreadLibrary>, pid: u32) {
        let Some(lib) = lib else { return };
        match probes.attach_thread_calls(lib, pid) {
            Ok(n) if n > 0 => log::debug!(
                "probed {n} pthread calls of {} in pid {pid}",
                lib.path.display()
            ),
            Ok(_) => {}
            // It may have exited meanwhile; lock records of a process are best effort.
            Err(e) if procfs::is_alive(pid) => log::warn!("--locks in pid {pid}: {e}"),
            Err(_) => {}
        }
    }

    /// The process is gone: its probes go (on the detacher's thread).
    fn exited(&mut self, probes: &mut Probes, pid: u32) {
        if self.probed.remove(&pid) {
            self.detacher.detach(probes.take_process_links(pid));
        }
    }
}

/// Drops probe links on a thread of its own: the kernel takes 0.1-0.2 s per probe, and the
/// event loop must not wait for it.
struct Detacher {
    tx: Option<std::sync::mpsc::Sender<Vec<aya::programs::uprobe::UProbeLink>>>,
    pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Detacher {
    fn spawn() -> Self {
        use std::sync::atomic::Ordering;
        let (tx, rx) = std::sync::mpsc::channel::<Vec<aya::programs::uprobe::UProbeLink>>();
        let pending = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let left = pending.clone();
        let thread = std::thread::Builder::new()
            .name("tracer-detach".into())
            .spawn(move || {
                for links in rx {
                    for link in links {
                        drop(link);
                        left.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            })
            .ok();
        Detacher {
            tx: Some(tx),
            pending,
            thread,
        }
    }

    fn detach(&self, links: Vec<aya::programs::uprobe::UProbeLink>) {
        if links.is_empty() {
            return;
        }
        let n = links.len();
        self.pending
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        // Without the thread (it could not start) the links go here and now.
        if let Some(Err(e)) = self.tx.as_ref().map(|tx| tx.send(links)) {
            drop(e.0);
            self.pending
                .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Probes handed over and not detached yet.
    fn pending(&self) -> usize {
        self.pending.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until every probe handed over is detached.
    fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct LoopContext {
    probes: Probes,
    funcs: FunctionSelector,
    libs: LibrarySet,
    locks: Option<LockProbes>,
    sink: Sink,
    child: Option<u32>,
    command_status: Option<i32>,
    system_wide: bool,
    on_sample: Option<SampleHook>,
    /// MPI calls the programs held at exec import and no probe covers: programs each.
    unprobed_mpi_calls: BTreeMap<String, u64>,
}

impl LoopContext {
    fn handle(&mut self, raw: &[u8]) -> Result<(), SessionError> {
        let rec = records::decode(raw)?;
        self.sink.record(raw, &rec)?;
        if let Record::Exec(e) = &rec {
            let pid = e.header.tgid;
            // The probes stopped the process at exec: probe the MPI/PVM libraries and the
            // procedures the new program needs, then let it run.
            let needed = libraries::needed_by(pid);
            if let Some(locks) = &mut self.locks {
                locks.attach_exec(&mut self.probes, pid, &needed);
            }
            let imports = ImportedCalls::of_process(pid, &needed);
            for name in imports.unprobed() {
                *self.unprobed_mpi_calls.entry(name).or_default() += 1;
            }
            let libs = self
                .libs
                .probe(&mut self.probes, |p| needed.contains(p), &imports);
            let attached = libs.map_err(SessionError::from).and_then(|()| {
                self.funcs
                    .attach_in_process(&mut self.probes, pid)
                    .map_err(SessionError::from)
            });
            if !self.system_wide {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            }
            for p in attached? {
                self.sink.probe(&p)?;
            }
        }
        if let Some(locks) = &mut self.locks {
            let pid = rec.header().tgid;
            match &rec {
                Record::Exit(x) if x.group_dead != 0 => locks.exited(&mut self.probes, pid),
                // A process forked by a traced one (it runs already: calls before this
                // point are not seen), or one that became traced in system-wide mode.
                _ if from_traced_thread(&rec) => locks.attach_running(&mut self.probes, pid),
                _ => {}
            }
        }
        Ok(())
    }

    /// True when no traced process is alive any more.
    fn targets_gone(&mut self) -> Result<bool, SessionError> {
        if let Some(child) = self.child {
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            if unsafe { libc::waitpid(child as i32, &mut status, libc::WNOHANG) } == child as i32 {
                self.command_status = Some(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                });
                self.child = None;
            }
        }
        // While the command we launched runs, a target is alive: no need to list the
        // traced set, a walk of the probes' 65,536-bucket hash map every tick (4 % of
        // the tracer's time in a futex flood).
        if self.child.is_some() {
            return Ok(false);
        }
        Ok(!self.probes.traced_ids()?.into_iter().any(procfs::is_alive))
    }
}

/// The tracer's own CPU time so far (all its threads, not its children).
fn own_cpu_ns() -> Option<u64> {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Some(ns(u.ru_utime) + ns(u.ru_stime))
}

/// What the probes wrote since the last drain: the ring's records are copied out (it
/// hands them over one at a time), the slots' are read where they are.
#[derive(Default)]
struct RingCopy {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// Hands every record the probes have written so far to `ctx`, in timestamp order across
/// the ring and the CPUs' slots (`records::merge_by_time`).
fn drain(
    ring: &mut aya::maps::RingBuf<aya::maps::MapData>,
    slots: &CpuSlots,
    copy: &mut RingCopy,
    ctx: &mut LoopContext,
) -> Result<(), SessionError> {
    copy.bytes.clear();
    copy.ends.clear();
    while let Some(item) = ring.next() {
        copy.bytes.extend_from_slice(&item);
        copy.ends.push(copy.bytes.len());
    }
    let unread = slots.unread();
    let mut streams: Vec<Box<dyn Iterator<Item = &[u8]>>> = Vec::with_capacity(unread.len() + 1);
    let bytes = &copy.bytes;
    streams.push(Box::new(
        std::iter::once(0)
            .chain(copy.ends.iter().copied())
            .zip(copy.ends.iter().copied())
            .map(move |(start, end)| &bytes[start..end]),
    ));
    for u in &unread {
        streams.push(Box::new(
            (u.tail..u.head).map(move |n| records::in_slot(slots.slot(u.cpu, n))),
        ));
    }
    records::merge_by_time(streams, |raw| records::unpair(raw, |r| ctx.handle(r)))?;
    for u in unread {
        slots.release(u);
    }
    Ok(())
}

async fn event_loop(
    ctx: &mut LoopContext,
    duration: Option<Duration>,
    interval: Option<Duration>,
) -> Result<StopReason, SessionError> {
    let ring = ctx.probes.take_ring()?;
    let slots = ctx.probes.take_slots()?;
    let mut copy = RingCopy::default();
    // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the
    // AsyncFd is dropped at the end of this function.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| SessionError::Io(e.into()))?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    // The probes wake us only when the ring fills up; the tick drains it, and the slots,
    // regularly.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::from_secs(u64::MAX / 4)));
    tokio::pin!(deadline);
    let mut samples = tokio::time::interval(interval.unwrap_or(Duration::from_secs(3600)));
    samples.tick().await;
    let stop = loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                drain(guard.get_inner_mut(), &slots, &mut copy, ctx)?;
                guard.clear_ready();
            }
            _ = tick.tick() => {
                // Drain first: a fork or exec still in the ring may add targets.
                drain(ring.get_mut(), &slots, &mut copy, ctx)?;
                if !ctx.system_wide && ctx.targets_gone()? {
                    break StopReason::TargetsExited;
                }
            }
            _ = samples.tick(), if interval.is_some() => {
                drain(ring.get_mut(), &slots, &mut copy, ctx)?;
                let lost = ctx.probes.lost()?;
                let profile = ctx.sink.profile(lost);
                if let Some(hook) = &mut ctx.on_sample {
                    hook(&profile);
                }
            }
            _ = sigint.recv() => break StopReason::Signal,
            _ = sigterm.recv() => break StopReason::Signal,
            _ = &mut deadline, if duration.is_some() => break StopReason::Deadline,
        }
    };
    drain(ring.get_mut(), &slots, &mut copy, ctx)?;
    Ok(stop)
}

/// Candidate libraries: the user's (returned also as a set of canonical paths, always
/// probed), the installed ones, and those the targets have mapped.
fn find_libraries(
    user: &[PathBuf],
    targets: &[u32],
) -> Result<(HashSet<PathBuf>, Vec<Library>), SessionError> {
    let mut libs: Vec<Library> = Vec::new();
    let mut user_set = HashSet::new();
    for path in user {
        let lib = Library::open(path).map_err(|e| SessionError::Library {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let Some(mut lib) = lib else {
            return Err(SessionError::Library {
                path: path.clone(),
                reason: "it defines no MPI or PVM entry point".into(),
            });
        };
        lib.path = lib.path.canonicalize().unwrap_or(lib.path);
        user_set.insert(lib.path.clone());
        libs.push(lib);
    }
    let mut found = libraries::installed_candidates();
    found.extend(libraries::mapped_candidates(targets));
    for path in found {
        if user_set.contains(&path) {
            continue;
        }
        // An unreadable or unrelated file among the candidates is skipped, not fatal.
        if let Ok(Some(lib)) = Library::open(&path) {
            libs.push(lib);
        }
    }
    Ok((user_set, libs))
}

fn find_in_path(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}

/// Forks the command, holds it until its pid is in the traced set, then lets it exec.
fn launch(program: &Path, argv: &[String], probes: &mut Probes) -> Result<u32, SessionError> {
    let prog = CString::new(program.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|e| std::io::Error::other(e.to_string())))
        .collect::<Result<_, _>>()?;
    let mut argp: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut fds = [0i32; 2];
    // SAFETY: the process is single-threaded here (no runtime yet), so fork is safe; the
    // child only calls async-signal-safe functions before exec.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        if pid == 0 {
            libc::close(fds[1]);
            let mut b = 0u8;
            libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            libc::execv(prog.as_ptr(), argp.as_ptr());
            libc::_exit(127);
        }
        libc::close(fds[0]);
        let pid = pid as u32;
        let traced = probes.trace_process(pid, &[pid]);
        libc::write(fds[1], [1u8].as_ptr().cast(), 1);
        libc::close(fds[1]);
        traced?;
        Ok(pid)
    }
}

fn write_json<T: serde::Serialize>(path: Option<&Path>, value: &T) -> Result<(), SessionError> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        std::fs::write(path, json + "\n").map_err(|e| {
            std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
        })?;
    }
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a local struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
