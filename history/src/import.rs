//! JUnit reports from other runners landed as runs (`POST
//! /api/v1/import/junit`, gRPC `Runs.Import`, `argus import junit`): read
//! whole first (a bad report is refused and nothing is written), then
//! written in one transaction, marked with where they came from.

use argus_cases::junit_read;
use argus_proto::run::{RunManifest, totals};
use argus_store::{ImportedRun, Store};

use argus_grid::error::CoreError;

/// The largest report taken.
pub const MAX_REPORT_BYTES: usize = 16 * 1024 * 1024;

/// A report to import and what to file it under.
#[derive(Debug, Clone, Default)]
pub struct ImportAsk {
    pub project: String,
    pub branch: String,
    pub commit: String,
    pub platform: String,
    /// The runner that wrote it, when the report does not say (`xctest`).
    pub source: String,
    pub report: Vec<u8>,
}

/// What was imported.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Imported {
    pub run_id: String,
    /// The runner, as given or as the report says.
    pub source: String,
    pub cases: u64,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
}

/// Checks, reads and writes a report; the run it became.
pub async fn import_junit(store: &Store, ask: ImportAsk, now_ms: i64) -> Result<Imported, CoreError> {
    let mut problems = Vec::new();
    if ask.project.trim().is_empty() {
        problems.push("project: required (the history the run joins)".to_owned());
    }
    for (field, value) in [
        ("project", &ask.project),
        ("branch", &ask.branch),
        ("commit", &ask.commit),
        ("platform", &ask.platform),
        ("source", &ask.source),
    ] {
        if value.chars().count() > argus_grid::submit::MAX_LABEL_CHARS {
            problems.push(format!(
                "{field}: {} characters; {} at most",
                value.chars().count(),
                argus_grid::submit::MAX_LABEL_CHARS
            ));
        }
        if value.chars().any(char::is_control) {
            problems.push(format!("{field}: control characters are not allowed"));
        }
    }
    if ask.report.len() > MAX_REPORT_BYTES {
        problems.push(format!("the report is {} bytes; {MAX_REPORT_BYTES} at most", ask.report.len()));
    }
    if !problems.is_empty() {
        return Err(CoreError::Invalid(problems.join("\n")));
    }
    let report = argus_proto::task::blocking("read a JUnit report", move || {
        junit_read::read(&ask.report, now_ms).map(|r| (r, ask))
    })
    .await
    .map_err(|e| CoreError::Internal(format!("reading the report stopped: {e}")))?;
    let (report, ask) = report.map_err(|e| CoreError::Invalid(format!("the JUnit report: {e}")))?;
    let source = if ask.source.trim().is_empty() { report.tool.clone() } else { ask.source.trim().to_owned() };
    let started: Vec<i64> = report
        .lines
        .iter()
        .map(|l| chrono::DateTime::parse_from_rfc3339(&l.started_at).map_or(now_ms, |t| t.timestamp_millis()))
        .collect();
    let started_at = report.started_ms.unwrap_or_else(|| started.iter().copied().min().unwrap_or(now_ms));
    let finished_at = started_at + report.lines.iter().map(|l| l.ms as i64).sum::<i64>();
    let counted = totals(&report.lines);
    let mut manifest = RunManifest {
        finished_at: Some(argus_grid::time::iso(finished_at)),
        platform: Some(ask.platform.trim().to_owned()).filter(|p| !p.is_empty()),
        totals: Some(counted),
        ..RunManifest::started(argus_grid::time::iso(started_at))
    };
    manifest.extra.insert("source".into(), serde_json::json!({ "format": "junit", "tool": source }));
    let text = |value: &str| Some(value.trim().to_owned()).filter(|v| !v.is_empty());
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let run = ImportedRun {
        id: run_id.clone(),
        project: ask.project.trim().to_owned(),
        branch: text(&ask.branch),
        commit: text(&ask.commit),
        started_at,
        finished_at,
        manifest_json: serde_json::to_string(&manifest).expect("a manifest is plain data"),
        lines: report
            .lines
            .into_iter()
            .map(|l| {
                let line = l.to_line();
                (l, line)
            })
            .collect(),
        started,
        trigger: format!("junit import: {source}"),
    };
    store.import_run(&run).await?;
    tracing::info!(run = %run_id, project = %run.project, %source, cases = counted.cases, "JUnit report imported");
    Ok(Imported {
        run_id,
        source,
        cases: counted.cases,
        passed: counted.passed,
        failed: counted.failed,
        skipped: counted.unsupported,
    })
}
