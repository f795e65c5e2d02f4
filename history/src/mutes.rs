//! Muted cases: what a mute must be before it is kept, and when a muted
//! case has earned its unmute. A muted case still runs and is recorded;
//! its failure does not fail the runs submitted while it is muted.

use argus_proto::grpc;
use argus_store::{MuteRow, RunRow, Store, StoreError};

use argus_grid::error::CoreError;

/// The longest reason or owner kept.
pub const MAX_REASON_CHARS: usize = 1_000;
/// Passes in a row on the default branch that unmute a case, by default.
pub const UNMUTE_AFTER: u32 = 10;

/// When a muted case unmutes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutePolicy {
    /// The branch whose passes count (runs on other branches prove nothing
    /// about the fix having landed).
    pub default_branch: String,
    /// Attempts in a row that passed there; 0 never unmutes by passes.
    pub unmute_after: u32,
    /// Auto-mute (0: off): a case that passed on retry more than this many
    /// times in the window, whose failures there were all `timing` or
    /// `unknown`, is muted, and its owner told (`case.muted`).
    pub auto_mute_after: u32,
    /// The auto-mute's window, in days.
    pub auto_mute_days: u32,
}

impl Default for MutePolicy {
    fn default() -> Self {
        Self { default_branch: "main".into(), unmute_after: UNMUTE_AFTER, auto_mute_after: 0, auto_mute_days: 7 }
    }
}

/// Who auto-mutes.
pub const AUTO_MUTER: &str = "argus auto-mute";

/// Whether a case earns an auto-mute: it passed on retry more than
/// `threshold` times in the window, and each of its failures there has a
/// cause that says nothing is broken (`timing`, `unknown`).
pub fn earns_auto_mute(passed_on_retry: i64, causes: &[String], threshold: u32) -> bool {
    threshold > 0
        && passed_on_retry > i64::from(threshold)
        && !causes.is_empty()
        && causes.iter().all(|c| c == "timing" || c == "unknown")
}

/// After `run` ended: its cases that earn an auto-mute (see
/// [`earns_auto_mute`]) are muted, with their owners; the cases muted.
pub async fn auto_mute(
    store: &Store,
    run: &RunRow,
    policy: &MutePolicy,
    now_ms: i64,
) -> Result<Vec<String>, CoreError> {
    if policy.auto_mute_after == 0 || run.result.as_deref() == Some("cancelled") {
        return Ok(Vec::new());
    }
    let since = now_ms - i64::from(policy.auto_mute_days) * 86_400_000;
    let muted = store.mutes(Some(&run.project)).await?;
    let cases = store.run_cases(&run.id).await?;
    let mut done = Vec::new();
    for flaky in store.flaky_cases(&run.project, since, 10_000).await? {
        let Some(case) = cases.iter().find(|c| c.case_id == flaky.case_id) else { continue };
        if case.muted.is_some() || muted.iter().any(|m| m.case_id == flaky.case_id) {
            continue;
        }
        let causes = store.case_failure_causes(&run.project, &flaky.case_id, since).await?;
        if !earns_auto_mute(flaky.passed_on_retry, &causes, policy.auto_mute_after) {
            continue;
        }
        let ask = grpc::MuteRequest {
            project: run.project.clone(),
            case_id: flaky.case_id.clone(),
            reason: format!(
                "auto-muted: passed on retry {} times in {} days; its failures were {}",
                flaky.passed_on_retry,
                policy.auto_mute_days,
                if causes.iter().all(|c| c == "timing") { "timing" } else { "timing or unknown" }
            ),
            owner: case.owner.clone().unwrap_or_default(),
            until_unix_ms: None,
            by: AUTO_MUTER.into(),
        };
        mute(store, ask, now_ms).await?;
        done.push(flaky.case_id);
    }
    Ok(done)
}

/// A mute as asked, checked: what to keep, or every problem with it.
pub fn check(ask: grpc::MuteRequest, now_ms: i64) -> Result<MuteRow, CoreError> {
    let mut problems = Vec::new();
    for (field, value, required) in [
        ("project", &ask.project, false),
        ("case", &ask.case_id, true),
        ("reason", &ask.reason, true),
        ("owner", &ask.owner, false),
        ("by", &ask.by, false),
    ] {
        if required && value.trim().is_empty() {
            problems.push(format!("{field}: required"));
        }
        if value.chars().count() > MAX_REASON_CHARS {
            problems.push(format!("{field}: {} characters; {MAX_REASON_CHARS} at most", value.chars().count()));
        }
        if value.chars().any(|c| c.is_control() && c != '\n') {
            problems.push(format!("{field}: control characters are not allowed"));
        }
    }
    if let Some(until) = ask.until_unix_ms
        && until <= now_ms
    {
        problems.push(format!("until: {} is not in the future", argus_grid::time::iso(until)));
    }
    if !problems.is_empty() {
        return Err(CoreError::Invalid(problems.join("\n")));
    }
    let text = |value: String| (!value.trim().is_empty()).then(|| value.trim().to_owned());
    Ok(MuteRow {
        project: text(ask.project).unwrap_or_else(|| "default".into()),
        case_id: ask.case_id.trim().to_owned(),
        reason: ask.reason.trim().to_owned(),
        owner: text(ask.owner),
        until_ms: ask.until_unix_ms,
        muted_by: text(ask.by).unwrap_or_else(|| "unknown".into()),
        muted_at: now_ms,
    })
}

/// A mute's end that is neither a day nor a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is neither a day (2026-12-31) nor a time (2026-12-31T18:00:00Z)")]
pub struct UntilError {
    pub text: String,
}

/// `2026-12-31` (muted through that day, UTC) or an RFC 3339 time: when
/// a mute ends, in epoch ms.
pub fn parse_until(text: &str) -> Result<i64, UntilError> {
    let refused = || UntilError { text: text.to_owned() };
    if let Ok(day) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        // The day's last millisecond: muted through the day, and shown so.
        let midnight = day.succ_opt().and_then(|next| next.and_hms_opt(0, 0, 0)).ok_or_else(refused)?;
        return Ok(midnight.and_utc().timestamp_millis() - 1);
    }
    chrono::DateTime::parse_from_rfc3339(text).map(|t| t.timestamp_millis()).map_err(|_| refused())
}

/// Mutes a case that has run in its project (a typo mutes nothing and
/// says so), keeping who, why and when.
pub async fn mute(store: &Store, ask: grpc::MuteRequest, now_ms: i64) -> Result<MuteRow, CoreError> {
    let mute = check(ask, now_ms)?;
    if !store.case_known(&mute.project, &mute.case_id).await? {
        return Err(CoreError::NotFound(format!(
            "no case {:?} has run in project {:?}: `argus cases check` lists a suite's case ids",
            mute.case_id, mute.project
        )));
    }
    let until = mute.until_ms.map(argus_grid::time::iso);
    let told = argus_grid::events::MutedCase {
        project: mute.project.clone(),
        case_id: mute.case_id.clone(),
        reason: mute.reason.clone(),
        owner: mute.owner.clone(),
        until,
        by: mute.muted_by.clone(),
    };
    let event = argus_grid::events::store_event(now_ms, argus_grid::events::Happened::CaseMuted { mute: told });
    store.mute(&mute, &event).await?;
    tracing::info!(project = %mute.project, case = %mute.case_id, by = %mute.muted_by, "case muted");
    Ok(mute)
}

/// Unmutes a case; whether it was muted.
pub async fn unmute(store: &Store, ask: grpc::UnmuteRequest, now_ms: i64) -> Result<bool, CoreError> {
    let project = if ask.project.trim().is_empty() { "default" } else { ask.project.trim() };
    if ask.case_id.trim().is_empty() {
        return Err(CoreError::Invalid("case: required".into()));
    }
    let by = if ask.by.trim().is_empty() { "unknown" } else { ask.by.trim() };
    let reason = if ask.reason.trim().is_empty() { "unmuted by hand" } else { ask.reason.trim() };
    if reason.chars().count() > MAX_REASON_CHARS || by.chars().count() > MAX_REASON_CHARS {
        return Err(CoreError::Invalid(format!("reason and by: {MAX_REASON_CHARS} characters at most")));
    }
    let was = store.unmute(project, ask.case_id.trim(), by, reason, now_ms).await?;
    if was {
        tracing::info!(%project, case = %ask.case_id, %by, "case unmuted");
    }
    Ok(was)
}

/// After `run` ended: its muted cases whose last `unmute_after` attempts
/// on the default branch since they were muted all passed are unmuted.
/// The cases unmuted.
pub async fn lift_by_passes(
    store: &Store,
    run: &RunRow,
    policy: &MutePolicy,
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let branch = run.branch.as_deref().unwrap_or("");
    if policy.unmute_after == 0 || branch != policy.default_branch || run.result.as_deref() == Some("cancelled") {
        return Ok(Vec::new());
    }
    let mut lifted = Vec::new();
    let mutes = store.mutes(Some(&run.project)).await?;
    let ran: std::collections::HashSet<String> =
        store.run_cases(&run.id).await?.into_iter().map(|c| c.case_id).collect();
    for mute in mutes.iter().filter(|m| ran.contains(&m.case_id)) {
        let n = policy.unmute_after;
        if store.passed_in_a_row(&run.project, branch, &mute.case_id, mute.muted_at, n).await? {
            let why = format!("passed {n} times in a row on {branch}");
            if store.unmute(&run.project, &mute.case_id, "argus", &why, now_ms).await? {
                tracing::info!(project = %run.project, case = %mute.case_id, %why, "case unmuted");
                lifted.push(mute.case_id.clone());
            }
        }
    }
    Ok(lifted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> grpc::MuteRequest {
        grpc::MuteRequest {
            project: "shop".into(),
            case_id: "login".into(),
            reason: "flaky keyboard, #123".into(),
            by: "ana".into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_case_that_keeps_passing_on_retry_for_no_visible_reason_earns_an_auto_mute() {
        let causes = |c: &[&str]| c.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
        assert!(earns_auto_mute(4, &causes(&["timing", "unknown"]), 3));
        assert!(!earns_auto_mute(3, &causes(&["timing"]), 3), "more than the threshold");
        assert!(!earns_auto_mute(9, &causes(&["timing", "backend"]), 3), "a backend failure is a real one");
        assert!(!earns_auto_mute(9, &[], 3), "no cause known yet");
        assert!(!earns_auto_mute(9, &causes(&["timing"]), 0), "off");
    }

    #[test]
    fn until_reads_a_day_through_its_end_or_a_time() {
        assert_eq!(parse_until("1970-01-01"), Ok(86_399_999));
        assert_eq!(parse_until("1970-01-01T00:00:01Z"), Ok(1_000));
        assert!(parse_until("tomorrow").unwrap_err().to_string().contains("neither a day"));
    }

    #[test]
    fn a_mute_keeps_what_was_asked_and_names_every_problem() {
        let kept = check(ask(), 1_000).unwrap();
        assert_eq!((kept.project.as_str(), kept.case_id.as_str(), kept.muted_at), ("shop", "login", 1_000));
        assert_eq!((kept.owner, kept.until_ms, kept.muted_by.as_str()), (None, None, "ana"));
        let bad = grpc::MuteRequest {
            case_id: " ".into(),
            reason: String::new(),
            owner: "x".repeat(MAX_REASON_CHARS + 1),
            until_unix_ms: Some(500),
            ..ask()
        };
        let problems = check(bad, 1_000).unwrap_err().to_string();
        assert_eq!(
            problems,
            "case: required\nreason: required\nowner: 1001 characters; 1000 at most\n\
             until: 1970-01-01T00:00:00.500Z is not in the future"
        );
        let hostile = grpc::MuteRequest { reason: "a\u{0}b".into(), ..ask() };
        assert_eq!(check(hostile, 0).unwrap_err().to_string(), "reason: control characters are not allowed");
    }
}
