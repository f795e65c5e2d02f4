//! `/api/v1/builds` and `/api/v1/builds/SHA`: the runs' app builds the
//! coordinator holds, as `argus builds list` shows them.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;

use crate::Dashboard;
use crate::api::ApiError;
use crate::view::iso;

/// A build as the API says it.
#[derive(Debug, Serialize)]
pub struct BuildView {
    pub sha256: String,
    pub platform: String,
    pub bundle_id: String,
    pub version: String,
    pub build_number: String,
    pub min_os: Option<String>,
    pub launch: Option<String>,
    pub abis: Vec<String>,
    pub size: i64,
    pub file_name: String,
    pub uploaded_at: String,
    pub last_used_at: String,
}

impl From<argus_store::BuildRow> for BuildView {
    fn from(row: argus_store::BuildRow) -> Self {
        BuildView {
            abis: row.abis.split(',').filter(|a| !a.is_empty()).map(str::to_owned).collect(),
            uploaded_at: iso(row.uploaded_at),
            last_used_at: iso(row.last_used_at),
            sha256: row.sha256,
            platform: row.platform,
            bundle_id: row.bundle_id,
            version: row.version,
            build_number: row.build_number,
            min_os: row.min_os,
            launch: row.launch,
            size: row.size,
            file_name: row.file_name,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Builds {
    pub builds: Vec<BuildView>,
}

pub async fn builds(State(state): State<Dashboard>) -> Result<Json<Builds>, ApiError> {
    let builds = state.store.builds().await?.into_iter().map(BuildView::from).collect();
    Ok(Json(Builds { builds }))
}

pub async fn build(State(state): State<Dashboard>, Path(sha256): Path<String>) -> Result<Json<BuildView>, ApiError> {
    argus_builds::check_sha256(&sha256).map_err(|why| ApiError(StatusCode::BAD_REQUEST, why))?;
    match state.store.build(&sha256).await? {
        Some(row) => Ok(Json(row.into())),
        None => Err(ApiError(StatusCode::NOT_FOUND, format!("no build sha256:{sha256} on this coordinator"))),
    }
}
