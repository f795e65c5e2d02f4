use std::process::ExitCode;

use crate::endpoint::Endpoint;
use std::time::Duration;

use argus_worker::driver::{Driver, DriverConfig};
use serde_json::Value;

#[derive(clap::Args)]
pub struct Args {
    /// The method: a core method (ping, screen, press, …) or an app command.
    method: String,
    /// Its params, as JSON: '{"testId":"login"}'.
    params: Option<String>,
    #[command(flatten)]
    endpoint: Endpoint,
    /// How long the call may take, in seconds.
    #[arg(long, default_value_t = 20.0, value_name = "SECONDS")]
    timeout: f64,
    /// How long to wait for an app to attach, in seconds.
    #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
    attach_timeout: f64,
}

fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|_| format!("--{name} takes a positive number of seconds, not {value}"))
}

pub async fn run(args: Args) -> ExitCode {
    let usage = |message: String| {
        eprintln!("argus call: {message}");
        ExitCode::from(2)
    };
    let params: Option<Value> = match args.params.as_deref().map(serde_json::from_str) {
        None => None,
        Some(Ok(params)) => Some(params),
        Some(Err(error)) => return usage(format!("PARAMS_JSON is not JSON: {error}")),
    };
    let timeout = match seconds("timeout", args.timeout) {
        Ok(t) => t,
        Err(message) => return usage(message),
    };
    let attach_timeout = match seconds("attach-timeout", args.attach_timeout) {
        Ok(t) => t,
        Err(message) => return usage(message),
    };
    let config = DriverConfig {
        host: args.endpoint.host,
        port: args.endpoint.port,
        token: args.endpoint.token,
        ..DriverConfig::default()
    };
    let driver = match Driver::listen(config).await {
        Ok(driver) => driver,
        Err(error) => return usage(error.to_string()),
    };
    eprintln!("argus call: waiting for an app on ws://{} …", driver.local_addr());
    let outcome = match driver.wait_for_app(attach_timeout).await {
        Ok(_) => driver.call(&args.method, params, timeout).await,
        Err(error) => Err(error),
    };
    driver.close().await;
    match outcome {
        Ok(result) => {
            outln!("{}", serde_json::to_string_pretty(&result).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(error) => {
            match error.code() {
                Some(code) => eprintln!("argus call: {error} (code: {code})"),
                None => eprintln!("argus call: {error}"),
            }
            ExitCode::from(1)
        }
    }
}
