//! What a refused or failed request means to its client, whatever the
//! transport. Each error type says its [`ErrorCode`] once ([`Coded`]); the
//! gRPC code and the HTTP status of every code are read here, so that
//! `argus` and the dashboard's API answer alike for the same error.

/// The kinds of answer a client can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// What was sent is wrong; sending it again will not help.
    InvalidArgument,
    /// What was asked for is not there.
    NotFound,
    /// It cannot be done in the state things are in (a lease no longer
    /// current, a device busy, a standby on SQLite).
    FailedPrecondition,
    /// The coordinator or its database could not answer: try again.
    Unavailable,
    /// A stored record that does not read back.
    DataLoss,
    /// A fault of the coordinator's own.
    Internal,
}

impl ErrorCode {
    pub fn grpc(self) -> tonic::Code {
        match self {
            ErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorCode::NotFound => tonic::Code::NotFound,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::DataLoss => tonic::Code::DataLoss,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }

    /// The HTTP status of the same answer.
    pub fn http(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument => 400,
            ErrorCode::NotFound => 404,
            ErrorCode::FailedPrecondition => 409,
            ErrorCode::Unavailable => 503,
            ErrorCode::DataLoss | ErrorCode::Internal => 500,
        }
    }
}

/// An error that knows its code, and what its client may read of it.
pub trait Coded: std::fmt::Display {
    fn code(&self) -> ErrorCode;

    /// What the client is told: the error's own words, unless they may
    /// quote what was sent and say nothing a user can act on (a database's
    /// error), which then stay in the log.
    fn public_message(&self) -> String {
        self.to_string()
    }
}

/// The gRPC status of a coded error; what the client is not told is logged.
pub fn grpc_status(error: &impl Coded) -> tonic::Status {
    tonic::Status::new(error.code().grpc(), told(error))
}

/// The HTTP status and message of a coded error; what the client is not
/// told is logged.
pub fn http_answer(error: &impl Coded) -> (u16, String) {
    (error.code().http(), told(error))
}

fn told(error: &impl Coded) -> String {
    let public = error.public_message();
    let own = error.to_string();
    if public != own {
        tracing::warn!(error = %own, "a request could not be answered");
    }
    public
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Database;
    impl std::fmt::Display for Database {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("syntax error near 'DROP TABLE'")
        }
    }
    impl Coded for Database {
        fn code(&self) -> ErrorCode {
            ErrorCode::Unavailable
        }
        fn public_message(&self) -> String {
            "the database could not answer; try again".into()
        }
    }

    #[test]
    fn one_code_gives_the_same_answer_on_both_transports() {
        let status = grpc_status(&Database);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "the database could not answer; try again");
        assert_eq!(http_answer(&Database), (503, "the database could not answer; try again".into()));
        for code in [ErrorCode::NotFound, ErrorCode::InvalidArgument, ErrorCode::FailedPrecondition] {
            let http = code.http();
            assert!((400..500).contains(&http), "{code:?} is the client's to fix: {http}");
        }
    }
}
