//! Runs: taken up after a restart or a submit, watched, told why they
//! wait, cancelled, and ended once every case has its final result.

use super::*;

impl Owner {
    /// Rebuilds the runs that were going from the store: attempts that were
    /// leased when the last coordinator stopped are infrastructure failures
    /// and are queued again; pending ones wait for devices as before.
    pub(super) async fn recover(&mut self) -> Result<(), CoreError> {
        let removed = self.store.remove_unwritten_runs().await?;
        if removed > 0 {
            warn!(
                runs = removed,
                "removed runs left half-written by a coordinator that stopped; their clients were never told of them"
            );
        }
        for row in self.store.open_runs().await? {
            let selector: Selector = serde_json::from_str(&row.selector_json).map_err(|e| {
                CoreError::Invalid(format!(
                    "run {} has a selector that does not parse ({e}): {}",
                    row.id, row.selector_json
                ))
            })?;
            // Every recorded attempt counts in the run's totals: one whose
            // result cannot be read is an error naming it, never left out.
            let outcomes: Vec<Outcome> = self
                .store
                .run_outcomes(&row.id)
                .await?
                .into_iter()
                .map(|o| {
                    let result = CaseResult::from_name(&o.result).ok_or_else(|| {
                        CoreError::Invalid(format!(
                            "run {}: the result {:?} of {} attempt {} is none of passed, failed, unsupported",
                            row.id, o.result, o.case_id, o.attempt
                        ))
                    })?;
                    Ok::<_, CoreError>(Outcome {
                        case_id: o.case_id,
                        attempt: o.attempt as u32,
                        result,
                        device: o.device_id.unwrap_or_default(),
                        platform: o.platform.unwrap_or_default(),
                    })
                })
                .collect::<Result<_, _>>()?;
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
            let mut run = Run {
                id: row.id.clone(),
                project: row.project.clone(),
                branch: row.branch.clone().unwrap_or_default(),
                commit: row.commit_sha.clone().unwrap_or_default(),
                selector,
                retries: row.retries as u32,
                priority: row.priority as u32,
                config_json: row.config_json,
                sources: self.store.run_files(&row.id).await?.into_iter().collect(),
                undone: 0,
                cases,
                started_at: row.started_at,
                watchers: Vec::new(),
                detached: row.detached != 0,
                // Its client has the grace to come back.
                unwatched_since: Some(Instant::now()),
                waiting: None,
                next_seq: log.last().map_or(1, |u| u.seq + 1),
                log,
                live_steps: HashMap::new(),
                platform: outcomes.first().map(|o| o.platform.clone()).filter(|p| !p.is_empty()),
                native: None,
                outcomes: Vec::new(),
                failed_on: HashMap::new(),
                finished: None,
                span: tracing::info_span!(parent: None, "run", run = %row.id, recovered = true),
            };
            run.undone = run.cases.values().filter(|c| !c.done).count();
            for outcome in outcomes {
                run.add_outcome(outcome);
            }
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
                self.store.revoke_lease(lease, RESTARTED, self.clock.now_ms(), seq as i64).await?;
                self.store
                    .queue(&row.run_id, &row.case_id, row.attempt as u32, row.try_no as u32 + 1, self.clock.now_ms())
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

    /// A new watcher of a run: what it has not seen of the run's record
    /// (after `after_seq`), then what is going on now (attempts running,
    /// their steps so far, why the run waits), then, if the run is over,
    /// its end.
    pub(super) fn watch(&mut self, run_id: &str, after_seq: u64) -> Result<WatchStream, CoreError> {
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
        let (mut watcher, stream) =
            Watcher::new(missed.len() + running.len() + run.live_steps.values().map(Vec::len).sum::<usize>() + 2);
        for update in missed {
            watcher.send(update);
        }
        for update in &running {
            watcher.send(update);
        }
        for step in run.live_steps.values().flatten() {
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

    /// Tells each run with attempts waiting whether some device could take
    /// them, and if none can, why; the store keeps the reason for the
    /// dashboard.
    pub(super) async fn check_waiting(&mut self) {
        use crate::waiting::{DeviceView, why_waiting};
        let views: Vec<DeviceView<'_>> = self
            .devices
            .values()
            .map(|d| DeviceView { id: &d.id, caps: &d.caps, availability: self.availability(d) })
            .collect();
        let waiting_runs: std::collections::HashSet<&str> = self.pending.per_run().map(|(run, _)| run).collect();
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
        let now = self.clock.now_ms();
        for (run_id, why) in verdicts {
            let Some(run) = self.runs.get_mut(&run_id) else { continue };
            let changed = run.waiting.as_ref().map(|w| &w.message) != why.as_ref();
            if changed {
                match (&why, run.waiting.take()) {
                    (Some(message), previous) => {
                        let since_ms = previous.map_or(now, |p| p.since_ms);
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

    /// Cancels each run that no client has watched for the grace, unless it
    /// was submitted detached: its CI job is gone, and nobody would read
    /// its results.
    pub(super) async fn cancel_unwatched(&mut self) {
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
                warn!(%error, run = %run_id, "cannot cancel an orphaned run; trying again at the next sweep");
            }
        }
    }

    pub(super) fn enqueue(&mut self, key: Key, avoid_device: Option<String>) {
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

    /// Takes up a run that is in the store, prepared off the owner task
    /// ([`Prepared::of`]): nothing here waits on it, and nothing here grows
    /// with the suite.
    pub(super) fn adopt(&mut self, prepared: Prepared) -> grpc::SubmitResponse {
        let Prepared { run, queue, mut response } = prepared;
        let id = run.id.clone();
        info!(run = %id, cases = run.cases.len(), selector = %run.selector.describe(), "run submitted");
        self.runs.insert(id.clone(), run);
        self.pending.add_run(queue);
        self.dispatch_due = true;
        response.dashboard_url =
            self.config.dashboard_url.as_ref().map(|u| format!("{u}/runs/{id}")).unwrap_or_default();
        response
    }

    /// Ends a run whose every case has its final result: recorded first;
    /// if the store fails, the sweep tries again and watchers wait.
    pub(super) async fn finish_run_if_done(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else { return };
        if run.finished.is_some() || run.undone > 0 {
            return;
        }
        let finished_at = self.clock.now_ms();
        // lynkeus' manifest names the one platform its device had; a grid
        // run may span several, which it then lists (`platforms`) instead.
        let platforms: std::collections::BTreeSet<&str> =
            run.outcomes.iter().map(|o| o.platform.as_str()).filter(|p| !p.is_empty()).collect();
        let mut manifest = RunManifest {
            finished_at: Some(iso(finished_at)),
            platform: run.platform.clone().filter(|_| platforms.len() <= 1),
            native: run.native,
            totals: Some(totals_of(run.outcomes.iter().map(|o| (o.case_id.as_str(), o.attempt, o.result)))),
            ..RunManifest::started(iso(run.started_at))
        };
        if platforms.len() > 1 {
            manifest.extra.insert("platforms".into(), platforms.iter().copied().collect::<Vec<_>>().into());
        }
        let manifest_json = manifest_json(&manifest);
        if let Err(error) = self.store.finish_run(run_id, finished_at, &manifest_json).await {
            warn!(%error, run = run_id, "cannot record the end of a run; trying again");
            return;
        }
        info!(run = run_id, "run finished");
        // Its passes' step records are written now rather than at the
        // writer's next turn (a full queue is being written anyway).
        let _ = self.records.try_send(super::records::Item::Flush);
        run.finished = Some(manifest_json);
        Self::close_run(run);
    }

    /// Tells a finished run's watchers, and lets them go.
    pub(super) fn close_run(run: &mut Run) {
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
    pub(super) async fn cancel(&mut self, run_id: &str, reason: &str) -> Result<(), CoreError> {
        let Some(run) = self.runs.get(run_id) else { return Err(CoreError::NoRun(run_id.to_owned())) };
        if run.finished.is_some() {
            return Ok(());
        }
        let manifest = manifest_json(&RunManifest::started(iso(run.started_at)));
        // Leases in flight are sent first, so that they are cancelled below
        // with the rest: the store ends what it committed.
        self.settle_grant().await;
        if let Err(error) = self.store.cancel_run(run_id, reason, self.clock.now_ms(), &manifest).await {
            // It may have committed: written again at the next sweep, and
            // the run ends here once the store has taken it.
            self.unwritten.cancels.insert(run_id.to_owned(), reason.to_owned());
            return Err(error.into());
        }
        self.pending.remove_run(run_id);
        self.unwritten.forget_run(run_id);
        let leases: Vec<String> = self.leases.values().filter(|l| l.run_id == run_id).map(|l| l.id.clone()).collect();
        for lease_id in leases {
            let Some(lease) = self.leases.remove(&lease_id) else { continue };
            lease.span.record("result", "cancelled");
            if let Some(device) = self.devices.get_mut(&lease.device) {
                device.lease = None;
            }
            if let Some(worker) = self.workers.get(&lease.worker) {
                let cancel = grpc::Cancel { lease_id: lease_id.clone(), reason: reason.to_owned() };
                // A worker 256 messages behind is frozen, and liveness takes
                // it back; its lease is gone here, so a late result is refused.
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
}

pub(super) fn no_device(waiting: &Waiting, still: bool) -> grpc::RunUpdate {
    grpc::RunUpdate {
        kind: Some(run_update::Kind::NoDevice(grpc::NoDevice {
            message: waiting.message.clone(),
            waiting: still,
            since_unix_ms: waiting.since_ms,
        })),
        seq: 0,
    }
}

/// A run that is in the store, made ready for the owner task by the
/// submit's own task: its cases, its attempts ranked, and the answer.
/// A suite of 100,000 cases held the owner (and every lease) up for 130 to
/// 150 ms when the owner did this itself.
pub(crate) struct Prepared {
    run: Run,
    queue: crate::scheduler::RunQueue<Key>,
    response: grpc::SubmitResponse,
}

impl Prepared {
    pub(crate) fn of(selector: Selector, new_run: NewRun, traceparent: &str) -> Self {
        let id = new_run.id.clone();
        let mut run = Run {
            id: id.clone(),
            project: new_run.project.clone(),
            branch: new_run.branch.clone().unwrap_or_default(),
            commit: new_run.commit.clone().unwrap_or_default(),
            selector,
            retries: new_run.retries,
            priority: new_run.priority,
            config_json: new_run.config_json,
            sources: new_run.files.into_iter().collect(),
            undone: 0,
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
            outcomes: Vec::new(),
            failed_on: HashMap::new(),
            log: Vec::new(),
            next_seq: 1,
            live_steps: HashMap::new(),
            platform: None,
            native: None,
            finished: None,
            span: tracing::info_span!(parent: None, "run", run = %id, project = %new_run.project),
        };
        run.undone = run.cases.len();
        argus_proto::trace::set_parent(&run.span, traceparent);
        let from_history = new_run.cases.iter().any(|c| c.estimate_source == "history");
        let expected_ms: Vec<u64> = new_run.cases.iter().map(|c| c.expected_ms.max(0) as u64).collect();
        let first_tries = new_run.cases.iter().map(|c| Pending {
            key: Key { run: id.clone(), case: c.case_id.clone(), attempt: 1, try_no: 1 },
            run_id: id.clone(),
            expected_ms: c.expected_ms,
            ordinal: c.ordinal,
            avoid_device: None,
        });
        let queue = crate::scheduler::RunQueue::of(id.clone(), first_tries);
        let case_ids: Vec<String> = new_run.cases.into_iter().map(|c| c.case_id).collect();
        let response = grpc::SubmitResponse {
            run_id: id,
            case_ids,
            dashboard_url: String::new(),
            expected_ms,
            from_history,
            muted: Vec::new(),
            rerun_of: String::new(),
        };
        Self { run, queue, response }
    }
}
