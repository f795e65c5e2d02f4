//! What the worker saw at each step of an attempt, and each case's
//! baselines: the last passing attempt per platform and branch, that a
//! failure is compared with ("since it last passed").
//!
//! A failure's is written with the result, in its transaction (its why is
//! asked for as soon as the run ends); a pass's may be written just after,
//! in a batch of its own ([`Store::record_observations`]), so that the
//! bytes of every passing attempt's record are not on the path from one
//! attempt's result to the device's next lease. Long-term storage grows
//! with cases and failures: a failed attempt's observation stays as long
//! as its run, a baseline's as long as it is one (past its run's removal),
//! the passing attempt a failure was compared with as long as that
//! failure; any other passing attempt's goes after a window
//! ([`Store::prune_observations`]).

use std::collections::HashMap;

use sqlx::{Any, Transaction};

use super::{AttemptKey, Store, StoreError, placeholders};

/// Where an attempt ran and what it saw: what the grid records with its
/// result.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub project: String,
    /// `''` when the run named none.
    pub branch: String,
    pub commit: String,
    pub platform: String,
    pub device_id: String,
    pub worker_id: String,
    /// An `AttemptObserved`, encoded.
    pub body: Vec<u8>,
}

/// An attempt's observation as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ObservationRow {
    pub run_id: String,
    pub case_id: String,
    pub attempt: i64,
    pub try_no: i64,
    pub project: String,
    pub branch: String,
    pub commit_sha: String,
    pub platform: String,
    pub device_id: String,
    pub worker_id: String,
    pub result: String,
    pub finished_at: i64,
    pub body: Vec<u8>,
    pub baseline_run_id: Option<String>,
    pub baseline_attempt: Option<i64>,
    pub baseline_try_no: Option<i64>,
}

impl ObservationRow {
    pub fn key(&self) -> AttemptKey {
        AttemptKey {
            run_id: self.run_id.clone(),
            case_id: self.case_id.clone(),
            attempt: self.attempt,
            try_no: self.try_no,
        }
    }

    /// The passing attempt it was compared with, when it is a failure that
    /// had one.
    pub fn baseline_key(&self) -> Option<AttemptKey> {
        Some(AttemptKey {
            run_id: self.baseline_run_id.clone()?,
            case_id: self.case_id.clone(),
            attempt: self.baseline_attempt?,
            try_no: self.baseline_try_no?,
        })
    }
}

/// A failed attempt's cause and signature, once written
/// ([`Store::set_cause`]).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FailureCause {
    pub run_id: String,
    pub case_id: String,
    pub cause: String,
    pub signature: String,
    pub finished_at: i64,
}

/// A run's final result for one case, with the run's commit.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CaseRun {
    pub run_id: String,
    pub commit_sha: Option<String>,
    pub started_at: i64,
    pub final_result: String,
}

const COLUMNS: &str = "run_id, case_id, attempt, try_no, project, branch, commit_sha, platform, device_id, worker_id, \
                       result, finished_at, body, baseline_run_id, baseline_attempt, baseline_try_no";

/// Rows of observations per INSERT: each carries a body of up to 256 KiB.
const OBSERVATIONS_PER_INSERT: usize = 20;

/// A finished attempt's observation, to be recorded after its result
/// ([`Store::record_observations`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedAttempt {
    pub key: AttemptKey,
    /// `passed`, `failed`.
    pub result: String,
    pub finished_at: i64,
    pub observed: Observed,
}

impl Store {
    /// Records observations of results the store already took, in one
    /// transaction. Idempotent: an observation already recorded is left as
    /// it is, and a baseline is only ever replaced by a newer pass.
    pub async fn record_observations(&self, attempts: &[ObservedAttempt]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let rows: Vec<Recorded> =
            attempts.iter().map(|a| (&a.key, a.result.as_str(), a.finished_at, &a.observed)).collect();
        record(&mut tx, &rows).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// An attempt, its result, when it finished, and what it saw.
pub(super) type Recorded<'a> = (&'a AttemptKey, &'a str, i64, &'a Observed);

/// Records the observations of results the store took, in `tx`: a pass
/// becomes its case's baseline on its branch; a failure is tied to the
/// baseline it is compared with.
pub(super) async fn record(tx: &mut Transaction<'static, Any>, observed: &[Recorded<'_>]) -> Result<(), StoreError> {
    if observed.is_empty() {
        return Ok(());
    }
    let mut baselines: Vec<Option<(String, i64, i64)>> = Vec::with_capacity(observed.len());
    for (key, result, _, seen) in observed {
        let baseline = if *result == "failed" {
            // The branch's own baseline first, else the newest on any branch.
            sqlx::query_as::<_, (String, i64, i64)>(
                "SELECT run_id, attempt, try_no FROM baselines WHERE project = $1 AND case_id = $2 AND platform = $3 \
                 ORDER BY CASE WHEN branch = $4 THEN 0 ELSE 1 END, finished_at DESC LIMIT 1",
            )
            .bind(&seen.project)
            .bind(&key.case_id)
            .bind(&seen.platform)
            .bind(&seen.branch)
            .fetch_optional(&mut **tx)
            .await?
        } else {
            None
        };
        baselines.push(baseline);
    }
    let rows: Vec<_> = observed.iter().zip(&baselines).collect();
    for chunk in rows.chunks(OBSERVATIONS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO observations ({COLUMNS}) VALUES {} ON CONFLICT (run_id, case_id, attempt, try_no) DO NOTHING",
            placeholders(chunk.len(), 16)
        );
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for ((key, result, finished_at, seen), baseline) in chunk {
            query = query
                .bind(&key.run_id)
                .bind(&key.case_id)
                .bind(key.attempt)
                .bind(key.try_no)
                .bind(&seen.project)
                .bind(&seen.branch)
                .bind(&seen.commit)
                .bind(&seen.platform)
                .bind(&seen.device_id)
                .bind(&seen.worker_id)
                .bind(*result)
                .bind(*finished_at)
                .bind(&seen.body)
                .bind(baseline.as_ref().map(|b| b.0.clone()))
                .bind(baseline.as_ref().map(|b| b.1))
                .bind(baseline.as_ref().map(|b| b.2));
        }
        query.execute(&mut **tx).await?;
    }
    // One baseline per case, platform and branch: the newest pass of the batch.
    let mut newest: HashMap<(&str, &str, &str, &str), (&AttemptKey, i64)> = HashMap::new();
    for (key, _, finished_at, seen) in observed.iter().filter(|(_, result, _, _)| *result == "passed") {
        let slot = (seen.project.as_str(), key.case_id.as_str(), seen.platform.as_str(), seen.branch.as_str());
        let entry = newest.entry(slot).or_insert((key, *finished_at));
        if *finished_at >= entry.1 {
            *entry = (*key, *finished_at);
        }
    }
    let newest: Vec<_> = newest.into_iter().collect();
    for chunk in newest.chunks(100) {
        let sql = format!(
            "INSERT INTO baselines (project, case_id, platform, branch, run_id, attempt, try_no, finished_at) VALUES {} \
             ON CONFLICT (project, case_id, platform, branch) DO UPDATE SET run_id = excluded.run_id, \
             attempt = excluded.attempt, try_no = excluded.try_no, finished_at = excluded.finished_at \
             WHERE excluded.finished_at >= baselines.finished_at",
            placeholders(chunk.len(), 8)
        );
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for ((project, case_id, platform, branch), (key, finished_at)) in chunk {
            query = query
                .bind(*project)
                .bind(*case_id)
                .bind(*platform)
                .bind(*branch)
                .bind(&key.run_id)
                .bind(key.attempt)
                .bind(key.try_no)
                .bind(*finished_at);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// The observation of one attempt (its last try).
    pub async fn observation(
        &self,
        run_id: &str,
        case_id: &str,
        attempt: i64,
    ) -> Result<Option<ObservationRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM observations WHERE run_id = $1 AND case_id = $2 AND attempt = $3 \
             ORDER BY try_no DESC LIMIT 1"
        );
        // Built from constants only.
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(run_id)
            .bind(case_id)
            .bind(attempt)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The observation of one try of an attempt.
    pub async fn observation_of(&self, key: &AttemptKey) -> Result<Option<ObservationRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM observations WHERE run_id = $1 AND case_id = $2 AND attempt = $3 AND try_no = $4"
        );
        // Built from constants only.
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&key.run_id)
            .bind(&key.case_id)
            .bind(key.attempt)
            .bind(key.try_no)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The observations of a run's failed attempts, by case and attempt.
    pub async fn failed_observations(&self, run_id: &str) -> Result<Vec<ObservationRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM observations WHERE run_id = $1 AND result = 'failed' \
             ORDER BY case_id, attempt, try_no"
        );
        // Built from constants only.
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(run_id).fetch_all(&self.pool).await?)
    }

    /// Each step's times in the case's last `limit` passing attempts on a
    /// platform: `(step index, ms)`, for its own spread.
    pub async fn passed_step_times(
        &self,
        case_id: &str,
        platform: &str,
        limit: i64,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT s.idx, s.ms FROM (SELECT run_id, case_id, attempt, try_no FROM attempts \
             WHERE case_id = $1 AND platform = $2 AND result = 'passed' ORDER BY finished_at DESC LIMIT $3) a \
             JOIN steps s ON s.run_id = a.run_id AND s.case_id = a.case_id AND s.attempt = a.attempt \
             AND s.try_no = a.try_no",
        )
        .bind(case_id)
        .bind(platform)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A case's final results on a project's branch in runs that started
    /// at or before `until_ms`, newest first.
    pub async fn case_runs(
        &self,
        project: &str,
        branch: &str,
        case_id: &str,
        until_ms: i64,
        limit: i64,
    ) -> Result<Vec<CaseRun>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT r.id AS run_id, r.commit_sha, r.started_at, c.final_result FROM cases c \
             JOIN runs r ON r.id = c.run_id WHERE c.case_id = $1 AND r.project = $2 \
             AND COALESCE(r.branch, '') = $3 AND r.started_at <= $4 AND c.final_result IS NOT NULL \
             AND r.written = 1 ORDER BY r.started_at DESC LIMIT $5",
        )
        .bind(case_id)
        .bind(project)
        .bind(branch)
        .bind(until_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many runs of a project's branch started strictly between two times.
    pub async fn runs_between(
        &self,
        project: &str,
        branch: &str,
        after_ms: i64,
        before_ms: i64,
    ) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE project = $1 AND COALESCE(branch, '') = $2 \
             AND started_at > $3 AND started_at < $4 AND written = 1",
        )
        .bind(project)
        .bind(branch)
        .bind(after_ms)
        .bind(before_ms)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Removes, `batch` at a time, the observations of attempts that did
    /// not fail, finished before `before_ms`, and are neither a baseline
    /// nor what a kept failure is compared with: how many went.
    pub async fn prune_observations(&self, before_ms: i64, batch: i64) -> Result<u64, StoreError> {
        let mut removed = 0;
        loop {
            let gone = sqlx::query(
                "DELETE FROM observations WHERE (run_id, case_id, attempt, try_no) IN ( \
                 SELECT o.run_id, o.case_id, o.attempt, o.try_no FROM observations o \
                 WHERE o.finished_at < $1 AND o.result <> 'failed' \
                 AND NOT EXISTS (SELECT 1 FROM baselines b WHERE b.run_id = o.run_id AND b.case_id = o.case_id \
                   AND b.attempt = o.attempt AND b.try_no = o.try_no) \
                 AND NOT EXISTS (SELECT 1 FROM observations f WHERE f.baseline_run_id = o.run_id \
                   AND f.case_id = o.case_id AND f.baseline_attempt = o.attempt AND f.baseline_try_no = o.try_no) \
                 LIMIT $2)",
            )
            .bind(before_ms)
            .bind(batch)
            .execute(&self.pool)
            .await?
            .rows_affected();
            removed += gone;
            if gone < batch as u64 {
                return Ok(removed);
            }
        }
    }

    /// Failed attempts whose cause is not written yet and whose run has
    /// ended (so that its retries are in), oldest first.
    pub async fn unexplained_failures(&self, limit: i64) -> Result<Vec<ObservationRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM observations WHERE result = 'failed' AND cause IS NULL \
             AND EXISTS (SELECT 1 FROM runs WHERE runs.id = observations.run_id AND runs.finished_at IS NOT NULL) \
             ORDER BY finished_at LIMIT $1"
        );
        // Built from constants only.
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(limit).fetch_all(&self.pool).await?)
    }

    /// Writes a failed attempt's cause and signature.
    pub async fn set_cause(&self, key: &AttemptKey, cause: &str, signature: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE observations SET cause = $1, signature = $2 \
             WHERE run_id = $3 AND case_id = $4 AND attempt = $5 AND try_no = $6",
        )
        .bind(cause)
        .bind(signature)
        .bind(&key.run_id)
        .bind(&key.case_id)
        .bind(key.attempt)
        .bind(key.try_no)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The causes of a project's failed attempts since `since_ms`, newest
    /// first, at most `limit`.
    pub async fn failure_causes(
        &self,
        project: &str,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<FailureCause>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT run_id, case_id, cause, signature, finished_at FROM observations \
             WHERE project = $1 AND result = 'failed' AND finished_at >= $2 AND cause IS NOT NULL \
             ORDER BY finished_at DESC LIMIT $3",
        )
        .bind(project)
        .bind(since_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Bytes and rows of stored observations (the closing figures).
    pub async fn observation_bytes(&self) -> Result<(i64, i64), StoreError> {
        let (rows, bytes): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), CAST(SUM(LENGTH(body)) AS BIGINT) FROM observations")
                .fetch_one(&self.pool)
                .await?;
        Ok((rows, bytes.unwrap_or(0)))
    }
}
