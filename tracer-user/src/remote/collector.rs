//! The collector's links: one per agent, each connected, checked (Hello), its clock
//! measured, then tracing; their batches and failures come out as one stream of
//! [`LinkEvent`]s.

use std::error::Error;
use std::future::Future;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use tracer_analysis::node::NodeInfo;

use super::agent::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use super::auth::{Token, TokenHeader};
use super::clock::{estimate, measure_period, ClockOffset};
use super::error::{innermost, RemoteError};
use super::proto::{
    control, AgentClient, BatchMsg, Control, HelloRequest, Ping, Resume, Start, Stop,
};
use super::tls::ClientTls;
use super::version::version_mismatch;
use super::wire::{Batch, TraceRequest};

/// How long connecting to an agent and each of its answers (Hello, a pong) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the start of an agent's session may take: its node loads and attaches the
/// probes first (seconds with many processes or `--func` procedures).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest batch a collector takes (tonic's default is 4 MiB).
const MAX_BATCH_BYTES: usize = 64 << 20;
/// Control messages (acks, stop) waiting to go to an agent; acks are cumulative, so one
/// that finds the queue full is dropped without harm.
const CONTROL_CHANNEL: usize = 64;
/// Events waiting for the session: when it is slower than the links, the links wait, and
/// so do the agents (their unacknowledged bound).
const EVENT_CHANNEL: usize = 1024;

pub struct CollectorConfig {
    /// HOST:PORT of each agent.
    pub agents: Vec<String>,
    pub token: Token,
    pub tls: Option<ClientTls>,
}

/// One agent's node, as it introduced itself.
#[derive(Clone, Debug)]
pub(crate) struct RemoteNode {
    pub(crate) address: String,
    pub(crate) node: NodeInfo,
    pub(crate) clock: ClockOffset,
}

#[derive(Debug)]
pub(crate) enum LinkEvent {
    Batch {
        /// Index into the agents.
        node: usize,
        batch: Batch,
    },
    /// The link dropped, the agent died or a batch is missing: nothing more comes from
    /// this node. `error` is one line naming the agent.
    Failed { node: usize, error: String },
    /// A new measurement of the node's clock (every `measure_period` while its link
    /// reads batches).
    Clock { node: usize, offset: ClockOffset },
}

pub(super) type Client = AgentClient<InterceptedService<Channel, TokenHeader>>;

/// An agent the collector talks to.
struct Link {
    address: String,
    client: Client,
    controls: mpsc::Sender<Control>,
}

/// The collector's side of every link, with a runtime of its own (one worker thread), so
/// that the links run whatever the caller does: block, or run its own runtime.
pub(crate) struct Collector {
    runtime: Option<tokio::runtime::Runtime>,
    links: Vec<Link>,
    nodes: Vec<RemoteNode>,
    events: mpsc::Receiver<LinkEvent>,
}

impl Collector {
    /// Blocking: connects to every agent (at most 5 s each, all at once), Hello, clock
    /// estimate, then starts Trace with `request` on each. Err: one line naming the
    /// first agent (in the order given) that failed; the sessions already started on
    /// others end (their links are dropped). The clock of each node for which
    /// `follow_clock` says so is measured again every `measure_period` while its link
    /// reads batches (an agent on this kernel shares its clock: never pinged again).
    pub(crate) fn connect(
        config: &CollectorConfig,
        request: &TraceRequest,
        follow_clock: impl Fn(&RemoteNode) -> bool,
    ) -> Result<Collector, RemoteError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tracer-collector")
            .enable_all()
            .build()
            .map_err(RemoteError::Runtime)?;
        let start = Start {
            session: session_id(),
            ..Start::from(request)
        };
        let pending: Vec<_> = config
            .agents
            .iter()
            .map(|address| {
                runtime.spawn(open_link(
                    address.clone(),
                    config.token.clone(),
                    config.tls.clone(),
                    start.clone(),
                ))
            })
            .collect();
        let opened = block_on(&runtime, async move {
            let mut opened = Vec::new();
            for task in pending {
                opened.push(task.await.expect("a link's task panicked"));
            }
            opened
        });
        let opened: Vec<OpenLink> = opened.into_iter().collect::<Result<_, _>>()?;
        let (events_tx, events) = mpsc::channel(EVENT_CHANNEL);
        let mut links = Vec::new();
        let mut nodes = Vec::new();
        for (index, open) in opened.into_iter().enumerate() {
            let (reading, read_over) = oneshot::channel();
            runtime.spawn(read_link(
                Reading {
                    node: index,
                    address: open.link.address.clone(),
                    client: open.link.client.clone(),
                    session: start.session,
                    batches: open.batches,
                    call: open.call,
                    controls: open.controls,
                    acks: open.link.controls.clone(),
                    events: events_tx.clone(),
                    stopping: false,
                },
                reading,
            ));
            if follow_clock(&open.node) {
                runtime.spawn(watch_clock(
                    index,
                    open.link.address.clone(),
                    open.link.client.clone(),
                    events_tx.clone(),
                    read_over,
                ));
            }
            links.push(open.link);
            nodes.push(open.node);
        }
        Ok(Collector {
            runtime: Some(runtime),
            links,
            nodes,
            events,
        })
    }

    pub(crate) fn nodes(&self) -> &[RemoteNode] {
        &self.nodes
    }

    /// Every link's batches and failures, in arrival order; usable from any tokio
    /// runtime. Closed once every link has sent its last batch or failed.
    pub(crate) fn events(&mut self) -> &mut mpsc::Receiver<LinkEvent> {
        &mut self.events
    }

    /// Tells every agent the session's job: from then on it leaves out processes of
    /// other jobs.
    pub(crate) fn tell_job(&self, job: &str) {
        for link in &self.links {
            let controls = link.controls.clone();
            let job = job.to_string();
            self.runtime().spawn(async move {
                // A link gone has no session to tell.
                let _ = controls
                    .send(Control {
                        kind: Some(control::Kind::Job(job)),
                    })
                    .await;
            });
        }
    }

    /// Asks every agent to end its session; its remaining batches follow, the last with
    /// `last`.
    pub(crate) fn stop(&self) {
        for link in &self.links {
            let controls = link.controls.clone();
            self.runtime().spawn(async move {
                // A link already gone has nothing to stop.
                let _ = controls
                    .send(Control {
                        kind: Some(control::Kind::Stop(Stop {})),
                    })
                    .await;
            });
        }
    }

    /// A fresh clock estimate of each node (the same method as at connection), e.g. at
    /// the end of a session.
    pub(crate) fn measure_clocks(&self) -> Vec<Result<ClockOffset, RemoteError>> {
        let tasks: Vec<_> = self
            .links
            .iter()
            .map(|link| {
                let client = link.client.clone();
                let address = link.address.clone();
                self.runtime()
                    .spawn(async move { measure_clock(&address, client).await })
            })
            .collect();
        block_on(self.runtime(), async move {
            let mut offsets = Vec::new();
            for task in tasks {
                offsets.push(task.await.expect("a clock task panicked"));
            }
            offsets
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the collector")
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // Without waiting (allowed inside another runtime too): the links' tasks are
        // dropped, and each agent sees its collector gone and ends its session.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `future` on `runtime` and waits for it on this thread, which may itself be a
/// runtime's (where `Runtime::block_on` would panic).
fn block_on<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    future: impl Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv().expect("the collector's runtime dropped a task")
}

/// A link whose session has started, before its batches are read.
struct OpenLink {
    link: Link,
    node: RemoteNode,
    batches: Streaming<BatchMsg>,
    /// The Trace call's control stream, and the controls the session sends
    /// (`Link::controls`), which go on it (and on the next call's, after a resume).
    call: mpsc::Sender<Control>,
    controls: mpsc::Receiver<Control>,
}

/// A session's id for its agents (`Start.session`, which a Resume names): not 0, and
/// unlike another collector's.
fn session_id() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    (now ^ u64::from(std::process::id()).rotate_left(40)) | 1
}

async fn open_link(
    address: String,
    token: Token,
    tls: Option<ClientTls>,
    start: Start,
) -> Result<OpenLink, RemoteError> {
    let using_tls = tls.is_some();
    let client = connect(&address, token, tls).await?;
    // The generated calls take the client mutably: each call here has a clone.
    let mut caller = client.clone();
    let hello = caller.hello(HelloRequest {
        version: env!("CARGO_PKG_VERSION").to_string(),
    });
    let reply = timed(&address, CALL_TIMEOUT, hello)
        .await?
        .map_err(|s| first_call_error(&address, using_tls, &s))?
        .into_inner();
    if let Some(reason) = version_mismatch(&reply.version, env!("CARGO_PKG_VERSION")) {
        return Err(RemoteError::Version { address, reason });
    }
    let node = reply.node.ok_or_else(|| RemoteError::Malformed {
        address: address.clone(),
        what: "Hello reply",
        reason: "no node".into(),
    })?;
    let clock = measure_clock(&address, client.clone()).await?;
    let (controls, controls_rx) = mpsc::channel(CONTROL_CHANNEL);
    let (call, call_rx) = mpsc::channel(CONTROL_CHANNEL);
    call.send(Control {
        kind: Some(control::Kind::Start(start)),
    })
    .await
    .expect("the receiver is here");
    let mut caller = client.clone();
    let trace = caller.trace(ReceiverStream::new(call_rx));
    let batches = timed(&address, START_TIMEOUT, trace)
        .await?
        .map_err(|s| call_error(&address, &s))?
        .into_inner();
    Ok(OpenLink {
        node: RemoteNode {
            address: address.clone(),
            node: node.into(),
            clock,
        },
        link: Link {
            address,
            client,
            controls,
        },
        batches,
        call,
        controls: controls_rx,
    })
}

/// The channel to an agent, with the token on every call.
pub(super) async fn connect(
    address: &str,
    token: Token,
    tls: Option<ClientTls>,
) -> Result<Client, RemoteError> {
    let bad_address = || RemoteError::BadAddress {
        address: address.to_string(),
    };
    let has_port = address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !has_port {
        return Err(bad_address());
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
        .map_err(|_| bad_address())?
        .connect_timeout(CALL_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    let using_tls = tls.is_some();
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls.config)
            .map_err(|e| RemoteError::Tls {
                address: address.to_string(),
                reason: innermost(&e),
            })?;
    }
    let channel = match tokio::time::timeout(CALL_TIMEOUT, endpoint.connect()).await {
        Err(_) => {
            return Err(RemoteError::Timeout {
                address: address.to_string(),
                seconds: CALL_TIMEOUT.as_secs(),
            })
        }
        Ok(Err(e)) => return Err(connect_error(address, using_tls, &e)),
        Ok(Ok(channel)) => channel,
    };
    Ok(
        AgentClient::new(InterceptedService::new(channel, TokenHeader { token }))
            .accept_compressed(CompressionEncoding::Gzip)
            .max_decoding_message_size(MAX_BATCH_BYTES),
    )
}

/// Why the connection failed: the network (nobody listens, no route, no such host), or
/// else, when TLS is on, its handshake.
fn connect_error(address: &str, using_tls: bool, error: &tonic::transport::Error) -> RemoteError {
    let reason = innermost(error);
    let mut source: Option<&(dyn Error + 'static)> = Some(error);
    let mut network = false;
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            network |= matches!(
                io.kind(),
                ConnectionRefused
                    | TimedOut
                    | HostUnreachable
                    | NetworkUnreachable
                    | AddrNotAvailable
            );
        }
        network |= e.to_string().starts_with("dns error");
        source = e.source();
    }
    if using_tls && !network {
        RemoteError::Tls {
            address: address.to_string(),
            reason,
        }
    } else {
        RemoteError::Unreachable {
            address: address.to_string(),
            reason,
        }
    }
}

/// An agent's refusal or a failed call, as the one line the user reads.
pub(super) fn call_error(address: &str, status: &Status) -> RemoteError {
    let address = address.to_string();
    let reason = status.message().to_string();
    match status.code() {
        Code::Unauthenticated => RemoteError::Token { address },
        Code::ResourceExhausted => RemoteError::Busy {
            address,
            reason: reason.trim_start_matches("agent busy: ").to_string(),
        },
        Code::FailedPrecondition if reason.contains("major.minor") => {
            RemoteError::Version { address, reason }
        }
        Code::FailedPrecondition => RemoteError::Start { address, reason },
        code => RemoteError::Call {
            address,
            reason: format!("{code:?}: {}", status_line(status)),
        },
    }
}

/// The first call on a new connection (Hello) failed: what a broken connection then
/// means, else [`call_error`].
fn first_call_error(address: &str, using_tls: bool, status: &Status) -> RemoteError {
    let broken = matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
    );
    let address = address.to_string();
    let reason = status
        .source()
        .map_or(status.message().to_string(), innermost);
    match (broken, using_tls) {
        // A TLS agent answers a plain HTTP/2 preface with a TLS alert, which hyper reads
        // as a broken connection.
        (true, false) => RemoteError::NotPlain { address, reason },
        // With TLS 1.3 the client's handshake is over before the agent has checked the
        // client's certificate: an agent that wants one (or another) drops the
        // connection at the first call.
        (true, true) => RemoteError::TlsClosed { address, reason },
        (false, _) => call_error(&address, status),
    }
}

/// `call` within `limit`.
async fn timed<T>(
    address: &str,
    limit: Duration,
    call: impl Future<Output = T>,
) -> Result<T, RemoteError> {
    tokio::time::timeout(limit, call)
        .await
        .map_err(|_| RemoteError::Timeout {
            address: address.to_string(),
            seconds: limit.as_secs(),
        })
}

async fn measure_clock(address: &str, client: Client) -> Result<ClockOffset, RemoteError> {
    estimate(|| {
        let mut client = client.clone();
        async move {
            let pong = timed(address, CALL_TIMEOUT, client.clock(Ping {})).await?;
            pong.map(|p| p.into_inner().monotonic_ns)
                .map_err(|s| call_error(address, &s))
        }
    })
    .await
}

/// Measures one node's clock every `measure_period` until its link's reader ends (the
/// drop of `reading`'s sender). A measurement that fails (a link down for a while) is
/// skipped; the link's reader says whether the link is lost.
async fn watch_clock(
    node: usize,
    address: String,
    client: Client,
    events: mpsc::Sender<LinkEvent>,
    mut read_over: oneshot::Receiver<()>,
) {
    // The connection measured the clock just before: the first wait starts now.
    for done in 0.. {
        let measured = tokio::select! {
            _ = &mut read_over => return,
            _ = tokio::time::sleep(measure_period(done)) => tokio::select! {
                _ = &mut read_over => return,
                m = measure_clock(&address, client.clone()) => m,
            },
        };
        match measured {
            Ok(offset) => {
                if events
                    .send(LinkEvent::Clock { node, offset })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(e) => log::debug!("node {address}: a clock measurement failed: {e}"),
        }
    }
}

/// How long the collector tries to take a session up again on a new link after its
/// link broke (the agent keeps it [`super::RESUME_WINDOW`]).
const RESUME_TRYING: Duration = Duration::from_secs(25);
/// Between two tries.
const RESUME_PAUSE: Duration = Duration::from_millis(500);

/// What one link's reading holds.
struct Reading {
    node: usize,
    address: String,
    client: Client,
    /// The session's id, for a Resume.
    session: u64,
    batches: Streaming<BatchMsg>,
    /// The current Trace call's control stream.
    call: mpsc::Sender<Control>,
    /// The controls the session sends (stop, job), for the current call.
    controls: mpsc::Receiver<Control>,
    /// Where the acks go (into `controls`).
    acks: mpsc::Sender<Control>,
    events: mpsc::Sender<LinkEvent>,
    /// Whether the session was asked to stop (asked again on a new call).
    stopping: bool,
}

/// Reads one link's batches in order, acks each, and ends with its last batch or its
/// failure; `_reading` is dropped then, which ends the link's clock measurements. A link
/// that breaks is taken up again on a new one (Resume, from the first batch not received;
/// the agent sends again what it kept), for [`RESUME_TRYING`].
async fn read_link(mut r: Reading, _reading: oneshot::Sender<()>) {
    let mut expected_seq = 0;
    let error = loop {
        let received = tokio::select! {
            message = r.batches.message() => message,
            // Never closed: `acks` is one of its senders.
            Some(control) = r.controls.recv() => {
                r.stopping |= matches!(control.kind, Some(control::Kind::Stop(_)));
                // A call that broke is noticed by its batches: nothing to do here.
                let _ = r.call.send(control).await;
                continue;
            }
        };
        let broke = match received {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err("the agent ended its stream before its last batch".to_string()),
            Err(status) => Err(format!("the link failed: {}", status_line(&status))),
        };
        let message = match broke {
            Ok(message) => message,
            Err(broke) => match take_up_again(&mut r, expected_seq, &broke).await {
                Ok(()) => continue,
                Err(error) => break error,
            },
        };
        if message.seq != expected_seq {
            break format!(
                "batch {expected_seq} is missing (batch {} came instead)",
                message.seq
            );
        }
        let batch = match Batch::try_from(message) {
            Ok(batch) => batch,
            Err(reason) => break format!("malformed batch: {reason}"),
        };
        expected_seq += 1;
        // Cumulative: a full queue drops this one, the next one says it too.
        let _ = r.acks.try_send(Control {
            kind: Some(control::Kind::Ack(batch.seq)),
        });
        let last = batch.last;
        let node = r.node;
        if r.events
            .send(LinkEvent::Batch { node, batch })
            .await
            .is_err()
            || last
        {
            // Nobody reads any more, or the node's session is over.
            return;
        }
    };
    let _ = r
        .events
        .send(LinkEvent::Failed {
            node: r.node,
            error: format!("agent {}: {error}", r.address),
        })
        .await;
}

/// Opens a new Trace call that takes the session up from batch `next_seq`, trying for
/// [`RESUME_TRYING`]; Err: why the link is lost (`broke`, and the last try's error).
async fn take_up_again(r: &mut Reading, next_seq: u64, broke: &str) -> Result<(), String> {
    log::warn!(
        "agent {}: {broke}; taking the session up again from batch {next_seq}",
        r.address
    );
    let give_up = tokio::time::Instant::now() + RESUME_TRYING;
    loop {
        let (call, call_rx) = mpsc::channel(CONTROL_CHANNEL);
        let resume = Control {
            kind: Some(control::Kind::Resume(Resume {
                session: r.session,
                next_seq,
            })),
        };
        call.send(resume).await.expect("the receiver is here");
        let mut caller = r.client.clone();
        let trace = caller.trace(ReceiverStream::new(call_rx));
        let error = match tokio::time::timeout(CALL_TIMEOUT, trace).await {
            Ok(Ok(response)) => {
                if r.stopping {
                    // The stop may have gone down with the old call.
                    let stop = Control {
                        kind: Some(control::Kind::Stop(Stop {})),
                    };
                    let _ = call.send(stop).await;
                }
                r.batches = response.into_inner();
                r.call = call;
                log::warn!(
                    "agent {}: link restored; the session goes on from batch {next_seq}",
                    r.address
                );
                return Ok(());
            }
            // The agent no longer has the session, or is not running: nothing to take
            // up (a link cut off gives no answer, not a refusal).
            Ok(Err(status)) if status.code() == tonic::Code::NotFound => {
                return Err(format!("{broke}; {}", status.message()));
            }
            Ok(Err(status)) if refused(&status) => {
                return Err(format!("{broke}; {}", status_line(&status)));
            }
            Ok(Err(status)) => status_line(&status),
            Err(_) => format!("no answer within {} s", CALL_TIMEOUT.as_secs()),
        };
        if tokio::time::Instant::now() + RESUME_PAUSE >= give_up {
            return Err(format!(
                "{broke}; not restored within {} s ({error})",
                RESUME_TRYING.as_secs()
            ));
        }
        tokio::time::sleep(RESUME_PAUSE).await;
    }
}

/// Whether a call failed because nothing listens at the agent's address (its process
/// died): the connection was refused.
fn refused(status: &Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = error.source();
    }
    false
}

/// A status as one line: its message, and what broke beneath it when it has a source.
fn status_line(status: &Status) -> String {
    match status.source() {
        Some(source) => format!("{} ({})", status.message(), innermost(source)),
        None => status.message().to_string(),
    }
}
