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

pub async fn connect(url: &str, ca: Option<&Path>) -> Result<Channel, String> {
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!(
            "{url:?} has no scheme: give http://{url} (or https://{url} if the coordinator serves TLS)"
        ));
    }
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| format!("{url} is not a URL: {e}"))?
        .connect_timeout(Duration::from_secs(10))
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    let tls = url.starts_with("https://");
    if tls {
        let mut config = ClientTlsConfig::new().with_webpki_roots();
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).map_err(|e| format!("cannot read the CA certificate {}: {e}", ca.display()))?;
            config = config.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(config).map_err(|e| format!("{url}: {e}"))?;
    } else if ca.is_some() {
        return Err(format!("a CA certificate was given for {url}: use https:// to connect with TLS"));
    }
    let channel = endpoint.connect().await.map_err(|error| explain(url, tls, &error.to_string(), &error))?;
    // HTTP/2 connects without hearing from the server; a health check
    // (open to all) proves the coordinator answers on this scheme.
    let mut health = HealthClient::new(channel.clone());
    let check = HealthCheckRequest { service: String::new() };
    match health.check(check).await {
        Ok(_) => Ok(channel),
        Err(status) if status.code() == tonic::Code::Unimplemented => Ok(channel),
        Err(status) => Err(match std::error::Error::source(&status) {
            Some(source) => explain(url, tls, status.message(), source),
            None => format!("the coordinator at {url} answered its health check with {status}"),
        }),
    }
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
    // An HTTP/1 server (the coordinator's dashboard port, say) answers the
    // HTTP/2 preface with something that is not gRPC.
    if lower.contains("grpc-status header missing")
        || lower.contains("invalid http2")
        || lower.contains("frame with invalid size")
        || lower.contains("http/1")
    {
        return format!(
            "{url} does not answer gRPC: is it the coordinator's HTTP (dashboard) port? gRPC listens on the \
             coordinator's --listen address, 127.0.0.1:7171 by default ({causes})"
        );
    }
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
