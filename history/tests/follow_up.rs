//! What follows a run's end, on a real store: the auto-mute mutes a case
//! that keeps passing on retry for no visible reason, with its owner, and
//! tells webhooks; the same history one pass short does not.

use argus_history::follow_up::{FollowUp, follow_up};
use argus_history::mutes::{AUTO_MUTER, MutePolicy};
use argus_store::{AttemptOutcome, NewCase, NewLease, NewRun, StepRow, Store};

fn outcome(result: &str, at: i64, observed: bool) -> AttemptOutcome {
    AttemptOutcome {
        result: Some(result.into()),
        infrastructure: false,
        error: None,
        finished_at: at,
        ms: 300,
        run_case_json: Some(format!(r#"{{"ms":300,"result":"{result}"}}"#)),
        steps: vec![StepRow { step: "app.see".into(), status: result.into(), ms: 3, error: None }],
        seq: 0,
        next_try: None,
        final_result: None,
        // A failure's record with nothing on it that points anywhere: it
        // passed on retry with nothing changed, so its cause is `timing`.
        observed: observed.then(|| argus_store::Observed {
            project: "shop".into(),
            branch: "main".into(),
            commit: "abc".into(),
            platform: "ios".into(),
            device_id: "w/1".into(),
            worker_id: "w".into(),
            body: Vec::new(),
        }),
        health: Default::default(),
    }
}

/// A run on main in which case `a` failed once and passed on its retry.
async fn flaky_run(store: &Store, id: &str, at: i64) {
    let run = NewRun {
        id: id.into(),
        project: "shop".into(),
        branch: Some("main".into()),
        commit: Some("abc".into()),
        selector_json: "{}".into(),
        config_json: "{}".into(),
        retries: 1,
        priority: 1,
        started_at: at,
        manifest_json: r#"{"schema":1}"#.into(),
        cases: vec![NewCase {
            case_id: "a".into(),
            file: "cases/a.md".into(),
            title: None,
            ordinal: 0,
            expected_ms: 300,
            estimate_source: "default".into(),
            muted: None,
            owner: Some("@ana".into()),
        }],
        ..NewRun::default()
    };
    store.create_run(&run).await.unwrap();
    let lease = |lease: &str, attempt: u32| NewLease {
        id: lease.into(),
        run_id: id.into(),
        case_id: "a".into(),
        attempt,
        try_no: 1,
        device_id: "w/1".into(),
        worker_id: "w".into(),
        platform: "ios".into(),
        granted_at: at,
        deadline: at + 60_000,
    };
    store.grant_lease(&lease(&format!("{id}-1"), 1)).await.unwrap();
    store.finish_attempt(&format!("{id}-1"), &outcome("failed", at + 100, true)).await.unwrap();
    store.queue(id, "a", 2, 1, at + 100).await.unwrap();
    store.grant_lease(&lease(&format!("{id}-2"), 2)).await.unwrap();
    store.finish_attempt(&format!("{id}-2"), &outcome("passed", at + 200, false)).await.unwrap();
    store.set_case_result(id, "a", "passed").await.unwrap();
    let manifest =
        r#"{"schema":1,"startedAt":"x","totals":{"cases":1,"passed":1,"failed":0,"unsupported":0,"retried":1}}"#;
    store.finish_run(id, at + 300, manifest).await.unwrap();
}

async fn history(runs: usize) -> Store {
    let store = argus_store::testkit::fresh(false).await;
    let now = argus_grid::time::now_ms();
    for n in 0..runs {
        flaky_run(&store, &format!("r{n}"), now - 10_000 + n as i64 * 1_000).await;
    }
    store
}

#[tokio::test]
async fn a_case_that_keeps_passing_on_retry_for_no_visible_reason_is_auto_muted_with_its_owner_told() {
    let policy = FollowUp { mutes: MutePolicy { auto_mute_after: 3, ..MutePolicy::default() } };
    // Three passes on retry: not more than the threshold.
    let store = history(3).await;
    follow_up(&store, &policy, 50).await.unwrap();
    assert!(store.mutes(Some("shop")).await.unwrap().is_empty());
    // Four: muted, by the auto-mute, with its owner; webhooks are told.
    let store = history(4).await;
    follow_up(&store, &policy, 50).await.unwrap();
    let mutes = store.mutes(Some("shop")).await.unwrap();
    assert_eq!(mutes.len(), 1);
    let mute = &mutes[0];
    assert_eq!((mute.case_id.as_str(), mute.owner.as_deref(), mute.muted_by.as_str()), ("a", Some("@ana"), AUTO_MUTER));
    assert_eq!(mute.reason, "auto-muted: passed on retry 4 times in 7 days; its failures were timing");
    let told: Vec<String> = store.events_to_dispatch(100).await.unwrap().into_iter().map(|e| e.event_json).collect();
    let muted = told.iter().find(|e| e.contains(r#""event":"case.muted""#)).expect("case.muted is told");
    assert!(muted.contains(r#""owner":"@ana""#), "{muted}");
    // Off by default.
    let store = history(4).await;
    follow_up(&store, &FollowUp::default(), 50).await.unwrap();
    assert!(store.mutes(Some("shop")).await.unwrap().is_empty());
}
