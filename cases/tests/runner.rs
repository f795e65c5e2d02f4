//! The runner against a recording device with a fixed screen: the exact
//! calls a step makes (spec §6.8), and the runner vectors of §6.1 and §6.5.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_cases::config::FixturesConfig;
use argus_cases::runner::{CallFailure, Device, Fixtures, LocalProject, RunContext, run_attempt};
use argus_cases::{CasesConfig, parse_case};
use argus_proto::run::{CaseResult, RunCase, StepStatus};
use argus_proto::wire::Hello;
use serde_json::{Value, json};

/// The runner tests' fake app: route Profile.Main, a `#refresh` button, and
/// the texts "Hello" and "25 points". Every call is recorded.
struct Fake {
    hello: Arc<Hello>,
    calls: Mutex<Vec<(String, Option<Value>)>>,
    events_reads: Mutex<u32>,
    /// `waitFor` answers this error when set.
    wait_fails: bool,
}

impl Fake {
    fn new(commands: &[&str]) -> Self {
        let hello = serde_json::from_value(
            json!({"protocolVersion": 1, "platform": "ios", "native": false, "commands": commands}),
        )
        .unwrap();
        Self { hello: Arc::new(hello), calls: Mutex::new(Vec::new()), events_reads: Mutex::new(0), wait_fails: false }
    }

    fn elements() -> Value {
        json!([
            {"i": 0, "kind": "button", "testId": "refresh", "frame": {"x": 0, "y": 0, "w": 100, "h": 40}, "enabled": true, "depth": 0},
            {"i": 1, "kind": "text", "text": "Hello", "frame": {"x": 0, "y": 50, "w": 100, "h": 20}, "enabled": true, "depth": 0},
            {"i": 2, "kind": "text", "text": "25 points", "frame": {"x": 0, "y": 80, "w": 100, "h": 20}, "enabled": true, "depth": 0},
            {"i": 3, "kind": "button", "testId": "off", "frame": {"x": 0, "y": 110, "w": 100, "h": 40}, "enabled": false, "depth": 0}
        ])
    }

    fn methods(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|(m, _)| m.clone()).collect()
    }

    fn wire(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(m, p)| match p {
                Some(p) => json!({"method": m, "params": p}),
                None => json!({"method": m}),
            })
            .collect()
    }
}

impl Device for Fake {
    fn hello(&self) -> Option<Arc<Hello>> {
        Some(self.hello.clone())
    }

    async fn call(&self, method: &str, params: Option<Value>, _timeout: Duration) -> Result<Value, CallFailure> {
        self.calls.lock().unwrap().push((method.to_owned(), params.clone()));
        if method == "stores" {
            // A host that takes a while to say it has no such method.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let fail = |message: &str| Err(CallFailure { message: message.to_owned(), code: None, lost: false });
        match method {
            "screen" => Ok(
                json!({"route": "Profile.Main", "path": ["Profile.Main"], "elements": Fake::elements(), "busy": false, "commit": 1}),
            ),
            "find" => {
                let target = params.unwrap_or_default();
                let elements = Fake::elements();
                let found = elements.as_array().unwrap().iter().find(|e| {
                    target.get("testId").is_some_and(|id| e.get("testId") == Some(id))
                        || target.get("text").is_some_and(|t| e.get("text") == Some(t))
                });
                Ok(found.cloned().unwrap_or(Value::Null))
            }
            "trace" => Ok(json!({"last": 41, "events": []})),
            "events" => {
                let mut reads = self.events_reads.lock().unwrap();
                *reads += 1;
                // Empty before the case; one event after the first step.
                if *reads == 1 { Ok(json!([])) } else { Ok(json!([{"name": "Tap - Refresh", "route": "Home"}])) }
            }
            "idle" => Ok(json!({"commit": 1, "idle": true})),
            "press" => Ok(json!({"x": 50, "y": 20, "mode": "native"})),
            "waitFor" if self.wait_fails => fail("Timed out waiting for  {\"testId\":\"dismiss\"} (on Profile.Main)"),
            "waitFor" => Ok(json!({"route": "Profile.Main", "waitedMs": 0})),
            other => fail(&format!("Unknown method {other}")),
        }
    }
}

fn context(collect_events: bool) -> RunContext {
    let config = CasesConfig::defaults(&PathBuf::from("."));
    RunContext {
        project: Arc::new(LocalProject::of(&config)),
        config,
        collect_events,
        keep_going: false,
        pictures: None,
        observe: false,
    }
}

async fn run(fake: &Fake, case: &str, context: &RunContext) -> RunCase {
    let case = parse_case(case, "cases/t.md").unwrap().remove(0);
    run_attempt(fake, &case, 1, context).await
}

fn statuses(case: &RunCase) -> Vec<StepStatus> {
    case.steps.iter().map(|s| s.status).collect()
}

#[tokio::test]
async fn the_calls_a_press_makes() {
    let fake = Fake::new(&["events"]);
    let case = run(&fake, "---\nid: r\n---\nsteps:\n  - app.press: \"#refresh\"\n", &context(true)).await;
    assert_eq!(case.result, CaseResult::Passed);
    let refresh = json!({"testId": "refresh"});
    assert_eq!(
        fake.wire(),
        vec![
            // The app settles first, as a freshly launched one does in lynkeus.
            json!({"method": "idle", "params": {"quietMs": 300, "timeoutMs": 5000}}),
            json!({"method": "events"}),
            json!({"method": "trace", "params": {}}),
            json!({"method": "find", "params": refresh}),
            json!({"method": "find", "params": refresh}),
            json!({"method": "idle", "params": {"quietMs": 50, "timeoutMs": 200}}),
            json!({"method": "find", "params": refresh}),
            json!({"method": "press", "params": refresh}),
            json!({"method": "idle", "params": {"quietMs": 50, "timeoutMs": 400}}),
            json!({"method": "events"}),
            json!({"method": "screen"}),
        ]
    );
    // Filed under the route the step left the app on, not where it fired.
    let events = case.steps[0].events.as_ref().unwrap();
    assert_eq!((events[0].name.as_str(), events[0].route.as_deref()), ("Tap - Refresh", Some("Profile.Main")));
}

#[tokio::test]
async fn on_filters_on_a_headless_host() {
    let fake = Fake::new(&[]);
    let text = "---\nid: t\n---\nsteps:\n  - on: device\n    do:\n      - app.press: \"#nowhere\"\n  - on: headless\n    do: { app.press: \"#refresh\" }\n  - app.see: { text: \"25 points\" }\n";
    let case = run(&fake, text, &context(false)).await;
    assert_eq!(statuses(&case), [StepStatus::Skipped, StepStatus::Passed, StepStatus::Passed]);
    let fake = Fake::new(&["session"]);
    let text = "---\nid: t\n---\nsteps:\n  - on: \"has:session\"\n    do: app.back\n  - on: \"!has:session\"\n    do: app.back\n";
    let case = run(&fake, text, &context(false)).await;
    // `back` is unknown to the fake: the guarded-in step is unsupported, the other skipped.
    assert_eq!(statuses(&case), [StepStatus::Unsupported, StepStatus::Skipped]);
}

#[tokio::test]
async fn unsupported_stops_the_case_without_evidence() {
    let fake = Fake::new(&[]);
    let text = "---\nid: stores\n---\nsteps:\n  - app.see: { text: \"Hello\" }\n  - app.call: { command: stores }\n  - app.see: { text: \"25 points\" }\n";
    let case = run(&fake, text, &context(false)).await;
    assert_eq!(case.result, CaseResult::Unsupported);
    let steps: Vec<(StepStatus, Option<&str>)> = case.steps.iter().map(|s| (s.status, s.error.as_deref())).collect();
    assert_eq!(
        steps,
        [
            (StepStatus::Passed, None),
            (StepStatus::Unsupported, Some("this host has no stores")),
            (StepStatus::Skipped, None)
        ]
    );
    assert!(case.steps[1].ms >= 30, "an unsupported step records its time: {} ms", case.steps[1].ms);
    assert_eq!(case.steps[2].ms, 0);
    assert!(case.evidence.is_none());
}

#[tokio::test]
async fn a_failure_leaves_evidence_and_stops_the_case() {
    let fake = Fake::new(&[]);
    let text =
        "---\nid: red\n---\nsteps:\n  - app.see: { text: \"Goodbye\", timeoutMs: 200 }\n  - app.press: \"#refresh\"\n";
    let case = run(&fake, text, &context(false)).await;
    assert_eq!(case.result, CaseResult::Failed);
    assert_eq!(statuses(&case), [StepStatus::Failed, StepStatus::Skipped]);
    assert_eq!(case.steps[0].error.as_deref(), Some("not on screen: \"Goodbye\""));
    let evidence = case.evidence.unwrap();
    assert_eq!(
        evidence.screen.unwrap(),
        "Profile.Main\nbutton #refresh\ntext \"Hello\"\ntext \"25 points\"\nbutton #off !disabled"
    );
    assert_eq!(evidence.requests, Some(Vec::new()), "always written");
    assert_eq!(
        evidence.why.as_deref(),
        Some("  (nothing in the evidence explains it: the screen, requests and trace look ordinary)")
    );
    assert!(!fake.methods().contains(&"press".to_owned()), "no press was sent");
}

#[tokio::test]
async fn an_optional_press_that_is_not_there_is_skipped() {
    let mut fake = Fake::new(&[]);
    fake.wait_fails = true;
    let case = run(
        &fake,
        "---\nid: o\n---\nsteps:\n  - app.press: { target: \"#dismiss\", optional: true }\n",
        &context(false),
    )
    .await;
    assert_eq!(statuses(&case), [StepStatus::Skipped]);
    assert_eq!(case.result, CaseResult::Passed);
    let wire = fake.wire();
    let after_wait = wire.iter().skip_while(|c| c["method"] != "waitFor").nth(1);
    assert_eq!(after_wait, Some(&json!({"method": "idle", "params": {"quietMs": 50, "timeoutMs": 400}})), "{wire:?}");
}

#[tokio::test]
async fn why_names_the_steps_target_not_an_interruptions() {
    let mut fake = Fake::new(&[]);
    fake.wait_fails = true;
    let mut config = CasesConfig::defaults(&PathBuf::from("."));
    // A pop-up that is always there: its press runs before the step.
    config.interruptions =
        serde_json::from_value(json!([{"see": "#refresh", "do": [{"app.press": "#refresh"}]}])).unwrap();
    let context = RunContext {
        project: Arc::new(LocalProject::of(&config)),
        config,
        collect_events: false,
        keep_going: false,
        pictures: None,
        observe: false,
    };
    let case = run(
        &fake,
        "---\nid: w\n---\nsteps:\n  - app.wait: { target: \"#off\", gone: true, timeoutMs: 100 }\n",
        &context,
    )
    .await;
    assert_eq!(case.result, CaseResult::Failed);
    assert!(fake.methods().contains(&"press".to_owned()), "the interruption ran");
    assert_eq!(
        case.evidence.unwrap().why.as_deref(),
        Some(
            "  • #off is on the screen but disabled: a form is not valid yet, or a request it depends on is in flight."
        )
    );
}

#[tokio::test]
async fn app_idle_without_arguments_waits_as_the_lynkeus_cli_does() {
    let fake = Fake::new(&[]);
    let case = run(
        &fake,
        "---\nid: i\n---\nsteps:\n  - app.idle\n  - app.idle: { quiet: 20, timeoutMs: 900, after: 3 }\n",
        &context(false),
    )
    .await;
    assert_eq!(case.result, CaseResult::Passed);
    let idles: Vec<Value> =
        fake.wire().into_iter().filter(|c| c["method"] == "idle").map(|c| c["params"].clone()).collect();
    assert_eq!(
        idles,
        [
            json!({"quietMs": 300, "timeoutMs": 5000}),
            json!({"quietMs": 300, "timeoutMs": 5000}),
            json!({"quietMs": 20, "timeoutMs": 900, "after": 3})
        ]
    );
}

/// A fixtures server that writes every line it receives to `log`.
fn recording_fixtures(log: &std::path::Path) -> Fixtures {
    let script = format!(
        r#"import json, sys
log = open({log:?}, "a")
for line in sys.stdin:
    log.write(line); log.flush()
    request = json.loads(line)
    command = request["command"]
    if command == "lynkeus.describe":
        reply = {{"commands": ["create_user", "give_points", "inspect"]}}
    elif command == "create_user":
        reply = {{"ok": True, "user_id": "u_1", "name": "Ana", "points": 0}}
    elif command == "give_points":
        reply = {{"ok": True, "user_id": "u_1", "points": 25}}
    else:
        reply = {{"ok": True, "user_id": "u_1", "name": "Ana", "points": 25}}
    print(json.dumps(reply), flush=True)
"#,
        log = log.display().to_string()
    );
    let path = log.with_extension("py");
    std::fs::write(&path, script).unwrap();
    Fixtures::new(FixturesConfig {
        command: format!("python3 {}", path.display()),
        cwd: None,
        env: Default::default(),
        timeout_ms: 10_000,
    })
}

#[tokio::test]
async fn the_fixtures_wire_for_the_template_case() {
    let folder = tempfile::tempdir().unwrap();
    let log = folder.path().join("fixtures.log");
    let mut config = CasesConfig::defaults(&PathBuf::from("."));
    config.refs.insert("user".into(), "user_id".into());
    let project = Arc::new(LocalProject::new(Some(recording_fixtures(&log)), PathBuf::from(".")));
    let context = RunContext {
        config,
        project: project.clone(),
        collect_events: false,
        keep_going: false,
        pictures: None,
        observe: false,
    };
    assert_eq!(
        project.fixtures.as_ref().unwrap().describe().await.unwrap(),
        Some(vec!["create_user".to_owned(), "give_points".to_owned(), "inspect".to_owned()])
    );
    let template = r#"---
id: example
title: "A user who was given points sees them on the first screen"
description: >
  What this proves and why it matters, in a sentence or two. A case reads top
  to bottom: what has to exist, what the person does, what must be true after.
---
setup:
  # Anything that is not an app step is a fixture: fixtures.mjs answers it.
  - create_user: { as: u, name: "Ana" }

steps:
  - app.see: { text: "Hello" }
  # `user: u` points at what `create_user` answered (cases.refs in lynkeus.config.json).
  - give_points: { user: u, points: 25 }
  - app.see: { text: "25 points", timeoutMs: 10000 }
  - assert: { user: u, path: points, equals: 25 }

expected: |
  The points on screen and the points the backend holds are both 25.
"#;
    let fake = Fake::new(&[]);
    let case = run(&fake, template, &context).await;
    project.close().await;
    assert_eq!(case.result, CaseResult::Passed, "{case:?}");
    assert_eq!(
        case.description.as_deref(),
        Some(
            "What this proves and why it matters, in a sentence or two. A case reads top to bottom: what has to exist, what the person does, what must be true after.\n"
        )
    );
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        lines.lines().collect::<Vec<_>>(),
        [
            r#"{"command":"lynkeus.describe","params":{},"env":{}}"#,
            r#"{"command":"create_user","params":{"name":"Ana"},"env":{"NAME":"Ana"}}"#,
            r#"{"command":"give_points","params":{"points":25,"user_id":"u_1"},"env":{"POINTS":"25","USER_ID":"u_1"}}"#,
            r#"{"command":"inspect","params":{"section":"points","user_id":"u_1"},"env":{"SECTION":"points","USER_ID":"u_1"}}"#,
        ]
    );
}

#[tokio::test]
async fn a_macro_with_conditions_presses_once() {
    let folder = tempfile::tempdir().unwrap();
    let log = folder.path().join("macro.log");
    let mut config = CasesConfig::defaults(&PathBuf::from("."));
    config.macros = serde_json::from_value(json!({
        "app.enter": [
            {"assert": {"user_id": "{{param.as.user_id}}", "path": "user_id", "matches": "^u_"}},
            {"when": "then", "do": {"app.press": "{{param.then}}"}}
        ]
    }))
    .unwrap();
    let project = Arc::new(LocalProject::new(Some(recording_fixtures(&log)), PathBuf::from(".")));
    let context = RunContext {
        config,
        project: project.clone(),
        collect_events: false,
        keep_going: false,
        pictures: None,
        observe: false,
    };
    let text = "---\nid: m\n---\nsetup:\n  - create_user: { as: u }\nsteps:\n  - app.enter: { as: u, then: \"#refresh\" }\n  - app.enter: { as: u }\n";
    let fake = Fake::new(&[]);
    let case = run(&fake, text, &context).await;
    project.close().await;
    assert_eq!(case.result, CaseResult::Passed, "{case:?}");
    assert_eq!(fake.methods().iter().filter(|m| *m == "press").count(), 1);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn absent_fails_in_lynkeus_words() {
    // lynkeus: `still there: ${label({verb: '', value: {...params, absent: undefined}}).trim()}`,
    // a string value being `{target: value}` and `app.event` handing `see`
    // `{...value, event: name, name: undefined}`.
    let cases = [
        (
            "app.see: { absent: true, target: \"#refresh\", timeoutMs: 200 }",
            "still there: absent: undefined, target: #refresh, timeoutMs: 200",
        ),
        (
            "app.see: { testId: refresh, absent: true, timeoutMs: 200 }",
            "still there: testId: refresh, absent: undefined, timeoutMs: 200",
        ),
        (
            "app.see: { text: \"Hello\", absent: true, timeoutMs: 200, within: { testId: list } }",
            "still there: text: Hello, absent: undefined, timeoutMs: 200, within: {\"testId\":\"list\"}",
        ),
    ];
    for (step, expected) in cases {
        let fake = Fake::new(&[]);
        let case = run(&fake, &format!("---\nid: gone\n---\nsteps:\n  - {step}\n"), &context(false)).await;
        assert_eq!(case.result, CaseResult::Failed, "{step}");
        assert_eq!(case.steps[0].error.as_deref(), Some(expected), "{step}");
    }
}
