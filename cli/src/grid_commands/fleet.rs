//! What a client asks of a coordinator: `argus devices` (and drain,
//! quarantine) and `argus runs`.

use super::*;

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

impl ViewArgs {
    /// The coordinator to ask, from the layers (flags, variables, the
    /// `[client]` table of argus.toml); 127.0.0.1:7171 when none says.
    pub(super) fn target(&self, command: &str, matches: &clap::ArgMatches) -> Result<Target, String> {
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

#[derive(clap::Args)]
pub struct RunsArgs {
    #[command(flatten)]
    view: ViewArgs,
    /// How many runs to list, newest first.
    #[arg(long, env = "ARGUS_RUNS_LIMIT", default_value_t = 20)]
    limit: u32,
    #[command(subcommand)]
    action: Option<RunsAction>,
}

#[derive(clap::Subcommand)]
enum RunsAction {
    /// Run TO against run FROM: new failures, fixed, still failing, added
    /// and removed cases, and durations that moved beyond the case's own
    /// spread. Exits 1 when TO has new failures.
    Compare {
        /// The run compared with (the older one, usually).
        from: String,
        /// The run compared.
        to: String,
    },
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
    outln!("{:<24} {:<9} {:<18} {:<12} RUNNING / WHY", "DEVICE", "PLATFORM", "STATE", "APP");
    for device in &list.devices {
        let info = device.device.clone().unwrap_or_default();
        // The coordinator's one state of the device, as the fleet page says it.
        let state = &device.state;
        let app = if device.app_name.is_empty() { "-" } else { &device.app_name };
        let mut note =
            if !device.state_reason.is_empty() { device.state_reason.clone() } else { device.running_case.clone() };
        // What the worker sees wrong with the app's link is said whatever the
        // state: a wrong-token app beside the attached one, a flaky link.
        if !info.app_problem.is_empty() && !note.contains(&info.app_problem) {
            note = if note.is_empty() { info.app_problem.clone() } else { format!("{note} · {}", info.app_problem) };
        }
        outln!("{:<24} {:<9} {:<18} {:<12} {}", device.id, info.platform, state, app, note);
    }
    if list.devices.is_empty() {
        outln!("(no devices: start a worker with `argus worker --coordinator … --ports …`)");
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
    if let Some(RunsAction::Compare { from, to }) = args.action {
        let request = grpc::CompareRequest { from_run_id: from.clone(), to_run_id: to.clone() };
        return match client.compare(request).await {
            Ok(compared) => print_comparison(&from, &to, &compared.into_inner().changes),
            Err(status) => failed("runs compare", status.message()),
        };
    }
    let list = match client.list(grpc::ListRequest { limit: args.limit, project: String::new() }).await {
        Ok(list) => list.into_inner(),
        Err(status) => return failed("runs", status.message()),
    };
    if list.runs.is_empty() {
        outln!("(no runs yet: `argus run cases/ --coordinator …` starts one)");
        return ExitCode::SUCCESS;
    }
    outln!("{:<14} {:<26} {:<10} {:<12} {:<10} TOTALS", "RUN", "STARTED", "PROJECT", "BRANCH", "STATE");
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
        outln!("{:<14} {:<26} {:<10} {:<12} {:<10} {}", run.run_id, started, run.project, run.branch, state, note);
    }
    ExitCode::SUCCESS
}

/// Prints a comparison grouped by kind; exits 1 when there are new failures.
fn print_comparison(from: &str, to: &str, changes: &[grpc::CaseChange]) -> ExitCode {
    outln!("run {to} against run {from}:");
    if changes.is_empty() {
        outln!("  nothing changed: the same cases, the same results, no duration beyond its spread");
    }
    let ms = |ms: Option<i64>| ms.map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms"));
    let mut heading = "";
    for change in changes {
        if change.kind != heading {
            heading = &change.kind;
            outln!("  {heading}:");
        }
        let detail = match change.kind.as_str() {
            "new-failure" => format!("{} → failed [{}]", change.from_result, change.to_cause),
            "fixed" => format!("failed [{}] → passed", change.from_cause),
            "still-failing" if change.cause_changed => format!("[{}] → [{}]", change.from_cause, change.to_cause),
            "still-failing" => format!("[{}]", change.to_cause),
            "added" => change.to_result.clone(),
            "removed" => change.from_result.clone(),
            _ => format!("{} → {} (its spread {})", ms(change.from_ms), ms(change.to_ms), ms(change.spread_ms)),
        };
        outln!("    {} ({})  {detail}", change.case_id, change.platform);
    }
    if changes.iter().any(|c| c.kind == "new-failure") { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
