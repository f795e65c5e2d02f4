//! What the owner decided and the store has not taken yet: one type holds
//! every kind of write that waits for its next try, so that the sweep has
//! one place to try them again ([`Owner::settle`]) and a cancel one place
//! to forget a run's.
//!
//! Writes whose answer was lost may have committed: each kind here is one
//! the store takes twice as once (a lease granted once, a result recorded
//! once, a cancel taken once, a deadline or a state written over).

use std::collections::{HashMap, HashSet};

use argus_store::{DeviceRecord, NewLease, PendingTry, Store};
use tracing::warn;

use super::in_flight::Chained;
use super::{Finished, Key};
use crate::scheduler::Pending;

#[derive(Default)]
pub(super) struct Unwritten {
    /// A dispatch's leases whose commit's answer was lost, granted again
    /// at the next sweep ([`Owner::regrant`](super::Owner::regrant)).
    pub(super) grants: Vec<(Pending<Key>, NewLease)>,
    /// Results the store failed to take ...
    pub(super) results: Vec<Finished>,
    /// ... and the leases that were to follow them on their devices.
    pub(super) chained: Vec<Chained>,
    /// Tries queued by attempts taken back, written with the rest of the
    /// burst ([`Unwritten::write_tries`]); the device each should avoid.
    pub(super) tries: Vec<(Key, Option<String>)>,
    /// Quarantines (device, reason) the store failed to take.
    pub(super) quarantines: Vec<(String, String)>,
    /// Cancels (run, reason) the store failed to take; a run ends here
    /// only once the store has its cancel.
    pub(super) cancels: HashMap<String, String>,
    /// Leases whose heartbeat the store has not been told: their new
    /// deadline is written for all of them in one statement per sweep.
    pub(super) heartbeats: HashSet<String>,
    /// Devices whose state the store has not been told (one statement at
    /// the next sweep).
    pub(super) devices: HashSet<String>,
}

impl Unwritten {
    /// Forgets what a cancelled run was still to write: the store ended
    /// whatever of it had committed.
    pub(super) fn forget_run(&mut self, run_id: &str) {
        self.tries.retain(|(key, _)| key.run != run_id);
        self.grants.retain(|(pending, _)| pending.key.run != run_id);
    }

    /// Whether a lease for `device` waits to be granted again.
    pub(super) fn grants_device(&self, device: &str) -> bool {
        self.grants.iter().any(|(_, lease)| lease.device_id == device)
    }

    /// Writes the queued tries in one statement and hands back those the
    /// store took, to be offered to devices; on an error they stay for the
    /// next try.
    pub(super) async fn write_tries(&mut self, store: &Store, now_ms: i64) -> Vec<(Key, Option<String>)> {
        if self.tries.is_empty() {
            return Vec::new();
        }
        let tries: Vec<PendingTry> = self
            .tries
            .iter()
            .map(|(k, _)| PendingTry {
                run_id: k.run.clone(),
                case_id: k.case.clone(),
                attempt: k.attempt,
                try_no: k.try_no,
            })
            .collect();
        match store.queue_many(&tries, now_ms).await {
            Ok(()) => std::mem::take(&mut self.tries),
            Err(error) => {
                warn!(%error, attempts = tries.len(), "cannot queue attempts; trying again");
                Vec::new()
            }
        }
    }

    /// Writes the new deadline of every lease that had a heartbeat and is
    /// still `held`, in one statement.
    pub(super) async fn write_heartbeats(&mut self, store: &Store, held: impl Fn(&str) -> bool, deadline_ms: i64) {
        self.heartbeats.retain(|id| held(id));
        if self.heartbeats.is_empty() {
            return;
        }
        let ids: Vec<String> = self.heartbeats.iter().cloned().collect();
        match store.extend_leases(&ids, deadline_ms).await {
            Ok(()) => self.heartbeats.clear(),
            Err(error) => warn!(%error, leases = ids.len(), "cannot record heartbeats; trying again"),
        }
    }

    /// Writes the state of every device whose state changed, as `record`
    /// reads it now (a device gone meanwhile gives `None`).
    pub(super) async fn write_devices(&mut self, store: &Store, record: impl Fn(&str) -> Option<DeviceRecord>) {
        if self.devices.is_empty() {
            return;
        }
        let records: Vec<DeviceRecord> = self.devices.iter().filter_map(|id| record(id)).collect();
        match store.upsert_devices(&records).await {
            Ok(()) => self.devices.clear(),
            Err(error) => warn!(%error, devices = records.len(), "cannot record the devices' state; trying again"),
        }
    }
}
