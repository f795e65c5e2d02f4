//! Passing attempts' step records, written just after their results by a
//! task of their own: every passing attempt has one (the case's baseline,
//! the replay window), and their bytes in the result's transaction sat on
//! the path from one attempt's result to its device's next lease. A
//! failure's record stays in its result's transaction: its why is asked
//! for as soon as its run ends.
//!
//! The result is the truth and is written first; a record still queued when
//! the coordinator dies is lost (that attempt has no replay, and the case's
//! baseline stays the pass before it). A store error is retried until it
//! passes or the coordinator stops.

use std::time::Duration;

use argus_store::{ObservedAttempt, Store};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Records waiting to be written; when it is full, a pass's record goes
/// with its result as a failure's does.
const QUEUE: usize = 4_096;

/// Records written per transaction at most.
const BATCH: usize = 200;

/// How long the writer gathers records before a transaction: a few
/// transactions a second rather than one per burst of results, each one
/// more turn of the store's writer that results would wait behind.
const LINGER: Duration = Duration::from_millis(250);

/// How long a failed write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// What the writer is sent.
pub(super) enum Item {
    Record(Box<ObservedAttempt>),
    /// A run ended: what is gathered is written now, so that the next run's
    /// failures find the passes of this one as their baselines.
    Flush,
}

/// Starts the writer; it ends once every sender is gone and what they sent
/// is written, or at `shutdown` after one last try.
pub(super) fn start(store: Store, shutdown: CancellationToken) -> (mpsc::Sender<Item>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Item>(QUEUE);
    let task = argus_proto::task::spawn("records", async move {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.recv().await {
            let Item::Record(first) = first else { continue };
            batch.push(*first);
            let gathering = tokio::time::sleep(LINGER);
            tokio::pin!(gathering);
            while batch.len() < BATCH {
                tokio::select! {
                    item = rx.recv() => match item {
                        Some(Item::Record(record)) => batch.push(*record),
                        Some(Item::Flush) | None => break,
                    },
                    _ = &mut gathering => break,
                    _ = shutdown.cancelled() => break,
                }
            }
            while let Err(error) = store.record_observations(&batch).await {
                if shutdown.is_cancelled() {
                    warn!(%error, records = batch.len(), "step records not written before the coordinator stopped");
                    break;
                }
                warn!(%error, records = batch.len(), "cannot write step records; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY) => {}
                    _ = shutdown.cancelled() => {}
                }
            }
            batch.clear();
        }
        info!("step records writer stopped");
    });
    (tx, task)
}
