//! `argus cases run` end to end: the example suite against `argus sim`,
//! through real processes and sockets, and the ways a run is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use argus_proto::run::{CaseResult, RunDir, StepStatus};
use common::temp_dir;

mod common;

const ARGUS: &str = env!("CARGO_BIN_EXE_argus");

fn shop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop")
}

use argus_testkit::free_port;

/// A simulated app that dies with the test.
struct Sim(Child);

impl Sim {
    fn start(port: u16) -> Self {
        Self::of(&shop().join("app.yaml"), port, &[])
    }

    /// A simulated app of `model` dialing `port`, with more `args`.
    fn of(model: &Path, port: u16, args: &[&str]) -> Self {
        let child = Command::new(ARGUS)
            .args(["sim", "--model"])
            .arg(model)
            .args(args)
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Sim(child)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn argus(cwd: &Path, args: &[&str]) -> Output {
    Command::new(ARGUS).current_dir(cwd).args(args).env_remove("LYNKEUS_CONFIG").output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn the_example_suite_runs_on_the_simulated_app() {
    let port = free_port();
    let _sim = Sim::start(port);
    let out = temp_dir("suite");
    let junit = out.join("junit.xml");
    let output = argus(
        &shop(),
        &[
            "cases",
            "run",
            "--port",
            &port.to_string(),
            "--out",
            out.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("10/11 passed, 1 cannot run on this host"), "{printed}");
    assert!(printed.contains("⚠ flaky passed on retry"), "{printed}");

    let run = RunDir::read(&out).unwrap();
    let totals = run.manifest.totals.unwrap();
    assert_eq!((totals.cases, totals.passed, totals.failed, totals.unsupported, totals.retried), (11, 10, 0, 1, 1));
    assert_eq!(run.manifest.platform.as_deref(), Some("ios"));
    assert_eq!(run.manifest.native, Some(false));
    assert!(run.manifest.finished_at.is_some());

    let attempts = |id: &str| run.cases.iter().filter(|c| c.id == id).collect::<Vec<_>>();
    // A matrix expands to one case per combination.
    assert_eq!(attempts("login[user=ada]").len(), 1);
    assert_eq!(attempts("login[user=bo]")[0].result, CaseResult::Passed);
    // Failing, then passing: both attempts are written, in order.
    let flaky = attempts("flaky");
    assert_eq!(
        flaky.iter().map(|a| (a.attempt, a.result)).collect::<Vec<_>>(),
        [(1, CaseResult::Failed), (2, CaseResult::Passed)]
    );
    assert_eq!(flaky[0].steps[0].error.as_deref(), Some("warm_cache: the cache is cold"));
    assert_eq!(flaky[0].steps[1].status, StepStatus::Skipped);
    assert!(flaky[0].evidence.as_ref().and_then(|e| e.screen.as_deref()).is_some_and(|s| s.contains("button #login")));
    // Unsupported: the step, the rest skipped, no retry, no evidence.
    let unsupported = attempts("unsupported");
    assert_eq!(unsupported.len(), 1);
    let statuses: Vec<StepStatus> = unsupported[0].steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [StepStatus::Passed, StepStatus::Unsupported, StepStatus::Skipped]);
    assert_eq!(unsupported[0].steps[1].error.as_deref(), Some("this host has no clock"));
    assert!(unsupported[0].evidence.is_none());
    // on: guards on a headless (non-native) host.
    let guards: Vec<StepStatus> = attempts("guards")[0].steps.iter().map(|s| s.status).collect();
    use StepStatus::{Passed, Skipped};
    assert_eq!(guards, [Skipped, Passed, Passed, Skipped, Passed, Passed]);
    // The optional press on a screen without it is skipped, not failed.
    let settings = attempts("settings")[0];
    assert_eq!(settings.steps[6].status, Skipped);
    // Analytics events land on the step that caused them.
    let feed = attempts("feed")[0];
    let like = feed.steps[2].events.as_ref().expect("the like event");
    assert_eq!(like[0].name, "Like");
    assert_eq!(like[0].route.as_deref(), Some("Feed"));
    // Setup is reported as setup; fixtures, assert and exec passed.
    let points = attempts("points")[0];
    assert_eq!(points.steps[0].section, Some(argus_proto::run::Section::Setup));
    assert_eq!(points.steps[0].step, "create_user as: u, name: Ana");
    assert_eq!(points.result, CaseResult::Passed);

    // The banner covers the pay button; the project's interruption closes it.
    assert_eq!(attempts("pay")[0].result, CaseResult::Passed);

    let cases_jsonl = std::fs::read_to_string(out.join("cases.jsonl")).unwrap();
    assert!(cases_jsonl.lines().all(|l| l.starts_with(r#"{"id":""#)), "lynkeus' key order");
    let junit = std::fs::read_to_string(junit).unwrap();
    assert!(
        junit.contains(r#"tests="11""#) && junit.contains("<flakyFailure") && junit.contains("<skipped"),
        "{junit}"
    );
}

/// A throwaway project: files under a folder removed when dropped.
fn project(name: &str, files: &[(&str, &str)]) -> common::Folder {
    let dir = temp_dir(name);
    for (path, body) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    dir
}

#[test]
fn a_failing_case_fails_the_run_with_evidence() {
    let port = free_port();
    let _sim = Sim::start(port);
    let dir = project(
        "red",
        &[(
            "cases/red.md",
            "---\nid: red\n---\nsteps:\n  - app.see: { text: \"Goodbye\", timeoutMs: 200 }\n  - app.press: \"#login\"\n",
        )],
    );
    let out = dir.join("out");
    let output = argus(&dir, &["cases", "run", "--once", "--port", &port.to_string(), "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let run = RunDir::read(&out).unwrap();
    assert_eq!(run.cases.len(), 1, "--once: no retry");
    let red = &run.cases[0];
    assert_eq!(red.result, CaseResult::Failed);
    assert_eq!(red.steps[0].error.as_deref(), Some("not on screen: \"Goodbye\""));
    assert_eq!(red.steps[1].status, StepStatus::Skipped);
    assert!(red.evidence.as_ref().unwrap().screen.as_ref().unwrap().contains("button #login"));
}

#[test]
fn a_pressed_element_behind_a_banner_says_why() {
    let port = free_port();
    let _sim = Sim::start(port);
    let dir = project(
        "covered",
        &[(
            "cases/pay.md",
            "---\nid: pay\n---\nsteps:\n  - app.press: { target: \"#pay\", js: true, timeoutMs: 100 }\n",
        )],
    );
    let out = dir.join("out");
    let output = argus(&dir, &["cases", "run", "--once", "--port", &port.to_string(), "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let run = RunDir::read(&out).unwrap();
    let evidence = run.cases[0].evidence.clone().unwrap();
    assert_eq!(run.cases[0].steps[0].error.as_deref(), Some(r##"{"testId":"pay"} is covered"##));
    assert_eq!(
        evidence.why.as_deref(),
        Some(
            "  • #pay is on the screen but covered: a sheet or overlay is over it. Close it, or press what covers it."
        ),
        "lynkeus' why rules, in its words, against the simulated app's screen"
    );
}

#[test]
fn a_bad_suite_is_refused_before_anything_runs() {
    let dir = project(
        "bad",
        &[
            ("cases/a.md", "steps: []\n"),
            ("cases/b.md", "---\nid: b\n---\nsteps:\n  - { app.back: null, app.press: \"#x\" }\n"),
            ("cases/c.md", "---\nid: c\n---\nsteps:\n  - do: app.back\n"),
        ],
    );
    let output = argus(&dir, &["cases", "run", "--port", &free_port().to_string()]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(2), "{printed}");
    assert!(printed.contains("cases/a.md:1: no frontmatter"), "{printed}");
    assert!(printed.contains("cases/b.md:5: steps[0] must be one step"), "{printed}");
    assert!(printed.contains("cases/c.md:5: steps[0] has `do` without `on`"), "{printed}");
    assert!(!printed.contains("waiting for an app"), "nothing ran: {printed}");
}

#[test]
fn a_fixture_the_server_does_not_list_refuses_the_case() {
    let dir = project(
        "fixture",
        &[
            ("lynkeus.config.json", r#"{"cases":{"fixtures":{"command":"python3 fixtures.py"}}}"#),
            (
                "fixtures.py",
                "import sys\nfor line in sys.stdin:\n    print('{\"commands\": [\"create_user\", \"inspect\"]}', flush=True)\n",
            ),
            (
                "cases/k.md",
                "---\nid: k\n---\nsetup:\n  - create_user: { as: u }\n  - grant_badge: { user: u }\nsteps:\n  - app.back\n",
            ),
        ],
    );
    let output = argus(&dir, &["cases", "run", "--port", &free_port().to_string()]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert!(printed.contains("k: no fixture grant_badge"), "{printed}");
}

#[test]
fn a_fixtures_command_that_dies_is_named() {
    let dir = project(
        "dies",
        &[
            (
                "lynkeus.config.json",
                r#"{"cases":{"fixtures":{"command":"echo 'no database at db:5432' >&2; exit 3"}}}"#,
            ),
            ("cases/k.md", "---\nid: k\n---\nsteps:\n  - app.back\n"),
        ],
    );
    let output = argus(&dir, &["cases", "run", "--port", &free_port().to_string()]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(2), "{printed}");
    assert!(printed.contains("lynkeus.describe: the fixtures command ended: no database at db:5432"), "{printed}");
}

#[test]
fn check_lists_the_expanded_ids_as_json() {
    let output = argus(&shop(), &["cases", "check", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = listing.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"login[user=ada]") && ids.contains(&"login[user=bo]"), "{ids:?}");
    assert_eq!(ids.len(), 11);
}

/// An app whose Home shows a button 1.5 s after it appears, which leads to
/// Details.
const LATE_MODEL: &str = "app: { name: Late }\nplatform: ios\ninitialRoute: Home\nroutes:\n  Home:\n    elements:\n      - { kind: text, testId: title, text: Home }\n      - { kind: button, testId: details, text: Details, appearAfterMs: 1500, onPress: [{ navigate: Details }] }\n  Details:\n    elements:\n      - { kind: text, testId: details-title, text: The details }\n";

#[test]
fn a_press_waits_for_a_late_button_as_lynkeus_does() {
    let dir = project(
        "late-press",
        &[
            ("app.yaml", LATE_MODEL),
            (
                "cases/late.md",
                "---\nid: late\n---\nsteps:\n  - app.press: \"#details\"\n  - app.see: \"#details-title\"\n",
            ),
            ("cases/never.md", "---\nid: never\n---\nsteps:\n  - app.nav: Details\n  - app.press: \"#details\"\n"),
        ],
    );
    let port = free_port();
    let _sim = Sim::of(&dir.join("app.yaml"), port, &[]);
    let out = dir.join("out");
    let output = argus(&dir, &["cases", "run", "--once", "--port", &port.to_string(), "--out", out.to_str().unwrap()]);
    let run = RunDir::read(&out).unwrap();
    let case = |id: &str| run.cases.iter().find(|c| c.id == id).unwrap().clone();
    assert_eq!(case("late").result, CaseResult::Passed, "the button that came 1.5 s in was pressed: {}", text(&output));
    let never = case("never");
    let press = &never.steps[1];
    assert_eq!(press.status, StepStatus::Failed);
    assert!(press.ms >= 3_000, "a press of what never comes gives up at the step's deadline, not at once: {press:?}");
    // lynkeus' ms is the case's steps; readying the device is apart.
    assert!(never.extra.get("prepareMs").and_then(serde_json::Value::as_u64).is_some_and(|ms| ms >= 300), "{never:?}");
    let steps_ms: u64 = never.steps.iter().map(|s| s.ms).sum();
    assert!(never.ms >= steps_ms && never.ms < steps_ms + 100, "ms is the steps' time: {} vs {steps_ms}", never.ms);
}

#[test]
fn see_says_what_an_element_says_and_where_the_app_is_in_lynkeus_words() {
    let port = free_port();
    let _sim = Sim::start(port);
    let dir = project(
        "see-words",
        &[
            (
                "cases/says.md",
                "---\nid: says\n---\nsteps:\n  - app.see: { target: \"#title\", text: Goodbye, timeoutMs: 100 }\n",
            ),
            ("cases/route.md", "---\nid: route\n---\nsteps:\n  - app.see: { route: Settings, timeoutMs: 100 }\n"),
            ("cases/layer.md", "---\nid: layer\n---\nsteps:\n  - app.see: { layer: confirm, timeoutMs: 100 }\n"),
        ],
    );
    let out = dir.join("out");
    argus(&dir, &["cases", "run", "--once", "--port", &port.to_string(), "--out", out.to_str().unwrap()]);
    let run = RunDir::read(&out).unwrap();
    let error = |id: &str| run.cases.iter().find(|c| c.id == id).unwrap().steps[0].error.clone().unwrap_or_default();
    assert_eq!(error("says"), r#"{"testId":"title"} says "Welcome to Shop", not "Goodbye""#);
    assert_eq!(error("route"), "on Home, not Settings");
    assert_eq!(error("layer"), "no layer confirm is open");
}

#[test]
fn why_names_only_what_failed_in_this_attempt() {
    // On one device, a case whose press fails, then one that fails by
    // itself: the second's why must not name the first's press.
    let port = free_port();
    let _sim = Sim::start(port);
    let dir = project(
        "why-scope",
        &[
            ("cases/a.md", "---\nid: a\n---\nsteps:\n  - app.press: { target: \"Nowhere at all\", timeoutMs: 100 }\n"),
            ("cases/b.md", "---\nid: b\n---\nsteps:\n  - app.see: { text: Not there either, timeoutMs: 100 }\n"),
        ],
    );
    let out = dir.join("out");
    argus(&dir, &["cases", "run", "--once", "--port", &port.to_string(), "--out", out.to_str().unwrap()]);
    let run = RunDir::read(&out).unwrap();
    let why = |id: &str| {
        let case = run.cases.iter().find(|c| c.id == id).unwrap();
        case.evidence.as_ref().and_then(|e| e.why.clone()).unwrap_or_default()
    };
    assert!(why("a").contains("Nowhere at all"), "the first names its own failure: {}", why("a"));
    assert!(!why("b").contains("Nowhere at all"), "the second does not name the first's: {}", why("b"));
}

#[test]
fn check_takes_lynkeus_spellings_and_refuses_what_lynkeus_refuses() {
    let dir = project(
        "spellings",
        &[(
            "cases/ok.md",
            "---\nid: ok\n---\nsteps:\n  - app.idle: { quiet: 200, timeout: 2000 }\n  - app.clock: { advance: 1000 }\n  - app.wait: { target: \"#title\", timeout: 2000 }\n  - app.swipe: { direction: up, duration: 300 }\n  - app.press: { target: \"#title\", js: true, settle: true }\n  - app.scan: abc\n  - app.see: { text: Hi, timout: 10 }\n",
        )],
    );
    let output = argus(&dir, &["cases", "check", "--strict-lynkeus"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("warning: cases/ok.md:11: app.see ignores timout"), "{}", text(&output));
    std::fs::write(
        dir.join("cases/ok.md"),
        "---\nid: ok\n---\nsteps:\n  - app.idle: { quietMs: 200 }\n  - app.clock: { freeze: true }\n  - app.press: { target: \"#title\", mode: js }\n",
    )
    .unwrap();
    let output = argus(&dir, &["cases", "check"]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(2), "{printed}");
    for refusal in [
        "cases/ok.md:5: app.idle: idle has no quietMs",
        "cases/ok.md:6: app.clock: os clock has no freeze",
        "cases/ok.md:7: app.press: press has no mode",
    ] {
        assert!(printed.contains(refusal), "{refusal}: {printed}");
    }
}
