//! The record of WebDriver sessions in the store: sessions that start and
//! end, and each command with its duration and outcome. Handlers hand
//! entries to one writer task, which writes whatever has gathered in one
//! transaction, so that a command never waits on the database. An entry
//! the store refuses is written again (with backoff) until it takes it or
//! the coordinator stops.

use std::time::Duration;

use backon::BackoffBuilder;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use argus_store::{CommandRow, SessionRow, Store};

/// Entries that may wait for the writer; beyond it the newest are dropped
/// with a warning rather than holding up clients.
const QUEUE: usize = 16 * 1024;
/// The most entries written in one transaction.
const BATCH: usize = 1024;

pub enum Entry {
    Started(SessionRow),
    Command(CommandRow),
    Ended { id: String, at: i64, reason: String },
}

#[derive(Clone)]
pub struct SessionLog {
    tx: mpsc::Sender<Entry>,
}

impl SessionLog {
    pub fn add(&self, entry: Entry) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(entry) {
            warn!("the WebDriver session log is {QUEUE} entries behind the store; an entry was dropped");
        }
    }

    /// Starts the writer, a task of `tasks` that ends on `shutdown` once
    /// what it holds is written (or the store refused it once more).
    pub fn start(store: Store, shutdown: CancellationToken, tasks: &TaskTracker) -> Self {
        let (tx, mut rx) = mpsc::channel::<Entry>(QUEUE);
        tasks.spawn(tracing::Instrument::instrument(
            async move {
                let mut batch = Vec::new();
                loop {
                    tokio::select! {
                        entry = rx.recv() => match entry {
                            Some(entry) => batch.push(entry),
                            None => break,
                        },
                        _ = shutdown.cancelled() => break,
                    }
                    while batch.len() < BATCH
                        && let Ok(entry) = rx.try_recv()
                    {
                        batch.push(entry);
                    }
                    write(&store, &mut batch, &shutdown).await;
                }
                while let Ok(entry) = rx.try_recv() {
                    batch.push(entry);
                }
                write(&store, &mut batch, &CancellationToken::new()).await;
            },
            tracing::info_span!("webdriver log"),
        ));
        Self { tx }
    }
}

/// Writes `batch`, again after each failure until it is written or
/// `give_up` (after one more try).
async fn write(store: &Store, batch: &mut Vec<Entry>, give_up: &CancellationToken) {
    if batch.is_empty() {
        return;
    }
    let (mut started, mut commands, mut ended) = (Vec::new(), Vec::new(), Vec::new());
    for entry in batch.drain(..) {
        match entry {
            Entry::Started(row) => started.push(row),
            Entry::Command(row) => commands.push(row),
            Entry::Ended { id, at, reason } => ended.push((id, at, reason)),
        }
    }
    let mut backoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .without_max_times()
        .build();
    loop {
        match store.record_sessions(&started, &commands, &ended).await {
            Ok(()) => return,
            Err(error) if give_up.is_cancelled() => {
                warn!(%error, commands = commands.len(), "cannot record WebDriver sessions; stopping without them");
                return;
            }
            Err(error) => {
                let wait = backoff.next().unwrap_or(Duration::from_secs(5));
                warn!(%error, retry_ms = wait.as_millis() as u64, "cannot record WebDriver sessions; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = give_up.cancelled() => {}
                }
            }
        }
    }
}
