//! Loading the eBPF probes into the kernel and attaching them. This is the only module
//! that talks to aya; everything downstream works on decoded records.

pub mod btf;
pub mod slots;
pub mod tracefs;

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::uprobe::{
    UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeLinkId, UProbeScope,
};
use aya::programs::{TracePoint, UProbe};
use aya::{Ebpf, EbpfLoader};
use tracer_common::{call, call_cookie, maps, ProbeConfig, ThreadClock, ThreadState};

use crate::target::libraries::{Library, ThreadLibrary};
use crate::target::symbols::Symbol;
use tracer_analysis::format::calls::{CallSpec, Flavor, CALLS};

static PROBES_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("tracefs: {0}")]
    Tracefs(String),
    #[error("kernel BTF: {0}")]
    Btf(String),
    #[error("loading the eBPF object failed: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF program {name}: {source}")]
    Program {
        name: &'static str,
        source: aya::programs::ProgramError,
    },
    #[error("eBPF map {0} is missing or has the wrong type")]
    Map(&'static str),
    #[error("mapping eBPF map {name} into memory: {source}")]
    Mmap {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("counting the CPUs: {0}")]
    Cpus(String),
    #[error("eBPF map {name}: {source}")]
    MapOp {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("attaching to {symbol} in {path}: {source}")]
    Attach {
        symbol: String,
        path: PathBuf,
        source: aya::programs::ProgramError,
    },
}

/// Options fixed at load time.
pub struct ProbeOptions {
    pub system_wide: bool,
    pub hold_on_exec: bool,
    /// The ring's size (a power of two, at least a page); None sizes it for the
    /// machine's CPUs ([`default_ring_bytes`]).
    pub ring_bytes: Option<u32>,
    /// Benchmarks only: attach empty programs (the floor) wherever the probes that fire
    /// per call attach (MPI/PVM/pthread calls, procedures, futex, scheduler switches and
    /// wakeups); the fork, exec and exit probes stay real so targets are still followed.
    pub floor: bool,
}

/// How far the kernel's count of a running thread's CPU time may lag behind: it is
/// brought up to date at every scheduler tick, so one tick (`kernel_tick_ns`). This is also
/// how far ahead of that count the probes' own estimate may run (time stolen by the
/// hypervisor after the last tick is in the estimate but not yet known to the kernel),
/// so a tight figure keeps the clock exact within a tick. CPUs in `nohz_full` run
/// without a regular tick (its count can lag by a second there), so the probes get no
/// bound when the kernel has any.
fn kernel_clock_lag_ns() -> u32 {
    let tickless = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full")
        .is_ok_and(|cpus| !cpus.trim().is_empty() && cpus.trim() != "(null)");
    if tickless {
        0
    } else {
        kernel_tick_ns()
    }
}

/// The scheduler tick of the running kernel, from its `CONFIG_HZ` (in /proc/config.gz or
/// /boot/config-RELEASE); 10 ms (HZ=100, the lowest usual setting) when neither says.
fn kernel_tick_ns() -> u32 {
    const LONGEST_TICK_NS: u32 = 10_000_000;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let config = read_gzip("/proc/config.gz")
        .or_else(|| std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok());
    config
        .as_deref()
        .and_then(config_hz)
        .map_or(LONGEST_TICK_NS, |hz| 1_000_000_000 / hz)
}

fn read_gzip(path: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).ok()?)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// `CONFIG_HZ=N` of a kernel configuration, if it is a plausible tick rate.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|hz| (24..=10_000).contains(hz))
}

/// The ring's default size: 4 MiB per CPU the kernel may run on, rounded up to a power
/// of two, between 16 MiB and 256 MiB. The slots are a share of the ring per CPU
/// ([`slots::slots_per_cpu`]): a fixed ring gave each CPU of a big machine fewer slots
/// (64 CPUs: 1,024, 3 ms of a CPU writing 330,000 records a second, against 50 ms with
/// 16,384), and 4 MiB per CPU keeps the most (16,384, 2.1 MiB) up to 64 CPUs. The bounds keep small machines as
/// they were and the locked memory of big ones (ring and slots) at most 0.5 GiB.
pub fn default_ring_bytes(cpus: usize) -> u32 {
    const MIB: u64 = 1 << 20;
    let wanted = (cpus.max(1) as u64 * 4 * MIB).next_power_of_two();
    wanted.clamp(16 * MIB, 256 * MIB) as u32
}

/// How many bytes of records a CPU writes between two wakeups of the reader: a sixteenth
/// of the ring, at most 1 MiB, a power of two (the probes rely on it). Each wakeup is an
/// interrupt, which on a VM is an APIC write that exits to the hypervisor (about 10 us
/// here: 2.5 % of a traced loop of MPI calls when it came every 128 KiB); the reader
/// also drains the ring every 50 ms.
fn wakeup_bytes(ring_bytes: u32) -> u32 {
    let bytes = (ring_bytes / 16).clamp(4096, 1 << 20);
    1 << bytes.ilog2()
}

/// The dlopen return probe (`Probes::attach_load_probe`).
const LIBRARY_LOADED: &str = "library_loaded";

/// The empty programs of `ProbeOptions::floor`.
const FLOOR_UPROBE: &str = "floor_uprobe";
const FLOOR_URETPROBE: &str = "floor_uretprobe";
const FLOOR_TRACEPOINT: &str = "floor_tracepoint";

/// The loaded probes. Dropping this detaches every probe and frees every map. The kernel
/// removes uprobes one at a time, about 100 ms each here (130 probes: 13 s), whatever
/// the number of threads closing them, so sessions write their outputs first.
pub struct Probes {
    ebpf: Ebpf,
    /// (file, offset, process) already probed, so a file seen twice is probed once;
    /// the process is None for probes that fire in every process.
    attached: HashSet<(PathBuf, u64, Option<u32>)>,
    /// Probes that fire in one process only (`--locks`), by process: (program, link).
    process_links: std::collections::HashMap<u32, Vec<(&'static str, UProbeLinkId)>>,
    /// Files whose dlopen carries the `library_loaded` probe.
    load_probes: HashSet<PathBuf>,
    pub attach_count: usize,
    floor: bool,
    /// CPUs the kernel may run on (the slots' CPU numbers) and slots per CPU.
    cpus: usize,
    slots_per_cpu: u32,
}

impl Probes {
    pub fn load(opts: &ProbeOptions) -> Result<Probes, ProbeError> {
        raise_fd_limit();
        let cpus =
            aya::util::nr_cpus().map_err(|(what, e)| ProbeError::Cpus(format!("{what}: {e}")))?;
        let ring_bytes = opts.ring_bytes.unwrap_or_else(|| default_ring_bytes(cpus));
        let slots_per_cpu = slots::slots_per_cpu(ring_bytes, cpus);
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(maps::EVENTS, ring_bytes)
            .map_max_entries(maps::SLOTS, cpus as u32 * slots_per_cpu)
            .map_max_entries(maps::CURSORS, cpus as u32)
            .load(PROBES_OBJECT)?;

        let mut config: ProbeConfig = tracefs::probe_offsets()?;
        config.trace_all = opts.system_wide as u32;
        config.hold_on_exec = opts.hold_on_exec as u32;
        config.self_tgid = std::process::id();
        // The kernel's own CPU time of a thread; without it the probes count time between
        // switch timestamps only (and undercount when a switch event is missed).
        let kernel = btf::KernelBtf::from_sys_fs().ok();
        let offset = |name, path: &[&str]| kernel.as_ref().and_then(|b| b.offset_of(name, path));
        config.task_cpu_time = offset("task_struct", &["se", "sum_exec_runtime"]).unwrap_or(0);
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
        let mut cfg: Array<&mut MapData, ProbeConfig> = map(&mut ebpf, maps::CONFIG)?;
        cfg.set(0, config, 0).map_err(|source| ProbeError::MapOp {
            name: maps::CONFIG,
            source,
        })?;

        let mut layouts: Array<&mut MapData, tracer_common::CallLayout> =
            map(&mut ebpf, maps::LAYOUTS)?;
        for c in CALLS {
            debug_assert!((c.id as u32) < call::TABLE_SIZE);
            layouts
                .set(c.id as u32, c.layout, 0)
                .map_err(|source| ProbeError::MapOp {
                    name: maps::LAYOUTS,
                    source,
                })?;
        }

        let uprobes: &[&'static str] = if opts.floor {
            &[FLOOR_UPROBE, FLOOR_URETPROBE]
        } else {
            &["call_enter", "call_exit", "func_enter", "func_exit"]
        };
        // The dlopen probe stays real with the floor: it only follows targets.
        for &name in uprobes.iter().chain(&[LIBRARY_LOADED]) {
            let p: &mut UProbe = program(&mut ebpf, name)?;
            p.load()
                .map_err(|source| ProbeError::Program { name, source })?;
        }
        // (program, group, event, fires per call: replaced by the floor)
        let tracepoints = [
            ("sched_switch", "sched", "sched_switch", true),
            ("sched_waking", "sched", "sched_waking", true),
            ("sched_wakeup_new", "sched", "sched_wakeup_new", true),
            ("sched_process_fork", "sched", "sched_process_fork", false),
            ("sched_process_exec", "sched", "sched_process_exec", false),
            ("sched_process_exit", "sched", "sched_process_exit", false),
            ("sys_enter_futex", "syscalls", "sys_enter_futex", true),
            ("sys_exit_futex", "syscalls", "sys_exit_futex", true),
        ];
        if opts.floor {
            let p: &mut TracePoint = program(&mut ebpf, FLOOR_TRACEPOINT)?;
            p.load().map_err(|source| ProbeError::Program {
                name: FLOOR_TRACEPOINT,
                source,
            })?;
        }
        for (name, group, event, per_call) in tracepoints {
            let name = if opts.floor && per_call {
                FLOOR_TRACEPOINT
            } else {
                let p: &mut TracePoint = program(&mut ebpf, name)?;
                p.load()
                    .map_err(|source| ProbeError::Program { name, source })?;
                name
            };
            let p: &mut TracePoint = program(&mut ebpf, name)?;
            p.attach(group, event)
                .map_err(|source| ProbeError::Program { name, source })?;
        }
        Ok(Probes {
            ebpf,
            attached: HashSet::new(),
            process_links: std::collections::HashMap::new(),
            load_probes: HashSet::new(),
            attach_count: 0,
            floor: opts.floor,
            cpus,
            slots_per_cpu,
        })
    }

    /// Writes the flavor table entry for `lib` (PVM needs the library's own symbol).
    pub fn configure_flavor(
        &mut self,
        flavor: Flavor,
        pvm_rbuf_vaddr: u64,
    ) -> Result<(), ProbeError> {
        let mut flavors: Array<&mut MapData, tracer_common::FlavorConfig> =
            map(&mut self.ebpf, maps::FLAVORS)?;
        flavors
            .set(flavor.id() as u32, flavor.config(pvm_rbuf_vaddr), 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::FLAVORS,
                source,
            })
    }

    /// Attaches entry and exit probes to the calls of `lib`'s family that it defines and
    /// `wanted` accepts. Returns the number of calls newly probed (a call probed before
    /// is not probed again).
    pub fn attach_library(
        &mut self,
        lib: &Library,
        wanted: impl Fn(&CallSpec) -> bool,
    ) -> Result<usize, ProbeError> {
        self.configure_flavor(lib.flavor, lib.pvm_rbuf_vaddr())?;
        let mut n = 0;
        for c in CALLS
            .iter()
            .filter(|c| c.family == lib.flavor.family() && wanted(c))
        {
            // MPI_X is a weak alias of PMPI_X: one address serves C, Fortran and PMPI callers.
            let Some(sym) = lib.symbols.get(c.symbol) else {
                continue;
            };
            let cookie = call_cookie(c.id, lib.flavor.id(), sym.vaddr as u32);
            if self.attach_pair(
                ("call_enter", "call_exit"),
                &lib.path,
                c.symbol,
                sym.file_offset,
                cookie,
                None,
            )? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Attaches entry and exit probes to the pthread calls of `lib`: with a `pid`, ones
    /// that fire in that process only (all its threads: they share its address space;
    /// also after it execs; the kernel puts the breakpoints in that process's copy of the
    /// library's pages, so other processes never trap), else in every process (the
    /// probes keep only traced ones). Returns the number of calls newly probed.
    pub fn attach_thread_calls(
        &mut self,
        lib: &ThreadLibrary,
        pid: Option<u32>,
    ) -> Result<usize, ProbeError> {
        self.configure_flavor(Flavor::Glibc, 0)?;
        let mut n = 0;
        for (id, sym) in &lib.calls {
            let cookie = call_cookie(*id, Flavor::Glibc.id(), sym.vaddr as u32);
            if self.attach_pair(
                ("call_enter", "call_exit"),
                &lib.path,
                &sym.name,
                sym.file_offset,
                cookie,
                pid,
            )? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Hands over the links of the probes that fire in `pid` only (the process is gone):
    /// dropping them detaches the probes, which takes the kernel 0.1-0.2 s each, so the
    /// caller may drop them on another thread.
    pub fn take_process_links(&mut self, pid: u32) -> Vec<UProbeLink> {
        let Some(links) = self.process_links.remove(&pid) else {
            return Vec::new();
        };
        self.attached.retain(|(_, _, p)| *p != Some(pid));
        let mut out = Vec::with_capacity(links.len());
        for (name, id) in links {
            if let Ok(p) = program::<UProbe>(&mut self.ebpf, name) {
                if let Ok(link) = p.take_link(id) {
                    out.push(link);
                }
            }
        }
        self.attach_count -= out.len();
        out
    }

    /// Attaches the dlopen return probe at `dlopen` (a function of `path`), in every
    /// process: it stops the processes [`Probes::hold_on_load`] names after each dlopen
    /// and tells the reader (`kind::LIBRARY_LOADED`). Returns false if it was there.
    pub fn attach_load_probe(&mut self, path: &Path, dlopen: &Symbol) -> Result<bool, ProbeError> {
        if !self.load_probes.insert(path.to_path_buf()) {
            return Ok(false);
        }
        let p: &mut UProbe = program(&mut self.ebpf, LIBRARY_LOADED)?;
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(dlopen.file_offset),
            cookie: None,
        };
        match p.attach(point, path, UProbeScope::AllProcesses) {
            Ok(_) => {
                self.attach_count += 1;
                Ok(true)
            }
            Err(source) => {
                self.load_probes.remove(path);
                Err(ProbeError::Attach {
                    symbol: dlopen.name.clone(),
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }

    /// Whether process `pid` stops after each dlopen until userspace let it go on (see
    /// [`Probes::attach_load_probe`]).
    pub fn hold_on_load(&mut self, pid: u32, hold: bool) -> Result<(), ProbeError> {
        let mut held: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::HOLD_ON_LOAD)?;
        let done = if hold {
            held.insert(pid, 1, 0)
        } else {
            match held.remove(&pid) {
                Err(aya::maps::MapError::KeyNotFound) => Ok(()),
                other => other,
            }
        };
        done.map_err(|source| ProbeError::MapOp {
            name: maps::HOLD_ON_LOAD,
            source,
        })
    }

    /// Attaches the selected-procedure probes with `probe_id` at a function.
    /// Returns false if that function was already probed.
    pub fn attach_function(
        &mut self,
        path: &Path,
        symbol: &str,
        file_offset: u64,
        probe_id: u16,
    ) -> Result<bool, ProbeError> {
        self.attach_pair(
            ("func_enter", "func_exit"),
            path,
            symbol,
            file_offset,
            probe_id as u64,
            None,
        )
    }

    fn attach_pair(
        &mut self,
        programs: (&'static str, &'static str),
        path: &Path,
        symbol: &str,
        offset: u64,
        cookie: u64,
        pid: Option<u32>,
    ) -> Result<bool, ProbeError> {
        let key = (
            path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
            offset,
            pid,
        );
        if !self.attached.insert(key.clone()) {
            return Ok(false);
        }
        let scope = match pid.and_then(NonZeroU32::new) {
            Some(pid) => UProbeScope::OneProcess(pid),
            None => UProbeScope::AllProcesses,
        };
        let programs = if self.floor {
            (FLOOR_UPROBE, FLOOR_URETPROBE)
        } else {
            programs
        };
        let mut links = Vec::with_capacity(2);
        for name in [programs.0, programs.1] {
            let p: &mut UProbe = program(&mut self.ebpf, name)?;
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(offset),
                cookie: Some(cookie),
            };
            match p.attach(point, path, scope) {
                Ok(link) => links.push((name, link)),
                Err(source) => {
                    // An entry probe without its exit probe would leave a frame behind at
                    // every call (a process can exit while we attach to it).
                    for (name, link) in links {
                        if let Ok(p) = program::<UProbe>(&mut self.ebpf, name) {
                            let _ = p.detach(link);
                        }
                    }
                    self.attached.remove(&key);
                    return Err(ProbeError::Attach {
                        symbol: symbol.to_string(),
                        path: path.to_path_buf(),
                        source,
                    });
                }
            }
        }
        self.attach_count += links.len();
        if let Some(pid) = pid {
            self.process_links.entry(pid).or_default().extend(links);
        }
        Ok(true)
    }

    /// Marks a process (all its threads) as traced. Children it forks from now on are
    /// traced by the probes themselves.
    pub fn trace_process(&mut self, pid: u32, threads: &[u32]) -> Result<(), ProbeError> {
        let mut traced: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::TRACED)?;
        traced
            .insert(pid, 1, 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::TRACED,
                source,
            })?;
        let mut states: HashMap<&mut MapData, u32, ThreadState> =
            map(&mut self.ebpf, maps::THREADS)?;
        for &tid in threads {
            let state = ThreadState {
                clock: ThreadClock {
                    tgid: pid,
                    ..Default::default()
                },
                ..Default::default()
            };
            // A thread that already has a state (it ran a probe) keeps it.
            if states.get(&tid, 0).is_err() {
                states
                    .insert(tid, state, 0)
                    .map_err(|source| ProbeError::MapOp {
                        name: maps::THREADS,
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// Ids (tgids and thread ids) currently in the traced set.
    pub fn traced_ids(&mut self) -> Result<Vec<u32>, ProbeError> {
        let traced: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::TRACED)?;
        Ok(traced.keys().filter_map(|k| k.ok()).collect())
    }

    /// Records the probes could not write because the ring buffer was full.
    pub fn lost(&mut self) -> Result<u64, ProbeError> {
        let lost: PerCpuArray<&mut MapData, u64> = map(&mut self.ebpf, maps::LOST)?;
        let per_cpu = lost.get(&0, 0).map_err(|source| ProbeError::MapOp {
            name: maps::LOST,
            source,
        })?;
        Ok(per_cpu.iter().sum())
    }

    /// Takes the ring buffer (call once).
    pub fn take_ring(&mut self) -> Result<RingBuf<MapData>, ProbeError> {
        let m = self
            .ebpf
            .take_map(maps::EVENTS)
            .ok_or(ProbeError::Map(maps::EVENTS))?;
        RingBuf::try_from(m).map_err(|_| ProbeError::Map(maps::EVENTS))
    }

    /// Takes the per-CPU slots, mapped into our memory (call once).
    pub fn take_slots(&mut self) -> Result<slots::CpuSlots, ProbeError> {
        let mut take = |name: &'static str| match self.ebpf.take_map(name) {
            Some(aya::maps::Map::Array(data)) => Ok(data),
            _ => Err(ProbeError::Map(name)),
        };
        let (slot_map, cursor_map) = (take(maps::SLOTS)?, take(maps::CURSORS)?);
        slots::CpuSlots::map(slot_map, cursor_map, self.cpus, self.slots_per_cpu)
    }
}

fn map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, ProbeError>
where
    T: TryFrom<&'a mut aya::maps::Map>,
{
    let m = ebpf.map_mut(name).ok_or(ProbeError::Map(name))?;
    T::try_from(m).map_err(|_| ProbeError::Map(name))
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    let p = ebpf.program_mut(name).ok_or(ProbeError::Program {
        name,
        source: aya::programs::ProgramError::NotLoaded,
    })?;
    p.try_into().map_err(|_| ProbeError::Program {
        name,
        source: aya::programs::ProgramError::NotLoaded,
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_ring_grows_with_the_cpus_within_bounds() {
        let mib = |cpus| super::default_ring_bytes(cpus) >> 20;
        assert_eq!(mib(0), 16);
        assert_eq!(mib(1), 16);
        assert_eq!(mib(2), 16);
        assert_eq!(mib(4), 16);
        assert_eq!(mib(5), 32);
        assert_eq!(mib(8), 32);
        assert_eq!(mib(48), 256);
        assert_eq!(mib(64), 256);
        assert_eq!(mib(4096), 256);
        // Every CPU keeps the most slots up to 64 CPUs.
        for cpus in [1, 2, 8, 24, 64] {
            let ring = super::default_ring_bytes(cpus);
            assert_eq!(
                super::slots::slots_per_cpu(ring, cpus),
                16384,
                "{cpus} CPUs"
            );
        }
    }

    #[test]
    fn wakeups_come_every_power_of_two_bytes() {
        let w = super::wakeup_bytes;
        assert_eq!(w(16 << 20), 1 << 20);
        assert_eq!(w(128 << 20), 1 << 20);
        assert_eq!(w(1 << 20), 64 << 10);
        assert_eq!(w(3 << 20), 128 << 10);
        assert_eq!(w(4096), 4096);
    }

    #[test]
    fn tick_rate_comes_from_the_kernel_configuration() {
        let hz = super::config_hz;
        assert_eq!(hz("CONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(
            hz("# CONFIG_HZ_1000 is not set\nCONFIG_HZ=1000"),
            Some(1000)
        );
        assert_eq!(hz("CONFIG_HZ_PERIODIC=y\n"), None);
        assert_eq!(hz("CONFIG_HZ=0\n"), None);
    }

    /// This machine's kernel says its tick (CONFIG_HZ=250: 4 ms) in /proc/config.gz;
    /// the probes' bound follows it instead of the 10 ms fallback.
    #[test]
    fn tick_of_the_running_kernel() {
        let tick = super::kernel_tick_ns();
        assert!((100_000..=10_000_000).contains(&tick), "tick {tick} ns");
        if std::path::Path::new("/proc/config.gz").exists() {
            let text = super::read_gzip("/proc/config.gz").expect("readable config");
            let hz = super::config_hz(&text).expect("CONFIG_HZ in /proc/config.gz");
            assert_eq!(tick, 1_000_000_000 / hz);
        }
    }
}
