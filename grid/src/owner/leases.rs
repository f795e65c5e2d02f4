//! Leases: idle devices handed attempts (committed before they are sent),
//! leases taken back, and attempt results recorded in one transaction per
//! burst with the next leases of the devices they free, then followed by
//! what [`crate::policy`] decided.

use super::*;
use argus_proto::verdict::BadVerdict;

impl Owner {
    /// A lease the coordinator ends itself: the attempt is an infrastructure
    /// failure and runs again, without using the retry budget. When the
    /// store cannot be told, the lease stays (and its device with it) and
    /// the sweep tries again: nothing is forgotten on an error.
    pub(super) async fn take_back(&mut self, lease_id: &str, reason: &str) {
        if self.finishing.contains(lease_id) {
            // Its result is being written: the store's answer ends it.
            return;
        }
        let Some(mut lease) = self.leases.remove(lease_id) else { return };
        let (reason, seq) = match lease.revoking.clone() {
            Some(revoking) => revoking,
            None => (reason.to_owned(), self.runs.get_mut(&lease.run_id).map_or(0, Run::take_seq)),
        };
        let revoked = match self.store.revoke_lease(lease_id, &reason, self.clock.now_ms(), seq as i64).await {
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
            run.live_steps.remove(lease_id);
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
    /// burst's ([`Owner::flush`]), then offered to devices.
    pub(super) fn queue(&mut self, key: Key, avoid_device: Option<String>) {
        self.unwritten.tries.push((key, avoid_device));
    }

    /// Hands each idle device its next attempt (longest expected first, in
    /// fair share): decides them all and commits every lease in one
    /// transaction, which runs while the owner records the next burst's
    /// results (one dispatch's leases at a time); [`Owner::granted`] sends
    /// them once committed.
    pub(super) async fn dispatch(&mut self) {
        if self.granting.is_some() {
            // Devices freed meanwhile wait for the leases in flight.
            return;
        }
        self.dispatch_due = false;
        if self.pending.is_empty() && self.session_queue.is_empty() {
            return;
        }
        let mut idle: Vec<String> = self
            .devices
            .values()
            .filter(|d| matches!(self.availability(d), Availability::Idle))
            .map(|d| d.id.clone())
            .collect();
        idle.sort();
        let mut shares = self.shares();
        // Waiting WebDriver sessions take their fair share first.
        self.grant_sessions(&mut idle, &shares);
        idle.sort();
        let planned = self.plan(idle, &mut shares);
        if planned.is_empty() {
            return;
        }
        self.grant(planned);
    }

    /// Commits `planned` on a connection of its own while the owner goes on
    /// with the next burst's results: the devices stay out of every
    /// dispatch until [`Owner::granted`] sends the leases.
    fn grant(&mut self, planned: Vec<(Pending<Key>, NewLease)>) {
        let leases: Vec<NewLease> = planned.iter().map(|(_, lease)| lease.clone()).collect();
        let store = self.store.clone();
        let task = argus_proto::task::spawn("grant", async move { store.grant_leases(&leases).await });
        self.granting =
            Some(Granting { devices: planned.iter().map(|(_, l)| l.device_id.clone()).collect(), planned, task });
    }

    /// Writes again the leases whose commit's answer was lost, once the
    /// dispatch in flight (if any) has answered: those that committed then
    /// count as granted now, the others are granted now, and none is
    /// granted twice. An attempt whose run was cancelled meanwhile is
    /// refused and dropped; a lease whose device went away meanwhile is
    /// taken back once sent ([`Owner::send_lease`]), and its attempt runs
    /// again.
    pub(super) async fn regrant(&mut self) {
        if self.unwritten.grants.is_empty() {
            return;
        }
        self.settle_grant().await;
        let planned = std::mem::take(&mut self.unwritten.grants);
        self.grant(planned);
    }

    /// Each going run's share of the fleet: the leases it holds, but for
    /// those whose results are being written (their devices are about to
    /// be free), and those being committed (a dispatch's, those tried
    /// again, and those that follow results being written).
    fn shares(&self) -> HashMap<String, Share> {
        let mut shares: HashMap<String, Share> =
            self.runs.values().map(|r| (r.id.clone(), Share { priority: r.priority, running: 0 })).collect();
        let held = self.leases.values().filter(|l| !self.finishing.contains(&l.id)).map(|l| &l.run_id);
        let granting = self.granting.iter().flat_map(|g| g.planned.iter()).chain(self.unwritten.grants.iter());
        let granting = granting.map(|(_, lease)| &lease.run_id);
        let in_flight = self.recording.iter().flat_map(|r| r.chained.iter());
        let chained = in_flight.chain(self.unwritten.chained.iter()).map(|c| &c.lease.run_id);
        for run_id in held.chain(granting).chain(chained) {
            if let Some(share) = shares.get_mut(run_id) {
                share.running += 1;
            }
        }
        shares
    }

    /// Decides what each of `devices` runs next (longest expected first, in
    /// fair share), taking it from the queue and counting it in its run's
    /// share: the leases to commit before they are sent.
    fn plan(&mut self, devices: Vec<String>, shares: &mut HashMap<String, Share>) -> Vec<(Pending<Key>, NewLease)> {
        let selectors: HashMap<String, Selector> =
            self.runs.values().map(|r| (r.id.clone(), r.selector.clone())).collect();
        let mut planned: Vec<(Pending<Key>, NewLease)> = Vec::new();
        for device_id in devices {
            if self.pending.is_empty() {
                break;
            }
            let Some(caps) = self.devices.get(&device_id).map(|d| d.caps.clone()) else { continue };
            let Some(pending) = self.pending.next_for(&device_id, &caps, &selectors, shares) else {
                continue;
            };
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
        planned
    }

    /// The next attempt of each device a burst's results free, decided now
    /// so that its lease commits with the result ([`Store::finish_and_grant`]):
    /// one commit between two attempts on a device, not a result's then a
    /// lease's. Only a device whose attempt ran (an infrastructure failure
    /// may quarantine it) and that stays free to work; none while WebDriver
    /// sessions wait, which [`Owner::dispatch`] serves first.
    fn chain(&mut self, prepared: &[Finished]) -> Vec<Chained> {
        if self.pending.is_empty() || !self.session_queue.is_empty() {
            return Vec::new();
        }
        let mut after: HashMap<String, String> = HashMap::new();
        for finished in prepared.iter().filter(|f| f.case.is_some()) {
            let Some(lease) = self.leases.get(&finished.result.lease_id) else { continue };
            let free = self.devices.get(&lease.device).map(|d| self.availability_after_result(d));
            if matches!(free, Some(Availability::Idle)) {
                after.insert(lease.device.clone(), lease.id.clone());
            }
        }
        let mut devices: Vec<String> = after.keys().cloned().collect();
        devices.sort();
        let mut shares = self.shares();
        self.plan(devices, &mut shares)
            .into_iter()
            .filter_map(|(pending, lease)| {
                Some(Chained { after: after.get(&lease.device_id)?.clone(), pending, lease })
            })
            .collect()
    }

    /// The lease `device_id` would get for `key`. The owner task must not
    /// panic on a state it did not expect: a missing device, run or case
    /// leaves the attempt queued, with a log.
    pub(super) fn new_lease(&self, device_id: &str, key: &Key) -> Result<NewLease, CoreError> {
        let missing = |what: String| CoreError::Invalid(format!("cannot lease: {what}"));
        let device = self.devices.get(device_id).ok_or_else(|| missing(format!("no device {device_id}")))?;
        let run = self.runs.get(&key.run).ok_or_else(|| missing(format!("no run {}", key.run)))?;
        if !run.cases.contains_key(&key.case) {
            return Err(missing(format!("no case {} in run {}", key.case, key.run)));
        }
        let now = self.clock.now_ms();
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
            deadline: now + self.config.lease_ttl.as_millis() as i64,
        })
    }

    /// Sends a committed lease to its worker and tells the run's watchers.
    pub(super) async fn send_lease(&mut self, lease: NewLease, key: Key) {
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
                deadline: Instant::now() + self.config.lease_ttl,
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
                granted_unix_us: self.clock.now_us(),
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

    /// Records results, then acts on each: retry, requeue, finish the case
    /// and the run. A burst is written in one transaction, or in parts
    /// ([`in_flight::part_size`]): results come back in a wave after a big
    /// commit, and one transaction holding most of the fleet kept one
    /// database core busy while the others' small ones left the rest idle
    /// (and every device of the big one waited for it).
    pub(super) async fn attempts_finished(&mut self, results: Vec<(String, grpc::AttemptResult)>) {
        if results.is_empty() {
            return;
        }
        let mut prepared: Vec<Finished> = results.into_iter().filter_map(|(w, r)| self.prepare_result(&w, r)).collect();
        let part = in_flight::part_size(self.devices.len());
        while prepared.len() > part {
            let rest = prepared.split_off(part);
            self.record_results(std::mem::replace(&mut prepared, rest), false, None).await;
        }
        self.record_results(prepared, false, None).await;
    }

    /// Writes prepared results, in a task of their own so that the owner
    /// takes the next burst meanwhile, and applies those the store took once
    /// it answers ([`Owner::recorded`]), in the order they were written. When
    /// the store fails they are kept, with their `seq`, and tried again at
    /// the next sweep (`again`): a result refused then as no longer current,
    /// whose lease this coordinator still holds, was committed by the try
    /// whose answer was lost (only this task ends leases), and is applied.
    pub(super) async fn record_results(&mut self, prepared: Vec<Finished>, again: bool, chained: Option<Vec<Chained>>) {
        if prepared.is_empty() {
            return;
        }
        if self.recording.len() >= MAX_RECORDING {
            self.settle_recording(1).await;
        }
        // A pass's step record goes to the records' writer, after its
        // result, when it has room ([`super::records`]).
        let mut permits = Vec::with_capacity(prepared.len());
        let outcomes: Vec<(String, AttemptOutcome)> = prepared
            .iter()
            .map(|f| {
                let mut outcome = f.outcome.clone();
                let passed = outcome.observed.is_some() && outcome.result.as_deref() == Some("passed");
                let permit = passed.then(|| self.records.clone().try_reserve_owned().ok()).flatten();
                if permit.is_some() {
                    outcome.observed = None;
                }
                permits.push(permit);
                (f.result.lease_id.clone(), outcome)
            })
            .collect();
        self.finishing.extend(prepared.iter().map(|f| f.result.lease_id.clone()));
        // A try again writes the same leases as its first try.
        let chained = chained.unwrap_or_else(|| self.chain(&prepared));
        let next: Vec<(String, NewLease)> = chained.iter().map(|c| (c.after.clone(), c.lease.clone())).collect();
        let store = self.store.clone();
        let task =
            argus_proto::task::spawn("record results", async move { store.finish_and_grant(&outcomes, &next).await });
        self.recording.push_back(Recording { prepared, permits, again, chained, task });
    }

    /// A result checked against its lease, with what the store records. A
    /// result whose verdict is missing or is for another attempt is an
    /// infrastructure failure that says so, not a default. The record is
    /// stored as the worker sent it; the verdict is what is judged.
    pub(super) fn prepare_result(&mut self, worker: &str, mut result: grpc::AttemptResult) -> Option<Finished> {
        let Some(lease) = self.leases.get(&result.lease_id).filter(|l| l.worker == worker && l.revoking.is_none())
        else {
            warn!(lease = %result.lease_id, worker, "result for a lease that is not current; refused");
            return None;
        };
        let device = self.device_ref(&lease.device);
        let (attempt, run_id) = (lease.attempt, lease.run_id.clone());
        let key = argus_store::AttemptKey {
            run_id: run_id.clone(),
            case_id: lease.case_id.clone(),
            attempt: i64::from(attempt),
            try_no: i64::from(lease.try_no),
        };
        let mut error = (!result.error.is_empty()).then(|| result.error.clone());
        let verdict = result.verdict.take().filter(|_| !result.infrastructure_failure);
        let mut case = None;
        if !result.infrastructure_failure {
            let checked = verdict.as_ref().ok_or(BadVerdict::Missing).and_then(|v| v.checked(&lease.case_id, attempt));
            match checked {
                Ok(result) => case = Some(result),
                Err(bad) => {
                    warn!(lease = %result.lease_id, error = %bad, "the worker's verdict cannot be taken; the attempt runs again");
                    error = Some(bad.to_string());
                }
            }
        }
        let verdict = verdict.filter(|_| case.is_some()).unwrap_or_default();
        let retries = self.runs.get(&run_id).map_or(0, |r| r.retries);
        let next = crate::policy::after_attempt(case, attempt, lease.try_no, retries);
        let seq = self.runs.get_mut(&run_id).map_or(0, Run::take_seq);
        // What the worker saw at each step, filed with the result.
        let observed = match (result.observed.take(), self.runs.get(&run_id), case) {
            (Some(observed), Some(run), Some(_)) => Some(Observed {
                project: run.project.clone(),
                branch: run.branch.clone(),
                commit: run.commit.clone(),
                platform: device.platform.clone(),
                device_id: device.id.clone(),
                worker_id: device.worker.clone(),
                body: prost::Message::encode_to_vec(&observed),
            }),
            _ => None,
        };
        let steps = verdict
            .steps
            .iter()
            .map(|s| StepRow {
                step: s.step.clone(),
                status: s.status().as_str().unwrap_or_default().to_owned(),
                ms: s.ms as i64,
                error: s.error.clone(),
            })
            .collect();
        let outcome = AttemptOutcome {
            result: case.map(|c| c.as_str().to_owned()),
            infrastructure: case.is_none(),
            error: error.clone(),
            finished_at: self.clock.now_ms(),
            ms: verdict.ms as i64,
            // Stored as it came: the record is never serialised again here.
            run_case_json: case.map(|_| std::mem::take(&mut result.run_case_json)),
            steps,
            seq: seq as i64,
            next_try: match next {
                Next::RunAgain { attempt, try_no, .. } => Some((attempt, try_no)),
                Next::Final(_) => None,
            },
            final_result: match next {
                Next::Final(result) => Some(result.as_str().to_owned()),
                Next::RunAgain { .. } => None,
            },
            observed,
            health: health_row(result.health.as_ref()),
        };
        result.verdict = Some(verdict);
        let result = grpc::AttemptResult { error: error.unwrap_or_default(), ..result };
        Some(Finished { key, result, case, outcome, seq, next })
    }

    pub(super) async fn apply_result(&mut self, finished: Finished) {
        let Finished { result, case, seq, next, outcome: written, .. } = finished;
        let Some(lease) = self.leases.remove(&result.lease_id) else { return };
        let (run_id, case_id, attempt, device_id) =
            (lease.run_id.clone(), lease.case_id.clone(), lease.attempt, lease.device.clone());
        let device = self.device_ref(&device_id);
        lease.span.record("result", case.map_or("infrastructure", CaseResult::as_str));
        if let Some(d) = self.devices.get_mut(&device_id) {
            d.lease = None;
        }
        if let Some(run) = self.runs.get_mut(&run_id) {
            run.live_steps.remove(&result.lease_id);
        }
        self.dispatch_due = true;
        let Some(case) = case else {
            let reason = if result.error.is_empty() { "the attempt could not run" } else { result.error.as_str() };
            warn!(case = %case_id, reason, "infrastructure failure; the attempt runs again");
            let quarantine = self
                .devices
                .get_mut(&device_id)
                .filter(|d| d.quarantine.is_none())
                .and_then(|d| d.suspicion.infrastructure_failure(reason));
            if let Some(reason) = quarantine {
                self.quarantine_for(&device_id, reason).await;
            }
            let reason = if result.error.is_empty() { "the attempt could not run" } else { result.error.as_str() };
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.publish(watch::taken_back(seq, &case_id, attempt, reason, device));
            }
            self.follow(&run_id, &case_id, next, Some(device_id)).await;
            return;
        };
        self.metrics.attempt(&device.platform, case.as_str(), written.ms);
        self.metrics.lease_to_first_call(result.lease_to_first_call_us);
        for (suspect, reason) in self.judge_device(&run_id, &case_id, case, &device_id) {
            self.quarantine_for(&suspect, reason).await;
        }
        let native = self.devices.get(&device_id).and_then(|d| d.hello.as_ref()).map(|hello| hello.native);
        if let Some(run) = self.runs.get_mut(&run_id) {
            // The record as the store took it.
            let json = written.run_case_json.unwrap_or_default();
            run.publish(watch::finished(seq, (&case_id, attempt), json, device.clone(), result.lease_to_first_call_us));
            if run.platform.is_none() {
                run.platform = Some(device.platform.clone());
                run.native = native;
            }
            run.add_outcome(Outcome {
                case_id: case_id.clone(),
                attempt,
                result: case,
                device: device.id,
                platform: device.platform,
            });
        }
        self.follow(&run_id, &case_id, next, Some(device_id)).await;
    }

    /// Applies what follows an attempt, which the store recorded with its
    /// result: the next try waits for a device (preferably another), or the
    /// case is done and the run may be over.
    pub(super) async fn follow(&mut self, run_id: &str, case_id: &str, next: Next, avoid: Option<String>) {
        match next {
            Next::RunAgain { attempt, try_no, kind } => {
                self.metrics.retried(kind.name());
                self.enqueue(Key { run: run_id.to_owned(), case: case_id.to_owned(), attempt, try_no }, avoid);
                self.dispatch_due = true;
            }
            Next::Final(_) => {
                if let Some(run) = self.runs.get_mut(run_id) {
                    run.case_done(case_id);
                }
                self.finish_run_if_done(run_id).await;
            }
        }
    }

    /// What a result says about devices: the device it ran on works; a pass
    /// after failures on other devices counts against each of them
    /// ([`Suspicion`]).
    pub(super) fn judge_device(
        &mut self,
        run_id: &str,
        case_id: &str,
        result: CaseResult,
        device_id: &str,
    ) -> Vec<(String, String)> {
        let passed = result == CaseResult::Passed;
        if let Some(d) = self.devices.get_mut(device_id) {
            d.suspicion.ran(passed);
        }
        let Some(run) = self.runs.get(run_id).filter(|_| passed) else { return Vec::new() };
        let failed_on = run.failed_on.get(case_id).map_or(&[][..], Vec::as_slice);
        let suspects: Vec<String> = failed_on.iter().filter(|d| *d != device_id).cloned().collect();
        let mut quarantines = Vec::new();
        for suspect in suspects {
            let Some(d) = self.devices.get_mut(&suspect) else { continue };
            if let Some(reason) = d.suspicion.passed_elsewhere(case_id)
                && d.quarantine.is_none()
            {
                quarantines.push((d.id.clone(), reason));
            }
        }
        quarantines
    }
}

/// The worker's `AppHealth` as the store keeps it (KiB, µs): a number that
/// is not a finite size is left out rather than stored.
fn health_row(health: Option<&grpc::AppHealth>) -> argus_store::AppHealthRow {
    let Some(health) = health else { return argus_store::AppHealthRow::default() };
    let whole = |value: f64, per: f64| (value.is_finite() && value >= 0.0).then(|| (value * per).round() as i64);
    let kb = |mb: f64| whole(mb, 1024.0);
    argus_store::AppHealthRow {
        heap_start_kb: health.start.as_ref().and_then(|m| kb(m.heap_used_mb)),
        heap_end_kb: health.end.as_ref().and_then(|m| kb(m.heap_used_mb)),
        rss_start_kb: health.start.as_ref().and_then(|m| kb(m.rss_mb)),
        rss_end_kb: health.end.as_ref().and_then(|m| kb(m.rss_mb)),
        render_commits: health.render.as_ref().map(|r| i64::from(r.commits)),
        render_us: health.render.as_ref().and_then(|r| whole(r.ms, 1000.0)),
    }
}
