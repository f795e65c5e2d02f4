use super::events::*;
use super::*;

fn run_ended(result: &str) -> RunEnded {
    RunEnded {
        id: "r1".into(),
        project: "shop".into(),
        branch: Some("main".into()),
        commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        result: result.into(),
        cases: 13,
        passed: 11,
        failed: 2,
        muted_failed: 1,
        started_at: "2026-12-06T10:00:00.000Z".into(),
        finished_at: Some("2026-12-06T10:01:00.000Z".into()),
    }
}

fn event(happened: Happened) -> Event {
    Event { at: "2026-12-06T10:01:00.000Z".into(), happened }
}

fn webhook(format: Format) -> Webhook {
    Webhook {
        name: "w".into(),
        url: "https://hooks.example/services/T0/B0/secret".into(),
        events: Vec::new(),
        format,
        secret: Some("It's a Secret to Everybody".into()),
        token: Some("gh-token".into()),
        repository: Some("acme/shop".into()),
        projects: Vec::new(),
        owners: Vec::new(),
    }
}

#[test]
fn the_signature_is_githubs() {
    // GitHub's documented example of X-Hub-Signature-256.
    assert_eq!(
        sign("It's a Secret to Everybody", b"Hello, World!"),
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
}

#[test]
fn retries_back_off_to_five_minutes_and_only_what_may_change_is_retried() {
    let waits: Vec<u64> = (1..=11).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    assert_eq!(
        [answer(200), answer(204), answer(404), answer(429), answer(500), answer(0)],
        [Answer::Taken, Answer::Taken, Answer::Refused, Answer::TryAgain, Answer::TryAgain, Answer::TryAgain]
    );
}

#[test]
fn a_json_delivery_is_the_event_with_its_link_signed_over_the_body() {
    let finished = event(Happened::RunFinished { run: run_ended("failed") });
    let sent = request(&webhook(Format::Json), &finished, "d7", Some("https://argus.example/")).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["event"], "run.finished");
    assert_eq!(body["run"]["id"], "r1");
    assert_eq!(body["url"], "https://argus.example/runs/r1");
    let header = |name: &str| sent.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(header(SIGNATURE_HEADER), Some(sign("It's a Secret to Everybody", &sent.body).as_str()));
    assert_eq!((header(EVENT_HEADER), header(DELIVERY_HEADER)), (Some("run.finished"), Some("d7")));
    // Kept and read back, the same event.
    assert_eq!(serde_json::from_str::<Event>(&finished.to_json()).unwrap(), finished);
}

#[test]
fn a_slack_message_escapes_what_users_wrote() {
    let failing = event(Happened::CaseFailing {
        run: run_ended("failed"),
        case: FailingCase {
            id: "pay<@U123>".into(),
            attempt: 1,
            cause: "app".into(),
            line: "first differs at step 2 & <!channel>".into(),
            owner: Some("ana".into()),
        },
    });
    let sent = request(&webhook(Format::Slack), &failing, "d1", None).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    let text = body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "*shop* case pay&lt;@U123&gt; started failing on `main` (app): first differs at step 2 &amp; &lt;!channel&gt;"
    );
    assert_eq!(body["text"], text);
    assert_eq!(body["blocks"][1]["elements"][0]["text"], "owner ana");
}

#[test]
fn a_commit_status_says_the_runs_result_for_its_commit_and_nothing_else() {
    let finished = event(Happened::RunFinished { run: run_ended("failed") });
    let sent = request(&webhook(Format::GithubStatus), &finished, "d1", Some("https://argus.example")).unwrap();
    assert_eq!(
        sent.url,
        "https://hooks.example/services/T0/B0/secret/repos/acme/shop/statuses/0123456789abcdef0123456789abcdef01234567"
    );
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["state"], "failure");
    assert_eq!(body["description"], "11/13 passed, 1 failed, 1 muted-failed");
    assert_eq!(body["context"], "argus/shop");
    assert_eq!(body["target_url"], "https://argus.example/runs/r1");
    assert!(sent.headers.contains(&("Authorization".into(), "Bearer gh-token".into())));
    let mut no_commit = run_ended("passed");
    no_commit.commit = Some("not a sha; rm -rf /".into());
    assert!(
        request(&webhook(Format::GithubStatus), &event(Happened::RunFinished { run: no_commit }), "d", None).is_none()
    );
    let muted = event(Happened::CaseMuted {
        mute: MutedCase {
            project: "shop".into(),
            case_id: "a".into(),
            reason: "r".into(),
            owner: None,
            until: None,
            by: "ana".into(),
        },
    });
    assert!(!webhook(Format::GithubStatus).wants(&muted), "a status is for a run's end only");
}

#[test]
fn a_webhook_takes_the_events_projects_and_owners_it_names() {
    let failing = event(Happened::CaseFailing {
        run: run_ended("failed"),
        case: FailingCase {
            id: "a".into(),
            attempt: 1,
            cause: "app".into(),
            line: "x".into(),
            owner: Some("ana".into()),
        },
    });
    let finished = event(Happened::RunFinished { run: run_ended("passed") });
    let only_failing = Webhook { events: vec![EventKind::CaseFailing], ..webhook(Format::Json) };
    assert!(only_failing.wants(&failing) && !only_failing.wants(&finished));
    let bo = Webhook { owners: vec!["bo".into()], ..webhook(Format::Json) };
    assert!(!bo.wants(&failing));
    let other = Webhook { projects: vec!["other".into()], ..webhook(Format::Json) };
    assert!(!other.wants(&finished));
    assert_eq!(webhook(Format::Slack).shown_url(), "https://hooks.example/…");
}

#[test]
fn a_delivery_is_retried_until_taken_refused_or_out_of_time() {
    let hour = std::time::Duration::from_secs(3_600);
    assert_eq!(after_try(Tried::Answered(204), 1, 10_000, 0, hour), Delivery::Delivered);
    assert_eq!(after_try(Tried::Answered(500), 1, 10_000, 0, hour), Delivery::Pending(11_000));
    assert_eq!(after_try(Tried::NoAnswer, 3, 10_000, 0, hour), Delivery::Pending(14_000));
    assert_eq!(after_try(Tried::Answered(410), 1, 10_000, 0, hour), Delivery::Refused);
    assert_eq!(after_try(Tried::Answered(503), 9, 3_600_000, 0, hour), Delivery::Abandoned);
    assert_eq!(after_try(Tried::Nothing, 1, 0, 0, hour), Delivery::Abandoned);
}
