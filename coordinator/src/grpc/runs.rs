//! The Runs service: clients submit runs, watch them, relay fixtures and
//! reports, and read history.

use argus_proto::grpc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::info;

use argus_grid::owner;

use super::Services;

#[tonic::async_trait]
impl grpc::runs_server::Runs for Services {
    type WatchStream = argus_grid::watch::WatchStream;
    type ProjectStream = ReceiverStream<Result<grpc::ProjectCall, Status>>;
    type ArtifactStream = tokio_stream::Iter<std::vec::IntoIter<Result<grpc::ArtifactPiece, Status>>>;

    async fn artifact(
        &self,
        request: Request<grpc::ArtifactRequest>,
    ) -> Result<Response<Self::ArtifactStream>, Status> {
        let grpc::ArtifactRequest { run_id, path } = request.into_inner();
        let Some(artifacts) = &self.artifacts else {
            return Err(Status::failed_precondition("this coordinator keeps no screenshots or films (--artifacts)"));
        };
        let bytes = match artifacts.get(&run_id, &path).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(Status::not_found(format!("run {run_id} has no file {path}"))),
            Err(argus_store::artifacts::ArtifactError::BadPath(problem)) => {
                return Err(Status::invalid_argument(problem));
            }
            Err(error) => return Err(Status::unavailable(error.to_string())),
        };
        // Pieces well under gRPC's 4 MiB message limit; an empty file is one empty piece.
        const PIECE: usize = 1024 * 1024;
        let pieces: Vec<_> = if bytes.is_empty() {
            vec![Ok(grpc::ArtifactPiece { data: Vec::new() })]
        } else {
            bytes.chunks(PIECE).map(|data| Ok(grpc::ArtifactPiece { data: data.to_vec() })).collect()
        };
        Ok(Response::new(tokio_stream::iter(pieces)))
    }

    async fn project(
        &self,
        request: Request<Streaming<grpc::ProjectServe>>,
    ) -> Result<Response<Self::ProjectStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound.message().await?.and_then(|m| m.kind);
        let Some(grpc::project_serve::Kind::AttachRunId(run_id)) = first else {
            return Err(Status::invalid_argument("the first message on a Project stream must name the run it serves"));
        };
        self.store.get_run(&run_id).await?;
        let (tx, rx) = mpsc::channel(64);
        let attachment = self.relay.attach(&run_id, tx).await;
        let relay = self.relay.clone();
        let span = tracing::info_span!("project stream", run = %run_id);
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                info!("the run's client serves its fixtures");
                while let Ok(Some(message)) = inbound.message().await {
                    if let Some(grpc::project_serve::Kind::Answer(answer)) = message.kind {
                        relay.answered(answer).await;
                    }
                }
                info!("the run's client stopped serving its fixtures");
                relay.detach(&run_id, attachment).await;
            },
            span,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn submit(&self, request: Request<grpc::SubmitRequest>) -> Result<Response<grpc::SubmitResponse>, Status> {
        let traceparent = argus_proto::trace::extract(request.metadata());
        let submission = argus_history::rerun::submission(&self.store, request.into_inner()).await?;
        let response = argus_grid::submit::submit(&self.handle, &self.store, submission, traceparent).await?;
        Ok(Response::new(response))
    }

    async fn watch(&self, request: Request<grpc::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let grpc::WatchRequest { run_id, after_seq } = request.into_inner();
        let asked = run_id.clone();
        match self.handle.watch(run_id, after_seq).await {
            Ok(stream) => Ok(Response::new(stream)),
            // Not going: a run that finished (perhaps before a restart) is
            // replayed from the store, so a client that lost its stream at
            // the very end still gets the end.
            Err(owner::CoreError::NoRun(_)) => Ok(Response::new(self.replay_finished(&asked, after_seq).await?)),
            Err(error) => Err(error.into()),
        }
    }

    async fn cancel(&self, request: Request<grpc::CancelRequest>) -> Result<Response<grpc::CancelResponse>, Status> {
        let run_id = request.into_inner().run_id;
        self.handle.cancel(run_id).await?;
        Ok(Response::new(grpc::CancelResponse {}))
    }

    async fn explain(&self, request: Request<grpc::ExplainRequest>) -> Result<Response<grpc::ExplainResponse>, Status> {
        let run_id = request.into_inner().run_id;
        self.store.get_run(&run_id).await?;
        let (explained, groups) = argus_history::explain::explain_run(&self.store, &run_id).await?;
        let owners: std::collections::HashMap<String, String> =
            self.store.run_cases(&run_id).await?.into_iter().filter_map(|c| Some((c.case_id, c.owner?))).collect();
        Ok(Response::new(grpc::ExplainResponse {
            groups: groups
                .into_iter()
                .map(|g| grpc::FailureGroup {
                    owners: argus_cases::owners::of_cases(&g.cases, &owners),
                    cause: g.cause.to_owned(),
                    signature: g.signature,
                    case_ids: g.cases,
                })
                .collect(),
            cases: explained
                .into_iter()
                .map(|e| grpc::CaseExplained {
                    owner: owners.get(&e.case_id).cloned().unwrap_or_default(),
                    case_id: e.case_id,
                    attempt: e.attempt,
                    cause: e.cause.kind.to_owned(),
                    line: e.line,
                    signature: e.signature,
                })
                .collect(),
        }))
    }

    async fn compare(&self, request: Request<grpc::CompareRequest>) -> Result<Response<grpc::CompareResponse>, Status> {
        let request = request.into_inner();
        let changes =
            argus_history::compare::compare_runs(&self.store, &request.from_run_id, &request.to_run_id).await?;
        Ok(Response::new(grpc::CompareResponse {
            changes: changes
                .into_iter()
                .map(|c| grpc::CaseChange {
                    kind: c.kind.to_owned(),
                    case_id: c.case_id,
                    platform: c.platform,
                    from_result: c.from_result.unwrap_or_default(),
                    to_result: c.to_result.unwrap_or_default(),
                    from_cause: c.from_cause.unwrap_or_default(),
                    to_cause: c.to_cause.unwrap_or_default(),
                    cause_changed: c.cause_changed,
                    from_ms: c.from_ms,
                    to_ms: c.to_ms,
                    spread_ms: c.spread_ms,
                })
                .collect(),
        }))
    }

    async fn mute(&self, request: Request<grpc::MuteRequest>) -> Result<Response<grpc::MuteResponse>, Status> {
        let mute = argus_history::mutes::mute(&self.store, request.into_inner(), argus_grid::time::now_ms()).await?;
        Ok(Response::new(grpc::MuteResponse { mute: Some(mute.into()) }))
    }

    async fn unmute(&self, request: Request<grpc::UnmuteRequest>) -> Result<Response<grpc::UnmuteResponse>, Status> {
        let was_muted =
            argus_history::mutes::unmute(&self.store, request.into_inner(), argus_grid::time::now_ms()).await?;
        Ok(Response::new(grpc::UnmuteResponse { was_muted }))
    }

    async fn mutes(&self, request: Request<grpc::MutesRequest>) -> Result<Response<grpc::MutesResponse>, Status> {
        let project = request.into_inner().project;
        let mutes = self.store.mutes(Some(&project).filter(|p| !p.is_empty()).map(String::as_str)).await?;
        Ok(Response::new(grpc::MutesResponse { mutes: mutes.into_iter().map(Into::into).collect() }))
    }

    async fn import(&self, request: Request<grpc::ImportRequest>) -> Result<Response<grpc::ImportResponse>, Status> {
        let request = request.into_inner();
        let ask = argus_history::import::ImportAsk {
            project: request.project,
            branch: request.branch,
            commit: request.commit,
            platform: request.platform,
            source: request.source,
            report: request.junit_xml,
        };
        let imported = argus_history::import::import_junit(&self.store, ask, argus_grid::time::now_ms()).await?;
        let dashboard_url =
            self.dashboard_url.as_ref().map(|u| format!("{u}/runs/{}", imported.run_id)).unwrap_or_default();
        Ok(Response::new(grpc::ImportResponse {
            run_id: imported.run_id,
            source: imported.source,
            cases: imported.cases,
            passed: imported.passed,
            failed: imported.failed,
            skipped: imported.skipped,
            dashboard_url,
        }))
    }

    async fn get(&self, request: Request<grpc::GetRequest>) -> Result<Response<grpc::RunSummary>, Status> {
        let run = self.store.get_run(&request.into_inner().run_id).await?;
        Ok(Response::new(summary(run)))
    }

    async fn list(&self, request: Request<grpc::ListRequest>) -> Result<Response<grpc::ListResponse>, Status> {
        let limit = match request.into_inner().limit {
            0 => 20,
            n => n.min(500),
        };
        let runs = self.store.list_runs(limit).await?;
        Ok(Response::new(grpc::ListResponse { runs: runs.into_iter().map(summary).collect() }))
    }
}

impl Services {
    /// A finished run's record after `after_seq`, and its end.
    async fn replay_finished(&self, run_id: &str, after_seq: u64) -> Result<argus_grid::watch::WatchStream, Status> {
        let run = self.store.get_run(run_id).await?;
        if run.finished_at.is_none() {
            return Err(Status::unavailable(format!("run {run_id} is being taken up again; watch again shortly")));
        }
        let rows = self.store.run_log(run_id).await?;
        let log = argus_grid::watch::from_log(&rows);
        let end = argus_grid::watch::run_finished(log.last().map_or(1, |u| u.seq + 1), run.manifest_json);
        let (mut watcher, stream) = argus_grid::watch::Watcher::new(log.len() + 1);
        for update in log.iter().filter(|u| u.seq > after_seq) {
            watcher.send(update);
        }
        watcher.send(&end);
        Ok(stream)
    }
}

fn summary(run: argus_store::RunRow) -> grpc::RunSummary {
    grpc::RunSummary {
        run_id: run.id,
        manifest_json: run.manifest_json,
        project: run.project,
        branch: run.branch.unwrap_or_default(),
        commit: run.commit_sha.unwrap_or_default(),
        result: run.result.unwrap_or_default(),
        waiting_reason: run.waiting_reason.unwrap_or_default(),
        muted_failed: run.muted_failed.unwrap_or(0).max(0) as u64,
        rerun_of: run.rerun_of.unwrap_or_default(),
    }
}
