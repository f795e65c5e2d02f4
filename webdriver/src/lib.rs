//! The WebDriver / Appium facade: W3C WebDriver on the coordinator's HTTP
//! port, under `/` and `/wd/hub`, so that Appium and Selenium clients get
//! sessions on grid devices. A session holds a device the way a lease does
//! (the owner task grants it, in fair share with the runs); its commands
//! become lynkeus calls that travel down the worker's link to the app.
//!
//! - [`caps`]: capability processing and device matching;
//! - [`locate`]: locator strategies; [`page`]: the page source and XPath;
//! - [`actions`]: W3C actions as lynkeus gestures;
//! - [`registry`]: sessions, their elements, and calls in flight;
//! - [`session`], [`elements`], [`execute`]: the commands.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use argus_grid::metrics::Metrics;
use argus_grid::owner::Handle;
use argus_grid::owner::{CoreError, SessionAsk};

pub mod actions;
pub mod caps;
mod elements;
pub mod error;
mod execute;
pub mod locate;
pub mod log;
pub mod page;
pub mod registry;
mod session;

pub use registry::Registry;

/// What the facade's handlers share: the owner task that grants devices,
/// the sessions it holds, and the metrics its commands are counted in.
#[derive(Clone)]
pub struct Facade {
    pub handle: Handle,
    pub sessions: Arc<Registry>,
    pub metrics: Arc<Metrics>,
}

use error::{Code, WdError, WdResult};

/// A command's answer: `{"value": …}`.
pub struct Wd(pub Value);

impl IntoResponse for Wd {
    fn into_response(self) -> Response {
        axum::Json(json!({ "value": self.0 })).into_response()
    }
}

pub type Answer = WdResult<Wd>;

/// The facade's routes, served at the root and under `/wd/hub`.
pub fn router(state: Facade) -> Router {
    let wd = Router::new()
        .route("/status", get(status))
        .route("/session", post(new_session))
        .route("/session/{sid}", get(session::capabilities).delete(delete_session))
        .merge(session::routes())
        .merge(elements::routes())
        .merge(execute::routes())
        .method_not_allowed_fallback(unknown_method);
    Router::new()
        .merge(wd.clone())
        .nest("/wd/hub", wd)
        .route_layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// Whether `path` is one of the facade's, so that what the HTTP layer
/// refuses before it (auth, a bad path) is W3C JSON too.
pub fn is_webdriver_path(path: &str) -> bool {
    let path = path.strip_prefix("/wd/hub").unwrap_or(path);
    path == "/status" || path == "/session" || path.starts_with("/session/")
}

/// A path under the facade no route serves: `unknown command`.
pub fn unknown_command(method: &Method, path: &str) -> Response {
    WdError::new(Code::UnknownCommand, format!("{method} {} is not a command this grid knows", path.escape_debug()))
        .into_response()
}

async fn unknown_method(method: Method, request: Request) -> Response {
    let path = request.uri().path().escape_debug().to_string();
    WdError::new(Code::UnknownMethod, format!("{method} is not a method {path} takes")).into_response()
}

/// Every command is traced (a child of the client's `traceparent` when it
/// sends one), timed and counted by command and outcome.
async fn observe(State(state): State<Facade>, request: Request, next: Next) -> Response {
    let command = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().trim_start_matches("/wd/hub").to_owned())
        .unwrap_or_default();
    let name = format!("{} {command}", request.method());
    let span = tracing::info_span!("webdriver", command = %name, outcome = tracing::field::Empty, trace_context = tracing::field::Empty);
    if let Some(parent) = request.headers().get(argus_proto::trace::TRACEPARENT).and_then(|v| v.to_str().ok()) {
        argus_proto::trace::set_parent(&span, parent);
    }
    let session = session_of(request.uri().path());
    let (started, started_ms) = (Instant::now(), argus_grid::time::now_ms());
    let response = next.run(request).instrument(span.clone()).await;
    let error = response.extensions().get::<WdError>();
    let outcome = error.map_or("ok", |e| e.code.as_str());
    span.record("outcome", outcome);
    let took = started.elapsed();
    state.metrics.webdriver_command(&name, outcome, took.as_secs_f64());
    if let Some(sid) = session {
        state.sessions.command(&sid, &name, started_ms, took.as_millis() as i64, error);
    }
    response
}

/// The session a command's path names.
fn session_of(path: &str) -> Option<String> {
    let path = path.strip_prefix("/wd/hub").unwrap_or(path);
    let mut parts = path.split('/').skip(1);
    (parts.next() == Some("session")).then(|| parts.next().map(str::to_owned)).flatten()
}

/// The body as JSON: an empty body is `{}`; anything else must be an object.
pub fn body(bytes: &Bytes) -> WdResult<Map<String, Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(WdError::invalid_argument("the request's body must be a JSON object")),
        Err(error) => Err(WdError::invalid_argument(format!("the request's body is not JSON: {error}"))),
    }
}

/// The current span's trace context, for the worker's span of a call.
pub fn traceparent() -> String {
    argus_proto::trace::traceparent(&tracing::Span::current()).unwrap_or_default()
}

async fn status(State(state): State<Facade>) -> Answer {
    let fleet = state.handle.fleet().await.map_err(core_error)?;
    let free = fleet
        .devices
        .iter()
        .filter(|d| {
            d.session.is_empty()
                && d.running_case.is_empty()
                && !d.quarantined
                && d.device.as_ref().is_some_and(|i| i.state == argus_proto::grpc::DeviceState::Idle as i32)
        })
        .count();
    let message = format!("{free} of {} devices free; {} sessions", fleet.devices.len(), state.sessions.list().len());
    Ok(Wd(json!({
        "ready": free > 0,
        "message": message,
        "build": { "version": env!("CARGO_PKG_VERSION"), "name": "argus" },
    })))
}

fn core_error(error: CoreError) -> WdError {
    match error {
        CoreError::NoDevice(message) | CoreError::Invalid(message) => WdError::new(Code::SessionNotCreated, message),
        other => WdError::new(Code::SessionNotCreated, other.to_string()),
    }
}

const IDEMPOTENCY_KEY: &str = "x-idempotency-key";
/// How long a new session's app may take to reset.
const RESET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

async fn new_session(State(state): State<Facade>, headers: HeaderMap, bytes: Bytes) -> Answer {
    let body = Value::Object(body(&bytes)?);
    let candidates = caps::process(&body)?;
    match headers.get(IDEMPOTENCY_KEY).and_then(|v| v.to_str().ok()) {
        // A retried request gets the first one's session (and waits for it
        // while the first still waits for a device).
        Some(key) => {
            let cell = state.sessions.idempotent(key);
            let created = cell.get_or_try_init(|| create(&state, candidates)).await?;
            Ok(Wd(created.clone()))
        }
        None => create(&state, candidates).await.map(Wd),
    }
}

async fn create(state: &Facade, candidates: Vec<caps::Request>) -> WdResult<Value> {
    let id = uuid::Uuid::new_v4().to_string();
    let last_used = Arc::new(AtomicI64::new(argus_grid::time::now_ms()));
    // The first set's timeouts hold for the request (they are the client's
    // own settings, the same in every set in practice).
    let first = candidates.first().ok_or_else(|| WdError::invalid_argument("no capability set"))?;
    let ask = SessionAsk {
        id: id.clone(),
        candidates: candidates.iter().map(|c| c.wants.clone()).collect(),
        wait: first.queue_timeout,
        idle: first.idle_timeout,
        last_used: last_used.clone(),
    };
    let granted = state.handle.open_session(ask).await.map_err(core_error)?;
    let held = granted.grant;
    let ended = held.ended.clone();
    let mut capabilities = candidates[granted.matched].echoed.clone();
    let app = held.hello.as_ref().and_then(|hello| hello.app.clone());
    let version = app.as_ref().and_then(|a| a.get("version")).cloned();
    capabilities.insert("platformName".into(), json!(held.platform));
    capabilities.insert("appium:automationName".into(), json!("Lynkeus"));
    let name = if held.model.is_empty() { &held.slot } else { &held.model };
    capabilities.insert("appium:deviceName".into(), json!(name));
    if !held.udid.is_empty() {
        capabilities.insert("appium:udid".into(), json!(held.udid));
    }
    capabilities.insert("lynkeus:device".into(), json!(held.device));
    if let Some(app) = app {
        capabilities.insert("lynkeus:app".into(), app);
    }
    if let Some(version) = version {
        capabilities.insert("lynkeus:appVersion".into(), version);
    }
    let no_reset = candidates[granted.matched].echoed.get("appium:noReset") == Some(&Value::Bool(true));
    let session = Arc::new(registry::Session::new(id.clone(), held, capabilities.clone(), last_used));
    state.sessions.add(session.clone());
    state.sessions.end_when_the_grid_does(id.clone(), ended);
    // A fresh app, as Appium starts one, unless the client asks to keep it
    // (`appium:noReset`); an app without `reset` is left as it is, as the
    // runner leaves it before an attempt.
    if !no_reset {
        let reset = state.sessions.call(&session, "reset", None, RESET_TIMEOUT, traceparent()).await;
        if let Err(failure) = reset
            && !failure.message.starts_with("Unknown method")
        {
            state.sessions.end(&id, "its app could not be reset");
            state.handle.close_session(id.clone()).await;
            return Err(WdError::new(
                Code::SessionNotCreated,
                format!("device {} was free but its app could not be reset: {}", session.grant.device, failure.message),
            ));
        }
    }
    Ok(json!({ "sessionId": id, "capabilities": capabilities }))
}

async fn delete_session(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    state.sessions.get(&sid)?;
    state.sessions.end(&sid, "deleted by its client");
    // The device is free once the owner task hears of it; the client need
    // not wait for that.
    state.handle.close_session(sid).await;
    Ok(Wd(Value::Null))
}
