//! `argus demo`: a whole grid in one process. A coordinator on SQLite in a
//! fresh temporary directory, one worker with eight device slots, eight
//! simulated apps (four iOS-like, four Android-like), and a 45-case suite
//! sharded across them. The suite shows what a grid is for: a flaky case
//! (its backend, `argus demo-backend`, is stale once) that fails with a
//! screenshot and passes on its retry, a step the app cannot do, and an app
//! the demo relaunches under a case once, which the grid runs again
//! elsewhere. It then keeps serving until interrupted, so that the
//! dashboard, `argus devices` and `argus runs` can look at it (`--exit`
//! ends at once, with the run's exit code).

use std::path::PathBuf;
use std::process::ExitCode;

use argus_cases::CasesConfig;
use argus_cases::runner::LocalProject;
use argus_proto::grpc;
use argus_sim::{Agent, AgentConfig, App, Model};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio_util::sync::CancellationToken;

use crate::grid_commands::{Target, stop_on_signal};
use crate::run::{execute, wait_for_devices};

/// The demo project, built into the binary so that it runs from anywhere.
const MODEL: &str = include_str!("../../examples/shop/app.yaml");
const CONFIG: &str = include_str!("../../examples/demo/lynkeus.config.json");
const CASES: [(&str, &str); 8] = [
    ("cases/browse.md", include_str!("../../examples/demo/cases/browse.md")),
    ("cases/login.md", include_str!("../../examples/demo/cases/login.md")),
    ("cases/settings.md", include_str!("../../examples/demo/cases/settings.md")),
    ("cases/links.md", include_str!("../../examples/demo/cases/links.md")),
    ("cases/platforms.md", include_str!("../../examples/demo/cases/platforms.md")),
    ("cases/promo.md", include_str!("../../examples/demo/cases/promo.md")),
    ("cases/clock.md", include_str!("../../examples/demo/cases/clock.md")),
    ("cases/relaunch.md", include_str!("../../examples/demo/cases/relaunch.md")),
];
/// The case under which the demo relaunches an app, once.
const RELAUNCHED_UNDER: &str = "relaunch";
/// How long the demo waits for its simulated apps to attach: long enough
/// for a loaded machine, which it says it is waiting for.
const ATTACH_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Where the run directory goes (default: inside the demo's state directory).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Where the demo keeps its state (default: a fresh temporary directory).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// End after the run, with its exit code, instead of serving on.
    #[arg(long)]
    exit: bool,
    /// The coordinator's gRPC address.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// The dashboard's address.
    #[arg(long, default_value = "127.0.0.1:0")]
    http: std::net::SocketAddr,
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

fn failed(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("argus demo: {message}");
    ExitCode::from(2)
}

pub async fn run(args: DemoArgs) -> ExitCode {
    let state = args.state.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "argus-demo-{}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_millis()
        ))
    });
    if let Err(error) = std::fs::create_dir_all(&state) {
        return failed(format!("{}: {error}", state.display()));
    }
    let out = args.out.clone().unwrap_or_else(|| state.join("run"));
    let cancel = stop_on_signal();
    let _stop = cancel.clone().drop_guard();

    // The coordinator, on SQLite in the state directory.
    let database = format!("sqlite:{}", state.join("argus.db").display());
    let store = match argus_store::Store::open(&database).await {
        Ok(store) => store,
        Err(error) => return failed(error),
    };
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(error) => return failed(format!("cannot listen on {}: {error}", args.listen)),
    };
    let url = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}"),
        Err(error) => return failed(error),
    };
    let http = match tokio::net::TcpListener::bind(args.http).await {
        Ok(listener) => listener,
        Err(error) => return failed(format!("cannot listen on {}: {error}", args.http)),
    };
    let dashboard = http.local_addr().map(|a| format!("http://{a}/")).unwrap_or_default();
    let artifacts = match crate::grid_commands::open_artifacts(&state.join("artifacts")) {
        Ok(artifacts) => artifacts,
        Err(error) => return failed(error),
    };
    let options = argus_coordinator::Options { http: Some(http), artifacts: Some(artifacts), ..Default::default() };
    // Every task of the demo's grid, waited for when it stops.
    let tasks = tokio_util::task::TaskTracker::new();
    let coordinator = argus_coordinator::serve_with(listener, store, options, cancel.clone());
    tasks.spawn(async move {
        if let Err(error) = coordinator.await {
            tracing::error!(%error, "the demo's coordinator stopped");
        }
    });

    // Eight devices: four iOS-like, four Android-like, each app on its own port.
    let mut slots = Vec::new();
    for index in 0..8 {
        let port = match free_port() {
            Ok(port) => port,
            Err(error) => return failed(error),
        };
        let (platform, model) =
            if index < 4 { ("ios", "iPhone 15 (simulated)") } else { ("android", "Pixel 8 (simulated)") };
        let mut slot = SlotConfig::for_port(port, platform);
        slot.labels.insert("model".into(), model.into());
        slots.push(slot);
    }
    let worker = WorkerConfig {
        coordinator: url.clone(),
        name: "demo".into(),
        host: "127.0.0.1".into(),
        app_token: None,
        token: None,
        tls_ca: None,
        slots: slots.clone(),
    };
    let worker_cancel = cancel.clone();
    tasks.spawn(async move {
        if let Err(error) = link::run(worker, worker_cancel).await {
            tracing::error!(%error, "the demo's worker stopped");
        }
    });
    let mut apps = Vec::new();
    for slot in &slots {
        match start_app(slot, &cancel, &tasks) {
            Ok(app) => apps.push((slot.clone(), app)),
            Err(error) => return failed(error),
        }
    }
    outln!("argus demo: coordinator {url}, 8 simulated devices (4 ios, 4 android), state in {}", state.display());
    outln!("dashboard: {dashboard}");
    let target = Target::plain(&url);
    if let Err(error) = wait_for_devices(&target, slots.len(), ATTACH_WAIT).await {
        return failed(error);
    }
    let (request, project) = match suite(&state) {
        Ok(suite) => suite,
        Err(error) => return failed(error),
    };
    tasks.spawn(relaunch_once(target.clone(), apps, cancel.clone(), tasks.clone()));
    let project = std::sync::Arc::new(project);
    let code =
        execute(&target, request, Some(project.clone()), Some(&out), Some(&out.join("junit.xml")), &Default::default())
            .await;
    project.close().await;
    outln!("run directory: {}", out.display());
    outln!("flaky and slow cases: {dashboard}flaky");
    if !args.exit {
        outln!("serving until Ctrl-C; open the dashboard at {dashboard}, or try:");
        outln!("  argus devices --coordinator {url}   argus runs --coordinator {url}");
        outln!(
            "  an Appium or Selenium client at {} (WebDriver; see docs/webdriver.md)",
            dashboard.trim_end_matches('/')
        );
        cancel.cancelled().await;
    }
    cancel.cancel();
    crate::grid_commands::stop_local(tasks).await;
    code
}

/// The demo's suite as a submission, and the project that serves its
/// fixtures: this binary's `demo-backend`, however it was started.
fn suite(state: &std::path::Path) -> Result<(grpc::SubmitRequest, LocalProject), String> {
    let mut config: serde_json::Value = serde_json::from_str(CONFIG).map_err(|e| format!("the demo's config: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program to serve fixtures: {e}"))?;
    // Single-quoted for `sh -c`: a path with spaces or quotes stays one word.
    let quoted = format!("'{}'", exe.display().to_string().replace('\'', r"'\''"));
    config["cases"]["fixtures"]["command"] = format!("{quoted} demo-backend").into();
    let cases = config["cases"].clone();
    let cases_config = CasesConfig::from_json(&cases, state).map_err(|e| e.to_string())?;
    let request = grpc::SubmitRequest {
        cases: CASES
            .iter()
            .map(|(path, source)| grpc::CaseFile { path: path.to_string(), source: source.to_string() })
            .collect(),
        config_json: cases.to_string(),
        selector: None,
        retries: 1,
        project: "demo".into(),
        branch: "demo".into(),
        commit: String::new(),
        trigger: "argus demo".into(),
        priority: 1,
        detach: false,
        ..Default::default()
    };
    Ok((request, LocalProject::of(&cases_config)))
}

/// A running simulated app: stopping its token ends it.
struct RunningApp {
    stop: CancellationToken,
}

/// Relaunches, once, the app of the device that runs [`RELAUNCHED_UNDER`]:
/// a fresh app in the middle of an attempt, as a crash and an OS restart
/// look to the grid.
async fn relaunch_once(
    target: Target,
    mut apps: Vec<(SlotConfig, RunningApp)>,
    cancel: CancellationToken,
    tasks: tokio_util::task::TaskTracker,
) {
    let Ok((channel, bearer)) = crate::grid_commands::channel(&target).await else { return };
    let mut fleet = grpc::fleet_client::FleetClient::with_interceptor(channel, bearer);
    let mut poll = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = poll.tick() => {}
        }
        let Ok(list) = fleet.list(grpc::ListFleetRequest {}).await else { continue };
        let Some(device) = list.into_inner().devices.into_iter().find(|d| d.running_case == RELAUNCHED_UNDER) else {
            continue;
        };
        let Some((slot, app)) = apps.iter_mut().find(|(slot, _)| device.id.ends_with(&format!("/{}", slot.name)))
        else {
            return;
        };
        // Into the case's pause, then a fresh app in place of the old one.
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        outln!("argus demo: relaunching the app of {} under case {RELAUNCHED_UNDER}", device.id);
        app.stop.cancel();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if let Ok(fresh) = start_app(slot, &cancel, &tasks) {
            *app = fresh;
        }
        return;
    }
}

/// A simulated app dialing `slot`, with the slot's platform.
fn start_app(
    slot: &SlotConfig,
    cancel: &CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) -> Result<RunningApp, String> {
    let mut model = Model::parse(MODEL, "examples/shop/app.yaml").map_err(|e| e.to_string())?;
    model.file.platform = slot.platform.clone();
    let config = AgentConfig { host: "127.0.0.1".into(), port: slot.port, ..AgentConfig::default() };
    let stop = cancel.child_token();
    tasks.spawn(Agent::new(App::new(model), config).run(stop.clone()));
    Ok(RunningApp { stop })
}
