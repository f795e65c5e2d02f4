//! `argus coordinator`: its flags, its settings once the layers are merged
//! (secrets read from their files), and serving until a signal.

use argus_coordinator::config::CoordinatorSettings;

use super::*;

/// `argus coordinator`: every setting is a flag, an `ARGUS_*` variable and
/// a key of `[coordinator]` in argus.toml (see [`crate::settings`]).
#[derive(clap::Args, serde::Serialize)]
pub struct CoordinatorArgs {
    /// The configuration file (default: argus.toml here, when there is one);
    /// the coordinator reads its [coordinator] table.
    #[arg(long, env = "ARGUS_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Print the settings in effect and where each came from (secrets
    /// hidden), then exit.
    #[arg(long)]
    #[serde(skip)]
    print_config: bool,
    /// postgres://… for a team, sqlite:FILE embedded [default: sqlite:argus.db].
    #[arg(long, env = "ARGUS_DATABASE_URL", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url: Option<String>,
    /// Where screenshots and films of runs are kept: a folder per run, made
    /// if it is not there [default: argus-artifacts].
    #[arg(long, env = "ARGUS_ARTIFACTS", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    artifacts: Option<PathBuf>,
    /// Where the runs' app builds are kept, each under its sha256, made if
    /// it is not there [default: argus-builds].
    #[arg(long, env = "ARGUS_BUILDS", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    builds: Option<PathBuf>,
    /// Workers must present this token.
    #[arg(long, env = "ARGUS_WORKER_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_token: Option<String>,
    /// Clients (argus run, devices, runs, WebDriver) must present this token.
    #[arg(long, env = "ARGUS_CLIENT_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    client_token: Option<String>,
    /// The dashboard, its JSON API and /metrics need this token (as a bearer
    /// token, or as the password a browser asks for); /healthz stays open.
    #[arg(long, env = "ARGUS_READ_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    read_token: Option<String>,
    /// The database URL read from a file (a secret's file: only its owner
    /// and group may read it), in place of --database-url.
    #[arg(long, env = "ARGUS_DATABASE_URL_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url_file: Option<PathBuf>,
    /// The worker token read from a file, in place of --worker-token.
    #[arg(long, env = "ARGUS_WORKER_TOKEN_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_token_file: Option<PathBuf>,
    /// The client token read from a file, in place of --client-token.
    #[arg(long, env = "ARGUS_CLIENT_TOKEN_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    client_token_file: Option<PathBuf>,
    /// The read token read from a file, in place of --read-token.
    #[arg(long, env = "ARGUS_READ_TOKEN_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    read_token_file: Option<PathBuf>,
    /// The gRPC address workers and clients connect to [default: 127.0.0.1:7171].
    #[arg(long, env = "ARGUS_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<SocketAddr>,
    /// The HTTP address: the dashboard, WebDriver, Prometheus metrics at
    /// /metrics, /healthz [default: 127.0.0.1:7172].
    #[arg(long, env = "ARGUS_HTTP_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    http: Option<SocketAddr>,
    /// The dashboard's address as people reach it, for the links `argus run`
    /// prints (default: http:// and the --http address, unless that is
    /// 0.0.0.0).
    #[arg(long, env = "ARGUS_PUBLIC_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    public_url: Option<String>,
    /// Serve gRPC over TLS with this certificate chain (PEM); clients then
    /// connect with https://.
    #[arg(long, env = "ARGUS_TLS_CERT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, env = "ARGUS_TLS_KEY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// Cancel a run (not submitted with --detach) when no client has
    /// watched it for this many seconds [default: 60].
    #[arg(long, env = "ARGUS_CLIENT_GRACE", value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    client_grace: Option<u64>,
    /// Remove whole runs (attempts, steps, files, WebDriver sessions) older
    /// than this many days, every hour [default: keep everything].
    #[arg(long, env = "ARGUS_KEEP_DAYS", value_name = "DAYS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_days: Option<u64>,
    /// Keep the step records (screens, requests, events) of passing
    /// attempts this many days; failures' records, each case's baseline and
    /// the passes failures are compared with stay as long as their runs
    /// [default: 7].
    #[arg(long, env = "ARGUS_STEP_RECORDS_DAYS", value_name = "DAYS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    step_records_days: Option<u64>,
    /// The branch whose runs count when a muted case is unmuted by passing
    /// [default: main].
    #[arg(long, env = "ARGUS_DEFAULT_BRANCH", value_name = "BRANCH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    default_branch: Option<String>,
    /// Unmute a muted case once its last N attempts on the default branch
    /// passed; 0: only by hand or at its --until [default: 10].
    #[arg(long, env = "ARGUS_UNMUTE_AFTER", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    unmute_after: Option<u32>,
    /// Auto-mute (off unless set): mute a case that passed on retry more
    /// than N times in --auto-mute-days, whose failures there were all
    /// `timing` or `unknown`; its owner is told (`case.muted`).
    #[arg(long, env = "ARGUS_AUTO_MUTE_AFTER", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    auto_mute_after: Option<u32>,
    /// The auto-mute's window, in days [default: 7].
    #[arg(long, env = "ARGUS_AUTO_MUTE_DAYS", value_name = "DAYS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    auto_mute_days: Option<u32>,
    /// How long a webhook delivery is retried (with backoff, while the
    /// receiver fails or does not answer) before it is abandoned, in
    /// seconds [default: 3600]. The webhooks themselves are
    /// `[[coordinator.webhooks]]` tables in argus.toml.
    #[arg(long, env = "ARGUS_WEBHOOK_RETRY_FOR", value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_retry_for: Option<u64>,
    /// Accepted for older configurations: on Postgres every coordinator
    /// serves only while it holds the database's lock and stands by (health
    /// NOT_SERVING) while another does. SQLite refuses it.
    #[arg(long, env = "ARGUS_STANDBY", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    standby: Option<bool>,
}

/// The coordinator's settings as loaded, with the secrets named as files
/// read in.
pub(crate) fn with_secret_files(loaded: settings::Loaded<CoordinatorSettings>) -> Result<CoordinatorSettings, String> {
    let url_given =
        loaded.origins.iter().any(|(key, origin)| key == "database_url" && *origin != settings::Origin::Default);
    let mut settings = loaded.settings;
    read_secret_files(&mut settings, url_given)?;
    Ok(settings)
}

/// Reads the secrets named as files into their settings.
/// `url_given`: whether `database_url` was set anywhere (not defaulted).
fn read_secret_files(this: &mut CoordinatorSettings, url_given: bool) -> Result<(), String> {
    settings::secret_from_file("worker_token", &mut this.worker_token, this.worker_token_file.as_deref())?;
    settings::secret_from_file("client_token", &mut this.client_token, this.client_token_file.as_deref())?;
    settings::secret_from_file("read_token", &mut this.read_token, this.read_token_file.as_deref())?;
    let mut url = url_given.then(|| this.database_url.clone());
    settings::secret_from_file("database_url", &mut url, this.database_url_file.as_deref())?;
    if let Some(url) = url {
        this.database_url = url;
    }
    Ok(())
}

pub async fn coordinator(args: CoordinatorArgs, matches: &clap::ArgMatches) -> ExitCode {
    let loaded = match settings::load::<CoordinatorSettings>(
        "coordinator",
        "coordinator",
        args.config.as_deref(),
        &args,
        matches,
        &[],
    ) {
        Ok(loaded) => loaded,
        Err(error) => return failed("coordinator", error),
    };
    if args.print_config {
        settings::print(&loaded);
        return ExitCode::SUCCESS;
    }
    let settings = match with_secret_files(loaded) {
        Ok(settings) => settings,
        Err(error) => return failed("coordinator", error),
    };
    let tls = match settings.validate() {
        Ok(tls) => tls,
        Err(error) => return failed("coordinator", error),
    };
    let webhooks =
        match argus_coordinator::config::webhooks(&settings.webhooks, &|key, path| settings::read_secret(key, path)) {
            Ok(webhooks) => webhooks,
            Err(error) => return failed("coordinator", error),
        };
    huge_pages_off();
    let store = match Store::open(&settings.database_url).await {
        Ok(store) => store,
        Err(error) => return failed("coordinator", error),
    };
    let mut listener = match bind(settings.listen).await {
        Ok(listener) => listener,
        Err(error) => return failed("coordinator", error),
    };
    let mut http = match bind(settings.http).await {
        Ok(listener) => listener,
        Err(error) => return failed("coordinator", format!("http: {error}")),
    };
    let shutdown = stop_on_signal();
    let lost = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // On Postgres every coordinator competes for the lock, flags or not: two
    // active on one database would each take workers and clients of their
    // own (a rolling update, a unit started on a second host). `--standby`
    // says the same; on SQLite, one process's database, it is refused.
    if settings.standby || store.backend() == Backend::Postgres {
        let lead = match argus_coordinator::standby::until_leading(&store, listener, http, &shutdown).await {
            Ok(Some(lead)) => lead,
            Ok(None) => return ExitCode::SUCCESS,
            Err(error) => return failed("coordinator", error),
        };
        // The standby's ports, serving for real now.
        (listener, http) = match (
            argus_coordinator::standby::rebind(settings.listen).await,
            argus_coordinator::standby::rebind(settings.http).await,
        ) {
            (Ok(grpc), Ok(http)) => (grpc, http),
            (Err(error), _) | (_, Err(error)) => {
                return failed("coordinator", format!("cannot take over the ports: {error}"));
            }
        };
        argus_coordinator::standby::keep_leading(store.clone(), lead, shutdown.clone(), lost.clone());
    }
    let artifacts = match open_artifacts(&settings.artifacts) {
        Ok(artifacts) => artifacts,
        Err(error) => return failed("coordinator", format!("artifacts: {error}")),
    };
    let builds = match argus_coordinator::builds::BuildFiles::open(&settings.builds) {
        Ok(builds) => builds,
        Err(error) => return failed("coordinator", format!("builds: {}: {error}", settings.builds.display())),
    };
    let dashboard = settings.public_url.clone().unwrap_or_else(|| format!("http://{}", settings.http));
    let scheme = if tls.is_some() { "https" } else { "http" };
    // A log line, so that JSON logs stay all JSON.
    tracing::info!(
        grpc = %format!("{scheme}://{}", settings.listen),
        dashboard = %format!("{}/", dashboard.trim_end_matches('/')),
        metrics = %format!("http://{}/metrics", settings.http),
        "argus coordinator serving"
    );
    let core = argus_grid::owner::OwnerConfig {
        client_grace: Duration::from_secs(settings.client_grace),
        dashboard_url: settings.public_url.as_ref().map(|u| u.trim_end_matches('/').to_owned()),
        ..Default::default()
    };
    let tokens = argus_coordinator::Tokens {
        worker: settings.worker_token.clone(),
        client: settings.client_token.clone(),
        read: settings.read_token.clone().filter(|t| !t.is_empty()).map(Into::into),
    };
    let keep = settings.keep_days.map(|days| Duration::from_secs(days.saturating_mul(86_400)));
    let step_records = Duration::from_secs(settings.step_records_days.saturating_mul(86_400));
    let options = argus_coordinator::Options {
        tokens,
        http: Some(http),
        tls,
        core,
        artifacts: Some(artifacts),
        builds: Some(builds),
        keep,
        step_records: Some(step_records),
        webhooks,
        webhook_retry_for: Some(Duration::from_secs(settings.webhook_retry_for)),
        follow_up: argus_history::follow_up::FollowUp {
            mutes: argus_history::mutes::MutePolicy {
                default_branch: settings.default_branch.clone(),
                unmute_after: settings.unmute_after,
                auto_mute_after: settings.auto_mute_after,
                auto_mute_days: settings.auto_mute_days,
            },
        },
    };
    match argus_coordinator::serve_with(listener, store, options, shutdown).await {
        Ok(()) if lost.load(std::sync::atomic::Ordering::SeqCst) => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failed("coordinator", error),
    }
}

/// Keeps the coordinator's memory in ordinary 4 KiB pages. mimalloc asks
/// the kernel for transparent huge pages; a coordinator frees and takes
/// back memory at every burst of results, and each fault of a huge page
/// zeroes 2 MiB: the capacity benchmark (1,000 devices, Postgres) put 37%
/// of the coordinator's CPU in the kernel's `clear_page_erms`, and without
/// them its CPU per one-step attempt fell from 0.09–0.13 ms to 0.05–0.07
/// and its memory per device by half. Only the coordinator: the flag passes
/// to child processes, and a worker's hooks may start emulators that want
/// huge pages.
fn huge_pages_off() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(%error, "cannot turn transparent huge pages off; the coordinator runs with them");
    }
}
