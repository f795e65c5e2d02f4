//! What the runner records of each step for "since it last passed": the
//! screen after an app step, the requests, events, crashes and stalls its
//! share of the app's trace holds, and the step's own outcome. Two calls
//! after an app step (`screen`, read once and shared with the events'
//! route, and `trace {since}`), one after a `see` (whose own last `screen`
//! is the screen it left); none after a fixture, `exec` or `assert`.

use argus_proto::grpc::{AttemptObserved, StepObservation};
use argus_proto::observe;
use argus_proto::run::RunStep;
use argus_proto::wire::{Screen, TraceResult};
use serde_json::{Value, json};

use super::{Attempt, CALL_TIMEOUT, Device};

impl<D: Device> Attempt<'_, D> {
    /// The screen after the step that just ran, read at most once per step.
    pub(super) async fn screen_after_step(&mut self) -> Option<Value> {
        if self.step_screen.is_none() {
            self.step_screen = self.call("screen", None, CALL_TIMEOUT).await.ok();
        }
        self.step_screen.clone()
    }

    /// What the app showed and did during step `index`, which ended as
    /// `record` says; `looked` when it was an app step that ran.
    pub(super) async fn observe_step(&mut self, index: usize, record: &RunStep, looked: bool) -> StepObservation {
        let mut observed = StepObservation {
            index: index as u32,
            step: observe::clip(&record.step),
            status: record.status.as_str().to_owned(),
            ms: record.ms,
            error: record.error.as_deref().map(observe::clip).unwrap_or_default(),
            timeout_ms: self.step_timeout_ms.load(std::sync::atomic::Ordering::Relaxed),
            ..StepObservation::default()
        };
        if !looked {
            return observed;
        }
        // A `see` already read the screen it left: no need to ask again.
        let screen = match self.checked_screen.take() {
            Some(checked) if self.step_screen.is_none() => Some(checked),
            _ => self.screen_after_step().await,
        };
        if let Some(screen) = screen
            && let Ok(screen) = serde_json::from_value::<Screen>(screen)
        {
            observed.screen_read = true;
            observed.route = screen.route.as_deref().map(observe::clip).unwrap_or_default();
            (observed.window_w, observed.window_h) = (screen.window.w as f32, screen.window.h as f32);
            let (elements, more) = observe::elements(&screen);
            observed.elements = elements;
            observed.truncated |= more;
        }
        if let Some(since) = self.observed_seq {
            let params = json!({ "since": since });
            if let Ok(trace) = self.call("trace", Some(params), CALL_TIMEOUT).await
                && let Ok(trace) = serde_json::from_value::<TraceResult>(trace)
            {
                let (requests, events, problems, more) = observe::from_trace(&trace.events);
                observed.requests = requests;
                observed.events = events;
                observed.problems = problems;
                observed.truncated |= more;
                // A relaunched app counts again from the start.
                self.observed_seq = Some(trace.last);
            }
        }
        observed
    }
}

/// The attempt's record as a whole, held to its bound.
pub(super) fn finish(steps: Vec<StepObservation>, hello: Option<&argus_proto::wire::Hello>) -> AttemptObserved {
    let mut observed = AttemptObserved {
        steps,
        app_version: hello.and_then(|h| h.app_version()).map(observe::clip).unwrap_or_default(),
        agent_version: hello.and_then(|h| h.agent_version.as_deref()).map(observe::clip).unwrap_or_default(),
        ..AttemptObserved::default()
    };
    observe::bound(&mut observed);
    observed
}
