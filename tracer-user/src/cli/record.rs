use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::print::{say, say_part};
use anyhow::{bail, Context};
use clap::Args;
use tracer_analysis::network::NetworkTable;
use tracer_analysis::online::OnlineReplay;
use tracer_analysis::placement::PlacementSpec;
use tracer_analysis::profile::Profile;
use tracer_user::remote::{CertificateFiles, ClientTls, CollectorConfig, Token};
use tracer_user::session::{
    self, ClockCorrection, Collecting, CommandStatus, CommandTerminal, EventsSoFar, LossHook,
    NodeRole, ProbedHook, ReadyHook, RecordOptions, RunAs, SampleHook, StopReason,
};
use tracer_user::{UprobeLinks, MAX_RING_MIB};

#[derive(Args)]
pub(super) struct RecordArgs {
    /// Trace this running process, its threads and all its descendants (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Trace every process that calls MPI, PVM or a selected procedure.
    #[arg(short = 'a', long)]
    all: bool,
    /// Stop after this many seconds (a positive number).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Write the event recording here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write a JSON summary here (schema: docs/summary-json.md).
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    /// Probe entry and exit of procedures: SYMBOL or PATH:SYMBOL, globs allowed (repeatable).
    #[arg(long = "func", value_name = "SPEC")]
    funcs: Vec<String>,
    /// Also probe this MPI or PVM library (repeatable); installed ones are found anyway.
    #[arg(long = "lib", value_name = "PATH")]
    libs: Vec<PathBuf>,
    /// Also probe the pthread mutex, rwlock, spinlock, condition variable and barrier calls
    /// of the C library, in the traced processes only, so that lock hand-offs without
    /// contention are seen (every such call then costs about 3 us: 5.8 us per lock/unlock
    /// pair measured; docs/benchmarks.md).
    #[arg(long)]
    locks: bool,
    /// Ring buffer size in MiB (a power of two, at most 2048); the per-CPU slots get as much, shared out
    /// among the CPUs (256 to 16,384 slots of 136 bytes each). Default: 4 MiB per CPU
    /// (rounded up to a power of two) or a 256th of the machine's memory (rounded down),
    /// whichever is more, at least 16 and at most 256.
    #[arg(long, value_name = "MIB")]
    buffer_mib: Option<u32>,
    /// The tracer's memory bound in MiB: past it, it drops the records it reads (counted
    /// and warned of as lost) and goes on. Default: a quarter of the machine's memory, at
    /// most 8 GiB.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit_mib: Option<u64>,
    /// Write the critical path profile as JSON here (schema: docs/profile-json.md).
    #[arg(long, value_name = "FILE")]
    profile_json: Option<PathBuf>,
    /// Print the current critical path and top procedures every SECS seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    interval: Option<f64>,
    /// Which clock weighs the work between events.
    #[arg(long, value_enum, default_value = "cpu")]
    clock: super::analyze::Clock,
    /// Compute the critical path from the recording (-o) once tracing ends, not while the
    /// program runs: the same profile, and the ranks keep the CPU the engine would take
    /// from them (most of the tracer's CPU while it traces; a loop of small allreduces at
    /// 2 ranks on 2 cores ran 142 % slower traced instead of 188 %; docs/benchmarks.md).
    /// No --interval samples.
    #[arg(long)]
    analyze_after: bool,
    /// Benchmarks only: `floor` attaches empty eBPF programs where the per-call probes go
    /// (the cost of a probe that does nothing; docs/benchmarks.md).
    #[arg(long, value_enum, default_value = "all", hide = true)]
    probes: ProbeSet,
    /// How uprobes are attached: `multi` as one uprobe_multi link per program and binary
    /// (Linux 6.6+; stops in well under a second), `per-probe` as one perf event per probe
    /// (the kernel removes them one at a time, 0.1-0.2 s each), `auto` the first where the
    /// kernel has it.
    #[arg(long, value_enum, default_value = "auto", hide = true)]
    uprobe_links: UprobeLinks,
    /// Measure the probes' runs with the kernel's BPF run statistics, for the `cost:`
    /// line and the summary's `cost`: every run of our programs and its time, but
    /// machine-wide (other processes that map a probed library, every context switch)
    /// and at a price: about 75 ns more per probe run on the benchmark VM, 15 % of a
    /// probed MPI call (docs/benchmarks.md). Without it the runs in the traced program
    /// are counted from the records the probes wrote, and their time estimated.
    #[arg(long)]
    bpf_stats: bool,
    /// Sample each traced thread's user call stack HZ times per second of its CPU time
    /// (a CPU-clock perf event on every CPU; stacks unwound with the binaries' unwind
    /// tables, no frame pointers needed; docs/sampling.md). 0 turns the sampler off.
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_SAMPLE_HZ,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_SAMPLE_HZ)))]
    sample: u32,
    /// What-if while tracing: replay the run online with processes placed as SPEC says
    /// (as `tracer whatif --placement`) and print the predicted runtime at the end.
    #[arg(long, value_name = "SPEC")]
    whatif_placement: Option<String>,
    /// What-if while tracing: message costs from this table (as `tracer whatif
    /// --network`).
    #[arg(long, value_name = "TABLE")]
    whatif_network: Option<PathBuf>,
    /// Run the command as USER (a name or a numeric id): its groups, HOME, USER and
    /// LOGNAME; the output files are USER's too. Under sudo the default is the user who
    /// ran sudo; `--user root` keeps root. The tracer itself stays root.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Print nothing but errors and warnings about lost events.
    #[arg(short, long)]
    quiet: bool,
    /// Also trace the job on the node of the agent at HOST:PORT (`tracer agent`,
    /// repeatable): this tracer is the collector, and computes one critical path, one
    /// profile and one recording over every node (docs/multinode.md).
    #[arg(long = "agent", value_name = "HOST:PORT", requires = "token_file")]
    agents: Vec<String>,
    /// The token the agents expect: this file's content (the same file as theirs).
    #[arg(long, value_name = "FILE", requires = "agents")]
    token_file: Option<PathBuf>,
    /// Talk to the agents over TLS, trusting certificates this CA (PEM) signed.
    #[arg(long, value_name = "FILE", requires = "agents")]
    tls_ca: Option<PathBuf>,
    /// Mutual TLS: this collector's certificate (PEM) ...
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// ... and its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Testing only: how far the nodes' clocks are corrected (`none`: each node's records
    /// stay on its own clock; `offset`: moved by the offset measured at the start, no
    /// drift), to show what the correction does.
    #[arg(long, hide = true, requires = "agents", value_enum, default_value_t = ClockCorrection::Drift)]
    testing_clock_correction: ClockCorrection,
    /// The command to launch and trace from its first instruction.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl RecordArgs {
    /// Whether the session launches a command (`-- COMMAND`).
    pub(super) fn launches_command(&self) -> bool {
        !self.command.is_empty()
    }
}

/// `--sample`'s default: 99 rather than 100, so that the samples do not fall in step with
/// a program's own periodic work (perf's habit).
const DEFAULT_SAMPLE_HZ: u32 = 99;
/// The most `--sample` takes: the sampler's run (6 us) and its 16 KiB of ring per sample
/// grow with the rate; past 10 kHz they would be a sizable share of the program's CPU.
const MAX_SAMPLE_HZ: u32 = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProbeSet {
    All,
    Floor,
}

/// The collector's part when `--agent` is given: its agents, token and TLS, read and
/// checked before anything starts.
fn collector_role(a: &RecordArgs) -> anyhow::Result<NodeRole> {
    if a.agents.is_empty() {
        return Ok(NodeRole::Alone);
    }
    for agent in &a.agents {
        let port = agent.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(p)) if p > 0) {
            bail!("--agent {agent}: give HOST:PORT, as `tracer agent --listen` serves");
        }
    }
    let token_file = a
        .token_file
        .as_deref()
        .context("--agent needs --token-file")?;
    let tls = match &a.tls_ca {
        Some(ca) => {
            let identity = match (&a.tls_cert, &a.tls_key) {
                (Some(cert), Some(key)) => Some(CertificateFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }),
                _ => None,
            };
            Some(ClientTls::from_files(ca, identity.as_ref())?)
        }
        None => None,
    };
    Ok(NodeRole::Collector(Collecting {
        agents: CollectorConfig {
            agents: a.agents.clone(),
            token: Token::from_file(token_file)?,
            tls,
        },
        clock_correction: a.testing_clock_correction,
    }))
}

pub(super) fn run(a: RecordArgs) -> anyhow::Result<ExitCode> {
    let quiet = a.quiet;
    run_with(a, WhileTracing::printed(quiet))
}

/// What a session tells while it traces: `record` prints lines; `tracer top` gives them to
/// its live view, which gets a sample each second unless `--interval` says otherwise and
/// ends before the probes are detached, so that what is printed after it (the detaching
/// line, the summary) lands on a normal terminal.
pub(super) struct WhileTracing {
    pub(super) on_sample: SampleHook,
    pub(super) on_ready: Option<ReadyHook>,
    pub(super) on_loss: LossHook,
    pub(super) on_probed: Option<ProbedHook>,
    pub(super) before_detach: Option<Box<dyn FnOnce()>>,
    /// A view samples every second by default.
    pub(super) live_view: bool,
    /// A view draws on the terminal and reads its keys: the command is kept away from it.
    pub(super) command_terminal: CommandTerminal,
}

impl WhileTracing {
    /// `record`'s lines.
    fn printed(quiet: bool) -> WhileTracing {
        let started = std::time::Instant::now();
        WhileTracing {
            on_sample: Box::new(move |p: &Profile| say!("{}", sample_line(started.elapsed(), p))),
            on_ready: (!quiet)
                .then(|| Box::new(|r: &session::Ready| say!("{}", ready_line(r))) as ReadyHook),
            // Even with --quiet: the outputs will be incomplete, and the user can still
            // stop and retry with larger buffers.
            on_loss: Box::new(|e: &EventsSoFar| say!("{}", loss_line(e))),
            on_probed: None,
            before_detach: None,
            live_view: false,
            command_terminal: CommandTerminal::Shared,
        }
    }
}

/// How often a live view gets a sample by default.
const LIVE_INTERVAL: Duration = Duration::from_secs(1);

/// `record`, with the lines it prints while tracing or with a live view instead.
pub(super) fn run_with(a: RecordArgs, tracing: WhileTracing) -> anyhow::Result<ExitCode> {
    if let Some(mib) = a.buffer_mib.filter(|mib| !mib.is_power_of_two()) {
        bail!("--buffer-mib must be a power of two, got {mib}");
    }
    if let Some(mib) = a.buffer_mib.filter(|&mib| mib > MAX_RING_MIB) {
        bail!(
            "--buffer-mib {mib} is over the kernel's limit: a ring buffer holds at most \
             {MAX_RING_MIB} MiB (its size is a 32-bit count of bytes)"
        );
    }
    let duration = match a.duration {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            bail!("--duration must be a positive number of seconds, got {s}")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let interval = match a.interval {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            bail!("--interval must be a positive number of seconds, got {s}")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => tracing.live_view.then_some(LIVE_INTERVAL),
    };
    let whatif_placement = a
        .whatif_placement
        .as_deref()
        .map(PlacementSpec::parse_checked)
        .transpose()
        .context("--whatif-placement")?;
    let whatif_network = a
        .whatif_network
        .as_deref()
        .map(NetworkTable::load)
        .transpose()
        .context("--whatif-network")?;
    let whatif = OnlineReplay::asked(whatif_placement, whatif_network);
    let run_as = RunAs::resolve(a.user.as_deref())?;
    let node_role = collector_role(&a)?;
    let quiet = a.quiet;
    let WhileTracing {
        on_sample,
        on_ready,
        on_loss,
        on_probed,
        before_detach,
        live_view: _,
        command_terminal,
    } = tracing;
    let outcome = session::record(RecordOptions {
        func_files: Vec::new(),
        run_as,
        clock: a.clock.into(),
        analysis: if a.analyze_after {
            session::Analysis::AfterTracing
        } else {
            session::Analysis::Live
        },
        whatif,
        interval,
        on_sample: Some(on_sample),
        on_loss: Some(on_loss),
        pids: a.pids,
        command: a.command,
        system_wide: a.all,
        duration,
        output: a.output.clone(),
        summary_json: a.summary_json.clone(),
        profile_json: a.profile_json.clone(),
        on_detach: Some(Box::new(move |d: session::Detaching| {
            if let Some(end_view) = before_detach {
                end_view();
            }
            if !quiet {
                say!(
                    "tracer: outputs written; detaching {} probes in {} kernel links",
                    d.probes,
                    d.kernel_links
                )
            }
        })),
        funcs: a.funcs,
        libs: a.libs,
        locks: a.locks,
        ring_mib: a.buffer_mib,
        memory_limit_bytes: a
            .memory_limit_mib
            .map_or_else(session::default_limit_bytes, |mib| mib << 20),
        floor_probes: a.probes == ProbeSet::Floor,
        bpf_stats: a.bpf_stats,
        sample_hz: a.sample,
        uprobe_links: a.uprobe_links,
        command_terminal,
        on_ready,
        on_probed,
        node_role,
        stop: None,
        // Even with --quiet: the tracer would seem to hang without it.
        on_command_wait: Some(Box::new(|pid| {
            say!(
                "tracer: waiting for the traced command (pid {pid}) to end, for its status; \
                 Ctrl-C again stops waiting"
            )
        })),
    })?;
    if !a.quiet {
        let why = match outcome.stop {
            StopReason::TargetsExited => "traced processes exited",
            StopReason::Deadline => "duration reached",
            StopReason::Interrupted => "interrupted",
            StopReason::Terminated => "terminated",
            StopReason::Requested => "asked to stop",
        };
        say!("tracer: stopped ({why})");
        for l in &outcome.libraries {
            log::info!(
                "probed {} calls in {} ({:?})",
                l.calls,
                l.path.display(),
                l.flavor
            );
        }
        super::print_summary(&outcome.summary);
        say_part!("{}", outcome.profile.text());
        if let Some(Ok(p)) = &outcome.whatif {
            say!("{}", p.text_line());
        }
        if let Some(cost) = &outcome.summary.cost {
            say!("{}", cost.text_line());
        }
        match outcome.command_status {
            Some(CommandStatus::Exited(code)) if code != 0 => {
                say!("tracer: the traced command exited with status {code}")
            }
            Some(CommandStatus::Killed { signal }) => say!(
                "tracer: the traced command was killed by signal {signal} (status {})",
                128 + signal
            ),
            _ => {}
        }
        if let Some(o) = &a.output {
            say!("recording written to {}", o.display());
        }
    }
    super::warn_probe_failures(&outcome.summary.events.failures);
    super::warn_lost(outcome.summary.events.total, outcome.summary.events.lost);
    if let Some(Err(e)) = outcome.whatif {
        bail!("what-if: {e}");
    }
    if !outcome.unmatched_funcs.is_empty() {
        bail!(
            "--func matched no function anywhere: {}",
            outcome.unmatched_funcs.join(", ")
        );
    }
    // As `time` does: the command's own status, so that scripts and CI see a failure
    // through the tracer. A command still running when tracing stopped (--duration, or
    // a signal it did not end of within the session's grace) has none: the tracer's
    // own success.
    Ok(outcome
        .command_status
        .map_or(ExitCode::SUCCESS, |s| ExitCode::from(s.shell_code())))
}

/// What `record` prints when tracing starts.
fn ready_line(r: &session::Ready) -> String {
    format!(
        "tracer: tracing ({} processes, {} probes in {} MPI/PVM libraries so far, {}; more as \
         programs start); Ctrl-C stops",
        r.processes,
        r.probes,
        r.libraries,
        r.links.describe()
    )
}

/// The warning printed while tracing when the probes drop events.
pub(super) fn loss_line(e: &EventsSoFar) -> String {
    format!(
        "tracer: warning: {} events lost so far ({:.1} % of {}): the tracer is falling behind \
         and the results will be incomplete (a larger --buffer-mib may help)",
        e.lost,
        e.lost_percent(),
        e.recorded + e.lost
    )
}

/// One line a person can watch: elapsed time, critical path so far, top procedures (or,
/// with none selected, the sampled functions with most of the path in their own code:
/// by inclusive time, `main` and the stacks' other roots would always come first).
fn sample_line(elapsed: Duration, p: &Profile) -> String {
    let top: Vec<String> = if p.procedures.is_empty() {
        let mut own: Vec<_> = p.sampled_functions.iter().collect();
        own.sort_by_key(|r| std::cmp::Reverse(r.cp_exclusive_ns));
        own.iter()
            .take(3)
            .map(|r| {
                let pct =
                    100.0 * r.cp_exclusive_ns as f64 / p.critical_path.length_ns.max(1) as f64;
                format!("{} {pct:.1}% self", r.name)
            })
            .collect()
    } else {
        p.procedures
            .iter()
            .take(3)
            .map(|r| format!("{} {:.1}%", r.name, r.cp_pct))
            .collect()
    };
    // Before the program shows itself (an MPI/PVM call, a selected procedure), every
    // traced thread counts, a launcher's too: say so, since later samples count the
    // program's processes only and can be shorter.
    let over = if p.critical_path.within_program {
        ""
    } else {
        " (all traced threads: no MPI/PVM call or selected procedure yet)"
    };
    format!(
        "[{:>7.1}s] critical path {:>10.3} ms{over}  msgs {}/{}  {}",
        elapsed.as_secs_f64(),
        p.critical_path.length_ns as f64 / 1e6,
        p.messages.matched,
        p.messages.sent,
        top.join("  ")
    )
}
