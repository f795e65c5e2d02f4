//! A worker: one driver per device slot, and one gRPC stream to the
//! coordinator over which it reports its devices and runs the attempts it is
//! leased. The drivers stay up while the coordinator is away; the stream is
//! dialed again with backoff.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_cases::runner::{RunContext, run_attempt_with};
use argus_cases::{Case, CasesConfig, parse_case};
use argus_proto::auth::Bearer;
use argus_proto::grpc::{self, coordinator_message, worker_message, workers_client::WorkersClient};
use argus_proto::run::StepStatus;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::driver::{Driver, DriverConfig, DriverEvent, ListenError};

pub use crate::slots::{Hooks, SlotConfig, WorkerFile};

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
        }));
    }
    let slots = Arc::new(slots);
    let mut backoff = Duration::from_millis(100);
    loop {
        let linked = tokio::select! {
            _ = cancel.cancelled() => break,
            linked = link(&config, &slots, &cancel) => linked,
        };
        match linked {
            Ok(()) => break,
            Err(error) => {
                warn!(coordinator = %config.coordinator, %error, retry_ms = backoff.as_millis() as u64, "no link to the coordinator; the drivers keep serving");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
    for slot in slots.iter() {
        slot.driver.close().await;
    }
    Ok(())
}

/// One stream to the coordinator, until it ends (an error) or `cancel` (Ok).
async fn link(config: &WorkerConfig, slots: &Arc<Vec<Arc<Slot>>>, cancel: &CancellationToken) -> Result<(), String> {
    let channel = argus_proto::connect::connect(&config.coordinator, config.tls_ca.as_deref()).await?;
    let mut client = WorkersClient::with_interceptor(channel, Bearer::new(config.token.as_deref())?);
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
    out.send(send(worker_message::Kind::Register(register))).await.map_err(|e| e.to_string())?;
    let mut inbound =
        client.link(ReceiverStream::new(outbound)).await.map_err(|e| e.message().to_owned())?.into_inner();
    let (changed_tx, mut changed) = mpsc::channel::<usize>(256);
    let link_cancel = cancel.child_token();
    let _stop_watchers = link_cancel.clone().drop_guard();
    for (index, mut rx) in events.drain(..).enumerate() {
        let changed_tx = changed_tx.clone();
        let stop = link_cancel.clone();
        tokio::spawn(async move {
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
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let parsed: Arc<ParsedFiles> = Arc::default();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(5));
    // What the coordinator was last told of each device; a change that no
    // event announced (an attempt of an earlier link ending) is caught here.
    let mut told: Vec<grpc::Device> = slots.iter().map(|s| s.device()).collect();
    let mut refresh = tokio::time::interval(Duration::from_secs(1));
    let mut draining = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => {
                let _ = out.send(send(worker_message::Kind::GoingAway(grpc::GoingAway { reason: "the worker is stopping".into() }))).await;
                return Ok(());
            }
            Some(index) = changed.recv() => {
                let device = slots[index].device();
                told[index] = device.clone();
                out.send(send(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) }))).await.map_err(|e| e.to_string())?;
            }
            _ = refresh.tick() => {
                for (index, slot) in slots.iter().enumerate() {
                    let device = slot.device();
                    if device != told[index] {
                        told[index] = device.clone();
                        out.send(send(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) }))).await.map_err(|e| e.to_string())?;
                    }
                }
            }
            _ = heartbeat.tick() => {
                let lease_ids: Vec<String> = running.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
                out.send(send(worker_message::Kind::Heartbeat(grpc::Heartbeat { lease_ids }))).await.map_err(|e| e.to_string())?;
            }
            message = inbound.message() => {
                let message = message.map_err(|e| e.message().to_owned())?.ok_or("the coordinator ended the stream")?;
                match message.kind {
                    Some(coordinator_message::Kind::Registered(registered)) => {
                        info!(worker = %registered.worker_id, "registered with the coordinator");
                    }
                    Some(coordinator_message::Kind::Lease(lease)) if !draining => {
                        let Some(slot) = slots.iter().find(|s| s.config.name == lease.slot).cloned() else {
                            warn!(slot = %lease.slot, "lease for a slot this worker does not have");
                            continue;
                        };
                        running.lock().unwrap_or_else(|p| p.into_inner()).insert(lease.lease_id.clone());
                        let (out, running, index) = (out.clone(), running.clone(), slots.iter().position(|s| Arc::ptr_eq(s, &slot)).unwrap_or(0));
                        let (changed_tx, parsed) = (changed_tx.clone(), parsed.clone());
                        tokio::spawn(async move {
                            *slot.busy.lock().unwrap_or_else(|p| p.into_inner()) = true;
                            let _ = changed_tx.send(index).await;
                            let span = tracing::info_span!("attempt", run = %lease.run_id, case = %lease.case_id, attempt = lease.attempt, slot = %slot.config.name, trace_context = tracing::field::Empty);
                            argus_proto::trace::set_parent(&span, &lease.traceparent);
                            let (steps, lease_id) = (out.clone(), lease.lease_id.clone());
                            let on_step = move |index: usize, step: &argus_proto::run::RunStep| {
                                let step = grpc::StepResult {
                                    lease_id: lease_id.clone(),
                                    index: index as u32,
                                    run_step_json: serde_json::to_string(step).unwrap_or_default(),
                                };
                                let _ = steps.try_send(grpc::WorkerMessage { kind: Some(worker_message::Kind::Step(step)) });
                            };
                            let result = tracing::Instrument::instrument(run_lease(&slot, &lease, &parsed, on_step), span).await;
                            *slot.busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
                            running.lock().unwrap_or_else(|p| p.into_inner()).remove(&lease.lease_id);
                            let _ = out.send(grpc::WorkerMessage { kind: Some(worker_message::Kind::Attempt(result)) }).await;
                            let _ = changed_tx.send(index).await;
                        });
                    }
                    Some(coordinator_message::Kind::Lease(lease)) => {
                        warn!(lease = %lease.lease_id, "draining: lease not taken");
                    }
                    Some(coordinator_message::Kind::Drain(drain)) => {
                        info!(reason = %drain.reason, "draining: current attempts finish, no new ones start");
                        draining = true;
                    }
                    Some(coordinator_message::Kind::Cancel(_)) | Some(coordinator_message::Kind::Keepalive(_)) | None => {}
                }
            }
        }
    }
}

/// Errors that mean the device, not the case, failed.
const INFRASTRUCTURE: [&str; 3] = ["No app attached", "App disconnected mid-call", "Agent server closed"];

/// Case files parsed once per run: every lease of a file carries its text,
/// and a matrix of hundreds of cases must not be expanded for each one (nor
/// by each of the first leases that arrive together).
#[derive(Default)]
struct ParsedFiles(Mutex<HashMap<RunFile, Arc<ParsedFile>>>);

/// A run's id and a case file's path.
type RunFile = (String, String);
type ParsedFile = tokio::sync::OnceCell<Result<Vec<Case>, String>>;

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
            .get_or_init(|| async { parse_case(&lease.case_source, &lease.case_file).map_err(|e| e.to_string()) })
            .await;
        parsed
            .as_ref()
            .map_err(Clone::clone)?
            .iter()
            .find(|c| c.id == lease.case_id)
            .cloned()
            .ok_or_else(|| format!("{}: no case {} in it", lease.case_file, lease.case_id))
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

/// Runs one leased attempt on its slot's driver.
async fn run_lease(
    slot: &Slot,
    lease: &grpc::Lease,
    parsed: &ParsedFiles,
    on_step: impl FnMut(usize, &argus_proto::run::RunStep),
) -> grpc::AttemptResult {
    let infra = |error: String| grpc::AttemptResult {
        lease_id: lease.lease_id.clone(),
        run_case_json: String::new(),
        infrastructure_failure: true,
        error,
        lease_to_first_call_us: 0,
    };
    let case = match parsed.case(lease).await {
        Ok(case) => case,
        Err(error) => return infra(error),
    };
    let config_value: serde_json::Value = serde_json::from_str(&lease.config_json).unwrap_or_default();
    let config = match CasesConfig::from_json(&config_value, Path::new(".")) {
        Ok(config) => config,
        Err(error) => return infra(error.to_string()),
    };
    // Fixtures run where the suite lives; a worker does not have them.
    let context = RunContext {
        config: CasesConfig { fixtures: None, ..config },
        fixtures: None,
        collect_events: true,
        keep_going: false,
    };
    let driver = slot.driver.as_ref();
    let lease_to_first_call_us = unix_us() - lease.granted_unix_us;
    if let Err(error) = driver.call("reset", None, Duration::from_secs(20)).await
        && error.code().is_none_or(|c| c != "timeout")
        && INFRASTRUCTURE.iter().any(|m| error.to_string().starts_with(m))
    {
        return infra(format!("reset: {error}"));
    }
    let placeholders = slot.config.placeholders(&lease.case_id, lease.attempt);
    hand_trace_context(driver).await;
    if let Some(before) = &slot.config.hooks.before
        && let Err(error) = crate::slots::run_hook("before", before, &placeholders).await
    {
        return infra(error);
    }
    let attempt = run_attempt_with(driver, &case, lease.attempt, &context, on_step).await;
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
    grpc::AttemptResult {
        lease_id: lease.lease_id.clone(),
        run_case_json: attempt.to_line(),
        infrastructure_failure: lost.is_some(),
        error: lost.unwrap_or_default(),
        lease_to_first_call_us,
    }
}

fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}
