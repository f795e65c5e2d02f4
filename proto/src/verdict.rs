//! A RunCase's verdict: the fields the grid decides on, typed, taken once
//! from the record by the worker that built it and sent beside the record's
//! JSON ([`grpc::AttemptResult::verdict`]). The coordinator stores and
//! forwards the JSON as it came; it judges, counts and files the verdict.

use crate::grpc;
use crate::run::{CaseResult, RunCase, RunDevice, StepStatus};

impl From<&RunCase> for grpc::CaseVerdict {
    fn from(line: &RunCase) -> Self {
        grpc::CaseVerdict {
            case_id: line.id.clone(),
            attempt: line.attempt,
            result: grpc::CaseOutcome::from(line.result).into(),
            ms: line.ms,
            steps: line
                .steps
                .iter()
                .map(|s| grpc::StepVerdict {
                    step: s.step.clone(),
                    status: grpc::StepOutcome::from(s.status).into(),
                    ms: s.ms,
                    error: s.error.clone(),
                })
                .collect(),
            files: crate::artifacts::files_of(line),
        }
    }
}

impl grpc::AttemptResult {
    /// The result of an attempt that ran to a record: the record as one
    /// line and its verdict beside it.
    pub fn recorded(lease_id: impl Into<String>, line: &RunCase) -> Self {
        grpc::AttemptResult {
            lease_id: lease_id.into(),
            run_case_json: line.to_line(),
            verdict: Some(Box::new(grpc::CaseVerdict::from(line))),
            ..Default::default()
        }
    }
}

impl From<CaseResult> for grpc::CaseOutcome {
    fn from(result: CaseResult) -> Self {
        match result {
            CaseResult::Passed => grpc::CaseOutcome::Passed,
            CaseResult::Failed => grpc::CaseOutcome::Failed,
            CaseResult::Unsupported => grpc::CaseOutcome::Unsupported,
        }
    }
}

impl From<StepStatus> for grpc::StepOutcome {
    fn from(status: StepStatus) -> Self {
        match status {
            StepStatus::Passed => grpc::StepOutcome::Passed,
            StepStatus::Failed => grpc::StepOutcome::Failed,
            StepStatus::Skipped => grpc::StepOutcome::Skipped,
            StepStatus::Unsupported => grpc::StepOutcome::Unsupported,
        }
    }
}

/// Why a verdict cannot be taken: said on the attempt, which runs again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadVerdict {
    #[error("the worker sent a record without its verdict")]
    Missing,
    #[error(
        "the worker's verdict is for case {found:?} attempt {found_attempt}, the lease for {case:?} attempt {attempt}"
    )]
    OtherAttempt { found: String, found_attempt: u32, case: String, attempt: u32 },
    #[error("the worker's verdict has no result (CaseOutcome {0})")]
    NoResult(i32),
    #[error("the worker's verdict has a step without a status (StepOutcome {status}) at step {index}")]
    NoStatus { status: i32, index: usize },
}

impl grpc::CaseVerdict {
    /// The case's result; `None` when the sender left it unset.
    pub fn case_result(&self) -> Option<CaseResult> {
        match grpc::CaseOutcome::try_from(self.result).ok()? {
            grpc::CaseOutcome::Passed => Some(CaseResult::Passed),
            grpc::CaseOutcome::Failed => Some(CaseResult::Failed),
            grpc::CaseOutcome::Unsupported => Some(CaseResult::Unsupported),
            grpc::CaseOutcome::Unspecified => None,
        }
    }

    /// Checks the verdict against the attempt it is said to be for (case
    /// and attempt number) and that every outcome is set, naming what is
    /// wrong. Returns the case's result.
    pub fn checked(&self, case: &str, attempt: u32) -> Result<CaseResult, BadVerdict> {
        if self.case_id != case || self.attempt != attempt {
            return Err(BadVerdict::OtherAttempt {
                found: self.case_id.clone(),
                found_attempt: self.attempt,
                case: case.to_owned(),
                attempt,
            });
        }
        if let Some(index) = self.steps.iter().position(|s| s.status().as_str().is_none()) {
            return Err(BadVerdict::NoStatus { status: self.steps[index].status, index });
        }
        self.case_result().ok_or(BadVerdict::NoResult(self.result))
    }
}

impl grpc::StepOutcome {
    /// As `cases.jsonl` spells it; `None` for an unset status.
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            grpc::StepOutcome::Passed => Some(StepStatus::Passed.as_str()),
            grpc::StepOutcome::Failed => Some(StepStatus::Failed.as_str()),
            grpc::StepOutcome::Skipped => Some(StepStatus::Skipped.as_str()),
            grpc::StepOutcome::Unsupported => Some(StepStatus::Unsupported.as_str()),
            grpc::StepOutcome::Unspecified => None,
        }
    }
}

impl From<&grpc::DeviceRef> for RunDevice {
    fn from(device: &grpc::DeviceRef) -> Self {
        RunDevice { id: device.id.clone(), platform: device.platform.clone(), worker: device.worker.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> RunCase {
        let text = r#"{"id":"home/open","file":"home.case.yaml","attempt":2,"result":"failed","startedAt":"2026-01-01T00:00:00.000Z","ms":812,"steps":[{"step":"app.see","status":"passed","ms":400,"screenshot":"home/01.png"},{"step":"app.press","status":"failed","ms":412,"error":"no #buy"}],"video":"home/film.mp4"}"#;
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_verdict_carries_what_the_record_says() {
        let verdict = grpc::CaseVerdict::from(&line());
        assert_eq!(verdict.checked("home/open", 2), Ok(CaseResult::Failed));
        assert_eq!(verdict.ms, 812);
        assert_eq!(verdict.steps[1].status(), grpc::StepOutcome::Failed);
        assert_eq!(verdict.steps[1].error.as_deref(), Some("no #buy"));
        assert_eq!(verdict.files, ["home/film.mp4", "home/01.png"]);
    }

    #[test]
    fn a_verdict_for_another_attempt_or_without_outcomes_is_named() {
        let verdict = grpc::CaseVerdict::from(&line());
        let other = verdict.checked("home/open", 3).unwrap_err();
        assert!(other.to_string().contains("attempt 2, the lease for \"home/open\" attempt 3"), "{other}");
        let unset = grpc::CaseVerdict { result: 0, ..verdict.clone() };
        assert_eq!(unset.checked("home/open", 2), Err(BadVerdict::NoResult(0)));
        let mut bad_step = verdict;
        bad_step.steps[0].status = 9;
        assert_eq!(bad_step.checked("home/open", 2), Err(BadVerdict::NoStatus { status: 9, index: 0 }));
    }

    #[test]
    fn a_device_is_written_after_the_known_fields() {
        let mut line = line();
        line.device = Some(RunDevice { id: "w1/8123".into(), platform: "ios".into(), worker: "w1".into() });
        let text = line.to_line();
        assert!(
            text.ends_with(r#""video":"home/film.mp4","device":{"id":"w1/8123","platform":"ios","worker":"w1"}}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<RunCase>(&text).unwrap().device, line.device);
    }
}
