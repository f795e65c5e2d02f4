//! Muted cases (migration 0010): a muted case still runs and its attempts
//! are kept, but its failure does not fail its run. A mute is taken when a
//! run is submitted (the run's `cases.muted`); every mute and unmute is
//! kept in `mute_events` with who, why and when.

use super::*;

/// A case muted in a project.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct MuteRow {
    pub project: String,
    pub case_id: String,
    pub reason: String,
    pub owner: Option<String>,
    /// It unmutes itself at this time (epoch ms), when set.
    pub until_ms: Option<i64>,
    pub muted_by: String,
    pub muted_at: i64,
}

/// A kept mute as the API sends it.
impl From<MuteRow> for argus_proto::grpc::MutedCase {
    fn from(mute: MuteRow) -> Self {
        Self {
            project: mute.project,
            case_id: mute.case_id,
            reason: mute.reason,
            owner: mute.owner.unwrap_or_default(),
            until_unix_ms: mute.until_ms,
            muted_by: mute.muted_by,
            muted_at_unix_ms: mute.muted_at,
        }
    }
}

/// A mute or an unmute, as it was done.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct MuteEvent {
    pub project: String,
    pub case_id: String,
    /// `muted` or `unmuted`.
    pub action: String,
    pub by_who: String,
    pub reason: String,
    pub at: i64,
}

/// Why a mute was lifted at its time.
const UNTIL_PASSED: &str = "its mute's --until time passed";

const MUTE_COLUMNS: &str = "SELECT project, case_id, reason, owner, until_ms, muted_by, muted_at FROM mutes";

impl Store {
    /// Mutes a case (or changes its mute: reason, owner, until), and keeps
    /// its history and `event` (what webhooks are told), in one transaction.
    pub async fn mute(&self, mute: &MuteRow, event: &NewEvent) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO mutes (project, case_id, reason, owner, until_ms, muted_by, muted_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (project, case_id) DO UPDATE SET reason = excluded.reason, owner = excluded.owner, \
             until_ms = excluded.until_ms, muted_by = excluded.muted_by, muted_at = excluded.muted_at",
        )
        .bind(&mute.project)
        .bind(&mute.case_id)
        .bind(&mute.reason)
        .bind(&mute.owner)
        .bind(mute.until_ms)
        .bind(&mute.muted_by)
        .bind(mute.muted_at)
        .execute(&mut *tx)
        .await?;
        history(&mut tx, &mute.project, &mute.case_id, "muted", &mute.muted_by, &mute.reason, mute.muted_at).await?;
        super::events::add_event_in(&mut tx, event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Unmutes a case and keeps the event; `false` when it was not muted
    /// (nothing is written then).
    pub async fn unmute(
        &self,
        project: &str,
        case_id: &str,
        by: &str,
        reason: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let removed = sqlx::query("DELETE FROM mutes WHERE project = $1 AND case_id = $2")
            .bind(project)
            .bind(case_id)
            .execute(&mut *tx)
            .await?;
        if removed.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        history(&mut tx, project, case_id, "unmuted", by, reason, at).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The cases muted now, in a project or in all of them, by case id.
    pub async fn mutes(&self, project: Option<&str>) -> Result<Vec<MuteRow>, StoreError> {
        let sql = format!("{MUTE_COLUMNS} WHERE $1 = '' OR project = $1 ORDER BY project, case_id");
        // Built from constants only.
        let project = project.unwrap_or("");
        Ok(sqlx::query_as::<_, MuteRow>(sqlx::AssertSqlSafe(sql)).bind(project).fetch_all(&self.pool).await?)
    }

    /// The mutes of `project` in force at `now`: those whose `until` has
    /// passed are lifted first (kept as unmuted by `argus`).
    pub async fn mutes_in_force(&self, project: &str, now: i64) -> Result<HashMap<String, MuteRow>, StoreError> {
        let mut mutes = HashMap::new();
        for mute in self.mutes(Some(project)).await? {
            match mute.until_ms {
                Some(until) if until <= now => {
                    self.unmute(project, &mute.case_id, "argus", UNTIL_PASSED, now).await?;
                }
                _ => {
                    mutes.insert(mute.case_id.clone(), mute);
                }
            }
        }
        Ok(mutes)
    }

    /// Lifts every mute whose `until` has passed (kept as unmuted by
    /// `argus`); how many.
    pub async fn lift_expired_mutes(&self, now: i64) -> Result<usize, StoreError> {
        let expired: Vec<(String, String)> =
            sqlx::query_as("SELECT project, case_id FROM mutes WHERE until_ms IS NOT NULL AND until_ms <= $1")
                .bind(now)
                .fetch_all(&self.pool)
                .await?;
        for (project, case_id) in &expired {
            self.unmute(project, case_id, "argus", UNTIL_PASSED, now).await?;
        }
        Ok(expired.len())
    }

    /// Mutes and unmutes, newest first, in a project or in all of them.
    pub async fn mute_events(&self, project: Option<&str>, limit: u32) -> Result<Vec<MuteEvent>, StoreError> {
        Ok(sqlx::query_as::<_, MuteEvent>(
            "SELECT project, case_id, action, by_who, reason, at FROM mute_events \
             WHERE $1 = '' OR project = $1 ORDER BY at DESC, id DESC LIMIT $2",
        )
        .bind(project.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Whether a case's last `n` attempts (infrastructure failures left
    /// out) on `branch` of `project`, since `since_ms`, all passed.
    pub async fn passed_in_a_row(
        &self,
        project: &str,
        branch: &str,
        case_id: &str,
        since_ms: i64,
        n: u32,
    ) -> Result<bool, StoreError> {
        let results: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT a.result FROM attempts a JOIN runs r ON r.id = a.run_id \
             WHERE a.case_id = $1 AND a.finished_at >= $2 AND a.state = 'done' AND a.infrastructure = 0 \
             AND r.project = $3 AND COALESCE(r.branch, '') = $4 \
             ORDER BY a.finished_at DESC LIMIT $5",
        )
        .bind(case_id)
        .bind(since_ms)
        .bind(project)
        .bind(branch)
        .bind(i64::from(n))
        .fetch_all(&self.pool)
        .await?;
        Ok(n > 0 && results.len() == n as usize && results.iter().all(|r| r.as_deref() == Some("passed")))
    }

    /// Whether `case_id` has run in `project` (a run of it is kept).
    pub async fn case_known(&self, project: &str, case_id: &str) -> Result<bool, StoreError> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM cases c JOIN runs r ON r.id = c.run_id WHERE c.case_id = $1 AND r.project = $2 LIMIT 1",
        )
        .bind(case_id)
        .bind(project)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    /// Who owns each case of `project` (TESTOWNERS, space-separated), as
    /// the newest counted run of the project said (`case_last`): one row
    /// per case, however long the history.
    pub async fn case_owners(&self, project: &str) -> Result<HashMap<String, String>, StoreError> {
        let rows = sqlx::query("SELECT case_id, owner FROM case_last WHERE project = $1 AND owner IS NOT NULL")
            .bind(project)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1))).collect())
    }

    /// The causes of a case's failures in `project` since `since_ms`, as
    /// written (failures not explained yet are left out).
    pub async fn case_failure_causes(
        &self,
        project: &str,
        case_id: &str,
        since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT cause FROM observations WHERE project = $1 AND result = 'failed' AND finished_at >= $2 \
             AND case_id = $3 AND cause IS NOT NULL",
        )
        .bind(project)
        .bind(since_ms)
        .bind(case_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A run's cases that were muted when it was submitted: case id and why.
    pub async fn run_muted(&self, run_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT case_id, muted FROM cases WHERE run_id = $1 AND muted IS NOT NULL ORDER BY ordinal")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1))).collect())
    }

    /// Runs that ended and whose follow-up (see migration 0010) is not
    /// done, oldest first.
    pub async fn runs_to_follow_up(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        let sql =
            concat!(run_select!(), " WHERE followed_up = 0 AND finished_at IS NOT NULL ORDER BY finished_at LIMIT $1");
        Ok(sqlx::query_as::<_, RunRow>(sql).bind(i64::from(limit)).fetch_all(&self.pool).await?)
    }

    /// Marks a run followed up, with the events its end raised, in one
    /// transaction.
    pub async fn followed_up(&self, run_id: &str, events: &[NewEvent]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let marked = sqlx::query("UPDATE runs SET followed_up = 1 WHERE id = $1 AND followed_up = 0")
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        if marked.rows_affected() == 1 {
            for event in events {
                super::events::add_event_in(&mut tx, event).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The result of a case's last attempt (infrastructure failures left
    /// out) in a run of `project` on `branch` other than `run_id` that
    /// finished before `before_ms`.
    pub async fn result_before(
        &self,
        project: &str,
        branch: &str,
        case_id: &str,
        run_id: &str,
        before_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        let found: Option<Option<String>> = sqlx::query_scalar(
            "SELECT a.result FROM attempts a JOIN runs r ON r.id = a.run_id \
             WHERE a.case_id = $1 AND a.finished_at < $2 AND a.state = 'done' AND a.infrastructure = 0 \
             AND a.run_id <> $3 AND r.project = $4 AND COALESCE(r.branch, '') = $5 \
             ORDER BY a.finished_at DESC LIMIT 1",
        )
        .bind(case_id)
        .bind(before_ms)
        .bind(run_id)
        .bind(project)
        .bind(branch)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.flatten())
    }
}

async fn history(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    project: &str,
    case_id: &str,
    action: &str,
    by: &str,
    reason: &str,
    at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mute_events (project, case_id, action, by_who, reason, at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(project)
    .bind(case_id)
    .bind(action)
    .bind(by)
    .bind(reason)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
