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
    control, Agent, AgentServer, BatchMsg, Control, HelloReply, HelloRequest, Ping, Pong, Resume,
};
use super::tls::ServerTls;
use super::version::version_mismatch;
use super::wire::{Batch, TraceRequest};
use crate::probes::monotonic_ns;

/// Batches between the node's session and the server: when the link is slower than the
/// node, the session's sends wait (and its ring buffer counts what it loses).
const BATCH_CHANNEL: usize = 64;
/// Batches sent but not acknowledged that the agent keeps, to send again to a collector
/// that takes the session up on a new link ([`RESUME_WINDOW`]). When this many are
/// unacknowledged, the agent sends no more until acks come: the collector's pace bounds
/// the agent's memory.
pub(super) const UNACKED_LIMIT: usize = 256;
/// How long a session whose collector's link broke goes on, keeping its batches, for the
/// collector to take it up again (Resume) before it ends (`AgentConfig::resume_window`).
pub const RESUME_WINDOW: Duration = Duration::from_secs(30);
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
    /// How long a session whose collector's link broke waits for it ([`RESUME_WINDOW`]).
    pub resume_window: Duration,
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
        resume_window: config.resume_window,
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
    /// The collector's id for it (`Start.session`), which a Resume names.
    id: u64,
    /// Where a new link for it goes (its forwarding takes it).
    reattach: mpsc::Sender<Reattach>,
}

/// A collector's new link for its session: its controls in, batches out from `next_seq`.
struct Reattach {
    controls: Streaming<Control>,
    stream: mpsc::Sender<Result<BatchMsg, Status>>,
    next_seq: u64,
    collector: String,
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
    resume_window: Duration,
}

impl AgentService {
    /// A Trace call that takes up the running session `resume.session` on a new link.
    async fn resume(
        &self,
        resume: Resume,
        controls: Streaming<Control>,
        collector: String,
    ) -> Result<Response<ReceiverStream<Result<BatchMsg, Status>>>, Status> {
        let reattach = {
            let slot = self.slot.lock().expect("session slot");
            match slot.as_ref() {
                Some(active) if resume.session != 0 && active.id == resume.session => {
                    active.reattach.clone()
                }
                _ => {
                    return Err(Status::not_found(format!(
                        "no session {} to take up",
                        resume.session
                    )))
                }
            }
        };
        let (stream_tx, stream) = mpsc::channel(STREAM_CHANNEL);
        let again = Reattach {
            controls,
            stream: stream_tx,
            next_seq: resume.next_seq,
            collector: collector.clone(),
        };
        if reattach.send(again).await.is_err() {
            return Err(Status::not_found("the session ended"));
        }
        log::info!(
            "agent: collector {collector} took its session up again from batch {}",
            resume.next_seq
        );
        Ok(Response::new(ReceiverStream::new(stream)))
    }

    /// The slot for session `id` of `collector`, whose new links go to `reattach`, or
    /// why not.
    fn claim(
        &self,
        collector: &str,
        id: u64,
        reattach: mpsc::Sender<Reattach>,
    ) -> Result<(SessionGuard, Arc<AtomicBool>), Status> {
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
            id,
            reattach,
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
        let mut controls = request.into_inner();
        let start = match tokio::time::timeout(START_TIMEOUT, controls.message()).await {
            Ok(Ok(Some(Control {
                kind: Some(control::Kind::Start(start)),
            }))) => start,
            Ok(Ok(Some(Control {
                kind: Some(control::Kind::Resume(resume)),
            }))) => return self.resume(resume, controls, collector).await,
            Ok(Err(status)) => return Err(status),
            Err(_) => return Err(Status::deadline_exceeded("no start request within 5 s")),
            Ok(Ok(_)) => {
                return Err(Status::invalid_argument(
                    "the first message of Trace must be its start request",
                ))
            }
        };
        let (reattach_tx, reattach) = mpsc::channel(1);
        let (guard, stop) = self.claim(&collector, start.session, reattach_tx)?;
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
                reattach,
                resume_window: self.resume_window,
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
    /// New links of the collector for this session (Resume), and how long it waits for
    /// one once its link broke.
    reattach: mpsc::Receiver<Reattach>,
    resume_window: Duration,
    /// Held until the node's session has ended (every sender of `batches` dropped).
    _guard: SessionGuard,
}

/// Where the collector of a session is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// Its link carries the batches.
    Attached,
    /// Its link broke at this time: the batches are kept for it to take the session up
    /// (within `Forwarding::resume_window`).
    Detached(Instant),
    /// It is not coming back: the session ends, its batches are dropped.
    Gone,
}

async fn forward(mut link: Forwarding) {
    let mut unacked: VecDeque<BatchMsg> = VecDeque::new();
    let mut peer = Peer::Attached;
    let mut controls_open = true;
    let mut batches_open = true;
    // Whether the last batch was sent on the link now attached.
    let mut last_sent = false;
    loop {
        let resume_by = match peer {
            Peer::Detached(since) => since + link.resume_window,
            _ => Instant::now() + Duration::from_secs(3600),
        };
        tokio::select! {
            batch = link.batches.recv(),
                if batches_open && (peer == Peer::Gone || unacked.len() < UNACKED_LIMIT) =>
            {
                let Some(batch) = batch else {
                    batches_open = false;
                    if !matches!(peer, Peer::Detached(_)) {
                        break;
                    }
                    continue; // the last batches wait for the collector to come back
                };
                if peer == Peer::Gone {
                    continue; // drained until the session ends
                }
                let message = BatchMsg::from(batch);
                unacked.push_back(message.clone());
                if peer == Peer::Attached {
                    last_sent |= message.last;
                    if link.stream.send(Ok(message)).await.is_err() {
                        peer = detach(&link);
                        last_sent = false;
                    }
                }
            }
            control = link.controls.message(), if peer == Peer::Attached && controls_open => {
                match control {
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
                        if !last_sent {
                            peer = detach(&link);
                        }
                    }
                }
            }
            reattach = link.reattach.recv(), if peer != Peer::Gone => {
                let Some(r) = reattach else { continue };
                link.controls = r.controls;
                link.stream = r.stream;
                link.collector = r.collector;
                controls_open = true;
                last_sent = false;
                peer = Peer::Attached;
                while unacked.front().is_some_and(|m| m.seq < r.next_seq) {
                    unacked.pop_front();
                }
                for message in unacked.iter().cloned() {
                    last_sent |= message.last;
                    if link.stream.send(Ok(message)).await.is_err() {
                        peer = detach(&link);
                        last_sent = false;
                        break;
                    }
                }
                if !batches_open && peer == Peer::Attached {
                    break; // everything the session made went out
                }
            }
            () = tokio::time::sleep_until(resume_by.into()), if matches!(peer, Peer::Detached(_)) => {
                log::warn!(
                    "agent: collector {} did not come back within {} s; ending its session",
                    link.collector,
                    link.resume_window.as_secs_f64()
                );
                peer = Peer::Gone;
                unacked.clear();
                link.stop.store(true, Ordering::SeqCst);
                if !batches_open {
                    break;
                }
            }
        }
    }
    if !last_sent && peer == Peer::Attached {
        log::warn!(
            "agent: the session for {} ended without its last batch",
            link.collector
        );
    }
    log::info!("agent: session for {} ended", link.collector);
}

/// The collector's link broke: the session goes on, its batches kept, for a while.
fn detach(link: &Forwarding) -> Peer {
    log::warn!(
        "agent: the link to collector {} broke; keeping its session {} s for it to \
         come back",
        link.collector,
        link.resume_window.as_secs_f64()
    );
    Peer::Detached(Instant::now())
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
