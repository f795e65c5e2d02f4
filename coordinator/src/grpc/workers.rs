//! The Workers service: one stream per worker, where a device's messages
//! (its updates, steps, results, answers) enter and go to the owner task.

use argus_proto::grpc::{self, worker_message};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::Services;

#[tonic::async_trait]
impl grpc::workers_server::Workers for Services {
    type LinkStream = ReceiverStream<Result<grpc::CoordinatorMessage, Status>>;

    async fn link(
        &self,
        request: Request<Streaming<grpc::WorkerMessage>>,
    ) -> Result<Response<Self::LinkStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the worker's stream ended before Register"))?;
        let Some(worker_message::Kind::Register(register)) = first.kind else {
            return Err(Status::invalid_argument("the first message on a worker's stream must be Register"));
        };
        let (tx, rx) = mpsc::channel(256);
        // Kept for the relay's answers until the worker says it is going:
        // then the stream to it must end once the owner lets go of it, and
        // not wait for the worker's side to close first.
        let mut to_worker = Some(tx.clone());
        let watch_to = tx.clone();
        let link = self.handle.worker_joined(register, tx).await?;
        let (handle, relay, calls, live) =
            (self.handle.clone(), self.relay.clone(), self.calls.clone(), self.live.clone());
        // Ends when the worker says it is going or its stream ends, so that
        // it holds the stream to the worker no longer than the link does.
        let link_done = CancellationToken::new();
        tell_watching(watch_to, live.subscribe(), link_done.clone(), &self.tasks);
        let mut files = crate::assembler::Assembler::new(self.artifacts.clone());
        let span = tracing::info_span!("worker link", worker = %link.worker, conn = link.conn);
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                let _link_done = link_done.clone().drop_guard();
                while let Ok(Some(message)) = inbound.message().await {
                    // An attempt's files are kept before its result, which
                    // follows them on the link, reaches the owner task.
                    let message = match message.kind {
                        Some(worker_message::Kind::ProjectCall(call)) => {
                            if let Some(to_worker) = &to_worker {
                                relay.call(to_worker, call).await;
                            }
                            continue;
                        }
                        Some(worker_message::Kind::GoingAway(going)) => {
                            to_worker = None;
                            link_done.cancel();
                            grpc::WorkerMessage { kind: Some(worker_message::Kind::GoingAway(going)) }
                        }
                        Some(worker_message::Kind::Artifact(piece)) => {
                            files.piece(piece).await;
                            continue;
                        }
                        Some(worker_message::Kind::DeviceAnswer(answer)) => {
                            calls.answered(answer);
                            continue;
                        }
                        Some(worker_message::Kind::Live(screen)) => {
                            live.arrived(&link.worker, screen);
                            continue;
                        }
                        Some(worker_message::Kind::Attempt(mut result)) => {
                            refuse_unreadable_record(&mut result);
                            files.settle(&mut result);
                            grpc::WorkerMessage { kind: Some(worker_message::Kind::Attempt(result)) }
                        }
                        kind => grpc::WorkerMessage { kind },
                    };
                    if handle.worker_message(link.clone(), message).await.is_err() {
                        return;
                    }
                }
                live.worker_gone(&link.worker);
                handle.worker_gone(link).await;
            },
            span,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Tells a worker whether anyone watches the live view, each time it
/// changes, until its link is done.
fn tell_watching(
    to_worker: mpsc::Sender<Result<grpc::CoordinatorMessage, Status>>,
    mut watching: tokio::sync::watch::Receiver<bool>,
    link_done: CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    let telling = async move {
        let mut told = false;
        loop {
            let now = *watching.borrow_and_update();
            if now != told {
                let watch = grpc::Watch { watching: now };
                let message = grpc::CoordinatorMessage { kind: Some(grpc::coordinator_message::Kind::Watch(watch)) };
                if to_worker.send(Ok(message)).await.is_err() {
                    return;
                }
                told = now;
            }
            tokio::select! {
                _ = link_done.cancelled() => return,
                _ = to_worker.closed() => return,
                changed = watching.changed() => if changed.is_err() { return },
            }
        }
    };
    tasks.spawn(tracing::Instrument::instrument(telling, tracing::info_span!("tell watching")));
}

/// A result whose record is not JSON runs again as an infrastructure
/// failure that says why: the store and every reader take the record as it
/// came, so it is checked here, once, for its syntax only (what the grid
/// decides on is the typed verdict beside it).
fn refuse_unreadable_record(result: &mut grpc::AttemptResult) {
    if result.infrastructure_failure {
        return;
    }
    if let Err(error) = serde_json::from_str::<&serde_json::value::RawValue>(&result.run_case_json) {
        tracing::warn!(lease = %result.lease_id, %error, "the worker's RunCase is not JSON; the attempt runs again");
        result.infrastructure_failure = true;
        result.error = format!("the worker sent a record that is not JSON: {error}");
    }
}
