//! `argus standalone`, and the local grid `argus run --ports` starts: a
//! coordinator and a worker in this process, stopped together.

use super::*;

#[derive(clap::Args)]
pub struct StandaloneArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    artifacts: ArtifactArgs,
    /// The gRPC address clients (argus run, devices, runs) connect to.
    #[arg(long, env = "ARGUS_LISTEN", default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// The HTTP address: the dashboard, WebDriver, /metrics, /healthz.
    #[arg(long, env = "ARGUS_HTTP_LISTEN", default_value = DEFAULT_HTTP)]
    http: SocketAddr,
    #[command(flatten)]
    slots: SlotArgs,
}

/// A coordinator and a worker in this process, as tasks of `tasks` that end
/// on `cancel`; the coordinator's URL.
pub async fn start_local(
    database_url: &str,
    artifacts: &std::path::Path,
    listen: SocketAddr,
    http: Option<SocketAddr>,
    slots: &SlotArgs,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
) -> Result<String, String> {
    let app_token = slots.app_token()?;
    let store = Store::open(database_url).await.map_err(|e| e.to_string())?;
    let artifacts = open_artifacts(artifacts)?;
    let listener = bind(listen).await?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let http = match http {
        Some(addr) => Some(bind(addr).await.map_err(|e| format!("--http: {e}"))?),
        None => None,
    };
    let options = argus_coordinator::Options { artifacts: Some(artifacts), http, ..Default::default() };
    let coordinator = argus_coordinator::serve_with(listener, store, options, cancel.clone());
    tasks.spawn(tracing::Instrument::instrument(
        async move {
            if let Err(error) = coordinator.await {
                tracing::error!(%error, "the local coordinator stopped");
            }
        },
        tracing::info_span!("local coordinator"),
    ));
    let config = WorkerConfig {
        coordinator: url.clone(),
        name: "local".into(),
        host: slots.driver_host.clone(),
        app_token,
        token: None,
        tls_ca: None,
        slots: slots.slots(),
    };
    // Bind the drivers now, so that a port in use is reported here.
    let worker_cancel = cancel.clone();
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    tasks.spawn(tracing::Instrument::instrument(
        async move {
            let result = link::run(config, worker_cancel).await;
            let _ = ready_tx.send(result.map_err(|e| e.to_string()));
        },
        tracing::info_span!("local worker"),
    ));
    match tokio::time::timeout(Duration::from_millis(300), ready).await {
        Ok(Ok(Err(error))) => Err(error),
        _ => Ok(url),
    }
}

/// Waits for a local grid's tasks once it was told to stop: the worker
/// hands back what it ran and the coordinator commits what it holds.
pub async fn stop_local(tasks: TaskTracker) {
    tasks.close();
    if tokio::time::timeout(LOCAL_STOP, tasks.wait()).await.is_err() {
        tracing::warn!(seconds = LOCAL_STOP.as_secs(), "the local grid's tasks did not end in time");
    }
}

/// The longest a local grid takes to stop: a worker's attempts get 30 s.
const LOCAL_STOP: Duration = Duration::from_secs(40);

pub async fn standalone(args: StandaloneArgs) -> ExitCode {
    let cancel = stop_on_signal();
    if args.slots.ports.is_none() {
        return failed("standalone", "give the devices' driver ports: --ports 8123-8126");
    }
    let database_url = match args.store.url() {
        Ok(url) => url,
        Err(error) => return failed("standalone", error),
    };
    log_slots(&args.slots.slots());
    let http = args.http;
    let tasks = TaskTracker::new();
    match start_local(&database_url, &args.artifacts.artifacts, args.listen, Some(http), &args.slots, &cancel, &tasks)
        .await
    {
        Ok(url) => tracing::info!(
            grpc = %url,
            dashboard = %format!("http://{http}/"),
            metrics = %format!("http://{http}/metrics"),
            "argus standalone serving; Ctrl-C stops it"
        ),
        Err(error) => return failed("standalone", error),
    }
    cancel.cancelled().await;
    stop_local(tasks).await;
    ExitCode::SUCCESS
}
