//! `argus demo`: a whole grid in one process. A coordinator on SQLite in a
//! fresh temporary directory, one worker with eight device slots, eight
//! simulated apps (four iOS-like, four Android-like), and a 42-case suite
//! sharded across them. It then keeps serving until interrupted, so that
//! `argus devices` and `argus runs` can look at it (`--exit` ends at once,
//! with the run's exit code).

use std::path::PathBuf;
use std::process::ExitCode;

use argus_proto::grpc;
use argus_sim::{Agent, AgentConfig, App, Model};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio_util::sync::CancellationToken;

use crate::grid::{Target, stop_on_signal};
use crate::run::{execute, wait_for_devices};

/// The demo project, built into the binary so that it runs from anywhere.
const MODEL: &str = include_str!("../../examples/shop/app.yaml");
const CONFIG: &str = include_str!("../../examples/demo/lynkeus.config.json");
const CASES: [(&str, &str); 5] = [
    ("cases/browse.md", include_str!("../../examples/demo/cases/browse.md")),
    ("cases/login.md", include_str!("../../examples/demo/cases/login.md")),
    ("cases/settings.md", include_str!("../../examples/demo/cases/settings.md")),
    ("cases/links.md", include_str!("../../examples/demo/cases/links.md")),
    ("cases/platforms.md", include_str!("../../examples/demo/cases/platforms.md")),
];

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
    let store = match argus_coordinator::store::Store::open(&database).await {
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
    let artifacts = match crate::grid::open_artifacts(&state.join("artifacts")) {
        Ok(artifacts) => artifacts,
        Err(error) => return failed(error),
    };
    let options = argus_coordinator::Options { http: Some(http), artifacts: Some(artifacts), ..Default::default() };
    tokio::spawn(argus_coordinator::serve_with(listener, store, options, cancel.clone()));

    // Eight devices: four iOS-like, four Android-like, each app on its own port.
    let mut slots = Vec::new();
    for index in 0..8 {
        let port = match free_port() {
            Ok(port) => port,
            Err(error) => return failed(error),
        };
        let platform = if index < 4 { "ios" } else { "android" };
        slots.push(SlotConfig::for_port(port, platform));
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
    tokio::spawn(link::run(worker, cancel.clone()));
    for slot in &slots {
        if let Err(error) = start_app(slot, &cancel) {
            return failed(error);
        }
    }
    println!("argus demo: coordinator {url}, 8 simulated devices (4 ios, 4 android), state in {}", state.display());
    println!("dashboard: {dashboard}");
    if let Err(error) = wait_for_devices(&Target::plain(&url), slots.len(), std::time::Duration::from_secs(20)).await {
        return failed(error);
    }
    let request = grpc::SubmitRequest {
        cases: CASES
            .iter()
            .map(|(path, source)| grpc::CaseFile { path: path.to_string(), source: source.to_string() })
            .collect(),
        config_json: serde_json::from_str::<serde_json::Value>(CONFIG)
            .map(|c| c["cases"].to_string())
            .unwrap_or_default(),
        selector: None,
        retries: 1,
        project: "demo".into(),
        branch: "demo".into(),
        commit: String::new(),
        trigger: "argus demo".into(),
        priority: 1,
        detach: false,
    };
    let code =
        execute(&Target::plain(&url), request, None, Some(&out), Some(&out.join("junit.xml")), &Default::default())
            .await;
    println!("run directory: {}", out.display());
    if args.exit {
        return code;
    }
    println!("serving until Ctrl-C; open the dashboard at {dashboard}, or try:");
    println!("  argus devices --coordinator {url}   argus runs --coordinator {url}");
    cancel.cancelled().await;
    code
}

/// A simulated app dialing `slot`, with the slot's platform.
fn start_app(slot: &SlotConfig, cancel: &CancellationToken) -> Result<(), String> {
    let mut model = Model::parse(MODEL, "examples/shop/app.yaml").map_err(|e| e.to_string())?;
    model.file.platform = slot.platform.clone();
    let config = AgentConfig { host: "127.0.0.1".into(), port: slot.port, ..AgentConfig::default() };
    tokio::spawn(Agent::new(App::new(model), config).run(cancel.clone()));
    Ok(())
}
