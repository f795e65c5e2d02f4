//! What the dashboard reads: runs filtered and paged, a run's attempts, a
//! case's history across runs, and how busy each device was. Indexes carry
//! these (migration 0003), not caches; the cases that cost retries, flip or
//! are slowest come from a summary kept as runs end ([`super::case_days`]).

use super::{AttemptDetail, AttemptEnd, CaseAttempt, DeviceBusy, RunFilter, RunRow, Store, StoreError};

impl Store {
    /// Runs newest first, filtered; `limit + 1` rows are asked for, so that
    /// the caller knows whether there is a next page.
    pub async fn runs_page(&self, filter: &RunFilter, offset: u32, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        // A run still being written (see `create_run`) is not listed yet.
        let mut clauses: Vec<String> = vec!["written = 1".into()];
        let mut texts: Vec<String> = Vec::new();
        let mut numbers: Vec<i64> = Vec::new();
        for (column, value) in [("project", &filter.project), ("branch", &filter.branch)] {
            if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
                texts.push(value.clone());
                clauses.push(format!("{column} = ${}", texts.len()));
            }
        }
        // A run on several platforms lists them, `android,ios`: it is found
        // under each.
        if let Some(platform) = filter.platform.as_ref().filter(|v| !v.is_empty()) {
            texts.push(format!(",{platform},"));
            clauses.push(format!("(',' || platform || ',') LIKE ('%' || ${} || '%')", texts.len()));
        }
        match filter.result.as_deref() {
            None | Some("") => {}
            Some("running") => clauses.push("finished_at IS NULL".into()),
            Some(result) => {
                texts.push(result.to_owned());
                clauses.push(format!("result = ${}", texts.len()));
            }
        }
        // Numbers are bound after the texts: their placeholders follow.
        let mut number = |value: i64, clause: &str, numbers: &mut Vec<i64>| {
            numbers.push(value);
            clauses.push(format!("{clause} ${}", texts.len() + numbers.len()));
        };
        if let Some(from) = filter.from {
            number(from, "started_at >=", &mut numbers);
        }
        if let Some(to) = filter.to {
            number(to, "started_at <", &mut numbers);
        }
        let filters = format!(" WHERE {}", clauses.join(" AND "));
        let at = texts.len() + numbers.len();
        let sql = format!(
            "{}{filters} ORDER BY started_at DESC, id DESC LIMIT ${} OFFSET ${}",
            run_select!(),
            at + 1,
            at + 2
        );
        // Built from constants, column names chosen above and numbered placeholders.
        let mut query = sqlx::query_as::<_, RunRow>(sqlx::AssertSqlSafe(sql));
        for text in texts {
            query = query.bind(text);
        }
        for value in numbers {
            query = query.bind(value);
        }
        Ok(query.bind(i64::from(limit) + 1).bind(i64::from(offset)).fetch_all(&self.pool).await?)
    }

    /// Every attempt of a run, in the order they started.
    pub async fn run_attempts(&self, run_id: &str) -> Result<Vec<AttemptDetail>, StoreError> {
        let mut attempts = sqlx::query_as::<_, AttemptDetail>(
            "SELECT case_id, attempt, try_no, state, device_id, worker_id, platform, result, infrastructure, error, \
             started_at, finished_at, ms, run_case_json FROM attempts WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        // Sorted here rather than by the database: its sort of a nightly
        // run's wide rows by a collated text took half the page's time.
        attempts.sort_by(|a, b| {
            (a.started_at.is_none(), a.started_at, &a.case_id, a.attempt, a.try_no).cmp(&(
                b.started_at.is_none(),
                b.started_at,
                &b.case_id,
                b.attempt,
                b.try_no,
            ))
        });
        Ok(attempts)
    }

    /// How each finished attempt of a run ended, and nothing more: what a
    /// comparison reads of two nightly runs (their whole attempts, records
    /// and all, cost half its time).
    pub async fn run_ends(&self, run_id: &str) -> Result<Vec<AttemptEnd>, StoreError> {
        Ok(sqlx::query_as::<_, AttemptEnd>(
            "SELECT case_id, attempt, try_no, platform, result, infrastructure, ms FROM attempts \
             WHERE run_id = $1 AND state = 'done'",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many attempts of a run have finished, for live progress.
    pub async fn finished_attempts(&self, run_id: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM attempts WHERE run_id = $1 AND state = 'done' AND infrastructure = 0",
        )
        .bind(run_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// A case's finished attempts in a project, newest first (a done
    /// attempt always has `finished_at`: said, so that `attempts_case_finished`,
    /// which holds only such rows, serves the order).
    pub async fn case_history(&self, project: &str, case_id: &str, limit: u32) -> Result<Vec<CaseAttempt>, StoreError> {
        Ok(sqlx::query_as::<_, CaseAttempt>(
            "SELECT a.run_id, r.branch, r.started_at AS run_started_at, a.attempt, a.result, a.infrastructure, \
             a.device_id, a.platform, a.ms, a.finished_at, a.error, a.heap_start_kb, a.heap_end_kb, a.rss_start_kb, \
             a.rss_end_kb, a.render_commits, a.render_us FROM attempts a JOIN runs r ON r.id = a.run_id \
             WHERE a.case_id = $1 AND r.project = $2 AND a.state = 'done' AND a.finished_at IS NOT NULL \
             ORDER BY a.finished_at DESC LIMIT $3",
        )
        .bind(case_id)
        .bind(project)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Busy time per device since `since`, in buckets of `bucket_ms`
    /// (by when each attempt finished): utilisation over time.
    pub async fn device_busy(&self, since: i64, bucket_ms: i64) -> Result<Vec<DeviceBusy>, StoreError> {
        Ok(sqlx::query_as::<_, DeviceBusy>(
            // Per device of the fleet, its attempts since `since` from
            // `attempts_device`: without the join the planner read a whole
            // index of every attempt ever made (158 ms at a million).
            "SELECT a.device_id, CAST((a.finished_at - $1) / $2 AS BIGINT) AS bucket, COUNT(*) AS attempts, \
             CAST(SUM(a.finished_at - a.started_at) AS BIGINT) AS busy_ms \
             FROM devices d JOIN attempts a ON a.device_id = d.id \
             WHERE a.finished_at >= $1 AND a.started_at IS NOT NULL \
             GROUP BY a.device_id, CAST((a.finished_at - $1) / $2 AS BIGINT) ORDER BY a.device_id, bucket",
        )
        .bind(since)
        .bind(bucket_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The model of each device that has one (its slot's `model` label),
    /// for naming a run's lanes: one statement per chunk of devices.
    pub async fn device_models(
        &self,
        device_ids: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let mut models = std::collections::HashMap::new();
        for chunk in device_ids.chunks(self.rows()) {
            let ids: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 1)).collect();
            let sql = format!("SELECT id, device_json FROM devices WHERE id IN ({})", ids.join(", "));
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(id);
            }
            for (id, json) in query.fetch_all(&self.pool).await? {
                let device: serde_json::Value = match serde_json::from_str(&json) {
                    Ok(device) => device,
                    Err(error) => {
                        tracing::warn!(device = %id, %error, "a device's stored record does not parse; shown without its model");
                        continue;
                    }
                };
                if let Some(model) = device["labels"]["model"].as_str().filter(|m| !m.is_empty()) {
                    models.insert(id, model.to_owned());
                }
            }
        }
        Ok(models)
    }

    /// The projects that have runs, for the filters.
    pub async fn projects(&self) -> Result<Vec<String>, StoreError> {
        // One probe of `runs_project_started` per project, from the least
        // up (a loose index scan): DISTINCT read every run's entry, and the
        // filters are on every page of a history of 100,000 runs.
        Ok(sqlx::query_scalar::<_, String>(
            "WITH RECURSIVE listed(project) AS ( \
             SELECT MIN(project) FROM runs \
             UNION ALL SELECT (SELECT MIN(project) FROM runs WHERE project > listed.project) FROM listed \
             WHERE listed.project IS NOT NULL) \
             SELECT project FROM listed WHERE project IS NOT NULL ORDER BY project",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
