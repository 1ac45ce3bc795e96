//! What a session is asked to do and what it reports: options, hooks, outcome.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::RunAs;
use crate::probes::{LinkKind, UprobeLinks};
use crate::remote::{Batch, CollectorConfig, SkewedClock};
use tracer_analysis::online::{OnlinePrediction, OnlineReplay};
use tracer_analysis::profile::Profile;
use tracer_analysis::replay::ReplayError;
use tracer_analysis::summary::Summary;
use tracer_analysis::workclock::ClockKind;

pub struct RecordOptions {
    pub pids: Vec<u32>,
    pub command: Vec<String>,
    /// Whom the command runs as, and who gets the output files ([`RunAs::resolve`]:
    /// `--user`, else the user who ran sudo); None: as we are.
    pub run_as: Option<RunAs>,
    pub system_wide: bool,
    pub duration: Option<Duration>,
    pub output: Option<PathBuf>,
    /// Written before the probes are detached (which takes seconds).
    pub summary_json: Option<PathBuf>,
    pub profile_json: Option<PathBuf>,
    pub funcs: Vec<String>,
    /// System-wide (an agent): executables to look the path-less `funcs` up in when the
    /// probes are loaded, those of them this node has (the collector's command's), so
    /// that its ranks have their procedures probed before they run rather than from
    /// their first MPI call on.
    pub func_files: Vec<PathBuf>,
    pub libs: Vec<PathBuf>,
    /// Probe the C library's pthread lock, condition variable and barrier calls in every
    /// traced process (per-process probes).
    pub locks: bool,
    /// The ring's size in MiB; None sizes it for the machine
    /// ([`crate::probes::default_ring_bytes`]).
    pub ring_mib: Option<u32>,
    /// Past this much resident memory the tracer drops the records it reads
    /// (`session::memory`).
    pub memory_limit_bytes: u64,
    /// Benchmarks only: empty programs instead of the per-call probes (`ProbeOptions::floor`).
    pub floor_probes: bool,
    /// `--bpf-stats`: the kernel's BPF run statistics on for the session, the cost's
    /// counts from them (`ProbeOptions::run_statistics`).
    pub bpf_stats: bool,
    /// Samples of each traced thread's user stack per second of its CPU time (`--sample
    /// HZ`, docs/sampling.md); 0: no sampling.
    pub sample_hz: u32,
    /// Where the launched command's standard streams go.
    pub command_terminal: CommandTerminal,
    /// How uprobes are attached (`--uprobe-links`).
    pub uprobe_links: UprobeLinks,
    /// Work clock of the critical path engine.
    pub clock: ClockKind,
    /// When the critical path is computed; [`Analysis::AfterTracing`] needs `output` and
    /// no `interval`.
    pub analysis: Analysis,
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
    pub on_detach: Option<Box<dyn FnOnce(Detaching)>>,
    /// Called once every probe is attached and the targets are traced.
    pub on_ready: Option<ReadyHook>,
    /// Called after each sample (`interval`) with the probes attached so far: a program
    /// loads its MPI or PVM library after tracing started, and the probes come then.
    pub on_probed: Option<ProbedHook>,
    /// Called, after the detaching, when a session stopped by Ctrl-C waits for the
    /// command it launched to end (mpirun takes seconds to end its ranks), with the
    /// command's pid: a second Ctrl-C stops the wait.
    pub on_command_wait: Option<Box<dyn FnOnce(u32)>>,
    /// Which part of a job across nodes the session is.
    pub node_role: NodeRole,
    /// Set by another thread to end the session at the event loop's next tick (an
    /// agent's, when its collector says stop or goes away).
    pub stop: Option<Arc<AtomicBool>>,
}

/// Which part of a job across nodes a session is (docs/multinode.md).
pub enum NodeRole {
    /// One machine: every process the session traces is its own.
    Alone,
    /// The collector (`tracer record --agent ...`): the agents start tracing their
    /// nodes before this session starts its command, and their records join its own
    /// in one stream, one analysis and one recording. Only the processes of this
    /// tracer's network namespace are its node's.
    Collector(Collecting),
    /// An agent's session (`tracer agent`): every record goes to the collector. Only
    /// the processes of the agent's network namespace are its node's.
    Agent(StreamTo),
}

/// A collector's agents.
pub struct Collecting {
    pub agents: CollectorConfig,
    /// Testing only (`--testing-clock-correction`): less than `Drift` shows what the
    /// correction does.
    pub clock_correction: ClockCorrection,
}

/// How the collector moves another node's records onto its clock (docs/multinode.md,
/// "Clocks").
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockCorrection {
    /// Not at all: each node's records on its own clock.
    None,
    /// By the offset measured when the agent connected.
    Offset,
    /// By the offset measured all along the session, its drift followed.
    Drift,
}

/// Where an agent's session sends its records.
pub struct StreamTo {
    /// Cut into a batch on each tick of the event loop; the last one says so.
    pub batches: tokio::sync::mpsc::Sender<Batch>,
    /// Testing only: how the node misreports its times, as if its clock were off.
    pub clock: SkewedClock,
    /// Only processes that start after the session (the collector's job; docs/
    /// multinode.md): those running already are left out, whatever they call.
    pub new_processes_only: bool,
    /// The collector's job, once it names it: processes of other jobs are left out.
    pub job: crate::remote::CollectorJob,
}

/// Where a launched command's standard streams go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandTerminal {
    /// The tracer's (`record`): the command writes where the tracer does, and a
    /// terminal's Ctrl-C reaches both.
    Shared,
    /// Away from the terminal, which a live view draws on and reads keys from (`tracer
    /// top`): the command reads /dev/null and writes its standard output and error to
    /// `output` (created, or emptied), in a process group of its own, so that nothing
    /// it writes lands on the view. A session stopped by a signal sends SIGINT to that
    /// group, as a terminal's Ctrl-C reaches the command of `record`.
    Detached { output: PathBuf },
}

/// When the critical path is computed: while tracing, or from the recording once tracing
/// ends (`--analyze-after`), which leaves the ranks the CPU the engine would take
/// while they run (docs/benchmarks.md, issue 22 round 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Analysis {
    Live,
    AfterTracing,
}

pub type ReadyHook = Box<dyn FnOnce(&Ready)>;
pub type SampleHook = Box<dyn FnMut(&Profile)>;
pub type LossHook = Box<dyn FnMut(&EventsSoFar)>;
pub type ProbedHook = Box<dyn FnMut(&Probed)>;

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
    /// How the uprobes are attached.
    pub links: LinkKind,
    pub processes: usize,
}

/// The probes attached so far, told while tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// Uprobes (an entry and a return probe count two).
    pub probes: usize,
    /// MPI and PVM libraries probed.
    pub libraries: usize,
}

/// What is left to detach when the outputs are written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detaching {
    /// Uprobes (an entry and a return probe count two) and tracepoints are not counted.
    pub probes: usize,
    /// The kernel links that hold them: the kernel removes one per RCU grace period.
    pub kernel_links: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    TargetsExited,
    Deadline,
    /// SIGINT (Ctrl-C): the session waits for the command it launched to end, which the
    /// same Ctrl-C reached from a terminal, as long as it takes (a second one stops the
    /// wait).
    Interrupted,
    /// SIGTERM: the session ends promptly, the command given a moment to end.
    Terminated,
    /// Another thread asked (`RecordOptions::stop`): an agent's collector.
    Requested,
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
    pub(super) fn from_wait_status(status: i32) -> Self {
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
    pub libraries: Vec<crate::target::libraries::ProbedLibrary>,
}
