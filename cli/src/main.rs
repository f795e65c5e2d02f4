//! `argus`: one binary, thin; each command lives in its own module.

// The coordinator, workers and simulated apps allocate and free many small
// buffers per attempt; glibc's allocator was a quarter of the grid's CPU at
// 500 devices (the grid benchmark, which uses the same allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `println!` for what a command reports on standard output. A reader that
/// has gone (`argus run … | head`) is not an error: the command goes on (a
/// run still writes its files and exits with its code), where `println!`
/// would panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout_line(format_args!($($arg)*))
    };
}

mod call;
mod cases;
mod demo;
mod demo_backend;
mod endpoint;
mod grid_commands;
mod progress;
mod prune;
mod run;
mod serve;
mod settings;
mod sim;
mod summary;
mod telemetry;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "argus", version, about = "A device grid for apps that carry the lynkeus agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How logs are written to stderr: `text` (coloured only on a terminal)
    /// or `json`, one object per line, for a log collector.
    #[arg(long, global = true, env = "ARGUS_LOG_FORMAT", value_enum, default_value_t = telemetry::LogFormat::Text)]
    log_format: telemetry::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run a simulated app that dials a driver, from an app model file.
    Sim(sim::Args),
    /// Start a driver, wait for an app, make one call and print its result.
    Call(call::Args),
    /// Check and run lynkeus case files on one device.
    #[command(subcommand)]
    Cases(cases::Command),
    /// A whole grid with simulated devices, running a 45-case suite.
    Demo(demo::DemoArgs),
    /// The demo's fixtures server (JSON lines on stdin and stdout).
    #[command(hide = true)]
    DemoBackend,
    /// Run a suite on the grid (or on a local one with --ports).
    Run(run::RunArgs),
    /// Serve the coordinator: the fleet, the scheduler and the store.
    Coordinator(grid_commands::CoordinatorArgs),
    /// Serve device slots to a coordinator.
    Worker(grid_commands::WorkerArgs),
    /// A coordinator and a worker in one process, on SQLite.
    Standalone(grid_commands::StandaloneArgs),
    /// Apply the store's migrations.
    Migrate(grid_commands::StoreArgs),
    /// Remove whole runs older than an age from the coordinator's database.
    Prune(prune::PruneArgs),
    /// The fleet: workers' devices and their state; release, quarantine, drain.
    Devices(grid_commands::DevicesArgs),
    /// Recent runs.
    Runs(grid_commands::RunsArgs),
    /// Bring another runner's results into the history.
    Import(grid_commands::ImportArgs),
    /// The runs' own app builds on the coordinator: push one, list them.
    Builds(grid_commands::BuildsArgs),
}

/// The command line's definition (the settings read variables' names off it).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Exit codes: 0 done, 1 the app answered an error, 2 usage or setup.
#[tokio::main]
async fn main() -> ExitCode {
    // The command's matches tell the settings which values came from a flag
    // and which from the environment.
    let matches = command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let sub = matches.subcommand().map(|(_, m)| m.clone()).unwrap_or_default();
    let (level, service) = match &cli.command {
        Command::Sim(_) => ("info", "argus-sim"),
        Command::Call(_) => ("warn", "argus-call"),
        Command::Cases(_) => ("warn", "argus-cases"),
        // The demo's own faults (a relaunched app, a stale backend) would
        // warn; what it prints says what happened.
        Command::Demo(_) => ("error", "argus-demo"),
        Command::DemoBackend => ("warn", "argus-demo-backend"),
        Command::Run(_) => ("warn", "argus-run"),
        Command::Coordinator(_) => ("info", "argus-coordinator"),
        Command::Worker(_) => ("info", "argus-worker"),
        Command::Standalone(_) => ("info", "argus-standalone"),
        Command::Migrate(_)
        | Command::Prune(_)
        | Command::Devices(_)
        | Command::Runs(_)
        | Command::Import(_)
        | Command::Builds(_) => ("warn", "argus"),
    };
    let telemetry = telemetry::init(level, service, cli.log_format);
    let code = match cli.command {
        Command::Sim(args) => sim::run(args).await,
        Command::Call(args) => call::run(args).await,
        Command::Cases(command) => cases::run(command, &sub).await,
        Command::Demo(args) => demo::run(args).await,
        Command::DemoBackend => demo_backend::run(),
        Command::Run(args) => run::run(args, &sub).await,
        Command::Coordinator(args) => grid_commands::coordinator(args, &sub).await,
        Command::Worker(args) => grid_commands::worker(args, &sub).await,
        Command::Standalone(args) => grid_commands::standalone(args).await,
        Command::Migrate(args) => grid_commands::migrate(args).await,
        Command::Prune(args) => prune::run(args, &sub).await,
        Command::Devices(args) => grid_commands::devices(args, &sub).await,
        Command::Runs(args) => grid_commands::runs(args, &sub).await,
        Command::Import(args) => grid_commands::import(args, &sub).await,
        Command::Builds(args) => grid_commands::builds(args, &sub).await,
    };
    telemetry.shutdown().await;
    code
}

/// Writes one line to standard output (see [`outln!`]).
fn stdout_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(error) = out.write_fmt(args).and_then(|()| out.write_all(b"\n"))
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("argus: cannot write to standard output: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_command_parses() {
        Cli::command().debug_assert();
        let lines: [&[&str]; 11] = [
            &["argus", "run", "--ports", "8123-8124", "--on-platform", "ios", "--label", "os=17", "cases"],
            &[
                "argus",
                "worker",
                "--coordinator",
                "http://127.0.0.1:7171",
                "--ports",
                "8123,8125",
                "--platform",
                "android",
            ],
            &["argus", "standalone", "--ports", "8123"],
            &["argus", "worker", "--config", "worker.toml"],
            &["argus", "coordinator", "--database-url", "sqlite:x.db", "--listen", "127.0.0.1:7000"],
            &["argus", "cases", "run", "--port", "8123", "--once"],
            &["argus", "devices"],
            &["argus", "devices", "release", "w1-8123"],
            &["argus", "devices", "quarantine", "w1-8123", "--reason", "cracked screen"],
            &["argus", "call", "ping"],
            &["argus", "sim", "--model", "m.yaml", "--port", "8123", "--log-format", "json"],
        ];
        for line in lines {
            if let Err(error) = Cli::try_parse_from(line) {
                panic!("{line:?}: {error}");
            }
        }
    }
}
