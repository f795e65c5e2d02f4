//! W3C WebDriver errors: the `error` code a client maps to its exception,
//! the HTTP status the spec gives it, and always a JSON body (a client that
//! gets an empty or non-JSON error body ignores the error).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The W3C error codes Argus answers with (spec §1.1 of webdriver.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    ElementClickIntercepted,
    ElementNotInteractable,
    InvalidArgument,
    InvalidSelector,
    InvalidSessionId,
    JavascriptError,
    MoveTargetOutOfBounds,
    NoSuchElement,
    SessionNotCreated,
    StaleElementReference,
    Timeout,
    UnableToCaptureScreen,
    UnknownCommand,
    UnknownError,
    UnknownMethod,
    UnsupportedOperation,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ElementClickIntercepted => "element click intercepted",
            Code::ElementNotInteractable => "element not interactable",
            Code::InvalidArgument => "invalid argument",
            Code::InvalidSelector => "invalid selector",
            Code::InvalidSessionId => "invalid session id",
            Code::JavascriptError => "javascript error",
            Code::MoveTargetOutOfBounds => "move target out of bounds",
            Code::NoSuchElement => "no such element",
            Code::SessionNotCreated => "session not created",
            Code::StaleElementReference => "stale element reference",
            Code::Timeout => "timeout",
            Code::UnableToCaptureScreen => "unable to capture screen",
            Code::UnknownCommand => "unknown command",
            Code::UnknownError => "unknown error",
            Code::UnknownMethod => "unknown method",
            Code::UnsupportedOperation => "unsupported operation",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Code::ElementClickIntercepted
            | Code::ElementNotInteractable
            | Code::InvalidArgument
            | Code::InvalidSelector => StatusCode::BAD_REQUEST,
            Code::InvalidSessionId | Code::NoSuchElement | Code::StaleElementReference | Code::UnknownCommand => {
                StatusCode::NOT_FOUND
            }
            Code::UnknownMethod => StatusCode::METHOD_NOT_ALLOWED,
            Code::JavascriptError
            | Code::MoveTargetOutOfBounds
            | Code::SessionNotCreated
            | Code::Timeout
            | Code::UnableToCaptureScreen
            | Code::UnknownError
            | Code::UnsupportedOperation => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WdError {
    pub code: Code,
    pub message: String,
}

pub type WdResult<T> = Result<T, WdError>;

impl WdError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(Code::UnsupportedOperation, message)
    }

    /// Appium's exact wording for a strategy it does not know, which its
    /// clients and users recognise.
    pub fn strategy_not_supported(strategy: &str) -> Self {
        Self::new(Code::InvalidSelector, format!("Locator Strategy '{strategy}' is not supported for this session"))
    }

    /// Appium's `NoSuchContextError`: the Python client turns this exact
    /// message into `NoSuchContextException`.
    pub fn no_such_context() -> Self {
        Self::new(Code::UnknownError, "No such context found.")
    }
}

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl IntoResponse for WdError {
    fn into_response(self) -> Response {
        let body = json!({ "value": { "error": self.code.as_str(), "message": self.message, "stacktrace": "" } });
        let mut response = (self.code.status(), axum::Json(body)).into_response();
        // For the command's metrics, span and record.
        response.extensions_mut().insert(self.clone());
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_w3c_table() {
        assert_eq!(Code::NoSuchElement.status(), StatusCode::NOT_FOUND);
        assert_eq!(Code::InvalidSelector.status(), StatusCode::BAD_REQUEST);
        assert_eq!(Code::SessionNotCreated.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(Code::UnknownMethod.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(Code::StaleElementReference.as_str(), "stale element reference");
    }
}
