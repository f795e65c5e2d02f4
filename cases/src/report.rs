//! What a run leaves: the lynkeus run directory (`run.json`, `cases.jsonl`,
//! spec §1.13) and JUnit XML for CI systems.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use argus_proto::run::{CASES_FILE, CaseResult, MANIFEST_FILE, RunCase, RunManifest, StepStatus, totals};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};

/// A run directory being written: `run.json` at the start, one
/// `cases.jsonl` line per attempt as it finishes, `run.json` again at the end.
pub struct RunDir {
    dir: PathBuf,
    manifest: RunManifest,
    lines: File,
    attempts: Vec<RunCase>,
}

/// A run directory's file that cannot be written, named.
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", path.display())]
pub struct RunDirError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

fn io_error(path: &Path, error: std::io::Error) -> RunDirError {
    RunDirError { path: path.to_owned(), error }
}

impl RunDir {
    pub fn create(dir: &Path, started_at: String) -> Result<Self, RunDirError> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let manifest = RunManifest::started(started_at);
        let manifest_path = dir.join(MANIFEST_FILE);
        std::fs::write(&manifest_path, manifest.to_json_pretty()).map_err(|e| io_error(&manifest_path, e))?;
        let lines_path = dir.join(CASES_FILE);
        let lines = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&lines_path)
            .map_err(|e| io_error(&lines_path, e))?;
        Ok(Self { dir: dir.to_owned(), manifest, lines, attempts: Vec::new() })
    }

    /// Appends one attempt, in the order attempts finish.
    pub fn add(&mut self, attempt: &RunCase) -> Result<(), RunDirError> {
        let path = self.dir.join(CASES_FILE);
        writeln!(self.lines, "{}", attempt.to_line()).map_err(|e| io_error(&path, e))?;
        self.lines.flush().map_err(|e| io_error(&path, e))?;
        self.attempts.push(attempt.clone());
        Ok(())
    }

    /// Rewrites `run.json` with the end, what the app ran on, and the totals
    /// over each case's last attempt.
    pub fn finish(
        &mut self,
        finished_at: String,
        platform: Option<String>,
        native: Option<bool>,
    ) -> Result<(), RunDirError> {
        self.manifest.finished_at = Some(finished_at);
        self.manifest.platform = platform;
        self.manifest.native = native;
        self.manifest.totals = Some(totals(&self.attempts));
        let path = self.dir.join(MANIFEST_FILE);
        std::fs::write(&path, self.manifest.to_json_pretty()).map_err(|e| io_error(&path, e))
    }
}

impl RunDir {
    /// Rewrites `run.json` with a manifest made elsewhere (the coordinator's).
    pub fn finish_with(&mut self, manifest: &RunManifest) -> Result<(), RunDirError> {
        self.manifest = manifest.clone();
        let path = self.dir.join(MANIFEST_FILE);
        std::fs::write(&path, self.manifest.to_json_pretty()).map_err(|e| io_error(&path, e))
    }
}

/// JUnit XML: one test case per case, from its last attempt; a failed first
/// attempt of a case that then passed is a flaky run; unsupported is skipped.
pub fn junit(suite_name: &str, attempts: &[RunCase]) -> String {
    junit_muted(suite_name, attempts, &std::collections::BTreeMap::new())
}

/// [`junit`], where a case of `muted` (case id → why it is muted) that
/// failed is skipped with its reason, its failure kept in the description:
/// a muted case does not fail the run.
pub fn junit_muted(
    suite_name: &str,
    attempts: &[RunCase],
    muted: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut suite = TestSuite::new(suite_name);
    let mut ids: Vec<&str> = Vec::new();
    for attempt in attempts {
        if !ids.contains(&attempt.id.as_str()) {
            ids.push(&attempt.id);
        }
    }
    for id in ids {
        let tries: Vec<&RunCase> = attempts.iter().filter(|a| a.id == id).collect();
        let last = tries.last().expect("at least one attempt");
        let failure = |attempt: &RunCase| -> (String, String) {
            let step = attempt.steps.iter().find(|s| matches!(s.status, StepStatus::Failed | StepStatus::Unsupported));
            let message =
                step.map_or("failed".to_owned(), |s| format!("{}: {}", s.step, s.error.as_deref().unwrap_or("failed")));
            let mut description = steps_text(attempt);
            if let Some(evidence) = &attempt.evidence {
                if let Some(why) = &evidence.why {
                    description.push_str(&format!("\nwhy: {why}"));
                }
                if let Some(screen) = &evidence.screen {
                    description.push_str(&format!("\nscreen:\n{screen}"));
                }
                for request in evidence.requests.iter().flatten() {
                    description.push_str(&format!("\nrequest: {request}"));
                }
            }
            (message, description)
        };
        let mut status = match last.result {
            CaseResult::Passed => TestCaseStatus::success(),
            CaseResult::Unsupported => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(failure(last).0);
                status
            }
            CaseResult::Failed => match muted.get(id) {
                Some(why) => {
                    let (message, description) = failure(last);
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(format!("muted: {why}")).set_description(format!("{message}\n{description}"));
                    status
                }
                None => {
                    let (message, description) = failure(last);
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(message).set_description(description);
                    status
                }
            },
        };
        for earlier in &tries[..tries.len() - 1] {
            let (message, description) = failure(earlier);
            let mut rerun = TestRerun::new(NonSuccessKind::Failure);
            rerun.set_message(message).set_description(description).set_time(Duration::from_millis(earlier.ms));
            status.add_rerun(rerun);
        }
        let mut case =
            TestCase::new(last.title.clone().map_or_else(|| id.to_owned(), |t| format!("{id}: {t}")), status);
        case.set_classname(last.file.clone()).set_time(Duration::from_millis(last.ms));
        // Where each attempt ran (on a grid): the last as `device` and
        // `platform`, every one as `attempt.N.device` and `attempt.N.platform`.
        let on = |attempt: &RunCase, field: &str| {
            let device = attempt.device.as_ref()?;
            Some(if field == "device" { device.id.clone() } else { device.platform.clone() })
        };
        for field in ["device", "platform"] {
            if let Some(value) = on(last, field) {
                case.add_property(Property::new(field, value));
            }
            for attempt in &tries {
                if let Some(value) = on(attempt, field) {
                    case.add_property(Property::new(format!("attempt.{}.{field}", attempt.attempt), value));
                }
            }
        }
        suite.add_test_case(case);
    }
    let mut report = Report::new(suite_name);
    report.add_test_suite(suite);
    report.to_string().unwrap_or_default()
}

fn steps_text(attempt: &RunCase) -> String {
    attempt
        .steps
        .iter()
        .map(|s| {
            let status = format!("{:?}", s.status).to_lowercase();
            match &s.error {
                Some(error) => format!("{status:>11} {} ({} ms): {error}", s.step, s.ms),
                None => format!("{status:>11} {} ({} ms)", s.step, s.ms),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use argus_proto::run::{RunDir as ReadBack, parse_cases};

    const FAILED: &str = r#"{"id":"pay","title":"Paying a friend","file":"cases/pay.md","attempt":1,"result":"failed","startedAt":"2026-01-02T03:00:01.000Z","ms":1200,"steps":[{"step":"app.see Sent","status":"failed","ms":3000,"error":"not on screen: Sent","section":"steps"}],"evidence":{"why":"the transfer was refused"}}"#;
    const PASSED: &str = r#"{"id":"pay","title":"Paying a friend","file":"cases/pay.md","attempt":2,"result":"passed","startedAt":"2026-01-02T03:00:30.000Z","ms":1200,"steps":[{"step":"app.see Sent","status":"passed","ms":5,"section":"steps"}]}"#;
    const UNSUPPORTED: &str = r#"{"id":"stores","file":"cases/stores.md","attempt":1,"result":"unsupported","startedAt":"2026-01-02T03:02:00.000Z","ms":35,"steps":[{"step":"app.call command: stores","status":"unsupported","ms":3,"error":"this host has no stores","section":"steps"}]}"#;

    #[test]
    fn the_run_directory_at_start_and_at_the_end() {
        let dir = std::env::temp_dir().join(format!("argus-rundir-{}", std::process::id()));
        let mut run = RunDir::create(&dir, "2026-01-02T03:00:00.000Z".into()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("run.json")).unwrap(),
            "{\n  \"schema\": 1,\n  \"startedAt\": \"2026-01-02T03:00:00.000Z\"\n}\n"
        );
        for line in [FAILED, PASSED] {
            run.add(&serde_json::from_str(line).unwrap()).unwrap();
        }
        run.finish("2026-01-02T03:01:00.000Z".into(), Some("ios".into()), Some(false)).unwrap();
        let back = ReadBack::read(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("cases.jsonl")).unwrap(), format!("{FAILED}\n{PASSED}\n"));
        let totals = back.manifest.totals.unwrap();
        assert_eq!((totals.cases, totals.passed, totals.failed, totals.retried), (1, 1, 0, 1));
        assert_eq!(back.manifest.finished_at.as_deref(), Some("2026-01-02T03:01:00.000Z"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn junit_marks_flaky_failed_and_skipped_cases() {
        let attempts = parse_cases(&format!("{FAILED}\n{PASSED}\n{UNSUPPORTED}\n"), "cases.jsonl").unwrap();
        let xml = junit("argus", &attempts);
        assert!(xml.contains(r#"tests="2""#), "{xml}");
        assert!(xml.contains(r#"name="pay: Paying a friend""#), "{xml}");
        assert!(xml.contains("<flakyFailure"), "{xml}");
        assert!(xml.contains("the transfer was refused"), "{xml}");
        assert!(xml.contains("<skipped"), "{xml}");
        assert!(xml.contains("this host has no stores"), "{xml}");
        let failed = parse_cases(&format!("{FAILED}\n"), "cases.jsonl").unwrap();
        let xml = junit("argus", &failed);
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains(r#"message="app.see Sent: not on screen: Sent""#), "{xml}");
        // Muted: skipped with its reason; the failure kept for whoever reads it.
        let muted = [("pay".to_owned(), "flaky keyboard <#12>".to_owned())].into_iter().collect();
        let xml = junit_muted("argus", &failed, &muted);
        assert!(xml.contains(r#"failures="0""#) && xml.contains(r#"skipped="1""#), "{xml}");
        assert!(xml.contains(r#"<skipped message="muted: flaky keyboard &lt;#12&gt;">"#), "{xml}");
        assert!(xml.contains("not on screen: Sent"), "{xml}");
    }

    #[test]
    fn junit_names_the_device_and_platform_of_each_attempt() {
        let on = |line: &str, device: &str, platform: &str| {
            let mut case: RunCase = serde_json::from_str(line).unwrap();
            case.device =
                Some(argus_proto::run::RunDevice { id: device.into(), platform: platform.into(), worker: "w".into() });
            case
        };
        let xml = junit("shop", &[on(FAILED, "w/1", "ios"), on(PASSED, "w/2", "android")]);
        for property in [
            r#"<property name="device" value="w/2"/>"#,
            r#"<property name="attempt.1.device" value="w/1"/>"#,
            r#"<property name="attempt.2.device" value="w/2"/>"#,
            r#"<property name="platform" value="android"/>"#,
            r#"<property name="attempt.1.platform" value="ios"/>"#,
        ] {
            assert!(xml.contains(property), "{property} in {xml}");
        }
        assert!(xml.contains(r#"<testsuite name="shop""#), "{xml}");
    }
}
