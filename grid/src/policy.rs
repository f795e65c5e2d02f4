//! What happens after an attempt ends, as a pure decision: data in,
//! decision out, like the scheduler. The owner task records the decision in
//! the same transaction as the attempt's result, then applies it.
//!
//! - An attempt the infrastructure cut short (device or worker lost, a hook
//!   failed, the app relaunched) runs again as the same attempt, one try
//!   later: it uses no retry.
//! - A failed attempt runs again as the next attempt while the run has
//!   retries left (lynkeus: `--retries N`, default 1; `--once` is 0).
//! - Anything else is the case's final result.
//!
//! And what a device's attempts say about the device ([`Suspicion`]): three
//! infrastructure failures in a row, or three cases in a row that failed on
//! it and then passed elsewhere, quarantine it.

use argus_proto::run::CaseResult;

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Queue `attempt` again as try `try_no`.
    RunAgain { attempt: u32, try_no: u32, kind: Again },
    /// The case is done with this result.
    Final(CaseResult),
}

/// Why an attempt runs again (the metrics' `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    Infrastructure,
    Retry,
}

impl Again {
    pub fn name(self) -> &'static str {
        match self {
            Again::Infrastructure => "infrastructure",
            Again::Retry => "retry",
        }
    }
}

/// `result` is `None` when the infrastructure cut the attempt short.
pub fn after_attempt(result: Option<CaseResult>, attempt: u32, try_no: u32, retries: u32) -> Next {
    match result {
        None => Next::RunAgain { attempt, try_no: try_no + 1, kind: Again::Infrastructure },
        Some(CaseResult::Failed) if attempt <= retries => {
            Next::RunAgain { attempt: attempt + 1, try_no: 1, kind: Again::Retry }
        }
        Some(result) => Next::Final(result),
    }
}

/// How many infrastructure failures in a row quarantine a device.
pub const INFRASTRUCTURE_FAILURES: u32 = 3;

/// How many cases in a row may fail on a device and pass elsewhere before
/// the device is quarantined.
pub const SUSPECT_CASES: usize = 3;

/// What the coordinator holds against one device, fed its attempts; each
/// call that crosses a threshold answers the quarantine's reason.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Suspicion {
    infrastructure_failures: u32,
    /// Cases that failed here since this device last passed one, and then
    /// passed on another device: the device, not the case, is suspect.
    failed_but_passed_elsewhere: Vec<String>,
}

impl Suspicion {
    /// The infrastructure cut an attempt short here (`why`).
    pub fn infrastructure_failure(&mut self, why: &str) -> Option<String> {
        self.infrastructure_failures += 1;
        let failures = self.infrastructure_failures;
        (failures >= INFRASTRUCTURE_FAILURES).then(|| format!("{failures} infrastructure failures in a row: {why}"))
    }

    /// An attempt here ran to a result of the case's own (pass, fail or
    /// unsupported): the device's infrastructure works; a pass also clears
    /// what other devices' passes held against it.
    pub fn ran(&mut self, passed: bool) {
        self.infrastructure_failures = 0;
        if passed {
            self.failed_but_passed_elsewhere.clear();
        }
    }

    /// `case` failed here and has now passed on another device.
    pub fn passed_elsewhere(&mut self, case: &str) -> Option<String> {
        if self.failed_but_passed_elsewhere.iter().any(|c| c == case) {
            return None;
        }
        self.failed_but_passed_elsewhere.push(case.to_owned());
        let cases = &self.failed_but_passed_elsewhere;
        (cases.len() >= SUSPECT_CASES).then(|| {
            format!("{} cases in a row failed here and passed on other devices: {}", cases.len(), cases.join(", "))
        })
    }

    /// An operator quarantined the device or let it back: it starts afresh.
    pub fn forgive(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_infrastructure_failure_runs_the_same_attempt_again_without_a_retry() {
        assert_eq!(after_attempt(None, 1, 1, 0), Next::RunAgain { attempt: 1, try_no: 2, kind: Again::Infrastructure });
        assert_eq!(after_attempt(None, 2, 3, 1), Next::RunAgain { attempt: 2, try_no: 4, kind: Again::Infrastructure });
    }

    #[test]
    fn a_failure_is_retried_while_retries_are_left() {
        assert_eq!(
            after_attempt(Some(CaseResult::Failed), 1, 3, 1),
            Next::RunAgain { attempt: 2, try_no: 1, kind: Again::Retry },
            "a retry starts its tries afresh"
        );
        assert_eq!(after_attempt(Some(CaseResult::Failed), 2, 1, 1), Next::Final(CaseResult::Failed));
        assert_eq!(after_attempt(Some(CaseResult::Failed), 1, 1, 0), Next::Final(CaseResult::Failed), "--once");
    }

    #[test]
    fn a_pass_or_an_unsupported_case_is_final() {
        assert_eq!(after_attempt(Some(CaseResult::Passed), 1, 1, 1), Next::Final(CaseResult::Passed));
        assert_eq!(after_attempt(Some(CaseResult::Unsupported), 1, 1, 1), Next::Final(CaseResult::Unsupported));
    }

    #[test]
    fn the_third_infrastructure_failure_in_a_row_quarantines() {
        let mut device = Suspicion::default();
        assert_eq!(device.infrastructure_failure("the app went away"), None);
        assert_eq!(device.infrastructure_failure("the app went away"), None);
        assert_eq!(
            device.infrastructure_failure("a hook failed").as_deref(),
            Some("3 infrastructure failures in a row: a hook failed")
        );
    }

    #[test]
    fn an_attempt_that_ran_resets_the_infrastructure_count() {
        let mut device = Suspicion::default();
        device.infrastructure_failure("x");
        device.infrastructure_failure("x");
        device.ran(false);
        assert_eq!(device.infrastructure_failure("x"), None, "a failed case is the case's, not the device's");
    }

    #[test]
    fn three_cases_that_failed_here_and_passed_elsewhere_quarantine() {
        let mut device = Suspicion::default();
        assert_eq!(device.passed_elsewhere("login"), None);
        assert_eq!(device.passed_elsewhere("login"), None, "one case counts once");
        assert_eq!(device.passed_elsewhere("cart"), None);
        assert_eq!(
            device.passed_elsewhere("search").as_deref(),
            Some("3 cases in a row failed here and passed on other devices: login, cart, search")
        );
    }

    #[test]
    fn a_pass_here_or_an_operator_clears_the_suspicion() {
        let mut device = Suspicion::default();
        device.passed_elsewhere("login");
        device.passed_elsewhere("cart");
        device.ran(true);
        assert_eq!(device.passed_elsewhere("search"), None, "not in a row any more");
        device.passed_elsewhere("x");
        device.infrastructure_failure("y");
        device.forgive();
        assert_eq!(device, Suspicion::default());
    }
}
