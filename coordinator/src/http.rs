//! The coordinator's HTTP port, beside gRPC: the dashboard and its API,
//! `/metrics` for Prometheus and `/healthz` for load balancers.
//!
//! Every request passes one guard first: with a read token set, everything
//! but `/healthz` needs it (`Authorization: Bearer TOKEN`, or HTTP Basic with
//! the token as the password, which a browser asks for), except the
//! WebDriver facade, which drives devices, and `/api/` requests that act
//! rather than read (mute, run again), which need the client token (the
//! read token when no client token is set); a path or query
//! that holds a NUL byte or is not UTF-8 is refused with 400; and any error
//! under `/api/` is JSON (`{"error": …}`), never a bare body or a database's
//! own text. Connections that do not finish their headers in time are
//! closed.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use argus_dashboard::Dashboard;
use argus_grid::metrics::Metrics;
use argus_grid::owner::Handle;
use argus_webdriver::Facade;

use crate::push::PushState;

/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest error body turned into a JSON message.
const ERROR_BODY_LIMIT: usize = 16 * 1024;

/// Who may use the HTTP port: see the module's comment.
#[derive(Clone, Default)]
pub struct Guard {
    /// Required of every request but `/healthz` and the push endpoints, when set.
    pub read_token: Option<Arc<str>>,
    /// What WebDriver clients present (and `lynkeus report push`, checked
    /// by the push endpoints), when set.
    pub client_token: Option<Arc<str>>,
}

/// What `/metrics` reads: the owner task's snapshot, rendered.
#[derive(Clone)]
pub struct Observed {
    pub handle: Handle,
    pub metrics: Arc<Metrics>,
}

/// The HTTP port: each part's router merged, behind one guard.
pub fn router(guard: Guard, observed: Observed, dashboard: Dashboard, facade: Facade, push: PushState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(observed)
        .merge(argus_dashboard::router(dashboard))
        .merge(crate::push::router(push))
        .merge(argus_webdriver::router(facade))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(guard, guard_request))
}

async fn not_found(request: Request) -> Response {
    if argus_webdriver::is_webdriver_path(request.uri().path()) {
        return argus_webdriver::unknown_command(request.method(), request.uri().path());
    }
    let shown = request.uri().path().escape_debug().to_string();
    (StatusCode::NOT_FOUND, format!("no page {shown}")).into_response()
}

/// Serves `router` on `listener` until `shutdown`, each connection a tracked
/// task; a connection that does not send its headers within
/// [`HEADER_TIMEOUT`] is closed.
pub async fn serve(listener: TcpListener, router: Router, shutdown: CancellationToken, tasks: TaskTracker) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, then go on.
                    warn!(%error, "cannot accept an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let stop = shutdown.clone();
        tasks.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                _ = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                debug!(%peer, %error, "HTTP connection ended");
            }
        });
    }
}

/// See the module's comment.
async fn guard_request(State(state): State<Guard>, request: Request, next: Next) -> Response {
    let api = request.uri().path().starts_with("/api/");
    let webdriver = argus_webdriver::is_webdriver_path(request.uri().path());
    let refuse = |status: StatusCode, message: String| -> Response {
        if webdriver {
            // A WebDriver client reads only W3C JSON errors.
            let error = if status == StatusCode::UNAUTHORIZED { "unknown error" } else { "invalid argument" };
            let body = serde_json::json!({ "value": { "error": error, "message": message, "stacktrace": "" } });
            (status, axum::Json(body)).into_response()
        } else if api {
            (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
        } else {
            (status, message).into_response()
        }
    };
    if let Some(problem) = uri_problem(request.uri()) {
        return refuse(StatusCode::BAD_REQUEST, problem);
    }
    // A WebDriver client drives devices: it presents the client token, as
    // `argus run` does (the read token when no client token is set).
    if webdriver {
        if let Some(token) = state.client_token.as_ref().or(state.read_token.as_ref())
            && !authorized(request.headers(), token)
        {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "WebDriver needs the coordinator's client token: as the password of the URL (http://argus:TOKEN@host:port/) or as Authorization: Bearer TOKEN".into(),
            );
        }
        return next.run(request).await;
    }
    // What acts (mute, unmute, run again) rather than reads needs the
    // client token, as `argus run` does (the read token when no client
    // token is set).
    let acts = api && !matches!(*request.method(), axum::http::Method::GET | axum::http::Method::HEAD);
    if acts {
        if let Some(token) = state.client_token.as_ref().or(state.read_token.as_ref())
            && !authorized(request.headers(), token)
        {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "this needs the coordinator's client token: Authorization: Bearer TOKEN".into(),
            );
        }
        return json_errors(next.run(request).await).await;
    }
    // `lynkeus report push` presents its own key (see `push.rs`).
    if let Some(token) = &state.read_token
        && request.uri().path() != "/healthz"
        && !request.uri().path().starts_with("/v1/")
        && !authorized(request.headers(), token)
    {
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "this dashboard needs its read token: Authorization: Bearer TOKEN, or the token as the password".into(),
        );
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"argus\""));
        return response;
    }
    let response = next.run(request).await;
    if api { json_errors(response).await } else { response }
}

/// An `/api/` error that is not JSON (axum's own rejections: a body that
/// is not JSON, a missing field) made `{"error": …}`.
async fn json_errors(response: Response) -> Response {
    if (response.status().is_client_error() || response.status().is_server_error()) && !is_json(&response) {
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), ERROR_BODY_LIMIT).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body).trim().to_owned();
        let message = if text.is_empty() { status.canonical_reason().unwrap_or("error").to_lowercase() } else { text };
        return (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    }
    response
}

fn is_json(response: &Response<Body>) -> bool {
    response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// A NUL byte or text that is not UTF-8, once percent-decoded, in the path
/// or the query.
fn uri_problem(uri: &axum::http::Uri) -> Option<String> {
    for (part, raw) in [("path", uri.path()), ("query", uri.query().unwrap_or(""))] {
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(raw).collect();
        let decoded =
            decoded.iter().map(|b| if *b == b'+' && part == "query" { b' ' } else { *b }).collect::<Vec<u8>>();
        match std::str::from_utf8(&decoded) {
            Err(_) => return Some(format!("the request's {part} is not UTF-8")),
            Ok(text) if text.contains('\0') => return Some(format!("the request's {part} holds a NUL byte")),
            Ok(_) => {}
        }
    }
    None
}

/// The read token, as a bearer token or as a Basic password.
fn authorized(headers: &axum::http::HeaderMap, token: &str) -> bool {
    use base64::Engine;
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let given = if let Some(bearer) = value.strip_prefix("Bearer ") {
        bearer.as_bytes().to_vec()
    } else if let Some(basic) = value.strip_prefix("Basic ") {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) else { return false };
        match decoded.iter().position(|b| *b == b':') {
            Some(colon) => decoded[colon + 1..].to_vec(),
            None => return false,
        }
    } else {
        return false;
    };
    argus_proto::auth::same(&given, token.as_bytes())
}

async fn metrics(State(state): State<Observed>) -> impl IntoResponse {
    let Ok(snapshot) = state.handle.snapshot().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the coordinator is shutting down\n".to_owned()).into_response();
    };
    let body = state.metrics.render(&snapshot);
    // prometheus-client writes the OpenMetrics text format (`# EOF` last).
    ([(header::CONTENT_TYPE, argus_grid::metrics::CONTENT_TYPE)], body).into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}
