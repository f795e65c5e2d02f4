//! `argus cases mute|unmute|muted`: a case whose failure should not fail
//! runs while someone fixes it. It still runs and is recorded.

use super::*;

#[derive(clap::Args)]
pub struct MuteArgs {
    #[command(flatten)]
    view: ViewArgs,
    /// The case id, as `argus cases check` lists it.
    case: String,
    /// The project it belongs to [default: the folder this runs from, as
    /// for `argus run`].
    #[arg(long, env = "ARGUS_PROJECT")]
    project: Option<String>,
    /// Why it is muted: shown wherever its failure is let through.
    #[arg(long)]
    reason: String,
    /// Muted through this day (YYYY-MM-DD, UTC) or until this time (RFC
    /// 3339); without it, until it has passed enough times in a row on the
    /// default branch, or is unmuted.
    #[arg(long, value_name = "DATE", value_parser = argus_history::mutes::parse_until)]
    until: Option<i64>,
    /// Who looks after it.
    #[arg(long)]
    owner: Option<String>,
    /// Who mutes it [default: $USER].
    #[arg(long, env = "ARGUS_USER")]
    by: Option<String>,
}

#[derive(clap::Args)]
pub struct UnmuteArgs {
    #[command(flatten)]
    view: ViewArgs,
    /// The case id.
    case: String,
    #[arg(long, env = "ARGUS_PROJECT")]
    project: Option<String>,
    /// Why (kept with the unmute).
    #[arg(long)]
    reason: Option<String>,
    /// Who unmutes it [default: $USER].
    #[arg(long, env = "ARGUS_USER")]
    by: Option<String>,
}

#[derive(clap::Args)]
pub struct MutedArgs {
    #[command(flatten)]
    view: ViewArgs,
    /// Only this project's [default: every project's].
    #[arg(long, env = "ARGUS_PROJECT")]
    project: Option<String>,
}

fn who(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok()).unwrap_or_default()
}

async fn client(
    view: &ViewArgs,
    command: &str,
    matches: &clap::ArgMatches,
) -> Result<RunsClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>>, ExitCode> {
    let target = view.target(command, matches).map_err(|e| failed(command, e))?;
    let (channel, bearer) = channel(&target).await.map_err(|e| failed(command, e))?;
    Ok(RunsClient::with_interceptor(channel, bearer))
}

pub async fn mute(args: MuteArgs, matches: &clap::ArgMatches) -> ExitCode {
    let mut client = match client(&args.view, "cases mute", matches).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let request = grpc::MuteRequest {
        project: args.project.unwrap_or_else(crate::cases::default_project),
        case_id: args.case,
        reason: args.reason,
        owner: args.owner.unwrap_or_default(),
        until_unix_ms: args.until,
        by: who(args.by),
    };
    match client.mute(request).await {
        Ok(answer) => {
            let mute = answer.into_inner().mute.unwrap_or_default();
            outln!("{} muted in {}: {}", mute.case_id, mute.project, ends(&mute));
            ExitCode::SUCCESS
        }
        Err(status) => failed("cases mute", status.message()),
    }
}

pub async fn unmute(args: UnmuteArgs, matches: &clap::ArgMatches) -> ExitCode {
    let mut client = match client(&args.view, "cases unmute", matches).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let project = args.project.unwrap_or_else(crate::cases::default_project);
    let request = grpc::UnmuteRequest {
        project: project.clone(),
        case_id: args.case.clone(),
        by: who(args.by),
        reason: args.reason.unwrap_or_default(),
    };
    match client.unmute(request).await {
        Ok(answer) if answer.get_ref().was_muted => {
            outln!("{} unmuted in {project}", args.case);
            ExitCode::SUCCESS
        }
        Ok(_) => failed("cases unmute", format!("{} is not muted in {project}", args.case)),
        Err(status) => failed("cases unmute", status.message()),
    }
}

pub async fn muted(args: MutedArgs, matches: &clap::ArgMatches) -> ExitCode {
    let mut client = match client(&args.view, "cases muted", matches).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let request = grpc::MutesRequest { project: args.project.unwrap_or_default() };
    let mutes = match client.mutes(request).await {
        Ok(answer) => answer.into_inner().mutes,
        Err(status) => return failed("cases muted", status.message()),
    };
    if mutes.is_empty() {
        outln!("(no case is muted)");
        return ExitCode::SUCCESS;
    }
    outln!("{:<12} {:<32} {:<14} {:<12} WHY · UNTIL", "PROJECT", "CASE", "OWNER", "BY");
    for mute in &mutes {
        let owner = if mute.owner.is_empty() { "-" } else { &mute.owner };
        outln!(
            "{:<12} {:<32} {:<14} {:<12} {} · {}",
            mute.project,
            mute.case_id,
            owner,
            mute.muted_by,
            mute.reason,
            ends(mute)
        );
    }
    ExitCode::SUCCESS
}

/// When a mute ends.
fn ends(mute: &grpc::MutedCase) -> String {
    match mute.until_unix_ms {
        Some(until) => format!("until {}", argus_grid::time::iso(until)),
        None => "until it passes enough times in a row on the default branch".into(),
    }
}
