//! Each cause's rule, each kind of difference and the one-line diff, on
//! attempts built by hand: every test breaks when its rule does.

use std::collections::HashMap;

use argus_proto::grpc::{AttemptObserved, ObservedElement, ObservedProblem, ObservedRequest, StepObservation};

use super::cause::{Facts, cause, signature};
use super::diff::{Changes, Side, changes};
use super::{Explained, group, line};

fn step(index: u32, label: &str, status: &str) -> StepObservation {
    StepObservation {
        index,
        step: label.into(),
        status: status.into(),
        ms: 100,
        screen_read: label.starts_with("app."),
        route: "Home".into(),
        ..StepObservation::default()
    }
}

fn element(test_id: &str, text: &str) -> ObservedElement {
    ObservedElement { kind: "button".into(), test_id: test_id.into(), text: text.into(), ..ObservedElement::default() }
}

fn request(method: &str, url: &str, status: u32) -> ObservedRequest {
    ObservedRequest { method: method.into(), url: url.into(), status, ms: 20, ..ObservedRequest::default() }
}

fn side(steps: Vec<StepObservation>) -> Side {
    Side {
        run_id: "r1".into(),
        attempt: 1,
        observed: AttemptObserved {
            steps,
            app_version: "2.3.1".into(),
            agent_version: "1.0.0".into(),
            ..AttemptObserved::default()
        },
        device_id: "w/1".into(),
        worker_id: "w".into(),
        branch: "main".into(),
        commit: "aaa".into(),
        finished_at: 1_000,
    }
}

/// A three-step case that passed: a login screen, a press, the feed.
fn passed() -> Side {
    let mut one = step(0, "app.wait Login", "passed");
    one.route = "Login".into();
    one.elements = vec![element("submit", "Log in"), element("", "Welcome")];
    let mut two = step(1, "app.press #submit", "passed");
    two.route = "Feed".into();
    two.requests = vec![request("POST", "https://api.shop.test/api/session?token=***", 200)];
    two.events = vec!["Login".into()];
    let mut three = step(2, "app.see #feed", "passed");
    three.route = "Feed".into();
    three.elements = vec![element("feed", "")];
    side(vec![one, two, three])
}

/// The same case failed at its last step, with `change` applied.
fn failed(change: impl FnOnce(&mut Side)) -> Side {
    let mut side = passed();
    side.run_id = "r2".into();
    side.commit = "bbb".into();
    side.finished_at = 2_000;
    let last = &mut side.observed.steps[2];
    last.status = "failed".into();
    last.error = "no element matches #feed".into();
    change(&mut side);
    side
}

fn judged(failed: &Side, baseline: Option<&Side>, facts: &Facts) -> (Changes, super::Cause) {
    let changes = changes(failed, baseline, &HashMap::new());
    let cause = cause(failed, baseline, &changes, facts);
    (changes, cause)
}

fn kind_of(failed: &Side, baseline: Option<&Side>, facts: &Facts) -> &'static str {
    judged(failed, baseline, facts).1.kind
}

#[test]
fn an_unsupported_step_is_unsupported_before_anything_else_is_looked_at() {
    let attempt = failed(|s| {
        let last = &mut s.observed.steps[2];
        last.status = "unsupported".into();
        last.error = "the app does not answer `swipe`".into();
        s.observed.steps[1].requests[0].status = 503;
    });
    let (_, cause) = judged(&attempt, Some(&passed()), &Facts::default());
    assert_eq!(cause.kind, "unsupported");
    assert_eq!(cause.evidence, ["step 3 `app.see #feed`: the app does not answer `swipe`"]);
}

#[test]
fn an_app_that_went_away_is_infrastructure_even_with_a_broken_request() {
    for error in ["App disconnected during the step", "No app attached to the driver", "the app relaunched"] {
        let attempt = failed(|s| {
            s.observed.steps[2].error = error.into();
            s.observed.steps[1].requests[0].status = 503;
        });
        let (_, cause) = judged(&attempt, Some(&passed()), &Facts::default());
        assert_eq!(cause.kind, "infrastructure", "{error}");
        assert!(cause.evidence[0].contains(error), "{:?}", cause.evidence);
    }
    // An ordinary mismatch names no lost app.
    assert_ne!(kind_of(&failed(|_| {}), Some(&passed()), &Facts::default()), "infrastructure");
}

#[test]
fn a_fixture_assert_or_exec_step_that_failed_is_test_data() {
    for label in ["fixture seed_cart", "assert s.total", "exec ./seed.sh"] {
        let attempt = failed(|s| {
            let last = &mut s.observed.steps[2];
            last.step = label.into();
            last.screen_read = false;
            last.error = "exit 1".into();
        });
        let (_, cause) = judged(&attempt, Some(&passed()), &Facts::default());
        assert_eq!(cause.kind, "test-data", "{label}");
        assert!(cause.evidence[0].contains("is not an app step"), "{:?}", cause.evidence);
    }
}

#[test]
fn a_request_that_broke_where_the_baseline_succeeded_is_backend() {
    let attempt = failed(|s| s.observed.steps[1].requests[0].status = 503);
    let (changes, cause) = judged(&attempt, Some(&passed()), &Facts::default());
    assert_eq!(cause.kind, "backend");
    assert_eq!(cause.evidence, ["POST /api/session 200 → 503"]);
    assert_eq!(signature(&cause, &attempt, &changes), "POST /api/session 503");
    // No answer at all is broken too, and says so.
    let attempt = failed(|s| {
        let request = &mut s.observed.steps[1].requests[0];
        request.status = 0;
        request.error = "offline".into();
    });
    let (changes, cause) = judged(&attempt, Some(&passed()), &Facts::default());
    assert_eq!(cause.kind, "backend");
    assert_eq!(cause.evidence, ["POST /api/session failed: offline"]);
    assert_eq!(signature(&cause, &attempt, &changes), "POST /api/session no answer");
}

#[test]
fn a_request_that_answered_the_same_error_as_before_is_not_backend() {
    let mut baseline = passed();
    baseline.observed.steps[1].requests.push(request("GET", "/api/ads", 404));
    let attempt = failed(|s| s.observed.steps[1].requests.push(request("GET", "/api/ads", 404)));
    assert_eq!(kind_of(&attempt, Some(&baseline), &Facts::default()), "unknown");
    // A request that broke after the failing step is not why it failed.
    let attempt = failed(|s| {
        s.observed.steps.push(StepObservation {
            requests: vec![request("GET", "/api/late", 503)],
            ..step(3, "app.see #later", "skipped")
        })
    });
    assert_eq!(kind_of(&attempt, Some(&passed()), &Facts::default()), "unknown");
}

#[test]
fn without_a_baseline_only_a_server_error_or_no_answer_is_backend() {
    let attempt = failed(|s| s.observed.steps[1].requests[0].status = 502);
    let (_, cause) = judged(&attempt, None, &Facts::default());
    assert_eq!(cause.kind, "backend");
    assert!(cause.evidence.contains(&"no passing attempt to compare with".to_owned()), "{:?}", cause.evidence);
    let attempt = failed(|s| s.observed.steps[1].requests[0].status = 404);
    assert_eq!(kind_of(&attempt, None, &Facts::default()), "unknown");
}

#[test]
fn a_new_app_version_with_a_different_screen_is_app() {
    let renamed = |s: &mut Side| {
        s.observed.app_version = "2.4.0".into();
        s.observed.steps[2].elements = vec![element("timeline", "")];
    };
    let attempt = failed(renamed);
    let (changes, cause) = judged(&attempt, Some(&passed()), &Facts::default());
    assert_eq!(cause.kind, "app");
    assert_eq!(cause.evidence, ["app 2.3.1 → 2.4.0", "#feed disappeared", "#timeline appeared"]);
    assert_eq!(signature(&cause, &attempt, &changes), "#feed missing");
    // The same screen change on the same version is no evidence of the app.
    let attempt = failed(|s| s.observed.steps[2].elements = vec![element("timeline", "")]);
    assert_eq!(kind_of(&attempt, Some(&passed()), &Facts::default()), "unknown");
    // A new version whose screen did not change is not blamed.
    let attempt = failed(|s| s.observed.app_version = "2.4.0".into());
    assert_eq!(kind_of(&attempt, Some(&passed()), &Facts::default()), "unknown");
}

#[test]
fn a_step_that_used_its_whole_timeout_where_it_once_took_over_half_is_timing() {
    let slow_baseline = |ms| {
        let mut baseline = passed();
        baseline.observed.steps[2].ms = ms;
        baseline
    };
    let attempt = failed(|s| {
        let last = &mut s.observed.steps[2];
        last.timeout_ms = 3_000;
        last.ms = 3_004;
    });
    let (changes, cause) = judged(&attempt, Some(&slow_baseline(1_800)), &Facts::default());
    assert_eq!(cause.kind, "timing");
    assert!(cause.evidence[0].contains("waited its 3000 ms") && cause.evidence[0].contains("1800 ms"));
    assert_eq!(signature(&cause, &attempt, &changes), "slow app.see");
    // Quick when it passed: the wait was not too short, something else is wrong.
    assert_eq!(kind_of(&attempt, Some(&slow_baseline(400)), &Facts::default()), "unknown");
    // A driver that says it timed out counts as waiting all it could.
    let attempt = failed(|s| s.observed.steps[2].error = "waitFor timed out".into());
    assert_eq!(kind_of(&attempt, Some(&slow_baseline(2_000)), &Facts::default()), "unknown");
    let attempt = failed(|s| {
        let last = &mut s.observed.steps[2];
        last.error = "waitFor timed out".into();
        last.timeout_ms = 3_000;
    });
    assert_eq!(kind_of(&attempt, Some(&slow_baseline(2_000)), &Facts::default()), "timing");
}

#[test]
fn a_failure_on_one_device_that_passed_on_another_and_failed_nowhere_else_is_device() {
    let attempt = failed(|_| {});
    let elsewhere = Facts { passed_elsewhere: Some("w/2".into()), failed_here: 2, ..Facts::default() };
    let (changes, cause) = judged(&attempt, Some(&passed()), &elsewhere);
    assert_eq!(cause.kind, "device");
    assert_eq!(
        cause.evidence,
        [
            "failed on w/1, passed on w/2, and failed on no other device recently",
            "failed 2 times on w/1 since it last passed"
        ]
    );
    assert_eq!(signature(&cause, &attempt, &changes), "device w/1");
    // Another case that failed here and passed elsewhere corroborates too.
    let others = Facts { failed_here: 1, others_failed_here: 1, ..elsewhere.clone() };
    assert_eq!(kind_of(&attempt, Some(&passed()), &others), "device");
    // Failing on other devices too: it is not this device.
    let also = Facts { failed_elsewhere: 1, ..elsewhere.clone() };
    assert_eq!(kind_of(&attempt, Some(&passed()), &also), "unknown");
    // Once here and passed elsewhere, nothing else against the device: as
    // likely a flake (a backend that answered late once) as the device.
    let once = Facts { failed_here: 1, ..elsewhere };
    assert_eq!(kind_of(&attempt, Some(&passed()), &once), "unknown");
}

#[test]
fn a_pass_on_a_retry_on_the_same_device_with_nothing_else_different_is_timing() {
    let retried = Facts { passed_on_retry_here: true, ..Facts::default() };
    let (_, cause) = judged(&failed(|_| {}), Some(&passed()), &retried);
    assert_eq!(cause.kind, "timing");
    assert_eq!(cause.evidence, ["passed on a retry on w/1 with nothing else different"]);
    // With an event missing it is no longer only the outcome.
    let attempt = failed(|s| s.observed.steps[1].events.clear());
    assert_eq!(kind_of(&attempt, Some(&passed()), &retried), "unknown");
}

#[test]
fn unknown_shows_what_differs_and_the_error() {
    let attempt = failed(|s| {
        s.observed.steps[1].problems = vec![ObservedProblem {
            kind: "crash".into(),
            message: "TypeError: x".into(),
            route: "Feed".into(),
            ..ObservedProblem::default()
        }];
    });
    let (_, cause) = judged(&attempt, Some(&passed()), &Facts::default());
    assert_eq!(cause.kind, "unknown");
    assert_eq!(cause.evidence, ["crash: TypeError: x", "step 3 `app.see #feed` failed: no element matches #feed"]);
}

#[test]
fn the_first_difference_is_a_route_that_differs_before_the_failing_step() {
    let attempt = failed(|s| s.observed.steps[1].route = "Login".into());
    let diff = changes(&attempt, Some(&passed()), &HashMap::new());
    let first = diff.first_difference.unwrap();
    assert_eq!((first.step, first.kind), (2, "route"));
    assert_eq!((first.route.as_deref(), first.baseline_route.as_deref()), (Some("Login"), Some("Feed")));
    // Without one, the failing step, and the screen there against the baseline's.
    let attempt = failed(|s| {
        s.observed.steps[2].elements = vec![
            ObservedElement { disabled: true, ..element("feed", "") },
            element("", "Service unavailable"),
            ObservedElement { hidden: "offscreen".into(), ..element("later", "") },
        ];
    });
    let diff = changes(&attempt, Some(&passed()), &HashMap::new());
    assert_eq!(diff.first_difference.as_ref().map(|f| (f.step, f.kind)), Some((3, "failed")));
    let names = |v: &[super::diff::ElementName]| v.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
    // A hidden element that appeared is not news on the screen.
    assert_eq!(names(&diff.screen.appeared), ["button 'Service unavailable'"]);
    assert!(diff.screen.disappeared.is_empty());
    let changed: Vec<_> = diff.screen.changed.iter().map(|c| (c.element.0.as_str(), c.field, c.to.as_str())).collect();
    assert_eq!(changed, [("#feed", "enabled", "disabled")]);
}

#[test]
fn requests_and_events_are_compared_up_to_the_first_difference() {
    let attempt = failed(|s| {
        let requests = &mut s.observed.steps[1].requests;
        requests.clear();
        requests.push(request("GET", "/api/ads?x=1", 200));
        s.observed.steps[1].events = vec!["Ad".into()];
    });
    let diff = changes(&attempt, Some(&passed()), &HashMap::new());
    let told: Vec<String> = diff.requests.iter().map(|r| r.describe()).collect();
    assert_eq!(told, ["GET /api/ads 200 (new)", "POST /api/session no longer sent"]);
    assert_eq!(
        (diff.events.missing.as_slice(), diff.events.new.as_slice()),
        (&["Login".to_owned()][..], &["Ad".to_owned()][..])
    );
}

#[test]
fn a_step_is_slower_only_beyond_its_own_spread() {
    let attempt = failed(|s| s.observed.steps[1].ms = 900);
    // Usually 100 ms give or take 10: 900 ms is far beyond.
    let history = HashMap::from([(1, vec![90, 100, 110, 100, 95])]);
    let slower = changes(&attempt, Some(&passed()), &history).slower;
    assert_eq!(slower.len(), 1);
    assert_eq!((slower[0].step, slower[0].ms, slower[0].usual_ms), (2, 900, 100));
    // A step that varies widely from run to run is not called slower.
    let history = HashMap::from([(1, vec![100, 700, 1_200, 400, 900])]);
    assert!(changes(&attempt, Some(&passed()), &history).slower.is_empty());
}

#[test]
fn what_changed_around_it_is_named() {
    let attempt = failed(|s| {
        s.observed.app_version = "2.4.0".into();
        s.observed.os_version = "18.1".into();
        s.device_id = "w/3".into();
    });
    let diff = changes(&attempt, Some(&passed()), &HashMap::new());
    let around: Vec<_> = diff.around.iter().map(|a| (a.what, a.to.as_str())).collect();
    assert_eq!(around, [("app", "2.4.0"), ("device", "w/3"), ("os", "18.1")]);
}

#[test]
fn the_line_says_where_it_first_differs_and_what_matters() {
    let attempt = failed(|s| {
        s.observed.steps[1].requests[0].status = 503;
        s.observed.steps[2].elements.push(element("", "Service unavailable"));
        s.observed.app_version = "2.4.0".into();
    });
    let diff = changes(&attempt, Some(&passed()), &HashMap::new());
    assert_eq!(
        line(&diff, true),
        "first differs at step 3 `app.see #feed`: POST /api/session 200 → 503; \
         button 'Service unavailable' appeared; app 2.3.1 → 2.4.0"
    );
    let alone = changes(&failed(|_| {}), None, &HashMap::new());
    assert_eq!(
        line(&alone, false),
        "no passing attempt to compare with; failed at step 3 `app.see #feed`: no element matches #feed"
    );
}

#[test]
fn failures_of_one_cause_and_signature_are_one_group_largest_first() {
    let explained = |case: &str, kind: &'static str, signature: &str| Explained {
        run_id: "r2".into(),
        case_id: case.into(),
        attempt: 1,
        platform: "ios".into(),
        device: "w/1".into(),
        baseline: None,
        changes: Changes::default(),
        commits: None,
        started: None,
        cause: super::Cause { kind, evidence: vec![] },
        signature: signature.into(),
        line: String::new(),
        truncated: false,
    };
    let groups = group(&[
        explained("a", "app", "#checkout missing"),
        explained("b", "backend", "POST /api/cart 503"),
        explained("c", "backend", "POST /api/cart 503"),
        explained("d", "backend", "GET /feed 503"),
    ]);
    let shape: Vec<_> = groups.iter().map(|g| (g.cause, g.signature.as_str(), g.cases.len())).collect();
    assert_eq!(
        shape,
        [("backend", "POST /api/cart 503", 2), ("app", "#checkout missing", 1), ("backend", "GET /feed 503", 1)]
    );
}

#[test]
fn signatures_forget_the_numbers_in_an_error() {
    let of = |error: &str| {
        let attempt = failed(|s| s.observed.steps[2].error = error.into());
        let (changes, cause) = judged(&attempt, Some(&passed()), &Facts::default());
        signature(&cause, &attempt, &changes)
    };
    assert_eq!(of("not found after 5012 ms"), of("not found after 5003 ms"));
    assert_eq!(of("not found after 5012 ms"), "app.see: not found after N ms");
}

#[test]
fn signatures_across_runs_rank_by_the_cases_then_the_runs_they_cost() {
    let failure = |run: &str, case: &str, cause: &str, signature: &str, at: i64| argus_store::FailureCause {
        run_id: run.into(),
        case_id: case.into(),
        cause: cause.into(),
        signature: signature.into(),
        finished_at: at,
    };
    // Newest first, as the store reads them.
    let ranked = super::rank(&[
        failure("r3", "login", "timing", "slow app.wait", 30),
        failure("r3", "cart", "backend", "POST /api/cart 503", 29),
        failure("r2", "cart", "backend", "POST /api/cart 503", 20),
        failure("r2", "pay", "backend", "POST /api/cart 503", 19),
        failure("r2", "login", "timing", "slow app.wait", 18),
        failure("r1", "login", "timing", "slow app.wait", 10),
        failure("r1", "feed", "app", "#feed missing", 9),
    ]);
    let shape: Vec<_> =
        ranked.iter().map(|c| (c.signature.as_str(), c.cases, c.runs, c.attempts, c.last_run.as_str())).collect();
    assert_eq!(
        shape,
        [("POST /api/cart 503", 2, 2, 3, "r3"), ("slow app.wait", 1, 3, 3, "r3"), ("#feed missing", 1, 1, 1, "r1"),]
    );
    assert_eq!(ranked[0].some_cases, ["cart", "pay"]);
}
