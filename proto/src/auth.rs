//! Tokens between workers, clients and the coordinator: a bearer token in
//! the `authorization` metadata of every gRPC request. Tokens are compared in
//! constant time and never logged.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Adds `authorization: Bearer <token>` to every request, when there is a token.
#[derive(Clone, Default)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Bearer {
    /// Refuses a token that cannot travel in a header.
    pub fn new(token: Option<&str>) -> Result<Self, UnsendableToken> {
        match token.filter(|t| !t.is_empty()) {
            None => Ok(Self(None)),
            Some(token) => {
                format!("Bearer {token}").parse().map(|value| Self(Some(value))).map_err(|_| UnsendableToken)
            }
        }
    }
}

/// A token that cannot travel in a gRPC header (it is never shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the token has characters a gRPC header cannot carry")]
pub struct UnsendableToken;

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Refuses requests without the right token for a role (`worker`, `client`).
#[derive(Clone)]
pub struct RequireToken {
    token: Option<String>,
    role: &'static str,
    hint: &'static str,
}

impl RequireToken {
    /// `hint` says how the caller sets the token (`--token or ARGUS_WORKER_TOKEN`).
    pub fn new(token: Option<String>, role: &'static str, hint: &'static str) -> Self {
        Self { token: token.filter(|t| !t.is_empty()), role, hint }
    }
}

/// Whether two tokens are the same, in time that does not depend on where
/// they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Interceptor for RequireToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.token else { return Ok(request) };
        let given = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
        match given.and_then(|v| v.strip_prefix("Bearer ")) {
            None => Err(Status::unauthenticated(format!(
                "the {} token is missing: this coordinator requires one ({})",
                self.role, self.hint
            ))),
            Some(token) if same(token.as_bytes(), expected.as_bytes()) => Ok(request),
            Some(_) => Err(Status::unauthenticated(format!("the {} token is wrong ({})", self.role, self.hint))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(token: Option<&str>) -> Request<()> {
        let mut bearer = Bearer::new(token).unwrap();
        bearer.call(Request::new(())).unwrap()
    }

    #[test]
    fn the_right_token_passes_and_the_others_are_named() {
        let mut require = RequireToken::new(Some("s3cret".into()), "worker", "--token or ARGUS_WORKER_TOKEN");
        assert!(require.call(with(Some("s3cret"))).is_ok());
        let missing = require.call(with(None)).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        assert_eq!(
            missing.message(),
            "the worker token is missing: this coordinator requires one (--token or ARGUS_WORKER_TOKEN)"
        );
        let wrong = require.call(with(Some("guess"))).unwrap_err();
        assert_eq!(wrong.message(), "the worker token is wrong (--token or ARGUS_WORKER_TOKEN)");
        assert!(!wrong.message().contains("s3cret") && !wrong.message().contains("guess"));
        let mut open = RequireToken::new(None, "client", "");
        assert!(open.call(with(None)).is_ok());
        assert!(Bearer::new(Some("bad\ntoken")).is_err());
    }
}
