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
}
