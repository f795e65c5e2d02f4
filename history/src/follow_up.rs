//! What follows a run's end, off the owner task and after the run's end is
//! in the store (and, each pass, mutes whose time has come are lifted):
//! the mutes its passes have lifted, and what webhooks are
//! told (`run.finished`; `case.failing` for each case that failed on the
//! run's branch where its last result was not a failure). The events and
//! the mark that the run is followed up are written in one transaction, so
//! a coordinator that stopped midway does it all again, and tells nothing
//! twice.

use argus_store::{NewEvent, RunRow, Store, StoreError};

use crate::explain::ExplainError;
use crate::mutes::MutePolicy;
use argus_grid::events::{FailingCase, Happened, RunEnded, store_event};

/// What the follow-up acts on.
#[derive(Debug, Clone, Default)]
pub struct FollowUp {
    pub mutes: MutePolicy,
}

/// Follows up to `batch` ended runs, oldest first; how many.
pub async fn follow_up(store: &Store, policy: &FollowUp, batch: u32) -> Result<usize, StoreError> {
    // What the runs that ended add to the flaky-and-slow summary, off the
    // owner task; then mutes end at their time, whether or not a run comes.
    store.count_ended_runs().await?;
    store.lift_expired_mutes(argus_grid::time::now_ms()).await?;
    let runs = store.runs_to_follow_up(batch).await?;
    for run in &runs {
        let now = argus_grid::time::now_ms();
        crate::mutes::lift_by_passes(store, run, &policy.mutes, now).await?;
        if policy.mutes.auto_mute_after > 0 {
            // The causes the auto-mute reads, this run's included.
            crate::explain::write_causes(store, 1_000).await?;
            match crate::mutes::auto_mute(store, run, &policy.mutes, now).await {
                Ok(_) => {}
                Err(argus_grid::error::CoreError::Store(error)) => return Err(error),
                Err(other) => tracing::warn!(run = %run.id, error = %other, "the auto-mute could not mute a case"),
            }
        }
        let events = match told(store, run, now).await {
            Ok(events) => events,
            Err(ExplainError::Store(error)) => return Err(error),
            Err(undecodable) => {
                tracing::warn!(run = %run.id, error = %undecodable, "a failure's record does not decode; its run's end is told without its cases");
                vec![store_event(now, Happened::RunFinished { run: ended(run) })]
            }
        };
        store.followed_up(&run.id, &events).await?;
    }
    Ok(runs.len())
}

/// The run as webhooks are told of it.
fn ended(run: &RunRow) -> RunEnded {
    RunEnded {
        id: run.id.clone(),
        project: run.project.clone(),
        branch: run.branch.clone(),
        commit: run.commit_sha.clone(),
        result: run.result.clone().unwrap_or_else(|| "cancelled".into()),
        cases: run.cases.unwrap_or(0),
        passed: run.passed.unwrap_or(0),
        failed: run.failed.unwrap_or(0),
        muted_failed: run.muted_failed.unwrap_or(0),
        started_at: argus_grid::time::iso(run.started_at),
        finished_at: run.finished_at.map(argus_grid::time::iso),
    }
}

/// The run's end, and each case that started failing on its branch.
async fn told(store: &Store, run: &RunRow, now: i64) -> Result<Vec<NewEvent>, ExplainError> {
    let summary = ended(run);
    let mut events = vec![store_event(now, Happened::RunFinished { run: summary.clone() })];
    if run.result.as_deref() != Some("failed") {
        return Ok(events);
    }
    let branch = run.branch.as_deref().unwrap_or("");
    let mut starting = Vec::new();
    for case in store.run_cases(&run.id).await? {
        if case.final_result.as_deref() != Some("failed") || case.muted.is_some() {
            continue;
        }
        let before = store.result_before(&run.project, branch, &case.case_id, &run.id, run.started_at).await?;
        if before.as_deref() != Some("failed") {
            starting.push((case.case_id, case.owner));
        }
    }
    if starting.is_empty() {
        return Ok(events);
    }
    let (explained, _) = crate::explain::explain_run(store, &run.id).await?;
    for (case_id, owner) in starting {
        let why = explained.iter().find(|e| e.case_id == case_id);
        let case = FailingCase {
            attempt: why.map_or(0, |e| e.attempt),
            cause: why.map_or("unknown", |e| e.cause.kind).to_owned(),
            line: why.map_or_else(|| "no record of the failure to compare".to_owned(), |e| e.line.clone()),
            owner,
            id: case_id,
        };
        events.push(store_event(now, Happened::CaseFailing { run: summary.clone(), case }));
    }
    Ok(events)
}
