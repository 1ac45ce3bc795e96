//! What `tracer metrics --json` writes (docs/metrics.md).

use serde::Serialize;

use super::dist::Distribution;
use super::thread::Cause;
use super::traffic::Traffic;

/// Version of the JSON form (`tracer metrics --json`); fields are only added within one.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Every metric of one recording.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Metrics {
    pub schema_version: u32,
    /// CPUs of all machines (what the program's utilization divides by).
    pub cpus: u32,
    /// The program: the processes that call MPI/PVM or a selected procedure (launchers
    /// and daemons are traced but not counted), or every process when none does.
    pub program: Measures,
    pub machines: Vec<MachineMetrics>,
    /// Every traced process, the program's first (by rank, then pid), then the others.
    pub processes: Vec<ProcessMetrics>,
    /// Every traced thread, grouped by process in the order of `processes`.
    pub threads: Vec<ThreadMetrics>,
    /// Selected procedures (`--func`), by name.
    pub procedures: Vec<ProcedureMetrics>,
    /// Time blocked per call kind (MPI/PVM calls, futex waits), program processes only,
    /// most total time first.
    pub calls: Vec<CallMetrics>,
    /// The same per call site, most total time first.
    pub call_sites: Vec<CallSiteMetrics>,
    pub traffic: Traffic,
    pub events: Events,
}

/// The metrics every level has. Times of a level with several threads are sums over its
/// threads, except `elapsed_ns` (first to last event of the level).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Measures {
    pub processes: usize,
    pub threads: usize,
    /// First to last event.
    pub elapsed_ns: u64,
    /// On-CPU time while traced (the kernel's count, stamped on every event).
    pub cpu_ns: u64,
    /// CPU time outside MPI/PVM calls and futex waits (the critical path's work clock).
    pub work_ns: u64,
    /// Elapsed time inside blocking calls, by cause.
    pub blocked: Blocked,
    /// Runnable but not running: from a preemption or a wakeup to the next switch-in.
    pub cpu_wait_ns: u64,
    /// cpu / elapsed: how many CPUs were busy on average.
    pub parallelism: Option<f64>,
    /// elapsed / cpu.
    pub response_ratio: Option<f64>,
    /// parallelism / CPUs of the level's machine(s).
    pub utilization: Option<f64>,
    /// (cpu + cpu wait) / cpu: how much the level wanted the CPU beyond what it got.
    pub load_factor: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Blocked {
    pub total_ns: u64,
    pub message_ns: u64,
    pub collective_ns: u64,
    pub futex_ns: u64,
    pub other_ns: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MachineMetrics {
    pub name: String,
    /// Distinct CPUs seen in this machine's records.
    pub cpus: u32,
    #[serde(flatten)]
    pub measures: Measures,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcessMetrics {
    pub pid: u32,
    pub machine: String,
    /// Rank in MPI_COMM_WORLD (MPI_Comm_rank, else the launcher's environment).
    pub rank: Option<i32>,
    pub pvm_tid: Option<i32>,
    pub command: String,
    /// Part of the program (calls MPI/PVM or a selected procedure).
    pub participant: bool,
    #[serde(flatten)]
    pub measures: Measures,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ThreadMetrics {
    pub tid: u32,
    pub pid: u32,
    #[serde(flatten)]
    pub measures: Measures,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcedureMetrics {
    /// Demangled (C++, Rust).
    pub name: String,
    /// As the binary has it (what `--func` matched).
    pub symbol: String,
    /// Entries seen.
    pub calls: u64,
    /// Elapsed and CPU time inside the procedure (callees included; a recursive
    /// activation inside another of the same procedure is not counted twice).
    pub elapsed_ns: u64,
    pub cpu_ns: u64,
    /// Elapsed time of every completed activation.
    pub duration: Distribution,
    pub processes: Vec<ProcedureInProcess>,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProcedureInProcess {
    pub pid: u32,
    pub rank: Option<i32>,
    pub calls: u64,
    pub elapsed_ns: u64,
    pub cpu_ns: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CallMetrics {
    /// MPI/PVM function name, or `futex`.
    pub name: String,
    pub cause: Cause,
    /// Elapsed time of each completed outermost call (futex: each wait).
    pub blocked: Distribution,
}

/// A call site: where the program called (MPI/PVM: the caller's return address; futex:
/// the first return address outside libc). Sites of different processes at the same
/// offset of the same file are one site.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CallSiteMetrics {
    pub name: String,
    pub cause: Cause,
    /// The mapped file holding the site, when the process's recorded mappings tell.
    pub object: Option<String>,
    /// Hex: the offset of the site from where the object's file offset 0 is mapped
    /// (symbolize `address - 1` in `object` for the line of the call), or, without an
    /// object, the address in process `pid`.
    pub address: String,
    pub pid: Option<u32>,
    pub blocked: Distribution,
    /// Function, file and line of the call, when the object's symbols or debug info
    /// name it (see [`Metrics::locate_sites`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Events {
    pub analyzed: u64,
    /// Records the probes dropped (from the recording's trailer, when known).
    pub lost: u64,
}
