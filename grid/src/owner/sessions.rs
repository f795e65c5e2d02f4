//! WebDriver sessions as the owner task sees them: a session holds a device
//! the way a lease does (no attempt is leased to it), is granted by the same
//! dispatch in fair share with the runs, waits in a queue when no matching
//! device is free, and is freed on `DELETE`, after its idle timeout, or
//! when its worker goes away.

use std::sync::atomic::{AtomicI64, Ordering};

use super::*;
use crate::matching::Wants;
use crate::scheduler::session_goes_first;

/// How long a session's device may be without its app before the session
/// ends: longer than an app takes to relaunch and dial again.
pub const DEVICE_LOST: Duration = Duration::from_secs(15);

/// A new session's request for a device.
pub struct SessionAsk {
    pub id: String,
    /// The client's capability sets in its order; a device any of them
    /// accepts will do.
    pub candidates: Vec<Wants>,
    pub wait: Duration,
    pub idle: Duration,
    /// When the session was last used (epoch ms), kept by the HTTP side.
    pub last_used: Arc<AtomicI64>,
}

/// The device a session holds, as the owner task granted it.
#[derive(Clone)]
pub struct Grant {
    pub device: String,
    pub worker: String,
    pub slot: String,
    pub platform: String,
    pub udid: String,
    pub model: String,
    /// The worker's link, for the session's calls ([`crate::calls`]).
    pub tx: WorkerTx,
    /// The app's hello, as the worker last reported it.
    pub hello: Option<Arc<Hello>>,
    /// Why the owner task ended the session, once it has (its worker went
    /// away, its device was lost, its idle timeout): the holder of the
    /// grant hears of it here. Closed, without a reason, when the session
    /// ended at its client's request or the coordinator stops.
    pub ended: tokio::sync::watch::Receiver<Option<String>>,
}

/// The device granted, and which capability set it matched.
pub struct Granted {
    pub grant: Grant,
    pub matched: usize,
}

pub(super) struct Waiting {
    ask: SessionAsk,
    reply: oneshot::Sender<Result<Granted, CoreError>>,
    deadline: Instant,
}

pub(super) struct Holding {
    device: String,
    worker: String,
    idle: Duration,
    last_used: Arc<AtomicI64>,
    /// Tells the grant's holder why the owner task ended the session.
    ended: tokio::sync::watch::Sender<Option<String>>,
}

/// Which of `candidates` accepts `device`, first first.
fn matching(device: &Device, candidates: &[Wants]) -> Option<usize> {
    candidates.iter().position(|wants| wants.accepts(&device.caps))
}

impl Owner {
    /// A new session: refused at once when no device of the fleet could
    /// ever take it, else queued until the dispatch grants it a device.
    pub(super) fn open_session(&mut self, ask: SessionAsk, reply: oneshot::Sender<Result<Granted, CoreError>>) {
        let possible = self
            .devices
            .values()
            .any(|d| d.mismatch.is_none() && d.quarantine.is_none() && matching(d, &ask.candidates).is_some());
        if !possible {
            let _ = reply.send(Err(CoreError::NoDevice(format!(
                "no device of the grid matches {}; the fleet: {}",
                describe(&ask.candidates),
                self.fleet_summary()
            ))));
            return;
        }
        let deadline = Instant::now() + ask.wait;
        self.session_queue.push(Waiting { ask, reply, deadline });
        self.dispatch_due = true;
    }

    /// Frees the device of session `id`; `ended` tells the HTTP side why
    /// when the owner task ended it itself.
    pub(super) fn close_session(&mut self, id: &str, why: &str, tell: bool) {
        let Some(holding) = self.sessions.remove(id) else { return };
        if let Some(device) = self.devices.get_mut(&holding.device)
            && device.session.as_deref() == Some(id)
        {
            device.session = None;
        }
        if tell {
            let _ = holding.ended.send(Some(why.to_owned()));
        }
        info!(session = id, device = %holding.device, reason = why, "session ended");
        self.metrics.sessions_ended(if tell { "grid" } else { "client" });
        self.dispatch_due = true;
    }

    /// Sessions whose worker went away end with it.
    pub(super) fn sessions_of_gone_worker(&mut self, worker: &str) {
        let ended: Vec<String> =
            self.sessions.iter().filter(|(_, h)| h.worker == worker).map(|(id, _)| id.clone()).collect();
        for id in ended {
            self.close_session(&id, &format!("its worker {worker} went away"), true);
        }
    }

    /// At each sweep: requests that waited too long are refused, sessions
    /// idle past their timeout are ended.
    pub(super) fn sweep_sessions(&mut self) {
        let now = Instant::now();
        let (expired, waiting): (Vec<Waiting>, Vec<Waiting>) =
            std::mem::take(&mut self.session_queue).into_iter().partition(|w| w.deadline <= now || w.reply.is_closed());
        self.session_queue = waiting;
        for waited in expired {
            let message = format!(
                "no device matching {} came free within {} s (lynkeus:queueTimeoutMs); the fleet: {}",
                describe(&waited.ask.candidates),
                waited.ask.wait.as_secs_f64(),
                self.fleet_summary()
            );
            let _ = waited.reply.send(Err(CoreError::NoDevice(message)));
        }
        let now_ms = self.clock.now_ms();
        // A device whose app has been gone past the grace takes its session
        // with it: the client's commands would only fail.
        let lost: Vec<(String, String)> = self
            .sessions
            .iter()
            .filter_map(|(id, h)| {
                let lost = self.config.device_lost;
                let why = match self.devices.get(&h.device) {
                    None => format!("its device {} left the fleet", h.device),
                    Some(d)
                        if d.info.state != grpc::DeviceState::Idle as i32
                            && d.info.state != grpc::DeviceState::Busy as i32
                            && now_ms - d.state_since > lost.as_millis() as i64 =>
                    {
                        format!("the app of its device {} has been gone for {} s", h.device, lost.as_secs())
                    }
                    Some(_) => return None,
                };
                Some((id.clone(), why))
            })
            .collect();
        for (id, why) in lost {
            self.close_session(&id, &why, true);
        }
        let idle: Vec<(String, Duration)> = self
            .sessions
            .iter()
            .filter(|(_, h)| now_ms - h.last_used.load(Ordering::Relaxed) > h.idle.as_millis() as i64)
            .map(|(id, h)| (id.clone(), h.idle))
            .collect();
        for (id, after) in idle {
            let why = format!("no command for {} s (lynkeus:idleTimeoutMs)", after.as_secs());
            self.close_session(&id, &why, true);
        }
    }

    /// Grants waiting sessions the free devices they match, in the order
    /// they asked, in fair share with the runs that want the same devices.
    pub(super) fn grant_sessions(&mut self, idle: &mut Vec<String>, shares: &HashMap<String, Share>) {
        if self.session_queue.is_empty() {
            return;
        }
        let wanting: std::collections::HashSet<&str> = self.pending.per_run().map(|(run, _)| run).collect();
        let mut granted: Vec<(usize, String, usize)> = Vec::new();
        let mut taken = std::collections::HashSet::new();
        let mut running = self.sessions.len();
        for (n, waiting) in self.session_queue.iter().enumerate() {
            let offer = idle.iter().filter(|d| !taken.contains(*d)).find_map(|id| {
                let device = self.devices.get(id)?;
                let matched = matching(device, &waiting.ask.candidates)?;
                let competing = self
                    .runs
                    .values()
                    .filter(|r| wanting.contains(r.id.as_str()) && r.selector.is_satisfied_by(&device.caps))
                    .filter_map(|r| shares.get(&r.id).copied());
                session_goes_first(running, competing).then(|| (id.clone(), matched))
            });
            if let Some((device, matched)) = offer {
                taken.insert(device.clone());
                granted.push((n, device, matched));
                running += 1;
            }
        }
        idle.retain(|d| !taken.contains(d));
        for (n, device_id, matched) in granted.into_iter().rev() {
            let waiting = self.session_queue.remove(n);
            let Some(device) = self.devices.get(&device_id) else { continue };
            let Some(worker) = self.workers.get(&device.worker) else { continue };
            let (ended, ended_rx) = tokio::sync::watch::channel(None);
            let grant = Grant {
                device: device_id.clone(),
                worker: device.worker.clone(),
                slot: device.info.slot.clone(),
                platform: device.caps.platform.clone(),
                udid: if device.info.udid.is_empty() { device.info.serial.clone() } else { device.info.udid.clone() },
                model: device.info.labels.get("model").cloned().unwrap_or_default(),
                tx: worker.tx.clone(),
                hello: device.hello.clone(),
                ended: ended_rx,
            };
            let id = waiting.ask.id.clone();
            let holding = Holding {
                device: device_id.clone(),
                worker: grant.worker.clone(),
                idle: waiting.ask.idle,
                last_used: waiting.ask.last_used.clone(),
                ended,
            };
            waiting.ask.last_used.store(self.clock.now_ms(), Ordering::Relaxed);
            if waiting.reply.send(Ok(Granted { grant, matched })).is_ok() {
                info!(session = %id, device = %device_id, "session holds a device");
                self.sessions.insert(id.clone(), holding);
                if let Some(device) = self.devices.get_mut(&device_id) {
                    device.session = Some(id);
                }
                self.metrics.sessions_started.inc();
            } else {
                // The client went away while it waited: the device stays free.
                idle.push(device_id);
            }
        }
    }
}

fn describe(candidates: &[Wants]) -> String {
    candidates.iter().map(Wants::describe).collect::<Vec<_>>().join(" or ")
}
