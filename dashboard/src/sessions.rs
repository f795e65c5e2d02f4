//! WebDriver sessions on the dashboard: the latest sessions, and one
//! session's device, capabilities and commands (with the screen the failing
//! ones saw), from the store; the API serves the same views.

use askama::Template;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use super::api::ApiError;
use super::pages::{error_page, render};
use crate::Dashboard;
use crate::view::iso;
use argus_store::{CommandRow, SessionRow};

/// How many sessions the list shows.
const LISTED: u32 = 100;

#[derive(Debug, Serialize)]
pub struct SessionView {
    pub id: String,
    pub device: String,
    pub worker: String,
    pub platform: String,
    pub started: String,
    /// `live`, or when it ended.
    pub ended: Option<String>,
    pub end_reason: Option<String>,
    pub capabilities: serde_json::Value,
}

impl SessionView {
    fn of(row: SessionRow) -> Self {
        Self {
            // Recorded by this coordinator from what it answered; shown as
            // text should it not read back.
            capabilities: serde_json::from_str(&row.capabilities_json)
                .unwrap_or_else(|_| serde_json::Value::String(row.capabilities_json.clone())),
            started: iso(row.created_at),
            ended: row.ended_at.map(iso),
            end_reason: row.end_reason,
            device: row.device_id,
            worker: row.worker_id,
            platform: row.platform,
            id: row.id,
        }
    }

    pub fn capabilities_text(&self) -> String {
        serde_json::to_string_pretty(&self.capabilities).unwrap_or_default()
    }
}

#[derive(Debug, Serialize)]
pub struct SessionDetail {
    pub session: SessionView,
    pub commands: Vec<CommandRow>,
}

impl SessionDetail {
    pub fn failures(&self) -> usize {
        self.commands.iter().filter(|c| c.outcome != "ok").count()
    }
}

#[derive(Template)]
#[template(path = "sessions.html")]
struct SessionsTemplate {
    sessions: Vec<SessionView>,
}

#[derive(Template)]
#[template(path = "session.html")]
struct SessionTemplate {
    detail: SessionDetail,
}

async fn list(state: &Dashboard) -> Result<Vec<SessionView>, ApiError> {
    Ok(state.store.list_sessions(LISTED).await?.into_iter().map(SessionView::of).collect())
}

async fn detail(state: &Dashboard, id: &str) -> Result<SessionDetail, ApiError> {
    let row = state
        .store
        .get_session(id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no WebDriver session {id}")))?;
    let commands = state.store.session_commands(id).await?;
    Ok(SessionDetail { session: SessionView::of(row), commands })
}

pub async fn sessions_page(State(state): State<Dashboard>) -> Response {
    match list(&state).await {
        Ok(sessions) => render(SessionsTemplate { sessions }),
        Err(error) => error_page(error),
    }
}

pub async fn session_page(State(state): State<Dashboard>, Path(id): Path<String>) -> Response {
    match detail(&state, &id).await {
        Ok(detail) => render(SessionTemplate { detail }),
        Err(error) => error_page(error),
    }
}

pub async fn sessions_api(State(state): State<Dashboard>) -> Result<Json<Vec<SessionView>>, ApiError> {
    Ok(Json(list(&state).await?))
}

pub async fn session_api(
    State(state): State<Dashboard>,
    Path(id): Path<String>,
) -> Result<Json<SessionDetail>, ApiError> {
    Ok(Json(detail(&state, &id).await?))
}
