//! Records of other nodes (issue 41, docs/multinode.md): `tracer agent` serves a node's
//! records over gRPC (tonic, TLS by rustls, a shared token), and the collector (`tracer
//! record --agent ...`) receives them. This folder is the transport only: what a batch
//! holds (`wire`), the agent's server, the collector's links and the clock offsets they
//! measure. It knows nothing of the session: the agent is handed a [`NodeTracer`] that
//! runs one, and the collector hands the session a stream of [`LinkEvent`]s.

// Until the session and the CLI (issue 41) use the transport, only its tests do: remove
// this then.
#![allow(dead_code, unused_imports)]

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

pub(crate) use agent::{serve, AgentConfig, NodeTracer};
pub(crate) use auth::Token;
pub(crate) use clock::ClockOffset;
pub(crate) use collector::{Collector, CollectorConfig, LinkEvent, RemoteNode};
pub(crate) use error::RemoteError;
pub(crate) use tls::{CertificateFiles, ClientTls, ServerTls};
pub(crate) use wire::{Batch, TraceRequest, WireItem};
