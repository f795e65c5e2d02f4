//! The dashboard, served on the coordinator's HTTP port from the same store:
//! pages for people (runs, a run, a case, flaky and slow cases, the fleet)
//! and `/api/v1/` for scripts. No build step: templates are compiled in,
//! and the CSS and the one script are embedded.

mod actions;
mod api;
mod builds;
mod live;
mod pages;
mod sessions;
mod svg;
pub mod view;
mod webhooks;

use std::time::Duration;

use argus_grid::owner::Handle;
use argus_store::Store;
use argus_store::artifacts::Artifacts;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};

const CSS: &str = include_str!("../static/argus.css");
const SCRIPT: &str = include_str!("../static/live.js");
const ICON: &str = include_str!("../static/favicon.svg");

/// What the dashboard's pages read: the store, the owner task (for the live
/// fleet), the runs' files.
#[derive(Clone)]
pub struct Dashboard {
    pub store: Store,
    pub handle: Handle,
    /// Screenshots and films, when kept.
    pub artifacts: Option<Artifacts>,
    /// When this coordinator started (epoch ms): the fleet's utilisation
    /// is measured over no more than it has seen.
    pub started_ms: i64,
    /// How long runs are kept (`--keep-days`); `None`: for ever.
    pub keep: Option<Duration>,
    /// Who is told what happened (shown without their secrets).
    pub webhooks: std::sync::Arc<[argus_history::notify::Webhook]>,
    /// What each device shows now.
    pub live: std::sync::Arc<argus_grid::live::LiveScreens>,
}

/// The dashboard's pages, its API and its static files.
pub fn router(state: Dashboard) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{id}", get(pages::run))
        .route("/runs/{a}/compare/{b}", get(pages::compare))
        .route("/cases/{case}", get(pages::case))
        .route("/flaky", get(pages::flaky))
        .route("/fleet", get(pages::fleet))
        .route("/fleet/{worker}/{slot}", get(live::device_page))
        .route("/sessions", get(sessions::sessions_page))
        .route("/sessions/{id}", get(sessions::session_page))
        .route("/webhooks", get(webhooks::webhooks_page))
        .route(
            "/static/argus.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response() }),
        )
        .route(
            "/static/live.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response() }),
        )
        .route(
            "/static/favicon.svg",
            get(|| async { ([(header::CONTENT_TYPE, "image/svg+xml")], ICON).into_response() }),
        )
        .route("/api/v1/runs", get(api::runs))
        .route("/api/v1/runs/{id}", get(api::run))
        .route("/api/v1/runs/{id}/run.json", get(api::run_json))
        .route("/api/v1/runs/{id}/cases.jsonl", get(api::cases_jsonl))
        .route("/api/v1/runs/{id}/junit.xml", get(api::junit))
        .route("/api/v1/runs/{id}/cases/{case}/diff", get(api::diff))
        .route("/api/v1/runs/{id}/cases/{case}/attempts/{attempt}/replay", get(api::replay))
        .route("/api/v1/runs/{a}/compare/{b}", get(api::compare))
        .route("/api/v1/runs/{id}/files/{*path}", get(api::file))
        .route("/runs/{id}/files/{*path}", get(api::file))
        .route("/api/v1/cases/{case}", get(api::case))
        .route("/api/v1/flaky", get(api::flaky))
        .route("/api/v1/fleet", get(api::fleet))
        .route("/api/v1/fleet/screens", get(live::screens))
        .route("/api/v1/fleet/{worker}/{slot}/screen", get(live::device_screen))
        .route("/api/v1/projects", get(api::projects))
        .route("/api/v1/mutes", get(api::mutes))
        .route("/api/v1/webhooks", get(webhooks::webhooks_api))
        .route("/api/v1/mutes/{project}/{case}", put(actions::mute).delete(actions::unmute))
        .route("/api/v1/runs/{id}/rerun-failed", post(actions::rerun_failed))
        .route("/api/v1/import/junit", post(actions::import_junit).layer(axum::extract::DefaultBodyLimit::disable()))
        .route("/api/v1/builds", get(builds::builds))
        .route("/api/v1/builds/{sha256}", get(builds::build))
        .route("/api/v1/sessions", get(sessions::sessions_api))
        .route("/api/v1/sessions/{id}", get(sessions::session_api))
        .with_state(state)
}
