//! The loaded probes: loading the eBPF object, configuring it for this kernel and
//! attaching its tracepoints.

use std::collections::HashSet;
use std::path::PathBuf;

use aya::maps::{Array, MapData};
use aya::programs::uprobe::UProbeLinkId;
use aya::programs::{TracePoint, UProbe};
use aya::{Ebpf, EbpfLoader};
use tracer_common::{call, maps, ProbeConfig};

use super::machine::{default_ring_bytes, kernel_clock_lag_ns, wakeup_bytes};
use super::maps::{map, program};
use super::{btf, slots, tracefs, ProbeError};
use tracer_analysis::format::calls::CALLS;

static PROBES_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

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

/// The dlopen return probe (`Probes::attach_load_probe`).
pub(super) const LIBRARY_LOADED: &str = "library_loaded";

/// The empty programs of `ProbeOptions::floor`.
pub(super) const FLOOR_UPROBE: &str = "floor_uprobe";
pub(super) const FLOOR_URETPROBE: &str = "floor_uretprobe";
const FLOOR_TRACEPOINT: &str = "floor_tracepoint";

/// The loaded probes. Dropping this detaches every probe and frees every map. The kernel
/// removes uprobes one at a time, about 100 ms each here (130 probes: 13 s), whatever
/// the number of threads closing them, so sessions write their outputs first.
pub struct Probes {
    pub(super) ebpf: Ebpf,
    /// (file, offset, process) already probed, so a file seen twice is probed once;
    /// the process is None for probes that fire in every process.
    pub(super) attached: HashSet<(PathBuf, u64, Option<u32>)>,
    /// Probes that fire in one process only (`--locks`), by process: (program, link).
    pub(super) process_links: std::collections::HashMap<u32, Vec<(&'static str, UProbeLinkId)>>,
    /// Files whose dlopen carries the `library_loaded` probe.
    pub(super) load_probes: HashSet<PathBuf>,
    pub attach_count: usize,
    pub(super) floor: bool,
    /// CPUs the kernel may run on (the slots' CPU numbers) and slots per CPU.
    pub(super) cpus: usize,
    pub(super) slots_per_cpu: u32,
}

impl Probes {
    pub fn load(opts: &ProbeOptions) -> Result<Probes, ProbeError> {
        raise_fd_limit();
        let cpus =
            aya::util::nr_cpus().map_err(|(what, source)| ProbeError::Cpus { what, source })?;
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
