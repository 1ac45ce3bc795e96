//! `tracer agent`: serves this node's part of jobs across nodes to a collector (`tracer
//! record --agent ...`; docs/multinode.md). Idle until a collector asks; then a session
//! traces every MPI/PVM process of this node (of this network namespace) from its first
//! call, as `tracer record --all` does, and streams its records to the collector until
//! the collector says stop or goes away. It never launches anything.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tracer_analysis::node::NodeInfo;
use tracer_user::remote::{
    serve, AgentConfig, Batch, CertificateFiles, CollectorJob, NodeTracer, ServerTls, SkewedClock,
    Token, TraceRequest,
};
use tracer_user::session::{self, Analysis, CommandTerminal, NodeRole, RecordOptions, StreamTo};
use tracer_user::UprobeLinks;

use super::print::say;

#[derive(Args)]
pub(super) struct AgentArgs {
    /// The address and port collectors connect to (e.g. 0.0.0.0:7421).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// The token collectors must present: this file's content (readable by root only).
    #[arg(long, value_name = "FILE")]
    token_file: PathBuf,
    /// Serve over TLS with this certificate (PEM) ...
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// ... and its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: accept only collectors whose certificate this CA (PEM) signed.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// The memory bound of a session, in MiB (as `record --memory-limit-mib`).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit_mib: Option<u64>,
    /// Testing only: every time this agent reports is shifted by this many ns, as if its
    /// clock were off (the collector's clock estimate must undo it).
    #[arg(
        long,
        value_name = "NS",
        default_value_t = 0,
        allow_negative_numbers = true,
        hide = true
    )]
    testing_clock_shift_ns: i64,
    /// Testing only: this agent's clock runs this many parts per million fast (negative:
    /// slow) from its start, on top of the shift (the collector must follow it).
    #[arg(
        long,
        value_name = "PPM",
        default_value_t = 0,
        allow_negative_numbers = true,
        hide = true
    )]
    testing_clock_drift_ppm: i64,
}

/// How long a collector waits for this node's session to be tracing.
const START_LIMIT: Duration = Duration::from_secs(60);

/// Runs the sessions collectors ask for, one at a time.
struct SessionsOnThisNode {
    memory_limit_bytes: u64,
    clock: SkewedClock,
}

impl NodeTracer for SessionsOnThisNode {
    fn node(&self) -> NodeInfo {
        tracer_user::this_node_now()
    }

    fn start(
        &self,
        request: TraceRequest,
        batches: tokio::sync::mpsc::Sender<Batch>,
        stop: Arc<AtomicBool>,
        job: CollectorJob,
    ) -> Result<(), String> {
        let (started, outcome) = mpsc::channel::<Result<(), String>>();
        let failed = started.clone();
        let (memory_limit_bytes, clock) = (self.memory_limit_bytes, self.clock);
        // The options hold hooks that stay on the session's thread: made there.
        let options = move || RecordOptions {
            pids: Vec::new(),
            command: Vec::new(),
            run_as: None,
            system_wide: true,
            duration: None,
            output: None,
            summary_json: None,
            profile_json: None,
            funcs: request.funcs.clone(),
            func_files: request.func_files.iter().map(PathBuf::from).collect(),
            libs: Vec::new(),
            locks: false,
            ring_mib: request.buffer_mib,
            memory_limit_bytes,
            floor_probes: false,
            bpf_stats: false,
            sample_hz: request.sample_hz,
            command_terminal: CommandTerminal::Shared,
            uprobe_links: UprobeLinks::Auto,
            clock: tracer_analysis::workclock::ClockKind::Cpu,
            analysis: Analysis::Live,
            whatif: None,
            interval: None,
            on_sample: None,
            on_loss: None,
            on_detach: None,
            on_ready: Some(Box::new(move |_| {
                let _ = started.send(Ok(()));
            })),
            on_probed: None,
            on_command_wait: None,
            node_role: NodeRole::Agent(StreamTo {
                batches,
                clock,
                new_processes_only: !request.every_process,
                job,
            }),
            stop: Some(stop),
        };
        std::thread::Builder::new()
            .name("node-session".into())
            .spawn(move || match session::record(options()) {
                Ok(outcome) => say!(
                    "tracer agent: session ended ({} events, {} lost)",
                    outcome.summary.events.total,
                    outcome.summary.events.lost
                ),
                Err(e) => {
                    let line = format!("{:#}", anyhow::Error::from(e));
                    say!("tracer agent: session failed: {line}");
                    let _ = failed.send(Err(line));
                }
            })
            .map_err(|e| format!("cannot start a session thread: {e}"))?;
        match outcome.recv_timeout(START_LIMIT) {
            Ok(r) => r,
            Err(_) => Err(format!(
                "this node's session was not tracing within {} s",
                START_LIMIT.as_secs()
            )),
        }
    }
}

pub(super) fn run(a: AgentArgs) -> anyhow::Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("tracer agent traces this node's processes: run it as root");
    }
    let token = Token::from_file(&a.token_file)?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls::from_files(
            &CertificateFiles {
                cert: cert.clone(),
                key: key.clone(),
            },
            a.tls_client_ca.as_deref(),
        )?),
        _ => None,
    };
    let clock = SkewedClock::from_now(a.testing_clock_shift_ns, a.testing_clock_drift_ppm);
    let tracer = SessionsOnThisNode {
        memory_limit_bytes: a
            .memory_limit_mib
            .map_or_else(session::default_limit_bytes, |mib| mib << 20),
        clock,
    };
    serve(
        AgentConfig {
            listen: a.listen,
            token,
            tls,
            clock,
            resume_window: tracer_user::remote::RESUME_WINDOW,
        },
        Arc::new(tracer),
        |address| say!("tracer agent: listening on {address}"),
    )?;
    Ok(ExitCode::SUCCESS)
}
