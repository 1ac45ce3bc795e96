//! The loaded probes: loading the eBPF object, configuring it for this kernel and
//! attaching its tracepoints.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aya::maps::{Array, MapData, ProgramArray};
use aya::programs::perf_event::{
    PerfEventConfig, PerfEventLinkId, PerfEventScope, SamplePolicy, SoftwareEvent,
};
use aya::programs::raw_trace_point::RawTracePointLinkId;
use aya::programs::trace_point::TracePointLinkId;
use aya::programs::uprobe::UProbeLinkId;
use aya::programs::{PerfEvent, Program, ProgramError, RawTracePoint, TracePoint, UProbe};
use aya::sys::{is_uprobe_multi_supported, UProbeMultiFeature};
use aya::{Ebpf, EbpfLoader};
use tracer_common::{call, maps, ProbeConfig};

use super::machine::{default_ring_bytes, kernel_clock_lag_ns, machine_memory_bytes, wakeup_bytes};
use super::maps::{map, program};
use super::run_stats::RunStatistics;
use super::{btf, slots, tracefs, BtfError, ProbeError};
use tracer_analysis::calls::CALLS;
use tracer_analysis::cost::ProbeFamily;

static PROBES_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

/// Options fixed at load time.
pub(crate) struct ProbeOptions {
    pub system_wide: bool,
    pub hold_on_exec: bool,
    /// The ring's size (a power of two, at least a page); None sizes it for the
    /// machine's CPUs and memory ([`default_ring_bytes`]).
    pub ring_bytes: Option<u32>,
    /// Benchmarks only: attach empty programs (the floor) wherever the probes that fire
    /// per call attach (MPI/PVM/pthread calls, procedures, futex, scheduler switches and
    /// wakeups); the fork, exec and exit probes stay real so targets are still followed.
    pub floor: bool,
    /// How uprobes are attached: `Auto` takes uprobe_multi links where the kernel has
    /// them.
    pub uprobe_links: UprobeLinks,
    /// Have the kernel count and time our programs' runs (`run_stats`, `--bpf-stats`),
    /// machine-wide, at a price per run (docs/benchmarks.md).
    pub run_statistics: bool,
    /// Samples of the traced threads' user stacks per second of their CPU time
    /// (`--sample HZ`, docs/sampling.md); 0: no sampler.
    pub sample_hz: u32,
}

/// How uprobes are attached, as asked for (`--uprobe-links`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UprobeLinks {
    /// uprobe_multi links where the kernel has them (Linux 6.6+ with process-wide pid
    /// filters), else one perf event per probe.
    Auto,
    /// uprobe_multi links: one kernel link per program and binary.
    Multi,
    /// One perf event per probe: the kernel removes them one at a time (0.1-0.2 s each).
    PerProbe,
}

/// How uprobes are attached in this session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Multi,
    PerProbe,
}

impl LinkKind {
    /// What the tracing line calls it.
    pub fn describe(self) -> &'static str {
        match self {
            LinkKind::Multi => "uprobe_multi links",
            LinkKind::PerProbe => "one perf event per probe",
        }
    }
}

/// The two programs of a uprobe pair: at a function's entry and at its return.
#[derive(Clone, Copy)]
pub(super) struct ProgramPair {
    pub(super) entry: &'static str,
    pub(super) exit: &'static str,
}

/// The uprobe programs of a session: each has a twin per link kind, and the floor
/// (`ProbeOptions::floor`) replaces both pairs with empty programs.
#[derive(Clone, Copy)]
pub(super) struct UprobePrograms {
    pub(super) calls: ProgramPair,
    /// The program the call programs end in, by tail call, to write a call's arrays
    /// (none for the floor, whose programs write nothing).
    pub(super) arrays: Option<&'static str>,
    pub(super) procedures: ProgramPair,
    pub(super) links: LinkKind,
}

impl UprobePrograms {
    /// The family of each program (`ProbeFamily`); the floor's pair, shared by calls and
    /// procedures, counts as calls.
    fn families(&self) -> impl Iterator<Item = (&'static str, ProbeFamily)> {
        let calls = [self.calls.entry, self.calls.exit]
            .into_iter()
            .chain(self.arrays)
            .map(|name| (name, ProbeFamily::Calls));
        let procedures = [self.procedures.entry, self.procedures.exit]
            .into_iter()
            .map(|name| (name, ProbeFamily::Procedures));
        calls.chain(procedures)
    }

    fn new(links: LinkKind, floor: bool) -> Self {
        let pair = |entry, exit| ProgramPair { entry, exit };
        let (calls, arrays, procedures) = match (links, floor) {
            (LinkKind::PerProbe, false) => (
                pair("call_enter", "call_exit"),
                Some("call_arrays"),
                pair("func_enter", "func_exit"),
            ),
            (LinkKind::Multi, false) => (
                pair("call_enter_m", "call_exit_m"),
                Some("call_arrays_m"),
                pair("func_enter_m", "func_exit_m"),
            ),
            (LinkKind::PerProbe, true) => {
                let floor = pair("floor_uprobe", "floor_uretprobe");
                (floor, None, floor)
            }
            (LinkKind::Multi, true) => {
                let floor = pair("floor_uprobe_m", "floor_uretp_m");
                (floor, None, floor)
            }
        };
        UprobePrograms {
            calls,
            arrays,
            procedures,
            links,
        }
    }
}

/// A point probed by one program pair: the call programs and the procedure programs
/// (`--func`) may both probe a function (an OpenMP outlined function is one of the
/// lowering's calls and may be selected too), each with its own records; the floor's
/// programs, the same for both, probe a point once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct AttachedPoint {
    /// The file's canonical path.
    pub(super) file: PathBuf,
    pub(super) file_offset: u64,
    /// None for probes that fire in every process.
    pub(super) pid: Option<u32>,
    /// The pair's entry program.
    pub(super) entry_program: &'static str,
}

/// The dlopen return probe (`Probes::attach_load_probe`).
pub(super) const LIBRARY_LOADED: &str = "library_loaded";

/// The sampler's perf-event program (docs/sampling.md).
const SAMPLER: &str = "sampler";

/// The empty tracepoint programs of `ProbeOptions::floor`, classic and raw.
const FLOOR_TRACEPOINT: &str = "floor_tracepoint";
const FLOOR_RAW_TRACEPOINT: &str = "floor_raw_tp";

/// A link of the session's that fires in every process, kept so that the stop closes it
/// on a thread of its own (`Drop for Probes`).
pub(super) enum SessionLink {
    UProbe(&'static str, UProbeLinkId),
    TracePoint(&'static str, TracePointLinkId),
    RawTracePoint(&'static str, RawTracePointLinkId),
    PerfEvent(&'static str, PerfEventLinkId),
}

/// A link of probes that fire in one process only, kept to detach when it exits.
pub(super) struct ProcessLink {
    pub(super) program: &'static str,
    pub(super) id: UProbeLinkId,
    /// Probe points under the link, and kernel links (1 for a uprobe_multi link).
    pub(super) probes: usize,
    pub(super) kernel_links: usize,
}

/// The loaded probes. Dropping this detaches every probe and frees every map. The kernel
/// removes each kernel link after an RCU grace period, about 0.1 s each here, one at a
/// time: 56 probes attached one perf event each take 6 s, as uprobe_multi links (a few
/// per binary) well under a second. Sessions write their outputs first.
pub(crate) struct Probes {
    pub(super) ebpf: Ebpf,
    /// The points already probed, so a file seen twice is probed once.
    pub(super) attached: HashSet<AttachedPoint>,
    /// Links of probes that fire in every process.
    pub(super) links: Vec<SessionLink>,
    /// Probes that fire in one process only (`--locks`), by process.
    pub(super) process_links: HashMap<u32, Vec<ProcessLink>>,
    /// Files whose dlopen carries the `library_loaded` probe.
    pub(super) load_probes: HashSet<PathBuf>,
    /// Uprobes attached (an entry and a return probe count two), and the kernel links
    /// that hold them.
    pub(super) probe_count: usize,
    pub(super) link_count: usize,
    pub(super) programs: UprobePrograms,
    /// Programs loaded into the kernel so far.
    pub(super) loaded: HashSet<&'static str>,
    /// CPUs the kernel may run on (the slots' CPU numbers) and slots per CPU.
    pub(super) cpus: usize,
    pub(super) slots_per_cpu: u32,
    /// The ring buffer's size in bytes.
    pub(super) ring_bytes: u32,
    /// Just before the first probe was attached: where the session's probe counts start.
    pub(super) counting_since: Instant,
    /// The kernel's run statistics of our programs, when it keeps them for us
    /// (`--bpf-stats`).
    pub(super) run_statistics: Option<RunStatistics>,
}

impl Probes {
    pub(crate) fn load(opts: &ProbeOptions) -> Result<Probes, ProbeError> {
        raise_fd_limit();
        let cpus = aya::util::nr_cpus()
            .map_err(|(what, source)| ProbeError::Cpus { what, source })?
            .get() as usize;
        let ring_bytes = opts
            .ring_bytes
            .unwrap_or_else(|| default_ring_bytes(cpus, machine_memory_bytes()));
        let slots_per_cpu = slots::slots_per_cpu(ring_bytes, cpus);
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(maps::EVENTS, ring_bytes)
            .map_max_entries(maps::SLOTS, cpus as u32 * slots_per_cpu)
            .map_max_entries(maps::CURSORS, cpus as u32)
            .load(PROBES_OBJECT)?;
        let config = probe_config(opts, ring_bytes, slots_per_cpu)?;
        let mut cfg: Array<&mut MapData, ProbeConfig> = map(&mut ebpf, maps::CONFIG)?;
        cfg.set(0, &config, 0).map_err(|source| ProbeError::MapOp {
            name: maps::CONFIG,
            source,
        })?;

        let mut layouts: Array<&mut MapData, tracer_common::CallLayout> =
            map(&mut ebpf, maps::LAYOUTS)?;
        for c in CALLS {
            debug_assert!((c.id as u32) < call::TABLE_SIZE);
            layouts
                .set(c.id as u32, &c.layout, 0)
                .map_err(|source| ProbeError::MapOp {
                    name: maps::LAYOUTS,
                    source,
                })?;
        }

        let links = match opts.uprobe_links {
            UprobeLinks::Multi => LinkKind::Multi,
            UprobeLinks::PerProbe => LinkKind::PerProbe,
            // `--locks` scopes probes to one process: the pid filter must cover all its
            // threads (a fix of Linux 6.7; 6.6 filtered one thread).
            UprobeLinks::Auto => {
                match is_uprobe_multi_supported(UProbeMultiFeature::ProcessScopedPidFilter) {
                    Ok(true) => LinkKind::Multi,
                    Ok(false) | Err(_) => LinkKind::PerProbe,
                }
            }
        };
        let programs = UprobePrograms::new(links, opts.floor);
        // (program, raw tracepoint, fires per call: replaced by the floor)
        let raw_tracepoints = [
            ("sched_switch", "sched_switch", true),
            ("sched_waking", "sched_waking", true),
            ("sched_wakeup_new", "sched_wakeup_new", true),
            ("sched_process_fork", "sched_process_fork", false),
            ("sched_process_exec", "sched_process_exec", false),
            ("sched_process_exit", "sched_process_exit", false),
        ];
        let raw_family = |per_call| {
            if per_call {
                ProbeFamily::Scheduler
            } else {
                ProbeFamily::Processes
            }
        };
        // Classic ones (futex): the kernel calls them for futex only (a raw `sys_enter`
        // program would run at every system call, the uretprobe return of every probed
        // call included).
        let tracepoints = [
            ("sys_enter_futex", "syscalls", "sys_enter_futex"),
            ("sys_exit_futex", "syscalls", "sys_exit_futex"),
        ];
        let raw_program = |name, per_call| {
            if opts.floor && per_call {
                FLOOR_RAW_TRACEPOINT
            } else {
                name
            }
        };
        let classic_program = |name| {
            if opts.floor {
                FLOOR_TRACEPOINT
            } else {
                name
            }
        };
        // The verifier takes most of the start-up: every program the session needs from
        // the start is loaded at once, on threads of their own. The dlopen probe stays
        // real with the floor: it only follows targets.
        let mut at_start: Vec<&'static str> =
            vec![programs.calls.entry, programs.calls.exit, LIBRARY_LOADED];
        at_start.extend(programs.arrays);
        at_start.extend(
            raw_tracepoints
                .iter()
                .map(|&(name, _, per_call)| raw_program(name, per_call)),
        );
        at_start.extend(
            tracepoints
                .iter()
                .map(|&(name, _, _)| classic_program(name)),
        );
        if opts.sample_hz > 0 {
            at_start.push(SAMPLER);
        }
        at_start.sort_unstable();
        at_start.dedup();
        load_in_parallel(&mut ebpf, &at_start)?;
        if let Some(name) = programs.arrays {
            set_array_program(&mut ebpf, name)?;
        }
        // Counted from before the first probe is attached (the tracepoints, just below).
        let counting_since = Instant::now();
        let run_statistics = if opts.run_statistics {
            let mut families: HashMap<&'static str, ProbeFamily> = HashMap::new();
            for (name, family) in programs.families() {
                families.entry(name).or_insert(family);
            }
            families.insert(LIBRARY_LOADED, ProbeFamily::LibraryLoaded);
            for &(name, _, per_call) in &raw_tracepoints {
                families.insert(raw_program(name, per_call), raw_family(per_call));
            }
            for &(name, _, _) in &tracepoints {
                families.insert(classic_program(name), ProbeFamily::Futex);
            }
            if opts.sample_hz > 0 {
                families.insert(SAMPLER, ProbeFamily::Sampler);
            }
            RunStatistics::enable(families)
        } else {
            None
        };
        let mut links = Vec::new();
        for (name, tracepoint, per_call) in raw_tracepoints {
            let name = raw_program(name, per_call);
            let p: &mut RawTracePoint = program(&mut ebpf, name)?;
            let id = p
                .attach(tracepoint)
                .map_err(|source| ProbeError::Program { name, source })?;
            links.push(SessionLink::RawTracePoint(name, id));
        }
        for (name, group, event) in tracepoints {
            let name = classic_program(name);
            let p: &mut TracePoint = program(&mut ebpf, name)?;
            let id = p
                .attach(group, event)
                .map_err(|source| ProbeError::Program { name, source })?;
            links.push(SessionLink::TracePoint(name, id));
        }
        if opts.sample_hz > 0 {
            attach_sampler(&mut ebpf, opts.sample_hz, &mut links)?;
        }
        Ok(Probes {
            ebpf,
            links,
            attached: HashSet::new(),
            process_links: HashMap::new(),
            load_probes: HashSet::new(),
            probe_count: 0,
            link_count: 0,
            programs,
            loaded: at_start.into_iter().collect(),
            cpus,
            slots_per_cpu,
            ring_bytes,
            counting_since,
            run_statistics,
        })
    }

    /// How this session attaches uprobes.
    pub(crate) fn link_kind(&self) -> LinkKind {
        self.programs.links
    }

    /// The ring buffer's size in bytes.
    pub(crate) fn ring_bytes(&self) -> u32 {
        self.ring_bytes
    }

    /// Uprobes attached so far (an entry and a return probe count two).
    pub(crate) fn probe_count(&self) -> usize {
        self.probe_count
    }

    /// Kernel links holding them (a uprobe_multi link holds every point of a binary).
    pub(crate) fn link_count(&self) -> usize {
        self.link_count
    }

    /// Loads the programs of `pair` unless they are loaded (the procedure programs wait
    /// for the first `--func` probe).
    pub(super) fn load_uprobes(&mut self, pair: ProgramPair) -> Result<(), ProbeError> {
        let missing: Vec<&'static str> = [pair.entry, pair.exit]
            .into_iter()
            .filter(|name| !self.loaded.contains(name))
            .collect();
        load_in_parallel(&mut self.ebpf, &missing)?;
        self.loaded.extend(missing);
        Ok(())
    }
}

/// Detaching waits for RCU grace periods (at least one per kernel link: 30-125 ms each
/// here for a uprobe_multi link or a futex tracepoint's perf event); closed from one
/// thread they come one after another, closed from one thread per link they overlap.
/// The programs go after their links, then the maps with `ebpf`. The kernel frees a
/// program a grace period after its last link and file descriptor go (about 30 ms here):
/// the tracer waits for that, so no program of the session is left in the kernel when it
/// exits.
impl Drop for Probes {
    fn drop(&mut self) {
        let ids: Vec<u32> = self
            .ebpf
            .programs()
            .filter_map(|(_, p)| p.info().ok().map(|info| info.id()))
            .collect();
        let links = self.take_all_links();
        // `ARRAY_PROGS` holds `call_arrays` until the map's last descriptor closes; emptying
        // it waits for the kernel too (about 20 ms), so it goes with the links.
        let array_progs = self.ebpf.take_map(maps::ARRAY_PROGS);
        std::thread::scope(|scope| {
            if let Some(m) = array_progs {
                scope.spawn(move || {
                    if let Ok(mut slots) = ProgramArray::try_from(m) {
                        let _ = slots.clear_index(&0);
                    }
                });
            }
            for share in deal(links, CLOSING_THREADS) {
                scope.spawn(move || drop(share));
            }
        });
        // No link is left: each program goes as its file descriptor closes.
        for (_, p) in self.ebpf.programs_mut() {
            let _ = match p {
                Program::UProbe(p) => p.unload(),
                Program::RawTracePoint(p) => p.unload(),
                Program::TracePoint(p) => p.unload(),
                Program::PerfEvent(p) => p.unload(),
                _ => Ok(()),
            };
        }
        wait_until_freed(&ids, Duration::from_secs(2));
    }
}

/// At most this many threads close the links at the stop (a session with one perf event
/// per uprobe has hundreds of links).
const CLOSING_THREADS: usize = 32;

/// A link taken out of its program: dropping it detaches it.
type OwnedLink = Box<dyn Send>;

impl Probes {
    /// Every link of the session, taken out of its program.
    fn take_all_links(&mut self) -> Vec<OwnedLink> {
        let mut owned: Vec<OwnedLink> = Vec::new();
        let per_process = self
            .process_links
            .drain()
            .flat_map(|(_, links)| links)
            .map(|l| SessionLink::UProbe(l.program, l.id));
        let links: Vec<SessionLink> = self.links.drain(..).chain(per_process).collect();
        for link in links {
            let taken: Option<OwnedLink> = match link {
                SessionLink::UProbe(name, id) => program::<UProbe>(&mut self.ebpf, name)
                    .ok()
                    .and_then(|p| p.take_link(id).ok())
                    .map(|l| Box::new(l) as OwnedLink),
                SessionLink::TracePoint(name, id) => program::<TracePoint>(&mut self.ebpf, name)
                    .ok()
                    .and_then(|p| p.take_link(id).ok())
                    .map(|l| Box::new(l) as OwnedLink),
                SessionLink::RawTracePoint(name, id) => {
                    program::<RawTracePoint>(&mut self.ebpf, name)
                        .ok()
                        .and_then(|p| p.take_link(id).ok())
                        .map(|l| Box::new(l) as OwnedLink)
                }
                SessionLink::PerfEvent(name, id) => program::<PerfEvent>(&mut self.ebpf, name)
                    .ok()
                    .and_then(|p| p.take_link(id).ok())
                    .map(|l| Box::new(l) as OwnedLink),
            };
            owned.extend(taken);
        }
        owned
    }
}

/// `items` dealt round-robin into at most `hands` non-empty hands.
fn deal<T>(items: Vec<T>, hands: usize) -> Vec<Vec<T>> {
    let n = hands.min(items.len()).max(1);
    let mut dealt: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        dealt[i % n].push(item);
    }
    dealt.retain(|hand| !hand.is_empty());
    dealt
}

/// Waits until the kernel has freed the programs `ids`, or `limit` has passed.
fn wait_until_freed(ids: &[u32], limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let left = aya::programs::loaded_programs()
            .flatten()
            .any(|info| ids.contains(&info.id()));
        if !left {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Not a loss (the process's exit closes what is left), but a stop that took `limit`
    // longer than it should: say so, so that it is found.
    log::info!(
        "the kernel had not freed every program {} ms after detaching",
        limit.as_millis()
    );
}

/// What the probes are told at load ([`ProbeConfig`]): where the kernel keeps what they
/// read (from its BTF and tracefs) and the session's options.
fn probe_config(
    opts: &ProbeOptions,
    ring_bytes: u32,
    slots_per_cpu: u32,
) -> Result<ProbeConfig, ProbeError> {
    let kernel = btf::KernelBtf::from_sys_fs()?;
    let mut config = ProbeConfig {
        task_pid: required_offset(&kernel, "task_struct", &["pid"])?,
        task_exit_state: required_offset(&kernel, "task_struct", &["exit_state"])?,
        task_cpu: required_offset(&kernel, "task_struct", &["thread_info", "cpu"])?,
        bprm_filename: required_offset(&kernel, "linux_binprm", &["filename"])?,
        ..tracefs::futex_offsets()?
    };
    config.trace_all = opts.system_wide as u32;
    config.hold_on_exec = opts.hold_on_exec as u32;
    config.self_tgid = std::process::id();
    // The kernel's own CPU time of a thread; without it the probes count time between
    // switch timestamps only (and undercount when a switch event is missed).
    let offset = |name, path: &[&str]| kernel.offset_of(name, path);
    config.task_cpu_time = offset("task_struct", &["se", "sum_exec_runtime"]).unwrap_or(0);
    // How a process ended (its PROCESS_END record).
    config.task_exit_code = offset("task_struct", &["exit_code"]).unwrap_or(0);
    // The time the hypervisor stole from a CPU, which the kernel's count leaves out;
    // all three or none.
    if let (Some(task), Some(cfs_rq), Some(rq)) = (
        offset("task_struct", &["se", "cfs_rq"]),
        offset("cfs_rq", &["rq"]),
        offset("rq", &["prev_steal_time_rq"]),
    ) {
        (config.task_cfs_rq, config.cfs_rq_rq, config.rq_stolen) = (task, cfs_rq, rq);
    }
    config.kernel_clock_lag_ns = kernel_clock_lag_ns();
    config.wakeup_bytes = wakeup_bytes(ring_bytes);
    config.slots_per_cpu = slots_per_cpu;
    config.sampling = u32::from(opts.sample_hz > 0);
    Ok(config)
}

/// The offset of a member the probes cannot do without.
fn required_offset(
    kernel: &btf::KernelBtf,
    structure: &'static str,
    path: &[&str],
) -> Result<u32, ProbeError> {
    kernel.offset_of(structure, path).ok_or_else(|| {
        BtfError::NoMember {
            structure,
            member: path.join("."),
        }
        .into()
    })
}

/// Puts the loaded program `name` where the call programs' tail call goes
/// (`ARRAY_PROGS`).
fn set_array_program(ebpf: &mut Ebpf, name: &'static str) -> Result<(), ProbeError> {
    let fd = {
        let p: &mut UProbe = program(ebpf, name)?;
        p.fd()
            .and_then(|fd| fd.try_clone().map_err(ProgramError::from))
            .map_err(|source| ProbeError::Program { name, source })?
    };
    let mut slots: ProgramArray<&mut MapData> = map(ebpf, maps::ARRAY_PROGS)?;
    slots.set(0, &fd, 0).map_err(|source| ProbeError::MapOp {
        name: maps::ARRAY_PROGS,
        source,
    })
}

/// Loads the uprobe and tracepoint programs `names`, each on a thread of its own.
fn load_in_parallel(ebpf: &mut Ebpf, names: &[&'static str]) -> Result<(), ProbeError> {
    if let Some(&name) = names.iter().find(|&&name| ebpf.program(name).is_none()) {
        return Err(ProbeError::Program {
            name,
            source: aya::programs::ProgramError::NotLoaded,
        });
    }
    std::thread::scope(|scope| {
        let loading: Vec<_> = ebpf
            .programs_mut()
            .filter_map(|(name, p)| {
                let &name = names.iter().find(|&&n| n == name)?;
                Some(scope.spawn(move || {
                    let started = Instant::now();
                    let loaded = match p {
                        Program::UProbe(p) => p.load(),
                        Program::RawTracePoint(p) => p.load(),
                        Program::TracePoint(p) => p.load(),
                        Program::PerfEvent(p) => p.load(),
                        _ => Ok(()),
                    };
                    // The verifier's share of a session's start, program by program.
                    log::debug!(
                        "program {name} loaded in {} ms, {} instructions verified",
                        started.elapsed().as_millis(),
                        p.info()
                            .ok()
                            .and_then(|i| i.verified_instruction_count())
                            .unwrap_or(0)
                    );
                    loaded.map_err(|source| ProbeError::Program { name, source })
                }))
            })
            .collect();
        // The scope waits for every thread; the first error is the one reported.
        loading
            .into_iter()
            .try_for_each(|t| t.join().expect("a program load panicked"))
    })
}

/// Every uprobe holds a perf event file descriptor; allow as many as the hard limit.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Attaches the sampler to a CPU-clock perf event on every online CPU, `hz` samples a
/// second of each CPU's time, so of each thread's CPU time: the program keeps the samples
/// of traced threads. Its links go into `links`, closed with every other link when the
/// probes are dropped.
fn attach_sampler(
    ebpf: &mut Ebpf,
    hz: u32,
    links: &mut Vec<SessionLink>,
) -> Result<(), ProbeError> {
    let cpus =
        aya::util::online_cpus().map_err(|(what, source)| ProbeError::Cpus { what, source })?;
    let p: &mut PerfEvent = program(ebpf, SAMPLER)?;
    for cpu in cpus {
        let id = p
            .attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Frequency(u64::from(hz)),
                false,
            )
            .map_err(|source| ProbeError::Program {
                name: SAMPLER,
                source,
            })?;
        links.push(SessionLink::PerfEvent(SAMPLER, id));
    }
    Ok(())
}
