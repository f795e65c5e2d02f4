//! Following a run to its end: the devices waited for, the updates
//! streamed (and streamed again after a lost connection), a signal
//! cancelling the run, the run directory, JUnit and the exit code.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use argus_cases::report::{RunDir, junit_muted};
use argus_cases::runner::LocalProject;
use argus_proto::grpc::{self, fleet_client::FleetClient, run_update, runs_client::RunsClient};
use argus_proto::run::{CaseResult, RunCase, RunManifest};
use tokio_util::sync::CancellationToken;

use crate::grid_commands::{Target, channel};
use crate::progress::Progress;

use super::*;

/// How `argus run` rides out a lost coordinator and a fleet with no device.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub reconnect_for: Duration,
    pub wait_for_devices: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self { reconnect_for: Duration::from_secs(120), wait_for_devices: Duration::from_secs(300) }
    }
}

/// What stops a watching client from outside: Ctrl-C, SIGTERM (what CI
/// sends on a timeout or a cancelled job), SIGHUP (a closed terminal).
/// Resolves to the signal's exit code.
pub(super) async fn stop_signal() -> u8 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let wait = |kind: SignalKind| async move {
            match signal(kind) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => 130,
            _ = wait(SignalKind::terminate()) => 143,
            _ = wait(SignalKind::hangup()) => 129,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        130
    }
}

/// Waits until `count` devices have an app attached.
pub async fn wait_for_devices(target: &Target, count: usize, wait: Duration) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    let deadline = started + wait;
    let (channel, bearer) = channel(target).await?;
    let mut fleet = FleetClient::with_interceptor(channel, bearer);
    // Said every few seconds, so that a slow machine is not mistaken for a hung one.
    let mut next_said = started + Duration::from_secs(3);
    loop {
        let list = fleet.list(grpc::ListFleetRequest {}).await.map_err(|s| s.message().to_owned())?.into_inner();
        let ready = list
            .devices
            .iter()
            .filter(|d| d.device.as_ref().is_some_and(|d| d.state == grpc::DeviceState::Idle as i32))
            .count();
        if ready >= count {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(format!(
                "{ready} of {count} devices have an app attached after {}s: is each app dialing its own port?",
                wait.as_secs()
            ));
        }
        if now >= next_said {
            eprintln!(
                "waiting for apps to attach: {ready} of {count} devices ready after {}s (giving up after {}s)",
                (now - started).as_secs(),
                wait.as_secs()
            );
            next_said = now + Duration::from_secs(5);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Submits, streams progress, writes the outputs; the exit code.
pub async fn execute(
    target: &Target,
    request: grpc::SubmitRequest,
    project: Option<Arc<LocalProject>>,
    out: Option<&std::path::Path>,
    junit_path: Option<&std::path::Path>,
    options: &WatchOptions,
) -> ExitCode {
    let mut client = match channel(target).await {
        Ok((channel, bearer)) => RunsClient::with_interceptor(channel, bearer),
        Err(error) => return usage(error),
    };
    let detach = request.detach;
    let retries = request.retries;
    // The JUnit suite is named after the project, as the dashboard names it.
    let project_name = request.project.clone();
    // The run's root span: the coordinator's run span, its leases and the
    // workers' attempts join it through the request's metadata.
    let span = tracing::info_span!("argus run", project = %request.project, files = request.cases.len());
    let mut request = tonic::Request::new(request);
    argus_proto::trace::inject(&mut request, &span);
    let submitted = match client.submit(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return usage(status.message()),
    };
    let muted = announce(&submitted);
    if detach {
        outln!("detached: the run goes on without this client");
        if !submitted.dashboard_url.is_empty() {
            outln!("{}", submitted.dashboard_url);
        }
        return ExitCode::SUCCESS;
    }
    // Served until this function returns, whatever way it does.
    let serving = CancellationToken::new();
    let _stop_serving = serving.clone().drop_guard();
    if let Some(project) = project {
        let (target, run_id, stop) = (target.clone(), submitted.run_id.clone(), serving.clone());
        argus_proto::task::spawn(
            "serve the project",
            tracing::Instrument::instrument(
                crate::serve::serve_project(target, run_id, project, stop),
                tracing::info_span!("serving the project"),
            ),
        );
    }
    // The run directory starts with the run: `run.json` now, lines as they come.
    let run_dir = match out {
        Some(dir) => match RunDir::create(dir, argus_cases::runner::iso_now()) {
            Ok(created) => Some(created),
            Err(error) => return usage(error),
        },
        None => None,
    };
    let mut watch = RunWatch {
        progress: Progress::new(&submitted.case_ids, &submitted.expected_ms, submitted.from_history),
        run_dir,
        out,
        lines: Vec::new(),
        retaken: crate::summary::Retaken::default(),
        waiting_since: None,
        retries,
        wait_for_devices: options.wait_for_devices,
    };
    let started = tokio::time::Instant::now();
    let run_id = submitted.run_id.clone();
    let manifest = match follow(&mut client, target, &run_id, &mut watch, options).await {
        Ok(manifest) => manifest,
        Err(code) => return code,
    };
    let end = End { submitted: &submitted, muted: &muted, project_name: &project_name, junit_path, started };
    conclude(&mut client, watch, manifest, end).await
}

/// The run as submitted, said: its id and size, where it is live, whether
/// it reruns another, and its muted cases; why each is muted.
fn announce(submitted: &grpc::SubmitResponse) -> std::collections::BTreeMap<String, String> {
    let cases = submitted.case_ids.len();
    match submitted.dashboard_url.as_str() {
        "" => outln!("run {}: {cases} case{}", submitted.run_id, crate::summary::plural(cases)),
        url => outln!("run {}: {cases} case{}, live at {url}", submitted.run_id, crate::summary::plural(cases)),
    }
    if !submitted.rerun_of.is_empty() {
        outln!("  the cases that failed in run {}, from the files it was submitted with", submitted.rerun_of);
    }
    // A muted case's failure does not fail the run.
    let muted: std::collections::BTreeMap<String, String> =
        submitted.muted.iter().map(|m| (m.case_id.clone(), m.reason.clone())).collect();
    if !muted.is_empty() {
        let n = muted.len();
        outln!(
            "  {n} case{} muted: a failure of {} does not fail the run",
            crate::summary::plural(n),
            if n == 1 { "it" } else { "them" }
        );
    }
    muted
}

/// Follows the run's updates to its end, watching again after a lost
/// connection (resuming after the last update it has, so nothing is missed
/// or written twice); the run's manifest, or the exit code it stopped with
/// (a signal, no device for too long, a refusal).
async fn follow(
    client: &mut Runs,
    target: &Target,
    run_id: &str,
    watch: &mut RunWatch<'_>,
    options: &WatchOptions,
) -> Result<RunManifest, ExitCode> {
    let signal = stop_signal();
    tokio::pin!(signal);
    tokio::pin!(signal);
    // The last update of the run's record this client has: a watch that is
    // lost resumes after it, so nothing is missed or written twice.
    let mut last_seq = 0u64;
    let manifest: RunManifest = 'watching: loop {
        let mut updates = match watch_again(client, target, run_id, last_seq, options, &mut signal).await {
            Ok(updates) => updates,
            Err(Stop::Signal(code)) => return Err(cancel_and_exit(client, run_id, &mut watch.progress, code).await),
            Err(Stop::Failed(message)) => return Err(usage(message)),
        };
        loop {
            let give_up = watch.waiting_since.as_ref().map(|(since, _)| *since + options.wait_for_devices);
            let update = tokio::select! {
                update = updates.message() => update,
                code = &mut signal => return Err(cancel_and_exit(client, run_id, &mut watch.progress, code).await),
                _ = async { match give_up { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => {
                    let reason = watch.waiting_since.take().map(|(_, reason)| reason).unwrap_or_default();
                    watch.progress.finish();
                    eprintln!(
                        "argus run: no device could take the run's cases for {} s: {reason}; cancelling run {run_id}",
                        options.wait_for_devices.as_secs()
                    );
                    let _ = client.cancel(grpc::CancelRequest { run_id: run_id.to_owned() }).await;
                    return Err(ExitCode::from(2));
                }
            };
            let update = match update {
                Ok(Some(update)) => update,
                Ok(None) => {
                    watch.progress.say(|| {
                        eprintln!("argus run: the coordinator ended the watch before the run finished; watching again")
                    });
                    continue 'watching;
                }
                Err(status) if resumable(&status) => {
                    watch
                        .progress
                        .say(|| eprintln!("argus run: lost the coordinator ({}); reconnecting", status.message()));
                    continue 'watching;
                }
                Err(status) => return Err(usage(format!("the coordinator stopped the watch: {}", status.message()))),
            };
            if update.seq != 0 {
                if update.seq <= last_seq {
                    // Seen before the watch was resumed.
                    continue;
                }
                last_seq = update.seq;
            }
            match watch.on_update(update.kind, client, run_id).await {
                Ok(Flow::Going) => {}
                Ok(Flow::Ended(manifest)) => break 'watching manifest,
                Err(message) => return Err(usage(message)),
            }
            watch.progress.show();
        }
    };
    Ok(manifest)
}

/// What the end of a run is told with.
struct End<'a> {
    submitted: &'a grpc::SubmitResponse,
    muted: &'a std::collections::BTreeMap<String, String>,
    project_name: &'a str,
    junit_path: Option<&'a std::path::Path>,
    started: tokio::time::Instant,
}

/// The run's end: its directory finished, JUnit written, the summary and
/// why cases failed printed; the exit code (1 when an unmuted case failed).
async fn conclude(client: &mut Runs, watch: RunWatch<'_>, manifest: RunManifest, end: End<'_>) -> ExitCode {
    let End { submitted, muted, project_name, junit_path, started } = end;
    let run_id = &submitted.run_id;
    let RunWatch { progress, mut run_dir, lines, retaken, .. } = watch;
    progress.finish();
    if manifest.totals.is_none() {
        // Cut short: by an operator, or because nobody could run it.
        if let Some(dir) = run_dir.as_mut()
            && let Err(error) = dir.finish_with(&manifest)
        {
            return usage(error);
        }
        return usage(format!("run {run_id} was cancelled before it finished"));
    }
    if let Some(dir) = run_dir.as_mut()
        && let Err(error) = dir.finish_with(&manifest)
    {
        return usage(error);
    }
    if let Some(path) = junit_path
        && let Err(error) = std::fs::write(path, junit_muted(project_name, &lines, muted))
    {
        return usage(format!("{}: {error}", path.display()));
    }
    let totals = manifest.totals.unwrap_or_default();
    for line in crate::summary::summary(&totals, &lines, &retaken, started.elapsed()) {
        outln!("{line}");
    }
    if totals.failed > 0 {
        match client.explain(grpc::ExplainRequest { run_id: run_id.clone() }).await {
            Ok(explained) => {
                for line in crate::summary::why(&explained.into_inner()) {
                    outln!("{line}");
                }
            }
            Err(status) => outln!("why it failed: the coordinator could not say ({})", status.message()),
        }
    }
    let muted_failed = crate::summary::muted_failed(&lines, muted);
    for (id, why) in &muted_failed {
        outln!("muted: {id} failed and does not fail the run ({why})");
    }
    if !submitted.dashboard_url.is_empty() {
        outln!("{}", submitted.dashboard_url);
    }
    if totals.failed as usize > muted_failed.len() { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// What `argus run` keeps while it watches a run, and what it does with
/// each update: progress, the run directory's lines and files, retries
/// taken back, and how long no device could take the run's cases.
pub(super) struct RunWatch<'a> {
    progress: Progress,
    run_dir: Option<RunDir>,
    /// Where the run directory is, for the files each line names.
    out: Option<&'a std::path::Path>,
    lines: Vec<RunCase>,
    retaken: crate::summary::Retaken,
    waiting_since: Option<(tokio::time::Instant, String)>,
    retries: u32,
    wait_for_devices: Duration,
}

/// Whether the run goes on after an update.
pub(super) enum Flow {
    Going,
    Ended(RunManifest),
}

impl RunWatch<'_> {
    /// Takes one update of the run's watch; an error says what of it could
    /// not be read or written.
    async fn on_update<S>(
        &mut self,
        kind: Option<run_update::Kind>,
        client: &mut RunsClient<S>,
        run_id: &str,
    ) -> Result<Flow, String>
    where
        S: tonic::client::GrpcService<tonic::body::Body>,
        S::Error: Into<tonic::codegen::StdError>,
        S::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
        <S::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
    {
        match kind {
            Some(run_update::Kind::Started(started)) => {
                if self.waiting_since.take().is_some() {
                    self.progress.say(|| eprintln!("argus run: a device took the run's cases again"));
                }
                let device = started.device.map(|d| d.id).unwrap_or_default();
                self.progress.started(&device, &started.case_id);
            }
            Some(run_update::Kind::Finished(finished)) if finished.infrastructure_failure => {
                let device = finished.device.map(|d| d.id).unwrap_or_default();
                let case = finished.case_id;
                self.progress.ended(&device, &case, None);
                let reason = &finished.infrastructure_reason;
                self.progress.say(|| outln!("↻ {case} on {device}: {reason} (it runs again)"));
                self.retaken.attempts.push((case, device));
            }
            Some(run_update::Kind::Finished(finished)) => {
                let mut line = match serde_json::from_str::<RunCase>(&finished.run_case_json) {
                    Ok(line) => line,
                    Err(error) => {
                        return Err(format!("the coordinator sent a result that does not parse: {error}"));
                    }
                };
                // The device travels beside the record; the run directory's
                // line names it.
                line.device = finished.device.as_ref().map(argus_proto::run::RunDevice::from);
                let device = finished.device.map(|d| d.id).unwrap_or_default();
                // A failed attempt that runs again is not the case's end.
                let again = line.result == CaseResult::Failed && line.attempt <= self.retries;
                let end = (!again).then_some(line.result);
                self.progress.ended(&device, &line.id, end);
                self.progress.say(|| print_line(&line, &device));
                if let Some(dir) = self.run_dir.as_mut()
                    && let Err(error) = dir.add(&line)
                {
                    return Err(error.to_string());
                }
                if let Some(root) = self.out {
                    fetch_files(client, run_id, root, &line).await;
                }
                self.lines.push(line);
            }
            Some(run_update::Kind::RunFinished(finished)) => match serde_json::from_str(&finished.manifest_json) {
                Ok(manifest) => return Ok(Flow::Ended(manifest)),
                Err(error) => {
                    return Err(format!("the coordinator sent a manifest that does not parse: {error}"));
                }
            },
            Some(run_update::Kind::Step(step)) => {
                let device = step.device.map(|d| d.id).unwrap_or_default();
                let label = match serde_json::from_str::<argus_proto::run::RunStep>(&step.run_step_json) {
                    Ok(step) => step.step,
                    Err(error) => {
                        return Err(format!("the coordinator sent a step that does not parse: {error}"));
                    }
                };
                self.progress.started(&device, &format!("{} › {label}", step.case_id));
            }
            Some(run_update::Kind::NoDevice(no)) if no.waiting => {
                let left = self.wait_for_devices.as_secs();
                self.progress.say(|| {
                    eprintln!(
                        "argus run: waiting: {}; cancelling in {left} s unless a device comes (--wait-for-devices)",
                        no.message
                    )
                });
                let since = self.waiting_since.as_ref().map_or_else(tokio::time::Instant::now, |(since, _)| *since);
                self.waiting_since = Some((since, no.message));
            }
            Some(run_update::Kind::NoDevice(_)) if self.waiting_since.take().is_some() => {
                self.progress.say(|| eprintln!("argus run: devices are back"));
            }
            Some(run_update::Kind::NoDevice(_)) | None => {}
        }
        Ok(Flow::Going)
    }
}

/// Fetches the screenshots and films `line` names into the run directory
/// `root`, where its paths point. A file that cannot be fetched is said on
/// stderr; the run goes on.
pub(super) async fn fetch_files<S>(client: &mut RunsClient<S>, run_id: &str, root: &std::path::Path, line: &RunCase)
where
    S: tonic::client::GrpcService<tonic::body::Body>,
    S::Error: Into<tonic::codegen::StdError>,
    S::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <S::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    for path in argus_proto::artifacts::files_of(line) {
        let fetched = async {
            let file = argus_proto::artifacts::join(root, &path).map_err(|bad| bad.to_string())?;
            let request = grpc::ArtifactRequest { run_id: run_id.to_owned(), path: path.clone() };
            let mut pieces = client.artifact(request).await.map_err(|s| s.message().to_owned())?.into_inner();
            let mut bytes = Vec::new();
            while let Some(piece) = pieces.message().await.map_err(|s| s.message().to_owned())? {
                bytes.extend_from_slice(&piece.data);
            }
            std::fs::create_dir_all(file.parent().unwrap_or(root)).map_err(|e| e.to_string())?;
            std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))
        };
        if let Err(error) = fetched.await {
            eprintln!("argus run: cannot fetch {path} of run {run_id}: {error}");
        }
    }
}

/// Why watching stopped before the run did.
pub(super) enum Stop {
    Signal(u8),
    Failed(String),
}

/// A status that a new watch may get past: the coordinator restarting, the
/// network, a watch that fell behind.
pub(super) fn resumable(status: &tonic::Status) -> bool {
    use tonic::Code;
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled | Code::Aborted | Code::ResourceExhausted
    ) || status.message().contains("h2 protocol error")
}

/// The client of the coordinator's Runs service.
type Runs =
    RunsClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, argus_proto::auth::Bearer>>;

/// Watches the run after `last_seq`, dialing again with backoff (printed)
/// for up to `options.reconnect_for`. With several coordinators (`a,b`),
/// each try dials whichever of them serves: a standby that took over.
pub(super) async fn watch_again(
    client: &mut Runs,
    target: &Target,
    run_id: &str,
    last_seq: u64,
    options: &WatchOptions,
    signal: &mut std::pin::Pin<&mut impl std::future::Future<Output = u8>>,
) -> Result<tonic::Streaming<grpc::RunUpdate>, Stop> {
    use backon::BackoffBuilder;
    let deadline = tokio::time::Instant::now() + options.reconnect_for;
    let mut backoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build();
    let mut tries = 0u32;
    loop {
        let request = grpc::WatchRequest { run_id: run_id.to_owned(), after_seq: last_seq };
        let error = tokio::select! {
            code = &mut *signal => return Err(Stop::Signal(code)),
            watched = client.watch(request) => match watched {
                Ok(stream) => {
                    if tries > 0 {
                        eprintln!("argus run: reconnected; resuming run {run_id} after update {last_seq}");
                    }
                    return Ok(stream.into_inner());
                }
                Err(status) if resumable(&status) => status.message().to_owned(),
                Err(status) => return Err(Stop::Failed(status.message().to_owned())),
            },
        };
        tries += 1;
        let wait = backoff.next().unwrap_or(Duration::from_secs(5));
        if tokio::time::Instant::now() + wait > deadline {
            return Err(Stop::Failed(format!(
                "the coordinator did not answer for {} s (--reconnect-for); run {run_id} goes on there, and is \
                 cancelled if no client watches it: {error}",
                options.reconnect_for.as_secs()
            )));
        }
        if tries == 1 || tries.is_multiple_of(10) {
            eprintln!(
                "argus run: the coordinator does not answer ({error}); trying again for up to {} s",
                deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs()
            );
        }
        tokio::select! {
            code = &mut *signal => return Err(Stop::Signal(code)),
            _ = tokio::time::sleep(wait) => {}
        }
        if target.url.contains(',')
            && let Ok((channel, bearer)) = channel(target).await
        {
            *client = RunsClient::with_interceptor(channel, bearer);
        }
    }
}

/// Stopped from outside: the run is cancelled (nobody would read it), and
/// the exit code is the signal's.
pub(super) async fn cancel_and_exit<S>(
    client: &mut RunsClient<S>,
    run_id: &str,
    progress: &mut Progress,
    code: u8,
) -> ExitCode
where
    S: tonic::client::GrpcService<tonic::body::Body>,
    S::Error: Into<tonic::codegen::StdError>,
    S::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <S::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    progress.finish();
    eprintln!("argus run: interrupted; cancelling run {run_id}");
    let cancel = client.cancel(grpc::CancelRequest { run_id: run_id.to_owned() });
    match tokio::time::timeout(Duration::from_secs(5), cancel).await {
        Ok(Ok(_)) => {}
        Ok(Err(status)) => eprintln!("argus run: the coordinator did not cancel run {run_id}: {}", status.message()),
        Err(_) => eprintln!(
            "argus run: the coordinator did not answer the cancel; run {run_id} is cancelled when no client watches it"
        ),
    }
    ExitCode::from(code)
}
