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

use crate::probes::slots::CpuSlots;
use crate::probes::{ProbeError, ProbeOptions, Probes};
use crate::target::funcs::{FuncError, FunctionSelector};
use crate::target::libraries::{
    self, ImportedCalls, Library, LibrarySet, ThreadCallSet, ThreadLibraries,
};
use crate::target::openmp::OpenMpProbes;
use crate::target::procfs;
use tracer_analysis::analysis::profile::Profile;
use tracer_analysis::analysis::workclock::ClockKind;
use tracer_analysis::analysis::Pipeline;
use tracer_analysis::format::calls;
use tracer_analysis::format::openmp::{self as lowering, OpenMpLowering};
use tracer_analysis::format::recording::{
    Item, LibraryInfo, RecordingError, RecordingMeta, RecordingWriter, Trailer,
};
use tracer_analysis::format::records::{self, Record};
use tracer_analysis::format::summary::{Summary, SummaryBuilder};
use tracer_analysis::predict::online::{OnlinePrediction, OnlineReplay, OnlineWhatIf};
use tracer_analysis::predict::replay::ReplayError;

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
    /// The ring's size in MiB; None sizes it for the machine
    /// ([`crate::probes::default_ring_bytes`]).
    pub ring_mib: Option<u32>,
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
    /// Called while tracing when the probes have lost events since the last call (the
    /// kernel's counter grew), at most once every [`LOSS_CHECK_PERIOD`].
    pub on_loss: Option<LossHook>,
    /// Called when the outputs are written and the probes are about to be detached.
    pub on_detach: Option<Box<dyn FnOnce(usize)>>,
    /// Called once every probe is attached and the targets are traced.
    pub on_ready: Option<ReadyHook>,
}

pub type ReadyHook = Box<dyn FnOnce(&Ready)>;
pub type SampleHook = Box<dyn FnMut(&Profile)>;
pub type LossHook = Box<dyn FnMut(&EventsSoFar)>;

/// How often the session looks at the kernel's lost-events counter while it traces: a
/// warning a second late is still in time, and a person can read one a second.
pub const LOSS_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// The events of a session so far: those the tracer has read, and those the probes
/// dropped because the buffers were full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsSoFar {
    pub recorded: u64,
    pub lost: u64,
}

impl EventsSoFar {
    /// Lost events as a percentage of all the probes produced.
    pub fn lost_percent(&self) -> f64 {
        let produced = self.recorded + self.lost;
        if produced == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / produced as f64
        }
    }
}

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

/// How the command `tracer record -- COMMAND` launched ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandStatus {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Killed { signal: i32 },
}

impl CommandStatus {
    fn from_wait_status(status: i32) -> Self {
        if libc::WIFEXITED(status) {
            CommandStatus::Exited(libc::WEXITSTATUS(status))
        } else {
            CommandStatus::Killed {
                signal: libc::WTERMSIG(status),
            }
        }
    }

    /// The status a shell would report (`$?`), which `tracer record` exits with, as
    /// `time` does: the exit code, or 128 + the signal for a command a signal killed.
    pub fn shell_code(self) -> u8 {
        match self {
            CommandStatus::Exited(code) => code as u8,
            CommandStatus::Killed { signal } => (128 + signal) as u8,
        }
    }
}

pub struct RecordOutcome {
    pub summary: Summary,
    /// The critical path profile computed online while tracing.
    pub profile: Profile,
    pub stop: StopReason,
    /// How the launched command ended, if it was reaped.
    pub command_status: Option<CommandStatus>,
    /// The online what-if prediction, when asked for.
    pub whatif: Option<Result<OnlinePrediction, ReplayError>>,
    /// `--func` patterns that matched no function anywhere.
    pub unmatched_funcs: Vec<String>,
    pub libraries: Vec<(PathBuf, tracer_analysis::format::calls::Flavor, usize)>,
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
        ring_bytes: opts.ring_mib.map(|mib| mib.max(1) << 20),
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
    let mut joins = ThreadCallProbes::joins();
    let mut locks = opts.locks.then(ThreadCallProbes::locks);
    let mut openmp = OpenMpProbes::default();
    for &pid in &targets {
        joins.attach_running(&mut probes, pid);
        openmp.attach_running(&mut probes, pid);
        if let Some(locks) = &mut locks {
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
        .filter(|l| l.flavor == tracer_analysis::format::calls::Flavor::OpenMpi)
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
        joins,
        locks,
        openmp,
        lowering: OpenMpLowering::default(),
        held_on_load: HashSet::new(),
        sink,
        child,
        command_status: None,
        system_wide: opts.system_wide,
        on_sample: opts.on_sample,
        on_loss: opts.on_loss,
        lost_reported: 0,
        unprobed_mpi_calls: BTreeMap::new(),
    };
    raise_reader_priority();
    let stop = runtime.block_on(event_loop(&mut ctx, opts.duration, opts.interval))?;
    let LoopContext {
        mut probes,
        funcs,
        libs,
        locks,
        sink,
        mut command_status,
        child,
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
    // Tracing stopped before the command ended. From a terminal, Ctrl-C reaches the
    // command too: give it a moment to end, so that its status is the tracer's (as
    // `time` does). At the deadline it runs on.
    if let (None, Some(child)) = (command_status, child) {
        let grace = match stop {
            StopReason::Signal => COMMAND_GRACE,
            StopReason::Deadline | StopReason::TargetsExited => Duration::ZERO,
        };
        command_status = reap_within(child, grace);
    }
    let detacher = locks.and_then(|l| l.detacher);
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

    fn probe(
        &mut self,
        p: &tracer_analysis::format::recording::FunctionProbe,
    ) -> Result<(), SessionError> {
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

    /// Records what /proc says about a process now, if it is still there: a process that
    /// exited before the reader got to its record has nothing left to say, and an empty
    /// snapshot would hide the one recorded before.
    fn refresh(&mut self, pid: u32) -> Result<(), SessionError> {
        if procfs::is_alive(pid) {
            self.inspect(pid)?;
        }
        Ok(())
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
                self.refresh(h.tgid)?;
            }
            Record::CallEnter(c)
                if tracer_analysis::format::calls::is_mpi_or_pvm(
                    tracer_analysis::format::calls::split_call_field(c.header.call).0,
                ) && self.inspected_after_mpi.insert(h.tgid) =>
            {
                self.refresh(h.tgid)?
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

/// Probes on the C library's pthread calls. A process is looked at when the session
/// first sees it (at exec, while it is held, or at its first event after a fork): if its
/// program or libraries import one of the calls, the file that defines them is probed.
/// - Thread creation and joins ([`ThreadCallProbes::joins`], always): in every process,
///   once per file. They are rare, so an untraced process that traps on one (the probes
///   drop its records in the kernel) loses nothing measurable, and no probe is attached
///   or detached per process.
/// - Locks ([`ThreadCallProbes::locks`], `--locks`): scoped to each traced process
///   (uprobes with a pid: the kernel sets the breakpoints in that process's pages only,
///   so the rest of the machine never traps on these hot calls), detached on a thread of
///   their own when the process exits.
struct ThreadCallProbes {
    libs: ThreadLibraries,
    /// Processes seen (probed, or with nothing to probe), until they exit.
    probed: HashSet<u32>,
    /// Per-process probes: what detaches them. None: probes for every process.
    detacher: Option<Detacher>,
}

impl ThreadCallProbes {
    fn joins() -> Self {
        ThreadCallProbes {
            libs: ThreadLibraries::new(ThreadCallSet::Lifecycle),
            probed: HashSet::new(),
            detacher: None,
        }
    }

    fn locks() -> Self {
        ThreadCallProbes {
            libs: ThreadLibraries::new(ThreadCallSet::Locks),
            probed: HashSet::new(),
            detacher: Some(Detacher::spawn()),
        }
    }

    /// A running process: the C library it has mapped. (Records of a process that
    /// exited can still arrive: the switch away from its last thread.)
    fn attach_running(&mut self, probes: &mut Probes, pid: u32) {
        if !self.probed.contains(&pid) && procfs::is_alive(pid) {
            self.probed.insert(pid);
            let per_process = self.detacher.is_some();
            let lib = self.libs.of_process(pid);
            Self::attach(probes, lib, pid, per_process);
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
        let per_process = self.detacher.is_some();
        let lib = self.libs.for_program(&files);
        Self::attach(probes, lib, pid, per_process);
    }

    fn attach(
        probes: &mut Probes,
        lib: Option<&libraries::ThreadLibrary>,
        pid: u32,
        per_process: bool,
    ) {
        let Some(lib) = lib else { return };
        match probes.attach_thread_calls(lib, per_process.then_some(pid)) {
            Ok(n) if n > 0 => log::debug!(
                "probed {n} pthread calls of {} (seen in pid {pid})",
                lib.path.display()
            ),
            Ok(_) => {}
            // It may have exited meanwhile; pthread records of a process are best effort.
            Err(e) if procfs::is_alive(pid) => log::warn!("pthread calls in pid {pid}: {e}"),
            Err(_) => {}
        }
    }

    /// The process is gone: its own probes go (on the detacher's thread).
    fn exited(&mut self, probes: &mut Probes, pid: u32) {
        if self.probed.remove(&pid) {
            if let Some(detacher) = &self.detacher {
                detacher.detach(probes.take_process_links(pid));
            }
        }
    }
}

/// Nice value of the thread that reads the buffers (this one, once the command is
/// launched: the command keeps the nice value it would have had).
const READER_NICE: i32 = -10;

/// Lets the reader drain the buffers when the traced program keeps every CPU busy (ranks
/// that poll while they wait): at the default nice value it got its share of a CPU
/// among them and fell behind (hpcc on 2 CPUs: 979,548 of 4.3 million records lost with
/// the default buffers; none at -10). It sleeps while the buffers fill, so the program
/// loses only the time the reader needs anyway. Linux keeps nice values per thread.
fn raise_reader_priority() {
    // SAFETY: plain setpriority(2) on the calling thread (`who` 0).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, READER_NICE) } != 0 {
        log::debug!(
            "reader priority unchanged: {}",
            std::io::Error::last_os_error()
        );
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
    joins: ThreadCallProbes,
    locks: Option<ThreadCallProbes>,
    openmp: OpenMpProbes,
    /// Turns the OpenMP probes' records into waits before anything reads them.
    lowering: OpenMpLowering,
    /// Processes the probes stop after each dlopen ([`LoopContext::hold_until_mpi`]).
    held_on_load: HashSet<u32>,
    sink: Sink,
    child: Option<u32>,
    command_status: Option<CommandStatus>,
    system_wide: bool,
    on_sample: Option<SampleHook>,
    on_loss: Option<LossHook>,
    /// The kernel's lost-events counter when `on_loss` was last called.
    lost_reported: u64,
    /// MPI calls the programs held at exec import and no probe covers: programs each.
    unprobed_mpi_calls: BTreeMap<String, u64>,
}

impl LoopContext {
    fn handle(&mut self, raw: &[u8]) -> Result<(), SessionError> {
        if records::peek_kind(raw)? == tracer_common::kind::LIBRARY_LOADED {
            return self.library_loaded(records::peek_header(raw)?.tgid);
        }
        let rec = records::decode(raw)?;
        if let Record::CallEnter(c) = &rec {
            if calls::spec(calls::split_call_field(c.header.call).0)
                .is_some_and(|s| s.role == calls::Role::OmpParallel)
            {
                self.openmp
                    .region_started(&mut self.probes, c.header.tgid, c.comm);
            }
        }
        if lowering::concerns(&rec) {
            let mut lowered = Vec::with_capacity(2);
            self.lowering.lower(&rec, |r| lowered.push(r));
            for r in &lowered {
                self.sink.record(r.as_bytes(), r)?;
            }
        } else {
            self.sink.record(raw, &rec)?;
        }
        if let Record::Exec(e) = &rec {
            let pid = e.header.tgid;
            // The probes stopped the process at exec: probe the MPI/PVM libraries and the
            // procedures the new program needs, then let it run.
            let needed = libraries::needed_by(pid);
            self.joins.attach_exec(&mut self.probes, pid, &needed);
            self.openmp.attach_exec(&mut self.probes, pid, &needed);
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
            self.hold_until_mpi(pid, &needed);
            if !self.system_wide {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            }
            for p in attached? {
                self.sink.probe(&p)?;
            }
        }
        let pid = rec.header().tgid;
        if matches!(&rec, Record::Exit(x) if x.group_dead != 0) && self.held_on_load.remove(&pid) {
            // Gone: nothing to hold any more.
            let _ = self.probes.hold_on_load(pid, false);
        }
        match &rec {
            Record::Exit(x) if x.group_dead != 0 => self.openmp.exited(pid),
            _ if from_traced_thread(&rec) => self.openmp.attach_running(&mut self.probes, pid),
            _ => {}
        }
        for calls in std::iter::once(&mut self.joins).chain(self.locks.as_mut()) {
            match &rec {
                Record::Exit(x) if x.group_dead != 0 => calls.exited(&mut self.probes, pid),
                // A process forked by a traced one (it runs already: calls before this
                // point are not seen), or one that became traced in system-wide mode.
                _ if from_traced_thread(&rec) => calls.attach_running(&mut self.probes, pid),
                _ => {}
            }
        }
        Ok(())
    }

    /// An MPI rank whose program maps no MPI/PVM library when it starts loads one later
    /// with dlopen (Python with mpi4py, R with Rmpi): the probes stop it after each
    /// dlopen until it has one. Only ranks (a launcher put their rank in their
    /// environment): launchers and their daemons never call MPI, and mpirun forwards
    /// each SIGCONT it gets to the whole job, which would let ranks held at their exec
    /// go on unprobed. (System-wide, processes are traced from their first call on and
    /// are never held.)
    fn hold_until_mpi(&mut self, pid: u32, needed: &BTreeSet<PathBuf>) {
        if self.system_wide || self.libs.any_of(needed) || procfs::env_rank(pid).is_none() {
            return;
        }
        let Some((path, dlopen)) = libraries::dlopen_in(needed) else {
            return; // a static program cannot dlopen
        };
        let held = self
            .probes
            .attach_load_probe(&path, &dlopen)
            .and_then(|_| self.probes.hold_on_load(pid, true));
        match held {
            Ok(()) => {
                self.held_on_load.insert(pid);
            }
            Err(e) => log::warn!("libraries pid {pid} loads later are not probed: {e}"),
        }
    }

    /// Process `pid`, held, returned from dlopen and is stopped: probe the MPI/PVM
    /// libraries (and selected procedures) it maps now, then let it go on. Once it has
    /// an MPI/PVM library it is held no more.
    fn library_loaded(&mut self, pid: u32) -> Result<(), SessionError> {
        let mapped = libraries::mapped_candidates(&[pid]);
        // The calls of a library loaded with dlopen: what its loader imports is not
        // known here (mpi4py's module imports nearly all of MPI anyway).
        let libs = self.libs.probe(
            &mut self.probes,
            |p| mapped.contains(p),
            &ImportedCalls::All,
        );
        let attached = libs.map_err(SessionError::from).and_then(|()| {
            self.funcs
                .attach_in_process(&mut self.probes, pid)
                .map_err(SessionError::from)
        });
        if self.libs.any_of(&mapped) && self.held_on_load.remove(&pid) {
            let _ = self.probes.hold_on_load(pid, false);
        }
        // SAFETY: plain kill(2).
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        for p in attached? {
            self.sink.probe(&p)?;
        }
        Ok(())
    }

    /// Tells `on_loss` if the probes lost events since it was last told.
    fn check_loss(&mut self) -> Result<(), SessionError> {
        let Some(hook) = &mut self.on_loss else {
            return Ok(());
        };
        let lost = self.probes.lost()?;
        if lost > self.lost_reported {
            self.lost_reported = lost;
            hook(&EventsSoFar {
                recorded: self.sink.total,
                lost,
            });
        }
        Ok(())
    }

    /// True when no traced process is alive any more.
    fn targets_gone(&mut self) -> Result<bool, SessionError> {
        if let Some(status) = self.child.and_then(reap) {
            self.command_status = Some(status);
            self.child = None;
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

/// How long a session stopped by a signal waits for the command it launched to end.
const COMMAND_GRACE: Duration = Duration::from_millis(500);

/// How our child `pid` ended, if it does within `grace`.
fn reap_within(pid: u32, grace: Duration) -> Option<CommandStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = reap(pid) {
            return Some(status);
        }
        if started.elapsed() >= grace {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How our child `pid` ended, if it has (without waiting).
fn reap(pid: u32) -> Option<CommandStatus> {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    let reaped = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) } == pid as i32;
    reaped.then(|| CommandStatus::from_wait_status(status))
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
    let mut loss_checks = tokio::time::interval(LOSS_CHECK_PERIOD);
    loss_checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loss_checks.tick().await;
    let watch_loss = ctx.on_loss.is_some();
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
            _ = loss_checks.tick(), if watch_loss => ctx.check_loss()?,
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
