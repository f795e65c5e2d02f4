//! The worker's Prometheus metrics, served at `/metrics` on `--metrics`
//! (OpenMetrics text): its slots and whether their apps are connected,
//! attempts by result, driver calls by method and hook runs by hook, with
//! their durations, and `argus_build_info`. One registry per process, as
//! Prometheus clients keep: what records a value does not have to be handed
//! it.

use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// The content type of what `/metrics` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlotLabels {
    slot: String,
    platform: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    component: String,
}

pub struct WorkerMetrics {
    registry: Registry,
    slots: Family<SlotLabels, Gauge>,
    attempts: Family<NameLabel, Counter>,
    calls: Family<NameLabel, Histogram>,
    hooks: Family<NameLabel, Histogram>,
    live_reads: Counter,
}

static METRICS: LazyLock<WorkerMetrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("argus");
    let build = Family::<BuildLabels, Gauge>::default();
    registry.register("build_info", "The running build: always 1, labelled with its version", build.clone());
    build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").into(), component: "worker".into() }).set(1);
    let slots = Family::<SlotLabels, Gauge>::default();
    registry.register(
        "worker_slot",
        "The worker's device slots, 1 in the state their app is in (waiting, idle, busy, disconnected)",
        slots.clone(),
    );
    let attempts = Family::<NameLabel, Counter>::default();
    registry.register("worker_attempts", "Attempts this worker ran, by result", attempts.clone());
    let calls =
        Family::<NameLabel, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.0005, 2.0, 16)));
    registry.register("worker_driver_call_duration_seconds", "Calls to the apps, by method", calls.clone());
    let hooks =
        Family::<NameLabel, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.01, 2.0, 14)));
    registry.register("worker_hook_duration_seconds", "Slot hooks, by hook", hooks.clone());
    let live_reads = Counter::default();
    registry.register(
        "worker_live_reads",
        "Screens read for the live view alone (an attempt's own reads are shown at no call)",
        live_reads.clone(),
    );
    WorkerMetrics { registry, slots, attempts, calls, hooks, live_reads }
});

/// A slot's app is now in `state` (the others of its states drop to 0).
pub fn slot(slot: &str, platform: &str, state: &str) {
    for other in ["waiting", "idle", "busy", "disconnected"] {
        let labels = SlotLabels { slot: slot.into(), platform: platform.into(), state: other.into() };
        METRICS.slots.get_or_create(&labels).set(i64::from(other == state));
    }
}

pub fn attempt(result: &str) {
    METRICS.attempts.get_or_create(&NameLabel { name: result.into() }).inc();
}

pub fn call(method: &str, took: Duration) {
    METRICS.calls.get_or_create(&NameLabel { name: method.into() }).observe(took.as_secs_f64());
}

pub fn hook(which: &str, took: Duration) {
    METRICS.hooks.get_or_create(&NameLabel { name: which.into() }).observe(took.as_secs_f64());
}

pub fn live_read() {
    METRICS.live_reads.inc();
}

pub fn render() -> String {
    let mut text = String::new();
    encode(&mut text, &METRICS.registry).expect("writing to a String cannot fail");
    text
}

/// The metrics port cannot be listened on (in use, not this host's).
#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: {error}")]
pub struct MetricsPortError {
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

/// Serves `/metrics` (and `/healthz`) on `addr` until `cancel`.
pub async fn serve(addr: SocketAddr, cancel: CancellationToken) -> Result<(), MetricsPortError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| MetricsPortError { addr, error })?;
    let router = Router::new()
        .route("/metrics", get(|| async { ([(header::CONTENT_TYPE, CONTENT_TYPE)], render()).into_response() }))
        .route("/healthz", get(|| async { "ok\n" }));
    let serving = async move {
        let _ = axum::serve(listener, router).with_graceful_shutdown(cancel.cancelled_owned()).await;
    };
    // Ends with the worker (`cancel`).
    argus_proto::task::spawn(
        "metrics",
        tracing::Instrument::instrument(serving, tracing::info_span!("metrics", %addr)),
    );
    Ok(())
}
