//! The live view: the screen each device shows now, drawn in the browser
//! from its latest snapshot (`live.js`), on the fleet page and one device
//! large with its recent trace. Reading the screens is what tells the
//! workers someone watches (see `argus_grid::live`).

use askama::Template;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use super::api::ApiError;
use super::pages::{error_page, render};
use crate::Dashboard;
use argus_grid::live::ScreenView;

/// Trace lines each device carries on the fleet page; its own page has all.
const FLEET_TRACE: usize = 5;

#[derive(Serialize)]
pub struct Screens {
    pub devices: Vec<ScreenView>,
}

/// `GET /api/v1/fleet/screens`: every device's latest screen.
pub async fn screens(State(state): State<Dashboard>) -> Json<Screens> {
    state.live.watched();
    let devices = state.live.all().iter().map(|(id, live)| ScreenView::of(id, live, FLEET_TRACE)).collect();
    Json(Screens { devices })
}

/// One device's latest screen and recent trace; an empty screen when its
/// worker sent none yet (the page waits for it).
async fn device_view(state: &Dashboard, worker: &str, slot: &str) -> Result<ScreenView, ApiError> {
    state.live.watched();
    let id = format!("{worker}/{slot}");
    if let Some(live) = state.live.device(&id) {
        return Ok(ScreenView::of(&id, &live, argus_grid::live::TRACE_LINES));
    }
    let fleet = state
        .handle
        .fleet()
        .await
        .map_err(|_| ApiError(StatusCode::SERVICE_UNAVAILABLE, "the coordinator is shutting down".into()))?;
    if !fleet.devices.iter().any(|d| d.id == id) {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no device {id} in the fleet")));
    }
    Ok(ScreenView::of(&id, &Default::default(), 0))
}

/// `GET /api/v1/fleet/{worker}/{slot}/screen`.
pub async fn device_screen(
    State(state): State<Dashboard>,
    Path((worker, slot)): Path<(String, String)>,
) -> Result<Json<ScreenView>, ApiError> {
    Ok(Json(device_view(&state, &worker, &slot).await?))
}

#[derive(Template)]
#[template(path = "device.html")]
struct DeviceTemplate {
    id: String,
    worker: String,
    slot: String,
}

/// `/fleet/{worker}/{slot}`: one device, large, with its trace.
pub async fn device_page(State(state): State<Dashboard>, Path((worker, slot)): Path<(String, String)>) -> Response {
    match device_view(&state, &worker, &slot).await {
        Ok(view) => render(DeviceTemplate { id: view.device, worker, slot }),
        Err(error) => error_page(error),
    }
}
