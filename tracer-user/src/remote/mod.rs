//! Records of other nodes (issue 41, docs/multinode.md): `tracer agent` serves a node's
//! records over gRPC (tonic, TLS by rustls, a shared token), and the collector (`tracer
//! record --agent ...`) receives them. This folder is the transport only: what a batch
//! holds (`wire`), the agent's server, the collector's links and the clock offsets they
//! measure. It knows nothing of the session: the agent is handed a [`NodeTracer`] that
//! runs one, and the collector hands the session a stream of [`LinkEvent`]s.

mod agent;
mod auth;
mod clock;
mod collector;
mod error;
mod proto;
mod tls;
mod version;
mod wire;

#[cfg(test)]
mod tests;

// The surface the `tracer` binary (`cli/agent.rs`, `cli/record.rs`) uses; the links
// themselves are the session's.
pub use agent::{serve, AgentConfig, CollectorJob, NodeTracer, RESUME_WINDOW};
pub use auth::Token;
pub use clock::SkewedClock;
pub(crate) use clock::{measure_period, ClockFit, ClockOffset};
pub use collector::CollectorConfig;
pub(crate) use collector::{Collector, LinkEvent, RemoteNode};
pub use error::RemoteError;
pub use tls::{CertificateFiles, ClientTls, ServerTls};
pub use wire::{Batch, TraceRequest, WireItem};
