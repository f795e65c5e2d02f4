//! `argus import junit FILE`: a JUnit XML report from another runner
//! (pytest, jest-junit, Gradle, Surefire, an XCTest converter, Maestro)
//! into the grid's history, beside the lynkeus runs.

use super::*;

#[derive(clap::Args)]
pub struct ImportArgs {
    #[command(flatten)]
    view: ViewArgs,
    #[command(subcommand)]
    what: Import,
}

#[derive(clap::Subcommand)]
enum Import {
    /// A JUnit XML report (16 MiB at most).
    Junit {
        /// The report.
        file: PathBuf,
        /// The project it joins [default: the folder this runs from].
        #[arg(long, env = "ARGUS_PROJECT")]
        project: Option<String>,
        /// Its branch and commit [default: what CI or git says here].
        #[arg(long)]
        branch: Option<String>,
        #[arg(long)]
        commit: Option<String>,
        /// The platform its tests ran on (ios, android, web, …).
        #[arg(long)]
        platform: Option<String>,
        /// The runner that wrote it, when the report does not say (xctest).
        #[arg(long)]
        source: Option<String>,
    },
}

pub async fn import(args: ImportArgs, matches: &clap::ArgMatches) -> ExitCode {
    let Import::Junit { file, project, branch, commit, platform, source } = args.what;
    let matches = matches.subcommand().map(|(_, m)| m.clone()).unwrap_or_default();
    let target = match args.view.target("import", &matches) {
        Ok(target) => target,
        Err(error) => return failed("import junit", error),
    };
    let size = match std::fs::metadata(&file) {
        Ok(meta) => meta.len(),
        Err(error) => return failed("import junit", format!("{}: {error}", file.display())),
    };
    let limit = argus_history::import::MAX_REPORT_BYTES as u64;
    if size > limit {
        return failed(
            "import junit",
            format!(
                "{}: {:.1} MiB; a report may be {} MiB at most",
                file.display(),
                size as f64 / 1048576.0,
                limit >> 20
            ),
        );
    }
    let report = match std::fs::read(&file) {
        Ok(report) => report,
        Err(error) => return failed("import junit", format!("{}: {error}", file.display())),
    };
    let (git_branch, git_commit) = crate::run::git_info();
    let request = grpc::ImportRequest {
        project: project.unwrap_or_else(crate::cases::default_project),
        branch: branch.unwrap_or(git_branch),
        commit: commit.unwrap_or(git_commit),
        platform: platform.unwrap_or_default(),
        source: source.unwrap_or_default(),
        junit_xml: report,
    };
    let mut client = match channel(&target).await {
        Ok((channel, bearer)) => RunsClient::with_interceptor(channel, bearer)
            .max_encoding_message_size(argus_history::import::MAX_REPORT_BYTES + (1 << 20)),
        Err(error) => return failed("import junit", error),
    };
    match client.import(request).await {
        Ok(answer) => {
            let run = answer.into_inner();
            outln!(
                "run {}: {} report, {} case{}: {} passed, {} failed, {} skipped",
                run.run_id,
                run.source,
                run.cases,
                crate::summary::plural(run.cases as usize),
                run.passed,
                run.failed,
                run.skipped
            );
            if !run.dashboard_url.is_empty() {
                outln!("{}", run.dashboard_url);
            }
            ExitCode::SUCCESS
        }
        Err(status) => failed("import junit", format!("{}: {}", file.display(), status.message())),
    }
}
