//! "Since it last passed": a failed attempt beside its baseline, step by
//! step. Pure: what the store holds in, what changed out.

use std::collections::{BTreeMap, HashMap};

use argus_proto::grpc::{AttemptObserved, ObservedElement, StepObservation};
use serde::Serialize;

/// One attempt as a diff reads it: what it saw, and where it ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Side {
    pub run_id: String,
    pub attempt: u32,
    pub observed: AttemptObserved,
    pub device_id: String,
    pub worker_id: String,
    pub branch: String,
    pub commit: String,
    pub finished_at: i64,
}

/// Where the two attempts first part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstDifference {
    /// 1-based, as a person counts steps.
    pub step: u32,
    pub label: String,
    /// `failed` (passed there, failed here), `route` (the app was elsewhere
    /// after it) or `failed-no-baseline`.
    pub kind: &'static str,
    pub status: String,
    pub baseline_status: Option<String>,
    pub route: Option<String>,
    pub baseline_route: Option<String>,
    pub error: Option<String>,
}

/// An element as a person names it: `#testId`, else its kind and text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ElementName(pub String);

impl ElementName {
    pub fn of(element: &ObservedElement) -> Self {
        if !element.test_id.is_empty() {
            return Self(format!("#{}", element.test_id));
        }
        if element.text.is_empty() {
            Self(element.kind.clone())
        } else {
            Self(format!("{} '{}'", element.kind, element.text))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElementChange {
    pub element: ElementName,
    /// `text`, `value`, `enabled`, `hidden` or `covered`.
    pub field: &'static str,
    pub from: String,
    pub to: String,
}

/// The screen after the first differing step, against the baseline's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScreenDiff {
    pub appeared: Vec<ElementName>,
    pub disappeared: Vec<ElementName>,
    pub changed: Vec<ElementChange>,
}

impl ScreenDiff {
    pub fn is_empty(&self) -> bool {
        self.appeared.is_empty() && self.disappeared.is_empty() && self.changed.is_empty()
    }
}

/// A request up to the first differing step, against the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestChange {
    /// `status` (it answered otherwise), `failed` (no answer), `new`,
    /// `gone`, or `sent` (an error answer, when there is no baseline).
    pub kind: &'static str,
    pub method: String,
    /// The URL without its query.
    pub path: String,
    /// The baseline's status (0: it failed without an answer).
    pub from: Option<u32>,
    pub to: Option<u32>,
    pub error: Option<String>,
}

impl RequestChange {
    /// `POST /api/cart 200 → 503`, `GET /feed failed: offline`, …
    pub fn describe(&self) -> String {
        let what = format!("{} {}", self.method, self.path);
        let status = |s: Option<u32>| match s {
            Some(0) | None => "no answer".to_owned(),
            Some(s) => s.to_string(),
        };
        match self.kind {
            "status" => format!("{what} {} → {}", status(self.from), status(self.to)),
            "failed" => match &self.error {
                Some(error) => format!("{what} failed: {error}"),
                None => format!("{what} failed"),
            },
            "new" => format!("{what} {} (new)", status(self.to)),
            "sent" => format!("{what} {}", status(self.to)),
            _ => format!("{what} no longer sent"),
        }
    }

    /// It went wrong here where it had worked: a failed or erroring answer.
    pub fn broke(&self) -> bool {
        let bad = |s: Option<u32>| s.is_some_and(|s| s == 0 || s >= 400);
        match self.kind {
            "status" => bad(self.to) && !bad(self.from),
            "failed" => true,
            "new" | "sent" => bad(self.to),
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EventsDiff {
    pub missing: Vec<String>,
    pub new: Vec<String>,
}

/// A step that took much longer than it usually does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowerStep {
    pub step: u32,
    pub label: String,
    pub ms: u64,
    /// Its median in the case's recent passes (the baseline's when there
    /// is no history), and their spread (median absolute deviation).
    pub usual_ms: u64,
    pub spread_ms: u64,
}

/// Something around the attempt that differs from the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AroundChange {
    /// `app`, `agent`, `device`, `model`, `os` or `worker`.
    pub what: &'static str,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitRange {
    pub branch: String,
    pub from: String,
    pub to: String,
    /// Runs of the branch between the baseline's run and this one.
    pub runs_between: i64,
}

/// The passing attempt compared with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineRef {
    pub run_id: String,
    pub attempt: u32,
    pub branch: String,
    pub commit: String,
    pub finished_at: i64,
    /// On the failure's own branch, or the newest pass on another.
    pub same_branch: bool,
}

/// What differs, before any judgement of why.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Changes {
    pub first_difference: Option<FirstDifference>,
    pub screen: ScreenDiff,
    pub requests: Vec<RequestChange>,
    pub events: EventsDiff,
    pub slower: Vec<SlowerStep>,
    pub around: Vec<AroundChange>,
    /// Crashes and stalls up to the first difference that the baseline
    /// did not have.
    pub problems: Vec<String>,
}

impl Changes {
    /// Nothing differs but the outcome: same screen, requests and events.
    pub fn only_the_outcome(&self) -> bool {
        self.screen.is_empty()
            && self.requests.is_empty()
            && self.events.missing.is_empty()
            && self.events.new.is_empty()
            && self.problems.is_empty()
    }
}

/// The index of the step that failed, if one did.
pub fn failing_step(observed: &AttemptObserved) -> Option<usize> {
    observed.steps.iter().position(|s| s.status == "failed" || s.status == "unsupported")
}

/// What differs between a failed attempt and its baseline; `step_times`
/// holds each step's times (by index) in the case's recent passes.
pub fn changes(failed: &Side, baseline: Option<&Side>, step_times: &HashMap<usize, Vec<u64>>) -> Changes {
    let steps = &failed.observed.steps;
    let failing = failing_step(&failed.observed);
    let Some(baseline) = baseline else {
        // Against nothing, the requests that answered an error or nothing
        // are what the `backend` rule reads.
        let upto = failing.unwrap_or(steps.len().saturating_sub(1));
        let sent = requests(steps, &[], upto).into_iter().map(|r| RequestChange { kind: "sent", ..r });
        return Changes {
            first_difference: failing.map(|i| first(&steps[i], None, "failed-no-baseline")),
            requests: sent.filter(RequestChange::broke).collect(),
            slower: slower(steps, None, step_times, failing),
            problems: problems(steps, &[], upto),
            ..Changes::default()
        };
    };
    let theirs = &baseline.observed.steps;
    let mut first_difference = None;
    let mut at = failing;
    for (i, step) in steps.iter().enumerate() {
        let Some(their) = theirs.get(i) else { break };
        let failed_here = (step.status == "failed" || step.status == "unsupported") && their.status == "passed";
        let elsewhere = step.screen_read && their.screen_read && step.route != their.route;
        if failed_here || elsewhere {
            first_difference = Some(first(step, Some(their), if failed_here { "failed" } else { "route" }));
            at = Some(i);
            break;
        }
    }
    if first_difference.is_none()
        && let Some(i) = failing
    {
        first_difference = Some(first(&steps[i], theirs.get(i), "failed"));
    }
    let upto = at.unwrap_or(steps.len().saturating_sub(1));
    let screen = match at {
        Some(i) => screen_diff(steps.get(i), theirs.get(i)),
        None => ScreenDiff::default(),
    };
    Changes {
        first_difference,
        screen,
        requests: requests(steps, theirs, upto),
        events: events(steps, theirs, upto),
        slower: slower(steps, Some(theirs), step_times, failing),
        around: around(failed, baseline),
        problems: problems(steps, theirs, upto),
    }
}

fn first(step: &StepObservation, their: Option<&StepObservation>, kind: &'static str) -> FirstDifference {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    FirstDifference {
        step: step.index + 1,
        label: step.step.clone(),
        kind,
        status: step.status.clone(),
        baseline_status: their.map(|t| t.status.clone()),
        route: step.screen_read.then(|| step.route.clone()),
        baseline_route: their.filter(|t| t.screen_read).map(|t| t.route.clone()),
        error: some(&step.error),
    }
}

/// Elements by name; several of one name are told apart by their order.
fn by_name(step: Option<&StepObservation>) -> BTreeMap<(ElementName, usize), &ObservedElement> {
    let mut seen: HashMap<ElementName, usize> = HashMap::new();
    let mut named = BTreeMap::new();
    for element in step.filter(|s| s.screen_read).map_or(&[][..], |s| &s.elements[..]) {
        let name = ElementName::of(element);
        let n = seen.entry(name.clone()).or_default();
        named.insert((name, *n), element);
        *n += 1;
    }
    named
}

fn screen_diff(step: Option<&StepObservation>, their: Option<&StepObservation>) -> ScreenDiff {
    let (Some(step), Some(their)) = (step, their) else { return ScreenDiff::default() };
    if !step.screen_read || !their.screen_read {
        return ScreenDiff::default();
    }
    let (mine, theirs) = (by_name(Some(step)), by_name(Some(their)));
    let mut diff = ScreenDiff::default();
    for (key, element) in &mine {
        let Some(was) = theirs.get(key) else {
            if element.hidden.is_empty() {
                diff.appeared.push(key.0.clone());
            }
            continue;
        };
        let flag = |b: bool, yes: &str, no: &str| if b { yes.to_owned() } else { no.to_owned() };
        let fields: [(&'static str, String, String); 5] = [
            ("text", was.text.clone(), element.text.clone()),
            ("value", was.value.clone(), element.value.clone()),
            ("enabled", flag(!was.disabled, "enabled", "disabled"), flag(!element.disabled, "enabled", "disabled")),
            (
                "hidden",
                flag(was.hidden.is_empty(), "shown", &was.hidden),
                flag(element.hidden.is_empty(), "shown", &element.hidden),
            ),
            ("covered", flag(was.covered, "covered", "uncovered"), flag(element.covered, "covered", "uncovered")),
        ];
        for (field, from, to) in fields {
            if from != to {
                diff.changed.push(ElementChange { element: key.0.clone(), field, from, to });
            }
        }
    }
    for (key, element) in &theirs {
        if !mine.contains_key(key) && element.hidden.is_empty() {
            diff.disappeared.push(key.0.clone());
        }
    }
    diff
}

/// Each request (method and path) up to step `upto`, with its statuses in order.
fn sent(steps: &[StepObservation], upto: usize) -> BTreeMap<(String, String), Vec<(u32, String)>> {
    let mut sent: BTreeMap<(String, String), Vec<(u32, String)>> = BTreeMap::new();
    for step in steps.iter().take(upto + 1) {
        for request in &step.requests {
            let path = request.url.split(['?', '#']).next().unwrap_or_default();
            let path = path.split_once("://").map_or(path, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
            sent.entry((request.method.clone(), path.to_owned()))
                .or_default()
                .push((request.status, request.error.clone()));
        }
    }
    sent
}

fn requests(steps: &[StepObservation], theirs: &[StepObservation], upto: usize) -> Vec<RequestChange> {
    let (mine, before) = (sent(steps, upto), sent(theirs, upto));
    let mut changes = Vec::new();
    for ((method, path), answers) in &mine {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let (status, error) = answers.iter().find(|(s, _)| *s == 0 || *s >= 400).unwrap_or(&answers[0]);
        let change = |kind, from| RequestChange {
            kind,
            method: method.clone(),
            path: path.clone(),
            from,
            to: Some(*status),
            error: some(error),
        };
        match before.get(&(method.clone(), path.clone())) {
            None => changes.push(change("new", None)),
            Some(was) => {
                let usual = was.iter().find(|(s, _)| *s == 0 || *s >= 400).unwrap_or(&was[0]).0;
                if *status == 0 && usual != 0 {
                    changes.push(change("failed", Some(usual)));
                } else if *status != usual {
                    changes.push(change("status", Some(usual)));
                }
            }
        }
    }
    for ((method, path), answers) in &before {
        if !mine.contains_key(&(method.clone(), path.clone())) {
            changes.push(RequestChange {
                kind: "gone",
                method: method.clone(),
                path: path.clone(),
                from: Some(answers[0].0),
                to: None,
                error: None,
            });
        }
    }
    // What broke first, then the rest.
    changes.sort_by_key(|c| !c.broke());
    changes
}

fn events(steps: &[StepObservation], theirs: &[StepObservation], upto: usize) -> EventsDiff {
    let names = |steps: &[StepObservation]| -> Vec<String> {
        let mut names: Vec<String> = steps.iter().take(upto + 1).flat_map(|s| s.events.iter().cloned()).collect();
        names.sort();
        names.dedup();
        names
    };
    let (mine, before) = (names(steps), names(theirs));
    EventsDiff {
        missing: before.iter().filter(|n| !mine.contains(n)).cloned().collect(),
        new: mine.iter().filter(|n| !before.contains(n)).cloned().collect(),
    }
}

fn problems(steps: &[StepObservation], theirs: &[StepObservation], upto: usize) -> Vec<String> {
    let before: Vec<&str> = theirs.iter().flat_map(|s| s.problems.iter().map(|p| p.message.as_str())).collect();
    steps
        .iter()
        .take(upto + 1)
        .flat_map(|s| s.problems.iter())
        .filter(|p| !before.contains(&p.message.as_str()))
        .map(|p| format!("{}: {}", p.kind, p.message))
        .collect()
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// Steps beyond their own spread: slower than the median of recent passes
/// by more than three spreads, half the median and 200 ms, whichever is
/// most.
fn slower(
    steps: &[StepObservation],
    theirs: Option<&[StepObservation]>,
    step_times: &HashMap<usize, Vec<u64>>,
    failing: Option<usize>,
) -> Vec<SlowerStep> {
    let last = failing.unwrap_or(steps.len().saturating_sub(1));
    let mut slower = Vec::new();
    for (i, step) in steps.iter().enumerate().take(last + 1) {
        if step.status == "skipped" {
            continue;
        }
        let mut times = step_times.get(&i).cloned().unwrap_or_default();
        if times.is_empty()
            && let Some(their) = theirs.and_then(|t| t.get(i))
        {
            times.push(their.ms);
        }
        if times.is_empty() {
            continue;
        }
        let usual = median(&mut times);
        let mut deviations: Vec<u64> = times.iter().map(|t| t.abs_diff(usual)).collect();
        let spread = median(&mut deviations);
        let beyond = usual + (3 * spread).max(usual / 2).max(200);
        if step.ms > beyond {
            slower.push(SlowerStep {
                step: step.index + 1,
                label: step.step.clone(),
                ms: step.ms,
                usual_ms: usual,
                spread_ms: spread,
            });
        }
    }
    slower
}

fn around(failed: &Side, baseline: &Side) -> Vec<AroundChange> {
    let (now, then) = (&failed.observed, &baseline.observed);
    let facts: [(&'static str, &str, &str); 6] = [
        ("app", &then.app_version, &now.app_version),
        ("agent", &then.agent_version, &now.agent_version),
        ("device", &baseline.device_id, &failed.device_id),
        ("model", &then.device_model, &now.device_model),
        ("os", &then.os_version, &now.os_version),
        ("worker", &baseline.worker_id, &failed.worker_id),
    ];
    facts
        .into_iter()
        .filter(|(_, from, to)| from != to)
        .map(|(what, from, to)| AroundChange { what, from: from.to_owned(), to: to.to_owned() })
        .collect()
}
