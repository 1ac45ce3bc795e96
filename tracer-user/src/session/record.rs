//! The session from start to end: check the targets, load and attach the probes, launch
//! the command, run the event loop, write the outputs, then detach.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::LoopContext;
use super::detach::Detacher;
use super::event_loop::{event_loop, ReaderPriority};
use super::funcs::FunctionProbes;
use super::holds::HoldDeadline;
use super::launch::{find_in_path, launch, reap_within, COMMAND_GRACE};
use super::libraries::probe_libraries;
use super::memory::MemoryLimit;
use super::openmp::OpenMpProbes;
use super::output::write_private;
use super::sink::{Sink, SinkResults};
use super::thread_calls::ThreadCallProbes;
use super::watchdog::Watchdog;
use super::{
    Analysis, Detaching, Ready, RecordOptions, RecordOutcome, RunAs, SessionError, StopReason,
};
use crate::probes::{this_node, ClockPair, ProbeOptions, Probes};
use crate::target::funcs::FunctionSelector;
use crate::target::libraries::{self, ImportedCalls, Library, LibrarySet, NeededLibraries};
use crate::target::procfs;
use tracer_analysis::format::openmp::OpenMpLowering;
use tracer_analysis::format::recording::{LibraryInfo, RecordingMeta};
use tracer_analysis::predict::online::OnlineWhatIf;

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
    if opts.analysis == Analysis::AfterTracing {
        if opts.output.is_none() {
            return Err(SessionError::AnalyzeAfterWithoutRecording);
        }
        if opts.interval.is_some() {
            return Err(SessionError::AnalyzeAfterWithSamples);
        }
    }
    for &pid in &opts.pids {
        if pid == 0 || !procfs::is_alive(pid) {
            return Err(SessionError::NoSuchProcess(pid));
        }
    }
    // The tracer never traces, holds or waits on itself or what it runs (`ldd`, the
    // watchdog): a `--pid` of one of them is refused, and a `--pid` of one of its
    // ancestors (the shell that started it, sudo) traces that process's tree without
    // the tracer's own.
    let own = std::process::id();
    if let Some(&pid) = opts
        .pids
        .iter()
        .find(|&&p| procfs::descendants(own).contains(&p))
    {
        return Err(SessionError::TracerItself(pid));
    }
    // Every process descends from init: `--pid 1` is the whole machine, traced as with
    // `--all` (from each process's first MPI/PVM call or selected procedure on, nothing
    // held), not every exec on the machine held while its libraries are probed.
    let system_wide = opts.system_wide || opts.pids.contains(&1);
    if system_wide && !opts.system_wide {
        log::warn!("--pid 1 is every process on the machine: tracing system-wide, as --all");
    }
    let pids: Vec<u32> = opts.pids.iter().copied().filter(|&p| p != 1).collect();
    let program = match opts.command.first() {
        Some(c) => Some(find_in_path(c).ok_or_else(|| SessionError::CommandNotFound(c.clone()))?),
        None => None,
    };
    // Before any probe is loaded or process held: the watchdog lets held processes go if
    // the tracer dies. System-wide, nothing is ever held.
    let mut watchdog = if system_wide {
        None
    } else {
        Some(Watchdog::start()?)
    };
    // The tracer's tree now: itself and the watchdog (the command is launched later).
    let own_tree: HashSet<u32> = procfs::descendants(own).into_iter().collect();
    let mut targets: Vec<u32> = pids
        .iter()
        .flat_map(|&p| procfs::descendants(p))
        .filter(|p| !own_tree.contains(p))
        .collect();
    targets.sort_unstable();
    targets.dedup();
    for &pid in &targets {
        if let Some(w) = &mut watchdog {
            w.tell(pid);
        }
    }

    let FoundLibraries {
        user: user_libs,
        all: found_libs,
    } = find_libraries(&opts.libs, &targets)?;
    let mut funcs = FunctionProbes::new(FunctionSelector::new(&opts.funcs)?);
    // Every traced exec is held until the libraries and procedures it needs are probed.
    let mut probes = Probes::load(&ProbeOptions {
        system_wide,
        hold_on_exec: !system_wide,
        ring_bytes: opts.ring_mib.map(|mib| mib.max(1) << 20),
        floor: opts.floor_probes,
        uprobe_links: opts.uprobe_links,
    })?;
    let mut libs = LibrarySet::new(found_libs);
    // Libraries the user named, those the targets have loaded, and, system-wide, all.
    let mapped = libraries::mapped_candidates(&targets);
    probe_libraries(
        &mut libs,
        &mut probes,
        |p| system_wide || user_libs.contains(p) || mapped.contains(p),
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
    if system_wide {
        new_probes.extend(funcs.attach_everywhere(&mut probes)?);
    }

    let start = ClockPair::now();
    let node = this_node(start);
    let meta = RecordingMeta {
        tracer_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: node.hostname.clone(),
        command: opts.command.clone(),
        pids: opts.pids.clone(),
        system_wide,
        start_unix_ns: start.unix_ns,
        start_monotonic_ns: start.monotonic_ns,
        libraries: libs.infos(),
        nodes: vec![node],
    };
    let open_mpi: Vec<LibraryInfo> = meta
        .libraries
        .iter()
        .filter(|l| l.flavor == tracer_analysis::format::calls::Flavor::OpenMpi)
        .cloned()
        .collect();
    let run_as = opts.run_as.as_ref();
    let mut sink = Sink::new(
        &meta,
        opts.output.as_deref(),
        open_mpi,
        opts.clock,
        run_as,
        opts.analysis,
    )?;
    sink.whatif = opts.whatif.map(OnlineWhatIf::new);
    for p in &new_probes {
        sink.probe(p)?;
    }
    for &pid in &targets {
        probes.trace_process(pid, &procfs::threads_of(pid))?;
        sink.see_process(pid)?;
    }

    let child = match program {
        Some(program) => Some(launch(
            &program,
            &opts.command,
            opts.command_stdin_null,
            run_as,
            &mut probes,
            watchdog.as_mut(),
        )?),
        None => None,
    };

    if let Some(ready) = opts.on_ready {
        ready(&Ready {
            libraries: libs.probed().len(),
            probes: probes.probe_count(),
            links: probes.link_kind(),
            processes: targets.len() + child.is_some() as usize,
        });
    }
    let hold_deadline = if system_wide {
        None
    } else {
        Some(HoldDeadline::start(probes.held_processes()?)?)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut ctx = LoopContext {
        probes,
        funcs,
        libs,
        needed: NeededLibraries::default(),
        joins,
        locks,
        openmp,
        lowering: OpenMpLowering::default(),
        held_on_load: HashSet::new(),
        sink,
        child,
        command_status: None,
        system_wide,
        on_sample: opts.on_sample,
        on_loss: opts.on_loss,
        lost_reported: 0,
        unprobed_mpi_calls: BTreeMap::new(),
        watchdog,
        hold_deadline,
        memory: MemoryLimit::new(opts.memory_limit_bytes),
    };
    let mut priority = ReaderPriority::of_this_thread();
    let stop = runtime.block_on(event_loop(
        &mut ctx,
        &mut priority,
        opts.duration,
        opts.interval,
    ))?;
    let LoopContext {
        mut probes,
        funcs,
        libs,
        locks,
        sink,
        mut command_status,
        child,
        unprobed_mpi_calls,
        watchdog,
        hold_deadline,
        memory,
        ..
    } = ctx;
    let failures = LoopContext::failures(&mut probes, hold_deadline.as_ref(), &memory)?;
    // Every output is complete before the probes go: detaching takes seconds.
    let SinkResults {
        mut summary,
        profile,
        whatif,
    } = sink.finish(&failures)?;
    summary.tracer_cpu_ns = own_cpu_ns();
    summary.unprobed_mpi_calls = Some(unprobed_mpi_calls);
    write_json(opts.summary_json.as_deref(), &summary, run_as)?;
    write_json(opts.profile_json.as_deref(), &profile, run_as)?;
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
        let pending = detacher.as_ref().map(Detacher::pending).unwrap_or_default();
        detaching(Detaching {
            probes: probes.probe_count() + pending.probes,
            kernel_links: probes.link_count() + pending.kernel_links,
        });
    }
    drop(probes);
    // No hold can come any more (the watchdog lets go one made during the detaching).
    drop(hold_deadline);
    if let Some(d) = detacher {
        d.finish();
    }
    if let Some(w) = watchdog {
        w.finish();
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

/// Candidate libraries: the user's (always probed), the installed ones, and those the
/// targets have mapped.
struct FoundLibraries {
    /// The user's (`--lib`), by canonical path.
    user: HashSet<PathBuf>,
    /// All of them, the user's included.
    all: Vec<Library>,
}

fn find_libraries(user: &[PathBuf], targets: &[u32]) -> Result<FoundLibraries, SessionError> {
    let mut libs: Vec<Library> = Vec::new();
    let mut user_set = HashSet::new();
    for path in user {
        let lib = Library::open(path).map_err(|error| SessionError::Library {
            path: path.clone(),
            error,
        })?;
        let Some(mut lib) = lib else {
            return Err(SessionError::NotALibrary { path: path.clone() });
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
    Ok(FoundLibraries {
        user: user_set,
        all: libs,
    })
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

fn write_json<T: serde::Serialize>(
    path: Option<&Path>,
    value: &T,
    owner: Option<&RunAs>,
) -> Result<(), SessionError> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        write_private(path, (json + "\n").as_bytes(), owner).map_err(|source| {
            SessionError::WriteJson {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}
