//! What a Submit must be before the coordinator takes it: the same checks
//! `argus run` makes locally (a client may be anything that speaks gRPC),
//! plus bounds on what one run may ask of the fleet. Pure: request in,
//! checked suite or the problems out; the gRPC handler runs it, so the
//! owner task never parses a suite.

use std::path::Path;

use argus_cases::{Case, CasesConfig, suite};
use argus_proto::grpc;
use argus_proto::run::RunManifest;

use argus_store::{NewCase, NewRun};

use crate::error::CoreError;
use crate::owner::Handle;
use crate::scheduler::{self, Selector};
use crate::time::iso;
use argus_store::Store;
use tracing::debug;

/// The most retries a run may ask for: each one can hold a device for a
/// whole case again.
pub const MAX_RETRIES: u32 = 10;
/// The highest priority a run may have (fair share weight).
pub const MAX_PRIORITY: u32 = 100;
/// The longest project, branch, commit or trigger text.
pub const MAX_LABEL_CHARS: usize = 256;

/// A Submit on its way to the owner: the request, and for a rerun the ids
/// of the cases of it that run (`argus_history::rerun` prepares one from
/// the earlier run's records).
#[derive(Debug)]
pub struct Submission {
    pub request: grpc::SubmitRequest,
    pub only: Option<std::collections::HashSet<String>>,
}

impl Submission {
    /// A Submit that is not a rerun.
    pub fn new(request: grpc::SubmitRequest) -> Self {
        Self { request, only: None }
    }
}

/// A Submit that passed every check.
#[derive(Debug)]
pub struct CheckedSuite {
    pub request: grpc::SubmitRequest,
    pub cases: Vec<Case>,
    pub selector: Selector,
    /// The case configuration as the workers will read it.
    pub config_json: String,
    pub priority: u32,
    /// Who owns which case files (the project's TESTOWNERS).
    pub owners: argus_cases::owners::Owners,
}

impl CheckedSuite {
    /// Every case id of the suite, in order.
    pub fn case_ids(&self) -> Vec<String> {
        self.cases.iter().map(|c| c.id.clone()).collect()
    }

    /// The run to write: each case with its expected duration (`history`:
    /// the median of its recent passes, where there are some) and where it
    /// came from.
    pub fn plan(
        &self,
        id: String,
        started_at: i64,
        started_iso: String,
        history: &std::collections::HashMap<String, i64>,
        default_ms: i64,
    ) -> NewRun {
        let request = &self.request;
        let known: Vec<Option<i64>> = self.cases.iter().map(|c| history.get(&c.id).copied()).collect();
        let estimates = scheduler::estimate(&known, default_ms);
        let text = |value: &str| (!value.is_empty()).then(|| value.to_owned());
        NewRun {
            id,
            project: if request.project.is_empty() { "default".into() } else { request.project.clone() },
            branch: text(&request.branch),
            commit: text(&request.commit),
            trigger: text(&request.trigger),
            selector_json: serde_json::to_string(&self.selector).expect("a selector is plain data"),
            config_json: self.config_json.clone(),
            retries: request.retries,
            priority: self.priority,
            detached: request.detach,
            rerun_of: text(&request.rerun_failed_of),
            testowners: text(&request.testowners),
            started_at,
            manifest_json: serde_json::to_string(&RunManifest::started(started_iso)).expect("a manifest is plain data"),
            files: request.cases.iter().map(|f| (f.path.clone(), f.source.clone())).collect(),
            cases: self
                .cases
                .iter()
                .zip(&estimates)
                .enumerate()
                .map(|(ordinal, (case, (ms, source)))| NewCase {
                    case_id: case.id.clone(),
                    file: case.file.clone(),
                    title: case.title.clone(),
                    ordinal: ordinal as i64,
                    expected_ms: *ms,
                    estimate_source: source.to_string(),
                    muted: None,
                    owner: Some(self.owners.of(&case.file).join(" ")).filter(|o| !o.is_empty()),
                })
                .collect(),
        }
    }
}

/// Checks a Submit; every problem, one a line, each naming where it is.
pub fn check(request: grpc::SubmitRequest) -> Result<CheckedSuite, CoreError> {
    let mut problems = Vec::new();
    if request.cases.is_empty() {
        problems.push("a run needs at least one case file".to_owned());
    }
    if request.retries > MAX_RETRIES {
        problems.push(format!("retries {}: a run may retry a case {MAX_RETRIES} times at most", request.retries));
    }
    if request.priority > MAX_PRIORITY {
        problems.push(format!("priority {}: the highest is {MAX_PRIORITY}", request.priority));
    }
    for (field, value) in [
        ("project", &request.project),
        ("branch", &request.branch),
        ("commit", &request.commit),
        ("trigger", &request.trigger),
    ] {
        if value.chars().count() > MAX_LABEL_CHARS {
            problems.push(format!("{field}: {} characters; {MAX_LABEL_CHARS} at most", value.chars().count()));
        }
        if value.chars().any(char::is_control) {
            problems.push(format!("{field}: control characters are not allowed"));
        }
    }
    let config_json = if request.config_json.trim().is_empty() { "{}".to_owned() } else { request.config_json.clone() };
    let config = match serde_json::from_str::<serde_json::Value>(&config_json) {
        Ok(value) if value.is_object() => match CasesConfig::from_json(&value, Path::new(".")) {
            Ok(config) => Some(config),
            Err(error) => {
                problems.push(format!("config_json: {error}"));
                None
            }
        },
        Ok(other) => {
            problems.push(format!("config_json: the case configuration is a JSON object, not {other}"));
            None
        }
        Err(error) => {
            problems.push(format!("config_json: not JSON: {error}"));
            None
        }
    };
    let owners = match argus_cases::owners::Owners::parse(&request.testowners) {
        Ok(owners) => owners,
        Err(errors) => {
            problems.extend(errors);
            argus_cases::owners::Owners::default()
        }
    };
    let files: Vec<(String, String)> = request.cases.iter().map(|f| (f.path.clone(), f.source.clone())).collect();
    let mut cases = Vec::new();
    if let Some(config) = &config {
        match suite::check_sources(&files, config, "the suite") {
            Ok(checked) => cases = checked,
            Err(errors) => problems.extend(errors.iter().map(ToString::to_string)),
        }
    }
    if !problems.is_empty() {
        return Err(CoreError::Invalid(problems.join("\n")));
    }
    let selector = request
        .selector
        .clone()
        .map(|s| Selector {
            platform: (!s.platform.is_empty()).then_some(s.platform),
            labels: s.labels.into_iter().collect(),
            app: (!s.app.is_empty()).then_some(s.app),
        })
        .unwrap_or_default();
    let priority = request.priority.max(1);
    Ok(CheckedSuite { request, cases, selector, config_json, priority, owners })
}

/// The expected duration of a case nothing is known about.
pub const DEFAULT_EXPECTED_MS: i64 = 30_000;
/// How many recent passing attempts the expected duration is the median of.
pub const HISTORY_WINDOW: u32 = 20;

/// Takes a Submit: checked, estimated from history and written here, off
/// the owner task, so that a suite of 10,000 cases does not hold up anyone
/// else's leases; then handed to the owner task (through `handle`), which
/// answers. The run's start is the owner's clock.
pub async fn submit(
    handle: &Handle,
    store: &Store,
    submission: Submission,
    traceparent: String,
) -> Result<grpc::SubmitResponse, CoreError> {
    // Parsing and expanding a large suite is CPU work of hundreds of
    // milliseconds: on a blocking thread, not on one the owner task, the
    // workers' links and the watches share.
    let stopped = |e: tokio::task::JoinError| CoreError::Internal(format!("checking the suite stopped: {e}"));
    // A rerun comes with the earlier run's files, and only its failed
    // cases run.
    let Submission { request, only } = submission;
    if !request.rerun_failed_of.is_empty() && only.is_none() {
        return Err(CoreError::Internal(format!(
            "a rerun of {} was submitted without its failed cases (argus_history::rerun prepares one)",
            request.rerun_failed_of
        )));
    }
    let began = std::time::Instant::now();
    let mut suite = argus_proto::task::blocking("check a suite", move || check(request)).await.map_err(stopped)??;
    let checked = began.elapsed();
    if let Some(only) = &only {
        suite.cases.retain(|case| only.contains(&case.id));
        if suite.cases.is_empty() {
            return Err(CoreError::Invalid("none of the failed cases is in the suite as configured now".into()));
        }
    }
    handle.admit(suite.selector.clone()).await?;
    let platform = suite.selector.platform.clone().unwrap_or_default();
    let history = store.expected_ms_many(&suite.case_ids(), &platform, HISTORY_WINDOW).await?;
    let estimated = began.elapsed();
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let started_at = handle.clock().now_ms();
    let (suite, mut run) = argus_proto::task::blocking("plan a run", move || {
        let run = suite.plan(id, started_at, iso(started_at), &history, DEFAULT_EXPECTED_MS);
        (suite, run)
    })
    .await
    .map_err(stopped)?;
    // The mutes in force now hold for the whole run.
    let mutes = store.mutes_in_force(&run.project, started_at).await?;
    let mut muted = Vec::new();
    for case in &mut run.cases {
        if let Some(mute) = mutes.get(&case.case_id) {
            case.muted = Some(mute.reason.clone());
            muted.push(mute.clone().into());
        }
    }
    let planned = began.elapsed();
    store.create_run(&run).await?;
    // What a big suite's submit spends where, for whoever tunes one.
    debug!(
        run = %run.id,
        cases = run.cases.len(),
        check_ms = checked.as_millis() as u64,
        history_ms = (estimated - checked).as_millis() as u64,
        plan_ms = (planned - estimated).as_millis() as u64,
        write_ms = (began.elapsed() - planned).as_millis() as u64,
        "suite checked and written"
    );
    let rerun_of = run.rerun_of.clone().unwrap_or_default();
    // The checked suite is dropped there too: a big one's parsed cases.
    let prepared = argus_proto::task::blocking("prepare a run", move || {
        crate::owner::runs::Prepared::of(suite.selector, run, &traceparent)
    })
    .await
    .map_err(stopped)?;
    let mut response = handle.submitted(prepared).await?;
    response.muted = muted;
    response.rerun_of = rerun_of;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(source: &str) -> grpc::SubmitRequest {
        grpc::SubmitRequest {
            cases: vec![grpc::CaseFile { path: "cases/a.md".into(), source: source.into() }],
            retries: 1,
            ..Default::default()
        }
    }

    const GOOD: &str = "---\nid: a\n---\nsteps:\n  - app.back\n";

    #[test]
    fn a_good_suite_is_taken_with_its_defaults() {
        let checked = check(request(GOOD)).unwrap();
        assert_eq!(checked.cases.len(), 1);
        assert_eq!(checked.config_json, "{}");
        assert_eq!(checked.priority, 1);
    }

    #[test]
    fn a_plan_estimates_each_case_from_history_then_the_suite() {
        let two = "---\nid: a\nmatrix: { n: [1, 2] }\n---\nsteps:\n  - app.back\n";
        let checked = check(grpc::SubmitRequest { project: String::new(), detach: true, ..request(two) }).unwrap();
        let history = [("a[n=1]".to_owned(), 1200)].into_iter().collect();
        let run = checked.plan("r1".into(), 5, "t".into(), &history, 30_000);
        let cases: Vec<(&str, i64, &str)> =
            run.cases.iter().map(|c| (c.case_id.as_str(), c.expected_ms, c.estimate_source.as_str())).collect();
        assert_eq!(cases, [("a[n=1]", 1200, "history"), ("a[n=2]", 1200, "estimate")]);
        assert_eq!((run.project.as_str(), run.detached, run.retries), ("default", true, 1));
    }

    #[test]
    fn what_the_local_check_refuses_the_coordinator_refuses() {
        let unknown = check(request("---\nid: a\n---\nsteps:\n  - app.teleport: x\n")).unwrap_err().to_string();
        assert_eq!(
            unknown,
            "cases/a.md:5: app.teleport is not a step: lynkeus has no command teleport, and the project declares no macro for it"
        );
        let climbing = grpc::SubmitRequest {
            cases: vec![grpc::CaseFile { path: "../../../../etc/passwd.md".into(), source: GOOD.into() }],
            ..Default::default()
        };
        assert_eq!(
            check(climbing).unwrap_err().to_string(),
            "../../../../etc/passwd.md: a case file's path may not climb out of the suite with `..`"
        );
    }

    #[test]
    fn bad_configuration_and_unbounded_asks_are_refused() {
        let bad_json = grpc::SubmitRequest { config_json: "{not json".into(), ..request(GOOD) };
        let error = check(bad_json).unwrap_err().to_string();
        assert!(error.starts_with("config_json: not JSON: key must be a string"), "{error}");
        let not_object = grpc::SubmitRequest { config_json: "[1]".into(), ..request(GOOD) };
        assert_eq!(
            check(not_object).unwrap_err().to_string(),
            "config_json: the case configuration is a JSON object, not [1]"
        );
        let greedy = grpc::SubmitRequest { retries: u32::MAX, priority: 1000, ..request(GOOD) };
        assert_eq!(
            check(greedy).unwrap_err().to_string(),
            "retries 4294967295: a run may retry a case 10 times at most\npriority 1000: the highest is 100"
        );
        let empty = grpc::SubmitRequest { cases: vec![], ..request(GOOD) };
        assert_eq!(check(empty).unwrap_err().to_string(), "a run needs at least one case file");
    }
}
