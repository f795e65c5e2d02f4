//! A leased attempt's fixtures and `exec` commands, relayed up the link to
//! the client that submitted the run: the worker never starts a fixtures
//! process or runs a case's shell command on the device host.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_cases::runner::{
    Answer, EXEC_TIMEOUT, ExecError, ExecOutput, FixturesError, ProjectSide, no_fixtures_command,
};
use argus_proto::grpc::{self, project_answer, project_call, worker_message};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

/// Time for the relay itself, on top of what the call may take.
const RELAY_SLACK: Duration = Duration::from_secs(5);

/// The project calls in flight on one link, by the worker's call id.
pub struct LinkCalls {
    out: mpsc::Sender<grpc::WorkerMessage>,
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<project_answer::Outcome>>>,
}

impl LinkCalls {
    pub fn new(out: mpsc::Sender<grpc::WorkerMessage>) -> Arc<Self> {
        Arc::new(Self { out, next: AtomicU64::new(1), waiting: Mutex::default() })
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<project_answer::Outcome>>> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The coordinator's answer to one of this link's calls.
    pub fn answered(&self, answer: grpc::ProjectAnswer) {
        if let (Some(waiting), Some(outcome)) = (self.waiting().remove(&answer.call_id), answer.outcome) {
            let _ = waiting.send(outcome);
        }
    }

    async fn call(
        &self,
        run_id: &str,
        lease_id: &str,
        kind: project_call::Kind,
        timeout: Duration,
    ) -> Result<project_answer::Outcome, String> {
        let call_id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting().insert(call_id, tx);
        let call = grpc::ProjectCall {
            call_id,
            run_id: run_id.to_owned(),
            lease_id: lease_id.to_owned(),
            kind: Some(kind),
            timeout_ms: u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX),
        };
        let message = grpc::WorkerMessage { kind: Some(worker_message::Kind::ProjectCall(call)) };
        let outcome = match self.out.send(message).await {
            Err(_) => Err("the link to the coordinator is gone".to_owned()),
            Ok(()) => match tokio::time::timeout(timeout + RELAY_SLACK, rx).await {
                Ok(Ok(outcome)) => Ok(outcome),
                Ok(Err(_)) => Err("the link to the coordinator is gone".to_owned()),
                Err(_) => {
                    Err(format!("no answer from the run's client within {} s", (timeout + RELAY_SLACK).as_secs()))
                }
            },
        };
        self.waiting().remove(&call_id);
        outcome
    }
}

/// The project side of one lease: its run's client, through the link.
pub struct RelayedProject {
    pub calls: Arc<LinkCalls>,
    pub run_id: String,
    pub lease_id: String,
    /// `cases.fixtures.timeoutMs`; `None` when the project has no fixtures
    /// command (a fixture step then fails here, as it does locally).
    pub fixture_timeout: Option<Duration>,
}

impl ProjectSide for RelayedProject {
    fn fixture<'a>(
        &'a self,
        command: &'a str,
        params: &'a Map<String, Value>,
    ) -> Answer<'a, Result<Value, FixturesError>> {
        Box::pin(async move {
            let fail = |message: String| FixturesError { command: command.to_owned(), message };
            let Some(timeout) = self.fixture_timeout else { return Err(no_fixtures_command(command)) };
            let kind = project_call::Kind::Fixture(grpc::FixtureCall {
                command: command.to_owned(),
                params_json: Value::Object(params.clone()).to_string(),
            });
            match self.calls.call(&self.run_id, &self.lease_id, kind, timeout).await.map_err(fail)? {
                project_answer::Outcome::AnswerJson(json) => serde_json::from_str(&json)
                    .map_err(|e| fail(format!("the client relayed an answer that is not JSON: {e}"))),
                project_answer::Outcome::Error(message) => Err(fail(message)),
                project_answer::Outcome::Exec(_) => Err(fail("the client answered an exec for a fixture".into())),
            }
        })
    }

    fn exec<'a>(&'a self, run: &'a str) -> Answer<'a, Result<ExecOutput, ExecError>> {
        Box::pin(async move {
            let kind = project_call::Kind::Exec(run.to_owned());
            match self.calls.call(&self.run_id, &self.lease_id, kind, EXEC_TIMEOUT).await.map_err(ExecError::Client)? {
                project_answer::Outcome::Exec(output) => {
                    Ok(ExecOutput { code: output.code, stdout: output.stdout, stderr: output.stderr })
                }
                project_answer::Outcome::Error(message) => Err(ExecError::Client(message)),
                project_answer::Outcome::AnswerJson(_) => {
                    Err(ExecError::Client("the client answered a fixture for an exec".into()))
                }
            }
        })
    }
}
