//! `argus run`: a suite on the grid. The suite is checked here before it is
//! sent; progress streams back; the run directory and JUnit are written
//! here; the exit code says how it went (0 passed, 1 a case failed, 2 the
//! suite, the connection or the fleet could not run it).

//!
//! `mod.rs` holds the arguments and the command; `request.rs` builds the
//! Submit (here, or a rerun of an earlier run); `watch.rs` follows the run
//! to its end (reconnecting, cancelling on a signal) and writes what it
//! keeps; `output.rs` prints a finished attempt.

mod output;
mod request;
mod watch;

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cases::OutputArgs;
use crate::grid_commands::{SlotArgs, Target, print_slots, start_local};

use output::print_line;
use request::{LocalDir, local_request, rerun_request};
pub use watch::{WatchOptions, execute, wait_for_devices};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Case files or directories (default: the configured cases directory).
    paths: Vec<PathBuf>,
    /// The coordinator's gRPC URL, or several separated by commas (an
    /// active coordinator and its standbys); without it, `--ports` runs a
    /// grid in this process.
    #[arg(long, env = "ARGUS_COORDINATOR")]
    coordinator: Option<String>,
    /// The configuration file (default: argus.toml here, when there is one):
    /// its [client] table (coordinator, token, tls_ca, project).
    #[arg(long, env = "ARGUS_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the client's settings in effect and where each came from
    /// (secrets hidden), then exit.
    #[arg(long)]
    print_config: bool,
    /// The coordinator's client token, if it requires one.
    #[arg(long, env = "ARGUS_CLIENT_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The client token read from a file (only its owner and group may read
    /// it), in place of --token.
    #[arg(long, env = "ARGUS_CLIENT_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The CA certificate (PEM) of an https:// coordinator, if private.
    #[arg(long, env = "ARGUS_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// Only devices of this platform.
    #[arg(long = "on-platform", env = "ARGUS_ON_PLATFORM", value_name = "PLATFORM")]
    selector_platform: Option<String>,
    /// Only devices with this label: `--label os=17` (repeatable).
    #[arg(long = "label", env = "ARGUS_LABELS", value_delimiter = ',', value_parser = parse_label, value_name = "K=V")]
    labels: Vec<(String, String)>,
    /// Only devices whose app says this name in its hello.
    #[arg(long, env = "ARGUS_APP")]
    app: Option<String>,
    /// How many times a failed case runs again.
    #[arg(long, env = "ARGUS_RETRIES", default_value_t = 1)]
    retries: u32,
    /// No retries.
    #[arg(long, conflicts_with = "retries")]
    once: bool,
    /// This run's share of the fleet against other runs (1-100).
    #[arg(long, env = "ARGUS_PRIORITY", default_value_t = 1)]
    priority: u32,
    /// Submit the run and return: it goes on without this client (a run
    /// that is not detached is cancelled when its client goes away). A
    /// suite with fixture or exec steps cannot be detached: they run here.
    #[arg(long, env = "ARGUS_DETACH")]
    detach: bool,
    /// Do not start the project's fixtures command here. Cases with a
    /// fixture, `assert` or `exec` step are then refused (exit 2), each named.
    #[arg(long, env = "ARGUS_NO_FIXTURES")]
    no_fixtures: bool,
    /// If the coordinator stops answering, dial it again for this long (in
    /// seconds) and resume watching where the run was.
    #[arg(long, env = "ARGUS_RECONNECT_FOR", default_value_t = 120.0, value_name = "SECONDS")]
    reconnect_for: f64,
    /// When no device can take the run's cases (all matching devices
    /// quarantined, drained or gone), wait this long (in seconds) for one,
    /// then cancel the run and exit 2.
    #[arg(long, env = "ARGUS_WAIT_FOR_DEVICES", default_value_t = 300.0, value_name = "SECONDS")]
    wait_for_devices: f64,
    /// The project the run is filed under in the history (default: the
    /// name of the folder it runs from).
    #[arg(long, env = "ARGUS_PROJECT")]
    project: Option<String>,
    /// Run again the cases that failed in this run, from the case files it
    /// was submitted with (kept by the coordinator, whatever the files here
    /// say now), on its devices' selector unless --on-platform, --label or
    /// --app say otherwise. Muted cases that failed only with --rerun-muted.
    #[arg(long, value_name = "RUN_ID", conflicts_with = "paths")]
    rerun_failed: Option<String>,
    /// With --rerun-failed: muted cases that failed run again too.
    #[arg(long, requires = "rerun_failed")]
    rerun_muted: bool,
    #[command(flatten)]
    output: OutputArgs,
    /// Local grid: how long to wait for the first device, in seconds.
    #[arg(long, env = "ARGUS_ATTACH_TIMEOUT", default_value_t = 15.0, value_name = "SECONDS")]
    attach_timeout: f64,
    #[command(flatten)]
    slots: SlotArgs,
}

pub(super) fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{text:?}: a label is key=value")),
    }
}

pub(super) fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("argus run: {message}");
    ExitCode::from(2)
}

/// The branch and commit: from the usual CI variables, else from git.
pub fn git_info() -> (String, String) {
    let env = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()));
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let branch = env(&[
        "GITHUB_HEAD_REF",
        "GITHUB_REF_NAME",
        "CI_COMMIT_REF_NAME",
        "BUILDKITE_BRANCH",
        "CIRCLE_BRANCH",
        "BRANCH_NAME",
    ])
    .or_else(|| git(&["rev-parse", "--abbrev-ref", "HEAD"]))
    .unwrap_or_default();
    let commit = env(&["GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1", "GIT_COMMIT"])
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_default();
    (branch, commit)
}

pub async fn run(mut args: RunArgs, matches: &clap::ArgMatches) -> ExitCode {
    // The connection and the project come in layers: flags, variables, the
    // [client] table of argus.toml.
    let given = crate::settings::ClientGiven {
        coordinator: args.coordinator.clone(),
        token: args.token.clone(),
        token_file: args.token_file.clone(),
        tls_ca: args.tls_ca.clone(),
        project: args.project.clone(),
    };
    let loaded = match crate::settings::load::<crate::settings::ClientSettings>(
        "run",
        "client",
        args.config.as_deref(),
        &given,
        matches,
        &[],
    ) {
        Ok(loaded) => loaded,
        Err(error) => return usage(error),
    };
    if args.print_config {
        crate::settings::print(&loaded);
        return ExitCode::SUCCESS;
    }
    let client = match loaded.settings.with_secret_file() {
        Ok(client) => client,
        Err(error) => return usage(error),
    };
    (args.coordinator, args.token, args.tls_ca, args.project) =
        (client.coordinator, client.token, client.tls_ca, client.project);
    let (request, project) = match &args.rerun_failed {
        Some(of) => match rerun_request(&args, of) {
            Ok(rerun) => rerun,
            Err(code) => return code,
        },
        None => match local_request(&args).await {
            Ok(local) => local,
            Err(code) => return code,
        },
    };
    let seconds = |value: f64, flag: &str| {
        Duration::try_from_secs_f64(value).map_err(|_| format!("{flag} takes a number of seconds, not {value}"))
    };
    let watch =
        match (seconds(args.reconnect_for, "--reconnect-for"), seconds(args.wait_for_devices, "--wait-for-devices")) {
            (Ok(reconnect_for), Ok(wait_for_devices)) => WatchOptions { reconnect_for, wait_for_devices },
            (Err(error), _) | (_, Err(error)) => return usage(error),
        };
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    // A local grid's coordinator and worker, waited for once the run ends.
    let local = tokio_util::task::TaskTracker::new();
    let mut local_dir = None;
    let url = match (&args.coordinator, &args.slots.ports) {
        (Some(url), _) => url.clone(),
        (None, Some(_)) => {
            let dir = std::env::temp_dir().join(format!("argus-run-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&dir);
            local_dir = Some(LocalDir(dir.clone()));
            let database = format!("sqlite:{}", dir.join("argus.db").display());
            print_slots(&args.slots.slots());
            let listen = "127.0.0.1:0".parse().expect("an address");
            match start_local(&database, &dir.join("artifacts"), listen, None, &args.slots, &cancel, &local).await {
                Ok(url) => {
                    let Ok(wait) = Duration::try_from_secs_f64(args.attach_timeout) else {
                        return usage("--attach-timeout takes a positive number of seconds");
                    };
                    if let Err(error) = wait_for_devices(&Target::plain(&url), 1, wait).await {
                        return usage(error);
                    }
                    url
                }
                Err(error) => return usage(error),
            }
        }
        (None, None) => return usage("give --coordinator URL, or --ports 8123-8126 to run a grid in this process"),
    };
    let target = Target { url, token: args.token.clone(), ca: args.tls_ca.clone() };
    let outputs = (args.output.out.as_deref(), args.output.junit.as_deref());
    let code = execute(&target, request, project.clone(), outputs.0, outputs.1, &watch).await;
    if let Some(project) = project {
        project.close().await;
    }
    cancel.cancel();
    crate::grid_commands::stop_local(local).await;
    drop(local_dir);
    code
}
