//! `argus coordinator`, `argus worker`, `argus standalone`, `argus migrate`,
//! `argus devices` and `argus runs`: the grid's processes and their views.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use argus_proto::auth::Bearer;
use argus_proto::grpc::{self, fleet_client::FleetClient, runs_client::RunsClient};
use argus_proto::run::RunManifest;
use argus_store::{Backend, Store};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::settings;

/// The coordinator's default gRPC address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7171";
/// The coordinator's default HTTP address: metrics and health.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7172";
/// The embedded default store.
pub const DEFAULT_DATABASE: &str = "sqlite:argus.db";

#[derive(clap::Args)]
pub struct StoreArgs {
    /// postgres://… for a team, sqlite:FILE embedded [default: sqlite:argus.db].
    #[arg(long, env = "ARGUS_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The database URL read from a file (only its owner and group may read
    /// it), in place of --database-url.
    #[arg(long, env = "ARGUS_DATABASE_URL_FILE", value_name = "FILE")]
    database_url_file: Option<PathBuf>,
}

impl StoreArgs {
    /// The database to open: given, read from its file, or the default.
    pub fn url(&self) -> Result<String, String> {
        let mut url = self.database_url.clone();
        settings::secret_from_file("database_url", &mut url, self.database_url_file.as_deref())?;
        Ok(url.unwrap_or_else(|| DEFAULT_DATABASE.to_owned()))
    }
}

#[derive(clap::Args)]
pub struct ArtifactArgs {
    /// Where screenshots and films of runs are kept: a folder per run,
    /// made if it is not there.
    #[arg(long, env = "ARGUS_ARTIFACTS", default_value = "argus-artifacts", value_name = "DIR")]
    pub artifacts: PathBuf,
}

/// The artifact store in `dir`.
pub fn open_artifacts(dir: &std::path::Path) -> Result<argus_store::artifacts::Artifacts, String> {
    Ok(std::sync::Arc::new(argus_store::artifacts::DirStore::open(dir.to_path_buf()).map_err(|e| e.to_string())?))
}

impl ViewArgs {
    /// The coordinator to ask, from the layers (flags, variables, the
    /// `[client]` table of argus.toml); 127.0.0.1:7171 when none says.
    fn target(&self, command: &str, matches: &clap::ArgMatches) -> Result<Target, String> {
        let given = settings::ClientGiven {
            coordinator: self.coordinator.clone(),
            token: self.token.clone(),
            token_file: self.token_file.clone(),
            tls_ca: self.tls_ca.clone(),
            project: None,
        };
        let loaded =
            settings::load::<settings::ClientSettings>(command, "client", self.config.as_deref(), &given, matches, &[])
                .map_err(|e| format!("{command}: {e}"))?;
        let settings = loaded.settings.with_secret_file().map_err(|e| format!("{command}: {e}"))?;
        Ok(Target {
            url: settings.coordinator.unwrap_or_else(|| "http://127.0.0.1:7171".into()),
            token: settings.token,
            ca: settings.tls_ca,
        })
    }
}

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
    /// Accepted for older configurations: on Postgres every coordinator
    /// serves only while it holds the database's lock and stands by (health
    /// NOT_SERVING) while another does. SQLite refuses it.
    #[arg(long, env = "ARGUS_STANDBY", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    standby: Option<bool>,
}

/// What the coordinator runs with, once the layers are merged.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorSettings {
    pub database_url: String,
    pub artifacts: PathBuf,
    pub worker_token: Option<String>,
    pub client_token: Option<String>,
    pub read_token: Option<String>,
    pub database_url_file: Option<PathBuf>,
    pub worker_token_file: Option<PathBuf>,
    pub client_token_file: Option<PathBuf>,
    pub read_token_file: Option<PathBuf>,
    pub listen: SocketAddr,
    pub http: SocketAddr,
    pub public_url: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub client_grace: u64,
    pub keep_days: Option<u64>,
    pub standby: bool,
}

impl Default for CoordinatorSettings {
    fn default() -> Self {
        Self {
            database_url: DEFAULT_DATABASE.into(),
            artifacts: "argus-artifacts".into(),
            worker_token: None,
            client_token: None,
            read_token: None,
            database_url_file: None,
            worker_token_file: None,
            client_token_file: None,
            read_token_file: None,
            listen: DEFAULT_LISTEN.parse().expect("a socket address"),
            http: DEFAULT_HTTP.parse().expect("a socket address"),
            public_url: None,
            tls_cert: None,
            tls_key: None,
            client_grace: 60,
            keep_days: None,
            standby: false,
        }
    }
}

impl CoordinatorSettings {
    /// The settings as loaded, with the secrets named as files read in.
    pub(crate) fn with_secret_files(loaded: settings::Loaded<Self>) -> Result<Self, String> {
        let url_given =
            loaded.origins.iter().any(|(key, origin)| key == "database_url" && *origin != settings::Origin::Default);
        let mut settings = loaded.settings;
        settings.read_secret_files(url_given)?;
        Ok(settings)
    }

    /// Reads the secrets named as files into their settings.
    /// `url_given`: whether `database_url` was set anywhere (not defaulted).
    fn read_secret_files(&mut self, url_given: bool) -> Result<(), String> {
        settings::secret_from_file("worker_token", &mut self.worker_token, self.worker_token_file.as_deref())?;
        settings::secret_from_file("client_token", &mut self.client_token, self.client_token_file.as_deref())?;
        settings::secret_from_file("read_token", &mut self.read_token, self.read_token_file.as_deref())?;
        let mut url = url_given.then(|| self.database_url.clone());
        settings::secret_from_file("database_url", &mut url, self.database_url_file.as_deref())?;
        if let Some(url) = url {
            self.database_url = url;
        }
        Ok(())
    }
}

#[derive(clap::Args, Clone)]
pub struct SlotArgs {
    /// Driver ports, one device each: `8123-8130` or `8123,8125`.
    #[arg(long, env = "ARGUS_PORTS", value_parser = parse_ports)]
    pub ports: Option<Ports>,
    /// The devices' platform.
    #[arg(long, env = "ARGUS_PLATFORM", default_value = "ios")]
    pub platform: String,
    /// Where the drivers listen.
    #[arg(long = "driver-host", env = "ARGUS_DRIVER_HOST", default_value = "127.0.0.1")]
    pub driver_host: String,
    /// The apps' token, if they were given one.
    #[arg(long, env = "LYNKEUS_TOKEN", hide_env_values = true)]
    pub app_token: Option<String>,
    /// The apps' token read from a file (only its owner and group may read
    /// it), in place of --app-token.
    #[arg(long, env = "ARGUS_APP_TOKEN_FILE", value_name = "FILE")]
    pub app_token_file: Option<PathBuf>,
}

impl SlotArgs {
    /// The apps' token: given, or read from its file.
    pub fn app_token(&self) -> Result<Option<String>, String> {
        let mut token = self.app_token.clone();
        settings::secret_from_file("app_token", &mut token, self.app_token_file.as_deref())?;
        Ok(token)
    }

    pub fn slots(&self) -> Vec<SlotConfig> {
        self.ports.iter().flat_map(|p| &p.0).map(|p| SlotConfig::for_port(*p, &self.platform)).collect()
    }
}

/// `argus worker`: every setting is a flag, a variable and a key of
/// `[worker]` in argus.toml, or of a worker.toml of old (its keys at the
/// top); the slots come from `[[worker.slot]]` tables, or `--ports`.
#[derive(clap::Args, serde::Serialize)]
pub struct WorkerArgs {
    /// The configuration file (default: argus.toml here, when there is one):
    /// its [worker] table, or a whole worker.toml (the coordinator, the name,
    /// and the slots with their labels, device ids and hooks).
    #[arg(long, env = "ARGUS_WORKER_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Print the settings in effect and where each came from (secrets
    /// hidden), then exit.
    #[arg(long)]
    #[serde(skip)]
    print_config: bool,
    /// Print, per slot, the address its app dials and how to tell it its
    /// port, then exit.
    #[arg(long)]
    #[serde(skip)]
    print_slots: bool,
    /// Find this host's booted iOS simulators (xcrun simctl) and Android
    /// emulators (adb) and print a worker.toml with a slot for each, then
    /// exit.
    #[arg(long)]
    #[serde(skip)]
    discover: bool,
    /// With --discover: the first driver port.
    #[arg(long, default_value_t = 8123, requires = "discover")]
    #[serde(skip)]
    first_port: u16,
    /// With --discover: the iOS app's bundle id, for the hook that launches it.
    #[arg(long, requires = "discover", value_name = "BUNDLE_ID")]
    #[serde(skip)]
    ios_bundle: Option<String>,
    /// With --discover: the Android activity to launch (`package/.Main`).
    #[arg(long, requires = "discover", value_name = "ACTIVITY")]
    #[serde(skip)]
    android_activity: Option<String>,
    /// The coordinator's gRPC URL, or several (`http://a:7171,http://b:7171`:
    /// an active coordinator and its standbys).
    #[arg(long, env = "ARGUS_COORDINATOR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    coordinator: Option<String>,
    /// The worker's name (its id's prefix) [default: worker].
    #[arg(long, env = "ARGUS_WORKER_NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// The coordinator's worker token, if it requires one.
    #[arg(long, env = "ARGUS_WORKER_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// The CA certificate (PEM) of an https:// coordinator, if private.
    #[arg(long, env = "ARGUS_TLS_CA")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_ca: Option<PathBuf>,
    /// Driver ports, one device each: `8123-8130` or `8123,8125` (in place
    /// of the file's slots).
    #[arg(long, env = "ARGUS_PORTS", value_parser = parse_ports)]
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Ports>,
    /// The platform of the --ports devices [default: ios].
    #[arg(long, env = "ARGUS_PLATFORM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    platform: Option<String>,
    /// Where the drivers listen [default: 127.0.0.1].
    #[arg(long = "driver-host", env = "ARGUS_DRIVER_HOST")]
    #[serde(skip_serializing_if = "Option::is_none")]
    driver_host: Option<String>,
    /// The apps' token, if they were given one.
    #[arg(long, env = "LYNKEUS_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    app_token: Option<String>,
    /// The worker token read from a file (only its owner and group may read
    /// it), in place of --token.
    #[arg(long, env = "ARGUS_WORKER_TOKEN_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    token_file: Option<PathBuf>,
    /// The apps' token read from a file, in place of --app-token.
    #[arg(long, env = "ARGUS_APP_TOKEN_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    app_token_file: Option<PathBuf>,
    /// Serve Prometheus metrics (/metrics) and /healthz on this address.
    #[arg(long, env = "ARGUS_WORKER_METRICS", value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<SocketAddr>,
}

/// What the worker runs with, once the layers are merged.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    pub coordinator: Option<String>,
    pub name: String,
    pub token: Option<String>,
    pub tls_ca: Option<PathBuf>,
    pub ports: Option<Vec<u16>>,
    pub platform: String,
    pub driver_host: String,
    pub app_token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub app_token_file: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    /// The file's `[[slot]]` tables.
    #[serde(default, skip_serializing)]
    pub slot: Vec<SlotConfig>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            coordinator: None,
            name: "worker".into(),
            token: None,
            tls_ca: None,
            ports: None,
            platform: "ios".into(),
            driver_host: "127.0.0.1".into(),
            app_token: None,
            token_file: None,
            app_token_file: None,
            metrics: None,
            slot: Vec::new(),
        }
    }
}

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

#[derive(clap::Args)]
pub struct ViewArgs {
    /// The coordinator's gRPC URL, or several separated by commas (before or
    /// after a subcommand) [default: http://127.0.0.1:7171].
    #[arg(long, global = true, env = "ARGUS_COORDINATOR")]
    coordinator: Option<String>,
    /// The configuration file (default: argus.toml here, when there is one):
    /// its [client] table.
    #[arg(long, global = true, env = "ARGUS_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The coordinator's client token, if it requires one.
    #[arg(long, global = true, env = "ARGUS_CLIENT_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The client token read from a file (only its owner and group may read
    /// it), in place of --token.
    #[arg(long, global = true, env = "ARGUS_CLIENT_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The CA certificate (PEM) of an https:// coordinator, if private.
    #[arg(long, global = true, env = "ARGUS_TLS_CA")]
    tls_ca: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RunsArgs {
    #[command(flatten)]
    view: ViewArgs,
    /// How many runs to list, newest first.
    #[arg(long, env = "ARGUS_RUNS_LIMIT", default_value_t = 20)]
    limit: u32,
}

/// Driver ports, as `--ports` takes them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(transparent)]
pub struct Ports(pub Vec<u16>);

/// `8123-8126` or `8123,8125,8130`.
pub fn parse_ports(text: &str) -> Result<Ports, String> {
    let mut ports = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parse = |p: &str| p.trim().parse::<u16>().map_err(|_| format!("{p:?} is not a port (1-65535)"));
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (parse(from)?, parse(to)?);
                if from > to || to - from >= 256 {
                    return Err(format!("{part}: a range goes up, 256 ports at most"));
                }
                ports.extend(from..=to);
            }
            None => ports.push(parse(part)?),
        }
    }
    if ports.is_empty() {
        return Err("no ports given".into());
    }
    Ok(Ports(ports))
}

/// Where a client finds the coordinator, and what it needs to talk to it.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub url: String,
    pub token: Option<String>,
    /// The CA that signed an https:// coordinator's certificate, if private.
    pub ca: Option<PathBuf>,
}

impl Target {
    pub fn plain(url: &str) -> Self {
        Self { url: url.to_owned(), ..Self::default() }
    }
}

/// A connection to the coordinator and the token every request carries.
pub async fn channel(target: &Target) -> Result<(tonic::transport::Channel, Bearer), String> {
    let bearer = Bearer::new(target.token.as_deref()).map_err(|e| e.to_string())?;
    let channel = argus_proto::connect::connect(&target.url, target.ca.as_deref()).await.map_err(|e| e.to_string())?;
    Ok((channel, bearer))
}

fn failed(context: &str, error: impl std::fmt::Display) -> ExitCode {
    eprintln!("argus {context}: {error}");
    ExitCode::from(2)
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            format!("{addr} is in use: another coordinator or program listens there")
        } else {
            format!("cannot listen on {addr}: {e}")
        }
    })
}

/// Stops on Ctrl-C or SIGTERM.
pub fn stop_on_signal() -> CancellationToken {
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    argus_proto::task::spawn("stop on a signal", async move {
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    cancel
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
    let settings = match CoordinatorSettings::with_secret_files(loaded) {
        Ok(settings) => settings,
        Err(error) => return failed("coordinator", error),
    };
    if settings.keep_days == Some(0) {
        return failed(
            "coordinator",
            "keep_days 0 would remove every finished run: give 1 or more days, or leave it out to keep everything",
        );
    }
    if let Some(url) = &settings.public_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return failed("coordinator", format!("public_url {url:?}: give the dashboard's address as http://HOST:PORT"));
    }
    let tls = match (&settings.tls_cert, &settings.tls_key) {
        (Some(cert), Some(key)) => match argus_coordinator::TlsIdentity::load(cert, key) {
            Ok(identity) => Some(identity),
            Err(error) => return failed("coordinator", error.to_string()),
        },
        (None, None) => None,
        _ => return failed("coordinator", "tls_cert and tls_key go together: give both, or neither"),
    };
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
    let dashboard = settings.public_url.clone().unwrap_or_else(|| format!("http://{}", settings.http));
    let scheme = if tls.is_some() { "https" } else { "http" };
    // A log line, so that JSON logs stay all JSON.
    tracing::info!(
        grpc = %format!("{scheme}://{}", settings.listen),
        dashboard = %format!("{}/", dashboard.trim_end_matches('/')),
        metrics = %format!("http://{}/metrics", settings.http),
        "argus coordinator serving"
    );
    let core = argus_grid::core::CoreConfig {
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
    let options = argus_coordinator::Options { tokens, http: Some(http), tls, core, artifacts: Some(artifacts), keep };
    match argus_coordinator::serve_with(listener, store, options, shutdown).await {
        Ok(()) if lost.load(std::sync::atomic::Ordering::SeqCst) => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failed("coordinator", error),
    }
}

pub async fn worker(args: WorkerArgs, matches: &clap::ArgMatches) -> ExitCode {
    let loaded =
        match settings::load::<WorkerSettings>("worker", "worker", args.config.as_deref(), &args, matches, &["slot"]) {
            Ok(loaded) => loaded,
            Err(error) => return failed("worker", error),
        };
    if args.print_config {
        settings::print(&loaded);
        return ExitCode::SUCCESS;
    }
    let mut settings = loaded.settings;
    let secrets =
        settings::secret_from_file("token", &mut settings.token, settings.token_file.as_deref()).and_then(|()| {
            settings::secret_from_file("app_token", &mut settings.app_token, settings.app_token_file.as_deref())
        });
    if let Err(error) = secrets {
        return failed("worker", error);
    }
    if args.discover {
        let apps = argus_worker::discover::Apps {
            ios_bundle: args.ios_bundle.clone(),
            android_activity: args.android_activity.clone(),
        };
        return match argus_worker::discover::devices() {
            Ok(found) if found.is_empty() => failed(
                "worker",
                "no booted iOS simulator (xcrun simctl list devices booted) and no Android emulator (adb devices -l) on this host",
            ),
            Ok(found) => {
                let slots = argus_worker::discover::propose(&found, args.first_port, &apps);
                print!("{}", argus_worker::discover::to_toml(settings.coordinator.as_deref(), &slots));
                ExitCode::SUCCESS
            }
            Err(error) => failed("worker", error),
        };
    }
    let shown = args.config.clone().unwrap_or_else(|| settings::DEFAULT_FILE.into());
    if let Err(error) = link::check_slots(&mut settings.slot, &shown.display().to_string()) {
        return failed("worker", error);
    }
    // Ports, from a flag, a variable or the file, stand for the slots.
    let slots = match &settings.ports {
        Some(ports) => ports.iter().map(|p| SlotConfig::for_port(*p, &settings.platform)).collect(),
        None => settings.slot.clone(),
    };
    if slots.is_empty() {
        return failed(
            "worker",
            "give the devices' driver ports (--ports 8123-8126) or a worker.toml with [[slot]]s (--config)",
        );
    }
    if args.print_slots {
        for slot in &slots {
            println!("{}", argus_worker::discover::story(slot));
        }
        return ExitCode::SUCCESS;
    }
    let Some(coordinator) = settings.coordinator.clone() else {
        return failed(
            "worker",
            "give the coordinator's URL: --coordinator http://HOST:7171 (or `coordinator` in the [worker] table of argus.toml)",
        );
    };
    log_slots(&slots);
    let cancel = stop_on_signal();
    if let Some(addr) = settings.metrics {
        if let Err(error) = argus_worker::metrics::serve(addr, cancel.clone()).await {
            return failed("worker", error);
        }
        tracing::info!(metrics = %format!("http://{addr}/metrics"), "serving the worker's metrics");
    }
    let config = WorkerConfig {
        coordinator,
        name: settings.name,
        host: settings.driver_host,
        app_token: settings.app_token,
        token: settings.token,
        tls_ca: settings.tls_ca,
        slots,
    };
    match link::run(config, cancel).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failed("worker", error),
    }
}

/// What each app must be told: which address and port it dials, and how
/// it learns its port (for a person at a terminal: `argus run --ports`).
pub fn print_slots(slots: &[SlotConfig]) {
    for slot in slots {
        eprintln!("  {}", argus_worker::discover::story(slot));
    }
}

/// The same, as log lines of a service (JSON when logs are).
fn log_slots(slots: &[SlotConfig]) {
    for slot in slots {
        let dials = format!("ws://{}:{}", slot.bridge, slot.port);
        tracing::info!(device = %slot.name, platform = %slot.platform, %dials, "{}", argus_worker::discover::story(slot));
    }
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

pub async fn migrate(args: StoreArgs) -> ExitCode {
    let database_url = match args.url() {
        Ok(url) => url,
        Err(error) => return failed("migrate", error),
    };
    match Store::open(&database_url).await {
        Ok(store) => {
            store.close().await;
            eprintln!("argus migrate: {} is up to date", argus_store::redact_url(&database_url));
            ExitCode::SUCCESS
        }
        Err(error) => failed("migrate", error),
    }
}

#[derive(clap::Args)]
pub struct DevicesArgs {
    #[command(flatten)]
    view: ViewArgs,
    #[command(subcommand)]
    action: Option<DeviceAction>,
}

#[derive(clap::Subcommand)]
enum DeviceAction {
    /// Let a quarantined device run cases again.
    Release {
        /// The device, as `argus devices` lists it: WORKER/SLOT.
        device: String,
    },
    /// Keep a device from running cases, with a reason others will see.
    Quarantine {
        /// The device, as `argus devices` lists it: WORKER/SLOT.
        device: String,
        /// Why, for `argus devices` and the fleet page.
        #[arg(long, default_value = "quarantined by an operator")]
        reason: String,
    },
    /// Let a worker finish what it runs and take no more (until resumed;
    /// kept across restarts).
    Drain {
        /// The worker's name (its --name).
        worker: String,
    },
    /// Let a drained worker take work again.
    Resume {
        /// The worker's name (its --name).
        worker: String,
    },
}

pub async fn devices(args: DevicesArgs, matches: &clap::ArgMatches) -> ExitCode {
    let target = match args.view.target("devices", matches) {
        Ok(target) => target,
        Err(error) => return failed("devices", error),
    };
    let mut fleet = match channel(&target).await {
        Ok((channel, bearer)) => FleetClient::with_interceptor(channel, bearer),
        Err(error) => return failed("devices", error),
    };
    let done = match args.action {
        None => None,
        Some(DeviceAction::Release { device }) => Some(
            fleet
                .release(grpc::ReleaseRequest { device_id: device.clone() })
                .await
                .map(|_| format!("{device} released")),
        ),
        Some(DeviceAction::Quarantine { device, reason }) => Some(
            fleet
                .quarantine(grpc::QuarantineRequest { device_id: device.clone(), reason })
                .await
                .map(|_| format!("{device} quarantined")),
        ),
        Some(DeviceAction::Drain { worker }) => Some(
            fleet.drain(grpc::DrainRequest { worker_id: worker.clone() }).await.map(|_| format!("{worker} draining")),
        ),
        Some(DeviceAction::Resume { worker }) => Some(
            fleet.resume(grpc::ResumeRequest { worker_id: worker.clone() }).await.map(|_| format!("{worker} resumed")),
        ),
    };
    match done {
        Some(Ok(message)) => {
            eprintln!("argus devices: {message}");
            return ExitCode::SUCCESS;
        }
        Some(Err(status)) => return failed("devices", status.message()),
        None => {}
    }
    let list = match fleet.list(grpc::ListFleetRequest {}).await {
        Ok(list) => list.into_inner(),
        Err(status) => return failed("devices", status.message()),
    };
    println!("{:<24} {:<9} {:<18} {:<12} RUNNING / WHY", "DEVICE", "PLATFORM", "STATE", "APP");
    for device in &list.devices {
        let info = device.device.clone().unwrap_or_default();
        // The coordinator's one state of the device, as the fleet page says it.
        let state = &device.state;
        let app = if device.app_name.is_empty() { "-" } else { &device.app_name };
        let note = if !device.state_reason.is_empty() {
            device.state_reason.clone()
        } else if !info.app_problem.is_empty() {
            info.app_problem.clone()
        } else {
            device.running_case.clone()
        };
        println!("{:<24} {:<9} {:<18} {:<12} {}", device.id, info.platform, state, app, note);
    }
    if list.devices.is_empty() {
        println!("(no devices: start a worker with `argus worker --coordinator … --ports …`)");
    }
    ExitCode::SUCCESS
}

pub async fn runs(args: RunsArgs, matches: &clap::ArgMatches) -> ExitCode {
    let target = match args.view.target("runs", matches) {
        Ok(target) => target,
        Err(error) => return failed("runs", error),
    };
    let mut client = match channel(&target).await {
        Ok((channel, bearer)) => RunsClient::with_interceptor(channel, bearer),
        Err(error) => return failed("runs", error),
    };
    let list = match client.list(grpc::ListRequest { limit: args.limit, project: String::new() }).await {
        Ok(list) => list.into_inner(),
        Err(status) => return failed("runs", status.message()),
    };
    if list.runs.is_empty() {
        println!("(no runs yet: `argus run cases/ --coordinator …` starts one)");
        return ExitCode::SUCCESS;
    }
    println!("{:<14} {:<26} {:<10} {:<12} {:<10} TOTALS", "RUN", "STARTED", "PROJECT", "BRANCH", "STATE");
    for run in list.runs {
        let manifest: Option<RunManifest> = match serde_json::from_str(&run.manifest_json) {
            Ok(manifest) => Some(manifest),
            Err(error) => {
                eprintln!("argus runs: run {}'s manifest does not parse: {error}", run.run_id);
                None
            }
        };
        let started = manifest.as_ref().map(|m| m.started_at.clone()).unwrap_or_default();
        let totals = manifest
            .and_then(|m| m.totals)
            .map(|t| format!("{}/{} passed, {} failed, {} unsupported", t.passed, t.cases, t.failed, t.unsupported));
        let (state, note) = match (run.result.as_str(), totals) {
            ("", _) if !run.waiting_reason.is_empty() => ("waiting", run.waiting_reason.clone()),
            ("", _) => ("running", String::new()),
            (result, Some(totals)) => (result, totals),
            (result, None) => (result, "cut short before it finished".into()),
        };
        println!("{:<14} {:<26} {:<10} {:<12} {:<10} {}", run.run_id, started, run.project, run.branch, state, note);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_and_ranges() {
        assert_eq!(parse_ports("8123-8126").unwrap().0, [8123, 8124, 8125, 8126]);
        assert_eq!(parse_ports("8123, 8130").unwrap().0, [8123, 8130]);
        assert_eq!(parse_ports("8126-8123").unwrap_err(), "8126-8123: a range goes up, 256 ports at most");
        assert_eq!(parse_ports("81x").unwrap_err(), "\"81x\" is not a port (1-65535)");
    }
}
