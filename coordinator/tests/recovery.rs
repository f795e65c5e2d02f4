//! A coordinator starting on a database with open runs rebuilds them from
//! their records; what it cannot read stops the start with a message.

use argus_store::{AttemptOutcome, NewCase, NewLease, NewRun};

fn run(id: &str, cases: &[&str]) -> NewRun {
    NewRun {
        id: id.into(),
        project: "shop".into(),
        selector_json: "{}".into(),
        config_json: "{}".into(),
        retries: 0,
        priority: 1,
        started_at: 1,
        manifest_json: r#"{"schema":1}"#.into(),
        cases: cases
            .iter()
            .enumerate()
            .map(|(i, id)| NewCase {
                case_id: (*id).into(),
                file: format!("cases/{id}.md"),
                title: None,
                ordinal: i as i64,
                expected_ms: 1_000,
                estimate_source: "default".into(),
                muted: None,
                owner: None,
            })
            .collect(),
        ..NewRun::default()
    }
}

fn lease(id: &str, run: &str, case: &str) -> NewLease {
    NewLease {
        id: id.into(),
        run_id: run.into(),
        case_id: case.into(),
        attempt: 1,
        try_no: 1,
        device_id: "w1/8123".into(),
        worker_id: "w1".into(),
        platform: "ios".into(),
        granted_at: 10,
        deadline: 60_010,
    }
}

/// Recovery reads every recorded attempt of an open run into its totals:
/// one whose result cannot be read stops the start, naming the run and the
/// attempt; a record that is not JSON is named where it is read.
#[tokio::test]
async fn an_attempt_that_cannot_be_read_at_recovery_is_an_error_naming_the_run_and_the_attempt() {
    let store = argus_store::testkit::fresh(false).await;
    store.create_run(&run("open", &["a", "b"])).await.unwrap();
    let line = r#"{"id":"a","file":"cases/a.md","attempt":1,"result":"passed","startedAt":"2026-01-01T00:00:00.000Z","ms":5,"steps":[]}"#;
    for (lease_id, case, result, json) in [("l1", "a", "passed", line), ("l2", "b", "exploded", "{\"id\": 7")] {
        store.grant_lease(&lease(lease_id, "open", case)).await.unwrap();
        let outcome = AttemptOutcome {
            result: Some(result.into()),
            finished_at: 10,
            ms: 5,
            run_case_json: Some(json.into()),
            ..AttemptOutcome::default()
        };
        store.finish_attempt(lease_id, &outcome).await.unwrap();
    }
    let unread = store.run_lines("open").await.unwrap_err().to_string();
    assert_eq!(
        unread,
        "a stored record does not read back: run open: line 2 of its cases.jsonl: invalid type: integer `7`, expected a string at line 1 column 8"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let served = argus_coordinator::serve_with(listener, store, argus_coordinator::Options::default(), cancel.clone());
    let error = tokio::time::timeout(std::time::Duration::from_secs(10), served).await.unwrap().unwrap_err();
    let error = error.to_string();
    assert!(
        error.contains(r#"run open: the result "exploded" of b attempt 1 is none of passed, failed, unsupported"#),
        "{error}"
    );
}
