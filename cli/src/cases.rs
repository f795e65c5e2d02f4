//! `argus cases check|run`: a suite on one device, the way lynkeus runs it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use argus_cases::format::label;
use argus_cases::report::{RunDir, junit};
use argus_cases::runner::{LocalProject, RunContext, iso_now, missing_fixtures, run_suite};
use argus_cases::{CaseError, CasesConfig, suite};
use argus_proto::run::{CaseResult, RunCase, StepStatus};
use argus_worker::driver::{Driver, DriverConfig};
use serde_json::json;

use crate::endpoint::Endpoint;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Parse and check a suite; list the case ids it expands to.
    Check(CheckArgs),
    /// Run a suite on one device through one driver.
    Run(RunArgs),
    /// Mute a case on the grid: it still runs and is recorded, but its
    /// failure no longer fails runs (they exit 0 when only muted cases
    /// failed; JUnit marks it skipped with the reason).
    Mute(crate::grid_commands::MuteArgs),
    /// Unmute a muted case.
    Unmute(crate::grid_commands::UnmuteArgs),
    /// The cases muted on the grid.
    Muted(crate::grid_commands::MutedArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Case files or directories (default: the configured cases directory).
    paths: Vec<PathBuf>,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Run each case once: no retry of a failed case.
    #[arg(long, conflicts_with = "retries")]
    once: bool,
    /// How many times a failed case runs again.
    #[arg(long, default_value_t = 1)]
    retries: u32,
    /// Keep running a case's steps after one fails (a failed setup step still stops it).
    #[arg(long = "continue")]
    keep_going: bool,
    /// Picture the screen after every `app.*` or macro step that passed or
    /// failed, into `<case id>/NN-<step>.png` under --out (the app's
    /// `screenshot` command; the simulated app has one).
    #[arg(long, requires = "out")]
    screenshots: bool,
    #[command(flatten)]
    output: OutputArgs,
    /// How long to wait for the app to attach, in seconds.
    #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
    attach_timeout: f64,
}

/// Where a run's results go; `argus cases run` and `argus run` share them.
#[derive(clap::Args)]
pub struct OutputArgs {
    /// Write the lynkeus run directory here: run.json and cases.jsonl (on
    /// the grid, each line adds the `device` it ran on).
    #[arg(long, env = "ARGUS_OUT", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long, env = "ARGUS_JUNIT", value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Case files or directories (default: the configured cases directory).
    paths: Vec<PathBuf>,
    /// Print JSON for tools: every case with its file, title and step labels.
    #[arg(long)]
    json: bool,
    /// Refuse what only Argus accepts (such as `app.reset`, or `testId` on
    /// `app.press`), so the suite also runs under plain lynkeus. Without it,
    /// each is a warning.
    #[arg(long)]
    strict_lynkeus: bool,
}

pub async fn run(command: Command, matches: &clap::ArgMatches) -> ExitCode {
    // The subcommand's own flags, for the settings' layers.
    let matches = matches.subcommand().map(|(_, m)| m.clone()).unwrap_or_default();
    let matches = &matches;
    match command {
        Command::Check(args) => check(args),
        Command::Run(args) => run_cases(args).await,
        Command::Mute(args) => crate::grid_commands::mute(args, matches).await,
        Command::Unmute(args) => crate::grid_commands::unmute(args, matches).await,
        Command::Muted(args) => crate::grid_commands::muted(args, matches).await,
    }
}

/// The project's configuration and the suite it names, or the problems.
pub fn load_suite(paths: &[PathBuf]) -> Result<(CasesConfig, suite::Suite), Vec<CaseError>> {
    let cwd = std::env::current_dir().map_err(|e| vec![CaseError::new(".", None, e.to_string())])?;
    let lynkeus_config = std::env::var("LYNKEUS_CONFIG").ok();
    let config = CasesConfig::load(&cwd, lynkeus_config.as_deref()).map_err(|e| vec![e])?;
    let suite = suite::load(paths, &config, &cwd)?;
    Ok((config, suite))
}

/// The project a suite belongs to when none is named: the folder it runs
/// from. `argus run` submits under it, and JUnit names its suite after it.
pub fn default_project() -> String {
    std::env::current_dir()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

pub fn report(errors: &[CaseError]) -> ExitCode {
    for error in errors {
        eprintln!("{error}");
    }
    eprintln!("the suite was refused: {} problem{}", errors.len(), if errors.len() == 1 { "" } else { "s" });
    ExitCode::from(2)
}

fn check(args: CheckArgs) -> ExitCode {
    let cases = match load_suite(&args.paths) {
        Ok((_, suite)) => suite.cases,
        Err(errors) => return report(&errors),
    };
    let extensions = suite::lynkeus_extensions(&cases);
    if args.strict_lynkeus && !extensions.is_empty() {
        return report(&extensions);
    }
    for warning in extensions.iter().chain(&suite::ignored_arguments(&cases)) {
        eprintln!("warning: {warning}");
    }
    if args.json {
        let listing: Vec<_> = cases
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "file": c.file,
                    "title": c.title,
                    "setup": c.setup.iter().map(label).collect::<Vec<_>>(),
                    "steps": c.steps.iter().map(label).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&listing).unwrap_or_default());
    } else {
        for case in &cases {
            outln!("{}", case.id);
        }
        eprintln!("{} case{} ok", cases.len(), if cases.len() == 1 { "" } else { "s" });
    }
    ExitCode::SUCCESS
}

fn setup_failed(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("argus cases run: {message}");
    ExitCode::from(2)
}

async fn run_cases(args: RunArgs) -> ExitCode {
    let (config, cases) = match load_suite(&args.paths) {
        Ok((config, suite)) => (config, suite.cases),
        Err(errors) => return report(&errors),
    };
    let Ok(attach_timeout) = Duration::try_from_secs_f64(args.attach_timeout) else {
        return setup_failed(format!(
            "--attach-timeout takes a positive number of seconds, not {}",
            args.attach_timeout
        ));
    };
    let project = Arc::new(LocalProject::of(&config));
    let run = RunContext {
        config,
        project: project.clone(),
        collect_events: args.output.out.is_some(),
        keep_going: args.keep_going,
        pictures: args.output.out.clone().filter(|_| args.screenshots).map(|root| argus_cases::runner::Pictures {
            root,
            every_step: true,
            camera: None,
            film_started: None,
        }),
        // A local run keeps no history to compare with.
        observe: false,
    };
    let code = tokio::select! {
        code = run_with_fixtures(&args, &cases, &run, &project, attach_timeout) => code,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("argus cases run: interrupted");
            ExitCode::from(130)
        }
    };
    project.close().await;
    code
}

/// Asks the fixtures server which fixtures it serves (`lynkeus.describe`):
/// a case that names another is refused before anything runs (exit 1), as
/// lynkeus does. A server that does not describe itself is not checked.
pub async fn check_fixtures(
    project: &LocalProject,
    cases: &[argus_cases::Case],
    config: &argus_cases::CasesConfig,
) -> Result<(), ExitCode> {
    let Some(fixtures) = &project.fixtures else { return Ok(()) };
    match fixtures.describe().await {
        Err(error) => Err(setup_failed(error)),
        Ok(Some(served)) => {
            let refused: Vec<String> = cases
                .iter()
                .flat_map(|case| {
                    missing_fixtures(case, &served, config)
                        .into_iter()
                        .map(move |name| format!("{}: no fixture {name}", case.id))
                })
                .collect();
            if refused.is_empty() {
                return Ok(());
            }
            for line in &refused {
                eprintln!("{line}");
            }
            eprintln!("the fixtures server serves: {}", served.join(", "));
            Err(ExitCode::from(1))
        }
        Ok(None) => Ok(()),
    }
}

async fn run_with_fixtures(
    args: &RunArgs,
    cases: &[argus_cases::Case],
    run: &RunContext,
    project: &LocalProject,
    attach_timeout: Duration,
) -> ExitCode {
    if let Err(code) = check_fixtures(project, cases, &run.config).await {
        return code;
    }
    let endpoint = &args.endpoint;
    let config = DriverConfig {
        host: endpoint.host.clone(),
        port: endpoint.port,
        token: endpoint.token.clone(),
        ..DriverConfig::default()
    };
    let driver = match Driver::listen(config).await {
        Ok(driver) => driver,
        Err(error) => return setup_failed(error),
    };
    eprintln!("waiting for an app on ws://{} …", driver.local_addr());
    let hello = match driver.wait_for_app(attach_timeout).await {
        Ok(hello) => hello,
        Err(error) => return setup_failed(error),
    };
    eprintln!(
        "attached: {} on {}{}, {} case{}",
        hello.app_name().unwrap_or("an app"),
        hello.platform,
        if hello.native { " (native)" } else { "" },
        cases.len(),
        if cases.len() == 1 { "" } else { "s" }
    );
    let mut run_dir = match &args.output.out {
        Some(dir) => match RunDir::create(dir, iso_now()) {
            Ok(run_dir) => Some(run_dir),
            Err(error) => return setup_failed(error),
        },
        None => None,
    };
    let retries = if args.once { 0 } else { args.retries };
    let mut write_error: Option<String> = None;
    let attempts = run_suite(&driver, cases, run, retries, |attempt| {
        print_attempt(attempt);
        if let Some(run_dir) = run_dir.as_mut()
            && let Err(error) = run_dir.add(attempt)
        {
            write_error.get_or_insert(error.to_string());
        }
    })
    .await;
    let hello = driver.hello().unwrap_or(hello);
    driver.close().await;
    if let Some(run_dir) = run_dir.as_mut()
        && let Err(error) = run_dir.finish(iso_now(), Some(hello.platform.clone()), Some(hello.native))
    {
        write_error.get_or_insert(error.to_string());
    }
    if let Some(path) = &args.output.junit
        && let Err(error) = std::fs::write(path, junit(&default_project(), &attempts))
    {
        write_error.get_or_insert(format!("{}: {error}", path.display()));
    }
    let failed = summary(&attempts);
    if let Some(error) = write_error {
        return setup_failed(format!("cannot write the results: {error}"));
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn print_attempt(attempt: &RunCase) {
    let seconds = attempt.ms as f64 / 1000.0;
    let retry = if attempt.attempt > 1 { format!(" (attempt {})", attempt.attempt) } else { String::new() };
    let problem = attempt.steps.iter().find(|s| matches!(s.status, StepStatus::Failed | StepStatus::Unsupported));
    match attempt.result {
        CaseResult::Passed => outln!("✓ {}{retry}  {seconds:.1}s", attempt.id),
        CaseResult::Failed => {
            outln!("✗ {}{retry}  {seconds:.1}s", attempt.id);
            if let Some(step) = problem {
                outln!("    {}: {}", step.step, step.error.as_deref().unwrap_or("failed"));
            }
            if let Some(why) = attempt.evidence.as_ref().and_then(|e| e.why.as_deref()) {
                outln!("    why: {why}");
            }
        }
        CaseResult::Unsupported => {
            let why = problem.and_then(|s| s.error.as_deref()).unwrap_or("unsupported");
            outln!("∅ {}{retry}  cannot run on this host: {why}", attempt.id);
        }
    }
}

/// Prints the summary; whether a case's final result is failed.
fn summary(attempts: &[RunCase]) -> bool {
    let totals = argus_proto::run::totals(attempts);
    let mut line = format!("{}/{} passed", totals.passed, totals.cases);
    if totals.failed > 0 {
        line.push_str(&format!(", {} failed", totals.failed));
    }
    if totals.unsupported > 0 {
        line.push_str(&format!(", {} cannot run on this host", totals.unsupported));
    }
    outln!("{line}");
    let mut last: Vec<&RunCase> = Vec::new();
    for attempt in attempts {
        match last.iter_mut().find(|c| c.id == attempt.id) {
            Some(slot) => *slot = attempt,
            None => last.push(attempt),
        }
    }
    for case in &last {
        if case.attempt > 1 && case.result == CaseResult::Passed {
            outln!("⚠ {} passed on retry", case.id);
        }
    }
    totals.failed > 0
}
