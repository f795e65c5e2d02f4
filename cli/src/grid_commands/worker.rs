//! `argus worker`: its flags and slots, its settings once the layers are
//! merged, and the link to the coordinator until a signal.

use argus_worker::config::WorkerSettings;

use super::*;

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
                let file = argus_worker::discover::to_toml(settings.coordinator.as_deref(), &slots);
                outln!("{}", file.trim_end_matches('\n'));
                ExitCode::SUCCESS
            }
            Err(error) => failed("worker", error),
        };
    }
    let shown = args.config.clone().unwrap_or_else(|| settings::DEFAULT_FILE.into());
    let slots = match settings.slots(&shown.display().to_string()) {
        Ok(slots) => slots,
        Err(error) => return failed("worker", error),
    };
    if args.print_slots {
        for slot in &slots {
            outln!("{}", argus_worker::discover::story(slot));
        }
        return ExitCode::SUCCESS;
    }
    let metrics = settings.metrics;
    let config = match settings.into_config(slots) {
        Ok(config) => config,
        Err(error) => return failed("worker", error),
    };
    log_slots(&config.slots);
    let cancel = stop_on_signal();
    if let Some(addr) = metrics {
        if let Err(error) = argus_worker::metrics::serve(addr, cancel.clone()).await {
            return failed("worker", error);
        }
        tracing::info!(metrics = %format!("http://{addr}/metrics"), "serving the worker's metrics");
    }
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
pub(super) fn log_slots(slots: &[SlotConfig]) {
    for slot in slots {
        let dials = format!("ws://{}:{}", slot.bridge, slot.port);
        tracing::info!(device = %slot.name, platform = %slot.platform, %dials, "{}", argus_worker::discover::story(slot));
    }
}
