//! Reaching the coordinator: plain `http://`, or `https://` with TLS (the
//! public CAs, or the CA given with `--tls-ca`). A client that speaks the
//! wrong one is told which, rather than left with an HTTP/2 error.

use std::path::Path;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// A channel to the coordinator at `url`.
/// HTTP/2 pings on every channel, so that a half-open connection (a frozen
/// or vanished peer) is noticed within seconds rather than never.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// A channel to the active coordinator of `urls`: one URL, or several
/// separated by commas (an active coordinator and its standbys), tried in
/// order; a standby answers its health check NOT_SERVING and is passed by.
pub async fn connect(urls: &str, ca: Option<&Path>) -> Result<Channel, ConnectError> {
    let list: Vec<&str> = urls.split(',').map(str::trim).filter(|u| !u.is_empty()).collect();
    if list.len() <= 1 {
        return connect_one(urls.trim(), ca).await;
    }
    let mut why = Vec::new();
    for url in &list {
        match connect_one(url, ca).await {
            Ok(channel) => return Ok(channel),
            Err(error) => why.push(error.to_string()),
        }
    }
    Err(ConnectError::NoneServing { urls: list.join(", "), why: why.join("; ") })
}

/// Why no channel to a coordinator could be made; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// What was given cannot be dialled: no scheme, not a URL, a CA that
    /// cannot be read or without TLS.
    #[error("{0}")]
    Setup(String),
    /// Nothing answers gRPC there, or the connection failed.
    #[error("{0}")]
    Unreachable(String),
    /// It answers, but stands by for another coordinator or is stopping.
    #[error("the coordinator at {0} is not serving: it stands by for another, or is stopping")]
    NotServing(String),
    #[error("none of the coordinators {urls} is serving: {why}")]
    NoneServing { urls: String, why: String },
}

async fn connect_one(url: &str, ca: Option<&Path>) -> Result<Channel, ConnectError> {
    use ConnectError::{NotServing, Setup, Unreachable};
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(Setup(format!(
            "{url:?} has no scheme: give http://{url} (or https://{url} if the coordinator serves TLS)"
        )));
    }
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| Setup(format!("{url} is not a URL: {e}")))?
        .connect_timeout(Duration::from_secs(10))
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    let tls = url.starts_with("https://");
    if tls {
        let mut config = ClientTlsConfig::new().with_webpki_roots();
        if let Some(ca) = ca {
            let pem = std::fs::read(ca)
                .map_err(|e| Setup(format!("cannot read the CA certificate {}: {e}", ca.display())))?;
            config = config.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(config).map_err(|e| Setup(format!("{url}: {e}")))?;
    } else if ca.is_some() {
        return Err(Setup(format!("a CA certificate was given for {url}: use https:// to connect with TLS")));
    }
    let channel = match endpoint.connect().await {
        Ok(channel) => channel,
        Err(error) if !tls && speaks_http1(url).await => return Err(Unreachable(not_grpc(url, &error.to_string()))),
        Err(error) => return Err(Unreachable(explain(url, tls, &error.to_string(), &error))),
    };
    // HTTP/2 connects without hearing from the server; a health check
    // (open to all) proves the coordinator answers on this scheme.
    let mut health = HealthClient::new(channel.clone());
    let check = HealthCheckRequest { service: String::new() };
    match health.check(check).await {
        Ok(answer)
            if answer.get_ref().status == tonic_health::pb::health_check_response::ServingStatus::NotServing as i32 =>
        {
            Err(NotServing(url.to_owned()))
        }
        Ok(_) => Ok(channel),
        Err(status) if status.code() == tonic::Code::Unimplemented => Ok(channel),
        Err(status) if !tls && speaks_http1(url).await => Err(Unreachable(not_grpc(url, status.message()))),
        Err(status) => Err(Unreachable(match std::error::Error::source(&status) {
            Some(source) => explain(url, tls, status.message(), source),
            None => format!("the coordinator at {url} answered its health check with {status}"),
        })),
    }
}

fn not_grpc(url: &str, causes: &str) -> String {
    format!(
        "{url} does not answer gRPC: is it the coordinator's HTTP (dashboard) port? gRPC listens on the \
         coordinator's --listen address, 127.0.0.1:7171 by default ({causes})"
    )
}

/// Whether what listens at `url` answers plain HTTP/1 (a dashboard, a web
/// server): asked once, with a short timeout, only to word an error.
async fn speaks_http1(url: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(uri) = url.parse::<tonic::codegen::http::Uri>() else { return false };
    let Some(authority) = uri.authority() else { return false };
    let port = authority.port_u16().unwrap_or(80);
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((authority.host(), port)).await.ok()?;
        stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: argus\r\nconnection: close\r\n\r\n").await.ok()?;
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).await.ok()?;
        Some(head.starts_with(b"HTTP/1."))
    };
    tokio::time::timeout(Duration::from_secs(2), probe).await.ok().flatten().unwrap_or(false)
}

/// The transport error, with its causes, in words that say what to change.
fn explain(url: &str, tls: bool, message: &str, error: &(dyn std::error::Error + 'static)) -> String {
    let mut causes = message.to_owned();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Transport errors often repeat their cause in their own text.
        if !causes.contains(&cause_text) {
            causes.push_str(": ");
            causes.push_str(&cause_text);
        }
        source = cause.source();
    }
    let lower = causes.to_lowercase();
    if lower.contains("refused") {
        return format!("cannot reach the coordinator at {url}: nothing listens there ({causes})");
    }
    // A plaintext coordinator answers a TLS hello with a protocol_version alert.
    if tls
        && (lower.contains("protocolversion")
            || lower.contains("invalidcontenttype")
            || lower.contains("corrupt message"))
    {
        return format!(
            "the coordinator at {url} does not speak TLS: connect with http://, or start it with --tls-cert and --tls-key ({causes})"
        );
    }
    if tls && (lower.contains("certificate") || lower.contains("unknownissuer")) {
        return format!(
            "the coordinator at {url} has a certificate this client does not trust: give its CA with --tls-ca ({causes})"
        );
    }
    if !tls {
        return format!(
            "cannot reach the coordinator at {url}: it closed the connection; if it serves TLS, connect with https:// ({causes})"
        );
    }
    format!("cannot reach the coordinator at {url}: {causes}")
}
