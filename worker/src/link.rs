//! A worker: one driver per device slot, and one gRPC stream to the
//! coordinator over which it reports its devices and runs the attempts it is
//! leased. The drivers stay up while the coordinator is away; the stream is
//! dialed again with backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_proto::auth::Bearer;
use argus_proto::grpc::{self, coordinator_message, worker_message, workers_client::WorkersClient};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Streaming;
use tracing::{info, warn};

use crate::driver::{Driver, DriverConfig, DriverEvent, ListenError};
use crate::project::LinkCalls;
use crate::slot::Slot;

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
        slots.push(Arc::new(Slot::new(slot.clone(), driver)));
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
    // Listen for device changes before the snapshot, so that none falls between.
    let events: Vec<_> = slots.iter().map(|s| s.driver.events()).collect();
    let (out, mut inbound) = match dial(config, slots, cancel).await {
        Ok(opened) => opened,
        Err(end) => return end,
    };
    let link_cancel = cancel.child_token();
    let _stop_watchers = link_cancel.clone().drop_guard();
    let (changed_tx, mut changed) = mpsc::channel::<usize>(256);
    watch_devices(events, &changed_tx, &link_cancel, attempts);
    let mut session = Session {
        slots,
        attempts,
        shared: Shared {
            out: out.clone(),
            running: Arc::default(),
            parsed: Arc::default(),
            calls: LinkCalls::new(out.clone()),
            changed: changed_tx,
        },
        out,
        heartbeat_every: DEFAULT_HEARTBEAT,
        heartbeat: tokio::time::interval(DEFAULT_HEARTBEAT),
        last_heard: tokio::time::Instant::now(),
        told: slots.iter().map(|s| s.device()).collect(),
        watching: false,
        stopping: None,
        registered: false,
    };
    let mut refresh = tokio::time::interval(Duration::from_secs(1));
    let mut live_tick = tokio::time::interval(LIVE_TICK);
    live_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        if session.drained() {
            session.go_away(&mut inbound).await;
            return LinkEnd::Stopped;
        }
        let step = tokio::select! {
            _ = cancel.cancelled(), if session.stopping.is_none() => {
                session.stop().await;
                Ok(())
            }
            _ = tokio::time::sleep(Duration::from_millis(100)), if session.stopping.is_some() => Ok(()),
            Some(index) = changed.recv() => session.tell_device(index).await,
            _ = refresh.tick() => session.refresh().await,
            _ = live_tick.tick(), if session.watching => session.send_live().await,
            _ = session.heartbeat.tick() => session.send_heartbeat().await,
            message = inbound.message() => match message {
                Ok(Some(message)) => session.on_message(message).await,
                Ok(None) => Err(Lost::Ended),
                Err(status) => Err(Lost::Status(status.message().to_owned())),
            },
        };
        if let Err(lost) = step {
            return LinkEnd::Lost { error: lost.to_string(), registered: session.registered };
        }
    }
}

/// Dials the coordinator and registers this worker's devices: the sender
/// of this link's messages, and the coordinator's.
async fn dial(
    config: &WorkerConfig,
    slots: &[Arc<Slot>],
    cancel: &CancellationToken,
) -> Result<(mpsc::Sender<grpc::WorkerMessage>, Streaming<grpc::CoordinatorMessage>), LinkEnd> {
    let lost = |error: String| LinkEnd::Lost { error, registered: false };
    let bearer = Bearer::new(config.token.as_deref()).map_err(|error| LinkEnd::Refused(error.to_string()))?;
    let channel = tokio::select! {
        _ = cancel.cancelled() => return Err(LinkEnd::Stopped),
        channel = argus_proto::connect::connect(&config.coordinator, config.tls_ca.as_deref()) => match channel {
            Ok(channel) => channel,
            // What was given cannot be dialled: trying again will not help.
            Err(error @ argus_proto::connect::ConnectError::Setup(_)) => return Err(LinkEnd::Refused(error.to_string())),
            Err(error) => return Err(lost(error.to_string())),
        },
    };
    let mut client = WorkersClient::with_interceptor(channel, bearer);
    let (out, outbound) = mpsc::channel::<grpc::WorkerMessage>(1024);
    let hostname = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
    let register = grpc::Register {
        worker_id_prefix: config.name.clone(),
        hostname,
        version: env!("CARGO_PKG_VERSION").into(),
        devices: slots.iter().map(|s| s.device()).collect(),
        labels: Default::default(),
    };
    if out.send(message(worker_message::Kind::Register(register))).await.is_err() {
        return Err(lost("the outbound stream closed".into()));
    }
    tokio::select! {
        _ = cancel.cancelled() => Err(LinkEnd::Stopped),
        linked = client.link(ReceiverStream::new(outbound)) => match linked {
            Ok(response) => Ok((out, response.into_inner())),
            Err(status) if matches!(status.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied) => {
                Err(LinkEnd::Refused(status.message().to_owned()))
            }
            Err(status) => Err(lost(status.message().to_owned())),
        },
    }
}

/// Tells `changed` the index of each slot whose driver saw its app come,
/// go or change (navigation aside), until `stop`.
fn watch_devices(
    events: Vec<tokio::sync::broadcast::Receiver<DriverEvent>>,
    changed: &mpsc::Sender<usize>,
    stop: &CancellationToken,
    attempts: &TaskTracker,
) {
    for (index, mut rx) in events.into_iter().enumerate() {
        let (changed, stop) = (changed.clone(), stop.clone());
        attempts.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    event = rx.recv() => match event {
                        Ok(DriverEvent::Navigation(_)) => {}
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if changed.send(index).await.is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                }
            }
        });
    }
}

fn message(kind: worker_message::Kind) -> grpc::WorkerMessage {
    grpc::WorkerMessage { kind: Some(kind) }
}

/// Why a registered link was lost.
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error("the coordinator's stream closed")]
    Closed,
    #[error("the coordinator ended the stream")]
    Ended,
    #[error("{0}")]
    Status(String),
    #[error("the coordinator went silent for {0} s")]
    Silent(u64),
}

/// One registered link's state, and a method per thing that can happen on
/// it: each inbound message kind, a device's change, a tick. A method's
/// `Err` is why the link is lost.
struct Session<'a> {
    slots: &'a Arc<Vec<Arc<Slot>>>,
    attempts: &'a TaskTracker,
    shared: Shared,
    out: mpsc::Sender<grpc::WorkerMessage>,
    heartbeat_every: Duration,
    heartbeat: tokio::time::Interval,
    /// The coordinator sends a keepalive every heartbeat; three missed and
    /// it is taken for gone (a frozen process, a half-open connection).
    last_heard: tokio::time::Instant,
    /// What the coordinator was last told of each device; a change that no
    /// event announced (an attempt of an earlier link ending) is caught at
    /// the next refresh.
    told: Vec<grpc::Device>,
    /// The live view: off until the coordinator says someone watches.
    watching: bool,
    /// Once told to stop: by when the attempts running must be done.
    stopping: Option<tokio::time::Instant>,
    registered: bool,
}

impl Session<'_> {
    async fn send(&self, kind: worker_message::Kind) -> Result<(), Lost> {
        self.out.send(message(kind)).await.map_err(|_| Lost::Closed)
    }

    async fn on_message(&mut self, message: grpc::CoordinatorMessage) -> Result<(), Lost> {
        self.last_heard = tokio::time::Instant::now();
        match message.kind {
            Some(coordinator_message::Kind::Registered(reply)) => self.on_registered(&reply),
            Some(coordinator_message::Kind::Lease(lease)) => return self.on_lease(lease).await,
            Some(coordinator_message::Kind::Drain(drain)) => {
                // The coordinator leases nothing more to a drained worker
                // (and may resume it); what runs finishes.
                info!(reason = %drain.reason, "drained: current attempts finish, the coordinator sends no new ones");
            }
            Some(coordinator_message::Kind::Cancel(cancelled)) => self.shared.on_cancel(&cancelled),
            Some(coordinator_message::Kind::ProjectAnswer(answer)) => self.shared.calls.answered(answer),
            Some(coordinator_message::Kind::DeviceCall(call)) => {
                if let Some(refused) = self.shared.on_device_call(self.slots, call, self.attempts) {
                    return self.send(worker_message::Kind::DeviceAnswer(refused)).await;
                }
            }
            Some(coordinator_message::Kind::Watch(watch)) => self.on_watch(&watch),
            Some(coordinator_message::Kind::Keepalive(_)) | None => {}
        }
        Ok(())
    }

    fn on_registered(&mut self, reply: &grpc::Registered) {
        info!(worker = %reply.worker_id, heartbeat_ms = reply.heartbeat_ms, "registered with the coordinator");
        self.registered = true;
        if reply.heartbeat_ms > 0 {
            self.heartbeat_every = Duration::from_millis(u64::from(reply.heartbeat_ms));
            self.heartbeat = tokio::time::interval(self.heartbeat_every);
        }
    }

    async fn on_lease(&mut self, lease: grpc::Lease) -> Result<(), Lost> {
        if self.stopping.is_none() {
            self.shared.on_lease(self.slots, lease, self.attempts);
            return Ok(());
        }
        // Crossed with this worker's GoingAway: handed back at once.
        warn!(lease = %lease.lease_id, "stopping: lease handed back");
        let handed_back = grpc::AttemptResult {
            lease_id: lease.lease_id,
            infrastructure_failure: true,
            error: "the worker is stopping".into(),
            ..Default::default()
        };
        self.send(worker_message::Kind::Attempt(handed_back)).await
    }

    fn on_watch(&mut self, watch: &grpc::Watch) {
        if watch.watching && !self.watching {
            // A new watcher sees every device at once.
            self.slots.iter().for_each(|slot| slot.live.resend());
        }
        self.watching = watch.watching;
    }

    async fn tell_device(&mut self, index: usize) -> Result<(), Lost> {
        let device = self.slots[index].device();
        self.told[index] = device.clone();
        self.send(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) })).await
    }

    /// Tells what changed unannounced, and gives up on a silent coordinator.
    async fn refresh(&mut self) -> Result<(), Lost> {
        for index in 0..self.slots.len() {
            if self.slots[index].device() != self.told[index] {
                self.tell_device(index).await?;
            }
        }
        if self.last_heard.elapsed() > self.heartbeat_every * 3 {
            return Err(Lost::Silent(self.last_heard.elapsed().as_secs()));
        }
        Ok(())
    }

    async fn send_live(&mut self) -> Result<(), Lost> {
        let now = std::time::Instant::now();
        for slot in self.slots.iter() {
            // A device without its app is shown as it was left.
            if slot.driver.connected() && slot.live.read_due(now) {
                read_for_live(slot.clone(), self.attempts);
            }
            if let Some(live) = slot.live.take(&slot.config.name) {
                self.send(worker_message::Kind::Live(live)).await?;
            }
        }
        Ok(())
    }

    async fn send_heartbeat(&mut self) -> Result<(), Lost> {
        let lease_ids: Vec<String> = self.shared.running.lock().keys().cloned().collect();
        self.send(worker_message::Kind::Heartbeat(grpc::Heartbeat { lease_ids })).await
    }

    /// Told to stop: the coordinator is told first, so that it leases
    /// nothing more while what runs finishes.
    async fn stop(&mut self) {
        let notice = grpc::Stopping { reason: "the worker is stopping".into() };
        let _ = self.send(worker_message::Kind::Stopping(notice)).await;
        let n = self.shared.running.lock().len();
        info!(
            attempts = n,
            deadline_s = DRAIN_DEADLINE.as_secs(),
            "stopping: running attempts finish first, no new ones start"
        );
        self.stopping = Some(tokio::time::Instant::now() + DRAIN_DEADLINE);
    }

    /// Stopping, and every attempt is done or out of time.
    fn drained(&self) -> bool {
        self.stopping
            .is_some_and(|deadline| self.shared.running.lock().is_empty() || tokio::time::Instant::now() >= deadline)
    }

    /// Hands back what still runs, says `GoingAway`, and waits (briefly)
    /// for the coordinator to end the stream once it has read all of it,
    /// GoingAway last: then nothing queued is lost.
    async fn go_away(&self, inbound: &mut Streaming<grpc::CoordinatorMessage>) {
        let left: Vec<(String, CancellationToken)> =
            self.shared.running.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (lease_id, stop) in left {
            stop.cancel();
            let handed_back = grpc::AttemptResult {
                lease_id,
                infrastructure_failure: true,
                error: "the worker stopped before the attempt finished".into(),
                ..Default::default()
            };
            let _ = self.send(worker_message::Kind::Attempt(handed_back)).await;
        }
        let going = grpc::GoingAway { reason: "the worker is stopping".into() };
        let _ = self.send(worker_message::Kind::GoingAway(going)).await;
        let drained = async { while let Ok(Some(_)) = inbound.message().await {} };
        let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
    }
}

/// What the attempts and device calls started on one link share with it.
struct Shared {
    out: mpsc::Sender<grpc::WorkerMessage>,
    /// The attempts running now, each with what stops it.
    running: Arc<Running>,
    parsed: Arc<crate::attempt::ParsedFiles>,
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
            slot.set_busy(true);
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
            let attempt = tracing::Instrument::instrument(crate::attempt::run(&slot, &lease, &parsed, &calls, &out, on_step), span.clone());
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
            slot.set_busy(false);
            slot.live.end();
            if let Some(result) = result {
                crate::metrics::attempt(&crate::attempt::attempt_outcome(&result));
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
