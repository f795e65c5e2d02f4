use std::path::PathBuf;
use std::process::ExitCode;

use crate::endpoint::Endpoint;
use std::time::Duration;

use argus_sim::{Agent, AgentConfig, App, Model};
use tokio_util::sync::CancellationToken;

#[derive(clap::Args)]
pub struct Args {
    /// The app model (YAML or JSON): screens, elements, what presses do.
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    #[command(flatten)]
    endpoint: Endpoint,
    /// The longest wait between dials, in milliseconds.
    #[arg(long, default_value_t = 1500, value_name = "MS")]
    reconnect_max_ms: u64,
}

pub async fn run(args: Args) -> ExitCode {
    let model = match Model::load(&args.model) {
        Ok(model) => model,
        Err(error) => {
            eprintln!("argus sim: {error}");
            return ExitCode::from(2);
        }
    };
    let app = App::new(model);
    let config = AgentConfig {
        host: args.endpoint.host,
        port: args.endpoint.port,
        token: args.endpoint.token,
        reconnect_max: Duration::from_millis(args.reconnect_max_ms),
    };
    let cancel = CancellationToken::new();
    let agent = argus_proto::task::spawn("agent", Agent::new(app, config).run(cancel.clone()));
    // Ctrl-C or SIGTERM (a test harness, a process supervisor) stops it.
    crate::grid_commands::stop_on_signal().cancelled().await;
    cancel.cancel();
    let _ = agent.await;
    ExitCode::SUCCESS
}
