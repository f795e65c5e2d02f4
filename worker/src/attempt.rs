//! One leased attempt on its slot: the device readied (the slot's `before`
//! hook, the app waited for, a reset unless the app is a fresh process),
//! the case run on the settled app, what the app did meanwhile judged
//! ([`crate::relaunch`]), and the result built. Where the device's time went
//! between two attempts is logged at debug level (`argus_worker::between`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argus_cases::runner::{Camera, PREPARE_MS, Pictures, RunContext, run_attempt_with};
use argus_cases::{Case, CaseFile, CasesConfig};
use argus_proto::grpc;
use argus_proto::run::RunCase;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::camera::{AttemptFiles, HookCamera, Recording};
use crate::device_log::DeviceLog;
use crate::driver::Driver;
use crate::health::Health;
use crate::live::Watched;
use crate::project::{LinkCalls, RelayedProject};
use crate::relaunch::{AppMark, Verdict};
use crate::slot::Slot;

/// How long the app may take to attach after the slot's `before` hook (a
/// hook that launches it): lynkeus' own wait for an app.
const ATTACH_AFTER_HOOK: Duration = crate::driver::DEFAULT_ATTACH_TIMEOUT;

/// An attempt's result, for the metrics: the case's, or `infrastructure`.
pub(crate) fn attempt_outcome(result: &grpc::AttemptResult) -> String {
    if result.infrastructure_failure {
        return "infrastructure".into();
    }
    let result = result.verdict.as_deref().and_then(grpc::CaseVerdict::case_result);
    result.map_or_else(|| "unknown".into(), |r| format!("{r:?}").to_lowercase())
}

/// Case files and a run's configuration read once per run: every lease of
/// a file carries its text and its run's configuration, and a matrix of
/// hundreds of cases must not be read again for each one (nor by each of
/// the first leases that arrive together). Each lease builds its own case
/// only.
#[derive(Default)]
pub(crate) struct ParsedFiles {
    files: Mutex<HashMap<RunFile, Arc<ParsedFile>>>,
    configs: Mutex<HashMap<String, Arc<ParsedConfig>>>,
}

/// A run's id and a case file's path.
type RunFile = (String, String);
type ParsedFile = tokio::sync::OnceCell<Result<CaseFile, String>>;
type ParsedConfig = tokio::sync::OnceCell<Result<CasesConfig, String>>;

/// Takes the cell of `key`, starting the map over beyond `limit` entries.
fn cell_of<K: std::hash::Hash + Eq, V: Default>(map: &Mutex<HashMap<K, Arc<V>>>, key: K, limit: usize) -> Arc<V> {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= limit {
        map.clear();
    }
    map.entry(key).or_default().clone()
}

impl ParsedFiles {
    /// Files (and runs' configurations) kept; beyond it the cache starts over.
    const FILES: usize = 256;

    /// The lease's case and its run's configuration.
    async fn of(&self, lease: &grpc::Lease) -> Result<(Case, CasesConfig), String> {
        Ok((self.case(lease).await?, self.config(lease).await?))
    }

    async fn config(&self, lease: &grpc::Lease) -> Result<CasesConfig, String> {
        let cell = cell_of(&self.configs, lease.run_id.clone(), Self::FILES);
        let parsed = cell
            .get_or_init(|| async {
                let value: serde_json::Value = serde_json::from_str(&lease.config_json)
                    .map_err(|error| format!("the lease's case configuration is not JSON: {error}"))?;
                CasesConfig::from_json(&value, Path::new(".")).map_err(|error| error.to_string())
            })
            .await;
        parsed.clone()
    }

    async fn case(&self, lease: &grpc::Lease) -> Result<Case, String> {
        let cell = cell_of(&self.files, (lease.run_id.clone(), lease.case_file.clone()), Self::FILES);
        let parsed = cell
            .get_or_init(|| async { CaseFile::parse(&lease.case_source, &lease.case_file).map_err(|e| e.to_string()) })
            .await;
        parsed
            .as_ref()
            .map_err(Clone::clone)?
            .case(&lease.case_id)
            .ok_or_else(|| format!("{}: no case {} in it", lease.case_file, lease.case_id))?
            .map_err(|e| e.to_string())
    }
}

/// Tells the app which trace its attempt belongs to, when it has a
/// `traceContext` command, so that its own spans join the run's trace. The
/// attempt runs whatever the app answers.
async fn hand_trace_context(driver: &Driver) {
    let span = tracing::Span::current();
    let Some(traceparent) = argus_proto::trace::traceparent(&span) else { return };
    if !driver.hello().is_some_and(|hello| hello.has_command("traceContext")) {
        return;
    }
    let params = serde_json::json!({ "traceparent": traceparent });
    match driver.call("traceContext", Some(params), Duration::from_secs(5)).await {
        Ok(_) => {
            span.record("trace_context", "handed");
        }
        Err(error) => {
            span.record("trace_context", "refused");
            warn!(%error, "the app's traceContext command failed; the attempt runs without it");
        }
    }
}

/// Where a device's time went between two attempts, in milliseconds:
/// before the first step (`hook`, `attach`, `reset`, then the runner's
/// `settle`, with the health reads `health_start` done while it settles)
/// and after the last (`health_end`, the `after` hooks, the files shipped).
#[derive(Debug, Default)]
struct Between {
    hook: u64,
    attach: u64,
    reset: u64,
    settle: u64,
    health_start: u64,
    health_end: u64,
    after: u64,
}

impl Between {
    /// The debug line a benchmark sums per device (`argus_worker::between`).
    fn log(&self, slot: &str) {
        debug!(
            target: "argus_worker::between",
            slot = %slot,
            hook_ms = self.hook,
            attach_ms = self.attach,
            reset_ms = self.reset,
            settle_ms = self.settle,
            health_start_ms = self.health_start,
            health_end_ms = self.health_end,
            after_ms = self.after,
            "where the device's time went around the attempt"
        );
    }
}

fn ms_since(at: Instant) -> u64 {
    at.elapsed().as_millis() as u64
}

/// Runs one leased attempt on its slot's driver.
pub(crate) async fn run(
    slot: &Slot,
    lease: &grpc::Lease,
    parsed: &ParsedFiles,
    calls: &Arc<LinkCalls>,
    out: &mpsc::Sender<grpc::WorkerMessage>,
    on_step: impl FnMut(usize, &argus_proto::run::RunStep),
) -> grpc::AttemptResult {
    let infra = |error: String| grpc::AttemptResult {
        lease_id: lease.lease_id.clone(),
        infrastructure_failure: true,
        error,
        ..Default::default()
    };
    let (case, config) = match parsed.of(lease).await {
        Ok(parsed) => parsed,
        Err(error) => return infra(error),
    };
    // Fixtures and exec commands run where the suite lives: the run's
    // client, reached through the coordinator.
    let project = RelayedProject {
        calls: calls.clone(),
        run_id: lease.run_id.clone(),
        lease_id: lease.lease_id.clone(),
        fixture_timeout: config.fixtures.as_ref().map(|f| Duration::from_millis(f.timeout_ms)),
    };
    let placeholders = slot.config.placeholders(&lease.case_id, lease.attempt);
    let driver = slot.driver.as_ref();
    let lease_to_first_call_us = unix_us() - lease.granted_unix_us;
    let preparing = Instant::now();
    let mut between = Between::default();
    if let Err(error) = ready(slot, driver, &placeholders, &mut between).await {
        return infra(error);
    }
    let prepared_ms = ms_since(preparing);
    // The attempt's screenshots and film are written here, shipped with its
    // result, and removed with the folder.
    let files = AttemptFiles::new();
    let hooks = &slot.config.hooks;
    let recording = hooks
        .record
        .as_ref()
        .and_then(|command| Recording::of_attempt(command, &placeholders, files.root(), &case.id, lease.attempt));
    let device_log = hooks
        .log
        .as_ref()
        .and_then(|command| DeviceLog::of_attempt(command, &placeholders, files.root(), &case.id, lease.attempt));
    let context = context(slot, config, project, &files, &placeholders, recording.as_ref());
    let watched = Watched { device: driver, live: &slot.live };
    // Read outside the steps' time: while the app settles, done before the
    // first step, and after the last step.
    let mut health = Health::of(driver, &case);
    let health_start = async {
        let at = Instant::now();
        health.begin(driver).await;
        ms_since(at)
    };
    let mut health_start_ms = 0;
    let mut mark = None;
    let attempted = run_attempt_with(
        &watched,
        &case,
        lease.attempt,
        &context,
        async { health_start_ms = health_start.await },
        // The process that answers the first step: once the app has
        // settled, so that a `before` hook's relaunch is the start.
        || mark = Some(AppMark::now(driver)),
        on_step,
    )
    .await;
    between.health_start = health_start_ms;
    // Judged on the steps alone: what happens to the app after the last
    // one does not touch them.
    let verdict = mark.map_or(Verdict::Stands(None), |mark| mark.verdict(driver));
    let (mut attempt, mut observed, lost) = (attempted.case, attempted.observed, attempted.lost);
    let ended = Instant::now();
    let health = health.end(driver).await;
    between.health_end = ms_since(ended);
    between.settle = attempt.extra.get(PREPARE_MS).and_then(serde_json::Value::as_u64).unwrap_or(0);
    // The hook, the wait for the app and the reset readied the device too.
    attempt.extra.insert(PREPARE_MS.into(), (between.settle + prepared_ms).into());
    keep_what_was_seen(slot, &mut attempt, observed.as_mut(), recording, device_log).await;
    let link_note = match verdict {
        Verdict::RunAgain(why) => {
            warn!(%why, "the attempt proves nothing about the case; it runs again");
            return infra(why);
        }
        Verdict::Stands(note) => note,
    };
    let after = Instant::now();
    after_hooks(slot, &attempt, &placeholders).await;
    if crate::camera::ship(out, lease, files.root(), &mut attempt).await.is_err() {
        warn!("the link closed while the attempt's files were sent");
    }
    between.after = ms_since(after);
    if let Some(note) = &link_note {
        warn!(%note, "the app's link was flaky; the attempt stands");
    }
    between.log(&slot.config.name);
    grpc::AttemptResult {
        infrastructure_failure: lost.is_some(),
        error: lost.or(link_note).unwrap_or_default(),
        lease_to_first_call_us,
        observed: observed.map(Box::new),
        health,
        ..grpc::AttemptResult::recorded(&lease.lease_id, &attempt)
    }
}

/// What the runner is given for the attempt: the run's configuration (its
/// fixtures are the client's), the project's side through the coordinator,
/// the pictures' folder, the slot's screenshot hook and the film's start.
fn context(
    slot: &Slot,
    config: CasesConfig,
    project: RelayedProject,
    files: &AttemptFiles,
    placeholders: &[crate::slots::Placeholder],
    recording: Option<&Recording>,
) -> RunContext {
    let camera = slot.config.hooks.screenshot.as_ref().map(|command| {
        Arc::new(HookCamera { command: command.clone(), placeholders: placeholders.to_vec() }) as Arc<dyn Camera>
    });
    RunContext {
        config: CasesConfig { fixtures: None, ..config },
        project: Arc::new(project),
        collect_events: true,
        keep_going: false,
        pictures: Some(Pictures {
            root: files.root().into(),
            every_step: false,
            camera,
            film_started: recording.map(|r| r.started),
        }),
        observe: slot.config.observe,
    }
}

/// Readies the device for the steps: the slot's `before` hook, then the
/// app waited for (the hook may have launched it), then a reset, unless the
/// app is a process that said hello since the attempt was leased: lynkeus
/// starts each attempt on a fresh app, with no reset, and so does this.
async fn ready(
    slot: &Slot,
    driver: &Driver,
    placeholders: &[crate::slots::Placeholder],
    between: &mut Between,
) -> Result<(), String> {
    let process = driver.identity().process;
    if let Some(before) = &slot.config.hooks.before {
        let at = Instant::now();
        crate::slots::run_hook("before", before, placeholders).await.map_err(|e| e.to_string())?;
        between.hook = ms_since(at);
        let at = Instant::now();
        driver.wait_for_app(ATTACH_AFTER_HOOK).await.map_err(|e| format!("after the before hook: {e}"))?;
        between.attach = ms_since(at);
    }
    if driver.identity().process == process {
        let at = Instant::now();
        if let Err(error) = driver.call("reset", None, Duration::from_secs(20)).await
            && error.is_infrastructure()
        {
            return Err(format!("reset: {error}"));
        }
        between.reset = ms_since(at);
    }
    hand_trace_context(driver).await;
    Ok(())
}

/// What the attempt's line keeps beside its steps: the app's crashes, the
/// device's model and OS, the film, the device log.
async fn keep_what_was_seen(
    slot: &Slot,
    attempt: &mut RunCase,
    observed: Option<&mut grpc::AttemptObserved>,
    recording: Option<Recording>,
    device_log: Option<DeviceLog>,
) {
    if let Some(observed) = observed {
        keep_crashes(attempt, observed);
        let label = |keys: &[&str]| keys.iter().find_map(|k| slot.config.labels.get(*k)).cloned().unwrap_or_default();
        observed.device_model = label(&["model"]);
        observed.os_version = label(&["platformVersion", "os", "osVersion"]);
    }
    if let Some(recording) = recording {
        film(attempt, recording).await;
    }
    if let Some(log) = device_log
        && log.stop().await
    {
        let path = argus_proto::artifacts::log_path(&attempt.id, attempt.attempt);
        attempt.extra.insert(argus_proto::artifacts::LOG_KEY.into(), path.into());
    }
}

/// The app's crashes, kept with the attempt's line: every attempt's, not
/// only the failures' whose records stay.
fn keep_crashes(attempt: &mut RunCase, observed: &grpc::AttemptObserved) {
    let crashes: Vec<serde_json::Value> = observed
        .steps
        .iter()
        .flat_map(|step| step.problems.iter().filter(|p| p.kind == "crash").map(move |p| (step, p)))
        .map(|(step, crash)| {
            serde_json::json!({ "step": step.step, "message": crash.message, "route": crash.route, "stack": crash.stack })
        })
        .collect();
    if !crashes.is_empty() {
        attempt.extra.insert(argus_proto::artifacts::CRASHES_KEY.into(), crashes.into());
    }
}

/// The slot's `on_failure` hook (for a failed case), then its `after` hook.
async fn after_hooks(slot: &Slot, attempt: &RunCase, placeholders: &[crate::slots::Placeholder]) {
    if attempt.result == argus_proto::run::CaseResult::Failed
        && let Some(on_failure) = &slot.config.hooks.on_failure
        && let Err(error) = crate::slots::run_hook("on_failure", on_failure, placeholders).await
    {
        warn!(%error, "the on_failure hook failed");
    }
    if let Some(after) = &slot.config.hooks.after
        && let Err(error) = crate::slots::run_hook("after", after, placeholders).await
    {
        warn!(%error, "the after hook failed");
    }
}

/// Ends the attempt's film and names it in the attempt.
async fn film(attempt: &mut RunCase, recording: Recording) {
    if recording.stop().await {
        attempt.video = Some(argus_proto::artifacts::video_path(&attempt.id, attempt.attempt));
    } else {
        warn!("the record hook left no film");
    }
}

fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}
