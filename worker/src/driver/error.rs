use std::net::SocketAddr;
use std::time::Duration;

use argus_proto::wire::ErrorBody;

/// Why a driver could not start listening.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("port {port} on {host} is in use: another driver or program listens there (port-in-use)")]
    PortInUse { host: String, port: u16 },
    #[error("cannot listen on {host}:{port}: {source}")]
    Io { host: String, port: u16, source: std::io::Error },
}

impl ListenError {
    /// `port-in-use` for a taken port; `None` for other failures.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ListenError::PortInUse { .. } => Some("port-in-use"),
            ListenError::Io { .. } => None,
        }
    }
}

/// Why a call, or the wait for an app, failed. [`CallError::code`] gives the
/// lynkeus error code where there is one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// No socket is open and no reconnect is awaited.
    #[error("No app attached on {addr}")]
    NoApp { addr: SocketAddr },
    /// `wait_for_app` gave up. `silent_app`: an app connected but never said
    /// hello, which is what an app does when the tokens differ.
    #[error("{}", attach_timeout_message(*.addr, *.waited, *.silent_app))]
    AttachTimeout { addr: SocketAddr, waited: Duration, silent_app: bool },
    /// The call's deadline passed (code `timeout`).
    #[error("{method} timed out after {}ms", .after.as_millis())]
    Timeout { method: String, after: Duration },
    /// The app dropped and did not come back within the grace period (code `disconnected`).
    #[error("App disconnected mid-call")]
    Disconnected,
    /// The driver was closed with the call in flight.
    #[error("Agent server closed")]
    Closed,
    /// The app answered with an error; `unauthenticated` is one of these.
    #[error("{}", .0.message)]
    App(ErrorBody),
}

impl CallError {
    pub fn code(&self) -> Option<&str> {
        match self {
            CallError::Timeout { .. } => Some("timeout"),
            CallError::Disconnected => Some("disconnected"),
            CallError::App(body) => body.code.as_deref(),
            CallError::NoApp { .. } | CallError::AttachTimeout { .. } | CallError::Closed => None,
        }
    }

    /// The device failed, not the case: no app, one that went away, a
    /// driver that closed, or an answer from an app that is not the
    /// device's (`unauthenticated`).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            CallError::NoApp { .. } | CallError::AttachTimeout { .. } | CallError::Disconnected | CallError::Closed => {
                true
            }
            CallError::App(body) => body.code.as_deref() == Some("unauthenticated"),
            CallError::Timeout { .. } => false,
        }
    }

    /// The app's `Unknown method <name>`: the step is unsupported, not failed.
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, CallError::App(body) if body.message.starts_with("Unknown method"))
    }
}

fn attach_timeout_message(addr: SocketAddr, waited: Duration, silent_app: bool) -> String {
    let ms = waited.as_millis();
    if silent_app {
        format!(
            "No app attached on {addr} within {ms}ms: an app connected but did not say hello. \
             Does the driver's token match the app's?"
        )
    } else {
        format!("No app attached on {addr} within {ms}ms. Is a dev build running with <Lynkeus>?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_failing_is_told_from_the_case_failing_by_type() {
        let addr: SocketAddr = "127.0.0.1:8123".parse().unwrap();
        assert!(CallError::NoApp { addr }.is_infrastructure());
        assert!(CallError::Disconnected.is_infrastructure());
        assert!(CallError::Closed.is_infrastructure());
        assert!(CallError::App(ErrorBody::unauthenticated()).is_infrastructure(), "an app that is not the device's");
        assert!(!CallError::App(ErrorBody::new("No element matches")).is_infrastructure());
        assert!(!CallError::Timeout { method: "press".into(), after: Duration::from_secs(1) }.is_infrastructure());
    }
}
