//! A run another runner made, written whole: `lynkeus report push` (the
//! coordinator's `/v1/runs` endpoints) hands over a run directory's
//! `run.json` and `cases.jsonl`, a JUnit import its report read into the
//! same lines, and it joins the same history, flaky ranking and case pages
//! as grid runs, marked by its trigger.

use super::{Store, StoreError, finish_run_in, placeholders, update_case_results};
use argus_proto::run::RunCase;

/// How a pushed run is marked.
pub const PUSHED: &str = "lynkeus report push";

/// A finished run from elsewhere, checked: each (case, attempt) once.
#[derive(Debug, Clone)]
pub struct ImportedRun {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub started_at: i64,
    pub finished_at: i64,
    pub manifest_json: String,
    /// Each attempt, as read, with its line as written (kept to the byte).
    pub lines: Vec<(RunCase, String)>,
    /// Each attempt's start, in epoch milliseconds, in the order of `lines`.
    pub started: Vec<i64>,
    /// Where it came from, shown as the run's trigger ([`PUSHED`], `junit
    /// import: pytest`).
    pub trigger: String,
}

/// The platform a pushed run's manifest names; none (said in the log)
/// when it does not read.
fn platform_of(run: &ImportedRun) -> Option<String> {
    match serde_json::from_str::<argus_proto::run::RunManifest>(&run.manifest_json) {
        Ok(manifest) => manifest.platform,
        Err(error) => {
            tracing::warn!(run = %run.id, %error, "the pushed run's manifest does not read: its platform is left empty");
            None
        }
    }
}

impl Store {
    /// Writes a pushed run, its cases, attempts and steps, and ends it, in
    /// one transaction.
    pub async fn import_run(&self, run: &ImportedRun) -> Result<(), StoreError> {
        let run_platform = platform_of(run);
        let retries = run.lines.iter().map(|(c, _)| i64::from(c.attempt) - 1).max().unwrap_or(0).max(0);
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO runs (id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, \
             priority, started_at, manifest_json, detached) VALUES ($1, $2, $3, $4, $5, '{}', '{}', $6, 1, $7, $8, 1)",
        )
        .bind(&run.id)
        .bind(&run.project)
        .bind(&run.branch)
        .bind(&run.commit)
        .bind(&run.trigger)
        .bind(retries)
        .bind(run.started_at)
        .bind(&run.manifest_json)
        .execute(&mut *tx)
        .await?;
        // Each case once, in first-seen order, with its last attempt's
        // result as its final one.
        let mut cases: Vec<(&RunCase, i64)> = Vec::new();
        for (case, _) in &run.lines {
            match cases.iter_mut().find(|(c, _)| c.id == case.id) {
                Some(seen) => seen.0 = case,
                None => cases.push((case, cases.len() as i64)),
            }
        }
        let mut finals = Vec::with_capacity(cases.len());
        for chunk in cases.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO cases (run_id, case_id, file, title, ordinal, expected_ms, estimate_source) VALUES {}",
                placeholders(chunk.len(), 7)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (case, ordinal) in chunk {
                query = query
                    .bind(&run.id)
                    .bind(&case.id)
                    .bind(&case.file)
                    .bind(&case.title)
                    .bind(*ordinal)
                    .bind(case.ms as i64)
                    .bind("pushed");
                finals.push((run.id.clone(), case.id.clone(), result_name(case)));
            }
            query.execute(&mut *tx).await?;
        }
        let attempts: Vec<(usize, &(RunCase, String))> = run.lines.iter().enumerate().collect();
        for chunk in attempts.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, platform, result, infrastructure, \
                 created_at, started_at, finished_at, ms, run_case_json, seq) VALUES {}",
                placeholders(chunk.len(), 14)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (index, (case, line)) in chunk {
                let started = run.started.get(*index).copied().unwrap_or(run.started_at);
                let platform = case.device.as_ref().map(|d| d.platform.clone()).or_else(|| run_platform.clone());
                query = query
                    .bind(&run.id)
                    .bind(&case.id)
                    .bind(i64::from(case.attempt))
                    .bind(i64::from(case.attempt))
                    .bind("done")
                    .bind(platform)
                    .bind(result_name(case))
                    .bind(0i64)
                    .bind(started)
                    .bind(started)
                    .bind(started + case.ms as i64)
                    .bind(case.ms as i64)
                    .bind(line)
                    .bind(*index as i64 + 1);
            }
            query.execute(&mut *tx).await?;
        }
        let steps: Vec<(&RunCase, i64, &argus_proto::run::RunStep)> = run
            .lines
            .iter()
            .flat_map(|(case, _)| case.steps.iter().enumerate().map(move |(i, step)| (case, i as i64, step)))
            .collect();
        for chunk in steps.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO steps (run_id, case_id, attempt, try_no, idx, step, status, ms, error) VALUES {}",
                placeholders(chunk.len(), 9)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (case, idx, step) in chunk {
                let status = serde_json::to_value(step.status).ok().and_then(|v| v.as_str().map(str::to_owned));
                query = query
                    .bind(&run.id)
                    .bind(&case.id)
                    .bind(i64::from(case.attempt))
                    .bind(i64::from(case.attempt))
                    .bind(*idx)
                    .bind(&step.step)
                    .bind(status.unwrap_or_default())
                    .bind(step.ms as i64)
                    .bind(&step.error);
            }
            query.execute(&mut *tx).await?;
        }
        update_case_results(&mut tx, &finals, self.rows()).await?;
        finish_run_in(&mut tx, &run.id, run.finished_at, &run.manifest_json).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A result as the store names it (`passed`, `failed`, `unsupported`).
fn result_name(case: &RunCase) -> String {
    serde_json::to_value(case.result).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
