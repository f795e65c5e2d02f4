//! The Submit `argus run` sends: the suite here, or an earlier run's failed
//! cases, with the selector, owners and where it comes from.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use argus_cases::format::label;
use argus_cases::runner::{LocalProject, needs_project};
use argus_cases::{CaseError, CasesConfig};
use argus_proto::grpc;

use crate::cases::{check_fixtures, load_suite, report};

use super::*;

/// A local grid's folder (its database and the pictures of its runs):
/// removed once the run is over, as what the run keeps was written to
/// `--out` (every `argus run --ports` left one in the temporary folder).
pub(super) struct LocalDir(pub(super) std::path::PathBuf);

impl Drop for LocalDir {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.0)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("argus run: cannot remove the local grid's folder {}: {error}", self.0.display());
        }
    }
}

/// A run of the suite here: its case files and configuration, and the
/// project's side (fixtures, exec) when its cases need one.
pub(super) async fn local_request(
    args: &RunArgs,
) -> Result<(grpc::SubmitRequest, Option<Arc<LocalProject>>), ExitCode> {
    let (cases_config, suite) = match load_suite(&args.paths) {
        Ok(loaded) => loaded,
        Err(errors) => return Err(report(&errors)),
    };
    let cases = &suite.cases;
    // Fixtures and exec commands run here, where the suite and its
    // credentials are; the workers relay each call to this process.
    let project_steps: Vec<CaseError> = cases
        .iter()
        .flat_map(|case| {
            case.all_steps().filter(|step| needs_project(step, &cases_config)).map(move |step| {
                CaseError::new(
                    &case.file,
                    Some(step.line),
                    format!("{}: `{}` runs on the project's side (fixtures or exec)", case.id, label(step)),
                )
            })
        })
        .collect();
    let project = if project_steps.is_empty() {
        None
    } else if args.no_fixtures || args.detach {
        let why = if args.no_fixtures { "--no-fixtures" } else { "a detached run" };
        for step in &project_steps {
            eprintln!("{step}");
        }
        eprintln!(
            "the suite was refused: with {why} nothing serves fixtures and exec steps; {} step{} need{} them",
            project_steps.len(),
            if project_steps.len() == 1 { "" } else { "s" },
            if project_steps.len() == 1 { "s" } else { "" }
        );
        return Err(ExitCode::from(2));
    } else {
        let project = Arc::new(LocalProject::of(&cases_config));
        if let Err(code) = check_fixtures(&project, cases, &cases_config).await {
            project.close().await;
            return Err(code);
        }
        Some(project)
    };
    let Ok(cwd) = std::env::current_dir() else { return Err(usage("cannot read the current directory")) };
    let files: BTreeSet<&str> = cases.iter().map(|c| c.file.as_str()).collect();
    let mut sources = Vec::new();
    for file in files {
        match std::fs::read_to_string(suite.path_of(file)) {
            Ok(source) => sources.push(grpc::CaseFile { path: file.to_owned(), source }),
            Err(error) => return Err(usage(format!("{file}: {error}"))),
        }
    }
    let config = match CasesConfig::section_json(&cwd, std::env::var("LYNKEUS_CONFIG").ok().as_deref()) {
        Ok(config) => config,
        Err(error) => return Err(usage(error)),
    };
    let (branch, commit) = git_info();
    let request = grpc::SubmitRequest {
        cases: sources,
        config_json: config.to_string(),
        selector: Some(selector(args)),
        retries: if args.once { 0 } else { args.retries },
        project: args.project.clone().unwrap_or_else(crate::cases::default_project),
        branch,
        commit,
        trigger: trigger(),
        priority: args.priority,
        detach: args.detach,
        rerun_failed_of: String::new(),
        rerun_muted: false,
        testowners: testowners(&cwd)?,
    };
    Ok((request, project))
}

/// A run of the cases that failed in run `of`, from the files that run was
/// submitted with (the coordinator has them); selector, project, branch
/// and commit are that run's unless given here. The project's side is
/// served from here, as for any run.
pub(super) fn rerun_request(
    args: &RunArgs,
    of: &str,
) -> Result<(grpc::SubmitRequest, Option<Arc<LocalProject>>), ExitCode> {
    let project = if args.no_fixtures || args.detach {
        None
    } else {
        let Ok(cwd) = std::env::current_dir() else { return Err(usage("cannot read the current directory")) };
        match CasesConfig::load(&cwd, std::env::var("LYNKEUS_CONFIG").ok().as_deref()) {
            Ok(config) => Some(Arc::new(LocalProject::of(&config))),
            Err(error) => return Err(report(&[error])),
        }
    };
    let (branch, commit) = git_info();
    let given = selector(args);
    let Ok(cwd) = std::env::current_dir() else { return Err(usage("cannot read the current directory")) };
    let request = grpc::SubmitRequest {
        selector: Some(given),
        retries: if args.once { 0 } else { args.retries },
        project: args.project.clone().unwrap_or_default(),
        branch,
        commit,
        trigger: trigger(),
        priority: args.priority,
        detach: args.detach,
        rerun_failed_of: of.to_owned(),
        rerun_muted: args.rerun_muted,
        testowners: testowners(&cwd)?,
        ..Default::default()
    };
    Ok((request, project))
}

/// The project's TESTOWNERS (here, where the project runs from), checked
/// as the coordinator will; empty when there is none.
pub(super) fn testowners(project: &std::path::Path) -> Result<String, ExitCode> {
    let path = project.join(argus_cases::owners::FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(error) => return Err(usage(format!("{}: {error}", path.display()))),
    };
    if let Err(problems) = argus_cases::owners::Owners::parse(&text) {
        for problem in &problems {
            eprintln!("{problem}");
        }
        return Err(usage(format!("{}: fix it, or remove it to run without owners", path.display())));
    }
    Ok(text)
}

/// The devices the flags ask for (empty: any, or a rerun's own).
pub(super) fn selector(args: &RunArgs) -> grpc::Selector {
    grpc::Selector {
        platform: args.selector_platform.clone().unwrap_or_default(),
        labels: args.labels.iter().cloned().collect(),
        app: args.app.clone().unwrap_or_default(),
    }
}

/// Who started the run: the CI job, else `argus run`.
pub(super) fn trigger() -> String {
    std::env::var("GITHUB_RUN_ID").map(|id| format!("github run {id}")).unwrap_or_else(|_| "argus run".into())
}
