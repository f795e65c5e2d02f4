//! Retention: whole runs older than a cutoff removed, in transactions of a
//! bounded size, so that a prune of millions of rows never holds SQLite's
//! one writer, or rows a lease waits on, for long. The per-case-day summary
//! (`case_days`, `case_last`) stays: a year of flakiness is still on the
//! flaky page after the attempts are gone.
//!
//! A run being removed is first marked unwritten (`written = 0`): the lists
//! pass it by at once, and a prune that stops half-way leaves a run that the
//! next coordinator's start removes whole, as it removes a run a stopped
//! submit left half-written.

use sqlx::Row;

use super::{Store, StoreError};

/// Cases whose attempts, steps and leases go in one transaction.
pub const CASES_PER_BATCH: i64 = 200;
/// What goes with a batch of a run's cases (those up to `$2` by name).
/// A baseline's observation stays: it outlives its run.
const BATCH_DELETES: [(&str, &str); 5] = [
    ("steps", "DELETE FROM steps WHERE run_id = $1 AND case_id <= $2"),
    (
        "observations",
        "DELETE FROM observations WHERE run_id = $1 AND case_id <= $2 AND NOT EXISTS (SELECT 1 FROM baselines b \
         WHERE b.run_id = observations.run_id AND b.case_id = observations.case_id \
         AND b.attempt = observations.attempt AND b.try_no = observations.try_no)",
    ),
    ("leases", "DELETE FROM leases WHERE run_id = $1 AND case_id <= $2"),
    ("attempts", "DELETE FROM attempts WHERE run_id = $1 AND case_id <= $2"),
    ("cases", "DELETE FROM cases WHERE run_id = $1 AND case_id <= $2"),
];
/// WebDriver sessions whose commands go in one transaction.
const SESSIONS_PER_BATCH: i64 = 200;

/// What a prune removed, or would remove.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub runs: u64,
    pub attempts: u64,
    pub steps: u64,
    pub sessions: u64,
}

impl Pruned {
    pub fn add(&mut self, other: &Pruned) {
        self.runs += other.runs;
        self.attempts += other.attempts;
        self.steps += other.steps;
        self.sessions += other.sessions;
    }
}

impl Store {
    /// What removing everything that started before `cutoff_ms` would
    /// remove: whole finished runs (counted in the flaky summary) and ended
    /// WebDriver sessions.
    pub async fn prunable(&self, cutoff_ms: i64) -> Result<Pruned, StoreError> {
        let row = sqlx::query(
            "SELECT CAST(COUNT(DISTINCT r.id) AS BIGINT), CAST(COUNT(a.run_id) AS BIGINT) FROM runs r \
             LEFT JOIN attempts a ON a.run_id = r.id \
             WHERE r.started_at < $1 AND r.finished_at IS NOT NULL AND r.counted = 1",
        )
        .bind(cutoff_ms)
        .fetch_one(&self.pool)
        .await?;
        let steps: i64 = sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM steps s JOIN runs r ON r.id = s.run_id \
             WHERE r.started_at < $1 AND r.finished_at IS NOT NULL AND r.counted = 1",
        )
        .bind(cutoff_ms)
        .fetch_one(&self.pool)
        .await?;
        let sessions: i64 = sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM webdriver_sessions WHERE created_at < $1 AND ended_at IS NOT NULL",
        )
        .bind(cutoff_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(Pruned {
            runs: row.try_get::<i64, _>(0)? as u64,
            attempts: row.try_get::<i64, _>(1)? as u64,
            steps: steps as u64,
            sessions: sessions as u64,
        })
    }

    /// Finished runs (counted in the flaky summary) that started before
    /// `cutoff_ms`, oldest first, at most `limit`.
    pub async fn runs_to_prune(&self, cutoff_ms: i64, limit: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM runs WHERE started_at < $1 AND finished_at IS NOT NULL AND counted = 1 \
             ORDER BY started_at LIMIT $2",
        )
        .bind(cutoff_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Hides a run that is about to be removed: the lists pass it by, and
    /// a removal that stops half-way is finished by the next start.
    pub async fn start_removing_run(&self, run_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET written = 0 WHERE id = $1").bind(run_id).execute(&self.pool).await?;
        Ok(())
    }

    /// Removes the next batch of a run's cases, with their steps, leases
    /// and attempts, in one transaction: what it removed, or `None` when no
    /// case was left.
    pub async fn remove_run_batch(&self, run_id: &str) -> Result<Option<Pruned>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let cases: Vec<String> =
            sqlx::query_scalar("SELECT case_id FROM cases WHERE run_id = $1 ORDER BY case_id LIMIT $2")
                .bind(run_id)
                .bind(CASES_PER_BATCH)
                .fetch_all(&mut *tx)
                .await?;
        let Some(last) = cases.last() else {
            tx.rollback().await?;
            return Ok(None);
        };
        let mut removed = Pruned::default();
        // The batch is the run's cases up to `last`, by name.
        for (table, sql) in BATCH_DELETES {
            let gone = sqlx::query(sql).bind(run_id).bind(last).execute(&mut *tx).await?.rows_affected();
            match table {
                "steps" => removed.steps += gone,
                "attempts" => removed.attempts += gone,
                _ => {}
            }
        }
        tx.commit().await?;
        Ok(Some(removed))
    }

    /// Removes what is left of a run once its cases are gone: its files and
    /// the run itself.
    pub async fn finish_removing_run(&self, run_id: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM run_files WHERE run_id = $1").bind(run_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM runs WHERE id = $1").bind(run_id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes ended WebDriver sessions created before `cutoff_ms`, with
    /// their commands, a batch at a time.
    pub async fn remove_sessions_before(&self, cutoff_ms: i64) -> Result<u64, StoreError> {
        let mut removed = 0;
        loop {
            let mut tx = self.pool.begin().await?;
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM webdriver_sessions WHERE created_at < $1 AND ended_at IS NOT NULL \
                 ORDER BY created_at LIMIT $2",
            )
            .bind(cutoff_ms)
            .bind(SESSIONS_PER_BATCH)
            .fetch_all(&mut *tx)
            .await?;
            if ids.is_empty() {
                tx.rollback().await?;
                return Ok(removed);
            }
            for id in &ids {
                sqlx::query("DELETE FROM webdriver_commands WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM webdriver_sessions WHERE id = $1").bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            removed += ids.len() as u64;
        }
    }

    /// When the oldest run kept started, if there is one.
    pub async fn oldest_run_started(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar("SELECT MIN(started_at) FROM runs WHERE written = 1").fetch_one(&self.pool).await?)
    }
}
