//! Runs: written whole in parts, cancelled, finished, and read back for
//! recovery, `argus run --out` and the dashboard.

use super::*;

impl Store {
    /// A run, its files, its cases, and one pending attempt per case, in one
    /// transaction.
    pub async fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        // The run and its files first, marked unwritten; then its cases in
        // parts, each its own transaction ([`cases_per_part`]: on SQLite the
        // owner task's results go between two); then the mark comes off.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO runs (id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, \
             priority, started_at, manifest_json, detached, rerun_of, testowners, written) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 0)",
        )
        .bind(&run.id)
        .bind(&run.project)
        .bind(&run.branch)
        .bind(&run.commit)
        .bind(&run.trigger)
        .bind(&run.selector_json)
        .bind(&run.config_json)
        .bind(i64::from(run.retries))
        .bind(i64::from(run.priority))
        .bind(run.started_at)
        .bind(&run.manifest_json)
        .bind(i64::from(run.detached))
        .bind(&run.rerun_of)
        .bind(&run.testowners)
        .execute(&mut *tx)
        .await?;
        // A few statements per 500 cases, whatever the suite's size.
        for chunk in run.files.chunks(self.rows()) {
            let sql = format!("INSERT INTO run_files (run_id, path, source) VALUES {}", placeholders(chunk.len(), 3));
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (path, source) in chunk {
                query = query.bind(&run.id).bind(path).bind(source);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        if let Err(error) = self.write_run_cases(run).await {
            // Nothing half-written stays. Should this fail too, the next
            // coordinator to start removes the run (`written` is still 0).
            let removed = self.remove_unwritten(Some(&run.id)).await;
            if let Err(cleanup) = removed {
                tracing::warn!(run = %run.id, error = %cleanup, "cannot remove a run whose writing failed; the next start removes it");
            }
            return Err(error);
        }
        Ok(())
    }

    /// The run's cases, [`cases_per_part`] to a transaction, then their
    /// first attempts and the mark that the run is whole.
    async fn write_run_cases(&self, run: &NewRun) -> Result<(), StoreError> {
        for part in run.cases.chunks(cases_per_part(self.backend)) {
            let mut tx = self.pool.begin().await?;
            for chunk in part.chunks(self.rows()) {
                let sql = format!(
                    "INSERT INTO cases (run_id, case_id, file, title, ordinal, expected_ms, estimate_source, muted, \
                     owner) VALUES {}",
                    placeholders(chunk.len(), 9)
                );
                // Built from constants and numbered placeholders only.
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for case in chunk {
                    query = query
                        .bind(&run.id)
                        .bind(&case.case_id)
                        .bind(&case.file)
                        .bind(&case.title)
                        .bind(case.ordinal)
                        .bind(case.expected_ms)
                        .bind(&case.estimate_source)
                        .bind(&case.muted)
                        .bind(&case.owner);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
        // Every case's first attempt, made from the cases by the database
        // (one statement, not a bound row per case), with the mark.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, created_at) \
             SELECT run_id, case_id, 1, 1, 'pending', $2 FROM cases WHERE run_id = $1",
        )
        .bind(&run.id)
        .bind(run.started_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE runs SET written = 1 WHERE id = $1").bind(&run.id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the runs a coordinator stopped while writing (see
    /// `create_run`): their clients were never told of them. Called before
    /// the open runs are read back.
    pub async fn remove_unwritten_runs(&self) -> Result<u64, StoreError> {
        self.remove_unwritten(None).await
    }

    /// Removes the unwritten run `id`, or every unwritten run (`None`),
    /// with their cases, attempts and files in one transaction, those rows
    /// first: on Postgres no foreign key cascades (migration 0018).
    async fn remove_unwritten(&self, id: Option<&str>) -> Result<u64, StoreError> {
        // Run ids are never empty: `''` stands for every run.
        const WHICH: &str = "written = 0 AND ($1 = '' OR id = $1)";
        let id = id.unwrap_or_default();
        let mut tx = self.pool.begin().await?;
        for table in ["attempts", "cases", "run_files"] {
            let sql = format!("DELETE FROM {table} WHERE run_id IN (SELECT id FROM runs WHERE {WHICH})");
            // Built from constants only.
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).execute(&mut *tx).await?;
        }
        let sql = format!("DELETE FROM runs WHERE {WHICH}");
        // Built from constants only.
        let removed = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        Ok(removed)
    }

    /// Cancels a run in one transaction: its open leases end, their attempts
    /// are done (as infrastructure, with `reason`), its waiting attempts are
    /// dropped, and the run gets `manifest_json` (cut short: no totals).
    pub async fn cancel_run(&self, run_id: &str, reason: &str, at: i64, manifest_json: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE leases SET ended_at = $1, end_reason = $2 WHERE run_id = $3 AND ended_at IS NULL")
            .bind(at)
            .bind(reason)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE attempts SET state = 'done', infrastructure = 1, error = $1, finished_at = $2 \
             WHERE run_id = $3 AND state = 'leased'",
        )
        .bind(reason)
        .bind(at)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE attempts SET state = 'cancelled', error = $1, finished_at = $2 WHERE run_id = $3 AND state = 'pending'")
            .bind(reason)
            .bind(at)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        let updated = sqlx::query(
            "UPDATE runs SET finished_at = $1, manifest_json = $2, result = 'cancelled', waiting_reason = NULL \
             WHERE id = $3 AND finished_at IS NULL",
        )
        .bind(at)
        .bind(manifest_json)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            // Finished or cancelled already; nothing of it changes.
            tx.rollback().await?;
            return Ok(());
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn set_case_result(&self, run_id: &str, case_id: &str, result: &str) -> Result<(), StoreError> {
        self.set_case_results(&[(run_id.to_owned(), case_id.to_owned(), result.to_owned())]).await
    }

    /// Cases' final results (run, case, result), one statement per chunk.
    pub async fn set_case_results(&self, results: &[(String, String, String)]) -> Result<(), StoreError> {
        if results.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        update_case_results(&mut tx, results, self.rows()).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn finish_run(&self, run_id: &str, finished_at: i64, manifest_json: &str) -> Result<(), StoreError> {
        // The run's end and what it adds to the flaky-and-slow summary
        // commit together.
        let mut tx = self.pool.begin().await?;
        finish_run_in(&mut tx, run_id, finished_at, manifest_json).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The `RunCase` lines of a run's finished attempts (infrastructure
    /// failures left out), in the order they finished, each with the device
    /// it ran on (kept beside the record, typed): the run directory's
    /// `cases.jsonl`. A record that does not read back is an error naming it.
    pub async fn run_lines(&self, run_id: &str) -> Result<Vec<argus_proto::run::RunCase>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_case_json, device_id, worker_id, platform FROM attempts WHERE run_id = $1 AND state = 'done' \
             AND infrastructure = 0 AND run_case_json IS NOT NULL ORDER BY finished_at, case_id, attempt",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .enumerate()
            .map(|(n, row)| {
                let json: String = row.get(0);
                let mut line: argus_proto::run::RunCase = serde_json::from_str(&json).map_err(|error| {
                    StoreError::Corrupt(format!("run {run_id}: line {} of its cases.jsonl: {error}", n + 1))
                })?;
                // An imported run's lines keep the device they name.
                if let Some(id) = row.get::<Option<String>, _>(1) {
                    line.device = Some(argus_proto::run::RunDevice {
                        id,
                        worker: row.get::<Option<String>, _>(2).unwrap_or_default(),
                        platform: row.get::<Option<String>, _>(3).unwrap_or_default(),
                    });
                }
                Ok(line)
            })
            .collect()
    }

    /// What each finished attempt of a run came to (infrastructure failures
    /// left out), from the typed columns: what a restarted coordinator
    /// counts the run's totals and devices from.
    pub async fn run_outcomes(&self, run_id: &str) -> Result<Vec<OutcomeRow>, StoreError> {
        Ok(sqlx::query_as::<_, OutcomeRow>(
            "SELECT case_id, attempt, result, device_id, platform FROM attempts WHERE run_id = $1 AND state = 'done' \
             AND infrastructure = 0 AND result IS NOT NULL ORDER BY finished_at, case_id, attempt",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A run's finished attempts (infrastructure failures included), in the
    /// order of their updates: what a restarted coordinator replays to a
    /// client that watches again.
    pub async fn run_log(&self, run_id: &str) -> Result<Vec<LogRow>, StoreError> {
        Ok(sqlx::query_as::<_, LogRow>(
            "SELECT seq, case_id, attempt, infrastructure, error, run_case_json, device_id, worker_id, platform, finished_at \
             FROM attempts WHERE run_id = $1 AND state = 'done' \
             ORDER BY COALESCE(seq, 0), finished_at, case_id, attempt, try_no",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Why a run waits (`None`: it does not), for the dashboard.
    pub async fn set_waiting(&self, run_id: &str, reason: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET waiting_reason = $1 WHERE id = $2")
            .bind(reason)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Runs that have not finished: what a restarted coordinator takes up again.
    pub async fn open_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        Ok(sqlx::query_as::<_, RunRow>(RUN_COLUMNS_OPEN).fetch_all(&self.pool).await?)
    }

    /// A run's case files: path and text.
    pub async fn run_files(&self, run_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT path, source FROM run_files WHERE run_id = $1 ORDER BY path")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1))).collect())
    }

    /// A run's cases, in suite order.
    pub async fn run_cases(&self, run_id: &str) -> Result<Vec<CaseRow>, StoreError> {
        Ok(sqlx::query_as::<_, CaseRow>(
            "SELECT case_id, file, ordinal, expected_ms, final_result, muted, owner FROM cases WHERE run_id = $1 \
             ORDER BY ordinal",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Each case's title, mute and owner in a run: what its page adds to
    /// the attempts (fewer columns than [`Store::run_cases`]: a nightly
    /// run's page reads 10,000).
    pub async fn run_case_marks(&self, run_id: &str) -> Result<Vec<CaseMarks>, StoreError> {
        Ok(sqlx::query_as::<_, CaseMarks>("SELECT case_id, title, muted, owner FROM cases WHERE run_id = $1")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?)
    }

    /// The cases of a run whose final result is failed, in its order: what
    /// is explained of it (a nightly run has 10,000 cases and a few such).
    pub async fn failed_cases(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar::<_, String>(
            "SELECT case_id FROM cases WHERE run_id = $1 AND final_result = 'failed' ORDER BY ordinal",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The run of `project` on `branch` (`''`: none named) that started
    /// last before `before_ms`: what a run is compared with by default.
    pub async fn previous_run(
        &self,
        project: &str,
        branch: &str,
        before_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM runs WHERE project = $1 AND COALESCE(branch, '') = $2 AND started_at < $3 AND written = 1 \
             ORDER BY started_at DESC LIMIT 1",
        )
        .bind(project)
        .bind(branch)
        .bind(before_ms)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn get_run(&self, run_id: &str) -> Result<RunRow, StoreError> {
        sqlx::query_as::<_, RunRow>(RUN_COLUMNS_BY_ID)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NoRun(run_id.to_owned()))
    }

    /// The newest runs first.
    pub async fn list_runs(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        Ok(sqlx::query_as::<_, RunRow>(RUN_COLUMNS_NEWEST).bind(i64::from(limit)).fetch_all(&self.pool).await?)
    }
}

/// Ends a run inside `tx`: its end, the columns the runs list filters on
/// (from the manifest; a run cut short has no totals), and what it adds to
/// the flaky-and-slow summary.
pub(super) async fn finish_run_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    run_id: &str,
    finished_at: i64,
    manifest_json: &str,
) -> Result<(), StoreError> {
    let manifest: Option<argus_proto::run::RunManifest> = match serde_json::from_str(manifest_json) {
        Ok(manifest) => Some(manifest),
        Err(error) => {
            tracing::warn!(run = run_id, %error, "the run's manifest does not read back: its platform is left empty");
            None
        }
    };
    // One platform, or those of a run that spanned several: `android,ios`.
    let platform = manifest.as_ref().and_then(|m| {
        m.platform.clone().or_else(|| {
            let listed = m.extra.get("platforms")?.as_array()?;
            Some(listed.iter().filter_map(|p| p.as_str()).collect::<Vec<_>>().join(","))
        })
    });
    let totals = manifest.and_then(|m| m.totals);
    // A run whose only failures are muted cases passed (its totals still
    // count them: lynkeus' results are kept as they were).
    let muted_failed: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM cases WHERE run_id = $1 AND final_result = 'failed' AND muted IS NOT NULL",
    )
    .bind(run_id)
    .fetch_one(&mut **tx)
    .await?;
    let result = match &totals {
        Some(t) if t.failed as i64 > muted_failed => "failed",
        Some(_) => "passed",
        None => "cancelled",
    };
    let count = |pick: fn(&argus_proto::run::RunTotals) -> u64| totals.as_ref().map(|t| pick(t) as i64);
    let updated = sqlx::query(
        "UPDATE runs SET finished_at = $1, manifest_json = $2, platform = $3, result = $4, cases = $5, \
         passed = $6, failed = $7, retried = $8, waiting_reason = NULL, muted_failed = $10 WHERE id = $9",
    )
    .bind(finished_at)
    .bind(manifest_json)
    .bind(platform)
    .bind(result)
    .bind(count(|t| t.cases))
    .bind(count(|t| t.passed))
    .bind(count(|t| t.failed))
    .bind(count(|t| t.retried))
    .bind(run_id)
    .bind(totals.as_ref().map(|_| muted_failed))
    .execute(&mut **tx)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(StoreError::NoRun(run_id.to_owned()));
    }
    // What the run adds to the flaky-and-slow summary is counted after, by
    // [`Store::count_ended_runs`]: over a nightly run's attempts that takes
    // a second or more, which the coordinator's owner task must not wait.
    Ok(())
}

/// Sets the final result of `rows` cases, each found by its primary key.
pub(super) fn case_results_sql(rows: usize) -> String {
    format!(
        "UPDATE cases SET final_result = v.column3 FROM (VALUES {}) AS v \
         WHERE cases.run_id = v.column1 AND cases.case_id = v.column2",
        placeholders(rows, 3)
    )
}

/// Cases' final results (run, case, result), one statement per chunk.
pub(super) async fn update_case_results(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    results: &[(String, String, String)],
    rows: usize,
) -> Result<(), StoreError> {
    for chunk in results.chunks(rows) {
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(case_results_sql(chunk.len())));
        for (run_id, case_id, result) in chunk {
            query = query.bind(run_id).bind(case_id).bind(result);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}
