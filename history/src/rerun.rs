//! `argus run --rerun-failed RUN`: a run of the cases that failed in an
//! earlier run, from the case files that run was submitted with (the
//! coordinator keeps them), so that what runs again is what failed, even
//! after the local files changed.

use std::collections::HashSet;

use argus_proto::grpc;
use argus_store::{CaseRow, RunRow, Store};

use argus_grid::error::CoreError;
use argus_grid::matching::Selector;
use argus_grid::submit::Submission;

/// What a Submit asks for: itself, or when it names an earlier run
/// (`rerun_failed_of`), that run's files and only its failed cases.
pub async fn submission(store: &Store, request: grpc::SubmitRequest) -> Result<Submission, CoreError> {
    if request.rerun_failed_of.is_empty() {
        return Ok(Submission::new(request));
    }
    prepare(store, request).await
}

/// Reads the run `request.rerun_failed_of` names and fills `request` from
/// it (see [`fill`]).
pub async fn prepare(store: &Store, request: grpc::SubmitRequest) -> Result<Submission, CoreError> {
    let of = request.rerun_failed_of.clone();
    let old = match store.get_run(&of).await {
        Ok(run) => run,
        Err(argus_store::StoreError::NoRun(_)) => return Err(CoreError::NoRun(of)),
        Err(error) => return Err(error.into()),
    };
    let files = store.run_files(&of).await?;
    let cases = store.run_cases(&of).await?;
    fill(request, &old, files, &cases)
}

/// The rerun of `old`: its case files; its configuration, selector,
/// project, branch and commit where `request` leaves them empty; the cases
/// whose final result was a failure (muted ones only with `rerun_muted`).
pub fn fill(
    mut request: grpc::SubmitRequest,
    old: &RunRow,
    files: Vec<(String, String)>,
    cases: &[CaseRow],
) -> Result<Submission, CoreError> {
    let of = &old.id;
    if !request.cases.is_empty() {
        return Err(CoreError::Invalid(format!(
            "rerun of {of}: the case files come from that run; send none (got {})",
            request.cases.len()
        )));
    }
    if old.finished_at.is_none() {
        return Err(CoreError::Invalid(format!("run {of} has not finished: its failures are not known yet")));
    }
    let failed = |c: &&CaseRow| c.final_result.as_deref() == Some("failed");
    let rerun: HashSet<String> = cases
        .iter()
        .filter(failed)
        .filter(|c| request.rerun_muted || c.muted.is_none())
        .map(|c| c.case_id.clone())
        .collect();
    if rerun.is_empty() {
        let muted = cases.iter().filter(failed).filter(|c| c.muted.is_some()).count();
        let hint = match muted {
            0 => String::new(),
            n => format!(" ({n} muted case{} failed: --rerun-muted runs them too)", if n == 1 { "" } else { "s" }),
        };
        return Err(CoreError::Invalid(format!("run {of} has no failed case to run again{hint}")));
    }
    request.cases = files.into_iter().map(|(path, source)| grpc::CaseFile { path, source }).collect();
    if request.config_json.trim().is_empty() {
        request.config_json = old.config_json.clone();
    }
    if request.testowners.is_empty()
        && let Some(testowners) = &old.testowners
    {
        request.testowners.clone_from(testowners);
    }
    let empty_selector =
        request.selector.as_ref().is_none_or(|s| s.platform.is_empty() && s.labels.is_empty() && s.app.is_empty());
    if empty_selector {
        let selector: Selector = serde_json::from_str(&old.selector_json).map_err(|error| {
            CoreError::Internal(format!("run {of}'s selector does not read back ({error}); name one with --platform"))
        })?;
        request.selector = Some(grpc::Selector {
            platform: selector.platform.unwrap_or_default(),
            labels: selector.labels.into_iter().collect(),
            app: selector.app.unwrap_or_default(),
        });
    }
    for (field, from) in [
        (&mut request.project, Some(&old.project)),
        (&mut request.branch, old.branch.as_ref()),
        (&mut request.commit, old.commit_sha.as_ref()),
    ] {
        if field.is_empty()
            && let Some(from) = from
        {
            field.clone_from(from);
        }
    }
    Ok(Submission { request, only: Some(rerun) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old() -> RunRow {
        RunRow {
            id: "r1".into(),
            project: "shop".into(),
            branch: Some("main".into()),
            commit_sha: Some("abc".into()),
            trigger_by: None,
            selector_json: r#"{"platform":"ios","labels":{"os":"17"}}"#.into(),
            config_json: r#"{"timeout":5}"#.into(),
            retries: 1,
            priority: 1,
            started_at: 0,
            finished_at: Some(9),
            manifest_json: "{}".into(),
            platform: Some("ios".into()),
            result: Some("failed".into()),
            cases: Some(3),
            passed: Some(1),
            failed: Some(2),
            retried: Some(0),
            detached: 0,
            waiting_reason: None,
            muted_failed: Some(1),
            rerun_of: None,
            testowners: Some("* @shop".into()),
        }
    }

    fn case(id: &str, result: &str, muted: bool) -> CaseRow {
        CaseRow {
            case_id: id.into(),
            file: "cases/a.md".into(),
            ordinal: 0,
            expected_ms: 1,
            final_result: Some(result.into()),
            muted: muted.then(|| "flaky".into()),
            owner: None,
        }
    }

    #[test]
    fn a_rerun_takes_the_failed_cases_and_what_the_request_leaves_empty_from_the_old_run() {
        let cases = [case("ok", "passed", false), case("bad", "failed", false), case("known", "failed", true)];
        let files = vec![("cases/a.md".to_owned(), "old text".to_owned())];
        let request = grpc::SubmitRequest { rerun_failed_of: "r1".into(), branch: "fix".into(), ..Default::default() };
        let rerun = fill(request.clone(), &old(), files.clone(), &cases).unwrap();
        assert_eq!(rerun.only, Some(HashSet::from(["bad".to_owned()])));
        let sent = &rerun.request;
        assert_eq!(sent.cases[0].source, "old text");
        assert_eq!((sent.project.as_str(), sent.branch.as_str(), sent.commit.as_str()), ("shop", "fix", "abc"));
        assert_eq!(sent.config_json, r#"{"timeout":5}"#);
        assert_eq!(sent.testowners, "* @shop", "its owners as they were");
        let selector = sent.selector.clone().unwrap();
        assert_eq!((selector.platform.as_str(), selector.labels.get("os").map(String::as_str)), ("ios", Some("17")));
        let with_muted = grpc::SubmitRequest { rerun_muted: true, ..request.clone() };
        assert_eq!(fill(with_muted, &old(), files.clone(), &cases).unwrap().only.map(|o| o.len()), Some(2));
        let overridden = grpc::SubmitRequest {
            selector: Some(grpc::Selector { platform: "android".into(), ..Default::default() }),
            ..request.clone()
        };
        assert_eq!(
            fill(overridden, &old(), files.clone(), &cases).unwrap().request.selector.unwrap().platform,
            "android"
        );
    }

    #[test]
    fn a_rerun_of_nothing_says_why() {
        let files = Vec::new();
        let request = grpc::SubmitRequest { rerun_failed_of: "r1".into(), ..Default::default() };
        let only_muted = [case("ok", "passed", false), case("known", "failed", true)];
        let refused = fill(request.clone(), &old(), files.clone(), &only_muted).unwrap_err().to_string();
        assert_eq!(
            refused,
            "run r1 has no failed case to run again (1 muted case failed: --rerun-muted runs them too)"
        );
        let going = RunRow { finished_at: None, ..old() };
        let refused = fill(request.clone(), &going, files.clone(), &only_muted).unwrap_err().to_string();
        assert_eq!(refused, "run r1 has not finished: its failures are not known yet");
        let with_files = grpc::SubmitRequest { cases: vec![grpc::CaseFile::default()], ..request };
        let refused = fill(with_files, &old(), files, &only_muted).unwrap_err().to_string();
        assert_eq!(refused, "rerun of r1: the case files come from that run; send none (got 1)");
    }
}
