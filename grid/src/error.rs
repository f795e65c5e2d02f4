//! What the grid answers when it refuses or cannot do what it is asked,
//! and its code ([`Coded`]): the gRPC status and the HTTP answer a client
//! can act on.

use argus_proto::errors::{Coded, ErrorCode};
use argus_store::StoreError;

/// Why the coordinator refused a request.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NoDevice(String),
    #[error("no run {0}")]
    NoRun(String),
    /// Something asked for that is not there (a case never run, say).
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the coordinator is shutting down")]
    Stopped,
    /// Work handed to a blocking thread did not come back (it panicked).
    #[error("{0}")]
    Internal(String),
}

impl Coded for CoreError {
    fn code(&self) -> ErrorCode {
        match self {
            CoreError::Invalid(_) => ErrorCode::InvalidArgument,
            CoreError::NoDevice(_) => ErrorCode::FailedPrecondition,
            CoreError::NoRun(_) | CoreError::NotFound(_) => ErrorCode::NotFound,
            CoreError::Store(store) => store.code(),
            CoreError::Stopped => ErrorCode::Unavailable,
            CoreError::Internal(_) => ErrorCode::Internal,
        }
    }

    fn public_message(&self) -> String {
        match self {
            CoreError::Store(store) => store.public_message(),
            other => other.to_string(),
        }
    }
}

impl From<CoreError> for tonic::Status {
    fn from(error: CoreError) -> Self {
        argus_proto::errors::grpc_status(&error)
    }
}
