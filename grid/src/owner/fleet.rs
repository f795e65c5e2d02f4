//! The fleet: workers joining and leaving, their devices' state, drains
//! and quarantines (recorded first, so that they outlive reconnects and
//! restarts), liveness, and what the fleet page and the gauges show.

use super::*;

impl Owner {
    pub(super) fn is_current(&self, link: &Link) -> bool {
        self.workers.get(&link.worker).is_some_and(|w| w.conn == link.conn)
    }

    /// Drains a worker (it finishes what it runs and is leased no more) or
    /// lets it take work again; recorded first, so that it outlives
    /// reconnects and restarts.
    pub(super) async fn drain(&mut self, worker: &str, drain: bool) -> Result<(), CoreError> {
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
    pub(super) async fn set_quarantine(&mut self, device: &str, reason: Option<String>) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        // What webhooks are told, kept with the quarantine.
        let event = reason.as_ref().map(|reason| {
            let platform = self.devices.get(device).map(|d| d.info.platform.clone()).unwrap_or_default();
            let device = crate::events::QuarantinedDevice { id: device.to_owned(), platform, reason: reason.clone() };
            crate::events::store_event(now, crate::events::Happened::DeviceQuarantined { device })
        });
        self.store.set_quarantine(device, reason.as_deref(), now, event.as_ref()).await?;
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
    pub(super) async fn quarantine_for(&mut self, device: &str, reason: String) {
        if let Err(error) = self.set_quarantine(device, Some(reason.clone())).await {
            warn!(%error, device, "cannot record a quarantine; trying again");
            if let Some(d) = self.devices.get_mut(device) {
                d.quarantine = Some(reason.clone());
                d.caps.quarantined = true;
            }
            self.unwritten.quarantines.push((device.to_owned(), reason));
        }
    }

    /// A worker's stream opens. Its name is its identity: a stream under a
    /// name that is still registered replaces the old one (a worker that
    /// dialed again after a network blip), whose leases are taken back. What
    /// operators decided (drain, quarantines) comes back from the store.
    pub(super) async fn join(&mut self, register: grpc::Register, tx: WorkerTx) -> Result<Link, CoreError> {
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
        let now = self.clock.now_ms();
        let record = WorkerRecord {
            id: id.clone(),
            hostname: register.hostname.clone(),
            connected: true,
            draining: memory.draining,
            last_seen: now,
        };
        self.store.upsert_worker(&record).await?;
        // Without their hellos, which are read once below: the devices are
        // written again with them at the next flush.
        let devices: Vec<DeviceRecord> = register.devices.iter().map(|d| device_record(&id, d, None, now)).collect();
        self.store.upsert_devices(&devices).await?;
        self.next_worker += 1;
        let conn = self.next_worker;
        info!(worker = %id, devices = register.devices.len(), hostname = %register.hostname, draining = memory.draining, "worker joined");
        self.workers.insert(
            id.clone(),
            Worker { id: id.clone(), conn, hostname: register.hostname, tx, draining: memory.draining, last_seen: now },
        );
        for device in register.devices {
            self.unwritten.devices.insert(format!("{id}/{}", device.slot));
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

    pub(super) fn update_device(&mut self, worker: &str, info: grpc::Device) {
        let id = format!("{worker}/{}", info.slot);
        // The one place a device's hello is read: a worker's update.
        let (hello, unreadable) = match serde_json::from_str::<Hello>(&info.hello_json) {
            Ok(hello) => (Some(Arc::new(hello)), None),
            Err(_) if info.hello_json.is_empty() => (None, None),
            Err(error) => (None, Some(format!("the worker sent a hello that does not parse: {error}"))),
        };
        let app = hello.as_ref().and_then(|h| h.app_name()).map(str::to_owned);
        let said = hello.as_ref().map(|h| h.platform.clone()).filter(|p| !p.is_empty());
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
            hello: None,
            caps: Capabilities::default(),
            lease: None,
            session: None,
            quarantine: None,
            suspicion: Suspicion::default(),
            state_since: self.clock.now_ms(),
            mismatch: None,
        });
        if entry.info.state != info.state {
            entry.state_since = self.clock.now_ms();
        }
        if mismatch.is_some() && entry.mismatch != mismatch {
            warn!(device = %id, problem = mismatch.as_deref().unwrap_or_default(), "device takes no work");
        }
        entry.mismatch = mismatch;
        entry.caps = Capabilities {
            platform,
            labels,
            app,
            app_ids: Capabilities::app_ids_of(hello.as_ref().and_then(|h| h.app.as_ref())),
            id: id.clone(),
            slot: info.slot.clone(),
            udid: info.udid.clone(),
            serial: info.serial.clone(),
            quarantined: entry.quarantine.is_some() || entry.mismatch.is_some(),
        };
        if entry.info != info {
            self.unwritten.devices.insert(id.clone());
        }
        entry.info = info;
        entry.hello = hello;
        entry.worker = worker.to_owned();
    }

    pub(super) async fn on_worker_message(&mut self, worker: &str, message: grpc::WorkerMessage) {
        use argus_proto::grpc::worker_message::Kind;
        let Some(w) = self.workers.get_mut(worker) else {
            // A link already taken for gone (silent too long, replaced): what
            // it still says is about devices and leases it no longer has.
            return;
        };
        w.last_seen = self.clock.now_ms();
        match message.kind {
            Some(Kind::Device(update)) => {
                if let Some(device) = update.device {
                    self.update_device(worker, device);
                    self.dispatch_due = true;
                }
            }
            Some(Kind::Heartbeat(beat)) => {
                let deadline = Instant::now() + self.config.lease_ttl;
                for id in &beat.lease_ids {
                    if let Some(lease) = self.leases.get_mut(id)
                        && lease.worker == worker
                    {
                        lease.deadline = deadline;
                        self.unwritten.heartbeats.insert(id.clone());
                    }
                }
            }
            Some(Kind::Attempt(result)) => self.attempts_finished(vec![(worker.to_owned(), result)]).await,
            Some(Kind::GoingAway(_)) => self.worker_gone(worker).await,
            // Not an operator's drain (nothing is stored): the worker takes
            // no new work while its running attempts finish.
            Some(Kind::Stopping(_)) => {
                if let Some(w) = self.workers.get_mut(worker) {
                    w.draining = true;
                }
                info!(worker, "worker stopping; it is leased nothing more");
            }
            Some(Kind::Step(step)) => {
                let Some(lease) = self.leases.get(&step.lease_id).filter(|l| l.worker == worker) else { return };
                let step_lease = lease.id.clone();
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
                        run.live_steps.entry(step_lease).or_default().push(step.clone());
                    }
                    run.publish(update);
                }
            }
            // Project calls go to the relay, files to the artifact store and
            // live screens to the live view before they reach the owner task.
            Some(
                Kind::Register(_) | Kind::ProjectCall(_) | Kind::Artifact(_) | Kind::DeviceAnswer(_) | Kind::Live(_),
            )
            | None => {}
        }
    }

    pub(super) async fn worker_gone(&mut self, worker: &str) {
        if self.workers.remove(worker).is_none() {
            return;
        }
        info!(worker, "worker gone");
        let leases: Vec<String> = self.leases.values().filter(|l| l.worker == worker).map(|l| l.id.clone()).collect();
        for lease in leases {
            self.take_back(&lease, "the worker went away").await;
        }
        self.sessions_of_gone_worker(worker);
        self.devices.retain(|_, d| d.worker != worker);
        // What the fleet page shows; what operators decided stays as it is.
        if let Err(error) = self.store.worker_disconnected(worker, self.clock.now_ms()).await {
            warn!(%error, worker, "cannot record that a worker went away");
        }
        self.dispatch_due = true;
    }

    pub(super) fn device_ref(&self, device: &str) -> grpc::DeviceRef {
        match self.devices.get(device) {
            Some(d) => {
                grpc::DeviceRef { id: d.id.clone(), platform: d.caps.platform.clone(), worker: d.worker.clone() }
            }
            None => grpc::DeviceRef { id: device.to_owned(), ..Default::default() },
        }
    }

    /// Keeps each worker's stream alive with a keepalive, and takes for gone
    /// a worker that has said nothing for `worker_silence` (frozen, or on a
    /// half-open connection): its devices leave the fleet and its attempts
    /// run again, without waiting for their leases to expire.
    pub(super) async fn check_workers(&mut self) {
        let now = self.clock.now_ms();
        let beat = now - self.keepalive_at >= self.config.heartbeat.as_millis() as i64;
        if beat {
            self.keepalive_at = now;
        }
        let keepalive = grpc::Keepalive { now_unix_ms: now };
        let mut silent = Vec::new();
        for worker in self.workers.values() {
            if now - worker.last_seen > self.config.worker_silence.as_millis() as i64 {
                silent.push(worker.id.clone());
            } else if beat {
                let _ = worker.tx.try_send(Ok(message(coordinator_message::Kind::Keepalive(keepalive))));
            }
        }
        for worker in silent {
            warn!(worker = %worker, silent_s = self.config.worker_silence.as_secs(), "worker silent; taken for gone");
            self.worker_gone(&worker).await;
        }
    }

    pub(super) fn admit(&self, selector: &Selector) -> Result<(), CoreError> {
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

    pub(super) fn fleet_summary(&self) -> String {
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

    /// A device's state, in one place: what keeps it from work first,
    /// then what it does, then whether its app is there.
    pub(super) fn availability(&self, d: &Device) -> Availability {
        let granting = self.granting.as_ref().is_some_and(|g| g.devices.contains(&d.id));
        let leased = d.lease.is_some() || granting || self.unwritten.grants_device(&d.id);
        self.availability_as(d, leased, d.info.state)
    }

    /// A device's state once the result its worker just sent is written:
    /// its lease is over, and the busy its worker said is over too (the
    /// worker clears it before it sends the result, and says so after).
    pub(super) fn availability_after_result(&self, d: &Device) -> Availability {
        let state =
            if d.info.state == grpc::DeviceState::Busy as i32 { grpc::DeviceState::Idle as i32 } else { d.info.state };
        self.availability_as(d, false, state)
    }

    /// A device's state were it `leased` and its worker's word `state`.
    fn availability_as(&self, d: &Device, leased: bool, state: i32) -> Availability {
        let attached = |state: i32| state == grpc::DeviceState::Idle as i32 || state == grpc::DeviceState::Busy as i32;
        if let Some(reason) = &d.quarantine {
            Availability::Quarantined(reason.clone())
        } else if let Some(problem) = &d.mismatch {
            Availability::Mismatched(problem.clone())
        } else if self.workers.get(&d.worker).is_none_or(|w| w.draining) {
            Availability::Draining
        } else if d.session.is_some() {
            Availability::Held
        } else if leased {
            // Its app may be away in the attempt's own `before` hook (a
            // relaunch per attempt): it will be free again.
            Availability::Busy
        } else if !d.info.app_problem.is_empty() && !attached(state) {
            Availability::AppProblem(d.info.app_problem.clone())
        } else if state == grpc::DeviceState::Waiting as i32 {
            Availability::NoApp
        } else if state == grpc::DeviceState::Disconnected as i32 {
            Availability::Disconnected
        } else if state == grpc::DeviceState::Busy as i32 {
            // Its worker says so, though no lease of this coordinator is
            // on it (one taken back, whose attempt is still ending).
            Availability::Busy
        } else if state == grpc::DeviceState::Idle as i32 {
            Availability::Idle
        } else {
            // A state this coordinator does not know: no app it can use.
            Availability::NoApp
        }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let going = self.runs.values().filter(|r| r.finished.is_none());
        let mut queued: HashMap<&str, i64> = going.map(|r| (r.id.as_str(), 0)).collect();
        for (run, waiting) in self.pending.per_run() {
            *queued.entry(run).or_default() += waiting as i64;
        }
        let mut devices: HashMap<String, i64> = HashMap::new();
        for device in self.devices.values() {
            *devices.entry(self.availability(device).name().to_owned()).or_default() += 1;
        }
        let mut queued: Vec<(String, i64)> = queued.into_iter().map(|(id, n)| (id.to_owned(), n)).collect();
        queued.sort();
        let mut devices: Vec<(String, i64)> = devices.into_iter().collect();
        devices.sort();
        Snapshot { queued, leases: self.leases.len() as i64, devices }
    }

    pub(super) fn fleet(&self) -> grpc::ListFleetResponse {
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
                state: self.availability(d).name().to_owned(),
                state_reason: self.availability(d).reason().unwrap_or_default().to_owned(),
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
                session: d.session.clone().unwrap_or_default(),
                state_since_unix_ms: d.state_since,
                problem: d.mismatch.clone().unwrap_or_default(),
                app_name: d.hello.as_ref().and_then(|h| h.app_name()).unwrap_or_default().to_owned(),
                app_version: d.hello.as_ref().and_then(|h| h.app_version()).unwrap_or_default().to_owned(),
                agent_version: d.hello.as_ref().and_then(|h| h.agent_version.clone()).unwrap_or_default(),
            })
            .collect();
        devices.sort_by(|a, b| a.id.cmp(&b.id));
        grpc::ListFleetResponse { workers, devices }
    }
}

/// What is wrong with a worker's name: it is the first part of every one of
/// its device ids (`name/slot`), shown everywhere.
pub(super) fn name_problem(name: &str) -> Option<&'static str> {
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
pub(super) fn device_record(worker: &str, info: &grpc::Device, hello: Option<&Hello>, now: i64) -> DeviceRecord {
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
