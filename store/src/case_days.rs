//! The flaky-and-slow summary (`case_days`, migration 0005). What a run's
//! attempts add to it is counted once the run has ended, by the
//! coordinator's follow-up ([`Store::count_ended_runs`], each second): not
//! in the transaction that ends the run, which the owner task waits on, as
//! counting a nightly run's 100,000 attempts takes a second or more. The
//! page reads a few rows per case and day of its window however many
//! attempts the history holds. Runs not counted yet (ended since the last
//! pass, or before the summary existed) are counted when the store opens,
//! by the same statements, and retention keeps them until they are.

use super::{Backend, FlakyCase, SlowCase, Store, StoreError};

/// A day in epoch milliseconds: the summary's grain.
pub const DAY_MS: i64 = 86_400_000;

type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Adds every run that has ended (`result` set) and is not counted yet to
/// the summary, then marks them counted: each run is counted once, however
/// often its end is recorded.
const COUNT: &[&str] = &[
    // Retries, passes and time, per case and day of each run.
    "INSERT INTO case_days (project, case_id, day, retries, passed_on_retry, retried_runs, passes, passed_ms, \
     max_passed_ms, flips) \
     SELECT r.project, a.case_id, r.started_at / 86400000, \
     CAST(SUM(CASE WHEN a.attempt > 1 AND a.infrastructure = 0 THEN 1 ELSE 0 END) AS BIGINT), \
     CAST(SUM(CASE WHEN a.attempt > 1 AND a.infrastructure = 0 AND a.result = 'passed' THEN 1 ELSE 0 END) AS BIGINT), \
     CAST(COUNT(DISTINCT CASE WHEN a.attempt > 1 AND a.infrastructure = 0 THEN a.run_id END) AS BIGINT), \
     CAST(SUM(CASE WHEN a.result = 'passed' THEN 1 ELSE 0 END) AS BIGINT), \
     CAST(COALESCE(SUM(CASE WHEN a.result = 'passed' THEN a.ms END), 0) AS BIGINT), \
     CAST(COALESCE(MAX(CASE WHEN a.result = 'passed' THEN a.ms END), 0) AS BIGINT), 0 \
     FROM attempts a JOIN runs r ON r.id = a.run_id \
     WHERE r.counted = 0 AND r.result IS NOT NULL AND a.state = 'done' \
     GROUP BY r.project, a.case_id, r.started_at / 86400000 \
     ON CONFLICT (project, day, case_id) DO UPDATE SET \
     retries = case_days.retries + excluded.retries, \
     passed_on_retry = case_days.passed_on_retry + excluded.passed_on_retry, \
     retried_runs = case_days.retried_runs + excluded.retried_runs, \
     passes = case_days.passes + excluded.passes, \
     passed_ms = case_days.passed_ms + excluded.passed_ms, \
     max_passed_ms = CASE WHEN excluded.max_passed_ms > case_days.max_passed_ms \
     THEN excluded.max_passed_ms ELSE case_days.max_passed_ms END",
    // Flips: a final result that differs from the case's previous one in the
    // project (among the runs counted now, in the order they started; before
    // them, the last one counted).
    "INSERT INTO case_days (project, case_id, day, flips) \
     SELECT project, case_id, day, CAST(COUNT(*) AS BIGINT) FROM ( \
     SELECT r.project, c.case_id, r.started_at / 86400000 AS day, c.final_result, \
     COALESCE(LAG(c.final_result) OVER (PARTITION BY r.project, c.case_id ORDER BY r.started_at, r.id), \
     l.final_result) AS previous \
     FROM cases c JOIN runs r ON r.id = c.run_id \
     LEFT JOIN case_last l ON l.project = r.project AND l.case_id = c.case_id \
     WHERE r.counted = 0 AND r.result IS NOT NULL AND c.final_result IN ('passed', 'failed')) AS t \
     WHERE previous <> final_result GROUP BY project, case_id, day \
     ON CONFLICT (project, day, case_id) DO UPDATE SET flips = case_days.flips + excluded.flips",
    "INSERT INTO case_last (project, case_id, final_result, owner) \
     SELECT project, case_id, final_result, owner FROM ( \
     SELECT r.project, c.case_id, c.final_result, c.owner, ROW_NUMBER() OVER \
     (PARTITION BY r.project, c.case_id ORDER BY r.started_at DESC, r.id DESC) AS n \
     FROM cases c JOIN runs r ON r.id = c.run_id \
     WHERE r.counted = 0 AND r.result IS NOT NULL AND c.final_result IN ('passed', 'failed')) AS t \
     WHERE n = 1 \
     ON CONFLICT (project, case_id) DO UPDATE SET final_result = excluded.final_result, owner = excluded.owner",
    "UPDATE runs SET counted = 1 WHERE counted = 0 AND result IS NOT NULL",
];

/// Counts the runs that ended and are not counted yet (see [`COUNT`]),
/// after keeping the windows of passes their cases now have.
pub(super) async fn count_ended(tx: &mut Tx, backend: Backend) -> Result<(), StoreError> {
    crate::history::keep_windows(&mut *tx, backend).await?;
    for statement in COUNT {
        sqlx::query(*statement).execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// Counts, in one transaction, every run that ended and is not counted
    /// yet: the coordinator's follow-up calls it each second, the store
    /// when it opens.
    pub async fn count_ended_runs(&self) -> Result<(), StoreError> {
        // The count reads (the windows of passes) before it writes: on
        // SQLite it takes the write lock from the start, as a transaction
        // whose reads saw the database before another writer committed
        // cannot write after it (SQLITE_BUSY_SNAPSHOT, "database is
        // locked", whatever the busy timeout).
        let begin = match self.backend {
            Backend::Sqlite => "BEGIN IMMEDIATE",
            Backend::Postgres => "BEGIN",
        };
        let mut tx = self.pool.begin_with(begin).await?;
        count_ended(&mut tx, self.backend).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Cases that cost retries in a project's runs that started on or after
    /// the day of `since`, most first.
    pub async fn flaky_cases(&self, project: &str, since: i64, limit: u32) -> Result<Vec<FlakyCase>, StoreError> {
        Ok(sqlx::query_as::<_, FlakyCase>(
            "SELECT case_id, CAST(SUM(retries) AS BIGINT) AS retries, \
             CAST(SUM(passed_on_retry) AS BIGINT) AS passed_on_retry, CAST(SUM(retried_runs) AS BIGINT) AS runs \
             FROM case_days WHERE project = $1 AND day >= $2 AND retries > 0 \
             GROUP BY case_id ORDER BY retries DESC, case_id LIMIT $3",
        )
        .bind(project)
        .bind(since.div_euclid(DAY_MS))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// How often each case's final result flipped between consecutive runs
    /// of a project (passed, then failed, or back), in runs that started on
    /// or after the day of `since`.
    pub async fn flipping_cases(
        &self,
        project: &str,
        since: i64,
        limit: u32,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(sqlx::query_as::<_, (String, i64)>(
            "SELECT case_id, CAST(SUM(flips) AS BIGINT) AS flips FROM case_days \
             WHERE project = $1 AND day >= $2 AND flips > 0 \
             GROUP BY case_id ORDER BY flips DESC, case_id LIMIT $3",
        )
        .bind(project)
        .bind(since.div_euclid(DAY_MS))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// The slowest passing cases of a project since the day of `since`, with
    /// their mean time in the older and the newer half of the window (split
    /// on a day's boundary).
    pub async fn slow_cases(
        &self,
        project: &str,
        since: i64,
        now: i64,
        limit: u32,
    ) -> Result<Vec<SlowCase>, StoreError> {
        let middle = (since + (now - since) / 2).div_euclid(DAY_MS);
        Ok(sqlx::query_as::<_, SlowCase>(
            // Summed as doubles (exact below 2^53): Postgres sums BIGINTs
            // as NUMERIC, which cost most of this page's time over a
            // nightly suite's 10,000 cases a day.
            "SELECT case_id, CAST(SUM(CAST(passes AS DOUBLE PRECISION)) AS BIGINT) AS attempts, \
             SUM(CAST(passed_ms AS DOUBLE PRECISION)) / SUM(CAST(passes AS DOUBLE PRECISION)) AS mean_ms, \
             CAST(MAX(max_passed_ms) AS BIGINT) AS max_ms, \
             SUM(CASE WHEN day < $3 THEN CAST(passed_ms AS DOUBLE PRECISION) END) \
             / SUM(CASE WHEN day < $3 THEN CAST(passes AS DOUBLE PRECISION) END) AS older_mean_ms, \
             SUM(CASE WHEN day >= $3 THEN CAST(passed_ms AS DOUBLE PRECISION) END) \
             / SUM(CASE WHEN day >= $3 THEN CAST(passes AS DOUBLE PRECISION) END) AS newer_mean_ms \
             FROM case_days WHERE project = $1 AND day >= $2 AND passes > 0 \
             GROUP BY case_id ORDER BY mean_ms DESC, case_id LIMIT $4",
        )
        .bind(project)
        .bind(since.div_euclid(DAY_MS))
        .bind(middle)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }
}
