//! Running one attempt of one case against anything that makes protocol
//! calls (spec §1.6–§1.12): each step becomes the calls lynkeus makes, with
//! its timeouts; the first failure stops the case and the rest are skipped;
//! `Unknown method` makes the step and the case unsupported; a failure leaves
//! evidence.

mod app;
mod commands;
mod evidence;
mod fixtures;
mod observe;
mod pictures;
mod project;
mod see;
mod shell;
mod side;
mod why;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use argus_proto::run::{CaseResult, EventOrigin, RunCase, RunEvent, RunStep, Section, StepStatus};
use argus_proto::wire::Hello;
use serde_json::{Map, Value};

use crate::config::CasesConfig;
use crate::format::label;
use crate::format::{Case, Step};
use crate::values;

pub use evidence::describe_screen;
pub use fixtures::{Fixtures, FixturesError};
pub use pictures::{Camera, CameraError, Pictures};
pub use project::{missing_fixtures, needs_project, runs_here};
pub use side::{Answer, EXEC_TIMEOUT, ExecError, ExecOutput, LocalProject, ProjectSide, no_fixtures_command};

/// The default transport timeout of a call, as lynkeus' driver has it.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(20_000);

/// An error a device answered, or a failure to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFailure {
    pub message: String,
    pub code: Option<String>,
    /// The device failed, not the case: no app attached, one that went
    /// away, a driver that closed. The step that made the call is recorded
    /// as failed, and the attempt proves nothing ([`Attempted::lost`]).
    pub lost: bool,
}

impl CallFailure {
    /// `Unknown method <name>`: the name, when the app has no such method.
    pub fn unknown_method(&self) -> Option<&str> {
        let rest = self.message.split("Unknown method ").nth(1)?;
        rest.split_whitespace().next()
    }
}

/// What the runner needs of a device: its `hello` and protocol calls. The
/// driver implements it; so can anything else that speaks lynkeus.
pub trait Device: Send + Sync {
    fn hello(&self) -> Option<Arc<Hello>>;
    fn call(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, CallFailure>> + Send;
}

/// What a run shares between its cases.
pub struct RunContext {
    pub config: CasesConfig,
    /// Where fixtures and `exec` run: this machine's project, or the
    /// submitting client's through the grid.
    pub project: Arc<dyn ProjectSide>,
    /// Gather the app's analytics events into each step (`--out` turns it on).
    pub collect_events: bool,
    /// Keep running steps after a failure (a failed setup step still stops).
    pub keep_going: bool,
    /// Screenshots of the steps, and where they go; none when absent.
    pub pictures: Option<Pictures>,
    /// Record what the app showed and did at each step (`AttemptObserved`).
    pub observe: bool,
}

/// An attempt as it ended: its lynkeus record, and what was seen of the app
/// at each step when the run observes.
pub struct Attempted {
    pub case: RunCase,
    pub observed: Option<argus_proto::grpc::AttemptObserved>,
    /// The first step that lost the device (`label: error`): the attempt
    /// says nothing about the case, and runs again.
    pub lost: Option<String>,
}

/// Where an attempt stands after each step: its result so far, whether the
/// rest is skipped, and the first step that lost the device.
struct Tally {
    result: CaseResult,
    stopped: bool,
    lost: Option<String>,
}

impl Tally {
    /// Takes a step's outcome (`go_on`: a failure leaves the steps after it
    /// to run); its status and error as recorded.
    fn take(&mut self, outcome: Result<Done, StepError>, label: &str, go_on: bool) -> (StepStatus, Option<String>) {
        match outcome {
            Ok(Done::Passed) => (StepStatus::Passed, None),
            Ok(Done::Skipped) => (StepStatus::Skipped, None),
            Err(StepError::Failed(message)) => {
                self.result = CaseResult::Failed;
                self.stopped = !go_on;
                (StepStatus::Failed, Some(message))
            }
            Err(StepError::Lost(message)) => {
                // Recorded as lynkeus records it; the rest proves nothing.
                self.result = CaseResult::Failed;
                self.stopped = true;
                self.lost.get_or_insert_with(|| format!("{label}: {message}"));
                (StepStatus::Failed, Some(message))
            }
            Err(StepError::Unsupported(name)) => {
                if self.result != CaseResult::Failed {
                    self.result = CaseResult::Unsupported;
                }
                self.stopped = true;
                (StepStatus::Unsupported, Some(format!("this host has no {name}")))
            }
        }
    }
}

/// Why a step did not pass.
#[derive(Debug, Clone, PartialEq)]
enum StepError {
    Failed(String),
    /// A call lost the device ([`CallFailure::lost`]).
    Lost(String),
    /// The host has no such method.
    Unsupported(String),
}

impl From<CallFailure> for StepError {
    fn from(failure: CallFailure) -> Self {
        match failure.unknown_method() {
            Some(name) => StepError::Unsupported(name.to_owned()),
            None if failure.lost => StepError::Lost(failure.message),
            None => StepError::Failed(failure.message),
        }
    }
}

impl From<crate::values::ValueError> for StepError {
    fn from(error: crate::values::ValueError) -> Self {
        StepError::Failed(error.to_string())
    }
}

impl From<crate::commands::ArgvError> for StepError {
    fn from(error: crate::commands::ArgvError) -> Self {
        StepError::Failed(error.to_string())
    }
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError::Failed(message)
    }
}

/// How a step ended when it did not fail.
enum Done {
    Passed,
    Skipped,
}

type StepResult = Result<Done, StepError>;

/// Where an attempt begins in what the app remembers.
#[derive(Debug, Clone, Copy)]
struct Begun {
    trace_seq: u64,
    /// The app's clock then (its newest trace event's `t`): requests that
    /// started before are an earlier case's. `None`: its trace was empty.
    app_ms: Option<u64>,
}

/// The state of one attempt.
struct Attempt<'a, D: Device> {
    device: &'a D,
    run: &'a RunContext,
    /// Aliases kept with `as:`.
    scope: HashMap<String, Value>,
    /// The newest value of each refs field any fixture answered.
    latest: Map<String, Value>,
    /// The trace sequence number requests are checked from.
    mark: Option<u64>,
    /// Where this attempt begins in the app's trace and request log (read
    /// with the mark, before its first `app.*` step): evidence reads
    /// nothing older, since a device's trace outlives `reset` and an
    /// earlier case's failure is not this one's.
    begun: Option<Begun>,
    /// How many of the app's analytics events were seen before this step.
    events_seen: Option<usize>,
    /// `inspect` answers, kept until a step that can change state runs.
    inspect_cache: HashMap<String, Value>,
    /// The verbs that have run, for macro conditions.
    ran: HashSet<String>,
    /// The element the failing step was about, for evidence.
    last_target: Option<argus_proto::wire::Target>,
    /// The route the failing step waited for, for evidence.
    last_route: Option<String>,
    /// Events collected mid-step (`app.events` clears the app's buffer).
    carried_events: Vec<RunEvent>,
    /// Inside an interruption's own steps, which must not interrupt again.
    interrupting: bool,
    /// The screen read after the current step, shared by its events' route
    /// and its observation.
    step_screen: Option<Value>,
    /// The last screen the current step read to check what it sees (`see`
    /// acts on nothing, so it is the screen after the step): what its
    /// observation reads rather than asking again.
    checked_screen: Option<Value>,
    /// Where the next step's share of the trace begins, for observations.
    observed_seq: Option<u64>,
    /// How long the current step could wait (0: it does not wait), set by
    /// the command that waits: whether a failure timed out.
    step_timeout_ms: std::sync::atomic::AtomicU64,
}

/// Runs attempt `attempt` of `case`, and reports it as a `RunCase` line.
pub async fn run_attempt<D: Device>(device: &D, case: &Case, attempt: u32, run: &RunContext) -> RunCase {
    run_attempt_with(device, case, attempt, run, async {}, || {}, |_, _| {}).await.case
}

/// As [`run_attempt`], doing `while_settling` while the reset app settles
/// (done before the first step, at no cost to the attempt's time: the
/// settle waits for a quiet app anyway), calling `on_settled` once it has
/// settled (the app that answers the first step is there), and telling
/// `on_step` of each step as it finishes.
pub async fn run_attempt_with<D: Device>(
    device: &D,
    case: &Case,
    attempt: u32,
    run: &RunContext,
    while_settling: impl Future<Output = ()>,
    on_settled: impl FnOnce(),
    mut on_step: impl FnMut(usize, &RunStep),
) -> Attempted {
    let preparing = Instant::now();
    let mut state = Attempt::new(device, run);
    // lynkeus launches a fresh app for every attempt and lets it settle with
    // `idle {300, 5000}` before the first step. A device on a grid is reset
    // rather than relaunched (a relaunch costs seconds, and many apps cannot
    // be relaunched from the host), so the same idle is sent here: the first
    // step starts on a settled app, as in lynkeus.
    let (quiet, timeout) = app::IDLE_DEFAULT;
    let _ = tokio::join!(state.idle(quiet, timeout), while_settling);
    let hello = device.hello();
    if run.collect_events && hello.as_ref().is_some_and(|h| h.has_command("events")) {
        state.events_seen = state.event_count().await;
    }
    on_settled();
    // lynkeus' case starts on the settled app: its `startedAt` and `ms` are
    // the steps' (setup included); the settle before them is `prepareMs`.
    let prepare_ms = preparing.elapsed().as_millis() as u64;
    let started_at = iso_now();
    let started = Instant::now();
    let steps: Vec<(&Step, Section)> =
        case.setup.iter().map(|s| (s, Section::Setup)).chain(case.steps.iter().map(|s| (s, Section::Steps))).collect();
    let mut records = Vec::with_capacity(steps.len());
    let mut observations = Vec::new();
    let mut tally = Tally { result: CaseResult::Passed, stopped: false, lost: None };
    for (step, section) in steps {
        let label = label(step);
        if tally.stopped {
            let skipped = record(label, StepStatus::Skipped, 0, None, section, None);
            if run.observe {
                observations.push(state.observe_step(records.len(), &skipped, false).await);
            }
            on_step(records.len(), &skipped);
            records.push(skipped);
            continue;
        }
        let step_started = Instant::now();
        state.last_target = None;
        state.last_route = None;
        state.step_screen = None;
        state.checked_screen = None;
        state.step_timeout_ms.store(0, std::sync::atomic::Ordering::Relaxed);
        let here = project::runs_here(step.on.as_deref(), hello.as_deref());
        let outcome = if here {
            let span = tracing::info_span!("step", step = %label);
            tracing::Instrument::instrument(state.step(step), span).await
        } else {
            Ok(Done::Skipped)
        };
        let ms = step_started.elapsed().as_millis() as u64;
        let events = if step.verb.starts_with("app.") { state.take_events().await } else { None };
        let (status, error) = tally.take(outcome, &label, run.keep_going && section != Section::Setup);
        state.ran.insert(step.verb.clone());
        let app_or_macro = step.verb.starts_with("app.") || run.config.macros.contains_key(&step.verb);
        let screenshot = match &run.pictures {
            Some(pictures) if pictures.wants(status, app_or_macro) => {
                let path = argus_proto::artifacts::screenshot_path(&case.id, attempt, records.len(), &label);
                state.picture(pictures, path).await
            }
            _ => None,
        };
        let video_s = run.pictures.as_ref().and_then(|p| p.film_started).map(|started| {
            let seconds = started.elapsed().as_secs_f64();
            (seconds * 100.0).round() / 100.0
        });
        let ran = RunStep { screenshot, video_s, ..record(label, status, ms, error, section, events) };
        if run.observe {
            let looked = here && app_or_macro && state.mark.is_some();
            observations.push(state.observe_step(records.len(), &ran, looked).await);
        }
        on_step(records.len(), &ran);
        records.push(ran);
    }
    let Tally { result, lost, .. } = tally;
    let evidence = if result == CaseResult::Failed { Some(state.evidence().await) } else { None };
    let observed = run.observe.then(|| observe::finish(observations, hello.as_deref()));
    let case = RunCase {
        id: case.id.clone(),
        title: case.title.clone(),
        description: case.description.clone(),
        file: case.file.clone(),
        attempt,
        result,
        started_at,
        ms: started.elapsed().as_millis() as u64,
        steps: records,
        evidence,
        video: None,
        device: None,
        extra: Map::from_iter([(PREPARE_MS.to_owned(), Value::from(prepare_ms))]),
    };
    Attempted { case, observed, lost }
}

/// The field of a `cases.jsonl` line (an addition lynkeus allows) that
/// holds what readying the device took before the case's steps: the settle
/// after its reset here, and on a grid the reset and `before` hook too.
/// lynkeus' own `ms` leaves it out.
pub const PREPARE_MS: &str = "prepareMs";

/// Runs every case on one device, in order: each attempt starts from a
/// `reset` app; a failed case runs again up to `retries` times (lynkeus: 1).
/// `on_attempt` sees each attempt as it finishes.
pub async fn run_suite<D: Device>(
    device: &D,
    cases: &[Case],
    run: &RunContext,
    retries: u32,
    mut on_attempt: impl FnMut(&RunCase),
) -> Vec<RunCase> {
    let mut attempts = Vec::new();
    for case in cases {
        for attempt in 1..=retries + 1 {
            // A fresh app for every attempt; an app without `reset` is left as it is.
            let _ = device.call("reset", None, CALL_TIMEOUT).await;
            let outcome = run_attempt(device, case, attempt, run).await;
            on_attempt(&outcome);
            let again = outcome.result == CaseResult::Failed;
            attempts.push(outcome);
            if !again {
                break;
            }
        }
    }
    attempts
}

fn record(
    step: String,
    status: StepStatus,
    ms: u64,
    error: Option<String>,
    section: Section,
    events: Option<Vec<RunEvent>>,
) -> RunStep {
    RunStep {
        step,
        status,
        ms,
        error,
        section: Some(section),
        events: events.filter(|e| !e.is_empty()),
        screenshot: None,
        video_s: None,
        extra: Map::new(),
    }
}

impl<'a, D: Device> Attempt<'a, D> {
    /// An attempt about to start on `device`: nothing seen of the app yet.
    fn new(device: &'a D, run: &'a RunContext) -> Self {
        Self {
            device,
            run,
            scope: HashMap::new(),
            latest: Map::new(),
            mark: None,
            begun: None,
            events_seen: None,
            inspect_cache: HashMap::new(),
            ran: HashSet::new(),
            last_target: None,
            last_route: None,
            carried_events: Vec::new(),
            interrupting: false,
            step_screen: None,
            checked_screen: None,
            observed_seq: None,
            step_timeout_ms: Default::default(),
        }
    }
}

impl<D: Device> Attempt<'_, D> {
    /// The current step waits up to `ms`.
    fn waits(&self, ms: u64) {
        self.step_timeout_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    async fn call(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallFailure> {
        self.device.call(method, params, timeout).await
    }

    /// One step, its value interpolated first.
    async fn step(&mut self, step: &Step) -> StepResult {
        let value = values::interpolate(&step.value, &self.scope)?;
        if !matches!(step.verb.as_str(), "assert" | "app.see" | "app.wait") {
            self.inspect_cache.clear();
        }
        if let Some(command) = step.verb.strip_prefix("app.")
            && !self.run.config.macros.contains_key(&step.verb)
        {
            if self.mark.is_none() {
                // The same `trace` lynkeus reads for its mark: its newest
                // event also dates the attempt's start on the app's clock.
                let trace = self.call("trace", Some(Value::Object(Map::new())), CALL_TIMEOUT).await?;
                let trace_seq = trace.get("last").and_then(Value::as_u64).unwrap_or(0);
                let listed = trace.get("events").and_then(Value::as_array);
                let app_ms = listed.into_iter().flatten().filter_map(|e| e.get("t").and_then(Value::as_u64)).max();
                self.mark = Some(trace_seq);
                self.observed_seq = Some(trace_seq);
                self.begun = Some(Begun { trace_seq, app_ms });
            }
            return self.app(command, &value).await;
        }
        if let Some(body) = self.run.config.macros.get(&step.verb).cloned() {
            return self.macro_step(&step.verb, &body, value).await;
        }
        match step.verb.as_str() {
            "exec" => self.exec(&value).await,
            "assert" => self.assert(&value).await,
            verb => self.fixture(verb, &value).await,
        }
    }

    async fn trace_last(&self) -> Result<u64, StepError> {
        // `{since: undefined}` goes out as `{}`, as lynkeus sends it.
        let trace = self.call("trace", Some(Value::Object(Map::new())), CALL_TIMEOUT).await?;
        Ok(trace.get("last").and_then(Value::as_u64).unwrap_or(0))
    }

    async fn event_count(&self) -> Option<usize> {
        let events = self.call("events", None, CALL_TIMEOUT).await.ok()?;
        events.as_array().map(Vec::len)
    }

    /// The app's analytics events since the last look, for the step that
    /// just ran.
    async fn take_events(&mut self) -> Option<Vec<RunEvent>> {
        let carried = std::mem::take(&mut self.carried_events);
        let fresh = self.fresh_events().await;
        match (carried.is_empty(), fresh) {
            (true, fresh) => fresh,
            (false, Some(fresh)) => Some(carried.into_iter().chain(fresh).collect()),
            (false, None) => Some(carried),
        }
    }

    async fn fresh_events(&mut self) -> Option<Vec<RunEvent>> {
        let seen = self.events_seen?;
        let events = self.call("events", None, CALL_TIMEOUT).await.ok()?;
        let events = events.as_array()?.clone();
        self.events_seen = Some(events.len());
        let fresh = events.get(seen..)?.to_vec();
        // As lynkeus does after every app step: `events`, then `screen`; an
        // event is filed under the route the step left the app on.
        let route = self.screen_after_step().await.and_then(|s| s.get("route").cloned());
        Some(
            fresh
                .into_iter()
                .filter_map(|event| {
                    let name = event.get("name")?.as_str()?.to_owned();
                    let props = event.get("props").and_then(Value::as_object).cloned();
                    let route = route.as_ref().or(event.get("route")).and_then(Value::as_str).map(str::to_owned);
                    Some(RunEvent {
                        origin: EventOrigin::App,
                        name,
                        props,
                        provider: None,
                        route,
                        at: None,
                        request_id: None,
                        extra: Map::new(),
                    })
                })
                .collect(),
        )
    }
}

/// Now, as lynkeus writes times: ISO 8601 with milliseconds and `Z`.
pub fn iso_now() -> String {
    iso(chrono::Utc::now())
}

pub fn iso(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_with_milliseconds() {
        let at = chrono::DateTime::from_timestamp_millis(1_767_322_801_000).unwrap();
        assert_eq!(iso(at), "2026-01-02T03:00:01.000Z");
        let at = chrono::DateTime::from_timestamp_millis(951_782_400_123).unwrap();
        assert_eq!(iso(at), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn unknown_method_names_the_method() {
        let failure = CallFailure { message: "Unknown method stores".into(), code: None, lost: false };
        assert_eq!(failure.unknown_method(), Some("stores"));
        assert_eq!(
            CallFailure { message: "No element matches".into(), code: None, lost: false }.unknown_method(),
            None
        );
    }
}
