//! TLS of the transport (rustls, through tonic): the agent's certificate and key, the
//! CA the collector checks it with, and the optional client certificate of mutual TLS.
//! The files are read and checked when the options are read, so that a wrong path is
//! said before any tracing starts.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

use super::error::{innermost, RemoteError};

/// A certificate (chain) and its private key, PEM files.
#[derive(Clone, Debug)]
pub struct CertificateFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The agent's TLS: its identity, and the CA its collectors' certificates must be signed
/// by when mutual TLS is asked for.
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub(super) config: ServerTlsConfig,
}

impl ServerTls {
    pub fn from_files(
        identity: &CertificateFiles,
        client_ca: Option<&Path>,
    ) -> Result<ServerTls, RemoteError> {
        let mut config = ServerTlsConfig::new().identity(read_identity(identity)?);
        let mut files = vec![identity.cert.clone(), identity.key.clone()];
        if let Some(ca) = client_ca {
            config = config.client_ca_root(read_certificate("client CA certificate", ca)?);
            files.push(ca.to_path_buf());
        }
        // Builds the acceptor once: a key that does not parse is said now.
        Server::builder()
            .tls_config(config.clone())
            .map_err(|e| unusable(&files, &e))?;
        Ok(ServerTls { config })
    }
}

/// The collector's TLS: the CA the agents' certificates are checked against (each
/// agent's certificate must name the host the collector was given), and its own
/// certificate for mutual TLS.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub(super) config: ClientTlsConfig,
}

impl ClientTls {
    pub fn from_files(
        ca: &Path,
        identity: Option<&CertificateFiles>,
    ) -> Result<ClientTls, RemoteError> {
        let mut config =
            ClientTlsConfig::new().ca_certificate(read_certificate("CA certificate", ca)?);
        let mut files = vec![ca.to_path_buf()];
        if let Some(identity) = identity {
            config = config.identity(read_identity(identity)?);
            files.extend([identity.cert.clone(), identity.key.clone()]);
        }
        // Builds the connector once, for any host: a CA that does not parse is said now.
        Endpoint::from_static("https://localhost")
            .tls_config(config.clone())
            .map_err(|e| unusable(&files, &e))?;
        Ok(ClientTls { config })
    }
}

fn read_identity(files: &CertificateFiles) -> Result<Identity, RemoteError> {
    let cert = read_pem("certificate", &files.cert, "CERTIFICATE")?;
    let key = read_pem("key", &files.key, "PRIVATE KEY")?;
    Ok(Identity::from_pem(cert, key))
}

fn read_certificate(what: &'static str, path: &Path) -> Result<Certificate, RemoteError> {
    Ok(Certificate::from_pem(read_pem(what, path, "CERTIFICATE")?))
}

/// The file's content, if it holds a PEM block whose label ends in `expected` (a key may
/// be "PRIVATE KEY", "RSA PRIVATE KEY" or "EC PRIVATE KEY").
fn read_pem(
    what: &'static str,
    path: &Path,
    expected: &'static str,
) -> Result<Vec<u8>, RemoteError> {
    let pem = std::fs::read(path).map_err(|source| RemoteError::TlsRead {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&pem);
    let has_block = text.lines().any(|l| {
        l.starts_with("-----BEGIN ") && l.trim_end().ends_with(&format!("{expected}-----"))
    });
    if !has_block {
        return Err(RemoteError::TlsNotPem {
            what,
            path: path.to_path_buf(),
            expected,
        });
    }
    Ok(pem)
}

fn unusable(files: &[PathBuf], error: &dyn std::error::Error) -> RemoteError {
    RemoteError::TlsUnusable {
        files: files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        reason: innermost(error),
    }
}
