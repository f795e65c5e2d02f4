//! The gRPC face of the coordinator: Workers (one stream per worker), Runs
//! (clients) and Fleet (operators), plus standard health and reflection so
//! that `grpcurl` works. Each handler forwards to the owner task.

use std::net::SocketAddr;
use std::sync::Arc;

use argus_proto::auth::RequireToken;
use argus_proto::grpc::{
    self, fleet_server::FleetServer, runs_server::RunsServer, worker_message, workers_server::WorkersServer,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use tracing::{info, warn};

use argus_grid::metrics::Metrics;
use argus_grid::owner::{self, Handle};
use argus_grid::relay::ProjectRelay;
use argus_store::Store;

#[derive(Clone)]
struct Services {
    handle: Handle,
    store: Store,
    /// Fixture and exec calls between workers and the runs' clients.
    relay: Arc<ProjectRelay>,
    /// The workers' inbound streams, drained on shutdown.
    tasks: tokio_util::task::TaskTracker,
    /// Where the runs' screenshots and films are kept; none when unset.
    artifacts: Option<argus_store::artifacts::Artifacts>,
    /// WebDriver sessions, whose calls' answers come up the workers' links.
    /// Calls in flight to devices' apps, which their workers answer here.
    calls: Arc<argus_grid::calls::DeviceCalls>,
    /// The dashboard's public address, for the links answers carry.
    dashboard_url: Option<String>,
    /// What each device shows now, and whether anyone watches.
    live: Arc<argus_grid::live::LiveScreens>,
}

#[tonic::async_trait]
impl grpc::workers_server::Workers for Services {
    type LinkStream = ReceiverStream<Result<grpc::CoordinatorMessage, Status>>;

    async fn link(
        &self,
        request: Request<Streaming<grpc::WorkerMessage>>,
    ) -> Result<Response<Self::LinkStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the worker's stream ended before Register"))?;
        let Some(worker_message::Kind::Register(register)) = first.kind else {
            return Err(Status::invalid_argument("the first message on a worker's stream must be Register"));
        };
        let (tx, rx) = mpsc::channel(256);
        // Kept for the relay's answers until the worker says it is going:
        // then the stream to it must end once the owner lets go of it, and
        // not wait for the worker's side to close first.
        let mut to_worker = Some(tx.clone());
        let watch_to = tx.clone();
        let link = self.handle.worker_joined(register, tx).await?;
        let (handle, relay, calls, live) =
            (self.handle.clone(), self.relay.clone(), self.calls.clone(), self.live.clone());
        // Ends when the worker says it is going or its stream ends, so that
        // it holds the stream to the worker no longer than the link does.
        let link_done = CancellationToken::new();
        tell_watching(watch_to, live.subscribe(), link_done.clone(), &self.tasks);
        let mut files = crate::assembler::Assembler::new(self.artifacts.clone());
        let span = tracing::info_span!("worker link", worker = %link.worker, conn = link.conn);
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                let _link_done = link_done.clone().drop_guard();
                while let Ok(Some(message)) = inbound.message().await {
                    // An attempt's files are kept before its result, which
                    // follows them on the link, reaches the owner task.
                    let message = match message.kind {
                        Some(worker_message::Kind::ProjectCall(call)) => {
                            if let Some(to_worker) = &to_worker {
                                relay.call(to_worker, call).await;
                            }
                            continue;
                        }
                        Some(worker_message::Kind::GoingAway(going)) => {
                            to_worker = None;
                            link_done.cancel();
                            grpc::WorkerMessage { kind: Some(worker_message::Kind::GoingAway(going)) }
                        }
                        Some(worker_message::Kind::Artifact(piece)) => {
                            files.piece(piece).await;
                            continue;
                        }
                        Some(worker_message::Kind::DeviceAnswer(answer)) => {
                            calls.answered(answer);
                            continue;
                        }
                        Some(worker_message::Kind::Live(screen)) => {
                            live.arrived(&link.worker, screen);
                            continue;
                        }
                        Some(worker_message::Kind::Attempt(mut result)) => {
                            files.settle(&mut result);
                            grpc::WorkerMessage { kind: Some(worker_message::Kind::Attempt(result)) }
                        }
                        kind => grpc::WorkerMessage { kind },
                    };
                    if handle.worker_message(link.clone(), message).await.is_err() {
                        return;
                    }
                }
                live.worker_gone(&link.worker);
                handle.worker_gone(link).await;
            },
            span,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Tells a worker whether anyone watches the live view, each time it
/// changes, until its link is done.
fn tell_watching(
    to_worker: mpsc::Sender<Result<grpc::CoordinatorMessage, Status>>,
    mut watching: tokio::sync::watch::Receiver<bool>,
    link_done: CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    let telling = async move {
        let mut told = false;
        loop {
            let now = *watching.borrow_and_update();
            if now != told {
                let watch = grpc::Watch { watching: now };
                let message = grpc::CoordinatorMessage { kind: Some(grpc::coordinator_message::Kind::Watch(watch)) };
                if to_worker.send(Ok(message)).await.is_err() {
                    return;
                }
                told = now;
            }
            tokio::select! {
                _ = link_done.cancelled() => return,
                _ = to_worker.closed() => return,
                changed = watching.changed() => if changed.is_err() { return },
            }
        }
    };
    tasks.spawn(tracing::Instrument::instrument(telling, tracing::info_span!("tell watching")));
}

#[tonic::async_trait]
impl grpc::runs_server::Runs for Services {
    type WatchStream = argus_grid::watch::WatchStream;
    type ProjectStream = ReceiverStream<Result<grpc::ProjectCall, Status>>;
    type ArtifactStream = tokio_stream::Iter<std::vec::IntoIter<Result<grpc::ArtifactPiece, Status>>>;

    async fn artifact(
        &self,
        request: Request<grpc::ArtifactRequest>,
    ) -> Result<Response<Self::ArtifactStream>, Status> {
        let grpc::ArtifactRequest { run_id, path } = request.into_inner();
        let Some(artifacts) = &self.artifacts else {
            return Err(Status::failed_precondition("this coordinator keeps no screenshots or films (--artifacts)"));
        };
        let bytes = match artifacts.get(&run_id, &path).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(Status::not_found(format!("run {run_id} has no file {path}"))),
            Err(argus_store::artifacts::ArtifactError::BadPath(problem)) => {
                return Err(Status::invalid_argument(problem));
            }
            Err(error) => return Err(Status::unavailable(error.to_string())),
        };
        // Pieces well under gRPC's 4 MiB message limit; an empty file is one empty piece.
        const PIECE: usize = 1024 * 1024;
        let pieces: Vec<_> = if bytes.is_empty() {
            vec![Ok(grpc::ArtifactPiece { data: Vec::new() })]
        } else {
            bytes.chunks(PIECE).map(|data| Ok(grpc::ArtifactPiece { data: data.to_vec() })).collect()
        };
        Ok(Response::new(tokio_stream::iter(pieces)))
    }

    async fn project(
        &self,
        request: Request<Streaming<grpc::ProjectServe>>,
    ) -> Result<Response<Self::ProjectStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound.message().await?.and_then(|m| m.kind);
        let Some(grpc::project_serve::Kind::AttachRunId(run_id)) = first else {
            return Err(Status::invalid_argument("the first message on a Project stream must name the run it serves"));
        };
        self.store.get_run(&run_id).await?;
        let (tx, rx) = mpsc::channel(64);
        let attachment = self.relay.attach(&run_id, tx).await;
        let relay = self.relay.clone();
        let span = tracing::info_span!("project stream", run = %run_id);
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                info!("the run's client serves its fixtures");
                while let Ok(Some(message)) = inbound.message().await {
                    if let Some(grpc::project_serve::Kind::Answer(answer)) = message.kind {
                        relay.answered(answer).await;
                    }
                }
                info!("the run's client stopped serving its fixtures");
                relay.detach(&run_id, attachment).await;
            },
            span,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn submit(&self, request: Request<grpc::SubmitRequest>) -> Result<Response<grpc::SubmitResponse>, Status> {
        let traceparent = argus_proto::trace::extract(request.metadata());
        let response = self
            .handle
            .submit(
                &self.store,
                argus_history::rerun::submission(&self.store, request.into_inner()).await?,
                traceparent,
            )
            .await?;
        Ok(Response::new(response))
    }

    async fn watch(&self, request: Request<grpc::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let grpc::WatchRequest { run_id, after_seq } = request.into_inner();
        let asked = run_id.clone();
        match self.handle.watch(run_id, after_seq).await {
            Ok(stream) => Ok(Response::new(stream)),
            // Not going: a run that finished (perhaps before a restart) is
            // replayed from the store, so a client that lost its stream at
            // the very end still gets the end.
            Err(owner::CoreError::NoRun(_)) => Ok(Response::new(self.replay_finished(&asked, after_seq).await?)),
            Err(error) => Err(error.into()),
        }
    }

    async fn cancel(&self, request: Request<grpc::CancelRequest>) -> Result<Response<grpc::CancelResponse>, Status> {
        let run_id = request.into_inner().run_id;
        self.handle.cancel(run_id).await?;
        Ok(Response::new(grpc::CancelResponse {}))
    }

    async fn explain(&self, request: Request<grpc::ExplainRequest>) -> Result<Response<grpc::ExplainResponse>, Status> {
        let run_id = request.into_inner().run_id;
        self.store.get_run(&run_id).await?;
        let (explained, groups) = argus_history::explain::explain_run(&self.store, &run_id).await?;
        let owners: std::collections::HashMap<String, String> =
            self.store.run_cases(&run_id).await?.into_iter().filter_map(|c| Some((c.case_id, c.owner?))).collect();
        Ok(Response::new(grpc::ExplainResponse {
            groups: groups
                .into_iter()
                .map(|g| grpc::FailureGroup {
                    owners: argus_cases::owners::of_cases(&g.cases, &owners),
                    cause: g.cause.to_owned(),
                    signature: g.signature,
                    case_ids: g.cases,
                })
                .collect(),
            cases: explained
                .into_iter()
                .map(|e| grpc::CaseExplained {
                    owner: owners.get(&e.case_id).cloned().unwrap_or_default(),
                    case_id: e.case_id,
                    attempt: e.attempt,
                    cause: e.cause.kind.to_owned(),
                    line: e.line,
                    signature: e.signature,
                })
                .collect(),
        }))
    }

    async fn compare(&self, request: Request<grpc::CompareRequest>) -> Result<Response<grpc::CompareResponse>, Status> {
        let request = request.into_inner();
        let changes =
            argus_history::compare::compare_runs(&self.store, &request.from_run_id, &request.to_run_id).await?;
        Ok(Response::new(grpc::CompareResponse {
            changes: changes
                .into_iter()
                .map(|c| grpc::CaseChange {
                    kind: c.kind.to_owned(),
                    case_id: c.case_id,
                    platform: c.platform,
                    from_result: c.from_result.unwrap_or_default(),
                    to_result: c.to_result.unwrap_or_default(),
                    from_cause: c.from_cause.unwrap_or_default(),
                    to_cause: c.to_cause.unwrap_or_default(),
                    cause_changed: c.cause_changed,
                    from_ms: c.from_ms,
                    to_ms: c.to_ms,
                    spread_ms: c.spread_ms,
                })
                .collect(),
        }))
    }

    async fn mute(&self, request: Request<grpc::MuteRequest>) -> Result<Response<grpc::MuteResponse>, Status> {
        let mute = argus_history::mutes::mute(&self.store, request.into_inner(), argus_grid::time::now_ms()).await?;
        Ok(Response::new(grpc::MuteResponse { mute: Some(mute.into()) }))
    }

    async fn unmute(&self, request: Request<grpc::UnmuteRequest>) -> Result<Response<grpc::UnmuteResponse>, Status> {
        let was_muted =
            argus_history::mutes::unmute(&self.store, request.into_inner(), argus_grid::time::now_ms()).await?;
        Ok(Response::new(grpc::UnmuteResponse { was_muted }))
    }

    async fn mutes(&self, request: Request<grpc::MutesRequest>) -> Result<Response<grpc::MutesResponse>, Status> {
        let project = request.into_inner().project;
        let mutes = self.store.mutes(Some(&project).filter(|p| !p.is_empty()).map(String::as_str)).await?;
        Ok(Response::new(grpc::MutesResponse { mutes: mutes.into_iter().map(Into::into).collect() }))
    }

    async fn import(&self, request: Request<grpc::ImportRequest>) -> Result<Response<grpc::ImportResponse>, Status> {
        let request = request.into_inner();
        let ask = argus_history::import::ImportAsk {
            project: request.project,
            branch: request.branch,
            commit: request.commit,
            platform: request.platform,
            source: request.source,
            report: request.junit_xml,
        };
        let imported = argus_history::import::import_junit(&self.store, ask, argus_grid::time::now_ms()).await?;
        let dashboard_url =
            self.dashboard_url.as_ref().map(|u| format!("{u}/runs/{}", imported.run_id)).unwrap_or_default();
        Ok(Response::new(grpc::ImportResponse {
            run_id: imported.run_id,
            source: imported.source,
            cases: imported.cases,
            passed: imported.passed,
            failed: imported.failed,
            skipped: imported.skipped,
            dashboard_url,
        }))
    }

    async fn get(&self, request: Request<grpc::GetRequest>) -> Result<Response<grpc::RunSummary>, Status> {
        let run = self.store.get_run(&request.into_inner().run_id).await?;
        Ok(Response::new(summary(run)))
    }

    async fn list(&self, request: Request<grpc::ListRequest>) -> Result<Response<grpc::ListResponse>, Status> {
        let limit = match request.into_inner().limit {
            0 => 20,
            n => n.min(500),
        };
        let runs = self.store.list_runs(limit).await?;
        Ok(Response::new(grpc::ListResponse { runs: runs.into_iter().map(summary).collect() }))
    }
}

impl Services {
    /// A finished run's record after `after_seq`, and its end.
    async fn replay_finished(&self, run_id: &str, after_seq: u64) -> Result<argus_grid::watch::WatchStream, Status> {
        let run = self.store.get_run(run_id).await?;
        if run.finished_at.is_none() {
            return Err(Status::unavailable(format!("run {run_id} is being taken up again; watch again shortly")));
        }
        let rows = self.store.run_log(run_id).await?;
        let log = argus_grid::watch::from_log(&rows);
        let end = argus_grid::watch::run_finished(log.last().map_or(1, |u| u.seq + 1), run.manifest_json);
        let (mut watcher, stream) = argus_grid::watch::Watcher::new(log.len() + 1);
        for update in log.iter().filter(|u| u.seq > after_seq) {
            watcher.send(update);
        }
        watcher.send(&end);
        Ok(stream)
    }
}

fn summary(run: argus_store::RunRow) -> grpc::RunSummary {
    grpc::RunSummary {
        run_id: run.id,
        manifest_json: run.manifest_json,
        project: run.project,
        branch: run.branch.unwrap_or_default(),
        commit: run.commit_sha.unwrap_or_default(),
        result: run.result.unwrap_or_default(),
        waiting_reason: run.waiting_reason.unwrap_or_default(),
        muted_failed: run.muted_failed.unwrap_or(0).max(0) as u64,
        rerun_of: run.rerun_of.unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl grpc::fleet_server::Fleet for Services {
    async fn list(
        &self,
        _request: Request<grpc::ListFleetRequest>,
    ) -> Result<Response<grpc::ListFleetResponse>, Status> {
        Ok(Response::new(self.handle.fleet().await?))
    }

    async fn drain(&self, request: Request<grpc::DrainRequest>) -> Result<Response<grpc::DrainResponse>, Status> {
        let worker = request.into_inner().worker_id;
        self.handle.drain(worker, true).await?;
        Ok(Response::new(grpc::DrainResponse {}))
    }

    async fn resume(&self, request: Request<grpc::ResumeRequest>) -> Result<Response<grpc::ResumeResponse>, Status> {
        let worker = request.into_inner().worker_id;
        self.handle.drain(worker, false).await?;
        Ok(Response::new(grpc::ResumeResponse {}))
    }

    async fn quarantine(
        &self,
        request: Request<grpc::QuarantineRequest>,
    ) -> Result<Response<grpc::QuarantineResponse>, Status> {
        let request = request.into_inner();
        let reason = if request.reason.is_empty() { "quarantined by an operator".to_owned() } else { request.reason };
        let device = request.device_id;
        self.handle.quarantine(device, Some(reason)).await?;
        Ok(Response::new(grpc::QuarantineResponse {}))
    }

    async fn release(&self, request: Request<grpc::ReleaseRequest>) -> Result<Response<grpc::ReleaseResponse>, Status> {
        let device = request.into_inner().device_id;
        self.handle.quarantine(device, None).await?;
        Ok(Response::new(grpc::ReleaseResponse {}))
    }
}

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

/// How soon after a run ends its failures' causes are written (for the
/// flaky page's ranking across runs), and how many at a time.
const CAUSES_EVERY: std::time::Duration = std::time::Duration::from_secs(3);
const CAUSES_PER_BATCH: i64 = 100;

/// Writes the causes of ended runs' failures in a task of its own, never in
/// the owner loop; what fails is tried again at the next tick.
fn write_causes(store: Store, shutdown: CancellationToken, tasks: &tokio_util::task::TaskTracker) {
    let span = tracing::info_span!("causes");
    argus_proto::task::periodically(span, CAUSES_EVERY, CAUSES_EVERY, shutdown, tasks, move || {
        let store = store.clone();
        async move {
            loop {
                match argus_history::explain::write_causes(&store, CAUSES_PER_BATCH).await {
                    Ok(written) if written as i64 == CAUSES_PER_BATCH => continue,
                    Ok(_) => return,
                    Err(error) => {
                        tracing::warn!(%error, "writing the causes of failures failed; trying again shortly");
                        return;
                    }
                }
            }
        }
    });
}

/// How often ended runs are followed up, and how many at a time.
const FOLLOW_UP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
const FOLLOW_UP_PER_BATCH: u32 = 50;

/// Follows up each ended run (see `argus_history::follow_up`) in a tracked task.
fn follow_up_runs(
    store: Store,
    policy: argus_history::follow_up::FollowUp,
    shutdown: CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    let span = tracing::info_span!("follow up runs");
    argus_proto::task::periodically(span, FOLLOW_UP_EVERY, FOLLOW_UP_EVERY, shutdown, tasks, move || {
        let (store, policy) = (store.clone(), policy.clone());
        async move {
            loop {
                match argus_history::follow_up::follow_up(&store, &policy, FOLLOW_UP_PER_BATCH).await {
                    Ok(done) if done as u32 == FOLLOW_UP_PER_BATCH => continue,
                    Ok(_) => return,
                    Err(error) => {
                        tracing::warn!(%error, "following up ended runs failed; trying again shortly");
                        return;
                    }
                }
            }
        }
    });
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
    if let Some(keep) = keep {
        info!(keep_days = keep.as_secs() / 86_400, "runs older than the window are removed every hour");
        argus_store::prune::keep(
            store.clone(),
            artifacts.clone(),
            keep,
            argus_store::prune::EVERY,
            shutdown.clone(),
            &tasks,
        );
    }
    let step_records =
        step_records.unwrap_or(std::time::Duration::from_secs(argus_store::prune::STEP_RECORDS_DAYS * 86_400));
    argus_store::prune::keep_step_records(
        store.clone(),
        step_records,
        argus_store::prune::EVERY,
        shutdown.clone(),
        &tasks,
    );
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
        info!(addr = ?http.local_addr().ok(), "coordinator HTTP listening");
        let guard = crate::http::Guard {
            read_token: tokens.read.clone(),
            client_token: tokens.client.as_deref().map(Arc::from),
        };
        let observed = crate::http::Observed { handle: handle.clone(), metrics: metrics.clone() };
        let dashboard = argus_dashboard::Dashboard {
            store: store.clone(),
            handle: handle.clone(),
            artifacts: artifacts.clone(),
            started_ms: argus_grid::time::now_ms(),
            keep,
            webhooks,
            live: live.clone(),
        };
        let facade = argus_webdriver::Facade { handle: handle.clone(), sessions: webdriver.clone(), metrics };
        let push = crate::push::PushState {
            store: store.clone(),
            artifacts: artifacts.clone(),
            push_token: guard.client_token.clone(),
            pushes: Arc::default(),
        };
        let router = crate::http::router(guard, observed, dashboard, facade, push);
        tasks.spawn(tracing::Instrument::instrument(
            crate::http::serve(http, router, shutdown.clone(), tasks.clone()),
            tracing::info_span!("http"),
        ));
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
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<WorkersServer<Services>>().await;
    health.set_serving::<RunsServer<Services>>().await;
    // Stopping: health says so at once (a load balancer or a standby stops
    // sending work here) while what is in flight is committed.
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
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(grpc::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let worker_check = RequireToken::new(tokens.worker, "worker", "the worker's --token or ARGUS_WORKER_TOKEN");
    let client_check = RequireToken::new(tokens.client, "client", "the client's --token or ARGUS_CLIENT_TOKEN");
    info!(?addr, "coordinator listening");
    // HTTP/2 pings find a half-open connection (a vanished client or
    // worker) that TCP alone would keep for hours.
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(argus_proto::connect::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(argus_proto::connect::KEEPALIVE_TIMEOUT))
        .tcp_keepalive(Some(std::time::Duration::from_secs(30)));
    if let Some(identity) = &tls {
        let identity = tonic::transport::Identity::from_pem(&identity.cert_pem, &identity.key_pem);
        builder = builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    let incoming = crate::incoming::checked(listener, tls.is_some(), shutdown.clone());
    let server = builder
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
        .add_service(FleetServer::with_interceptor(services, client_check))
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
