//! What can go wrong on either side of the transport: each message is one line, and
//! names the file or the agent it is about.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot read the token file {path}")]
    TokenRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the token file {path} is empty")]
    TokenEmpty { path: PathBuf },
    #[error("the token file {path} holds characters other than visible ASCII (a gRPC header carries the token)")]
    TokenNotAscii { path: PathBuf },
    #[error("cannot read the TLS {what} {path}")]
    TlsRead {
        /// "certificate", "key", "CA certificate", ...
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the TLS {what} {path} holds no PEM {expected}")]
    TlsNotPem {
        what: &'static str,
        path: PathBuf,
        /// The PEM label looked for ("CERTIFICATE", "PRIVATE KEY").
        expected: &'static str,
    },
    #[error("the TLS files {files} are unusable: {reason}")]
    TlsUnusable {
        /// The files, comma-separated.
        files: String,
        reason: String,
    },
    #[error("the agent cannot start its runtime")]
    Runtime(#[source] std::io::Error),
    #[error("the agent cannot listen on {address}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the agent stopped serving: {reason}")]
    Serve { reason: String },
    #[error("agent {address}: not a HOST:PORT address")]
    BadAddress { address: String },
    #[error("agent {address} is unreachable: {reason}")]
    Unreachable { address: String, reason: String },
    #[error("agent {address} did not answer within {seconds} s")]
    Timeout { address: String, seconds: u64 },
    #[error("agent {address} refused our token (check --token-file on both sides)")]
    Token { address: String },
    #[error("agent {address}: TLS handshake failed: {reason} (check --tls-ca here and --tls-cert on the agent)")]
    Tls { address: String, reason: String },
    #[error("agent {address} closed the TLS connection ({reason}): does it want a client certificate (mutual TLS) signed by its client CA?")]
    TlsClosed { address: String, reason: String },
    #[error("agent {address} does not speak plain gRPC ({reason}): does it use TLS? (then give --tls-ca)")]
    NotPlain { address: String, reason: String },
    #[error("agent {address} is busy: {reason}")]
    Busy { address: String, reason: String },
    #[error("agent {address}: {reason}")]
    Version { address: String, reason: String },
    #[error("agent {address} could not start tracing: {reason}")]
    Start { address: String, reason: String },
    #[error("agent {address} sent a malformed {what}: {reason}")]
    Malformed {
        address: String,
        what: &'static str,
        reason: String,
    },
    #[error("agent {address}: {reason}")]
    Call { address: String, reason: String },
}

/// The deepest source of an error: what tonic's and hyper's wrappers ("transport error",
/// "client error (Connect)") are about.
pub(super) fn innermost(error: &dyn std::error::Error) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}
