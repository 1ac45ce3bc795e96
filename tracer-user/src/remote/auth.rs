//! The shared token: read from a file on both sides, sent by the collector as
//! `authorization: Bearer <token>` on every call, checked by the agent in constant time.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use super::error::RemoteError;

const HEADER: &str = "authorization";

/// The shared secret of an agent and its collectors.
#[derive(Clone)]
pub struct Token {
    /// `Bearer <token>`, as the header carries it.
    header: MetadataValue<Ascii>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself (a Debug print may end up in a log).
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The file's content without its surrounding white space; an empty file is refused
    /// (it would let anyone in), and a file others may read is warned about.
    pub fn from_file(path: &Path) -> Result<Token, RemoteError> {
        let read = |source| RemoteError::TokenRead {
            path: path.to_path_buf(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(read)?;
        let mode = std::fs::metadata(path).map_err(read)?.permissions().mode();
        if mode & 0o077 != 0 {
            log::warn!(
                "the token file {} may be read by its group or others (mode {:o}): chmod 600 it",
                path.display(),
                mode & 0o777
            );
        }
        let token = text.trim();
        if token.is_empty() {
            return Err(RemoteError::TokenEmpty {
                path: path.to_path_buf(),
            });
        }
        Token::new(token).ok_or_else(|| RemoteError::TokenNotAscii {
            path: path.to_path_buf(),
        })
    }

    /// None when `token` is not visible ASCII (a header cannot carry it).
    fn new(token: &str) -> Option<Token> {
        if !token.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
            return None;
        }
        let header = format!("Bearer {token}").parse().ok()?;
        Some(Token { header })
    }

    /// Whether a call's header is this token, in a time that depends only on the
    /// lengths (an attacker timing the refusals learns nothing of the secret's bytes).
    fn matches(&self, header: &[u8]) -> bool {
        let expected = self.header.as_bytes();
        if header.len() != expected.len() {
            return false;
        }
        let difference = expected
            .iter()
            .zip(header)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

/// The agent's check of every call.
#[derive(Clone)]
pub(super) struct TokenCheck {
    pub(super) token: Token,
}

impl Interceptor for TokenCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request.metadata().get(HEADER);
        if header.is_some_and(|h| self.token.matches(h.as_bytes())) {
            return Ok(request);
        }
        let peer = request
            .remote_addr()
            .map_or_else(|| "an unknown address".to_string(), |a| a.to_string());
        let what = if header.is_some() { "a wrong" } else { "no" };
        log::warn!("agent: refused a call from {peer}: {what} token");
        Err(Status::unauthenticated("wrong or missing token"))
    }
}

/// The collector's side: the token on every call.
#[derive(Clone)]
pub(super) struct TokenHeader {
    pub(super) token: Token,
}

impl Interceptor for TokenHeader {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert(HEADER, self.token.header.clone());
        Ok(request)
    }
}

#[cfg(test)]
pub(super) fn test_token(token: &str) -> Token {
    Token::new(token).expect("a visible ASCII token")
}
