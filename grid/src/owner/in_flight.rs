//! The owner task's writes in flight: a dispatch's leases and up to
//! [`MAX_RECORDING`] bursts of results (each with the leases that follow
//! them on their devices) commit in tasks of their own while the owner
//! goes on; each answer is acted on in the owner, in order.

use super::*;

/// Leases being committed ([`Owner::dispatch`]), and the attempts they are for.
pub(super) struct Granting {
    pub(super) planned: Vec<(Pending<Key>, NewLease)>,
    /// Their devices, which no one else is offered meanwhile.
    pub(super) devices: std::collections::HashSet<String>,
    pub(super) task: tokio::task::JoinHandle<Result<Vec<bool>, StoreError>>,
}

/// What the store answers a burst's results: each result's key, or why it
/// was refused, and whether each lease that follows one was granted.
pub(super) type RecordAnswer = Result<argus_store::FinishedAndGranted, StoreError>;

/// A device's next lease, written with the result that frees it.
pub(super) struct Chained {
    /// The lease the result ends.
    pub(super) after: String,
    pub(super) pending: Pending<Key>,
    pub(super) lease: NewLease,
}

/// A burst's results being written ([`Owner::record_results`]).
pub(super) struct Recording {
    pub(super) prepared: Vec<Finished>,
    /// Room in the records' writer for each passing result's step record.
    pub(super) permits: Vec<Option<mpsc::OwnedPermit<records::Item>>>,
    /// A try again of results the store failed to take.
    pub(super) again: bool,
    /// The leases that follow them on their devices, in the same write.
    pub(super) chained: Vec<Chained>,
    pub(super) task: tokio::task::JoinHandle<RecordAnswer>,
}

/// The most bursts of results written at once. Three: the leases of the
/// devices they free travel with them (two bursts and a dispatch's leases
/// were in flight before those did), and an fsync'ed Postgres commits
/// transactions in flight together.
pub(super) const MAX_RECORDING: usize = 3;

/// The most results written in one transaction, with `devices` in the
/// fleet: a [`MAX_RECORDING`]th of it, so that the writes in flight share
/// the database's cores, but never fewer than 100 (below that, a part's
/// transaction costs more than the parallelism gains).
pub(super) fn part_size(devices: usize) -> usize {
    devices.div_ceil(MAX_RECORDING).max(100)
}

/// A write's answer once its task ends; never, when there is none (a
/// branch of the owner's loop that waits for nothing).
pub(super) async fn answer_of<T>(task: Option<&mut tokio::task::JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// The store's answer, or what went wrong, said once for both kinds.
fn flattened<T>(answer: Result<Result<T, StoreError>, tokio::task::JoinError>) -> Result<T, String> {
    answer.map_err(|e| format!("the task stopped: {e}")).and_then(|r| r.map_err(|e| e.to_string()))
}

impl Owner {
    /// Waits for the leases being committed, if any, and acts on the answer:
    /// what comes next for one of their runs (a cancel) finds them sent.
    pub(super) async fn settle_grant(&mut self) {
        if self.granting.is_some() {
            let answer = answer_of(self.granting.as_mut().map(|g| &mut g.task)).await;
            self.granted(answer).await;
        }
    }

    /// The store's answer to the leases in flight: those committed go to
    /// their devices; when the store failed, the same leases are tried
    /// again ([`Owner::regrant`]).
    pub(super) async fn granted(&mut self, answer: Result<Result<Vec<bool>, StoreError>, tokio::task::JoinError>) {
        let Some(Granting { planned, .. }) = self.granting.take() else { return };
        let granted = match flattened(answer) {
            Ok(granted) => granted,
            Err(error) => {
                // Whether they committed is unknown: the next sweep writes
                // the same leases again (granting one is idempotent), their
                // devices and attempts held for them meanwhile. New leases
                // for those attempts would be refused if these committed.
                warn!(%error, leases = planned.len(), "cannot commit leases; trying them again at the next sweep");
                self.unwritten.grants.extend(planned);
                return;
            }
        };
        self.dispatch_due = true;
        for ((pending, lease), granted) in planned.into_iter().zip(granted) {
            if granted {
                self.send_lease(lease, pending.key).await;
            } else {
                warn!(case = %pending.key.case, "the attempt is no longer pending; not leased");
            }
        }
    }

    /// Waits for the oldest `count` result writes in flight (all of them
    /// with `usize::MAX`) and applies what the store took: before anything
    /// that may end their leases another way (a worker gone, a cancel, the
    /// sweep).
    pub(super) async fn settle_recording(&mut self, count: usize) {
        for _ in 0..count {
            if self.recording.is_empty() {
                return;
            }
            let answer = answer_of(self.recording.front_mut().map(|r| &mut r.task)).await;
            self.recorded(answer).await;
        }
    }

    /// The store's answer to the oldest result write in flight.
    pub(super) async fn recorded(&mut self, answer: Result<RecordAnswer, tokio::task::JoinError>) {
        let Some(Recording { prepared, permits, again, chained, .. }) = self.recording.pop_front() else { return };
        for finished in &prepared {
            self.finishing.remove(&finished.result.lease_id);
        }
        let written = match flattened(answer) {
            Ok(written) => written,
            Err(error) => {
                // Whether it committed is unknown: the same results and
                // leases are written again, which grants a lease once.
                warn!(%error, results = prepared.len(), "cannot record results; trying again at the next sweep");
                self.unwritten.results.extend(prepared);
                self.unwritten.chained.extend(chained);
                return;
            }
        };
        for ((finished, recorded), permit) in prepared.into_iter().zip(written.finished).zip(permits) {
            let held = self.leases.get(&finished.result.lease_id).is_some_and(|l| l.revoking.is_none());
            let taken = match recorded {
                Ok(_) => true,
                Err(_) if again && held => true,
                Err(error) => {
                    warn!(%error, "late result refused (fencing)");
                    false
                }
            };
            if !taken {
                continue;
            }
            if let (Some(permit), Some(observed)) = (permit, finished.outcome.observed.clone()) {
                permit.send(super::records::Item::Record(Box::new(argus_store::ObservedAttempt {
                    key: finished.key.clone(),
                    result: finished.outcome.result.clone().unwrap_or_default(),
                    finished_at: finished.outcome.finished_at,
                    observed,
                })));
            }
            self.apply_result(finished).await;
        }
        // Their devices are free now: the leases that came with them go out.
        for (Chained { pending, lease, .. }, granted) in chained.into_iter().zip(written.granted) {
            match granted {
                Some(true) => self.send_lease(lease, pending.key).await,
                Some(false) => warn!(case = %pending.key.case, "the attempt is no longer pending; not leased"),
                // Its device's result was refused: the attempt waits again.
                None => {
                    self.pending.push(pending);
                    self.dispatch_due = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_written_in_parts_of_a_third_of_the_fleet_but_not_of_a_few_results() {
        assert_eq!(part_size(1_000), 334);
        assert_eq!(part_size(10_000), 3_334);
        assert_eq!(part_size(64), 100, "a small fleet's burst is one transaction");
        assert_eq!(part_size(0), 100);
    }
}
