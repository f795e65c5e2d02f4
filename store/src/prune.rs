//! How long history is kept. `argus prune --older-than 90d` removes whole
//! runs (their attempts, steps, leases, files and pictures) and ended
//! WebDriver sessions older than that, once; `argus coordinator --keep-days
//! N` does the same every hour in a task of its own beside the owner loop,
//! never inside it. The flaky page's per-case-day summary stays.

use std::time::Duration;

use argus_proto::task::periodically;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::artifacts::Artifacts;
use crate::{Pruned, Store, StoreError};

/// How often a coordinator with `--keep-days` prunes.
pub const EVERY: Duration = Duration::from_secs(3600);
/// The first prune waits this long after the start, so that a coordinator
/// that starts serves first.
const FIRST_AFTER: Duration = Duration::from_secs(10);

/// An age `prune --older-than` cannot read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an age: give a whole number and a unit, as 90d, 12h, 30m or 0s")]
pub struct BadAge(String);

/// A duration as `prune --older-than` takes it: a whole number and a unit,
/// `90d`, `12h`, `30m`, `0s`.
pub fn parse_age(text: &str) -> Result<Duration, BadAge> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let refuse = || BadAge(text.to_owned());
    let number: u64 = number.parse().map_err(|_| refuse())?;
    let seconds = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => return Err(refuse()),
    };
    number.checked_mul(seconds).map(Duration::from_secs).ok_or_else(refuse)
}

/// The epoch-milliseconds cutoff `age` before now.
pub fn cutoff_from_now(age: Duration) -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    cutoff(i64::try_from(now.as_millis()).unwrap_or(i64::MAX), age)
}

/// The epoch-milliseconds cutoff `age` before `now_ms`.
pub fn cutoff(now_ms: i64, age: Duration) -> i64 {
    now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

/// Runs chosen at a time.
const RUNS_PER_PASS: i64 = 50;
/// After each batch of a removal, a pause this many times as long as the
/// batch took (and at least [`MIN_PAUSE`]): the prune takes at most a fifth
/// of the database's time, and leaves the rest to the grid.
const PAUSE_FACTOR: u32 = 4;
const MIN_PAUSE: Duration = Duration::from_millis(5);

/// Removes every run and session that started before `cutoff_ms`, oldest
/// first, run by run, and each removed run's files from `artifacts`.
pub async fn prune(store: &Store, artifacts: Option<&Artifacts>, cutoff_ms: i64) -> Result<Pruned, StoreError> {
    // Only runs counted in the flaky-and-slow summary go, so that it keeps
    // what they added: those that ended since the follow-up's last pass
    // are counted first.
    store.count_ended_runs().await?;
    let mut total = Pruned::default();
    loop {
        let runs = store.runs_to_prune(cutoff_ms, RUNS_PER_PASS).await?;
        if runs.is_empty() {
            break;
        }
        for run_id in &runs {
            total.add(&remove_run(store, run_id).await?);
            if let Some(artifacts) = artifacts
                && let Err(error) = artifacts.remove_run(run_id).await
            {
                warn!(run = %run_id, %error, "a pruned run's files could not be removed");
            }
        }
    }
    total.sessions += store.remove_sessions_before(cutoff_ms).await?;
    Ok(total)
}

/// Removes one run whole, a batch of its cases per transaction, pausing
/// after each: a prune gives way to the leases and results that flow
/// meanwhile rather than racing them for the database.
async fn remove_run(store: &Store, run_id: &str) -> Result<Pruned, StoreError> {
    store.start_removing_run(run_id).await?;
    let mut removed = Pruned { runs: 1, ..Pruned::default() };
    loop {
        let started = std::time::Instant::now();
        let Some(batch) = store.remove_run_batch(run_id).await? else { break };
        removed.add(&batch);
        tokio::time::sleep((started.elapsed() * PAUSE_FACTOR).max(MIN_PAUSE)).await;
    }
    store.finish_removing_run(run_id).await?;
    Ok(removed)
}

/// Days the step records of passing attempts are kept by default (for the
/// replay of recent attempts); see [`Store::prune_observations`].
pub const STEP_RECORDS_DAYS: u64 = 7;
/// Step records removed per statement.
const STEP_RECORDS_PER_BATCH: i64 = 500;

/// Removes passing attempts' step records older than `window` every
/// `every` until `shutdown` (failures, baselines and what failures are
/// compared with stay).
pub fn keep_step_records(
    store: Store,
    window: Duration,
    every: Duration,
    shutdown: CancellationToken,
    tasks: &TaskTracker,
) {
    periodically(tracing::info_span!("step records"), FIRST_AFTER, every, shutdown, tasks, move || {
        let store = store.clone();
        async move {
            match store.prune_observations(cutoff_from_now(window), STEP_RECORDS_PER_BATCH).await {
                Ok(0) => {}
                Ok(removed) => info!(removed, days = window.as_secs() / 86_400, "removed old step records"),
                Err(error) => warn!(%error, "removing old step records failed; trying again at the next hour"),
            }
        }
    });
}

/// Prunes what is older than `keep` every `every` until `shutdown`.
pub fn keep(
    store: Store,
    artifacts: Option<Artifacts>,
    keep: Duration,
    every: Duration,
    shutdown: CancellationToken,
    tasks: &TaskTracker,
) {
    periodically(tracing::info_span!("retention"), FIRST_AFTER, every, shutdown, tasks, move || {
        let (store, artifacts) = (store.clone(), artifacts.clone());
        async move {
            match prune(&store, artifacts.as_ref(), cutoff_from_now(keep)).await {
                Ok(pruned) if pruned == Pruned::default() => {}
                Ok(pruned) => info!(
                    runs = pruned.runs,
                    attempts = pruned.attempts,
                    steps = pruned.steps,
                    sessions = pruned.sessions,
                    keep_days = keep.as_secs() / 86_400,
                    "removed history older than the window"
                ),
                Err(error) => warn!(%error, "pruning old history failed; trying again at the next hour"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_a_number_and_a_unit() {
        assert_eq!(parse_age("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        for bad in ["", "90", "d", "-1d", "1.5d", "90 days", "99999999999999999999d"] {
            assert!(parse_age(bad).unwrap_err().to_string().contains("is not an age"), "{bad}");
        }
        assert_eq!(cutoff(100_000, Duration::from_secs(60)), 40_000);
    }
}
