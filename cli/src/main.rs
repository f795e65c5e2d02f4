//! `argus`: one binary, thin; each command lives in its own module.

mod call;
mod cases;
mod endpoint;
mod sim;
mod telemetry;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "argus", version, about = "A device grid for apps that carry the lynkeus agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a simulated app that dials a driver, from an app model file.
    Sim(sim::Args),
    /// Start a driver, wait for an app, make one call and print its result.
    Call(call::Args),
    /// Check and run lynkeus case files.
    #[command(subcommand)]
    Cases(cases::Command),
}

/// Exit codes: 0 done, 1 the app answered an error, 2 usage or setup.
#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => {
            telemetry::init("info");
            sim::run(args).await
        }
        Command::Call(args) => {
            telemetry::init("warn");
            call::run(args).await
        }
        Command::Cases(command) => {
            telemetry::init("warn");
            cases::run(command).await
        }
    }
}
