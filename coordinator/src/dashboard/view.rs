//! What the dashboard shows, built once from the store's rows and served
//! both as JSON (`/api/v1/…`) and as pages: one shape for both.

use std::collections::BTreeMap;

use argus_proto::run::RunCase;
use serde::Serialize;

use crate::store::{AttemptDetail, CaseAttempt, RunRow};

/// Epoch milliseconds as ISO 8601 (UTC, seconds).
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_default()
}

/// `1.2 s`, `3 m 04 s`, `850 ms`.
pub fn duration(ms: i64) -> String {
    match ms {
        ..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} m {:02} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub trigger: Option<String>,
    pub started_ms: i64,
    pub started: String,
    pub finished_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    /// `running`, `passed`, `failed` or `cancelled`.
    pub result: String,
    pub platform: Option<String>,
    pub cases: Option<i64>,
    pub passed: Option<i64>,
    pub failed: Option<i64>,
    pub retried: Option<i64>,
    /// For a run that is going: attempts finished so far.
    pub finished_attempts: Option<i64>,
    /// For a run that waits: why no device takes its attempts.
    pub waiting: Option<String>,
}

impl RunView {
    pub fn new(row: RunRow) -> Self {
        let result = match (&row.result, row.finished_at) {
            (_, None) => "running".to_owned(),
            (Some(result), Some(_)) => result.clone(),
            (None, Some(_)) => "cancelled".to_owned(),
        };
        Self {
            started: iso(row.started_at),
            duration_ms: row.finished_at.map(|f| f - row.started_at),
            id: row.id,
            project: row.project,
            branch: row.branch,
            commit: row.commit_sha,
            trigger: row.trigger_by,
            started_ms: row.started_at,
            finished_ms: row.finished_at,
            result,
            platform: row.platform,
            cases: row.cases,
            passed: row.passed,
            failed: row.failed,
            retried: row.retried,
            finished_attempts: None,
            waiting: row.waiting_reason.filter(|_| row.finished_at.is_none()),
        }
    }

    pub fn duration_text(&self) -> String {
        self.duration_ms.map(duration).unwrap_or_else(|| "—".into())
    }

    pub fn short_commit(&self) -> &str {
        self.commit.as_deref().map(|c| &c[..c.len().min(8)]).unwrap_or("")
    }
}

/// One attempt: where and when it ran, and its line of `cases.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    pub attempt: i64,
    pub try_no: i64,
    pub device: Option<String>,
    pub worker: Option<String>,
    /// `passed`, `failed`, `unsupported`, `infrastructure`, `running` or `pending`.
    pub result: String,
    pub error: Option<String>,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub ms: Option<i64>,
    pub line: Option<RunCase>,
}

impl AttemptView {
    fn new(row: AttemptDetail) -> Self {
        let result = match (row.state.as_str(), row.infrastructure, row.result) {
            (_, 1, _) => "infrastructure".to_owned(),
            ("done", _, Some(result)) => result,
            ("leased", _, _) => "running".to_owned(),
            (state, _, _) => state.to_owned(),
        };
        Self {
            attempt: row.attempt,
            try_no: row.try_no,
            device: row.device_id,
            worker: row.worker_id,
            result,
            error: row.error,
            started_ms: row.started_at,
            finished_ms: row.finished_at,
            ms: row.ms,
            line: row.run_case_json.as_deref().and_then(|j| serde_json::from_str(j).ok()),
        }
    }

    /// The first step that failed, with its error.
    pub fn failed_step(&self) -> Option<(&str, &str)> {
        let line = self.line.as_ref()?;
        let step = line.steps.iter().find(|s| s.error.is_some())?;
        Some((step.step.as_str(), step.error.as_deref().unwrap_or("")))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseView {
    pub id: String,
    pub title: Option<String>,
    /// The last real attempt's result, or `pending`/`running`.
    pub result: String,
    pub attempts: Vec<AttemptView>,
}

impl CaseView {
    /// Failed first, then the rest, each in suite order.
    fn rank(&self) -> u8 {
        match self.result.as_str() {
            "failed" => 0,
            "running" => 1,
            "pending" => 2,
            "unsupported" => 3,
            _ => 4,
        }
    }

    pub fn retried(&self) -> bool {
        self.attempts.iter().any(|a| a.attempt > 1)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    pub run: RunView,
    pub cases: Vec<CaseView>,
}

impl RunDetail {
    pub fn new(run: RunView, attempts: Vec<AttemptDetail>) -> Self {
        let mut cases: Vec<CaseView> = Vec::new();
        for row in attempts {
            let case_id = row.case_id.clone();
            let attempt = AttemptView::new(row);
            match cases.iter_mut().find(|c| c.id == case_id) {
                Some(case) => case.attempts.push(attempt),
                None => cases.push(CaseView {
                    id: case_id,
                    title: attempt.line.as_ref().and_then(|l| l.title.clone()),
                    result: String::new(),
                    attempts: vec![attempt],
                }),
            }
        }
        for case in &mut cases {
            case.attempts.sort_by_key(|a| (a.attempt, a.try_no));
            let last = case.attempts.iter().rev().find(|a| a.result != "infrastructure").or(case.attempts.last());
            case.result = last.map(|a| a.result.clone()).unwrap_or_else(|| "pending".into());
            if case.title.is_none() {
                case.title = case.attempts.iter().find_map(|a| a.line.as_ref()?.title.clone());
            }
        }
        cases.sort_by_key(CaseView::rank);
        Self { run, cases }
    }

    /// Per device, the attempts it ran, for the timeline.
    pub fn lanes(&self) -> BTreeMap<String, Vec<(&str, &AttemptView)>> {
        let mut lanes: BTreeMap<String, Vec<(&str, &AttemptView)>> = BTreeMap::new();
        for case in &self.cases {
            for attempt in &case.attempts {
                if let (Some(device), Some(_)) = (&attempt.device, attempt.started_ms) {
                    lanes.entry(device.clone()).or_default().push((case.id.as_str(), attempt));
                }
            }
        }
        lanes
    }
}

/// A case across runs.
#[derive(Debug, Clone, Serialize)]
pub struct CaseHistory {
    pub project: String,
    pub case_id: String,
    pub attempts: Vec<CaseAttemptView>,
    /// Runs in which the case needed a retry or failed, over the runs shown.
    pub flake_rate: f64,
    pub failed_on: BTreeMap<String, i64>,
    pub last_failure: Option<CaseAttemptView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseAttemptView {
    pub run_id: String,
    pub branch: Option<String>,
    pub run_started: String,
    pub attempt: i64,
    pub result: String,
    pub device: Option<String>,
    pub ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub error: Option<String>,
}

impl CaseHistory {
    pub fn flake_percent(&self) -> String {
        format!("{:.0}", self.flake_rate * 100.0)
    }

    pub fn new(project: String, case_id: String, rows: Vec<CaseAttempt>) -> Self {
        let attempts: Vec<CaseAttemptView> = rows
            .into_iter()
            .map(|r| CaseAttemptView {
                run_started: iso(r.run_started_at),
                run_id: r.run_id,
                branch: r.branch,
                attempt: r.attempt,
                result: if r.infrastructure == 1 { "infrastructure".into() } else { r.result.unwrap_or_default() },
                device: r.device_id,
                ms: r.ms,
                finished_ms: r.finished_at,
                error: r.error,
            })
            .collect();
        let mut runs: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
        let mut failed_on: BTreeMap<String, i64> = BTreeMap::new();
        for attempt in &attempts {
            let run = runs.entry(attempt.run_id.as_str()).or_default();
            if attempt.result == "failed" {
                run.0 = true;
                *failed_on.entry(attempt.device.clone().unwrap_or_default()).or_default() += 1;
            }
            if attempt.result == "passed" {
                run.1 = true;
            }
        }
        // Flaky: a run where it both failed and passed.
        let flaky = runs.values().filter(|(failed, passed)| *failed && *passed).count();
        let flake_rate = if runs.is_empty() { 0.0 } else { flaky as f64 / runs.len() as f64 };
        let last_failure = attempts.iter().find(|a| a.result == "failed").cloned();
        Self { project, case_id, attempts, flake_rate, failed_on, last_failure }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(1_250), "1.2 s");
        assert_eq!(duration(184_000), "3 m 04 s");
        assert_eq!(iso(0), "1970-01-01 00:00:00");
    }
}
