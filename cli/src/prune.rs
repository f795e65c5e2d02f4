//! `argus prune --older-than 90d`: removes whole runs (attempts, steps,
//! leases, files, pictures) and WebDriver sessions older than that from the
//! coordinator's database, in transactions of bounded size, while the grid
//! goes on. The flaky page's per-case-day summary stays.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use argus_store::Store;
use argus_store::prune;

use argus_coordinator::config::CoordinatorSettings;

use crate::grid_commands::{open_artifacts, with_secret_files};
use crate::settings;

/// The database and artifacts come from the flags, the variables, or the
/// `[coordinator]` table of argus.toml, as the coordinator reads them.
#[derive(clap::Args, serde::Serialize)]
pub struct PruneArgs {
    /// Remove runs (and WebDriver sessions) that started longer ago than
    /// this: a whole number and a unit, 90d, 12h, 30m or 0s.
    #[arg(long, value_name = "AGE", value_parser = prune::parse_age)]
    #[serde(skip)]
    older_than: Duration,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    #[serde(skip)]
    dry_run: bool,
    /// The configuration file (default: argus.toml here, when there is one):
    /// its [coordinator] table.
    #[arg(long, env = "ARGUS_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// The coordinator's database: postgres://… or sqlite:FILE.
    #[arg(long, env = "ARGUS_DATABASE_URL", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url: Option<String>,
    /// The database URL read from a file, in place of --database-url.
    #[arg(long, env = "ARGUS_DATABASE_URL_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url_file: Option<PathBuf>,
    /// The coordinator's artifacts folder, whose pruned runs' pictures go too.
    #[arg(long, env = "ARGUS_ARTIFACTS", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    artifacts: Option<PathBuf>,
}

pub async fn run(args: PruneArgs, matches: &clap::ArgMatches) -> ExitCode {
    let failed = |error: String| {
        eprintln!("argus prune: {error}");
        ExitCode::from(2)
    };
    let loaded = match settings::load::<CoordinatorSettings>(
        "prune",
        "coordinator",
        args.config.as_deref(),
        &args,
        matches,
        &[],
    ) {
        Ok(loaded) => loaded,
        Err(error) => return failed(error),
    };
    let settings = match with_secret_files(loaded) {
        Ok(settings) => settings,
        Err(error) => return failed(error),
    };
    let store = match Store::open(&settings.database_url).await {
        Ok(store) => store,
        Err(error) => return failed(error.to_string()),
    };
    let cutoff = prune::cutoff_from_now(args.older_than);
    let before = argus_dashboard::view::iso(cutoff);
    let outcome = if args.dry_run {
        store.prunable(cutoff).await.map(|p| ("would remove", p))
    } else {
        let artifacts = match open_artifacts(&settings.artifacts) {
            Ok(artifacts) => artifacts,
            Err(error) => return failed(format!("artifacts: {error}")),
        };
        prune::prune(&store, Some(&artifacts), cutoff).await.map(|p| ("removed", p))
    };
    store.close().await;
    match outcome {
        Ok((did, pruned)) => {
            outln!(
                "argus prune: {did} {} run{} ({} attempts, {} steps) and {} WebDriver session{} that started before {before}; the flakiness summaries stay",
                pruned.runs,
                if pruned.runs == 1 { "" } else { "s" },
                pruned.attempts,
                pruned.steps,
                pruned.sessions,
                if pruned.sessions == 1 { "" } else { "s" },
            );
            ExitCode::SUCCESS
        }
        Err(error) => failed(error.to_string()),
    }
}
