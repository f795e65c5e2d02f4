//! The coordinator's periodic jobs, each in a tracked task of its own and
//! never in the owner loop: the causes of ended runs' failures, and what
//! follows a run's end.

use argus_store::Store;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// How soon after a run ends its failures' causes are written (for the
/// flaky page's ranking across runs), and how many at a time.
const CAUSES_EVERY: std::time::Duration = std::time::Duration::from_secs(3);
const CAUSES_PER_BATCH: i64 = 100;

/// Writes the causes of ended runs' failures in a task of its own, never in
/// the owner loop; what fails is tried again at the next tick.
pub(crate) fn write_causes(store: Store, shutdown: CancellationToken, tasks: &tokio_util::task::TaskTracker) {
    let span = tracing::info_span!("causes");
    argus_proto::task::periodically(span, CAUSES_EVERY, CAUSES_EVERY, shutdown, tasks, move || {
        let store = store.clone();
        async move {
            loop {
                match argus_history::explain::write_causes(&store, CAUSES_PER_BATCH).await {
                    Ok(written) if written as i64 == CAUSES_PER_BATCH => continue,
                    Ok(_) => return,
                    Err(error) => {
                        tracing::warn!(%error, "writing the causes of failures failed; trying again shortly");
                        return;
                    }
                }
            }
        }
    });
}

/// How often ended runs are followed up, and how many at a time.
const FOLLOW_UP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
const FOLLOW_UP_PER_BATCH: u32 = 50;

/// Follows up each ended run (see `argus_history::follow_up`) in a tracked task.
pub(crate) fn follow_up_runs(
    store: Store,
    policy: argus_history::follow_up::FollowUp,
    shutdown: CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    let span = tracing::info_span!("follow up runs");
    argus_proto::task::periodically(span, FOLLOW_UP_EVERY, FOLLOW_UP_EVERY, shutdown, tasks, move || {
        let (store, policy) = (store.clone(), policy.clone());
        async move {
            loop {
                match argus_history::follow_up::follow_up(&store, &policy, FOLLOW_UP_PER_BATCH).await {
                    Ok(done) if done as u32 == FOLLOW_UP_PER_BATCH => continue,
                    Ok(_) => return,
                    Err(error) => {
                        tracing::warn!(%error, "following up ended runs failed; trying again shortly");
                        return;
                    }
                }
            }
        }
    });
}

/// Retention: runs older than `keep` removed every hour (none without it),
/// and step records older than `step_records` (30 days by default).
pub(crate) fn keep_history(
    store: &Store,
    artifacts: &Option<argus_store::artifacts::Artifacts>,
    keep: Option<std::time::Duration>,
    step_records: Option<std::time::Duration>,
    shutdown: &CancellationToken,
    tasks: &tokio_util::task::TaskTracker,
) {
    if let Some(keep) = keep {
        info!(keep_days = keep.as_secs() / 86_400, "runs older than the window are removed every hour");
        argus_store::prune::keep(
            store.clone(),
            artifacts.clone(),
            keep,
            argus_store::prune::EVERY,
            shutdown.clone(),
            tasks,
        );
    }
    let step_records =
        step_records.unwrap_or(std::time::Duration::from_secs(argus_store::prune::STEP_RECORDS_DAYS * 86_400));
    argus_store::prune::keep_step_records(
        store.clone(),
        step_records,
        argus_store::prune::EVERY,
        shutdown.clone(),
        tasks,
    );
}
