//! A worker: one driver per device slot, and one gRPC stream to the
//! coordinator over which it reports its devices and runs the attempts it is
//! leased. The drivers stay up while the coordinator is away; the stream is
//! dialed again with backoff.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_cases::runner::{Camera, PREPARE_MS, Pictures, RunContext, run_attempt_with};
use argus_cases::{Case, CaseFile, CasesConfig};
use argus_proto::auth::Bearer;
use argus_proto::grpc::{self, coordinator_message, worker_message, workers_client::WorkersClient};
use argus_proto::run::StepStatus;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::camera::{AttemptFiles, HookCamera, Recording};
use crate::device_log::DeviceLog;
use crate::driver::{Driver, DriverConfig, DriverEvent, ListenError};
use crate::health::Health;
use crate::live::{Live, Watched};
use crate::project::{LinkCalls, RelayedProject};
use crate::relaunch::AppMark;

pub use crate::slots::{Hooks, SlotConfig, WorkerFile, check_slots};

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `http://host:port` of the coordinator's gRPC port.
    pub coordinator: String,
    pub name: String,
    /// Where the drivers listen (loopback by default).
    pub host: String,
    /// The apps' token, if they have one.
    pub app_token: Option<String>,
    /// The coordinator's worker token, if it requires one.
    pub token: Option<String>,
    /// For an https:// coordinator whose certificate no public CA signed:
    /// the CA certificate (PEM) to trust.
    pub tls_ca: Option<std::path::PathBuf>,
    pub slots: Vec<SlotConfig>,
}

struct Slot {
    config: SlotConfig,
    driver: Arc<Driver>,
    busy: Mutex<bool>,
    /// The last hello an app sent on this slot: kept after it leaves, so the
    /// device is shown as disconnected rather than never seen.
    last_hello: Mutex<Option<Arc<argus_proto::wire::Hello>>>,
    /// What its app shows now, for the live view.
    live: Live,
}

impl Slot {
    fn device(&self) -> grpc::Device {
        let mut last = self.last_hello.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hello) = self.driver.hello() {
            *last = Some(hello);
        }
        let hello = last.clone();
        let state = match (self.driver.connected(), *self.busy.lock().unwrap_or_else(|p| p.into_inner())) {
            (true, true) => grpc::DeviceState::Busy,
            (true, false) => grpc::DeviceState::Idle,
            (false, _) if hello.is_none() => grpc::DeviceState::Waiting,
            (false, _) => grpc::DeviceState::Disconnected,
        };
        crate::metrics::slot(&self.config.name, &self.config.platform, &grpc::device_state_name(state as i32));
        grpc::Device {
            slot: self.config.name.clone(),
            port: u32::from(self.config.port),
            platform: self.config.platform.clone(),
            bridge: self.config.bridge.clone(),
            labels: self.config.labels.clone().into_iter().collect(),
            udid: self.config.udid.clone().unwrap_or_default(),
            serial: self.config.serial.clone().unwrap_or_default(),
            state: state as i32,
            hello_json: hello.map(|h| serde_json::to_string(&*h).unwrap_or_default()).unwrap_or_default(),
            app_problem: if self.driver.connected() {
                String::new()
            } else {
                self.driver.problem().unwrap_or_default()
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("the drivers listen on {0}, beyond this machine: give the apps' token (--app-token or LYNKEUS_TOKEN)")]
    OpenWithoutToken(String),
    #[error("slot {slot}: {source}")]
    Listen { slot: String, source: ListenError },
    #[error("a worker needs at least one device slot")]
    NoSlots,
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
}

/// Starts the drivers and keeps a stream to the coordinator until `cancel`.
pub async fn run(config: WorkerConfig, cancel: CancellationToken) -> Result<(), WorkerError> {
    if config.slots.is_empty() {
        return Err(WorkerError::NoSlots);
    }
    let loopback =
        config.host == "localhost" || config.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback && config.app_token.as_deref().is_none_or(str::is_empty) {
        return Err(WorkerError::OpenWithoutToken(config.host.clone()));
    }
    let mut slots = Vec::new();
    for slot in &config.slots {
        let driver = Driver::listen(DriverConfig {
            host: config.host.clone(),
            port: slot.port,
            token: config.app_token.clone(),
            ..DriverConfig::default()
        })
        .await
        .map_err(|source| WorkerError::Listen { slot: slot.name.clone(), source })?;
        info!(slot = %slot.name, port = slot.port, platform = %slot.platform, dial = %format!("ws://{}:{}", slot.bridge, slot.port), "device slot ready");
        slots.push(Arc::new(Slot {
            config: slot.clone(),
            driver: Arc::new(driver),
            busy: Mutex::new(false),
            last_hello: Mutex::new(None),
            live: Live::default(),
        }));
    }
    let slots = Arc::new(slots);
    let attempts = TaskTracker::new();
    let mut backoff = reconnect_backoff();
    loop {
        match link(&config, &slots, &attempts, &cancel).await {
            LinkEnd::Stopped => break,
            LinkEnd::Refused(reason) => {
                close_drivers(&slots, &attempts).await;
                return Err(WorkerError::Refused(reason));
            }
            LinkEnd::Lost { error, registered } => {
                if registered {
                    // It was up: the next loss starts from a short wait again.
                    backoff = reconnect_backoff();
                }
                let wait = backoff.next().unwrap_or(RECONNECT_MAX);
                warn!(coordinator = %config.coordinator, %error, retry_ms = wait.as_millis() as u64, "no link to the coordinator; the drivers keep serving");
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
    close_drivers(&slots, &attempts).await;
    Ok(())
}

/// The longest wait between two dials of the coordinator.
const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// How long a stopping worker lets its attempts finish before it hands
/// them back.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// The heartbeat interval when the coordinator does not say one.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);

/// Waits between dials: from 100 ms doubling to 5 s, each with jitter, so
/// that a fleet of workers does not dial a restarted coordinator at once.
fn reconnect_backoff() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(RECONNECT_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}

async fn close_drivers(slots: &[Arc<Slot>], attempts: &TaskTracker) {
    attempts.close();
    let _ = tokio::time::timeout(Duration::from_secs(5), attempts.wait()).await;
    for slot in slots {
        slot.driver.close().await;
    }
}

/// How one stream to the coordinator ended.
enum LinkEnd {
    /// The worker was told to stop, and has.
    Stopped,
    /// The coordinator refused this worker for good (a wrong token, a bad
    /// URL): dialing again would not help.
    Refused(String),
    Lost {
        error: String,
        registered: bool,
    },
}

/// Attempts running on this link: their leases, and how to stop each.
#[derive(Default)]
struct Running(Mutex<HashMap<String, CancellationToken>>);

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One stream to the coordinator, until it ends or the worker stops. On
/// stop, the attempts running finish (or, past [`DRAIN_DEADLINE`], are
/// handed back as infrastructure failures) before `GoingAway`.
async fn link(
    config: &WorkerConfig,
    slots: &Arc<Vec<Arc<Slot>>>,
    attempts: &TaskTracker,
    cancel: &CancellationToken,
) -> LinkEnd {
    let lost = |error: String| LinkEnd::Lost { error, registered: false };
    let bearer = match Bearer::new(config.token.as_deref()) {
        Ok(bearer) => bearer,
        Err(error) => return LinkEnd::Refused(error.to_string()),
    };
    let channel = tokio::select! {
        _ = cancel.cancelled() => return LinkEnd::Stopped,
        channel = argus_proto::connect::connect(&config.coordinator, config.tls_ca.as_deref()) => match channel {
            Ok(channel) => channel,
            // What was given cannot be dialled: trying again will not help.
            Err(error @ argus_proto::connect::ConnectError::Setup(_)) => return LinkEnd::Refused(error.to_string()),
            Err(error) => return lost(error.to_string()),
        },
    };
    let mut client = WorkersClient::with_interceptor(channel, bearer);
    // Listen for device changes before the snapshot, so that none falls between.
    let mut events: Vec<_> = slots.iter().map(|s| s.driver.events()).collect();
    let (out, outbound) = mpsc::channel::<grpc::WorkerMessage>(1024);
    let send = |kind: worker_message::Kind| grpc::WorkerMessage { kind: Some(kind) };
    let hostname = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
    let register = grpc::Register {
        worker_id_prefix: config.name.clone(),
        hostname,
        version: env!("CARGO_PKG_VERSION").into(),
        devices: slots.iter().map(|s| s.device()).collect(),
        labels: Default::default(),
    };
    if out.send(send(worker_message::Kind::Register(register))).await.is_err() {
        return lost("the outbound stream closed".into());
    }
    let mut inbound = tokio::select! {
        _ = cancel.cancelled() => return LinkEnd::Stopped,
        linked = client.link(ReceiverStream::new(outbound)) => match linked {
            Ok(response) => response.into_inner(),
            Err(status) if matches!(status.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied) => {
                return LinkEnd::Refused(status.message().to_owned());
            }
            Err(status) => return lost(status.message().to_owned()),
        },
    };
    let (changed_tx, mut changed) = mpsc::channel::<usize>(256);
    let link_cancel = cancel.child_token();
    let _stop_watchers = link_cancel.clone().drop_guard();
    for (index, mut rx) in events.drain(..).enumerate() {
        let changed_tx = changed_tx.clone();
        let stop = link_cancel.clone();
        attempts.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    event = rx.recv() => match event {
                        Ok(DriverEvent::Navigation(_)) => {}
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if changed_tx.send(index).await.is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                }
            }
        });
    }
    let shared = Shared {
        out: out.clone(),
        running: Arc::default(),
        parsed: Arc::default(),
        calls: LinkCalls::new(out.clone()),
        changed: changed_tx.clone(),
    };
    let running = shared.running.clone();
    let mut heartbeat_every = DEFAULT_HEARTBEAT;
    let mut heartbeat = tokio::time::interval(heartbeat_every);
    // The coordinator sends a keepalive every heartbeat; three missed and
    // it is taken for gone (a frozen process, a half-open connection).
    let mut last_heard = tokio::time::Instant::now();
    // What the coordinator was last told of each device; a change that no
    // event announced (an attempt of an earlier link ending) is caught here.
    let mut told: Vec<grpc::Device> = slots.iter().map(|s| s.device()).collect();
    let mut refresh = tokio::time::interval(Duration::from_secs(1));
    // The live view: off until the coordinator says someone watches.
    let mut watching = false;
    let mut live_tick = tokio::time::interval(LIVE_TICK);
    live_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut stopping_leases = false;
    let mut registered = false;
    let mut stopping: Option<tokio::time::Instant> = None;
    let lost = |error: String, registered: bool| LinkEnd::Lost { error, registered };
    macro_rules! send_or_lost {
        ($message:expr) => {
            if out.send($message).await.is_err() {
                return lost("the coordinator's stream closed".into(), registered);
            }
        };
    }
    loop {
        if let Some(deadline) = stopping {
            let left: Vec<(String, CancellationToken)> =
                running.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if left.is_empty() || tokio::time::Instant::now() >= deadline {
                for (lease_id, stop) in left {
                    stop.cancel();
                    let handed_back = grpc::AttemptResult {
                        lease_id,
                        infrastructure_failure: true,
                        error: "the worker stopped before the attempt finished".into(),
                        ..Default::default()
                    };
                    let _ = out.send(send(worker_message::Kind::Attempt(handed_back))).await;
                }
                let going = grpc::GoingAway { reason: "the worker is stopping".into() };
                let _ = out.send(send(worker_message::Kind::GoingAway(going))).await;
                // The coordinator ends the stream once it has read all of
                // it, GoingAway last; then nothing queued is lost.
                let drained = async { while let Ok(Some(_)) = inbound.message().await {} };
                let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
                return LinkEnd::Stopped;
            }
        }
        tokio::select! {
            _ = cancel.cancelled(), if stopping.is_none() => {
                // Told first, so that the coordinator leases nothing more
                // while what runs finishes.
                let notice = grpc::Stopping { reason: "the worker is stopping".into() };
                let _ = out.send(send(worker_message::Kind::Stopping(notice))).await;
                let n = running.lock().len();
                info!(attempts = n, deadline_s = DRAIN_DEADLINE.as_secs(), "stopping: running attempts finish first, no new ones start");
                stopping = Some(tokio::time::Instant::now() + DRAIN_DEADLINE);
                stopping_leases = true;
            }
            _ = tokio::time::sleep(Duration::from_millis(100)), if stopping.is_some() => {}
            Some(index) = changed.recv() => {
                let device = slots[index].device();
                told[index] = device.clone();
                send_or_lost!(send(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) })));
            }
            _ = refresh.tick() => {
                for (index, slot) in slots.iter().enumerate() {
                    let device = slot.device();
                    if device != told[index] {
                        told[index] = device.clone();
                        send_or_lost!(send(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) })));
                    }
                }
                if last_heard.elapsed() > heartbeat_every * 3 {
                    return lost(format!("the coordinator went silent for {} s", last_heard.elapsed().as_secs()), registered);
                }
            }
            _ = live_tick.tick(), if watching => {
                let now = std::time::Instant::now();
                for slot in slots.iter() {
                    // A device without its app is shown as it was left.
                    if slot.driver.connected() && slot.live.read_due(now) {
                        read_for_live(slot.clone(), attempts);
                    }
                    if let Some(live) = slot.live.take(&slot.config.name) {
                        send_or_lost!(send(worker_message::Kind::Live(live)));
                    }
                }
            }
            _ = heartbeat.tick() => {
                let lease_ids: Vec<String> = running.lock().keys().cloned().collect();
                send_or_lost!(send(worker_message::Kind::Heartbeat(grpc::Heartbeat { lease_ids })));
            }
            message = inbound.message() => {
                let message = match message {
                    Ok(Some(message)) => message,
                    Ok(None) => return lost("the coordinator ended the stream".into(), registered),
                    Err(status) => return lost(status.message().to_owned(), registered),
                };
                last_heard = tokio::time::Instant::now();
                match message.kind {
                    Some(coordinator_message::Kind::Registered(reply)) => {
                        info!(worker = %reply.worker_id, heartbeat_ms = reply.heartbeat_ms, "registered with the coordinator");
                        registered = true;
                        if reply.heartbeat_ms > 0 {
                            heartbeat_every = Duration::from_millis(u64::from(reply.heartbeat_ms));
                            heartbeat = tokio::time::interval(heartbeat_every);
                        }
                    }
                    Some(coordinator_message::Kind::Lease(lease)) if !stopping_leases => shared.on_lease(slots, lease, attempts),
                    Some(coordinator_message::Kind::Lease(lease)) => {
                        // Crossed with this worker's GoingAway: handed back at once.
                        warn!(lease = %lease.lease_id, "stopping: lease handed back");
                        let handed_back = grpc::AttemptResult {
                            lease_id: lease.lease_id,
                            infrastructure_failure: true,
                            error: "the worker is stopping".into(),
                            ..Default::default()
                        };
                        send_or_lost!(send(worker_message::Kind::Attempt(handed_back)));
                    }
                    Some(coordinator_message::Kind::Drain(drain)) => {
                        // The coordinator leases nothing more to a drained
                        // worker (and may resume it); what runs finishes.
                        info!(reason = %drain.reason, "drained: current attempts finish, the coordinator sends no new ones");
                    }
                    Some(coordinator_message::Kind::Cancel(cancelled)) => shared.on_cancel(&cancelled),
                    Some(coordinator_message::Kind::ProjectAnswer(answer)) => shared.calls.answered(answer),
                    Some(coordinator_message::Kind::DeviceCall(call)) => {
                        if let Some(refused) = shared.on_device_call(slots, call, attempts) {
                            send_or_lost!(send(worker_message::Kind::DeviceAnswer(refused)));
                        }
                    }
                    Some(coordinator_message::Kind::Watch(watch)) => {
                        if watch.watching && !watching {
                            // A new watcher sees every device at once.
                            slots.iter().for_each(|slot| slot.live.resend());
                        }
                        watching = watch.watching;
                    }
                    Some(coordinator_message::Kind::Keepalive(_)) | None => {}
                }
            }
        }
    }
}

/// What the attempts and device calls started on one link share with it.
struct Shared {
    out: mpsc::Sender<grpc::WorkerMessage>,
    /// The attempts running now, each with what stops it.
    running: Arc<Running>,
    parsed: Arc<ParsedFiles>,
    calls: Arc<LinkCalls>,
    /// Told the index of a slot whose device may have changed.
    changed: mpsc::Sender<usize>,
}

impl Shared {
    /// Runs `lease` on its slot in a task of its own (tracked by
    /// `attempts`): the slot is busy meanwhile, each step is streamed, and
    /// the result is sent unless the attempt was cancelled.
    fn on_lease(&self, slots: &[Arc<Slot>], lease: grpc::Lease, attempts: &TaskTracker) {
        let Some(index) = slots.iter().position(|s| s.config.name == lease.slot) else {
            warn!(slot = %lease.slot, "lease for a slot this worker does not have");
            return;
        };
        let slot = slots[index].clone();
        let stop = CancellationToken::new();
        self.running.lock().insert(lease.lease_id.clone(), stop.clone());
        let (out, running) = (self.out.clone(), self.running.clone());
        let (changed_tx, parsed, calls) = (self.changed.clone(), self.parsed.clone(), self.calls.clone());
        attempts.spawn(async move {
            *slot.busy.lock().unwrap_or_else(|p| p.into_inner()) = true;
            let _ = changed_tx.send(index).await;
            let span = tracing::info_span!("attempt", run = %lease.run_id, case = %lease.case_id, attempt = lease.attempt, slot = %slot.config.name, trace_context = tracing::field::Empty);
            argus_proto::trace::set_parent(&span, &lease.traceparent);
            let (steps, lease_id) = (out.clone(), lease.lease_id.clone());
            slot.live.begin(&lease.run_id, &lease.case_id, lease.attempt);
            let watched = slot.clone();
            let on_step = move |index: usize, step: &argus_proto::run::RunStep| {
                watched.live.step(index as u32, &step.step);
                let step = grpc::StepResult {
                    lease_id: lease_id.clone(),
                    index: index as u32,
                    run_step_json: serde_json::to_string(step).expect("a step is plain data"),
                };
                let _ = steps.try_send(grpc::WorkerMessage { kind: Some(worker_message::Kind::Step(step)) });
            };
            let attempt = tracing::Instrument::instrument(run_lease(&slot, &lease, &parsed, &calls, &out, on_step), span.clone());
            let result = tokio::select! {
                result = attempt => Some(result),
                _ = stop.cancelled() => None,
            };
            if result.is_none() {
                // Cancelled: the call in flight was dropped; the
                // slot's `after` hook puts the device back.
                span.in_scope(|| info!("attempt cancelled; the app is no longer driven"));
                if let Some(after) = &slot.config.hooks.after {
                    let placeholders = slot.config.placeholders(&lease.case_id, lease.attempt);
                    if let Err(error) = crate::slots::run_hook("after", after, &placeholders).await {
                        warn!(%error, "the after hook failed");
                    }
                }
            }
            *slot.busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
            slot.live.end();
            if let Some(result) = result {
                crate::metrics::attempt(&attempt_outcome(&result));
                let _ = out.send(grpc::WorkerMessage { kind: Some(worker_message::Kind::Attempt(result)) }).await;
            }
            running.lock().remove(&lease.lease_id);
            let _ = changed_tx.send(index).await;
        });
    }

    /// Stops the attempt of a lease the coordinator took back.
    fn on_cancel(&self, cancelled: &grpc::Cancel) {
        match self.running.lock().get(&cancelled.lease_id) {
            Some(stop) => {
                info!(lease = %cancelled.lease_id, reason = %cancelled.reason, "cancelling an attempt");
                stop.cancel();
            }
            None => info!(lease = %cancelled.lease_id, "cancel for an attempt that is not running"),
        }
    }

    /// Answers a device call (the WebDriver facade's) in a task of its own;
    /// the answer to send at once when this worker has no such slot.
    fn on_device_call(
        &self,
        slots: &[Arc<Slot>],
        call: grpc::DeviceCall,
        attempts: &TaskTracker,
    ) -> Option<grpc::DeviceAnswer> {
        let Some(slot) = slots.iter().find(|s| s.config.name == call.slot).cloned() else {
            let error =
                grpc::DeviceError { code: String::new(), message: format!("this worker has no slot {}", call.slot) };
            return Some(grpc::DeviceAnswer {
                call_id: call.call_id,
                outcome: Some(grpc::device_answer::Outcome::Error(error)),
            });
        };
        let out = self.out.clone();
        attempts.spawn(async move {
            let span = tracing::info_span!("device_call", method = %call.method, slot = %call.slot, trace_context = tracing::field::Empty);
            argus_proto::trace::set_parent(&span, &call.traceparent);
            let answer = tracing::Instrument::instrument(crate::device_calls::answer(&slot.driver, &slot.config, &call), span).await;
            match &answer.outcome {
                Some(grpc::device_answer::Outcome::ResultJson(json)) if call.method == "screen" => {
                    if let Ok(screen) = serde_json::from_str(json) {
                        slot.live.saw("screen", &screen);
                    }
                }
                // Whatever else a session did may have changed the screen.
                _ => slot.live.poke(),
            }
            let _ = out.send(grpc::WorkerMessage { kind: Some(worker_message::Kind::DeviceAnswer(answer)) }).await;
        });
        None
    }
}

/// An attempt's result, for the metrics: the case's, or `infrastructure`.
fn attempt_outcome(result: &grpc::AttemptResult) -> String {
    if result.infrastructure_failure {
        return "infrastructure".into();
    }
    serde_json::from_str::<argus_proto::run::RunCase>(&result.run_case_json)
        .map(|line| format!("{:?}", line.result).to_lowercase())
        .unwrap_or_else(|_| "unknown".into())
}

/// What a step's error says when the device, not the case, failed: the
/// words of the driver's call errors that are infrastructure
/// ([`crate::driver::CallError::is_infrastructure`]), as
/// the runner writes them into the step (the line carries text only).
const INFRASTRUCTURE: [&str; 4] =
    ["No app attached", "App disconnected mid-call", "Agent server closed", "Not authenticated"];

/// Case files read once per run: every lease of a file carries its text,
/// and a matrix of hundreds of cases must not be read again for each one
/// (nor by each of the first leases that arrive together). Each lease
/// builds its own case only.
#[derive(Default)]
struct ParsedFiles(Mutex<HashMap<RunFile, Arc<ParsedFile>>>);

/// A run's id and a case file's path.
type RunFile = (String, String);
type ParsedFile = tokio::sync::OnceCell<Result<CaseFile, String>>;

impl ParsedFiles {
    /// Files kept; beyond it the cache starts over.
    const FILES: usize = 256;

    async fn case(&self, lease: &grpc::Lease) -> Result<Case, String> {
        let cell = {
            let mut files = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if files.len() >= Self::FILES {
                files.clear();
            }
            files.entry((lease.run_id.clone(), lease.case_file.clone())).or_default().clone()
        };
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

/// How often a watched link looks for live screens to send or read.
const LIVE_TICK: Duration = Duration::from_millis(250);

/// Reads a slot's screen for the live view alone, in a tracked task.
fn read_for_live(slot: Arc<Slot>, tasks: &TaskTracker) {
    tasks.spawn(async move {
        crate::metrics::live_read();
        if let Ok(screen) = slot.driver.call("screen", None, crate::live::READ_TIMEOUT).await {
            slot.live.saw("screen", &screen);
        }
        slot.live.read_done();
    });
}

/// Runs one leased attempt on its slot's driver.
async fn run_lease(
    slot: &Slot,
    lease: &grpc::Lease,
    parsed: &ParsedFiles,
    calls: &Arc<LinkCalls>,
    out: &mpsc::Sender<grpc::WorkerMessage>,
    on_step: impl FnMut(usize, &argus_proto::run::RunStep),
) -> grpc::AttemptResult {
    let infra = |error: String| grpc::AttemptResult {
        lease_id: lease.lease_id.clone(),
        run_case_json: String::new(),
        infrastructure_failure: true,
        error,
        lease_to_first_call_us: 0,
        observed: None,
        health: None,
    };
    let case = match parsed.case(lease).await {
        Ok(case) => case,
        Err(error) => return infra(error),
    };
    let config_value: serde_json::Value = match serde_json::from_str(&lease.config_json) {
        Ok(value) => value,
        Err(error) => return infra(format!("the lease's case configuration is not JSON: {error}")),
    };
    let config = match CasesConfig::from_json(&config_value, Path::new(".")) {
        Ok(config) => config,
        Err(error) => return infra(error.to_string()),
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
    // The attempt's screenshots and film are written here, shipped with its
    // result, and removed with the folder.
    let files = AttemptFiles::new();
    let camera = slot.config.hooks.screenshot.as_ref().map(|command| {
        Arc::new(HookCamera { command: command.clone(), placeholders: placeholders.clone() }) as Arc<dyn Camera>
    });
    let driver = slot.driver.as_ref();
    let lease_to_first_call_us = unix_us() - lease.granted_unix_us;
    let preparing = std::time::Instant::now();
    if let Err(error) = driver.call("reset", None, Duration::from_secs(20)).await
        && error.is_infrastructure()
    {
        return infra(format!("reset: {error}"));
    }
    hand_trace_context(driver).await;
    if let Some(before) = &slot.config.hooks.before
        && let Err(error) = crate::slots::run_hook("before", before, &placeholders).await
    {
        return infra(error.to_string());
    }
    // The app as the steps find it: a reconnect during the attempt is then
    // told apart from a relaunch (a fresh app that lost the attempt's state).
    let prepared_ms = preparing.elapsed().as_millis() as u64;
    let mut before = AppMark::watch(driver);
    let recording = slot
        .config
        .hooks
        .record
        .as_ref()
        .and_then(|command| Recording::of_attempt(command, &placeholders, files.root(), &case.id, lease.attempt));
    let device_log = slot
        .config
        .hooks
        .log
        .as_ref()
        .and_then(|command| DeviceLog::of_attempt(command, &placeholders, files.root(), &case.id, lease.attempt));
    let context = RunContext {
        config: CasesConfig { fixtures: None, ..config },
        project: Arc::new(project),
        collect_events: true,
        keep_going: false,
        pictures: Some(Pictures {
            root: files.root().into(),
            every_step: false,
            camera,
            film_started: recording.as_ref().map(|r| r.started),
        }),
        observe: slot.config.observe,
    };
    // The fingerprint is read while the runner lets the reset app settle
    // (its first call is `idle {300, 5000}`): it costs the attempt no time.
    let watched = Watched { device: driver, live: &slot.live };
    // Read outside the steps' time: while the app settles, done before the
    // first step (not between the reset and the settle, where the device
    // did nothing else), and after the last step.
    let mut health = Health::of(driver, &case);
    let (attempted, ()) = tokio::join!(
        run_attempt_with(&watched, &case, lease.attempt, &context, health.begin(driver), on_step),
        before.read(driver)
    );
    let (mut attempt, mut observed) = (attempted.case, attempted.observed);
    let health = health.end(driver).await;
    if let Some(observed) = observed.as_ref() {
        // The app's crashes, kept with the attempt's line: every attempt's,
        // not only the failures' whose records stay.
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
    if let Some(observed) = observed.as_mut() {
        let label = |keys: &[&str]| keys.iter().find_map(|k| slot.config.labels.get(*k)).cloned().unwrap_or_default();
        observed.device_model = label(&["model"]);
        observed.os_version = label(&["platformVersion", "os", "osVersion"]);
    }
    if let Some(recording) = recording {
        film(&mut attempt, recording).await;
    }
    if let Some(log) = device_log
        && log.stop().await
    {
        let path = argus_proto::artifacts::log_path(&attempt.id, attempt.attempt);
        attempt.extra.insert(argus_proto::artifacts::LOG_KEY.into(), path.into());
    }
    // The reset and `before` hook readied the device too.
    let settled_ms = attempt.extra.get(PREPARE_MS).and_then(serde_json::Value::as_u64).unwrap_or(0);
    attempt.extra.insert(PREPARE_MS.into(), (settled_ms + prepared_ms).into());
    if let Some(relaunch) = before.relaunched(driver).await {
        warn!(%relaunch, "the app was relaunched during the attempt; it runs again");
        return infra(relaunch);
    }
    if attempt.result == argus_proto::run::CaseResult::Failed
        && let Some(on_failure) = &slot.config.hooks.on_failure
        && let Err(error) = crate::slots::run_hook("on_failure", on_failure, &placeholders).await
    {
        warn!(%error, "the on_failure hook failed");
    }
    if let Some(after) = &slot.config.hooks.after
        && let Err(error) = crate::slots::run_hook("after", after, &placeholders).await
    {
        warn!(%error, "the after hook failed");
    }
    let lost = attempt.steps.iter().find_map(|s| {
        let error = s.error.as_deref()?;
        (s.status == StepStatus::Failed && INFRASTRUCTURE.iter().any(|m| error.contains(m)))
            .then(|| format!("{}: {error}", s.step))
    });
    if crate::camera::ship(out, lease, files.root(), &mut attempt).await.is_err() {
        warn!("the link closed while the attempt's files were sent");
    }
    grpc::AttemptResult {
        lease_id: lease.lease_id.clone(),
        run_case_json: attempt.to_line(),
        infrastructure_failure: lost.is_some(),
        error: lost.unwrap_or_default(),
        lease_to_first_call_us,
        observed,
        health,
    }
}

/// Ends the attempt's film and names it in the attempt.
async fn film(attempt: &mut argus_proto::run::RunCase, recording: Recording) {
    if recording.stop().await {
        attempt.video = Some(argus_proto::artifacts::video_path(&attempt.id, attempt.attempt));
    } else {
        warn!("the record hook left no film");
    }
}

fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}
