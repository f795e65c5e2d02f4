//! `argus cases check|run`: a suite on one device, the way lynkeus runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use argus_cases::values::label;
use argus_cases::{CaseError, CasesConfig, suite};
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Parse and check a suite; list the case ids it expands to.
    Check(CheckArgs),
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Case files or directories (default: the configured cases directory).
    paths: Vec<PathBuf>,
    /// Print JSON for tools: every case with its file, title and step labels.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: Command) -> ExitCode {
    match command {
        Command::Check(args) => check(args),
    }
}

/// The project's configuration and the suite it names, or the problems.
pub fn load_suite(paths: &[PathBuf]) -> Result<(CasesConfig, Vec<argus_cases::Case>), Vec<CaseError>> {
    let cwd = std::env::current_dir().map_err(|e| vec![CaseError::new(".", None, e.to_string())])?;
    let lynkeus_config = std::env::var("LYNKEUS_CONFIG").ok();
    let config = CasesConfig::load(&cwd, lynkeus_config.as_deref()).map_err(|e| vec![e])?;
    let cases = suite::load(paths, &config, &cwd)?;
    Ok((config, cases))
}

pub fn report(errors: &[CaseError]) -> ExitCode {
    for error in errors {
        eprintln!("{error}");
    }
    eprintln!("the suite was refused: {} problem{}", errors.len(), if errors.len() == 1 { "" } else { "s" });
    ExitCode::from(2)
}

fn check(args: CheckArgs) -> ExitCode {
    let (_, cases) = match load_suite(&args.paths) {
        Ok(loaded) => loaded,
        Err(errors) => return report(&errors),
    };
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
        println!("{}", serde_json::to_string_pretty(&listing).unwrap_or_default());
    } else {
        for case in &cases {
            println!("{}", case.id);
        }
        eprintln!("{} case{} ok", cases.len(), if cases.len() == 1 { "" } else { "s" });
    }
    ExitCode::SUCCESS
}
