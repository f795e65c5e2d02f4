//! What follows a run's end, off the owner task and after the run's end is
//! in the store: mutes its passes have lifted (and, as they come, the
//! notifications it raises). A run is marked followed up once all of it is
//! done, so a coordinator that stopped midway does the rest when it starts.

use argus_store::{Store, StoreError};

use crate::mutes::MutePolicy;

/// What the follow-up acts on.
#[derive(Debug, Clone, Default)]
pub struct FollowUp {
    pub mutes: MutePolicy,
}

/// Follows up to `batch` ended runs, oldest first; how many.
pub async fn follow_up(store: &Store, policy: &FollowUp, batch: u32) -> Result<usize, StoreError> {
    let runs = store.runs_to_follow_up(batch).await?;
    for run in &runs {
        crate::mutes::lift_by_passes(store, run, &policy.mutes, crate::time::now_ms()).await?;
        store.set_followed_up(&run.id).await?;
    }
    Ok(runs.len())
}
