//! The run directory: what `lynkeus case run --out DIR` writes and what every
//! report, dashboard and script reads.
//!
//! - `run.json`: a [`RunManifest`], written at the start and again at the end.
//! - `cases.jsonl`: one [`RunCase`] per line, one line per attempt.
//!
//! Struct field order is the key order lynkeus writes, so serialising these
//! types gives byte-compatible lines. Fields are only ever added: unknown
//! fields are kept in `extra` and written back after the known ones, and a
//! reader refuses a schema it does not know.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The only schema this reader understands.
pub const RUN_SCHEMA: u32 = 1;
/// The manifest's file name inside a run directory.
pub const MANIFEST_FILE: &str = "run.json";
/// The attempts' file name inside a run directory.
pub const CASES_FILE: &str = "cases.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{path}: unknown run schema {found} (this reader knows schema {RUN_SCHEMA})")]
    UnknownSchema { path: String, found: Value },
    #[error("{path}: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error("{path}:{line}: {source}")]
    Line { path: String, line: usize, source: serde_json::Error },
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunTotals {
    pub cases: u64,
    pub passed: u64,
    pub failed: u64,
    pub unsupported: u64,
    pub retried: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunManifest {
    pub schema: u32,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<RunTotals>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunManifest {
    /// The manifest of a run that has just started.
    pub fn started(started_at: impl Into<String>) -> Self {
        Self {
            schema: RUN_SCHEMA,
            started_at: started_at.into(),
            finished_at: None,
            platform: None,
            native: None,
            totals: None,
            extra: Map::new(),
        }
    }

    /// Reads a manifest, refusing any schema but [`RUN_SCHEMA`]. `path` only
    /// names the source in errors.
    pub fn from_json(text: &str, path: &str) -> Result<Self, RunError> {
        let value: Value = serde_json::from_str(text).map_err(|source| RunError::Json { path: path.into(), source })?;
        let schema = value.get("schema").cloned().unwrap_or(Value::Null);
        if schema.as_u64() != Some(u64::from(RUN_SCHEMA)) {
            return Err(RunError::UnknownSchema { path: path.into(), found: schema });
        }
        serde_json::from_value(value).map_err(|source| RunError::Json { path: path.into(), source })
    }

    /// Pretty-printed with a two-space indent and a trailing newline, as
    /// lynkeus writes it.
    pub fn to_json_pretty(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A run that was cut short has no `finishedAt`.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseResult {
    Passed,
    Failed,
    Unsupported,
}

impl CaseResult {
    /// As `cases.jsonl` and the store spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseResult::Passed => "passed",
            CaseResult::Failed => "failed",
            CaseResult::Unsupported => "unsupported",
        }
    }

    /// Reads [`CaseResult::as_str`]'s spelling back.
    pub fn from_name(name: &str) -> Option<Self> {
        [CaseResult::Passed, CaseResult::Failed, CaseResult::Unsupported].into_iter().find(|r| r.as_str() == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Passed,
    Failed,
    Skipped,
    Unsupported,
}

impl StepStatus {
    /// As `cases.jsonl` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Passed => "passed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Unsupported => "unsupported",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Setup,
    Steps,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventOrigin {
    App,
    Server,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub origin: EventOrigin,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub props: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// ISO 8601.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    pub step: String,
    pub status: StepStatus,
    pub ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<RunEvent>>,
    /// Relative to the run directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    #[serde(
        default,
        rename = "videoS",
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::number::js_opt"
    )]
    pub video_s: Option<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunEvidence {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// The runner always writes it (empty when no request went out, as
    /// lynkeus' runner does); a line written without it reads back without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// One attempt of one case: one line of `cases.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCase {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Relative to where the run started.
    pub file: String,
    pub attempt: u32,
    pub result: CaseResult,
    /// ISO 8601 with milliseconds and `Z`.
    pub started_at: String,
    pub ms: u64,
    pub steps: Vec<RunStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<RunEvidence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<String>,
    /// Where the attempt ran: Argus' own field, added where a run directory
    /// is written (the grid keeps it typed beside the record, not in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<RunDevice>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `cases.jsonl` line's `device`: the device id (`worker/slot`), its
/// platform and its worker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunDevice {
    pub id: String,
    pub platform: String,
    pub worker: String,
}

impl RunCase {
    /// One compact line, without the newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Totals as lynkeus counts them: over each case's **last** attempt, in the
/// order given; `retried` counts cases whose last attempt is past the first.
pub fn totals<'a>(attempts: impl IntoIterator<Item = &'a RunCase>) -> RunTotals {
    totals_of(attempts.into_iter().map(|a| (a.id.as_str(), a.attempt, a.result)))
}

/// [`totals`] over each attempt's case id, attempt number and result.
pub fn totals_of<'a>(attempts: impl IntoIterator<Item = (&'a str, u32, CaseResult)>) -> RunTotals {
    // Each case's last attempt, found by its id: a nightly run has 100,000.
    let mut last: std::collections::HashMap<&str, (u32, CaseResult)> = std::collections::HashMap::new();
    for (id, attempt, result) in attempts {
        let slot = last.entry(id).or_insert((attempt, result));
        if attempt >= slot.0 {
            *slot = (attempt, result);
        }
    }
    let mut totals = RunTotals { cases: last.len() as u64, ..RunTotals::default() };
    for (attempt, result) in last.into_values() {
        match result {
            CaseResult::Passed => totals.passed += 1,
            CaseResult::Failed => totals.failed += 1,
            CaseResult::Unsupported => totals.unsupported += 1,
        }
        if attempt > 1 {
            totals.retried += 1;
        }
    }
    totals
}

/// Reads `cases.jsonl` text; errors name the line.
pub fn parse_cases(text: &str, path: &str) -> Result<Vec<RunCase>, RunError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|source| RunError::Line { path: path.into(), line: n + 1, source })
        })
        .collect()
}

/// A run directory as read back: the manifest and every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDir {
    pub manifest: RunManifest,
    pub cases: Vec<RunCase>,
}

impl RunDir {
    /// Reads `dir/run.json` and `dir/cases.jsonl`, refusing an unknown schema.
    pub fn read(dir: &Path) -> Result<Self, RunError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map(|text| (text, path.display().to_string()))
                .map_err(|source| RunError::Io { path: path.display().to_string(), source })
        };
        let (manifest_text, manifest_path) = read(MANIFEST_FILE)?;
        let manifest = RunManifest::from_json(&manifest_text, &manifest_path)?;
        let (cases_text, cases_path) = read(CASES_FILE)?;
        let cases = parse_cases(&cases_text, &cases_path)?;
        Ok(Self { manifest, cases })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The two lines of spec §6.6, byte for byte.
    const PAY_FAILED: &str = r#"{"id":"pay","title":"Paying a friend","description":"The money leaves one wallet and reaches the other.","file":"cases/pay.md","attempt":1,"result":"failed","startedAt":"2026-01-02T03:00:01.000Z","ms":1200,"steps":[{"step":"create_user as: a","status":"passed","ms":300,"section":"setup"},{"step":"app.press #send","status":"passed","ms":40,"section":"steps","events":[{"origin":"app","name":"Tap - Send","props":{"amount":10},"route":"Pay.Main"}]},{"step":"app.see Sent","status":"failed","ms":3000,"error":"not on screen: Sent","section":"steps"}],"evidence":{"why":"the transfer was refused"}}"#;
    const PAY_PASSED: &str = r#"{"id":"pay","title":"Paying a friend","description":"The money leaves one wallet and reaches the other.","file":"cases/pay.md","attempt":2,"result":"passed","startedAt":"2026-01-02T03:00:30.000Z","ms":1200,"steps":[{"step":"create_user as: a","status":"passed","ms":300,"section":"setup"},{"step":"app.press #send","status":"passed","ms":40,"section":"steps","events":[{"origin":"app","name":"Tap - Send","props":{"amount":10},"route":"Pay.Main"}]},{"step":"app.see Sent","status":"passed","ms":5,"section":"steps"}]}"#;
    const UNSUPPORTED: &str = r#"{"id":"stores","file":"cases/stores.md","attempt":1,"result":"unsupported","startedAt":"2026-01-02T03:02:00.000Z","ms":35,"steps":[{"step":"app.see text: Hello","status":"passed","ms":12,"section":"steps"},{"step":"app.call command: stores","status":"unsupported","ms":3,"error":"this host has no stores","section":"steps"},{"step":"app.see text: 25 points","status":"skipped","ms":0,"section":"steps"}]}"#;

    #[test]
    fn case_lines_round_trip_byte_for_byte() {
        for line in [PAY_FAILED, PAY_PASSED, UNSUPPORTED] {
            let case: RunCase = serde_json::from_str(line).unwrap();
            assert_eq!(case.to_line(), line);
        }
    }

    #[test]
    fn added_fields_survive_after_the_known_ones() {
        let line = PAY_PASSED.trim_end_matches('}').to_owned() + r#","shard":{"index":2,"of":4}}"#;
        let case: RunCase = serde_json::from_str(&line).unwrap();
        assert!(case.extra.contains_key("shard"));
        assert_eq!(case.to_line(), line);
    }

    #[test]
    fn totals_count_each_cases_last_attempt() {
        let cases = parse_cases(&format!("{PAY_FAILED}\n{PAY_PASSED}\n{UNSUPPORTED}\n"), "cases.jsonl").unwrap();
        let t = totals(&cases);
        assert_eq!(t, RunTotals { cases: 2, passed: 1, failed: 0, unsupported: 1, retried: 1 });
    }

    #[test]
    fn manifest_matches_lynkeus_at_start_and_finish() {
        let started = RunManifest::started("2026-01-02T03:00:00.000Z");
        assert_eq!(started.to_json_pretty(), "{\n  \"schema\": 1,\n  \"startedAt\": \"2026-01-02T03:00:00.000Z\"\n}\n");
        let finished = RunManifest {
            finished_at: Some("2026-01-02T03:01:00.000Z".into()),
            platform: Some("ios".into()),
            native: Some(false),
            totals: Some(RunTotals { cases: 1, passed: 1, failed: 0, unsupported: 0, retried: 1 }),
            ..started
        };
        let expected = r#"{
  "schema": 1,
  "startedAt": "2026-01-02T03:00:00.000Z",
  "finishedAt": "2026-01-02T03:01:00.000Z",
  "platform": "ios",
  "native": false,
  "totals": {
    "cases": 1,
    "passed": 1,
    "failed": 0,
    "unsupported": 0,
    "retried": 1
  }
}
"#;
        assert_eq!(finished.to_json_pretty(), expected);
        assert_eq!(RunManifest::from_json(expected, "run.json").unwrap(), finished);
    }

    #[test]
    fn an_unknown_schema_is_refused_by_name() {
        let err = RunManifest::from_json(r#"{"schema":2,"startedAt":"x"}"#, "out/run.json").unwrap_err();
        assert_eq!(err.to_string(), "out/run.json: unknown run schema 2 (this reader knows schema 1)");
        let err = RunManifest::from_json(r#"{"startedAt":"x"}"#, "run.json").unwrap_err();
        assert!(matches!(err, RunError::UnknownSchema { .. }));
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse_cases(&format!("{PAY_PASSED}\n{{oops\n"), "cases.jsonl").unwrap_err();
        assert!(err.to_string().starts_with("cases.jsonl:2: "), "{err}");
    }
}
