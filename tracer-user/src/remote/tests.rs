//! The transport end to end on 127.0.0.1: a real agent (its server on an ephemeral port,
//! its own runtime) and a real collector, with a node tracer that sends batches known
//! in advance.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tracer_analysis::node::NodeInfo;
use tracer_analysis::recording::Trailer;
use tracer_analysis::ProcessInfo;

use super::agent::UNACKED_LIMIT;
use super::agent::{serve_on, AgentConfig, NodeTracer};
use super::auth::{test_token, Token};
use super::clock::{measure_period, SkewedClock};
use super::collector::{call_error, connect, Collector, CollectorConfig, LinkEvent};
use super::error::RemoteError;
use super::proto::{control, BatchMsg, Control, HelloRequest, Start};
use super::tls::{CertificateFiles, ClientTls, ServerTls};
use super::version::version_mismatch;
use super::wire::{Batch, TraceRequest, WireItem};

/// How long a test waits for anything before it fails (instead of hanging).
const DEADLINE: Duration = Duration::from_secs(20);

/// A node whose session sends `batches`, then (if `until_stop`) waits for its stop flag
/// and sends one more, the last.
struct ScriptedNode {
    batches: Vec<Batch>,
    until_stop: bool,
    start_error: Option<String>,
    /// Set when the session saw its stop flag.
    stopped: Arc<AtomicBool>,
    /// The request of the latest start.
    requests: Arc<std::sync::Mutex<Vec<TraceRequest>>>,
}

impl ScriptedNode {
    fn new(batches: Vec<Batch>, until_stop: bool) -> ScriptedNode {
        ScriptedNode {
            batches,
            until_stop,
            start_error: None,
            stopped: Arc::new(AtomicBool::new(false)),
            requests: Arc::default(),
        }
    }
}

fn test_node() -> NodeInfo {
    NodeInfo {
        hostname: "node7".into(),
        machine_id: "0123abcd".into(),
        boot_id: "boot-1".into(),
        kernel: "6.1.0-test".into(),
        cpus: 12,
        // Above 2^64: both halves of the u128 travel.
        start_unix_ns: (3u128 << 64) | 1_700_000_000_123_456_789,
        start_monotonic_ns: 987_654_321,
    }
}

impl NodeTracer for ScriptedNode {
    fn node(&self) -> NodeInfo {
        test_node()
    }

    fn start(
        &self,
        request: TraceRequest,
        batches: mpsc::Sender<Batch>,
        stop: Arc<AtomicBool>,
        _job: super::CollectorJob,
    ) -> Result<(), String> {
        if let Some(e) = &self.start_error {
            return Err(e.clone());
        }
        self.requests.lock().unwrap().push(request);
        let script = self.batches.clone();
        let until_stop = self.until_stop;
        let stopped = self.stopped.clone();
        std::thread::spawn(move || {
            let mut next_seq = 0;
            for batch in script {
                next_seq = batch.seq + 1;
                if batches.blocking_send(batch).is_err() {
                    return;
                }
            }
            if until_stop {
                let deadline = Instant::now() + DEADLINE;
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                stopped.store(stop.load(Ordering::SeqCst), Ordering::SeqCst);
                let _ = batches.blocking_send(Batch {
                    seq: next_seq,
                    watermark_ns: 999,
                    items: vec![WireItem::Counts(Trailer {
                        events_total: 7,
                        ..Default::default()
                    })],
                    last: true,
                });
            }
        });
        Ok(())
    }
}

/// An agent serving on 127.0.0.1 on a port of its own, until dropped.
struct TestAgent {
    address: String,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), RemoteError>>>,
}

impl TestAgent {
    fn start(
        tracer: Arc<dyn NodeTracer>,
        token: &str,
        tls: Option<ServerTls>,
        clock_shift_ns: i64,
    ) -> TestAgent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let config = AgentConfig {
            listen: address,
            token: test_token(token),
            tls,
            clock: SkewedClock {
                shift_ns: clock_shift_ns,
                ..SkewedClock::default()
            },
            // A collector gone is waited for a second (the tests of a vanished one).
            resume_window: Duration::from_secs(1),
        };
        let (shutdown, shutdown_rx) = oneshot::channel();
        let thread = std::thread::spawn(move || {
            serve_on(listener, config, tracer, async {
                let _ = shutdown_rx.await;
            })
        });
        TestAgent {
            address: address.to_string(),
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        let result = self
            .thread
            .take()
            .unwrap()
            .join()
            .expect("the agent panicked");
        if !std::thread::panicking() {
            result.expect("the agent failed");
        }
    }
}

fn collector_config(agent: &TestAgent, token: &str, tls: Option<ClientTls>) -> CollectorConfig {
    CollectorConfig {
        agents: vec![agent.address.clone()],
        token: test_token(token),
        tls,
    }
}

fn request() -> TraceRequest {
    TraceRequest {
        every_process: true,
        sample_hz: 99,
        buffer_mib: Some(32),
        funcs: vec!["stage_*".into(), "/usr/bin/app:solve".into()],
        func_files: vec!["/usr/bin/mpirun".into(), "/home/user/app".into()],
    }
}

/// Every batch and failure until the stream closes, read from a runtime of the test's
/// own (as the session will, from its runtime); the clock measurements that come every
/// `measure_period` in between, as many as the test's pace allows, are left out.
fn all_events(collector: &mut Collector) -> Vec<LinkEvent> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut events = Vec::new();
        loop {
            match tokio::time::timeout(DEADLINE, collector.events().recv()).await {
                Ok(Some(LinkEvent::Clock { .. })) => {}
                Ok(Some(event)) => events.push(event),
                Ok(None) => return events,
                Err(_) => panic!("no event within {DEADLINE:?}; so far {events:?}"),
            }
        }
    })
}

fn batches_of(events: Vec<LinkEvent>) -> Vec<Batch> {
    events
        .into_iter()
        .map(|e| match e {
            LinkEvent::Batch { node: 0, batch } => batch,
            other => panic!("not a batch of node 0: {other:?}"),
        })
        .collect()
}

fn known_batches() -> Vec<Batch> {
    vec![
        Batch {
            seq: 0,
            watermark_ns: 100,
            items: vec![
                WireItem::Process(ProcessInfo {
                    pid: 4242,
                    ppid: 1,
                    command: "./ring 3".into(),
                    exe: "/opt/ring".into(),
                    ..Default::default()
                }),
                WireItem::Records((0..=255).collect()),
            ],
            last: false,
        },
        Batch {
            seq: 1,
            watermark_ns: 200,
            items: vec![WireItem::Records(vec![7; 100_000])],
            last: false,
        },
        Batch {
            seq: 2,
            watermark_ns: 300,
            items: vec![WireItem::Counts(Trailer {
                events_total: 1234,
                events_lost: 5,
                probe_failures: [("read".to_string(), 2)].into(),
            })],
            last: true,
        },
    ]
}

#[test]
fn the_collector_receives_the_nodes_batches_in_order_and_its_node() {
    let node = Arc::new(ScriptedNode::new(known_batches(), false));
    let requests = node.requests.clone();
    let agent = TestAgent::start(node, "s3cret", None, 0);
    let mut collector = Collector::connect(
        &collector_config(&agent, "s3cret", None),
        &request(),
        |_| true,
    )
    .unwrap();
    assert_eq!(collector.nodes().len(), 1);
    assert_eq!(collector.nodes()[0].address, agent.address);
    assert_eq!(collector.nodes()[0].node, test_node());
    assert_eq!(batches_of(all_events(&mut collector)), known_batches());
    assert_eq!(*requests.lock().unwrap(), vec![request()]);
}

#[test]
fn a_wrong_token_is_refused_in_one_line() {
    let agent = TestAgent::start(
        Arc::new(ScriptedNode::new(known_batches(), false)),
        "right",
        None,
        0,
    );
    let error = Collector::connect(&collector_config(&agent, "wrong", None), &request(), |_| {
        true
    })
    .err()
    .expect("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "agent {} refused our token (check --token-file on both sides)",
            agent.address
        )
    );
}

/// A file of the test's own, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tracer-remote-{name}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn token_files() {
    let dir = TempDir::new("token");
    let empty = dir.write("empty", " \n\t\n");
    assert_eq!(
        Token::from_file(&empty).unwrap_err().to_string(),
        format!("the token file {} is empty", empty.display())
    );
    let missing = dir.0.join("missing");
    let error = Token::from_file(&missing).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("cannot read the token file {}", missing.display())
    );
    assert!(std::error::Error::source(&error).is_some());
    let control = dir.write("control", "abc\u{1}def");
    assert!(matches!(
        Token::from_file(&control),
        Err(RemoteError::TokenNotAscii { .. })
    ));

    // Trimmed: the file's newline is not part of the token.
    let good = dir.write("good", "  s3cret\n");
    let agent = TestAgent::start(
        Arc::new(ScriptedNode::new(known_batches(), false)),
        "s3cret",
        None,
        0,
    );
    let config = CollectorConfig {
        agents: vec![agent.address.clone()],
        token: Token::from_file(&good).unwrap(),
        tls: None,
    };
    let mut collector = Collector::connect(&config, &request(), |_| true).unwrap();
    assert_eq!(batches_of(all_events(&mut collector)), known_batches());
}

#[test]
fn a_busy_agent_refuses_a_second_collector() {
    let first = known_batches()[..1].to_vec();
    let node = Arc::new(ScriptedNode::new(first, true));
    let agent = TestAgent::start(node, "t", None, 0);
    let mut one =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    let error = Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true)
        .err()
        .expect("busy");
    let text = error.to_string();
    let prefix = format!("agent {} is busy: tracing for 127.0.0.1:", agent.address);
    assert!(
        text.starts_with(&prefix) && text.ends_with(" UTC"),
        "{text}"
    );
    assert!(matches!(error, RemoteError::Busy { .. }));
    one.stop();
    assert_eq!(all_events(&mut one).len(), 2);
}

#[test]
fn stop_ends_the_nodes_session_and_its_last_batch_arrives() {
    let first = known_batches()[..2].to_vec();
    let node = Arc::new(ScriptedNode::new(first.clone(), true));
    let stopped = node.stopped.clone();
    let agent = TestAgent::start(node, "t", None, 0);
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    // The first batches come while the session runs, before any stop.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for expected in &first {
        let event = loop {
            let event = runtime
                .block_on(async { tokio::time::timeout(DEADLINE, collector.events().recv()).await })
                .expect("in time")
                .expect("an event");
            if !matches!(event, LinkEvent::Clock { .. }) {
                break event;
            }
        };
        assert!(matches!(event, LinkEvent::Batch { node: 0, ref batch } if batch == expected));
    }
    assert!(!stopped.load(Ordering::SeqCst));
    collector.stop();
    let rest = batches_of(all_events(&mut collector));
    assert_eq!(rest.len(), 1);
    assert_eq!(
        (rest[0].seq, rest[0].last, rest[0].watermark_ns),
        (2, true, 999)
    );
    assert!(stopped.load(Ordering::SeqCst));
}

#[test]
fn an_agent_told_to_end_stops_its_session_and_sends_the_last_batch() {
    let first = known_batches()[..1].to_vec();
    let node = Arc::new(ScriptedNode::new(first.clone(), true));
    let stopped = node.stopped.clone();
    let agent = TestAgent::start(node, "t", None, 0);
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    // What SIGTERM does to `serve`: here the test's shutdown future. The drop returns once
    // the agent has ended.
    drop(agent);
    assert!(stopped.load(Ordering::SeqCst));
    let batches = batches_of(all_events(&mut collector));
    assert_eq!(batches.len(), 2, "{batches:?}");
    assert_eq!(batches[0], first[0]);
    assert_eq!((batches[1].seq, batches[1].last), (1, true));
}

#[test]
fn a_vanished_collector_ends_the_nodes_session() {
    let node = Arc::new(ScriptedNode::new(Vec::new(), true));
    let stopped = node.stopped.clone();
    let agent = TestAgent::start(node, "t", None, 0);
    let collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    drop(collector);
    let deadline = Instant::now() + DEADLINE;
    while !stopped.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the agent did not stop the session"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The slot is free again: a new collector is served.
    let deadline = Instant::now() + DEADLINE;
    loop {
        match Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true) {
            Ok(mut c) => {
                c.stop();
                assert_eq!(all_events(&mut c).len(), 1);
                break;
            }
            Err(RemoteError::Busy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_missing_batch_fails_the_link() {
    let mut batches = known_batches();
    batches.remove(1);
    let agent = TestAgent::start(Arc::new(ScriptedNode::new(batches, false)), "t", None, 0);
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    let events = all_events(&mut collector);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(&events[0], LinkEvent::Batch { node: 0, batch } if batch.seq == 0));
    match &events[1] {
        LinkEvent::Failed { node: 0, error } => assert_eq!(
            *error,
            format!(
                "agent {}: batch 1 is missing (batch 2 came instead)",
                agent.address
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_start_failure_is_told_to_the_collector() {
    let mut node = ScriptedNode::new(Vec::new(), false);
    node.start_error = Some("no process of job pmix-job-17 on node7".into());
    let agent = TestAgent::start(Arc::new(node), "t", None, 0);
    let error = Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true)
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "agent {} could not start tracing: no process of job pmix-job-17 on node7",
            agent.address
        )
    );
}

#[test]
fn unreachable_and_malformed_addresses() {
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = CollectorConfig {
        agents: vec![free.to_string()],
        token: test_token("t"),
        tls: None,
    };
    let error = Collector::connect(&config, &request(), |_| true)
        .err()
        .expect("unreachable");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("agent {free} is unreachable: ")),
        "{text}"
    );
    assert!(!text.contains('\n'));
    for bad in ["node7", "node7:", ":5000", "node7:99999"] {
        let config = CollectorConfig {
            agents: vec![bad.to_string()],
            token: test_token("t"),
            tls: None,
        };
        let error = Collector::connect(&config, &request(), |_| true)
            .err()
            .expect("bad address");
        assert_eq!(
            error.to_string(),
            format!("agent {bad}: not a HOST:PORT address")
        );
    }
}

/// While a session runs, the collector measures the agent's clock again every
/// `measure_period`, and each measurement comes to the session as an event of its own.
#[test]
fn the_clock_is_measured_again_while_the_session_runs() {
    let shift_ns: i64 = 37_000_000;
    let node = Arc::new(ScriptedNode::new(Vec::new(), true));
    let agent = TestAgent::start(node, "t", None, shift_ns);
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let first = collector.nodes()[0].clock;
    let again = runtime.block_on(async {
        match tokio::time::timeout(DEADLINE, collector.events().recv()).await {
            Ok(Some(LinkEvent::Clock { node: 0, offset })) => offset,
            other => panic!("not a clock measurement: {other:?}"),
        }
    });
    let error = (again.offset_ns + shift_ns).unsigned_abs();
    assert!(
        error <= again.round_trip_ns / 2 + 1,
        "offset {} ns, round trip {} ns",
        again.offset_ns,
        again.round_trip_ns
    );
    assert!(again.agent_ns > first.agent_ns, "a later measurement");
    collector.stop();
    assert_eq!(
        batches_of(all_events(&mut collector)).len(),
        1,
        "the last batch"
    );
}

/// A node whose clock the session does not follow (an agent on this kernel) is not
/// measured again: three measurement periods pass without a clock event.
#[test]
fn a_clock_not_followed_is_not_measured_again() {
    let node = Arc::new(ScriptedNode::new(Vec::new(), true));
    let agent = TestAgent::start(node, "t", None, 0);
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| false).unwrap();
    std::thread::sleep(3 * measure_period(0));
    collector.stop();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let events = runtime.block_on(async {
        let mut events = Vec::new();
        while let Ok(Some(event)) = tokio::time::timeout(DEADLINE, collector.events().recv()).await
        {
            events.push(event);
        }
        events
    });
    assert!(
        !events.iter().any(|e| matches!(e, LinkEvent::Clock { .. })),
        "{events:?}"
    );
    assert_eq!(batches_of(events).len(), 1, "the last batch");
}

#[test]
fn the_clock_offset_is_the_agents_shift_within_the_round_trip() {
    let shift_ns: i64 = 37_000_000;
    let agent = TestAgent::start(
        Arc::new(ScriptedNode::new(known_batches(), false)),
        "t",
        None,
        shift_ns,
    );
    let mut collector =
        Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true).unwrap();
    // Both clocks are this machine's: the agent read its clock within the ping's round
    // trip, so the offset is -shift within half of it.
    let check = |offset_ns: i64, round_trip_ns: u64| {
        let error = (offset_ns + shift_ns).unsigned_abs();
        assert!(
            error <= round_trip_ns / 2 + 1,
            "offset {offset_ns} ns, round trip {round_trip_ns} ns"
        );
    };
    let at_start = collector.nodes()[0].clock;
    check(at_start.offset_ns, at_start.round_trip_ns);
    let again = collector.measure_clocks();
    assert_eq!(again.len(), 1);
    let again = again[0].as_ref().unwrap();
    check(again.offset_ns, again.round_trip_ns);
    assert_eq!(batches_of(all_events(&mut collector)), known_batches());
}

#[test]
fn versions_must_agree_on_major_and_minor() {
    assert_eq!(version_mismatch("0.1.0", "0.1.9"), None);
    assert_eq!(
        version_mismatch("0.2.0", "0.1.0").unwrap(),
        "the agent runs tracer 0.2.0, the collector tracer 0.1.0 (major.minor must match)"
    );
    assert!(version_mismatch("1.1.0", "0.1.0").is_some());
}

#[test]
fn an_agent_refuses_a_collector_of_another_version() {
    let agent = TestAgent::start(Arc::new(ScriptedNode::new(Vec::new(), false)), "t", None, 0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = runtime.block_on(async {
        let mut client = connect(&agent.address, test_token("t"), None)
            .await
            .unwrap();
        client
            .hello(HelloRequest {
                version: "9.9.0".into(),
            })
            .await
            .unwrap_err()
    });
    assert_eq!(
        call_error(&agent.address, &status).to_string(),
        format!(
            "agent {}: the agent runs tracer {}, the collector tracer 9.9.0 (major.minor must match)",
            agent.address,
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// The agent sends at most UNACKED_LIMIT batches ahead of the collector's acks: a
/// client that does not ack gets exactly that many, and as many more as it acks.
#[test]
fn the_agent_waits_for_acks() {
    let total = UNACKED_LIMIT as u64 + 144;
    let batches = (0..total)
        .map(|seq| Batch {
            seq,
            watermark_ns: seq,
            items: Vec::new(),
            last: seq == total - 1,
        })
        .collect();
    let agent = TestAgent::start(Arc::new(ScriptedNode::new(batches, false)), "t", None, 0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = connect(&agent.address, test_token("t"), None)
            .await
            .unwrap();
        let (controls, controls_rx) = mpsc::channel(16);
        let send = |kind| {
            let controls = controls.clone();
            async move { controls.send(Control { kind: Some(kind) }).await.unwrap() }
        };
        send(control::Kind::Start(Start::from(&request()))).await;
        let mut stream = client
            .trace(tokio_stream::wrappers::ReceiverStream::new(controls_rx))
            .await
            .unwrap()
            .into_inner();
        let mut next_seq = 0;
        // Reads batches until none comes for a while (what is held back stays back).
        let mut read_all_sent = async |next_seq: &mut u64| loop {
            match tokio::time::timeout(Duration::from_millis(300), stream.message()).await {
                Err(_) => return,
                Ok(message) => {
                    let message: BatchMsg = message.unwrap().expect("a batch");
                    assert_eq!(message.seq, *next_seq);
                    *next_seq += 1;
                    if message.last {
                        return;
                    }
                }
            }
        };
        read_all_sent(&mut next_seq).await;
        assert_eq!(next_seq, UNACKED_LIMIT as u64);
        send(control::Kind::Ack(99)).await;
        read_all_sent(&mut next_seq).await;
        assert_eq!(next_seq, UNACKED_LIMIT as u64 + 100);
        send(control::Kind::Ack(next_seq - 1)).await;
        read_all_sent(&mut next_seq).await;
        assert_eq!(next_seq, total);
    });
}

/// A CA, and certificates it signs, as PEM files.
struct TestPki {
    dir: TempDir,
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    ca_file: PathBuf,
}

impl TestPki {
    fn new(name: &str) -> TestPki {
        let dir = TempDir::new(name);
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("tracer test CA {name}"));
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let ca_file = dir.write("ca.pem", &ca.pem());
        TestPki { dir, ca, ca_file }
    }

    /// A certificate for `names` (IP addresses become IP names), signed by the CA.
    fn issue(&self, file: &str, names: &[&str]) -> CertificateFiles {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        CertificateFiles {
            cert: self.dir.write(&format!("{file}.pem"), &cert.pem()),
            key: self.dir.write(&format!("{file}.key"), &key.serialize_pem()),
        }
    }
}

fn tls_agent(server: &CertificateFiles, client_ca: Option<&Path>) -> TestAgent {
    let tls = ServerTls::from_files(server, client_ca).unwrap();
    TestAgent::start(
        Arc::new(ScriptedNode::new(known_batches(), false)),
        "t",
        Some(tls),
        0,
    )
}

#[test]
fn tls_links_and_their_refusals() {
    let pki = TestPki::new("tls");
    let server = pki.issue("agent", &["127.0.0.1"]);
    let agent = tls_agent(&server, None);

    let tls = ClientTls::from_files(&pki.ca_file, None).unwrap();
    let mut collector = Collector::connect(
        &collector_config(&agent, "t", Some(tls)),
        &request(),
        |_| true,
    )
    .unwrap();
    assert_eq!(collector.nodes()[0].node, test_node());
    assert_eq!(batches_of(all_events(&mut collector)), known_batches());
    drop(collector);

    // A CA that did not sign the agent's certificate.
    let other = TestPki::new("other");
    let tls = ClientTls::from_files(&other.ca_file, None).unwrap();
    let error = Collector::connect(
        &collector_config(&agent, "t", Some(tls)),
        &request(),
        |_| true,
    )
    .err()
    .expect("unknown CA");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("agent {}: TLS handshake failed: ", agent.address))
            && text.contains("UnknownIssuer")
            && !text.contains('\n'),
        "{text}"
    );

    // Plain HTTP/2 to a TLS agent.
    let error = Collector::connect(&collector_config(&agent, "t", None), &request(), |_| true)
        .err()
        .expect("TLS agent");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "agent {} does not speak plain gRPC (",
            agent.address
        )) && text.ends_with("): does it use TLS? (then give --tls-ca)")
            && !text.contains('\n'),
        "{text}"
    );

    // TLS to a plain agent.
    let plain = TestAgent::start(
        Arc::new(ScriptedNode::new(known_batches(), false)),
        "t",
        None,
        0,
    );
    let tls = ClientTls::from_files(&pki.ca_file, None).unwrap();
    let error = Collector::connect(
        &collector_config(&plain, "t", Some(tls)),
        &request(),
        |_| true,
    )
    .err()
    .expect("plain agent");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("agent {}: TLS handshake failed: ", plain.address))
            && !text.contains('\n'),
        "{text}"
    );
}

#[test]
fn mutual_tls_wants_the_collectors_certificate() {
    let pki = TestPki::new("mtls");
    let server = pki.issue("agent", &["127.0.0.1"]);
    let client = pki.issue("collector", &["collector"]);
    let agent = tls_agent(&server, Some(&pki.ca_file));

    let tls = ClientTls::from_files(&pki.ca_file, Some(&client)).unwrap();
    let mut collector = Collector::connect(
        &collector_config(&agent, "t", Some(tls)),
        &request(),
        |_| true,
    )
    .unwrap();
    assert_eq!(batches_of(all_events(&mut collector)), known_batches());
    drop(collector);

    let tls = ClientTls::from_files(&pki.ca_file, None).unwrap();
    let error = Collector::connect(
        &collector_config(&agent, "t", Some(tls)),
        &request(),
        |_| true,
    )
    .err()
    .expect("no client certificate");
    // Why it closed: its alert (CertificateRequired) when it came before the connection
    // was seen closed, else just that.
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "agent {} closed the TLS connection (",
            agent.address
        )) && text.ends_with(
            "): does it want a client certificate (mutual TLS) signed by its client CA?"
        ) && !text.contains('\n'),
        "{text}"
    );
}

#[test]
fn tls_files_are_checked_when_read() {
    let pki = TestPki::new("files");
    let server = pki.issue("agent", &["127.0.0.1"]);
    let missing = pki.dir.0.join("missing.pem");
    let error = ClientTls::from_files(&missing, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("cannot read the TLS CA certificate {}", missing.display())
    );
    let error = ServerTls::from_files(
        &CertificateFiles {
            cert: server.cert.clone(),
            key: missing.clone(),
        },
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("cannot read the TLS key {}", missing.display())
    );
    // A key given for the certificate.
    let error = ServerTls::from_files(
        &CertificateFiles {
            cert: server.key.clone(),
            key: server.key.clone(),
        },
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "the TLS certificate {} holds no PEM CERTIFICATE",
            server.key.display()
        )
    );
    // A PEM key block that is no key.
    let broken = pki.dir.write(
        "broken.key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let error = ServerTls::from_files(
        &CertificateFiles {
            cert: server.cert.clone(),
            key: broken.clone(),
        },
        None,
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "the TLS files {}, {} are unusable: ",
            server.cert.display(),
            broken.display()
        )),
        "{text}"
    );
}
