//! The coordinator's one owner task: every decision about the fleet, runs
//! and leases is made here, in order, and written to the store before it is
//! acted on. gRPC handlers talk to it through [`Handle`].
//!
//! This module holds the task's state and its loop; what it does is split
//! by concern: [`fleet`] (workers and devices), [`runs`], [`leases`] and
//! [`in_flight`] (the writes the owner does not wait on).
//! What follows an attempt is decided in [`crate::policy`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use argus_proto::grpc::{self, coordinator_message, run_update};
use argus_proto::run::{CaseResult, RunManifest, totals_of};
use argus_proto::wire::Hello;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use crate::error::CoreError;
use crate::metrics::{Metrics, Snapshot};
use crate::policy::{Next, Suspicion};
use crate::scheduler::{Capabilities, Pending, Queue, Selector, Share};
use crate::time::{Clock, iso};
use crate::waiting::Availability;
use crate::watch::{self, WatchStream, Watcher};
use argus_store::{AttemptOutcome, DeviceRecord, NewLease, NewRun, Observed, StepRow, Store, StoreError, WorkerRecord};

mod fleet;
mod handle;
mod in_flight;
mod leases;
mod records;
pub(crate) mod runs;
mod sessions;
mod unwritten;

pub use handle::Handle;
pub use sessions::{Grant, Granted, SessionAsk};

use handle::Command;

use in_flight::{Chained, Granting, MAX_RECORDING, Recording, answer_of};

use fleet::device_record;
use unwritten::Unwritten;

/// How long a lease lives without a heartbeat.
pub const LEASE_TTL: Duration = Duration::from_secs(20);
/// How often workers send heartbeats (told in `Registered`).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A worker silent this long (two heartbeats) is taken for gone.
pub const WORKER_SILENCE: Duration = Duration::from_secs(10);

pub type WorkerTx = mpsc::Sender<Result<grpc::CoordinatorMessage, tonic::Status>>;

/// One worker's stream: its name (its identity, stable across reconnects)
/// and which of its connections this is. A worker that dials again while
/// its old stream still looks alive replaces it; what the old one still
/// says is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub worker: String,
    pub conn: u64,
}

/// The most device slots one worker may register.
pub const MAX_DEVICES_PER_WORKER: usize = 1024;

/// The most commands the owner task takes in one burst: a thousand devices'
/// results and steps, whose writes then share a transaction (the store's
/// cost per row falls with the rows per statement).
const MAX_BURST: usize = 4096;

struct Device {
    id: String,
    worker: String,
    info: grpc::Device,
    /// `info.hello_json` as the typed hello, read once where the worker's
    /// update arrives; `None` before the first hello (or when it did not
    /// parse, which `mismatch` then says).
    hello: Option<Arc<Hello>>,
    caps: Capabilities,
    lease: Option<String>,
    /// The WebDriver session that holds it.
    session: Option<String>,
    quarantine: Option<String>,
    /// When `info.state` last changed (epoch ms).
    state_since: i64,
    /// What its attempts hold against it (the quarantine rules).
    suspicion: Suspicion,
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
    /// Where its attempts' observations are filed (baselines are per
    /// project and branch); `''` for a run without a branch or commit.
    project: String,
    branch: String,
    commit: String,
    selector: Selector,
    retries: u32,
    priority: u32,
    config_json: String,
    sources: HashMap<String, String>,
    cases: HashMap<String, Case>,
    /// How many of `cases` are not done ([`Run::case_done`]): whether the
    /// run is over, without reading every case at every result.
    undone: usize,
    started_at: i64,
    watchers: Vec<Watcher>,
    /// Goes on without a client.
    detached: bool,
    /// Since when no client watches it (the run is cancelled past the
    /// grace unless detached).
    unwatched_since: Option<Instant>,
    /// Why it waits, while no device could take its pending attempts.
    waiting: Option<Waiting>,
    /// What its finished attempts came to, added by [`Run::add_outcome`].
    outcomes: Vec<Outcome>,
    /// Per case, the devices its failed attempts ran on: what a later pass
    /// counts against ([`Owner::judge_device`]) without reading every line.
    failed_on: HashMap<String, Vec<String>>,
    /// Every finished attempt and attempt taken back, in `seq` order: what a
    /// watcher that resumes after a `seq` is sent.
    log: Vec<grpc::RunUpdate>,
    /// The `seq` the next finished attempt gets.
    next_seq: u64,
    /// Steps of attempts still running, per lease (one lookup when an
    /// attempt ends, not a scan of every running attempt's steps), replayed
    /// to late watchers.
    live_steps: HashMap<String, Vec<grpc::StepFinished>>,
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

    /// `case_id` has its final result.
    fn case_done(&mut self, case_id: &str) {
        if let Some(case) = self.cases.get_mut(case_id)
            && !std::mem::replace(&mut case.done, true)
        {
            self.undone -= 1;
        }
    }

    /// What a finished attempt came to.
    fn add_outcome(&mut self, outcome: Outcome) {
        if outcome.result == CaseResult::Failed {
            self.failed_on.entry(outcome.case_id.clone()).or_default().push(outcome.device.clone());
        }
        self.outcomes.push(outcome);
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

/// What one finished attempt came to: all a run keeps of it (its totals,
/// its platforms, the devices a later pass counts against), not its record.
struct Outcome {
    case_id: String,
    attempt: u32,
    result: CaseResult,
    device: String,
    platform: String,
}

/// A result on its way to the store.
struct Finished {
    /// The attempt the store files it under.
    key: argus_store::AttemptKey,
    /// As the worker sent it; its record (`run_case_json`) goes to the
    /// store and the watchers as it came.
    result: grpc::AttemptResult,
    /// The case's result, from the checked verdict; `None`: an
    /// infrastructure failure.
    case: Option<CaseResult>,
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

struct Owner {
    store: Store,
    workers: HashMap<String, Worker>,
    devices: HashMap<String, Device>,
    leases: HashMap<String, Lease>,
    runs: HashMap<String, Run>,
    pending: Queue<Key>,
    /// WebDriver sessions holding devices, and those waiting for one.
    sessions: HashMap<String, sessions::Holding>,
    session_queue: Vec<sessions::Waiting>,
    /// Leases being committed: at most one dispatch's at a time.
    granting: Option<Granting>,
    /// Bursts of results being written, oldest first ([`MAX_RECORDING`]).
    recording: std::collections::VecDeque<Recording>,
    /// Their leases: what nothing else may end meanwhile.
    finishing: std::collections::HashSet<String>,
    /// What the store has not taken yet, tried again at each sweep.
    unwritten: Unwritten,
    /// When workers were last sent a keepalive (epoch ms).
    keepalive_at: i64,
    next_worker: u64,
    config: OwnerConfig,
    /// The one clock the owner task reads wall time from.
    clock: Clock,
    /// Set by whatever frees a device or queues work; the owner loop
    /// dispatches once after a burst of commands, so that their leases
    /// commit in one transaction.
    dispatch_due: bool,
    metrics: Arc<Metrics>,
    /// Passing attempts' step records, written after their results
    /// ([`records`]).
    records: mpsc::Sender<records::Item>,
}

/// How long a run may go without a client watching it before it is
/// cancelled (unless submitted detached): long enough for `argus run` to
/// ride out a coordinator restart or a network blip.
pub const CLIENT_GRACE: Duration = Duration::from_secs(60);

/// How the owner task behaves.
#[derive(Debug, Clone)]
pub struct OwnerConfig {
    /// Where the dashboard is, for the links Submit answers.
    pub dashboard_url: Option<String>,
    /// See [`CLIENT_GRACE`].
    pub client_grace: Duration,
    /// How long a lease lives without a heartbeat ([`LEASE_TTL`]).
    pub lease_ttl: Duration,
    /// How often workers send heartbeats, told in `Registered` ([`HEARTBEAT`]).
    pub heartbeat: Duration,
    /// A worker silent this long is taken for gone ([`WORKER_SILENCE`]).
    pub worker_silence: Duration,
    /// A session's device whose app has been gone this long ends the
    /// session ([`sessions::DEVICE_LOST`]).
    pub device_lost: Duration,
    /// Where the owner task reads wall time (tokio's time, so that tests
    /// under paused time move both clocks at once).
    pub clock: Clock,
}

impl Default for OwnerConfig {
    fn default() -> Self {
        Self {
            dashboard_url: None,
            client_grace: CLIENT_GRACE,
            lease_ttl: LEASE_TTL,
            heartbeat: HEARTBEAT,
            worker_silence: WORKER_SILENCE,
            device_lost: sessions::DEVICE_LOST,
            clock: Clock::system(),
        }
    }
}

/// Starts the owner task over `store`. Attempts that were leased when the
/// last coordinator stopped are infrastructure failures, queued again.
pub async fn start(
    store: Store,
    config: OwnerConfig,
    metrics: Arc<Metrics>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(Handle, tokio::task::JoinHandle<()>), CoreError> {
    let (records, writer) = records::start(store.clone(), shutdown.clone());
    let config_clock = config.clock;
    let mut core = Owner {
        store,
        workers: HashMap::new(),
        devices: HashMap::new(),
        leases: HashMap::new(),
        runs: HashMap::new(),
        pending: Queue::default(),
        sessions: HashMap::new(),
        session_queue: Vec::new(),
        granting: None,
        recording: Default::default(),
        finishing: Default::default(),
        unwritten: Unwritten::default(),
        keepalive_at: 0,
        next_worker: 0,
        clock: config.clock,
        config,
        dispatch_due: true,
        metrics,
        records,
    };
    core.recover().await?;
    let (tx, mut rx) = mpsc::channel::<Command>(2 * MAX_BURST);
    let task = argus_proto::task::spawn(
        "owner",
        tracing::Instrument::instrument(
            async move {
                let mut sweep = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tokio::select! {
                        // What the store has not taken yet gets one more try, then
                        // dropping the workers' and watchers' senders ends their
                        // streams.
                        _ = shutdown.cancelled() => {
                            core.settle_recording(usize::MAX).await;
                            core.settle_grant().await;
                            core.settle().await;
                            // What settling wrote again, applied.
                            core.settle_recording(usize::MAX).await;
                            info!(leases = core.leases.len(), "owner task stopped");
                            break;
                        }
                        command = rx.recv() => match command {
                            Some(command) => {
                                // Whatever else is ready is handled too before leases
                                // are decided: a burst of results becomes one
                                // transaction, with the leases of the devices it frees.
                                let mut burst = vec![command];
                                while burst.len() < MAX_BURST && let Ok(more) = rx.try_recv() {
                                    burst.push(more);
                                }
                                core.handle_burst(burst).await;
                            }
                            None => break,
                        },
                        _ = sweep.tick() => {
                            // What it may end (expired leases, runs nobody
                            // watches) has its results applied first.
                            core.settle_recording(usize::MAX).await;
                            core.sweep().await;
                        }
                        answer = answer_of(core.granting.as_mut().map(|g| &mut g.task)) => core.granted(answer).await,
                        answer = answer_of(core.recording.front_mut().map(|r| &mut r.task)) => core.recorded(answer).await,
                    }
                    // What the burst decided is written in a few statements,
                    // before any device is handed the attempts it queued.
                    core.flush().await;
                    if core.dispatch_due {
                        core.dispatch().await;
                    }
                }
                // The records' writer ends once the owner's sender is gone
                // and what it was sent is written.
                drop(core);
                let _ = writer.await;
            },
            tracing::info_span!("owner"),
        ),
    );
    Ok((Handle::new(tx, config_clock), task))
}

impl Owner {
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
                    // It may end leases another way (a worker gone, a
                    // cancel): the results before it are applied first.
                    self.settle_recording(usize::MAX).await;
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
                    let registered = grpc::Registered {
                        worker_id: link.worker.clone(),
                        heartbeat_ms: self.config.heartbeat.as_millis() as u32,
                    };
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
            Command::Submitted { run, reply } => {
                let began = Instant::now();
                let _ = reply.send(self.adopt(*run));
                // What a big suite holds the owner (and every lease) up for.
                debug!(taken_up_ms = began.elapsed().as_millis() as u64, "run taken up by the owner");
            }
            Command::Watch { run_id, after_seq, reply } => {
                let _ = reply.send(self.watch(&run_id, after_seq));
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.snapshot());
            }
            Command::OpenSession { ask, reply } => self.open_session(ask, reply),
            Command::CloseSession { id } => self.close_session(&id, "deleted by its client", false),
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
                    d.suspicion.forgive();
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

    /// Writes the tries the burst queued for attempts taken back, in one
    /// statement. What the store refuses stays, and the next flush tries
    /// again.
    async fn flush(&mut self) {
        let written = self.unwritten.write_tries(&self.store, self.clock.now_ms()).await;
        if !written.is_empty() {
            for (key, avoid) in written {
                self.enqueue(key, avoid);
            }
            self.dispatch_due = true;
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
        self.sweep_sessions();
        if !self.pending.is_empty() || !self.session_queue.is_empty() {
            self.dispatch_due = true;
        }
    }

    /// Writes what waits for the sweep (heartbeats, devices' state) and
    /// tries again what the store refused with an error: results, queued
    /// attempts, quarantines, run ends.
    async fn settle(&mut self) {
        let unrecorded = std::mem::take(&mut self.unwritten.results);
        let unchained = std::mem::take(&mut self.unwritten.chained);
        if !unrecorded.is_empty() {
            // A lease taken back meanwhile frees its device for any dispatch:
            // what was to follow it waits again, rather than share the device.
            let (held, freed): (Vec<Chained>, Vec<Chained>) =
                unchained.into_iter().partition(|c| self.leases.get(&c.after).is_some_and(|l| l.revoking.is_none()));
            for chained in freed {
                warn!(case = %chained.pending.key.case, "its device's lease was taken back; the attempt waits again");
                self.pending.push(chained.pending);
            }
            self.record_results(unrecorded, true, Some(held)).await;
        }
        self.flush().await;
        self.regrant().await;
        let deadline = self.clock.now_ms() + self.config.lease_ttl.as_millis() as i64;
        self.unwritten.write_heartbeats(&self.store, |id| self.leases.contains_key(id), deadline).await;
        for (run_id, reason) in std::mem::take(&mut self.unwritten.cancels) {
            if let Err(error) = self.cancel(&run_id, &reason).await {
                warn!(%error, run = %run_id, "cannot record that a run was cancelled; trying again");
            }
        }
        for (device, reason) in std::mem::take(&mut self.unwritten.quarantines) {
            if self.devices.get(&device).is_some_and(|d| d.quarantine.as_ref() == Some(&reason)) {
                self.quarantine_for(&device, reason).await;
            }
        }
        let now = self.clock.now_ms();
        let devices = &self.devices;
        let record = |id: &str| devices.get(id).map(|d| device_record(&d.worker, &d.info, d.hello.as_deref(), now));
        self.unwritten.write_devices(&self.store, record).await;
        let ids: Vec<String> =
            self.runs.iter().filter(|(_, r)| r.finished.is_none()).map(|(id, _)| id.clone()).collect();
        for id in ids {
            self.finish_run_if_done(&id).await;
        }
    }
}

fn manifest_json(manifest: &RunManifest) -> String {
    serde_json::to_string(manifest).expect("a manifest is plain data")
}

fn message(kind: coordinator_message::Kind) -> grpc::CoordinatorMessage {
    grpc::CoordinatorMessage { kind: Some(kind) }
}
