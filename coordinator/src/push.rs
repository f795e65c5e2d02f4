//! `lynkeus report push` into Argus (spec §4.1): the reports-service
//! sequence on the coordinator's HTTP port, so a team that runs plain
//! `lynkeus case run` on a laptop or another CI gets its runs into the same
//! history, flaky ranking and case pages as grid runs.
//!
//! 1. `POST /v1/runs` `{project, run}` → 201 `{id, url}`;
//! 2. `PUT /v1/runs/{id}/cases`, the raw `cases.jsonl`;
//! 3. `PUT /v1/runs/{id}/files/{path}` per screenshot or film: kept in the
//!    coordinator's artifact store under the run (204); 402 when it keeps
//!    none (lynkeus lists them as not kept);
//! 4. `POST /v1/runs/{id}/finish` → `{url}`: the run is written to the store
//!    in one transaction, marked as pushed.
//!
//! The key (`authorization: Bearer KEY`, `LYNKEUS_REPORTS_KEY`) is the
//! coordinator's client token when it has one. Until `finish`, a push is
//! held in memory: a push cut short (or a coordinator restart) leaves
//! nothing half-written, and the pusher is told its run is unknown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argus_proto::run::{RUN_SCHEMA, RunCase, RunManifest};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use serde::Deserialize;
use serde_json::{Value, json};

use argus_store::ImportedRun;
use argus_store::artifacts::ArtifactError;

/// The largest `cases.jsonl` accepted.
const CASES_LIMIT: usize = 64 * 1024 * 1024;
/// How long a push may take from its first request to `finish`.
const PUSH_TTL: Duration = Duration::from_secs(3600);

/// Pushes between their first request and `finish`.
#[derive(Default)]
pub struct Pushes(Mutex<HashMap<String, Push>>);

struct Push {
    project: String,
    manifest: RunManifest,
    manifest_json: String,
    /// `manifest.started_at`, read when the push began.
    started_ms: i64,
    lines: Vec<(RunCase, String)>,
    begun: Instant,
}

impl Pushes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Push>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the push endpoints share.
#[derive(Clone)]
pub struct PushState {
    pub store: argus_store::Store,
    /// Where pushed files are kept, when this coordinator keeps files.
    pub artifacts: Option<argus_store::artifacts::Artifacts>,
    /// The key `lynkeus report push` must present (the client token), when set.
    pub push_token: Option<Arc<str>>,
    pub pushes: Arc<Pushes>,
}

/// The push endpoints, under `/v1/`.
pub fn router(state: PushState) -> axum::Router {
    axum::Router::new()
        .route("/v1/runs", post(create))
        .route("/v1/runs/{id}/cases", put(cases))
        .route("/v1/runs/{id}/finish", post(finish))
        .layer(DefaultBodyLimit::max(CASES_LIMIT))
        .route(
            "/v1/runs/{id}/files/{*path}",
            put(file).layer(DefaultBodyLimit::max(argus_proto::artifacts::MAX_FILE_BYTES as usize)),
        )
        .with_state(state)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// The key, when the coordinator has a client token.
fn refused(state: &PushState, headers: &HeaderMap) -> Option<Response> {
    let token = state.push_token.as_deref()?;
    let given =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|key| argus_proto::auth::same(key.as_bytes(), token.as_bytes())) {
        return None;
    }
    Some(error(
        StatusCode::UNAUTHORIZED,
        "a wrong or missing key: LYNKEUS_REPORTS_KEY must be the coordinator's client token",
    ))
}

/// Where the run will be seen, on the host the pusher reached.
fn url_of(headers: &HeaderMap, id: &str) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    format!("http://{host}/runs/{id}")
}

#[derive(Deserialize)]
struct Create {
    project: Option<Value>,
    run: Option<Value>,
}

async fn create(State(state): State<PushState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refusal) = refused(&state, &headers) {
        return refusal;
    }
    let body: Create = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body is not {{project, run}} JSON: {e}")),
    };
    let Some(Value::String(project)) = body.project.filter(|p| p.as_str().is_some_and(|p| !p.trim().is_empty())) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "project must be a non-empty string");
    };
    let Some(run) = body.run else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "run is missing: run.json, parsed");
    };
    let schema = run.get("schema").cloned().unwrap_or(Value::Null);
    if schema.as_u64() != Some(u64::from(RUN_SCHEMA)) {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("run schema {schema} is not one this service reads ({RUN_SCHEMA})"),
        );
    }
    let manifest_json = run.to_string();
    let manifest: RunManifest = match serde_json::from_value(run) {
        Ok(manifest) => manifest,
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, format!("run is not a RunManifest: {e}")),
    };
    let Some(started_ms) = parse_ms(&manifest.started_at) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("run.startedAt {:?} is not an ISO 8601 time", manifest.started_at),
        );
    };
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    {
        let mut pushes = state.pushes.lock();
        pushes.retain(|_, p| p.begun.elapsed() < PUSH_TTL);
        pushes.insert(
            id.clone(),
            Push { project, manifest, manifest_json, started_ms, lines: Vec::new(), begun: Instant::now() },
        );
    }
    let url = url_of(&headers, &id);
    (StatusCode::CREATED, Json(json!({ "id": id, "url": url }))).into_response()
}

fn unknown(id: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no run {id:?} is being pushed (create it with POST /v1/runs first)"))
}

async fn cases(State(state): State<PushState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refusal) = refused(&state, &headers) {
        return refusal;
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "cases.jsonl is not UTF-8");
    };
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let case: RunCase = match serde_json::from_str(line) {
            Ok(case) => case,
            Err(e) => {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("cases.jsonl line {}: not a RunCase: {e}", number + 1),
                );
            }
        };
        if parse_ms(&case.started_at).is_none() {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("cases.jsonl line {}: startedAt {:?} is not an ISO 8601 time", number + 1, case.started_at),
            );
        }
        if lines.iter().any(|(seen, _): &(RunCase, String)| seen.id == case.id && seen.attempt == case.attempt) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("cases.jsonl line {}: attempt {} of {:?} appears twice", number + 1, case.attempt, case.id),
            );
        }
        lines.push((case, line.to_owned()));
    }
    match state.pushes.lock().get_mut(&id) {
        Some(push) => push.lines = lines,
        None => return unknown(&id),
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn file(
    State(state): State<PushState>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = refused(&state, &headers) {
        return refusal;
    }
    if !state.pushes.lock().contains_key(&id) {
        return unknown(&id);
    }
    let Some(artifacts) = &state.artifacts else {
        // lynkeus lists a 402 as "not kept on this plan" and goes on.
        return error(StatusCode::PAYMENT_REQUIRED, format!("{path}: this coordinator keeps no screenshots or films"));
    };
    match artifacts.put(&id, &path, body.to_vec()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(ArtifactError::BadPath(problem)) => error(StatusCode::UNPROCESSABLE_ENTITY, problem),
        Err(error_) => {
            tracing::warn!(run = %id, error = %error_, "cannot keep a pushed file");
            error(StatusCode::SERVICE_UNAVAILABLE, format!("{path}: the file could not be kept; push it again"))
        }
    }
}

async fn finish(State(state): State<PushState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refused(&state, &headers) {
        return refusal;
    }
    let Some(push) = state.pushes.lock().remove(&id) else { return unknown(&id) };
    let started_at = push.started_ms;
    let started: Vec<i64> = push.lines.iter().map(|(c, _)| parse_ms(&c.started_at).unwrap_or(started_at)).collect();
    let last_end = push.lines.iter().zip(&started).map(|((c, _), s)| s + c.ms as i64).max().unwrap_or(started_at);
    let finished_at = push.manifest.finished_at.as_deref().and_then(parse_ms).unwrap_or(last_end);
    let git = |key: &str| {
        let extra = &push.manifest.extra;
        extra.get(key).or_else(|| extra.get("git").and_then(|g| g.get(key))).and_then(Value::as_str).map(str::to_owned)
    };
    let run = ImportedRun {
        id: id.clone(),
        project: push.project,
        branch: git("branch"),
        commit: git("commit"),
        started_at,
        finished_at,
        manifest_json: push.manifest_json,
        lines: push.lines,
        started,
        trigger: argus_store::PUSHED.to_owned(),
    };
    if let Err(e) = state.store.import_run(&run).await {
        tracing::warn!(run = %id, error = %e, "cannot write a pushed run");
        return error(StatusCode::SERVICE_UNAVAILABLE, "the run could not be written to the store; push it again");
    }
    Json(json!({ "url": url_of(&headers, &id) })).into_response()
}

/// Epoch milliseconds of an ISO 8601 time.
fn parse_ms(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis())
}
