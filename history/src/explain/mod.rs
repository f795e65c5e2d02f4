//! Why it failed: each failed attempt beside the last time its case passed
//! ([`diff`]), the cause with its evidence ([`cause`]), the failures of a
//! run grouped by what they share, and when a case started failing on its
//! branch. The judgement is pure; [`explain_case`] and [`explain_run`]
//! gather what it needs from the store.

pub mod cause;
pub mod diff;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use argus_proto::grpc::AttemptObserved;
use argus_store::{ObservationRow, Store, StoreError};
use prost::Message;
use serde::Serialize;

pub use cause::{Cause, Facts};
pub use diff::{BaselineRef, Changes, CommitRange, Side};

/// Recent passes whose step times make a case's own spread.
const SPREAD_PASSES: i64 = 20;
/// Recent attempts the `device` rule reads.
const DEVICE_HISTORY: u32 = 50;
/// Runs of a branch read back to find when a case started failing.
const STARTED_RUNS: i64 = 200;

/// A run of a branch, named by its commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunAt {
    pub run_id: String,
    pub commit: String,
}

/// When a case started failing on its branch: the first failing run after
/// its last pass there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Started {
    pub branch: String,
    pub first_failure: RunAt,
    /// `None` when it never passed in the runs read.
    pub last_pass: Option<RunAt>,
    /// Runs in a row it has failed in, this one included.
    pub failing_runs: usize,
}

/// One failed attempt, explained: the JSON of
/// `GET /api/v1/runs/ID/cases/CASE/diff`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    pub run_id: String,
    pub case_id: String,
    pub attempt: u32,
    pub platform: String,
    pub device: String,
    pub baseline: Option<BaselineRef>,
    #[serde(flatten)]
    pub changes: Changes,
    pub commits: Option<CommitRange>,
    pub started: Option<Started>,
    pub cause: Cause,
    pub signature: String,
    /// The diff in one line, as the run page and `argus run` show it.
    pub line: String,
    /// Some of the attempt's record was cut to its bounds.
    pub truncated: bool,
}

/// Failures that share a cause and signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub cause: &'static str,
    pub signature: String,
    pub cases: Vec<String>,
}

/// The diff in one line: where it first differs, then what changed that
/// matters most (a broken request, the screen, a slower step, the app).
pub fn line(changes: &Changes, has_baseline: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(first) = changes.first_difference.as_ref().filter(|f| f.kind == "route") {
        let route = |r: &Option<String>| r.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| "no route".into());
        parts.push(format!("on {}, not {}", route(&first.route), route(&first.baseline_route)));
    }
    parts.extend(changes.requests.iter().filter(|r| r.broke()).take(2).map(|r| r.describe()));
    let screen = &changes.screen;
    parts.extend(screen.appeared.iter().take(2).map(|e| format!("{} appeared", e.0)));
    parts.extend(screen.disappeared.iter().take(2).map(|e| format!("{} gone", e.0)));
    parts.extend(
        screen.changed.iter().take(2).map(|c| format!("{} {} '{}' → '{}'", c.element.0, c.field, c.from, c.to)),
    );
    parts.extend(
        changes.slower.iter().take(1).map(|s| format!("step {} took {} ms (usually {} ms)", s.step, s.ms, s.usual_ms)),
    );
    parts.extend(changes.problems.iter().take(1).cloned());
    parts.extend(
        changes
            .around
            .iter()
            .filter(|a| matches!(a.what, "app" | "agent" | "os"))
            .map(|a| format!("{} {} → {}", a.what, a.from, a.to)),
    );
    let Some(first) = &changes.first_difference else {
        return if parts.is_empty() { "no step differs from its baseline".into() } else { parts.join("; ") };
    };
    let head = if has_baseline {
        format!("first differs at step {} `{}`", first.step, first.label)
    } else {
        format!("no passing attempt to compare with; failed at step {} `{}`", first.step, first.label)
    };
    if parts.is_empty() {
        match &first.error {
            Some(error) => format!("{head}: {error}"),
            None => head,
        }
    } else {
        format!("{head}: {}", parts.join("; "))
    }
}

/// A run's failures by cause and signature, the largest group first.
pub fn group(explained: &[Explained]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for e in explained {
        match groups.iter_mut().find(|g| g.cause == e.cause.kind && g.signature == e.signature) {
            Some(group) => group.cases.push(e.case_id.clone()),
            None => groups.push(Group {
                cause: e.cause.kind,
                signature: e.signature.clone(),
                cases: vec![e.case_id.clone()],
            }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.cases.len()));
    groups
}

/// When a case started failing, from its final results on a branch,
/// newest first (the first is the run explained).
pub fn started(branch: &str, runs: &[argus_store::CaseRun]) -> Option<Started> {
    let mut failing = runs.iter().take_while(|r| r.final_result == "failed");
    let first_failure = failing.by_ref().last()?;
    let failing_runs = runs.iter().take_while(|r| r.final_result == "failed").count();
    let last_pass = runs.iter().skip(failing_runs).find(|r| r.final_result == "passed");
    let at =
        |r: &argus_store::CaseRun| RunAt { run_id: r.run_id.clone(), commit: r.commit_sha.clone().unwrap_or_default() };
    Some(Started {
        branch: branch.to_owned(),
        first_failure: at(first_failure),
        last_pass: last_pass.map(at),
        failing_runs,
    })
}

/// What went wrong reading the store, or a record that does not decode.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the record of {case} attempt {attempt} in run {run} does not decode: {error}")]
    Undecodable { run: String, case: String, attempt: i64, error: prost::DecodeError },
}

impl argus_proto::errors::Coded for ExplainError {
    fn code(&self) -> argus_proto::errors::ErrorCode {
        match self {
            ExplainError::Store(error) => error.code(),
            ExplainError::Undecodable { .. } => argus_proto::errors::ErrorCode::DataLoss,
        }
    }

    fn public_message(&self) -> String {
        match self {
            ExplainError::Store(error) => error.public_message(),
            undecodable => undecodable.to_string(),
        }
    }
}

impl From<ExplainError> for tonic::Status {
    fn from(error: ExplainError) -> Self {
        argus_proto::errors::grpc_status(&error)
    }
}

fn side(row: &ObservationRow) -> Result<Side, ExplainError> {
    let observed = AttemptObserved::decode(row.body.as_slice()).map_err(|error| ExplainError::Undecodable {
        run: row.run_id.clone(),
        case: row.case_id.clone(),
        attempt: row.attempt,
        error,
    })?;
    Ok(Side {
        run_id: row.run_id.clone(),
        attempt: row.attempt as u32,
        observed,
        device_id: row.device_id.clone(),
        worker_id: row.worker_id.clone(),
        branch: row.branch.clone(),
        commit: row.commit_sha.clone(),
        finished_at: row.finished_at,
    })
}

/// The cases of a run other than `case` that failed on `device` and
/// passed on another device: what the quarantine counts against it.
fn others_failed_on(attempts: &[argus_store::AttemptDetail], case: &str, device: &str) -> usize {
    let done = |a: &&argus_store::AttemptDetail, result: &str| a.state == "done" && a.result.as_deref() == Some(result);
    let failed_here: std::collections::BTreeSet<&str> = attempts
        .iter()
        .filter(|a| a.case_id != case && done(a, "failed") && a.device_id.as_deref() == Some(device))
        .map(|a| a.case_id.as_str())
        .collect();
    let passed_elsewhere: std::collections::BTreeSet<&str> = attempts
        .iter()
        .filter(|a| done(a, "passed") && a.device_id.as_deref().is_some_and(|d| d != device))
        .map(|a| a.case_id.as_str())
        .collect();
    failed_here.intersection(&passed_elsewhere).count()
}

/// Explains one failed attempt: its record, its baseline's, the case's
/// history.
pub async fn explain_row(store: &Store, row: &ObservationRow) -> Result<Explained, ExplainError> {
    let failed = side(row)?;
    let baseline_row = match row.baseline_key() {
        Some(key) => store.observation_of(&key).await?,
        None => None,
    };
    let baseline = baseline_row.as_ref().map(side).transpose()?;
    let mut step_times: HashMap<usize, Vec<u64>> = HashMap::new();
    for (idx, ms) in store.passed_step_times(&row.case_id, &row.platform, SPREAD_PASSES).await? {
        step_times.entry(idx as usize).or_default().push(ms.max(0) as u64);
    }
    let changes = diff::changes(&failed, baseline.as_ref(), &step_times);
    let history = store.case_history(&row.project, &row.case_id, DEVICE_HISTORY).await?;
    let on = |h: &argus_store::CaseAttempt| h.device_id.clone().unwrap_or_default();
    let facts = Facts {
        passed_elsewhere: history
            .iter()
            .filter(|h| h.result.as_deref() == Some("passed") && on(h) != row.device_id)
            .find(|h| h.finished_at.unwrap_or(0) >= row.finished_at)
            .map(on),
        // Since it last passed: older failures elsewhere were another story.
        failed_elsewhere: history
            .iter()
            .filter(|h| h.result.as_deref() == Some("failed") && on(h) != row.device_id)
            .filter(|h| baseline.as_ref().is_none_or(|b| h.finished_at.unwrap_or(0) > b.finished_at))
            .count(),
        passed_on_retry_here: history.iter().any(|h| {
            h.run_id == row.run_id
                && h.attempt > row.attempt
                && h.result.as_deref() == Some("passed")
                && on(h) == row.device_id
        }),
        failed_here: history
            .iter()
            .filter(|h| h.result.as_deref() == Some("failed") && on(h) == row.device_id)
            .filter(|h| baseline.as_ref().is_none_or(|b| h.finished_at.unwrap_or(0) > b.finished_at))
            .count(),
        others_failed_here: others_failed_on(&store.run_attempts(&row.run_id).await?, &row.case_id, &row.device_id),
    };
    let cause = cause::cause(&failed, baseline.as_ref(), &changes, &facts);
    let signature = cause::signature(&cause, &failed, &changes);
    let run = store.get_run(&row.run_id).await?;
    let commits = match &baseline {
        Some(b) => Some(CommitRange {
            branch: row.branch.clone(),
            from: b.commit.clone(),
            to: row.commit_sha.clone(),
            runs_between: store.runs_between(&row.project, &row.branch, b.finished_at, run.started_at).await?,
        }),
        None => None,
    };
    let runs = store.case_runs(&row.project, &row.branch, &row.case_id, run.started_at, STARTED_RUNS).await?;
    Ok(Explained {
        run_id: row.run_id.clone(),
        case_id: row.case_id.clone(),
        attempt: row.attempt as u32,
        platform: row.platform.clone(),
        device: row.device_id.clone(),
        baseline: baseline.as_ref().map(|b| BaselineRef {
            run_id: b.run_id.clone(),
            attempt: b.attempt,
            branch: b.branch.clone(),
            commit: b.commit.clone(),
            finished_at: b.finished_at,
            same_branch: b.branch == row.branch,
        }),
        line: line(&changes, baseline.is_some()),
        truncated: failed.observed.truncated,
        changes,
        commits,
        started: started(&row.branch, &runs),
        cause,
        signature,
    })
}

/// Explains a case's failed attempt in a run: `attempt`, or its last
/// failed one. `None` when there is no record of one.
pub async fn explain_case(
    store: &Store,
    run_id: &str,
    case_id: &str,
    attempt: Option<u32>,
) -> Result<Option<Explained>, ExplainError> {
    let row = match attempt {
        Some(attempt) => store.observation(run_id, case_id, i64::from(attempt)).await?.filter(|r| r.result == "failed"),
        None => store.failed_observations(run_id).await?.into_iter().rfind(|r| r.case_id == case_id),
    };
    match row {
        Some(row) => Ok(Some(explain_row(store, &row).await?)),
        None => Ok(None),
    }
}

/// Writes the cause and signature of up to `batch` failed attempts whose
/// runs have ended and that have none yet, oldest first: how many. A
/// record that does not decode is written `unknown`, so that it is not read
/// again and again.
pub async fn write_causes(store: &Store, batch: i64) -> Result<usize, StoreError> {
    let rows = store.unexplained_failures(batch).await?;
    for row in &rows {
        let (cause, signature) = match explain_row(store, row).await {
            Ok(explained) => (explained.cause.kind, explained.signature),
            Err(ExplainError::Store(error)) => return Err(error),
            Err(undecodable) => {
                tracing::warn!(error = %undecodable, "a failure's record does not decode; its cause is written unknown");
                ("unknown", "the record does not decode".to_owned())
            }
        };
        store.set_cause(&row.key(), cause, &signature).await?;
    }
    Ok(rows.len())
}

/// Failures that share a cause and signature across runs: what they cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costly {
    pub cause: String,
    pub signature: String,
    /// Distinct cases and runs it failed.
    pub cases: usize,
    pub runs: usize,
    pub attempts: usize,
    /// The newest failure's run, and up to three of its cases.
    pub last_run: String,
    pub some_cases: Vec<String>,
}

/// Ranks the signatures of `failures` by the cases, then the runs, they
/// cost; `failures` newest first.
pub fn rank(failures: &[argus_store::FailureCause]) -> Vec<Costly> {
    use std::collections::BTreeSet;
    struct Tally<'a> {
        cases: BTreeSet<&'a str>,
        runs: BTreeSet<&'a str>,
        attempts: usize,
        last_run: &'a str,
        newest: i64,
        some_cases: Vec<String>,
    }
    let mut tallies: HashMap<(&str, &str), Tally> = HashMap::new();
    for f in failures {
        let tally = tallies.entry((f.cause.as_str(), f.signature.as_str())).or_insert_with(|| Tally {
            cases: BTreeSet::new(),
            runs: BTreeSet::new(),
            attempts: 0,
            last_run: &f.run_id,
            newest: f.finished_at,
            some_cases: Vec::new(),
        });
        if tally.cases.insert(&f.case_id) && tally.some_cases.len() < 3 {
            tally.some_cases.push(f.case_id.clone());
        }
        tally.runs.insert(&f.run_id);
        tally.attempts += 1;
    }
    let mut ranked: Vec<(i64, Costly)> = tallies
        .into_iter()
        .map(|((cause, signature), t)| {
            let costly = Costly {
                cause: cause.to_owned(),
                signature: signature.to_owned(),
                cases: t.cases.len(),
                runs: t.runs.len(),
                attempts: t.attempts,
                last_run: t.last_run.to_owned(),
                some_cases: t.some_cases,
            };
            (t.newest, costly)
        })
        .collect();
    ranked.sort_by(|(a_at, a), (b_at, b)| {
        (b.cases, b.runs, b.attempts, *b_at)
            .cmp(&(a.cases, a.runs, a.attempts, *a_at))
            .then(a.signature.cmp(&b.signature))
    });
    ranked.into_iter().map(|(_, c)| c).collect()
}

/// Explains each case of a run whose final result is failed (its last
/// failed attempt), in the run's order, and groups them.
pub async fn explain_run(store: &Store, run_id: &str) -> Result<(Vec<Explained>, Vec<Group>), ExplainError> {
    let failed = store.failed_cases(run_id).await?;
    let mut last: HashMap<String, ObservationRow> = HashMap::new();
    for row in store.failed_observations(run_id).await? {
        last.insert(row.case_id.clone(), row);
    }
    let mut explained = Vec::new();
    for case_id in &failed {
        if let Some(row) = last.get(case_id) {
            explained.push(explain_row(store, row).await?);
        }
    }
    let groups = group(&explained);
    Ok((explained, groups))
}
