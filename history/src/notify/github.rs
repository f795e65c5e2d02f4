//! A GitHub commit status for a run's commit: `POST
//! /repos/{owner}/{repo}/statuses/{sha}` with `state`, `target_url`,
//! `description` (140 characters at most) and `context`.

use serde_json::{Value, json};

use super::events::{Event, Happened};

/// GitHub's limit on a status' description.
const DESCRIPTION_CHARS: usize = 140;

/// The path and body of the status for `event` (a run that ended with a
/// commit that looks like one), else `None`.
pub fn status(event: &Event, repository: &str, dashboard: Option<&str>) -> Option<(String, Value)> {
    let Happened::RunFinished { run } = &event.happened else { return None };
    let sha = run.commit.as_deref()?;
    if !(4..=64).contains(&sha.len()) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let state = match run.result.as_str() {
        "passed" => "success",
        "failed" => "failure",
        _ => "error",
    };
    let mut description = match run.result.as_str() {
        "cancelled" => "cancelled before it finished".to_owned(),
        _ => format!("{}/{} passed, {} failed", run.passed, run.cases, run.failed - run.muted_failed),
    };
    if run.muted_failed > 0 {
        description.push_str(&format!(", {} muted-failed", run.muted_failed));
    }
    let description: String = description.chars().take(DESCRIPTION_CHARS).collect();
    let mut body = json!({ "state": state, "description": description, "context": format!("argus/{}", run.project) });
    if let Some(dashboard) = dashboard {
        body["target_url"] = event.link(dashboard).into();
    }
    Some((format!("/repos/{repository}/statuses/{sha}"), body))
}
