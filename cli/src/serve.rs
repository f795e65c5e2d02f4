//! `argus run` serves its run's fixtures and exec commands: the workers'
//! calls come down the coordinator's `Runs.Project` stream and are answered
//! by the project's own fixtures process and shell, here, with the same
//! environment as `argus cases run`. A lost stream is dialled again (after a
//! coordinator restart the run's calls wait for it) until the run ends.

use std::sync::Arc;
use std::time::Duration;

use argus_cases::runner::{LocalProject, ProjectSide};
use argus_proto::grpc::{self, project_answer, project_call, project_serve, runs_client::RunsClient};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::grid_commands::{Target, channel};

/// How long to wait before dialling a lost stream again.
const REDIAL: Duration = Duration::from_secs(1);

pub async fn serve_project(target: Target, run_id: String, project: Arc<LocalProject>, stop: CancellationToken) {
    let mut calls = JoinSet::new();
    loop {
        match attach(&target, &run_id).await {
            Ok((mut stream, answers)) => loop {
                let call = tokio::select! {
                    _ = stop.cancelled() => return,
                    call = stream.message() => call,
                };
                match call {
                    Ok(Some(call)) => {
                        let (project, answers) = (project.clone(), answers.clone());
                        calls.spawn(async move {
                            let answer = answer(project.as_ref(), call).await;
                            let _ = answers
                                .send(grpc::ProjectServe { kind: Some(project_serve::Kind::Answer(answer)) })
                                .await;
                        });
                    }
                    Ok(None) => break,
                    Err(status) => {
                        debug!(error = %status.message(), "the project stream was lost; dialling again");
                        break;
                    }
                }
                // Finished calls are reaped as the stream goes on.
                while calls.try_join_next().is_some() {}
            },
            Err(error) => warn!(%error, "cannot serve the run's fixtures yet; trying again"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(REDIAL) => {}
        }
    }
}

type Calls = tonic::Streaming<grpc::ProjectCall>;

async fn attach(target: &Target, run_id: &str) -> Result<(Calls, mpsc::Sender<grpc::ProjectServe>), String> {
    let (channel, bearer) = channel(target).await?;
    let mut client = RunsClient::with_interceptor(channel, bearer);
    let (answers, outbound) = mpsc::channel(64);
    let attach = grpc::ProjectServe { kind: Some(project_serve::Kind::AttachRunId(run_id.to_owned())) };
    answers.send(attach).await.map_err(|_| "the outbound stream closed".to_owned())?;
    let stream = client.project(ReceiverStream::new(outbound)).await.map_err(|s| s.message().to_owned())?;
    Ok((stream.into_inner(), answers))
}

/// One call, answered by this machine's project.
pub async fn answer(project: &dyn ProjectSide, call: grpc::ProjectCall) -> grpc::ProjectAnswer {
    let outcome = match call.kind {
        Some(project_call::Kind::Fixture(fixture)) => {
            match serde_json::from_str::<Map<String, Value>>(&fixture.params_json) {
                Err(error) => project_answer::Outcome::Error(format!("its params are not a JSON object: {error}")),
                Ok(params) => match project.fixture(&fixture.command, &params).await {
                    Ok(answer) => project_answer::Outcome::AnswerJson(answer.to_string()),
                    Err(error) => project_answer::Outcome::Error(error.message),
                },
            }
        }
        Some(project_call::Kind::Exec(run)) => match project.exec(&run).await {
            Ok(output) => project_answer::Outcome::Exec(grpc::ExecOutput {
                code: output.code,
                stdout: output.stdout,
                stderr: output.stderr,
            }),
            Err(error) => project_answer::Outcome::Error(error.to_string()),
        },
        None => project_answer::Outcome::Error("the call names neither a fixture nor an exec command".into()),
    };
    grpc::ProjectAnswer { call_id: call.call_id, outcome: Some(outcome) }
}
