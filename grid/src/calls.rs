//! Calls to a device's app that travel down its worker's link and back:
//! each gets a number, the worker's answer finds its caller by it. The
//! WebDriver facade calls through here; the gRPC service hands in answers.
//! One lock, never held across an await.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use argus_proto::grpc::{self, coordinator_message, device_answer};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::owner::Grant;

/// Beyond the call's own timeout, how long an answer may take to come back
/// up the worker's link.
const LINK_SLACK: Duration = Duration::from_secs(5);

/// Why a device call failed.
#[derive(Debug, Clone)]
pub struct CallFailure {
    /// The app's error code; `worker` when the link failed, `ended` when
    /// the caller's session ended.
    pub code: String,
    pub message: String,
}

type Answer = Result<device_answer::Outcome, CallFailure>;

#[derive(Default)]
struct Inner {
    /// Each call in flight: whose it is (a session's id) and who waits.
    calls: HashMap<u64, (String, oneshot::Sender<Answer>)>,
    next_call: u64,
}

/// The calls in flight to devices' apps.
#[derive(Default)]
pub struct DeviceCalls {
    inner: Mutex<Inner>,
}

impl DeviceCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends one call for `owner` to the app of `grant`'s device and waits
    /// for the answer, at most `timeout` plus the link's slack.
    pub async fn call(
        &self,
        owner: &str,
        grant: &Grant,
        method: &str,
        params: Option<&Value>,
        timeout: Duration,
        traceparent: String,
    ) -> Result<device_answer::Outcome, CallFailure> {
        let (reply, answer) = oneshot::channel();
        let call_id = {
            let mut inner = self.lock();
            inner.next_call += 1;
            let id = inner.next_call;
            inner.calls.insert(id, (owner.to_owned(), reply));
            id
        };
        let call = grpc::DeviceCall {
            call_id,
            slot: grant.slot.clone(),
            method: method.to_owned(),
            params_json: params.map(Value::to_string).unwrap_or_default(),
            timeout_ms: timeout.as_millis().min(u128::from(u32::MAX)) as u32,
            traceparent,
        };
        let message = grpc::CoordinatorMessage { kind: Some(coordinator_message::Kind::DeviceCall(call)) };
        let lost = |message: String| CallFailure { code: "worker".into(), message };
        let outcome = match grant.tx.send_timeout(Ok(message), LINK_SLACK).await {
            Ok(()) => match tokio::time::timeout(timeout + LINK_SLACK, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(lost("the coordinator is stopping".into())),
                Err(_) => Err(lost(format!(
                    "worker {} did not answer {method} within {} ms",
                    grant.worker,
                    (timeout + LINK_SLACK).as_millis()
                ))),
            },
            Err(_) => Err(lost(format!("worker {} cannot be reached", grant.worker))),
        };
        self.lock().calls.remove(&call_id);
        outcome
    }

    /// A worker's answer, to the call that waits for it.
    pub fn answered(&self, answer: grpc::DeviceAnswer) {
        let Some((_, reply)) = self.lock().calls.remove(&answer.call_id) else { return };
        let outcome = match answer.outcome {
            Some(device_answer::Outcome::Error(e)) => Err(CallFailure { code: e.code, message: e.message }),
            Some(outcome) => Ok(outcome),
            None => Err(CallFailure { code: String::new(), message: "the worker sent an empty answer".into() }),
        };
        let _ = reply.send(outcome);
    }

    /// Fails every call of `owner` still in flight with `failure`.
    pub fn fail_all(&self, owner: &str, failure: &CallFailure) {
        let mut inner = self.lock();
        let orphaned: Vec<u64> = inner.calls.iter().filter(|(_, (o, _))| o == owner).map(|(k, _)| *k).collect();
        for call in orphaned {
            if let Some((_, reply)) = inner.calls.remove(&call) {
                let _ = reply.send(Err(failure.clone()));
            }
        }
    }
}
