//! What the grid answers when it refuses or cannot do what it is asked,
//! converted once into the gRPC status a client can act on.

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

impl From<CoreError> for tonic::Status {
    fn from(error: CoreError) -> Self {
        match error {
            CoreError::Invalid(m) => tonic::Status::invalid_argument(m),
            CoreError::NoDevice(m) => tonic::Status::failed_precondition(m),
            CoreError::NoRun(_) => tonic::Status::not_found(error.to_string()),
            CoreError::NotFound(m) => tonic::Status::not_found(m),
            CoreError::Store(store) => store.into(),
            CoreError::Stopped => tonic::Status::unavailable(error.to_string()),
            CoreError::Internal(m) => tonic::Status::internal(m),
        }
    }
}
