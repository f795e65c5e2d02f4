//! What a team does from the dashboard, beside reading it: mute and unmute
//! a case, run a run's failed cases again, import another runner's report. Each needs the client token (the
//! coordinator's HTTP guard asks for it on every `/api/` request that is
//! not a read).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::api::ApiError;
use crate::Dashboard;
use argus_grid::error::CoreError;
use argus_grid::time::now_ms;
use argus_proto::grpc;
use argus_store::MuteRow;

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        ApiError::of(&error)
    }
}

/// A mute as the API takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MuteBody {
    pub reason: String,
    #[serde(default)]
    pub owner: String,
    /// `2026-12-31` (through that day, UTC) or an RFC 3339 time.
    #[serde(default)]
    pub until: Option<String>,
    /// Who mutes it.
    #[serde(default)]
    pub by: String,
}

/// `PUT /api/v1/mutes/{project}/{case}`.
pub async fn mute(
    State(state): State<Dashboard>,
    Path((project, case_id)): Path<(String, String)>,
    Json(body): Json<MuteBody>,
) -> Result<Json<MuteRow>, ApiError> {
    let until_unix_ms = match body.until.as_deref().filter(|u| !u.is_empty()) {
        Some(until) => Some(
            argus_history::mutes::parse_until(until)
                .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("until: {e}")))?,
        ),
        None => None,
    };
    let ask = grpc::MuteRequest {
        project,
        case_id,
        reason: body.reason,
        owner: body.owner,
        until_unix_ms,
        by: if body.by.is_empty() { "dashboard".into() } else { body.by },
    };
    Ok(Json(argus_history::mutes::mute(&state.store, ask, now_ms()).await?))
}

/// Who unmutes and why, as the query of a DELETE.
#[derive(Debug, Default, Deserialize)]
pub struct UnmuteQuery {
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct Unmuted {
    pub was_muted: bool,
}

/// `DELETE /api/v1/mutes/{project}/{case}?by=…&reason=…`: 404 when the case
/// was not muted.
pub async fn unmute(
    State(state): State<Dashboard>,
    Path((project, case_id)): Path<(String, String)>,
    Query(query): Query<UnmuteQuery>,
) -> Result<Json<Unmuted>, ApiError> {
    let by = if query.by.is_empty() { "dashboard".into() } else { query.by };
    let ask = grpc::UnmuteRequest { project: project.clone(), case_id: case_id.clone(), by, reason: query.reason };
    if !argus_history::mutes::unmute(&state.store, ask, now_ms()).await? {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("{case_id} is not muted in {project}")));
    }
    Ok(Json(Unmuted { was_muted: true }))
}

/// A rerun as the API takes it (the body may be left out).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunBody {
    /// Muted cases that failed run again too.
    #[serde(default)]
    pub muted: bool,
}

#[derive(Debug, Serialize)]
pub struct Rerun {
    pub run_id: String,
    pub rerun_of: String,
    pub cases: Vec<String>,
    /// The new run's page.
    pub url: String,
}

/// `POST /api/v1/runs/{id}/rerun-failed`: the run's failed cases again, from
/// its files, on its selector, detached (no client watches it; cases with
/// fixture or exec steps fail there, as nothing serves them).
pub async fn rerun_failed(
    State(state): State<Dashboard>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Rerun>, ApiError> {
    let body: RerunBody = if body.iter().all(u8::is_ascii_whitespace) {
        RerunBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("the body is not {{\"muted\": bool}} JSON: {e}")))?
    };
    let request = grpc::SubmitRequest {
        rerun_failed_of: id.clone(),
        rerun_muted: body.muted,
        retries: 1,
        priority: 1,
        detach: true,
        trigger: "dashboard rerun".into(),
        ..Default::default()
    };
    let rerun = argus_history::rerun::prepare(&state.store, request).await?;
    let submitted = argus_grid::submit::submit(&state.handle, &state.store, rerun, String::new()).await?;
    let url = format!("/runs/{}", submitted.run_id);
    Ok(Json(Rerun { run_id: submitted.run_id, rerun_of: id, cases: submitted.case_ids, url }))
}

/// What an import is filed under, as a query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    #[serde(default)]
    pub project: String,
    #[serde(default)]
    pub branch: String,
    #[serde(default)]
    pub commit: String,
    #[serde(default)]
    pub platform: String,
    /// The runner that wrote it, when the report does not say.
    #[serde(default)]
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct ImportedView {
    #[serde(flatten)]
    pub imported: argus_history::import::Imported,
    pub url: String,
}

/// `POST /api/v1/import/junit?project=P&branch=&commit=&platform=&source=`:
/// the body is a JUnit XML report; 201 with the run it became; 400 naming
/// what is wrong with it, 413 past the size, nothing written either way.
pub async fn import_junit(
    State(state): State<Dashboard>,
    Query(query): Query<ImportQuery>,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<ImportedView>), ApiError> {
    let limit = argus_history::import::MAX_REPORT_BYTES;
    let report = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the report is larger than {} MiB, the most taken", limit >> 20),
        )
    })?;
    let ask = argus_history::import::ImportAsk {
        project: query.project,
        branch: query.branch,
        commit: query.commit,
        platform: query.platform,
        source: query.source,
        report: report.to_vec(),
    };
    let imported = argus_history::import::import_junit(&state.store, ask, now_ms()).await?;
    let url = format!("/runs/{}", imported.run_id);
    Ok((StatusCode::CREATED, Json(ImportedView { imported, url })))
}
