//! The coordinator's one owner task: every decision about the fleet, runs
//! and leases is made here, in order, and written to the store before it is
//! acted on. gRPC handlers talk to it through [`Handle`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argus_proto::grpc::{self, coordinator_message, run_update};
use argus_proto::run::{CaseResult, RunCase, RunManifest, totals};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::metrics::{Metrics, Snapshot};
use crate::policy::Next;
use crate::scheduler::{self, Capabilities, Pending, Selector, Share};
use crate::store::{
    AttemptOutcome, DeviceRecord, NewLease, NewRun, PendingTry, StepRow, Store, StoreError, WorkerRecord,
};
use crate::watch::{self, WatchStream, Watcher};

/// How long a lease lives without a heartbeat.
pub const LEASE_TTL: Duration = Duration::from_secs(20);
/// How often workers send heartbeats (told in `Registered`).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A worker silent this long (two heartbeats) is taken for gone.
pub const WORKER_SILENCE: Duration = Duration::from_secs(10);
/// The expected duration of a case nothing is known about.
pub const DEFAULT_EXPECTED_MS: i64 = 30_000;
/// How many recent passing attempts the expected duration is the median of.
pub const HISTORY_WINDOW: u32 = 20;

pub type WorkerTx = mpsc::Sender<Result<grpc::CoordinatorMessage, tonic::Status>>;

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub(crate) fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Why the coordinator refused a request.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NoDevice(String),
    #[error("no run {0}")]
    NoRun(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the coordinator is shutting down")]
    Stopped,
}

impl From<CoreError> for tonic::Status {
    fn from(error: CoreError) -> Self {
        match &error {
            CoreError::Invalid(m) => tonic::Status::invalid_argument(m.clone()),
            CoreError::NoDevice(m) => tonic::Status::failed_precondition(m.clone()),
            CoreError::NoRun(_) => tonic::Status::not_found(error.to_string()),
            CoreError::Store(_) => tonic::Status::internal(error.to_string()),
            CoreError::Stopped => tonic::Status::unavailable(error.to_string()),
        }
    }
}

/// One worker's stream: its name (its identity, stable across reconnects)
/// and which of its connections this is. A worker that dials again while
/// its old stream still looks alive replaces it; what the old one still
/// says is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub worker: String,
    pub conn: u64,
}

pub enum Command {
    Cancel {
        run_id: String,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    WorkerJoined {
        register: grpc::Register,
        tx: WorkerTx,
        reply: oneshot::Sender<Result<Link, CoreError>>,
    },
    WorkerMessage {
        link: Link,
        message: grpc::WorkerMessage,
    },
    WorkerGone {
        link: Link,
    },
    /// Whether some device could ever run a selector's cases (quarantined
    /// ones count: they may be released); the fleet named if not.
    Admit {
        selector: Selector,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// A run the gRPC handler checked and wrote: the owner takes it up.
    Submitted {
        suite: Box<crate::submit::CheckedSuite>,
        run: Box<NewRun>,
        /// The client's trace context, from the request's metadata.
        traceparent: String,
        reply: oneshot::Sender<grpc::SubmitResponse>,
    },
    Watch {
        run_id: String,
        /// Resume after this `seq` (0: from the start).
        after_seq: u64,
        reply: oneshot::Sender<Result<WatchStream, CoreError>>,
    },
    Fleet {
        reply: oneshot::Sender<grpc::ListFleetResponse>,
    },
    Quarantine {
        device: String,
        reason: Option<String>,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    Drain {
        worker: String,
        /// false: take work again.
        drain: bool,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// The gauges, for a metrics scrape.
    Snapshot {
        reply: oneshot::Sender<Snapshot>,
    },
}

/// How many cases in a row may fail on a device and pass elsewhere before
/// the device is quarantined.
const SUSPECT_CASES: usize = 3;

/// The most device slots one worker may register.
pub const MAX_DEVICES_PER_WORKER: usize = 1024;

/// The most commands the owner task takes in one burst.
const MAX_BURST: usize = 512;

/// Talks to the owner task.
#[derive(Clone)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
}

impl Handle {
    pub async fn send(&self, command: Command) -> Result<(), CoreError> {
        self.tx.send(command).await.map_err(|_| CoreError::Stopped)
    }
}

struct Device {
    id: String,
    worker: String,
    info: grpc::Device,
    caps: Capabilities,
    lease: Option<String>,
    quarantine: Option<String>,
    /// When `info.state` last changed (epoch ms).
    state_since: i64,
    infra_failures: u32,
    /// Cases that failed here since this device last passed one, and then
    /// passed on another device: the device, not the case, is suspect.
    failed_but_passed_elsewhere: Vec<String>,
    /// Why it takes no work though nobody quarantined it: its app says a
    /// platform other than its slot's.
    mismatch: Option<String>,
}

struct Worker {
    id: String,
    conn: u64,
    hostname: String,
    tx: WorkerTx,
    draining: bool,
    last_seen: i64,
}

struct Lease {
    id: String,
    run_id: String,
    case_id: String,
    attempt: u32,
    try_no: u32,
    device: String,
    worker: String,
    deadline: Instant,
    /// Open while the attempt runs; the worker's attempt span is its child.
    span: tracing::Span,
    /// Being taken back: why, and the attempt's `seq`. Set when the store
    /// could not be told; the sweep tries again with the same.
    revoking: Option<(String, u64)>,
}

struct Case {
    file: String,
    ordinal: i64,
    expected_ms: i64,
    done: bool,
}

struct Run {
    id: String,
    selector: Selector,
    retries: u32,
    priority: u32,
    config_json: String,
    sources: HashMap<String, String>,
    cases: HashMap<String, Case>,
    started_at: i64,
    watchers: Vec<Watcher>,
    /// Goes on without a client.
    detached: bool,
    /// Since when no client watches it (the run is cancelled past the
    /// grace unless detached).
    unwatched_since: Option<Instant>,
    /// Why it waits, while no device could take its pending attempts.
    waiting: Option<Waiting>,
    lines: Vec<RunCase>,
    /// Every finished attempt and attempt taken back, in `seq` order: what a
    /// watcher that resumes after a `seq` is sent.
    log: Vec<grpc::RunUpdate>,
    /// The `seq` the next finished attempt gets.
    next_seq: u64,
    /// Steps of attempts still running, replayed to late watchers.
    live_steps: Vec<grpc::StepFinished>,
    platform: Option<String>,
    native: Option<bool>,
    finished: Option<String>,
    /// Open while the run goes; its leases are its children.
    span: tracing::Span,
}

/// A run with attempts no device can take, and why.
#[derive(Debug, Clone, PartialEq)]
struct Waiting {
    message: String,
    since_ms: i64,
    /// The store has the message (the dashboard shows it).
    stored: bool,
}

impl Run {
    /// Sends an update to every watcher, forgetting those that went away or
    /// fell behind (they were told, and watch again with their `seq`).
    fn publish(&mut self, update: grpc::RunUpdate) {
        self.watchers.retain_mut(|w| w.send(&update));
        if update.seq != 0 {
            self.log.push(update);
        }
    }

    /// A `seq` for the next finished attempt.
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The run's last update, once it has finished.
    fn finished_update(&self) -> Option<grpc::RunUpdate> {
        let manifest = self.finished.clone()?;
        let seq = self.log.last().map_or(1, |u| u.seq + 1);
        Some(watch::run_finished(seq, manifest))
    }
}

/// A result on its way to the store.
struct Finished {
    result: grpc::AttemptResult,
    /// `None`: an infrastructure failure.
    line: Option<RunCase>,
    outcome: AttemptOutcome,
    /// Its place in the run's updates.
    seq: u64,
    /// What follows it (recorded with it).
    next: Next,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Key {
    run: String,
    case: String,
    attempt: u32,
    try_no: u32,
}

struct Core {
    store: Store,
    workers: HashMap<String, Worker>,
    devices: HashMap<String, Device>,
    leases: HashMap<String, Lease>,
    runs: HashMap<String, Run>,
    pending: Vec<Pending<Key>>,
    /// Results the store failed to take, tried again at each sweep.
    unrecorded: Vec<Finished>,
    /// Tries queued by attempts taken back, not yet written ([`Core::flush`];
    /// kept when the store fails). What follows a result is written with it.
    unqueued: Vec<(Key, Option<String>)>,
    unsaved_quarantines: Vec<(String, String)>,
    /// Devices whose state the store has not been told yet (written in one
    /// statement at the next sweep).
    dirty_devices: std::collections::HashSet<String>,
    /// When workers were last sent a keepalive (epoch ms).
    keepalive_at: i64,
    next_worker: u64,
    config: CoreConfig,
    /// Set by whatever frees a device or queues work; the owner loop
    /// dispatches once after a burst of commands, so that their leases
    /// commit in one transaction.
    dispatch_due: bool,
    metrics: Arc<Metrics>,
}

/// How long a run may go without a client watching it before it is
/// cancelled (unless submitted detached): long enough for `argus run` to
/// ride out a coordinator restart or a network blip.
pub const CLIENT_GRACE: Duration = Duration::from_secs(60);

/// How the owner task behaves.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Where the dashboard is, for the links Submit answers.
    pub dashboard_url: Option<String>,
    /// See [`CLIENT_GRACE`].
    pub client_grace: Duration,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self { dashboard_url: None, client_grace: CLIENT_GRACE }
    }
}

/// Starts the owner task over `store`. Attempts that were leased when the
/// last coordinator stopped are infrastructure failures, queued again.
pub async fn start(
    store: Store,
    config: CoreConfig,
    metrics: Arc<Metrics>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(Handle, tokio::task::JoinHandle<()>), CoreError> {
    let mut core = Core {
        store,
        workers: HashMap::new(),
        devices: HashMap::new(),
        leases: HashMap::new(),
        runs: HashMap::new(),
        pending: Vec::new(),
        unrecorded: Vec::new(),
        unqueued: Vec::new(),
        unsaved_quarantines: Vec::new(),
        dirty_devices: Default::default(),
        keepalive_at: 0,
        next_worker: 0,
        config,
        dispatch_due: true,
        metrics,
    };
    core.recover().await?;
    let (tx, mut rx) = mpsc::channel::<Command>(1024);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let mut sweep = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    // What the store has not taken yet gets one more try, then
                    // dropping the workers' and watchers' senders ends their
                    // streams.
                    _ = shutdown.cancelled() => {
                        core.settle().await;
                        info!(leases = core.leases.len(), "owner task stopped");
                        break;
                    }
                    command = rx.recv() => match command {
                        Some(command) => {
                            // Whatever else is ready is handled too before leases
                            // are decided: a burst of results becomes one
                            // transaction of results and one of leases.
                            let mut burst = vec![command];
                            while burst.len() < MAX_BURST && let Ok(more) = rx.try_recv() {
                                burst.push(more);
                            }
                            core.handle_burst(burst).await;
                        }
                        None => break,
                    },
                    _ = sweep.tick() => core.sweep().await,
                }
                // What the burst decided is written in a few statements,
                // before any device is handed the attempts it queued.
                core.flush().await;
                if core.dispatch_due {
                    core.dispatch().await;
                }
            }
        },
        tracing::info_span!("owner"),
    ));
    Ok((Handle { tx }, task))
}

impl Core {
    /// Rebuilds the runs that were going from the store: attempts that were
    /// leased when the last coordinator stopped are infrastructure failures
    /// and are queued again; pending ones wait for devices as before.
    async fn recover(&mut self) -> Result<(), CoreError> {
        for row in self.store.open_runs().await? {
            let selector: Selector = serde_json::from_str(&row.selector_json).map_err(|e| {
                CoreError::Invalid(format!(
                    "run {} has a selector that does not parse ({e}): {}",
                    row.id, row.selector_json
                ))
            })?;
            let lines: Vec<RunCase> =
                self.store.run_lines(&row.id).await?.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
            let log = watch::from_log(&self.store.run_log(&row.id).await?);
            let cases = self
                .store
                .run_cases(&row.id)
                .await?
                .into_iter()
                .map(|c| {
                    let case = Case {
                        file: c.file,
                        ordinal: c.ordinal,
                        expected_ms: c.expected_ms,
                        done: c.final_result.is_some(),
                    };
                    (c.case_id, case)
                })
                .collect();
            let run = Run {
                id: row.id.clone(),
                selector,
                retries: row.retries as u32,
                priority: row.priority as u32,
                config_json: row.config_json,
                sources: self.store.run_files(&row.id).await?.into_iter().collect(),
                cases,
                started_at: row.started_at,
                watchers: Vec::new(),
                detached: row.detached != 0,
                // Its client has the grace to come back.
                unwatched_since: Some(Instant::now()),
                waiting: None,
                next_seq: log.last().map_or(1, |u| u.seq + 1),
                log,
                live_steps: Vec::new(),
                platform: lines
                    .first()
                    .and_then(|l| l.extra.get("device")?.get("platform")?.as_str().map(str::to_owned)),
                native: None,
                lines,
                finished: None,
                span: tracing::info_span!(parent: None, "run", run = %row.id, recovered = true),
            };
            info!(run = %row.id, "run taken up again after a restart");
            self.runs.insert(row.id, run);
        }
        const RESTARTED: &str = "the coordinator restarted";
        for row in self.store.open_attempts().await? {
            if row.state == "leased"
                && let Some(lease) = &row.lease_id
            {
                let device = grpc::DeviceRef { id: row.device_id.clone().unwrap_or_default(), ..Default::default() };
                let seq = self.runs.get_mut(&row.run_id).map_or(0, Run::take_seq);
                self.store.revoke_lease(lease, RESTARTED, now_ms(), seq as i64).await?;
                self.store
                    .queue(&row.run_id, &row.case_id, row.attempt as u32, row.try_no as u32 + 1, now_ms())
                    .await?;
                if let Some(run) = self.runs.get_mut(&row.run_id) {
                    run.publish(watch::taken_back(seq, &row.case_id, row.attempt as u32, RESTARTED, device));
                }
            }
        }
        for row in self.store.open_attempts().await? {
            if row.state == "pending" {
                let key =
                    Key { run: row.run_id, case: row.case_id, attempt: row.attempt as u32, try_no: row.try_no as u32 };
                self.enqueue(key, None);
            }
        }
        let ids: Vec<String> = self.runs.keys().cloned().collect();
        for id in ids {
            self.finish_run_if_done(&id).await;
        }
        Ok(())
    }

    /// Handles commands in order, except that consecutive attempt results
    /// are recorded in one transaction. Steps, heartbeats and device updates
    /// may pass a pending result (they never concern a finished lease);
    /// anything else waits for the results before it.
    async fn handle_burst(&mut self, burst: Vec<Command>) {
        use argus_proto::grpc::worker_message::Kind;
        let mut results: Vec<(String, grpc::AttemptResult)> = Vec::new();
        for command in burst {
            match command {
                Command::WorkerMessage { link, .. } | Command::WorkerGone { link } if !self.is_current(&link) => {}
                Command::WorkerMessage { link, message: grpc::WorkerMessage { kind: Some(Kind::Attempt(result)) } } => {
                    results.push((link.worker, result));
                }
                Command::WorkerMessage { link, message }
                    if matches!(message.kind, Some(Kind::Step(_) | Kind::Heartbeat(_) | Kind::Device(_))) =>
                {
                    self.on_worker_message(&link.worker, message).await;
                }
                command => {
                    self.attempts_finished(std::mem::take(&mut results)).await;
                    self.handle(command).await;
                }
            }
        }
        self.attempts_finished(results).await;
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::WorkerJoined { register, tx, reply } => {
                let joined = self.join(register, tx.clone()).await;
                if let Ok(link) = &joined {
                    // Registered goes out before any lease can; a drained
                    // worker is told again.
                    let registered =
                        grpc::Registered { worker_id: link.worker.clone(), heartbeat_ms: HEARTBEAT.as_millis() as u32 };
                    let _ = tx.try_send(Ok(message(coordinator_message::Kind::Registered(registered))));
                    if self.workers.get(&link.worker).is_some_and(|w| w.draining) {
                        let drain = grpc::Drain { reason: "drained by an operator".into() };
                        let _ = tx.try_send(Ok(message(coordinator_message::Kind::Drain(drain))));
                    }
                }
                let _ = reply.send(joined);
                self.dispatch_due = true;
            }
            Command::WorkerMessage { link, message } => {
                if self.is_current(&link) {
                    self.on_worker_message(&link.worker, message).await;
                }
            }
            Command::WorkerGone { link } => {
                if self.is_current(&link) {
                    self.worker_gone(&link.worker).await;
                }
            }
            Command::Admit { selector, reply } => {
                let _ = reply.send(self.admit(&selector));
            }
            Command::Submitted { suite, run, traceparent, reply } => {
                let _ = reply.send(self.adopt(*suite, *run, &traceparent));
            }
            Command::Watch { run_id, after_seq, reply } => {
                let _ = reply.send(self.watch(&run_id, after_seq));
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::Fleet { reply } => {
                let _ = reply.send(self.fleet());
            }
            Command::Quarantine { device, reason, reply } => {
                let result = if self.devices.contains_key(&device) {
                    self.set_quarantine(&device, reason).await.map_err(CoreError::from)
                } else {
                    Err(CoreError::Invalid(format!("no device {device}; the fleet: {}", self.fleet_summary())))
                };
                if let Some(d) = self.devices.get_mut(&device).filter(|_| result.is_ok()) {
                    d.infra_failures = 0;
                    d.failed_but_passed_elsewhere.clear();
                }
                let _ = reply.send(result);
                self.dispatch_due = true;
            }
            Command::Cancel { run_id, reply } => {
                let result = self.cancel(&run_id, "the run was cancelled by its client").await;
                let _ = reply.send(result);
                self.dispatch_due = true;
            }
            Command::Drain { worker, drain, reply } => {
                let result = self.drain(&worker, drain).await;
                let _ = reply.send(result);
                self.dispatch_due = true;
            }
        }
    }

    fn is_current(&self, link: &Link) -> bool {
        self.workers.get(&link.worker).is_some_and(|w| w.conn == link.conn)
    }

    /// Drains a worker (it finishes what it runs and is leased no more) or
    /// lets it take work again; recorded first, so that it outlives
    /// reconnects and restarts.
    async fn drain(&mut self, worker: &str, drain: bool) -> Result<(), CoreError> {
        let Some(w) = self.workers.get(worker) else {
            let known: Vec<&str> = self.workers.keys().map(String::as_str).collect();
            return Err(CoreError::Invalid(format!("no worker {worker}; the workers: {}", known.join(", "))));
        };
        let record = WorkerRecord {
            id: w.id.clone(),
            hostname: w.hostname.clone(),
            connected: true,
            draining: drain,
            last_seen: w.last_seen,
        };
        self.store.upsert_worker(&record).await?;
        let w = self.workers.get_mut(worker).expect("checked above");
        w.draining = drain;
        if drain {
            let message =
                message(coordinator_message::Kind::Drain(grpc::Drain { reason: "drained by an operator".into() }));
            let _ = w.tx.try_send(Ok(message));
        }
        info!(worker, drain, "worker drain changed");
        Ok(())
    }

    /// Quarantines a device (or lets it back with `None`): recorded first,
    /// so that it outlives reconnects and restarts.
    async fn set_quarantine(&mut self, device: &str, reason: Option<String>) -> Result<(), StoreError> {
        self.store.set_quarantine(device, reason.as_deref(), now_ms()).await?;
        if let Some(d) = self.devices.get_mut(device) {
            if let Some(reason) = &reason {
                warn!(device, %reason, "device quarantined");
            }
            d.caps.quarantined = reason.is_some() || d.mismatch.is_some();
            d.quarantine = reason;
        }
        self.dispatch_due = true;
        Ok(())
    }

    /// A quarantine the coordinator decides itself (failures): in memory at
    /// once, so that nothing more is leased to the device, and in the store
    /// now or at a later sweep.
    async fn quarantine_for(&mut self, device: &str, reason: String) {
        if let Err(error) = self.set_quarantine(device, Some(reason.clone())).await {
            warn!(%error, device, "cannot record a quarantine; trying again");
            if let Some(d) = self.devices.get_mut(device) {
                d.quarantine = Some(reason.clone());
                d.caps.quarantined = true;
            }
            self.unsaved_quarantines.push((device.to_owned(), reason));
        }
    }

    /// A new watcher of a run: what it has not seen of the run's record
    /// (after `after_seq`), then what is going on now (attempts running,
    /// their steps so far, why the run waits), then, if the run is over,
    /// its end.
    fn watch(&mut self, run_id: &str, after_seq: u64) -> Result<WatchStream, CoreError> {
        let running: Vec<grpc::RunUpdate> = self
            .leases
            .values()
            .filter(|l| l.run_id == run_id)
            .map(|l| grpc::RunUpdate {
                kind: Some(run_update::Kind::Started(grpc::AttemptStarted {
                    case_id: l.case_id.clone(),
                    attempt: l.attempt,
                    device: Some(self.device_ref(&l.device)),
                })),
                seq: 0,
            })
            .collect();
        let Some(run) = self.runs.get_mut(run_id) else { return Err(CoreError::NoRun(run_id.to_owned())) };
        let missed: Vec<&grpc::RunUpdate> = run.log.iter().filter(|u| u.seq > after_seq).collect();
        let (mut watcher, stream) = Watcher::new(missed.len() + running.len() + run.live_steps.len() + 2);
        for update in missed {
            watcher.send(update);
        }
        for update in &running {
            watcher.send(update);
        }
        for step in &run.live_steps {
            watcher.send(&grpc::RunUpdate { kind: Some(run_update::Kind::Step(step.clone())), seq: 0 });
        }
        if let Some(waiting) = &run.waiting {
            watcher.send(&no_device(waiting, true));
        }
        match run.finished_update() {
            // The stream ends with the run's end.
            Some(end) => {
                watcher.send(&end);
            }
            None => {
                run.watchers.push(watcher);
                run.unwatched_since = None;
            }
        }
        Ok(stream)
    }

    /// A worker's stream opens. Its name is its identity: a stream under a
    /// name that is still registered replaces the old one (a worker that
    /// dialed again after a network blip), whose leases are taken back. What
    /// operators decided (drain, quarantines) comes back from the store.
    async fn join(&mut self, register: grpc::Register, tx: WorkerTx) -> Result<Link, CoreError> {
        let name = if register.worker_id_prefix.is_empty() { "worker" } else { register.worker_id_prefix.as_str() };
        if let Some(problem) = name_problem(name) {
            return Err(CoreError::Invalid(format!("worker name {name:?}: {problem}")));
        }
        if register.devices.len() > MAX_DEVICES_PER_WORKER {
            return Err(CoreError::Invalid(format!(
                "worker {name}: {} devices; a worker may have {MAX_DEVICES_PER_WORKER}",
                register.devices.len()
            )));
        }
        let mut slots = std::collections::HashSet::new();
        if let Some(twice) = register.devices.iter().find(|d| !slots.insert(d.slot.as_str())) {
            return Err(CoreError::Invalid(format!("worker {name}: slot {:?} is given twice", twice.slot)));
        }
        let id = name.to_owned();
        if self.workers.contains_key(&id) {
            info!(worker = %id, "worker dialed again; its new stream replaces the old");
            self.worker_gone(&id).await;
        }
        let memory = self.store.fleet_memory(&id).await?;
        let now = now_ms();
        let record = WorkerRecord {
            id: id.clone(),
            hostname: register.hostname.clone(),
            connected: true,
            draining: memory.draining,
            last_seen: now,
        };
        self.store.upsert_worker(&record).await?;
        let devices: Vec<DeviceRecord> = register.devices.iter().map(|d| device_record(&id, d, now)).collect();
        self.store.upsert_devices(&devices).await?;
        self.next_worker += 1;
        let conn = self.next_worker;
        info!(worker = %id, devices = register.devices.len(), hostname = %register.hostname, draining = memory.draining, "worker joined");
        self.workers.insert(
            id.clone(),
            Worker { id: id.clone(), conn, hostname: register.hostname, tx, draining: memory.draining, last_seen: now },
        );
        for device in register.devices {
            self.update_device(&id, device);
        }
        for (device, reason) in memory.quarantined {
            if let Some(d) = self.devices.get_mut(&device) {
                d.quarantine = Some(reason);
                d.caps.quarantined = true;
            }
        }
        Ok(Link { worker: id, conn })
    }

    fn update_device(&mut self, worker: &str, info: grpc::Device) {
        let id = format!("{worker}/{}", info.slot);
        let (hello, unreadable) = match serde_json::from_str::<Value>(&info.hello_json) {
            Ok(hello) => (Some(hello), None),
            Err(_) if info.hello_json.is_empty() => (None, None),
            Err(error) => (None, Some(format!("the worker sent a hello that does not parse: {error}"))),
        };
        let app = hello
            .as_ref()
            .and_then(|h| h.get("app"))
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let said = hello.as_ref().and_then(|h| h.get("platform")).and_then(Value::as_str).map(str::to_owned);
        // The slot's platform is what operators configured and selectors
        // name; an app that says otherwise is on the wrong slot.
        let mismatch = unreadable.or_else(|| {
            said.as_ref().filter(|p| !info.platform.is_empty() && !p.eq_ignore_ascii_case(&info.platform)).map(|p| {
                format!(
                    "its slot is {} but its app says {p}: fix the slot's platform or the app it runs",
                    info.platform
                )
            })
        });
        let platform = if info.platform.is_empty() { said.clone().unwrap_or_default() } else { info.platform.clone() };
        let labels = info.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let entry = self.devices.entry(id.clone()).or_insert_with(|| Device {
            id: id.clone(),
            worker: worker.to_owned(),
            info: info.clone(),
            caps: Capabilities::default(),
            lease: None,
            quarantine: None,
            failed_but_passed_elsewhere: Vec::new(),
            state_since: now_ms(),
            infra_failures: 0,
            mismatch: None,
        });
        if entry.info.state != info.state {
            entry.state_since = now_ms();
        }
        if mismatch.is_some() && entry.mismatch != mismatch {
            warn!(device = %id, problem = mismatch.as_deref().unwrap_or_default(), "device takes no work");
        }
        entry.mismatch = mismatch;
        entry.caps =
            Capabilities { platform, labels, app, quarantined: entry.quarantine.is_some() || entry.mismatch.is_some() };
        if entry.info != info {
            self.dirty_devices.insert(id.clone());
        }
        entry.info = info;
        entry.worker = worker.to_owned();
    }

    async fn on_worker_message(&mut self, worker: &str, message: grpc::WorkerMessage) {
        use argus_proto::grpc::worker_message::Kind;
        let Some(w) = self.workers.get_mut(worker) else {
            // A link already taken for gone (silent too long, replaced): what
            // it still says is about devices and leases it no longer has.
            return;
        };
        w.last_seen = now_ms();
        match message.kind {
            Some(Kind::Device(update)) => {
                if let Some(device) = update.device {
                    self.update_device(worker, device);
                    self.dispatch_due = true;
                }
            }
            Some(Kind::Heartbeat(beat)) => {
                let deadline = Instant::now() + LEASE_TTL;
                for id in &beat.lease_ids {
                    if let Some(lease) = self.leases.get_mut(id)
                        && lease.worker == worker
                    {
                        lease.deadline = deadline;
                    }
                }
                let _ = self.store.extend_leases(&beat.lease_ids, now_ms() + LEASE_TTL.as_millis() as i64).await;
            }
            Some(Kind::Attempt(result)) => self.attempts_finished(vec![(worker.to_owned(), result)]).await,
            Some(Kind::GoingAway(_)) => self.worker_gone(worker).await,
            Some(Kind::Step(step)) => {
                let Some(lease) = self.leases.get(&step.lease_id).filter(|l| l.worker == worker) else { return };
                let update = grpc::RunUpdate {
                    kind: Some(run_update::Kind::Step(grpc::StepFinished {
                        case_id: lease.case_id.clone(),
                        attempt: lease.attempt,
                        index: step.index,
                        run_step_json: step.run_step_json,
                        device: Some(self.device_ref(&lease.device)),
                    })),
                    seq: 0,
                };
                if let Some(run) = self.runs.get_mut(&lease.run_id) {
                    if let Some(run_update::Kind::Step(step)) = &update.kind {
                        run.live_steps.push(step.clone());
                    }
                    run.publish(update);
                }
            }
            Some(Kind::Register(_)) | None => {}
        }
    }

    async fn worker_gone(&mut self, worker: &str) {
        if self.workers.remove(worker).is_none() {
            return;
        }
        info!(worker, "worker gone");
        let leases: Vec<String> = self.leases.values().filter(|l| l.worker == worker).map(|l| l.id.clone()).collect();
        for lease in leases {
            self.take_back(&lease, "the worker went away").await;
        }
        self.devices.retain(|_, d| d.worker != worker);
        // What the fleet page shows; what operators decided stays as it is.
        if let Err(error) = self.store.worker_disconnected(worker, now_ms()).await {
            warn!(%error, worker, "cannot record that a worker went away");
        }
        self.dispatch_due = true;
    }

    /// A lease the coordinator ends itself: the attempt is an infrastructure
    /// failure and runs again, without using the retry budget. When the
    /// store cannot be told, the lease stays (and its device with it) and
    /// the sweep tries again: nothing is forgotten on an error.
    async fn take_back(&mut self, lease_id: &str, reason: &str) {
        let Some(mut lease) = self.leases.remove(lease_id) else { return };
        let (reason, seq) = match lease.revoking.clone() {
            Some(revoking) => revoking,
            None => (reason.to_owned(), self.runs.get_mut(&lease.run_id).map_or(0, Run::take_seq)),
        };
        let revoked = match self.store.revoke_lease(lease_id, &reason, now_ms(), seq as i64).await {
            Ok(Some(_)) => true,
            // Ended already: by this very call's earlier try, whose answer
            // was lost, or by a result that won the race.
            Ok(None) => lease.revoking.is_some(),
            Err(error) => {
                warn!(%error, lease = lease_id, "cannot record that an attempt was taken back; trying again");
                lease.revoking = Some((reason, seq));
                lease.deadline = Instant::now();
                self.leases.insert(lease_id.to_owned(), lease);
                return;
            }
        };
        lease.span.record("result", "infrastructure");
        if let Some(device) = self.devices.get_mut(&lease.device) {
            device.lease = None;
        }
        if let Some(run) = self.runs.get_mut(&lease.run_id) {
            run.live_steps.retain(|s| !(s.case_id == lease.case_id && s.attempt == lease.attempt));
        }
        if !revoked {
            return;
        }
        warn!(lease = lease_id, case = %lease.case_id, %reason, "attempt taken back; it runs again");
        let key = Key {
            run: lease.run_id.clone(),
            case: lease.case_id.clone(),
            attempt: lease.attempt,
            try_no: lease.try_no + 1,
        };
        self.metrics.retried("infrastructure");
        self.queue(key, Some(lease.device.clone()));
        let device = self.device_ref(&lease.device);
        if let Some(run) = self.runs.get_mut(&lease.run_id) {
            run.publish(watch::taken_back(seq, &lease.case_id, lease.attempt, &reason, device));
        }
        self.dispatch_due = true;
    }

    /// Queues the next try of an attempt: written with the rest of the
    /// burst's ([`Core::flush`]), then offered to devices.
    fn queue(&mut self, key: Key, avoid_device: Option<String>) {
        self.unqueued.push((key, avoid_device));
    }

    /// Writes the tries the burst queued for attempts taken back, in one
    /// statement. What the store refuses stays, and the next flush tries
    /// again.
    async fn flush(&mut self) {
        if !self.unqueued.is_empty() {
            let tries: Vec<PendingTry> = self
                .unqueued
                .iter()
                .map(|(k, _)| PendingTry {
                    run_id: k.run.clone(),
                    case_id: k.case.clone(),
                    attempt: k.attempt,
                    try_no: k.try_no,
                })
                .collect();
            match self.store.queue_many(&tries, now_ms()).await {
                Ok(()) => {
                    for (key, avoid) in std::mem::take(&mut self.unqueued) {
                        self.enqueue(key, avoid);
                    }
                    self.dispatch_due = true;
                }
                Err(error) => warn!(%error, attempts = tries.len(), "cannot queue attempts; trying again"),
            }
        }
    }

    fn device_ref(&self, device: &str) -> grpc::DeviceRef {
        match self.devices.get(device) {
            Some(d) => {
                grpc::DeviceRef { id: d.id.clone(), platform: d.caps.platform.clone(), worker: d.worker.clone() }
            }
            None => grpc::DeviceRef { id: device.to_owned(), ..Default::default() },
        }
    }

    /// Once a second: leases past their deadline are taken back, what the
    /// store could not take is tried again, runs nobody watches past the
    /// grace are cancelled, and runs learn whether they wait for devices.
    async fn sweep(&mut self) {
        let now = Instant::now();
        let expired: Vec<String> = self.leases.values().filter(|l| l.deadline <= now).map(|l| l.id.clone()).collect();
        for lease in expired {
            self.take_back(&lease, "the lease expired: no heartbeat").await;
        }
        self.check_workers().await;
        self.settle().await;
        self.cancel_unwatched().await;
        self.check_waiting().await;
        if !self.pending.is_empty() {
            self.dispatch_due = true;
        }
    }

    /// Tells each run with attempts waiting whether some device could take
    /// them, and if none can, why; the store keeps the reason for the
    /// dashboard.
    async fn check_waiting(&mut self) {
        use crate::waiting::{Availability, DeviceView, why_waiting};
        let views: Vec<DeviceView<'_>> = self
            .devices
            .values()
            .map(|d| {
                let availability = if let Some(reason) = &d.quarantine {
                    Availability::Quarantined(reason.clone())
                } else if let Some(problem) = &d.mismatch {
                    Availability::Mismatched(problem.clone())
                } else if self.workers.get(&d.worker).is_none_or(|w| w.draining) {
                    Availability::Draining
                } else if d.info.state == grpc::DeviceState::Waiting as i32 {
                    Availability::NoApp
                } else if d.info.state == grpc::DeviceState::Disconnected as i32 {
                    Availability::Disconnected
                } else {
                    Availability::Ready
                };
                DeviceView { id: &d.id, caps: &d.caps, availability }
            })
            .collect();
        let waiting_runs: std::collections::HashSet<&str> = self.pending.iter().map(|p| p.run_id.as_str()).collect();
        let verdicts: Vec<(String, Option<String>)> = self
            .runs
            .values()
            .filter(|r| r.finished.is_none())
            .map(|r| {
                let why = if waiting_runs.contains(r.id.as_str()) { why_waiting(&r.selector, &views) } else { None };
                (r.id.clone(), why)
            })
            .collect();
        drop(views);
        for (run_id, why) in verdicts {
            let Some(run) = self.runs.get_mut(&run_id) else { continue };
            let changed = run.waiting.as_ref().map(|w| &w.message) != why.as_ref();
            if changed {
                match (&why, run.waiting.take()) {
                    (Some(message), previous) => {
                        let since_ms = previous.map_or_else(now_ms, |p| p.since_ms);
                        warn!(run = %run_id, reason = %message, "the run waits for devices");
                        let waiting = Waiting { message: message.clone(), since_ms, stored: false };
                        run.publish(no_device(&waiting, true));
                        run.waiting = Some(waiting);
                    }
                    (None, Some(previous)) => {
                        info!(run = %run_id, "the run has devices again");
                        run.publish(no_device(&previous, false));
                    }
                    (None, None) => {}
                }
            }
            let stored = run.waiting.as_ref().is_none_or(|w| w.stored);
            if changed || !stored {
                let message = run.waiting.as_ref().map(|w| w.message.clone());
                match self.store.set_waiting(&run_id, message.as_deref()).await {
                    Ok(()) => {
                        if let Some(waiting) = self.runs.get_mut(&run_id).and_then(|r| r.waiting.as_mut()) {
                            waiting.stored = true;
                        }
                    }
                    Err(error) => warn!(%error, run = %run_id, "cannot record why a run waits; trying again"),
                }
            }
        }
    }

    /// Keeps each worker's stream alive with a keepalive, and takes for gone
    /// a worker that has said nothing for [`WORKER_SILENCE`] (frozen, or on a
    /// half-open connection): its devices leave the fleet and its attempts
    /// run again, without waiting for their leases to expire.
    async fn check_workers(&mut self) {
        let now = now_ms();
        let beat = now - self.keepalive_at >= HEARTBEAT.as_millis() as i64;
        if beat {
            self.keepalive_at = now;
        }
        let keepalive = grpc::Keepalive { now_unix_ms: now };
        let mut silent = Vec::new();
        for worker in self.workers.values() {
            if now - worker.last_seen > WORKER_SILENCE.as_millis() as i64 {
                silent.push(worker.id.clone());
            } else if beat {
                let _ = worker.tx.try_send(Ok(message(coordinator_message::Kind::Keepalive(keepalive))));
            }
        }
        for worker in silent {
            warn!(worker = %worker, silent_s = WORKER_SILENCE.as_secs(), "worker silent; taken for gone");
            self.worker_gone(&worker).await;
        }
    }

    /// Tries again what the store refused with an error: results, queued
    /// attempts, case results, run ends.
    async fn settle(&mut self) {
        let unrecorded = std::mem::take(&mut self.unrecorded);
        if !unrecorded.is_empty() {
            self.record_results(unrecorded, true).await;
        }
        self.flush().await;
        for (device, reason) in std::mem::take(&mut self.unsaved_quarantines) {
            if self.devices.get(&device).is_some_and(|d| d.quarantine.as_ref() == Some(&reason)) {
                self.quarantine_for(&device, reason).await;
            }
        }
        if !self.dirty_devices.is_empty() {
            let now = now_ms();
            let records: Vec<DeviceRecord> = self
                .dirty_devices
                .iter()
                .filter_map(|id| self.devices.get(id))
                .map(|d| device_record(&d.worker, &d.info, now))
                .collect();
            match self.store.upsert_devices(&records).await {
                Ok(()) => self.dirty_devices.clear(),
                Err(error) => warn!(%error, devices = records.len(), "cannot record the devices' state; trying again"),
            }
        }
        let ids: Vec<String> =
            self.runs.iter().filter(|(_, r)| r.finished.is_none()).map(|(id, _)| id.clone()).collect();
        for id in ids {
            self.finish_run_if_done(&id).await;
        }
    }

    /// Cancels each run that no client has watched for the grace, unless it
    /// was submitted detached: its CI job is gone, and nobody would read
    /// its results.
    async fn cancel_unwatched(&mut self) {
        let now = Instant::now();
        let grace = self.config.client_grace;
        let mut orphans = Vec::new();
        for run in self.runs.values_mut().filter(|r| r.finished.is_none()) {
            run.watchers.retain(|w| !w.is_closed());
            if !run.watchers.is_empty() {
                run.unwatched_since = None;
                continue;
            }
            let since = *run.unwatched_since.get_or_insert(now);
            if !run.detached && now.duration_since(since) >= grace {
                orphans.push(run.id.clone());
            }
        }
        for run_id in orphans {
            let reason = format!(
                "no client watched the run for {} s (submit with --detach to keep a run going without one)",
                grace.as_secs()
            );
            warn!(run = %run_id, %reason, "run cancelled");
            if let Err(error) = self.cancel(&run_id, &reason).await {
                warn!(%error, run = %run_id, "cannot cancel an orphaned run; trying again");
            }
        }
    }

    fn enqueue(&mut self, key: Key, avoid_device: Option<String>) {
        let Some(run) = self.runs.get(&key.run) else { return };
        let Some(case) = run.cases.get(&key.case) else { return };
        self.pending.push(Pending {
            run_id: key.run.clone(),
            expected_ms: case.expected_ms,
            ordinal: case.ordinal,
            avoid_device,
            key,
        });
    }

    fn admit(&self, selector: &Selector) -> Result<(), CoreError> {
        if self
            .devices
            .values()
            .any(|d| selector.is_satisfied_by(&Capabilities { quarantined: false, ..d.caps.clone() }))
        {
            return Ok(());
        }
        Err(CoreError::NoDevice(format!(
            "no device matches {}; the fleet: {}",
            selector.describe(),
            self.fleet_summary()
        )))
    }

    /// Takes up a run that is in the store: nothing here waits on it.
    fn adopt(
        &mut self,
        suite: crate::submit::CheckedSuite,
        new_run: NewRun,
        traceparent: &str,
    ) -> grpc::SubmitResponse {
        let id = new_run.id.clone();
        let run = Run {
            id: id.clone(),
            selector: suite.selector,
            retries: new_run.retries,
            priority: new_run.priority,
            config_json: new_run.config_json,
            sources: new_run.files.into_iter().collect(),
            cases: new_run
                .cases
                .iter()
                .map(|c| {
                    (
                        c.case_id.clone(),
                        Case { file: c.file.clone(), ordinal: c.ordinal, expected_ms: c.expected_ms, done: false },
                    )
                })
                .collect(),
            started_at: new_run.started_at,
            watchers: Vec::new(),
            detached: new_run.detached,
            unwatched_since: Some(Instant::now()),
            waiting: None,
            lines: Vec::new(),
            log: Vec::new(),
            next_seq: 1,
            live_steps: Vec::new(),
            platform: None,
            native: None,
            finished: None,
            span: tracing::info_span!(parent: None, "run", run = %id, project = %new_run.project),
        };
        argus_proto::trace::set_parent(&run.span, traceparent);
        info!(run = %id, cases = run.cases.len(), selector = %run.selector.describe(), "run submitted");
        let case_ids: Vec<String> = new_run.cases.into_iter().map(|c| c.case_id).collect();
        self.runs.insert(id.clone(), run);
        for case in &case_ids {
            self.enqueue(Key { run: id.clone(), case: case.clone(), attempt: 1, try_no: 1 }, None);
        }
        self.dispatch_due = true;
        grpc::SubmitResponse {
            run_id: id.clone(),
            case_ids,
            dashboard_url: self.config.dashboard_url.as_ref().map(|u| format!("{u}/runs/{id}")).unwrap_or_default(),
        }
    }

    fn fleet_summary(&self) -> String {
        if self.devices.is_empty() {
            return "no devices are connected".into();
        }
        let mut devices: Vec<String> = self
            .devices
            .values()
            .map(|d| {
                let app = d.caps.app.as_deref().map(|a| format!(" ({a})")).unwrap_or_default();
                let quarantine = if d.quarantine.is_some() { " quarantined" } else { "" };
                format!("{} {}{app}{quarantine}", d.id, d.caps.platform)
            })
            .collect();
        devices.sort();
        devices.join(", ")
    }

    /// Leases pending attempts to idle devices, longest expected first and
    /// in fair share, committing each lease before sending it.
    /// Hands each idle device its next attempt: decides them all, commits
    /// every lease in one transaction, then sends them.
    async fn dispatch(&mut self) {
        self.dispatch_due = false;
        if self.pending.is_empty() {
            return;
        }
        let mut idle: Vec<String> = self
            .devices
            .values()
            .filter(|d| {
                d.lease.is_none()
                    && d.quarantine.is_none()
                    && d.info.state == grpc::DeviceState::Idle as i32
                    && self.workers.get(&d.worker).is_some_and(|w| !w.draining)
            })
            .map(|d| d.id.clone())
            .collect();
        idle.sort();
        let selectors: HashMap<String, Selector> =
            self.runs.values().map(|r| (r.id.clone(), r.selector.clone())).collect();
        let mut shares: HashMap<String, Share> =
            self.runs.values().map(|r| (r.id.clone(), Share { priority: r.priority, running: 0 })).collect();
        for lease in self.leases.values() {
            if let Some(share) = shares.get_mut(&lease.run_id) {
                share.running += 1;
            }
        }
        let mut planned: Vec<(Pending<Key>, NewLease)> = Vec::new();
        for device_id in idle {
            if self.pending.is_empty() {
                break;
            }
            let Some(caps) = self.devices.get(&device_id).map(|d| d.caps.clone()) else { continue };
            let Some(index) = scheduler::next_for(&device_id, &caps, &self.pending, &selectors, &shares) else {
                continue;
            };
            let pending = self.pending.remove(index);
            match self.new_lease(&device_id, &pending.key) {
                Ok(lease) => {
                    if let Some(share) = shares.get_mut(&pending.key.run) {
                        share.running += 1;
                    }
                    planned.push((pending, lease));
                }
                Err(error) => {
                    warn!(%error, device = %device_id, "cannot lease; the attempt stays queued");
                    self.pending.push(pending);
                }
            }
        }
        if planned.is_empty() {
            return;
        }
        let leases: Vec<NewLease> = planned.iter().map(|(_, lease)| lease.clone()).collect();
        let granted = match self.store.grant_leases(&leases).await {
            Ok(granted) => granted,
            Err(error) => {
                warn!(%error, leases = leases.len(), "cannot commit leases; their attempts stay queued");
                self.pending.extend(planned.into_iter().map(|(pending, _)| pending));
                // Tried again at the next sweep, if nothing comes sooner.
                self.dispatch_due = true;
                return;
            }
        };
        for ((pending, lease), granted) in planned.into_iter().zip(granted) {
            if granted {
                self.send_lease(lease, pending.key).await;
            } else {
                warn!(case = %pending.key.case, "the attempt is no longer pending; not leased");
            }
        }
    }

    /// The lease `device_id` would get for `key`. The owner task must not
    /// panic on a state it did not expect: a missing device, run or case
    /// leaves the attempt queued, with a log.
    fn new_lease(&self, device_id: &str, key: &Key) -> Result<NewLease, CoreError> {
        let missing = |what: String| CoreError::Invalid(format!("cannot lease: {what}"));
        let device = self.devices.get(device_id).ok_or_else(|| missing(format!("no device {device_id}")))?;
        let run = self.runs.get(&key.run).ok_or_else(|| missing(format!("no run {}", key.run)))?;
        if !run.cases.contains_key(&key.case) {
            return Err(missing(format!("no case {} in run {}", key.case, key.run)));
        }
        let now = now_ms();
        Ok(NewLease {
            id: uuid::Uuid::new_v4().simple().to_string(),
            run_id: key.run.clone(),
            case_id: key.case.clone(),
            attempt: key.attempt,
            try_no: key.try_no,
            device_id: device_id.to_owned(),
            worker_id: device.worker.clone(),
            platform: device.caps.platform.clone(),
            granted_at: now,
            deadline: now + LEASE_TTL.as_millis() as i64,
        })
    }

    /// Sends a committed lease to its worker and tells the run's watchers.
    async fn send_lease(&mut self, lease: NewLease, key: Key) {
        let run_span = self.runs.get(&key.run).map_or_else(tracing::Span::none, |r| r.span.clone());
        let span = tracing::info_span!(
            parent: &run_span,
            "lease",
            case = %key.case,
            attempt = key.attempt,
            try_no = key.try_no,
            device = %lease.device_id,
            result = tracing::field::Empty
        );
        let traceparent = argus_proto::trace::traceparent(&span).unwrap_or_default();
        self.leases.insert(
            lease.id.clone(),
            Lease {
                id: lease.id.clone(),
                run_id: key.run.clone(),
                case_id: key.case.clone(),
                attempt: key.attempt,
                try_no: key.try_no,
                device: lease.device_id.clone(),
                worker: lease.worker_id.clone(),
                deadline: Instant::now() + LEASE_TTL,
                span,
                revoking: None,
            },
        );
        let message = {
            let device = self.devices.get(&lease.device_id);
            let run = self.runs.get(&key.run);
            let case = run.and_then(|r| r.cases.get(&key.case));
            let (Some(device), Some(run), Some(case)) = (device, run, case) else {
                self.take_back(&lease.id, "the device or run went away before the lease was sent").await;
                return;
            };
            message(coordinator_message::Kind::Lease(grpc::Lease {
                lease_id: lease.id.clone(),
                run_id: key.run.clone(),
                slot: device.info.slot.clone(),
                case_id: key.case.clone(),
                attempt: key.attempt,
                case_source: run.sources.get(&case.file).cloned().unwrap_or_default(),
                case_file: case.file.clone(),
                config_json: run.config_json.clone(),
                deadline_unix_ms: lease.deadline,
                traceparent,
                granted_unix_us: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64),
            }))
        };
        if let Some(device) = self.devices.get_mut(&lease.device_id) {
            device.lease = Some(lease.id.clone());
        }
        let started = grpc::RunUpdate {
            kind: Some(run_update::Kind::Started(grpc::AttemptStarted {
                case_id: key.case.clone(),
                attempt: key.attempt,
                device: Some(self.device_ref(&lease.device_id)),
            })),
            seq: 0,
        };
        if let Some(run) = self.runs.get_mut(&key.run) {
            run.publish(started);
        }
        self.metrics.leases_granted.inc();
        let sent = self.workers.get(&lease.worker_id).is_some_and(|w| w.tx.try_send(Ok(message)).is_ok());
        if !sent {
            // The worker's stream is gone; its loss takes the lease back.
            self.take_back(&lease.id, "the worker could not be reached").await;
        }
    }

    /// Records results (one transaction for all), then acts on each: retry,
    /// requeue, finish the case and the run.
    async fn attempts_finished(&mut self, results: Vec<(String, grpc::AttemptResult)>) {
        if results.is_empty() {
            return;
        }
        let prepared: Vec<Finished> = results.into_iter().filter_map(|(w, r)| self.prepare_result(&w, r)).collect();
        self.record_results(prepared, false).await;
    }

    /// Writes prepared results and applies those the store took. When the
    /// store fails they are kept, with their `seq`, and tried again at the
    /// next sweep (`again`): a result refused then as no longer current,
    /// whose lease this coordinator still holds, was committed by the try
    /// whose answer was lost (only this task ends leases), and is applied.
    async fn record_results(&mut self, prepared: Vec<Finished>, again: bool) {
        if prepared.is_empty() {
            return;
        }
        let outcomes: Vec<(String, AttemptOutcome)> =
            prepared.iter().map(|f| (f.result.lease_id.clone(), f.outcome.clone())).collect();
        let recorded = match self.store.finish_attempts(&outcomes).await {
            Ok(recorded) => recorded,
            Err(error) => {
                warn!(%error, results = prepared.len(), "cannot record results; trying again at the next sweep");
                self.unrecorded.extend(prepared);
                return;
            }
        };
        for (finished, recorded) in prepared.into_iter().zip(recorded) {
            let held = self.leases.get(&finished.result.lease_id).is_some_and(|l| l.revoking.is_none());
            match recorded {
                Ok(_) => self.apply_result(finished).await,
                Err(_) if again && held => self.apply_result(finished).await,
                Err(error) => warn!(%error, "late result refused (fencing)"),
            }
        }
    }

    /// A result checked against its lease, with what the store records. A
    /// result whose RunCase does not parse is an infrastructure failure that
    /// says so, not a default.
    fn prepare_result(&mut self, worker: &str, result: grpc::AttemptResult) -> Option<Finished> {
        let Some(lease) = self.leases.get(&result.lease_id).filter(|l| l.worker == worker && l.revoking.is_none())
        else {
            warn!(lease = %result.lease_id, worker, "result for a lease that is not current; refused");
            return None;
        };
        let device = self.device_ref(&lease.device);
        let (attempt, run_id) = (lease.attempt, lease.run_id.clone());
        let mut error = (!result.error.is_empty()).then(|| result.error.clone());
        let mut line: Option<RunCase> = None;
        if !result.infrastructure_failure {
            match serde_json::from_str::<RunCase>(&result.run_case_json) {
                Ok(parsed) => line = Some(parsed),
                Err(e) => {
                    warn!(lease = %result.lease_id, error = %e, "the worker's RunCase does not parse; the attempt runs again");
                    error = Some(format!("the worker sent a result that does not parse: {e}"));
                }
            }
        }
        if let Some(line) = line.as_mut() {
            line.attempt = attempt;
            line.extra.insert(
                "device".into(),
                json!({"id": device.id, "platform": device.platform, "worker": device.worker}),
            );
        }
        let infrastructure = line.is_none();
        let retries = self.runs.get(&run_id).map_or(0, |r| r.retries);
        let next = crate::policy::after_attempt(line.as_ref().map(|l| l.result), attempt, lease.try_no, retries);
        let seq = self.runs.get_mut(&run_id).map_or(0, Run::take_seq);
        let outcome = AttemptOutcome {
            result: line.as_ref().map(|l| result_name(l.result).to_owned()),
            infrastructure,
            error: error.clone(),
            finished_at: now_ms(),
            ms: line.as_ref().map_or(0, |l| l.ms as i64),
            run_case_json: line.as_ref().map(RunCase::to_line),
            steps: line
                .as_ref()
                .map(|l| {
                    l.steps
                        .iter()
                        .map(|s| StepRow {
                            step: s.step.clone(),
                            status: format!("{:?}", s.status).to_lowercase(),
                            ms: s.ms as i64,
                            error: s.error.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            seq: seq as i64,
            next_try: match next {
                Next::RunAgain { attempt, try_no, .. } => Some((attempt, try_no)),
                Next::Final(_) => None,
            },
            final_result: match next {
                Next::Final(result) => Some(result_name(result).to_owned()),
                Next::RunAgain { .. } => None,
            },
        };
        let result = grpc::AttemptResult { error: error.unwrap_or_default(), ..result };
        Some(Finished { result, line, outcome, seq, next })
    }

    async fn apply_result(&mut self, finished: Finished) {
        let Finished { result, line, seq, next, .. } = finished;
        let Some(lease) = self.leases.remove(&result.lease_id) else { return };
        let (run_id, case_id, attempt, device_id) =
            (lease.run_id.clone(), lease.case_id.clone(), lease.attempt, lease.device.clone());
        let device = self.device_ref(&device_id);
        let outcome = line.as_ref().map_or("infrastructure", |l| result_name(l.result));
        lease.span.record("result", outcome);
        if let Some(d) = self.devices.get_mut(&device_id) {
            d.lease = None;
        }
        if let Some(run) = self.runs.get_mut(&run_id) {
            run.live_steps.retain(|s| !(s.case_id == case_id && s.attempt == attempt));
        }
        self.dispatch_due = true;
        let Some(line) = line else {
            let reason = if result.error.is_empty() { "the attempt could not run" } else { result.error.as_str() };
            warn!(case = %case_id, reason, "infrastructure failure; the attempt runs again");
            let failures = self.devices.get_mut(&device_id).map_or(0, |d| {
                d.infra_failures += 1;
                d.infra_failures
            });
            if failures >= 3 && self.devices.get(&device_id).is_some_and(|d| d.quarantine.is_none()) {
                let reason = format!("{failures} infrastructure failures in a row: {reason}");
                self.quarantine_for(&device_id, reason).await;
            }
            let reason = if result.error.is_empty() { "the attempt could not run" } else { result.error.as_str() };
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.publish(watch::taken_back(seq, &case_id, attempt, reason, device));
            }
            self.follow(&run_id, &case_id, next, Some(device_id)).await;
            return;
        };
        if let Some(d) = self.devices.get_mut(&device_id) {
            d.infra_failures = 0;
        }
        self.metrics.attempt(&device.platform, result_name(line.result), line.ms as i64);
        self.metrics.lease_to_first_call(result.lease_to_first_call_us);
        for (suspect, reason) in self.judge_device(&run_id, &line, &device_id) {
            self.quarantine_for(&suspect, reason).await;
        }
        let native = self
            .devices
            .get(&device_id)
            .and_then(|d| serde_json::from_str::<Value>(&d.info.hello_json).ok()?.get("native")?.as_bool());
        if let Some(run) = self.runs.get_mut(&run_id) {
            run.publish(watch::finished(seq, line.to_line(), device.clone(), result.lease_to_first_call_us));
            if run.platform.is_none() {
                run.platform = Some(device.platform.clone());
                run.native = native;
            }
            run.lines.push(line.clone());
        }
        self.follow(&run_id, &case_id, next, Some(device_id)).await;
    }

    /// Applies what follows an attempt, which the store recorded with its
    /// result: the next try waits for a device (preferably another), or the
    /// case is done and the run may be over.
    async fn follow(&mut self, run_id: &str, case_id: &str, next: Next, avoid: Option<String>) {
        match next {
            Next::RunAgain { attempt, try_no, kind } => {
                self.metrics.retried(kind.name());
                self.enqueue(Key { run: run_id.to_owned(), case: case_id.to_owned(), attempt, try_no }, avoid);
                self.dispatch_due = true;
            }
            Next::Final(_) => {
                if let Some(case) = self.runs.get_mut(run_id).and_then(|r| r.cases.get_mut(case_id)) {
                    case.done = true;
                }
                self.finish_run_if_done(run_id).await;
            }
        }
    }

    /// A pass clears the device it ran on; a pass after failures on other
    /// devices counts against each of them, and the third such case in a row
    /// quarantines a device.
    fn judge_device(&mut self, run_id: &str, line: &RunCase, device_id: &str) -> Vec<(String, String)> {
        let mut quarantines = Vec::new();
        if line.result != CaseResult::Passed {
            return quarantines;
        }
        if let Some(d) = self.devices.get_mut(device_id) {
            d.failed_but_passed_elsewhere.clear();
        }
        let Some(run) = self.runs.get(run_id) else { return quarantines };
        let suspects: Vec<String> = run
            .lines
            .iter()
            .filter(|l| l.id == line.id && l.result == CaseResult::Failed)
            .filter_map(|l| l.extra.get("device")?.get("id")?.as_str().map(str::to_owned))
            .filter(|d| d != device_id)
            .collect();
        for suspect in suspects {
            let Some(d) = self.devices.get_mut(&suspect) else { continue };
            if d.failed_but_passed_elsewhere.contains(&line.id) {
                continue;
            }
            d.failed_but_passed_elsewhere.push(line.id.clone());
            if d.failed_but_passed_elsewhere.len() >= SUSPECT_CASES && d.quarantine.is_none() {
                let reason = format!(
                    "{} cases in a row failed here and passed on other devices: {}",
                    d.failed_but_passed_elsewhere.len(),
                    d.failed_but_passed_elsewhere.join(", ")
                );
                quarantines.push((d.id.clone(), reason));
            }
        }
        quarantines
    }

    /// Ends a run whose every case has its final result: recorded first;
    /// if the store fails, the sweep tries again and watchers wait.
    async fn finish_run_if_done(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else { return };
        if run.finished.is_some() || !run.cases.values().all(|c| c.done) {
            return;
        }
        let finished_at = now_ms();
        let manifest = RunManifest {
            finished_at: Some(iso(finished_at)),
            platform: run.platform.clone(),
            native: run.native,
            totals: Some(totals(&run.lines)),
            ..RunManifest::started(iso(run.started_at))
        };
        let manifest_json = manifest_json(&manifest);
        if let Err(error) = self.store.finish_run(run_id, finished_at, &manifest_json).await {
            warn!(%error, run = run_id, "cannot record the end of a run; trying again");
            return;
        }
        info!(run = run_id, "run finished");
        run.finished = Some(manifest_json);
        Self::close_run(run);
    }

    /// Tells a finished run's watchers, and lets them go.
    fn close_run(run: &mut Run) {
        if let Some(end) = run.finished_update() {
            for mut watcher in run.watchers.drain(..) {
                watcher.send(&end);
            }
        }
        run.waiting = None;
        run.span = tracing::Span::none();
    }

    /// Ends a run where it stands, in one transaction: its open leases end,
    /// its waiting attempts are dropped, and the run is recorded as cut
    /// short (no `finishedAt`, no `totals`). Then the workers are told to
    /// stop those attempts (their results would be refused) and the devices
    /// are free. Nothing changes in memory unless the store took it.
    async fn cancel(&mut self, run_id: &str, reason: &str) -> Result<(), CoreError> {
        let Some(run) = self.runs.get(run_id) else { return Err(CoreError::NoRun(run_id.to_owned())) };
        if run.finished.is_some() {
            return Ok(());
        }
        let manifest = manifest_json(&RunManifest::started(iso(run.started_at)));
        self.store.cancel_run(run_id, reason, now_ms(), &manifest).await?;
        self.pending.retain(|p| p.run_id != run_id);
        self.unqueued.retain(|(key, _)| key.run != run_id);
        let leases: Vec<String> = self.leases.values().filter(|l| l.run_id == run_id).map(|l| l.id.clone()).collect();
        for lease_id in leases {
            let Some(lease) = self.leases.remove(&lease_id) else { continue };
            lease.span.record("result", "cancelled");
            if let Some(device) = self.devices.get_mut(&lease.device) {
                device.lease = None;
            }
            if let Some(worker) = self.workers.get(&lease.worker) {
                let cancel = grpc::Cancel { lease_id: lease_id.clone(), reason: reason.to_owned() };
                let _ = worker.tx.try_send(Ok(message(coordinator_message::Kind::Cancel(cancel))));
            }
        }
        info!(run = run_id, reason, "run cancelled");
        let run = self.runs.get_mut(run_id).expect("checked above");
        run.finished = Some(manifest);
        Self::close_run(run);
        self.dispatch_due = true;
        Ok(())
    }

    fn snapshot(&self) -> Snapshot {
        let going = self.runs.values().filter(|r| r.finished.is_none());
        let mut queued: HashMap<&str, i64> = going.map(|r| (r.id.as_str(), 0)).collect();
        for pending in &self.pending {
            *queued.entry(pending.run_id.as_str()).or_default() += 1;
        }
        let mut devices: HashMap<String, i64> = HashMap::new();
        for device in self.devices.values() {
            let state = if device.quarantine.is_some() {
                "quarantined".to_owned()
            } else if device.lease.is_some() {
                "busy".to_owned()
            } else {
                grpc::device_state_name(device.info.state)
            };
            *devices.entry(state).or_default() += 1;
        }
        let mut queued: Vec<(String, i64)> = queued.into_iter().map(|(id, n)| (id.to_owned(), n)).collect();
        queued.sort();
        let mut devices: Vec<(String, i64)> = devices.into_iter().collect();
        devices.sort();
        Snapshot { queued, leases: self.leases.len() as i64, devices }
    }

    fn fleet(&self) -> grpc::ListFleetResponse {
        let mut workers: Vec<grpc::FleetWorker> = self
            .workers
            .values()
            .map(|w| grpc::FleetWorker {
                id: w.id.clone(),
                hostname: w.hostname.clone(),
                connected: true,
                draining: w.draining,
                last_seen_unix_ms: w.last_seen,
            })
            .collect();
        workers.sort_by(|a, b| a.id.cmp(&b.id));
        let mut devices: Vec<grpc::FleetDevice> = self
            .devices
            .values()
            .map(|d| grpc::FleetDevice {
                id: d.id.clone(),
                worker: d.worker.clone(),
                device: Some(d.info.clone()),
                quarantined: d.quarantine.is_some(),
                quarantine_reason: d.quarantine.clone().unwrap_or_default(),
                running_case: d
                    .lease
                    .as_ref()
                    .and_then(|l| self.leases.get(l))
                    .map(|l| l.case_id.clone())
                    .unwrap_or_default(),
                state_since_unix_ms: d.state_since,
                problem: d.mismatch.clone().unwrap_or_default(),
            })
            .collect();
        devices.sort_by(|a, b| a.id.cmp(&b.id));
        grpc::ListFleetResponse { workers, devices }
    }
}

/// What is wrong with a worker's name: it is the first part of every one of
/// its device ids (`name/slot`), shown everywhere.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.chars().count() > 64 {
        Some("64 characters at most")
    } else if name.contains('/') {
        Some("no `/`: it separates the worker from the slot in device ids")
    } else if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("no spaces or control characters")
    } else {
        None
    }
}

/// A device as the store keeps it.
fn device_record(worker: &str, info: &grpc::Device, now: i64) -> DeviceRecord {
    let hello: Value = serde_json::from_str(&info.hello_json).unwrap_or(Value::Null);
    let device = json!({
        "slot": info.slot,
        "port": info.port,
        "platform": info.platform,
        "bridge": info.bridge,
        "labels": info.labels,
        "udid": info.udid,
        "serial": info.serial,
        "hello": hello,
    });
    DeviceRecord {
        id: format!("{worker}/{}", info.slot),
        worker_id: worker.to_owned(),
        slot: info.slot.clone(),
        platform: info.platform.clone(),
        state: grpc::device_state_name(info.state),
        device_json: device.to_string(),
        updated_at: now,
    }
}

fn manifest_json(manifest: &RunManifest) -> String {
    serde_json::to_string(manifest).expect("a manifest is plain data")
}

fn result_name(result: CaseResult) -> &'static str {
    match result {
        CaseResult::Passed => "passed",
        CaseResult::Failed => "failed",
        CaseResult::Unsupported => "unsupported",
    }
}

fn message(kind: coordinator_message::Kind) -> grpc::CoordinatorMessage {
    grpc::CoordinatorMessage { kind: Some(kind) }
}

fn no_device(waiting: &Waiting, still: bool) -> grpc::RunUpdate {
    grpc::RunUpdate {
        kind: Some(run_update::Kind::NoDevice(grpc::NoDevice {
            message: waiting.message.clone(),
            waiting: still,
            since_unix_ms: waiting.since_ms,
        })),
        seq: 0,
    }
}
