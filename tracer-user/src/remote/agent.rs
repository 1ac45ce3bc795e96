//! `tracer agent`'s server: answers Hello and Clock, and runs one tracing session at a
//! time for a collector (Trace), forwarding the batches of its [`NodeTracer`] as they
//! come and keeping those not yet acknowledged.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Request, Response, Status, Streaming};
use tracer_analysis::node::NodeInfo;

use super::auth::{Token, TokenCheck};
use super::clock::SkewedClock;
use super::error::{innermost, RemoteError};
use super::proto::{
    control, Agent, AgentServer, BatchMsg, Control, HelloReply, HelloRequest, Ping, Pong,
};
use super::tls::ServerTls;
use super::version::version_mismatch;
use super::wire::{Batch, TraceRequest};
use crate::probes::monotonic_ns;

/// Batches between the node's session and the server: when the link is slower than the
/// node, the session's sends wait (and its ring buffer counts what it loses).
const BATCH_CHANNEL: usize = 64;
/// Batches sent but not acknowledged that the agent keeps (for a link that comes back;
/// not replayed yet). When this many are unacknowledged, the agent sends no more until
/// acks come: the collector's pace bounds the agent's memory.
pub(super) const UNACKED_LIMIT: usize = 256;
/// Batches between the forwarder and the gRPC stream.
const STREAM_CHANNEL: usize = 16;
/// How long the agent waits for a session's last batch when it is told to end.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long the agent then waits for the streams to be written out.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long a collector may take to send its request after opening Trace.
const START_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on idle links: a collector that vanished (its machine died, the network
/// broke) is noticed within interval + timeout, and its session ended.
pub(super) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
pub(super) const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// What the agent runs for a collector: the node's tracing session.
pub trait NodeTracer: Send + Sync + 'static {
    /// This node, as the collector's recording will name it.
    fn node(&self) -> NodeInfo;
    /// Starts tracing for a collector on a thread of its own: every batch goes into
    /// `batches` (seq 0,1,2,... the last one with `last: true`); it ends when `stop` is
    /// set or its targets are gone. `job` is the collector's job once it says it (the
    /// session then leaves out processes of other jobs). Err: a one-line reason the
    /// collector is told.
    fn start(
        &self,
        request: TraceRequest,
        batches: mpsc::Sender<Batch>,
        stop: Arc<AtomicBool>,
        job: CollectorJob,
    ) -> Result<(), String>;
}

/// The collector's job, set once when it says it.
pub type CollectorJob = Arc<OnceLock<String>>;

pub struct AgentConfig {
    pub listen: SocketAddr,
    pub token: Token,
    pub tls: Option<ServerTls>,
    /// Testing only: how the agent misreports its clock (its pongs), to play a node
    /// whose clock is off; hidden options.
    pub clock: SkewedClock,
}

/// Serves collectors until SIGINT/SIGTERM (then stops a running session: sets its stop
/// flag and waits at most 5 s for its last batch to be sent). Builds its own tokio
/// runtime. `on_listening` is told the address once it is bound.
pub fn serve(
    config: AgentConfig,
    tracer: Arc<dyn NodeTracer>,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), RemoteError> {
    let listener =
        std::net::TcpListener::bind(config.listen).map_err(|source| RemoteError::Listen {
            address: config.listen,
            source,
        })?;
    // Bound: collectors can connect from now on (they queue until the server runs).
    on_listening(listener.local_addr().unwrap_or(config.listen));
    serve_on(listener, config, tracer, async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                log::warn!("agent: cannot wait for SIGTERM ({e}); SIGINT ends it");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    })
}

/// [`serve`] on a bound listener until `shutdown` completes (the tests' way in: an
/// ephemeral port, a shutdown of their own).
pub(super) fn serve_on(
    listener: std::net::TcpListener,
    config: AgentConfig,
    tracer: Arc<dyn NodeTracer>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RemoteError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tracer-agent")
        .enable_all()
        .build()
        .map_err(RemoteError::Runtime)?;
    let address = listener
        .local_addr()
        .map_err(|source| RemoteError::Listen {
            address: config.listen,
            source,
        })?;
    let result = runtime.block_on(async {
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener))
            .map_err(|source| RemoteError::Listen { address, source })?;
        run(listener, config, tracer, shutdown).await
    });
    // Tasks still running (a collector's idle connection) are dropped, not awaited.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run(
    listener: tokio::net::TcpListener,
    config: AgentConfig,
    tracer: Arc<dyn NodeTracer>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RemoteError> {
    let slot = Arc::new(Mutex::new(None));
    let service = AgentService {
        tracer,
        clock: config.clock,
        slot: slot.clone(),
    };
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT));
    if let Some(tls) = &config.tls {
        builder = builder
            .tls_config(tls.config.clone())
            .map_err(|e| RemoteError::Serve {
                reason: innermost(&e),
            })?;
    }
    let server = AgentServer::new(service)
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Gzip);
    let service = InterceptedService::new(
        server,
        TokenCheck {
            token: config.token,
        },
    );
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let (drain, drained) = oneshot::channel::<()>();
    let mut serving =
        tokio::spawn(
            builder.serve_with_incoming_shutdown(service, incoming, async {
                let _ = drained.await;
            }),
        );
    tokio::select! {
        result = &mut serving => {
            return match result {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(RemoteError::Serve { reason: innermost(&e) }),
                Err(e) => Err(RemoteError::Serve { reason: e.to_string() }),
            };
        }
        () = shutdown => {}
    }
    end_session(&slot).await;
    // A graceful end: the server stops accepting, and the streams still open (the
    // session's last batches) are written out before their connections close.
    let _ = drain.send(());
    if tokio::time::timeout(DRAIN_GRACE, &mut serving)
        .await
        .is_err()
    {
        log::warn!(
            "agent: connections still open after {} s; closing them",
            DRAIN_GRACE.as_secs()
        );
        serving.abort();
    }
    Ok(())
}

/// Stops the running session, if any, and waits for its end (its last batch sent) at
/// most STOP_GRACE.
async fn end_session(slot: &SessionSlot) {
    let Some(stop) = slot
        .lock()
        .expect("session slot")
        .as_ref()
        .map(|s| s.stop.clone())
    else {
        return;
    };
    log::info!("agent: ending the running session");
    stop.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + STOP_GRACE;
    while slot.lock().expect("session slot").is_some() {
        if Instant::now() >= deadline {
            log::warn!(
                "agent: the session did not end within {} s; leaving it",
                STOP_GRACE.as_secs()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The one session an agent runs at a time.
struct ActiveSession {
    collector: String,
    since: SystemTime,
    stop: Arc<AtomicBool>,
}

type SessionSlot = Arc<Mutex<Option<ActiveSession>>>;

/// Frees the slot when the session's forwarding ends (or its start fails).
struct SessionGuard {
    slot: SessionSlot,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.slot.lock() {
            // A session still running (its task ended early) is told to stop.
            if let Some(session) = slot.take() {
                session.stop.store(true, Ordering::SeqCst);
            }
        }
    }
}

struct AgentService {
    tracer: Arc<dyn NodeTracer>,
    clock: SkewedClock,
    slot: SessionSlot,
}

impl AgentService {
    /// The slot for a session of `collector`, or why not.
    fn claim(&self, collector: &str) -> Result<(SessionGuard, Arc<AtomicBool>), Status> {
        let mut slot = self.slot.lock().expect("session slot");
        if let Some(active) = slot.as_ref() {
            log::warn!(
                "agent: refused a session for {collector}: tracing for {} already",
                active.collector
            );
            return Err(Status::resource_exhausted(format!(
                "agent busy: tracing for {} since {}",
                active.collector,
                utc_time(active.since)
            )));
        }
        let stop = Arc::new(AtomicBool::new(false));
        *slot = Some(ActiveSession {
            collector: collector.to_string(),
            since: SystemTime::now(),
            stop: stop.clone(),
        });
        Ok((
            SessionGuard {
                slot: self.slot.clone(),
            },
            stop,
        ))
    }
}

#[tonic::async_trait]
impl Agent for AgentService {
    async fn hello(&self, request: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let ours = env!("CARGO_PKG_VERSION");
        let theirs = &request.get_ref().version;
        if let Some(reason) = version_mismatch(ours, theirs) {
            log::warn!("agent: refused {}: {reason}", peer(&request));
            return Err(Status::failed_precondition(reason));
        }
        let node = self.tracer.node();
        Ok(Response::new(HelloReply {
            version: ours.to_string(),
            node: Some((&node).into()),
        }))
    }

    async fn clock(&self, _request: Request<Ping>) -> Result<Response<Pong>, Status> {
        Ok(Response::new(Pong {
            monotonic_ns: self.clock.read(monotonic_ns()),
        }))
    }

    type TraceStream = ReceiverStream<Result<BatchMsg, Status>>;

    async fn trace(
        &self,
        request: Request<Streaming<Control>>,
    ) -> Result<Response<Self::TraceStream>, Status> {
        let collector = peer(&request);
        let (guard, stop) = self.claim(&collector)?;
        let mut controls = request.into_inner();
        let start = match tokio::time::timeout(START_TIMEOUT, controls.message()).await {
            Ok(Ok(Some(Control {
                kind: Some(control::Kind::Start(start)),
            }))) => start,
            Ok(Err(status)) => return Err(status),
            Err(_) => return Err(Status::deadline_exceeded("no start request within 5 s")),
            Ok(Ok(_)) => {
                return Err(Status::invalid_argument(
                    "the first message of Trace must be its start request",
                ))
            }
        };
        let (batches_tx, batches) = mpsc::channel(BATCH_CHANNEL);
        let (stream_tx, stream) = mpsc::channel(STREAM_CHANNEL);
        let (started_tx, started) = oneshot::channel();
        let job = CollectorJob::default();
        // The session runs in a task of its own, not in this call, which is dropped if
        // the collector goes away while the node starts tracing: the task then still
        // sees the session to its end (stopped at once, its batches drained).
        tokio::spawn(run_session(
            self.tracer.clone(),
            start.into(),
            batches_tx,
            Forwarding {
                batches,
                controls,
                stream: stream_tx,
                stop,
                job,
                collector,
                _guard: guard,
            },
            started_tx,
        ));
        match started.await {
            Ok(Ok(())) => Ok(Response::new(ReceiverStream::new(stream))),
            Ok(Err(reason)) => Err(Status::failed_precondition(reason)),
            Err(_) => Err(Status::internal("the node's session failed to start")),
        }
    }
}

/// Starts the node's session (`started` says how that went), then forwards its batches.
async fn run_session(
    tracer: Arc<dyn NodeTracer>,
    request: TraceRequest,
    batches: mpsc::Sender<Batch>,
    link: Forwarding,
    started: oneshot::Sender<Result<(), String>>,
) {
    let (stop, job) = (link.stop.clone(), link.job.clone());
    // start() may take long (loading the probes): not on the runtime's threads.
    let result = tokio::task::spawn_blocking(move || tracer.start(request, batches, stop, job))
        .await
        .unwrap_or_else(|e| Err(format!("the node's session panicked while starting: {e}")));
    if let Err(reason) = &result {
        log::warn!(
            "agent: could not start a session for {}: {reason}",
            link.collector
        );
    }
    let ok = result.is_ok();
    // A collector that went away meanwhile is noticed by the forwarding.
    let _ = started.send(result);
    if ok {
        log::info!("agent: tracing for {}", link.collector);
        forward(link).await;
    }
}

/// One session's link: the node's batches out, the collector's acks and stop in.
struct Forwarding {
    batches: mpsc::Receiver<Batch>,
    controls: Streaming<Control>,
    stream: mpsc::Sender<Result<BatchMsg, Status>>,
    stop: Arc<AtomicBool>,
    job: CollectorJob,
    collector: String,
    /// Held until the node's session has ended (every sender of `batches` dropped).
    _guard: SessionGuard,
}

async fn forward(mut link: Forwarding) {
    let mut unacked: VecDeque<BatchMsg> = VecDeque::new();
    let mut collector_gone = false;
    let mut controls_open = true;
    let mut last_sent = false;
    loop {
        tokio::select! {
            batch = link.batches.recv(), if collector_gone || unacked.len() < UNACKED_LIMIT => {
                let Some(batch) = batch else { break };
                if collector_gone {
                    continue; // drained until the session ends
                }
                let message = BatchMsg::from(batch);
                last_sent |= message.last;
                unacked.push_back(message.clone());
                if link.stream.send(Ok(message)).await.is_err() {
                    collector_gone = true;
                    unacked.clear();
                    end_for_lost_collector(&link);
                }
            }
            control = link.controls.message(), if controls_open => match control {
                Ok(Some(Control { kind: Some(control::Kind::Ack(seq)) })) => {
                    while unacked.front().is_some_and(|m| m.seq <= seq) {
                        unacked.pop_front();
                    }
                }
                Ok(Some(Control { kind: Some(control::Kind::Stop(_)) })) => {
                    log::info!("agent: collector {} asked to stop", link.collector);
                    link.stop.store(true, Ordering::SeqCst);
                }
                Ok(Some(Control { kind: Some(control::Kind::Job(job)) })) => {
                    log::info!("agent: collector {} traces job {job}", link.collector);
                    if link.job.set(job).is_err() {
                        log::warn!(
                            "agent: collector {} named its job twice; the first stays",
                            link.collector
                        );
                    }
                }
                Ok(Some(_)) => log::warn!(
                    "agent: collector {} sent a message out of place; ignored",
                    link.collector
                ),
                Ok(None) | Err(_) => {
                    controls_open = false;
                    if !last_sent && !collector_gone {
                        collector_gone = true;
                        unacked.clear();
                        end_for_lost_collector(&link);
                    }
                }
            },
        }
    }
    if !last_sent && !collector_gone {
        log::warn!(
            "agent: the session for {} ended without its last batch",
            link.collector
        );
    }
    log::info!("agent: session for {} ended", link.collector);
}

fn end_for_lost_collector(link: &Forwarding) {
    log::warn!(
        "agent: collector {} disconnected; ending its session",
        link.collector
    );
    link.stop.store(true, Ordering::SeqCst);
}

fn peer<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map_or_else(|| "an unknown address".to_string(), |a| a.to_string())
}

/// `HH:MM:SS UTC` of a time (of today, for the busy message).
fn utc_time(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!(
        "{:02}:{:02}:{:02} UTC",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}
