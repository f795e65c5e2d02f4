//! The project relay: a leased attempt's fixture and `exec` calls, from the
//! worker that runs it to the client that submitted the run (where the
//! suite, its fixtures process and its credentials live), and the answers
//! back. It keeps no run state of the owner task's and never waits on it: a
//! map of the clients attached and the calls in flight, behind one lock
//! that is never held across an await.
//!
//! A call for a run whose client has not attached yet (it attaches right
//! after Submit, and again after a coordinator restart) waits here until it
//! does or the caller's timeout passes; a call for a run whose client has
//! left fails at once, as do the calls in flight when it leaves.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argus_proto::grpc::{self, coordinator_message, project_answer};
use tokio::sync::mpsc;
use tonic::Status;

pub type WorkerTx = mpsc::Sender<Result<grpc::CoordinatorMessage, Status>>;
pub type ClientTx = mpsc::Sender<Result<grpc::ProjectCall, Status>>;

/// How long a run whose client left is remembered as left.
const LEFT_KEPT: Duration = Duration::from_secs(600);

/// The error of a call whose run's client has gone.
pub const CLIENT_LEFT: &str = "the client that submitted the run went away: its fixtures and exec commands cannot run";

struct InFlight {
    run_id: String,
    /// The worker's own id for the call.
    worker_call_id: u64,
    worker: WorkerTx,
    /// Not yet handed to a client (none attached).
    unsent: Option<grpc::ProjectCall>,
    expires: Instant,
}

#[derive(Default)]
struct Inner {
    /// Each run's attached client, with the attachment's number.
    clients: HashMap<String, (u64, ClientTx)>,
    /// Runs whose client left, and when.
    left: HashMap<String, Instant>,
    calls: HashMap<u64, InFlight>,
    next_id: u64,
}

#[derive(Default)]
pub struct ProjectRelay {
    inner: Mutex<Inner>,
}

/// What to send once the lock is released.
enum Send {
    Client(ClientTx, grpc::ProjectCall),
    Worker(WorkerTx, grpc::ProjectAnswer),
}

fn answer(call_id: u64, outcome: project_answer::Outcome) -> grpc::ProjectAnswer {
    grpc::ProjectAnswer { call_id, outcome: Some(outcome) }
}

impl ProjectRelay {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A worker's call: to the run's client, queued until one attaches, or
    /// refused at once when the run's client has left.
    pub async fn call(&self, worker: &WorkerTx, call: grpc::ProjectCall) {
        let send = {
            let mut inner = self.lock();
            let now = Instant::now();
            inner.calls.retain(|_, c| c.expires > now);
            inner.left.retain(|_, at| now.duration_since(*at) < LEFT_KEPT);
            if inner.left.contains_key(&call.run_id) && !inner.clients.contains_key(&call.run_id) {
                Send::Worker(worker.clone(), answer(call.call_id, project_answer::Outcome::Error(CLIENT_LEFT.into())))
            } else {
                inner.next_id += 1;
                let id = inner.next_id;
                let timeout = Duration::from_millis(u64::from(call.timeout_ms.max(1)));
                let relayed = grpc::ProjectCall { call_id: id, ..call.clone() };
                let client = inner.clients.get(&call.run_id).map(|(_, tx)| tx.clone());
                inner.calls.insert(
                    id,
                    InFlight {
                        run_id: call.run_id.clone(),
                        worker_call_id: call.call_id,
                        worker: worker.clone(),
                        unsent: client.is_none().then(|| relayed.clone()),
                        expires: now + timeout,
                    },
                );
                match client {
                    Some(client) => Send::Client(client, relayed),
                    None => return,
                }
            }
        };
        self.deliver(vec![send]).await;
    }

    /// A client attaches to serve its run: the calls that waited for it go
    /// out now. Returns the attachment's number, for [`Self::detach`].
    pub async fn attach(&self, run_id: &str, client: ClientTx) -> u64 {
        let (attachment, sends) = {
            let mut inner = self.lock();
            inner.next_id += 1;
            let attachment = inner.next_id;
            inner.left.remove(run_id);
            inner.clients.insert(run_id.to_owned(), (attachment, client.clone()));
            let sends: Vec<Send> = inner
                .calls
                .values_mut()
                .filter(|c| c.run_id == run_id)
                .filter_map(|c| c.unsent.take())
                .map(|call| Send::Client(client.clone(), call))
                .collect();
            (attachment, sends)
        };
        self.deliver(sends).await;
        attachment
    }

    /// A client's answer, back to the worker that asked.
    pub async fn answered(&self, answer: grpc::ProjectAnswer) {
        let Some(call) = self.lock().calls.remove(&answer.call_id) else { return };
        let back = grpc::ProjectAnswer { call_id: call.worker_call_id, outcome: answer.outcome };
        self.deliver(vec![Send::Worker(call.worker, back)]).await;
    }

    /// The client's stream ended: its run's calls fail, now and from now on
    /// (unless it attaches again).
    pub async fn detach(&self, run_id: &str, attachment: u64) {
        let sends = {
            let mut inner = self.lock();
            if inner.clients.get(run_id).is_none_or(|(own, _)| *own != attachment) {
                return;
            }
            inner.clients.remove(run_id);
            inner.left.insert(run_id.to_owned(), Instant::now());
            let ids: Vec<u64> = inner.calls.iter().filter(|(_, c)| c.run_id == run_id).map(|(id, _)| *id).collect();
            ids.into_iter()
                .filter_map(|id| inner.calls.remove(&id))
                .map(|c| {
                    let error = answer(c.worker_call_id, project_answer::Outcome::Error(CLIENT_LEFT.into()));
                    Send::Worker(c.worker, error)
                })
                .collect::<Vec<_>>()
        };
        self.deliver(sends).await;
    }

    async fn deliver(&self, sends: Vec<Send>) {
        for send in sends {
            match send {
                Send::Client(client, call) => {
                    // A client that cannot be reached is detached by its
                    // stream's task; the caller's timeout covers the rest.
                    let _ = client.send(Ok(call)).await;
                }
                Send::Worker(worker, answer) => {
                    let kind = coordinator_message::Kind::ProjectAnswer(answer);
                    let _ = worker.send(Ok(grpc::CoordinatorMessage { kind: Some(kind) })).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: u64, run: &str) -> grpc::ProjectCall {
        grpc::ProjectCall {
            call_id: id,
            run_id: run.into(),
            lease_id: "l1".into(),
            kind: Some(grpc::project_call::Kind::Exec("true".into())),
            timeout_ms: 10_000,
        }
    }

    fn answer_of(message: Result<grpc::CoordinatorMessage, Status>) -> grpc::ProjectAnswer {
        match message.unwrap().kind {
            Some(coordinator_message::Kind::ProjectAnswer(answer)) => answer,
            other => panic!("not an answer: {other:?}"),
        }
    }

    #[tokio::test]
    async fn calls_wait_for_the_client_and_answers_go_back_by_the_workers_id() {
        let relay = ProjectRelay::default();
        let (worker, mut from_relay) = mpsc::channel(8);
        relay.call(&worker, call(41, "r1")).await;
        let (client, mut to_client) = mpsc::channel(8);
        let attachment = relay.attach("r1", client).await;
        let relayed = to_client.recv().await.unwrap().unwrap();
        assert_eq!((relayed.run_id.as_str(), relayed.lease_id.as_str()), ("r1", "l1"));
        let outcome = project_answer::Outcome::AnswerJson("{\"ok\":true}".into());
        relay.answered(answer(relayed.call_id, outcome.clone())).await;
        assert_eq!(answer_of(from_relay.recv().await.unwrap()), answer(41, outcome));
        // An answer to nothing (late, or twice) goes nowhere.
        relay.answered(answer(relayed.call_id, project_answer::Outcome::Error("late".into()))).await;
        assert!(from_relay.try_recv().is_err());

        relay.call(&worker, call(42, "r1")).await;
        let _sent = to_client.recv().await.unwrap().unwrap();
        relay.detach("r1", attachment + 1).await;
        assert!(from_relay.try_recv().is_err(), "an older attachment's end changes nothing");
        relay.detach("r1", attachment).await;
        let gone = project_answer::Outcome::Error(CLIENT_LEFT.into());
        assert_eq!(answer_of(from_relay.recv().await.unwrap()), answer(42, gone.clone()));
        relay.call(&worker, call(43, "r1")).await;
        assert_eq!(answer_of(from_relay.recv().await.unwrap()), answer(43, gone), "refused at once once it left");
    }
}
