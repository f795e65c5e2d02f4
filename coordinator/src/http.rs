//! The coordinator's HTTP port, beside gRPC: the dashboard and its API,
//! `/metrics` for Prometheus and `/healthz` for load balancers.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::oneshot;

use crate::core::{Command, Handle};
use crate::metrics::Metrics;
use crate::store::Store;

#[derive(Clone)]
pub struct HttpState {
    pub handle: Handle,
    pub metrics: Arc<Metrics>,
    pub store: Store,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .merge(crate::dashboard::routes())
        .with_state(state)
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let (reply, snapshot) = oneshot::channel();
    if state.handle.send(Command::Snapshot { reply }).await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the coordinator is shutting down\n".to_owned()).into_response();
    }
    let Ok(snapshot) = snapshot.await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the coordinator is shutting down\n".to_owned()).into_response();
    };
    let body = state.metrics.render(&snapshot);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}
