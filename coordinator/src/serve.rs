//! The coordinator put together: the store, the owner task, the gRPC
//! services (`crate::grpc`) with health and reflection so that `grpcurl`
//! works, the periodic jobs (`crate::jobs`), webhooks, and the HTTP port.

use std::net::SocketAddr;
use std::sync::Arc;

use argus_proto::auth::RequireToken;
use argus_proto::grpc::{
    self, builds_server::BuildsServer, fleet_server::FleetServer, runs_server::RunsServer,
    workers_server::WorkersServer,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use argus_grid::metrics::Metrics;
use argus_grid::owner;
use argus_store::Store;

use crate::grpc::Services;
use crate::jobs::{follow_up_runs, keep_history, write_causes};

/// How long each stage of a shutdown may take.
pub const SHUTDOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Core(#[from] owner::CoreError),
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server stopped: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Who may talk to the coordinator: with a token set, requests of that role
/// must carry it (`authorization: Bearer …`).
#[derive(Clone, Default)]
pub struct Tokens {
    pub worker: Option<String>,
    pub client: Option<String>,
    /// The dashboard, its API and `/metrics` (not `/healthz`).
    pub read: Option<Arc<str>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("worker", &self.worker.as_ref().map(|_| "<set>"))
            .field("client", &self.client.as_ref().map(|_| "<set>"))
            .field("read", &self.read.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// How the coordinator serves, beyond its gRPC listener.
#[derive(Default)]
pub struct Options {
    pub tokens: Tokens,
    /// The HTTP port: metrics and health.
    pub http: Option<TcpListener>,
    /// Serve gRPC over TLS with this certificate chain and key (PEM).
    pub tls: Option<TlsIdentity>,
    /// How the owner task decides (the client grace, …).
    pub core: owner::OwnerConfig,
    /// Where screenshots and films are kept; without it they are dropped.
    pub artifacts: Option<argus_store::artifacts::Artifacts>,
    /// Remove whole runs older than this, every hour (`--keep-days`);
    /// without it everything is kept.
    pub keep: Option<std::time::Duration>,
    /// Keep passing attempts' step records this long, pruned every hour;
    /// [`argus_store::prune::STEP_RECORDS_DAYS`] when `None`.
    pub step_records: Option<std::time::Duration>,
    /// What follows each run's end: when muted cases unmute themselves.
    pub follow_up: argus_history::follow_up::FollowUp,
    /// Who is told what happened.
    pub webhooks: Vec<argus_history::notify::Webhook>,
    /// How long a webhook delivery is retried; an hour when `None`.
    pub webhook_retry_for: Option<std::time::Duration>,
    /// Where the runs' app builds are kept; without it, builds are refused.
    pub builds: Option<crate::builds::BuildFiles>,
}

/// A certificate chain and its private key, PEM.
#[derive(Clone)]
pub struct TlsIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl TlsIdentity {
    /// Reads both files, naming the one that cannot be read.
    pub fn load(cert: &std::path::Path, key: &std::path::Path) -> Result<Self, TlsFileError> {
        let read = |path: &std::path::Path, what: &'static str| {
            std::fs::read(path).map_err(|error| TlsFileError { what, path: path.to_owned(), error })
        };
        Ok(Self { cert_pem: read(cert, "certificate")?, key_pem: read(key, "key")? })
    }
}

/// A TLS certificate or key that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the TLS {what} {}: {error}", path.display())]
pub struct TlsFileError {
    pub what: &'static str,
    pub path: std::path::PathBuf,
    pub error: std::io::Error,
}

/// Serves the coordinator on `listener` until `shutdown`, open to all.
pub async fn serve(listener: TcpListener, store: Store, shutdown: CancellationToken) -> Result<(), ServeError> {
    serve_with(listener, store, Options::default(), shutdown).await
}

/// Serves the coordinator on `listener` until `shutdown`.
pub async fn serve_with(
    listener: TcpListener,
    store: Store,
    options: Options,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let Options {
        tokens,
        http,
        tls,
        core: mut core_config,
        artifacts,
        keep,
        step_records,
        follow_up,
        webhooks,
        webhook_retry_for,
        builds,
    } = options;
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    // Links to the dashboard: where it was said to be, else the HTTP
    // address when it names one host (not 0.0.0.0).
    if core_config.dashboard_url.is_none()
        && let Some(http_addr) = http.as_ref().and_then(|h| h.local_addr().ok())
        && !http_addr.ip().is_unspecified()
    {
        core_config.dashboard_url = Some(format!("http://{http_addr}"));
    }
    let metrics = Arc::new(Metrics::default());
    let tasks = tokio_util::task::TaskTracker::new();
    let ended = store
        .end_open_sessions(argus_grid::time::now_ms(), "the coordinator that held it stopped")
        .await
        .map_err(owner::CoreError::from)?;
    if ended > 0 {
        info!(sessions = ended, "WebDriver sessions of the last coordinator ended with it");
    }
    let session_log = argus_webdriver::log::SessionLog::start(store.clone(), shutdown.clone(), &tasks);
    let calls = Arc::new(argus_grid::calls::DeviceCalls::default());
    let live = Arc::new(argus_grid::live::LiveScreens::counted(&metrics));
    {
        let live = live.clone();
        let span = tracing::info_span!("live view");
        let every = std::time::Duration::from_secs(1);
        argus_proto::task::periodically(span, every, every, shutdown.clone(), &tasks, move || {
            live.expire();
            std::future::ready(())
        });
    }
    let webdriver = Arc::new(argus_webdriver::Registry::new(calls.clone(), session_log));
    let dashboard_url = core_config.dashboard_url.clone();
    let (handle, owner) = owner::start(store.clone(), core_config, metrics.clone(), shutdown.clone()).await?;
    keep_history(&store, &artifacts, keep, step_records, &shutdown, &tasks);
    write_causes(store.clone(), shutdown.clone(), &tasks);
    follow_up_runs(store.clone(), follow_up, shutdown.clone(), &tasks);
    let webhooks: Arc<[argus_history::notify::Webhook]> = webhooks.into();
    let told = crate::webhooks::Webhooks {
        hooks: webhooks.clone(),
        dashboard: dashboard_url.clone(),
        retry_for: webhook_retry_for.unwrap_or(std::time::Duration::from_secs(3_600)),
    };
    crate::webhooks::start(store.clone(), told, shutdown.clone(), &tasks);
    let told_dashboard = dashboard_url;
    if let Some(http) = http {
        let parts =
            HttpParts { tokens: &tokens, handle: &handle, metrics, store: &store, artifacts: &artifacts, live: &live };
        serve_http(http, parts, keep, webhooks, webdriver.clone(), &shutdown, &tasks);
    }
    let services = Services {
        handle,
        store,
        relay: Arc::default(),
        tasks: tasks.clone(),
        artifacts,
        calls,
        dashboard_url: told_dashboard,
        live,
        builds: builds.map(Arc::new),
    };
    let health_service = health(&shutdown, &tasks).await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(grpc::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let worker_check = RequireToken::new(tokens.worker, "worker", "the worker's --token or ARGUS_WORKER_TOKEN");
    let client_check = RequireToken::new(tokens.client, "client", "the client's --token or ARGUS_CLIENT_TOKEN");
    info!(?addr, "coordinator listening");
    let incoming = crate::incoming::checked(listener, tls.is_some(), shutdown.clone());
    let server = server_builder(tls.as_ref())?
        .add_service(health_service)
        // What the API looks like is for clients only.
        .add_service(tonic::service::interceptor::InterceptedService::new(reflection, client_check.clone()))
        .add_service(WorkersServer::with_interceptor(services.clone(), worker_check))
        // A JUnit report may be 16 MiB (Runs.Import).
        .add_service(tonic::service::interceptor::InterceptedService::new(
            RunsServer::new(services.clone())
                // A suite's case files, or a JUnit report, and the request's
                // other fields.
                .max_decoding_message_size(
                    argus_cases::suite::MAX_SUITE_BYTES.max(argus_history::import::MAX_REPORT_BYTES) + (1 << 20),
                ),
            client_check.clone(),
        ))
        .add_service(FleetServer::with_interceptor(services.clone(), client_check.clone()))
        .add_service(BuildsServer::with_interceptor(services, client_check))
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled());
    // The owner task commits what it holds and ends the streams; streams
    // that outlive it get a deadline.
    let result = tokio::select! {
        result = server => result,
        _ = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_DEADLINE).await;
        } => Ok(()),
    };
    if tokio::time::timeout(SHUTDOWN_DEADLINE, owner).await.is_err() {
        warn!(deadline_s = SHUTDOWN_DEADLINE.as_secs(), "the owner task did not stop in time");
    }
    tasks.close();
    if tokio::time::timeout(SHUTDOWN_DEADLINE, tasks.wait()).await.is_err() {
        warn!(tasks = tasks.len(), "tasks still running at exit");
    }
    Ok(result?)
}

/// The standard gRPC health service, serving until `shutdown`; then it says
/// so at once (a load balancer or a standby stops sending work here) while
/// what is in flight is committed.
async fn health(
    shutdown: &CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) -> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<WorkersServer<Services>>().await;
    health.set_serving::<RunsServer<Services>>().await;
    let stopping = shutdown.clone();
    tasks.spawn(tracing::Instrument::instrument(
        async move {
            stopping.cancelled().await;
            health.set_not_serving::<WorkersServer<Services>>().await;
            health.set_not_serving::<RunsServer<Services>>().await;
            health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
            info!("stopping: NOT_SERVING; committing what is in flight");
        },
        tracing::info_span!("health"),
    ));
    health_service
}

/// The gRPC server: HTTP/2 pings find a half-open connection (a vanished
/// client or worker) that TCP alone would keep for hours; TLS when given.
fn server_builder(tls: Option<&TlsIdentity>) -> Result<tonic::transport::Server, ServeError> {
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(argus_proto::connect::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(argus_proto::connect::KEEPALIVE_TIMEOUT))
        .tcp_keepalive(Some(std::time::Duration::from_secs(30)));
    if let Some(identity) = tls {
        let identity = tonic::transport::Identity::from_pem(&identity.cert_pem, &identity.key_pem);
        builder = builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    Ok(builder)
}

/// What the HTTP port serves from.
struct HttpParts<'a> {
    tokens: &'a Tokens,
    handle: &'a owner::Handle,
    metrics: Arc<Metrics>,
    store: &'a Store,
    artifacts: &'a Option<argus_store::artifacts::Artifacts>,
    live: &'a Arc<argus_grid::live::LiveScreens>,
}

/// The HTTP port: the dashboard and its API, the WebDriver facade, lynkeus'
/// report push and the metrics, behind one guard, in a tracked task.
fn serve_http(
    http: TcpListener,
    parts: HttpParts<'_>,
    keep: Option<std::time::Duration>,
    webhooks: Arc<[argus_history::notify::Webhook]>,
    webdriver: Arc<argus_webdriver::Registry>,
    shutdown: &CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    info!(addr = ?http.local_addr().ok(), "coordinator HTTP listening");
    let guard = crate::http::Guard {
        read_token: parts.tokens.read.clone(),
        client_token: parts.tokens.client.as_deref().map(Arc::from),
    };
    let observed = crate::http::Observed { handle: parts.handle.clone(), metrics: parts.metrics.clone() };
    let dashboard = argus_dashboard::Dashboard {
        store: parts.store.clone(),
        handle: parts.handle.clone(),
        artifacts: parts.artifacts.clone(),
        started_ms: argus_grid::time::now_ms(),
        keep,
        webhooks,
        live: parts.live.clone(),
    };
    let facade = argus_webdriver::Facade { handle: parts.handle.clone(), sessions: webdriver, metrics: parts.metrics };
    let push = crate::push::PushState {
        store: parts.store.clone(),
        artifacts: parts.artifacts.clone(),
        push_token: guard.client_token.clone(),
        pushes: Arc::default(),
    };
    let router = crate::http::router(guard, observed, dashboard, facade, push);
    tasks.spawn(tracing::Instrument::instrument(
        crate::http::serve(http, router, shutdown.clone(), tasks.clone()),
        tracing::info_span!("http"),
    ));
}
