//! The cause of a failure: a pure function of the attempt, its baseline,
//! what differs and the case's history, with a stated rule per cause,
//! tried in this order (the first that holds names it):
//!
//! 1. `unsupported`: the step's method is not on this app.
//! 2. `infrastructure`: the app went away (relaunched, lost, not attached).
//! 3. `test-data`: the step that failed is a fixture, `assert` or `exec`.
//! 4. `backend`: up to the failing step a request failed or answered an
//!    error where the baseline's succeeded (or, without a baseline, a
//!    request answered 5xx or nothing).
//! 5. `app`: the app's version changed and the screen at the first
//!    difference differs.
//! 6. `timing`: the step waited all it could (its timeout, known) where
//!    the baseline's took more than half of that.
//! 7. `device`: it failed on this device and passed on another, in this
//!    run or since, failed on no other device since it last passed, and
//!    the device is suspect on more than this one failure: the case failed
//!    on it more than once since it last passed, or another case of the
//!    run failed on it and passed elsewhere (the quarantine's rule). One
//!    failure that passed elsewhere is as likely a flake as the device.
//! 8. `timing`: it passed on a retry on the same device, with nothing else
//!    different from its baseline.
//! 9. `unknown`: none of these; the evidence is what differs.
//!
//! Never a guess presented as fact: each cause comes with its evidence.

use serde::Serialize;

use super::diff::{Changes, RequestChange, Side, failing_step};

/// What the store knows of the case beyond the two attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// A device other than the failed attempt's where the case passed
    /// after failing there (this run's retry, or a later run).
    pub passed_elsewhere: Option<String>,
    /// Failures of the case on devices other than this one since its
    /// baseline (recently, without one).
    pub failed_elsewhere: usize,
    /// A later attempt of this run passed on the same device.
    pub passed_on_retry_here: bool,
    /// Failures of the case on this device since its baseline (recently,
    /// without one), this one included.
    pub failed_here: usize,
    /// Other cases of this run that failed on this device and passed on
    /// another.
    pub others_failed_here: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// backend, app, test-data, timing, device, infrastructure, unsupported, unknown.
    pub kind: &'static str,
    /// Why this cause: the rule that held and what it held on.
    pub evidence: Vec<String>,
}

/// What the agent or driver say when the app is gone.
const APP_GONE: [&str; 6] =
    ["No app attached", "App disconnected", "Agent server closed", "Not authenticated", "relaunched", "disconnected"];

pub fn cause(failed: &Side, baseline: Option<&Side>, changes: &Changes, facts: &Facts) -> Cause {
    let steps = &failed.observed.steps;
    let step = failing_step(&failed.observed).map(|i| &steps[i]);
    let named = |s: &argus_proto::grpc::StepObservation| format!("step {} `{}`", s.index + 1, s.step);
    let cause = |kind, evidence: Vec<String>| Cause { kind, evidence };
    if let Some(step) = step.filter(|s| s.status == "unsupported") {
        return cause("unsupported", vec![format!("{}: {}", named(step), step.error)]);
    }
    if let Some(step) = step.filter(|s| APP_GONE.iter().any(|m| s.error.contains(m))) {
        return cause("infrastructure", vec![format!("{} lost the app: {}", named(step), step.error)]);
    }
    if let Some(step) = step.filter(|s| !s.step.starts_with("app.")) {
        return cause("test-data", vec![format!("{} is not an app step and failed: {}", named(step), step.error)]);
    }
    let broke: Vec<&RequestChange> = changes.requests.iter().filter(|r| r.broke()).collect();
    if !broke.is_empty() && (baseline.is_some() || broke.iter().any(|r| r.to.is_some_and(|s| s == 0 || s >= 500))) {
        let mut evidence: Vec<String> = broke.iter().map(|r| r.describe()).collect();
        if baseline.is_none() {
            evidence.push("no passing attempt to compare with".into());
        }
        return cause("backend", evidence);
    }
    let version = changes.around.iter().find(|a| a.what == "app");
    if let Some(version) = version
        && !changes.screen.is_empty()
    {
        let mut evidence = vec![format!("app {} → {}", version.from, version.to)];
        evidence.extend(screen_evidence(changes));
        return cause("app", evidence);
    }
    if let (Some(step), Some(baseline)) = (step, baseline)
        && timed_out(step)
        && step.timeout_ms > 0
        && let Some(their) = baseline.observed.steps.get(step.index as usize)
        && their.ms * 2 > step.timeout_ms
    {
        return cause(
            "timing",
            vec![format!(
                "{} waited its {} ms and failed; it took {} ms when it last passed, more than half of that",
                named(step),
                step.timeout_ms,
                their.ms
            )],
        );
    }
    if let Some(other) = &facts.passed_elsewhere
        && facts.failed_elsewhere == 0
        && (facts.failed_here > 1 || facts.others_failed_here > 0)
    {
        let mut evidence =
            vec![format!("failed on {}, passed on {other}, and failed on no other device recently", failed.device_id)];
        if facts.failed_here > 1 {
            evidence.push(format!("failed {} times on {} since it last passed", facts.failed_here, failed.device_id));
        }
        if facts.others_failed_here > 0 {
            evidence.push(format!(
                "{} other case(s) of this run failed on {} and passed elsewhere",
                facts.others_failed_here, failed.device_id
            ));
        }
        return cause("device", evidence);
    }
    if facts.passed_on_retry_here && changes.only_the_outcome() {
        return cause("timing", vec![format!("passed on a retry on {} with nothing else different", failed.device_id)]);
    }
    let mut evidence: Vec<String> = changes.requests.iter().map(RequestChange::describe).collect();
    evidence.extend(screen_evidence(changes));
    evidence.extend(changes.problems.iter().cloned());
    if let Some(step) = step {
        evidence.push(format!("{} failed: {}", named(step), step.error));
    }
    cause("unknown", evidence)
}

/// The step used all the time it could wait, or its driver said it timed out.
fn timed_out(step: &argus_proto::grpc::StepObservation) -> bool {
    (step.timeout_ms > 0 && step.ms >= step.timeout_ms) || step.error.to_lowercase().contains("timed out")
}

fn screen_evidence(changes: &Changes) -> Vec<String> {
    let screen = &changes.screen;
    let mut evidence: Vec<String> = screen.disappeared.iter().map(|e| format!("{} disappeared", e.0)).collect();
    evidence.extend(screen.appeared.iter().map(|e| format!("{} appeared", e.0)));
    evidence.extend(screen.changed.iter().map(|c| format!("{} {} '{}' → '{}'", c.element.0, c.field, c.from, c.to)));
    evidence
}

/// What failures of one cause share, so that a run's failures can be
/// grouped: the request that broke, the element that went, the step.
pub fn signature(cause: &Cause, failed: &Side, changes: &Changes) -> String {
    let step = failing_step(&failed.observed).map(|i| &failed.observed.steps[i]);
    let verb = step.map_or("", |s| s.step.split_whitespace().next().unwrap_or(""));
    let error = step.map_or(String::new(), |s| normalised(&s.error));
    match cause.kind {
        "backend" => {
            let broke = changes.requests.iter().find(|r| r.broke());
            broke.map_or(error, |r| match r.to {
                Some(0) | None => format!("{} {} no answer", r.method, r.path),
                Some(status) => format!("{} {} {status}", r.method, r.path),
            })
        }
        "app" => match (changes.screen.disappeared.first(), changes.screen.appeared.first()) {
            (Some(gone), _) => format!("{} missing", gone.0),
            (None, Some(new)) => format!("{} appeared", new.0),
            (None, None) => format!("{verb}: {error}"),
        },
        "timing" => format!("slow {verb}"),
        "device" => format!("device {}", failed.device_id),
        "unsupported" => error,
        _ => format!("{verb}: {error}"),
    }
}

/// An error with its numbers taken out, so that `after 5012 ms` and
/// `after 5003 ms` are one signature; cut to 100 characters.
fn normalised(error: &str) -> String {
    let mut out = String::new();
    let mut digits = false;
    for c in error.lines().next().unwrap_or("").chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
        } else {
            digits = false;
            out.push(c);
        }
    }
    match out.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &out[..at]),
        None => out,
    }
}
