//! Webhooks on the dashboard: the configured ones (names, formats, events,
//! where they go without the secret part of the address) and every
//! delivery with its last answer, newest first.

use askama::Template;
use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use super::api::ApiError;
use super::pages::{error_page, render};
use crate::Dashboard;
use crate::view::iso;
use argus_store::DeliveryRow;

/// How many deliveries are listed.
const LISTED: u32 = 200;

#[derive(Debug, Serialize)]
pub struct WebhookView {
    pub name: String,
    pub url: String,
    pub format: argus_history::notify::Format,
    /// The events it takes (`all` when it names none).
    pub events: Vec<String>,
    pub signed: bool,
}

#[derive(Debug, Serialize)]
pub struct DeliveryView {
    pub id: i64,
    pub webhook: String,
    pub event: String,
    /// `pending`, `delivered`, `refused` or `abandoned`.
    pub state: String,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created: String,
    pub next_try: Option<String>,
    pub finished: Option<String>,
}

impl DeliveryView {
    fn of(row: DeliveryRow) -> Self {
        Self {
            next_try: (row.state == "pending").then(|| iso(row.next_at)),
            finished: row.finished_at.map(iso),
            created: iso(row.created_at),
            id: row.id,
            webhook: row.webhook,
            event: row.kind,
            state: row.state,
            attempts: row.attempts,
            last_status: row.last_status,
            last_error: row.last_error,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Webhooks {
    pub webhooks: Vec<WebhookView>,
    pub deliveries: Vec<DeliveryView>,
}

async fn webhooks(state: &Dashboard) -> Result<Webhooks, ApiError> {
    Ok(Webhooks {
        webhooks: state
            .webhooks
            .iter()
            .map(|hook| WebhookView {
                name: hook.name.clone(),
                url: hook.shown_url(),
                format: hook.format,
                events: if hook.events.is_empty() {
                    vec!["all".into()]
                } else {
                    hook.events.iter().map(|e| e.as_str().to_owned()).collect()
                },
                signed: hook.secret.is_some(),
            })
            .collect(),
        deliveries: state.store.deliveries(LISTED).await?.into_iter().map(DeliveryView::of).collect(),
    })
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct WebhooksTemplate {
    told: Webhooks,
}

pub async fn webhooks_page(State(state): State<Dashboard>) -> Response {
    match webhooks(&state).await {
        Ok(told) => render(WebhooksTemplate { told }),
        Err(error) => error_page(error),
    }
}

/// `GET /api/v1/webhooks`.
pub async fn webhooks_api(State(state): State<Dashboard>) -> Result<Json<Webhooks>, ApiError> {
    Ok(Json(webhooks(&state).await?))
}
