//! One behavioural suite for both stores: every test runs on SQLite and on
//! Postgres. Postgres comes from `ARGUS_TEST_POSTGRES_URL` (`.ci/run` starts
//! one); built without it, the Postgres half is reported `ignored`, never
//! `ok` (see `build.rs`), and run anyway (`--ignored`) it fails.

use argus_store::{AttemptOutcome, NewCase, NewLease, NewRun, RunFilter, StepRow, Store, StoreError};

async fn sqlite() -> Store {
    argus_store::testkit::fresh(false).await
}

async fn postgres() -> Store {
    argus_store::testkit::fresh(true).await
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name(super::sqlite().await).await;
                }
                #[tokio::test]
                #[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
                async fn postgres() {
                    super::$name(super::postgres().await).await;
                }
            }
        )*
    };
}

on_both!(
    a_build_is_recorded_once_by_its_sha256,
    a_run_and_its_pending_attempts,
    a_lease_is_granted_once,
    a_result_from_a_lease_that_is_not_current_is_refused,
    a_lost_attempt_is_queued_again,
    history_gives_the_median_of_passing_attempts,
    runs_are_listed_newest_first,
    a_batch_of_leases_and_results_commits_together_and_fences_each,
    a_result_and_the_lease_that_follows_it_commit_together_once,
    the_dashboard_filters_runs_and_reads_cases_across_them,
    a_runs_record_replays_in_order_and_a_cancel_ends_it_whole,
    big_batches_cross_statement_chunks_whole,
    a_run_that_cannot_be_written_whole_leaves_nothing,
    webdriver_sessions_and_their_commands_are_kept,
    old_runs_are_removed_whole_and_their_flakiness_stays,
    a_coordinator_with_a_window_prunes_by_itself,
    step_records_keep_failures_and_baselines_and_lose_old_passes,
    a_pass_record_written_after_its_result_is_idempotent_and_never_replaces_a_newer_baseline,
    mutes_keep_their_history_end_at_their_time_and_let_a_run_pass_whose_only_failures_are_muted,
);

async fn mutes_keep_their_history_end_at_their_time_and_let_a_run_pass_whose_only_failures_are_muted(store: Store) {
    let mute = |case: &str, until: Option<i64>, at: i64| argus_store::MuteRow {
        project: "shop".into(),
        case_id: case.into(),
        reason: format!("{case} is flaky'); DROP TABLE runs; --"),
        owner: Some("ana".into()),
        until_ms: until,
        muted_by: "ci".into(),
        muted_at: at,
    };
    let told = |at| argus_store::NewEvent { kind: "case.muted".into(), event_json: "{}".into(), at };
    store.mute(&mute("a", None, 100), &told(100)).await.unwrap();
    store.mute(&mute("b", Some(500), 100), &told(100)).await.unwrap();
    // Muting again changes the mute; the history keeps both.
    store.mute(&mute("a", None, 150), &told(150)).await.unwrap();
    assert_eq!(store.events_to_dispatch(10).await.unwrap().len(), 3, "each mute is told");
    let in_force = store.mutes_in_force("shop", 400).await.unwrap();
    assert_eq!(in_force.len(), 2);
    assert_eq!(in_force["a"].reason, "a is flaky'); DROP TABLE runs; --");
    // Past its time, b's mute ends, kept as unmuted by argus.
    let in_force = store.mutes_in_force("shop", 600).await.unwrap();
    assert_eq!(in_force.keys().collect::<Vec<_>>(), ["a"]);
    assert!(store.mutes_in_force("other", 600).await.unwrap().is_empty());
    let history = store.mute_events(Some("shop"), 10).await.unwrap();
    let told: Vec<(&str, &str, &str)> =
        history.iter().map(|e| (e.case_id.as_str(), e.action.as_str(), e.by_who.as_str())).collect();
    assert_eq!(told, [("b", "unmuted", "argus"), ("a", "muted", "ci"), ("b", "muted", "ci"), ("a", "muted", "ci")]);
    assert!(!store.unmute("shop", "b", "ana", "again", 700).await.unwrap(), "b is not muted any more");
    let event = argus_store::NewEvent { kind: "case.muted".into(), event_json: "{}".into(), at: 100 };
    store.mute(&mute("c", Some(800), 100), &event).await.unwrap();
    assert_eq!(store.lift_expired_mutes(700).await.unwrap(), 0);
    assert_eq!(store.lift_expired_mutes(800).await.unwrap(), 1, "at its time, without a run");
    assert_eq!(store.mutes(Some("shop")).await.unwrap().len(), 1);

    // A run whose only failure is muted passes; its totals still count it.
    let mut r1 = run("r1", 1_000, &["a", "c"]);
    r1.cases[0].muted = Some("a is flaky".into());
    r1.cases[0].owner = Some("@ana @org/qa".into());
    store.create_run(&r1).await.unwrap();
    store.grant_lease(&lease("1a", "r1", "a", 1, 1)).await.unwrap();
    store.finish_attempt("1a", &failed(300, 1_100)).await.unwrap();
    store.grant_lease(&lease("1c", "r1", "c", 1, 1)).await.unwrap();
    store.finish_attempt("1c", &passed(300, 1_200)).await.unwrap();
    store
        .set_case_results(&[("r1".into(), "a".into(), "failed".into()), ("r1".into(), "c".into(), "passed".into())])
        .await
        .unwrap();
    let totals =
        r#"{"schema":1,"startedAt":"x","totals":{"cases":2,"passed":1,"failed":1,"unsupported":0,"retried":0}}"#;
    store.finish_run("r1", 1_300, totals).await.unwrap();
    let r1 = store.get_run("r1").await.unwrap();
    assert_eq!((r1.result.as_deref(), r1.failed, r1.muted_failed), (Some("passed"), Some(1), Some(1)));
    assert_eq!(store.run_muted("r1").await.unwrap(), [("a".to_owned(), "a is flaky".to_owned())]);
    assert!(store.case_known("shop", "a").await.unwrap());
    store.count_ended_runs().await.unwrap();
    let owners = store.case_owners("shop").await.unwrap();
    assert_eq!((owners.len(), owners["a"].as_str()), (1, "@ana @org/qa"));
    assert!(!store.case_known("shop", "zz").await.unwrap() && !store.case_known("other", "a").await.unwrap());
    // Its end is followed up once.
    assert_eq!(store.runs_to_follow_up(10).await.unwrap().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r1"]);
    let told = argus_store::NewEvent { kind: "run.finished".into(), event_json: "{}".into(), at: 1_400 };
    store.followed_up("r1", std::slice::from_ref(&told)).await.unwrap();
    store.followed_up("r1", &[told]).await.unwrap();
    let finished: Vec<_> =
        store.events_to_dispatch(10).await.unwrap().into_iter().filter(|e| e.kind == "run.finished").collect();
    assert_eq!(finished.len(), 1, "a run's end is told once");
    assert!(store.runs_to_follow_up(10).await.unwrap().is_empty());

    // Passes in a row on main since the mute: the failure breaks the row.
    store.create_run(&run("r2", 2_000, &["a"])).await.unwrap();
    store.grant_lease(&lease("2a", "r2", "a", 1, 1)).await.unwrap();
    store.finish_attempt("2a", &passed(300, 2_100)).await.unwrap();
    assert!(!store.passed_in_a_row("shop", "main", "a", 150, 2).await.unwrap(), "a pass after a failure");
    store.create_run(&run("r3", 3_000, &["a"])).await.unwrap();
    store.grant_lease(&lease("3a", "r3", "a", 1, 1)).await.unwrap();
    store.finish_attempt("3a", &passed(300, 3_100)).await.unwrap();
    assert!(store.passed_in_a_row("shop", "main", "a", 150, 2).await.unwrap());
    assert!(!store.passed_in_a_row("shop", "feature", "a", 150, 2).await.unwrap(), "not on that branch");
    assert!(!store.passed_in_a_row("shop", "main", "a", 150, 3).await.unwrap(), "three asked, two on record");
}

fn observed(body: &[u8]) -> Option<argus_store::Observed> {
    Some(argus_store::Observed {
        project: "shop".into(),
        branch: "main".into(),
        commit: "abc123".into(),
        platform: "ios".into(),
        device_id: "w1/8123".into(),
        worker_id: "w1".into(),
        body: body.to_vec(),
    })
}

async fn a_pass_record_written_after_its_result_is_idempotent_and_never_replaces_a_newer_baseline(store: Store) {
    // Two passes whose results are written without their records; the
    // records follow, the newer first, then the older, then the newer again
    // (a write whose answer was lost, tried again).
    store.create_run(&run("r1", 1_000, &["a"])).await.unwrap();
    let mut keys = Vec::new();
    for (n, at) in [(1, 1_100), (2, 1_200)] {
        let id = format!("l{n}");
        store.grant_lease(&lease(&id, "r1", "a", n, 1)).await.unwrap();
        let outcome = AttemptOutcome { next_try: (n == 1).then_some((2, 1)), ..passed(5, at) };
        keys.push((store.finish_attempt(&id, &outcome).await.unwrap(), at));
    }
    assert!(store.observation("r1", "a", 1).await.unwrap().is_none(), "the result alone has none");
    let record = |n: usize, body: &[u8]| argus_store::ObservedAttempt {
        key: keys[n].0.clone(),
        result: "passed".into(),
        finished_at: keys[n].1,
        observed: observed(body).unwrap(),
    };
    store.record_observations(&[record(1, b"newer")]).await.unwrap();
    store.record_observations(&[record(0, b"older")]).await.unwrap();
    store.record_observations(&[record(1, b"again")]).await.unwrap();
    assert_eq!(store.observation("r1", "a", 2).await.unwrap().unwrap().body, b"newer", "written once");
    assert_eq!(store.observation("r1", "a", 1).await.unwrap().unwrap().body, b"older");
    // A failure now is compared with the newer pass.
    store.create_run(&run("r2", 2_000, &["a"])).await.unwrap();
    store.grant_lease(&lease("l3", "r2", "a", 1, 1)).await.unwrap();
    let fail = AttemptOutcome { observed: observed(b"fail"), final_result: Some("failed".into()), ..failed(5, 2_100) };
    store.finish_attempt("l3", &fail).await.unwrap();
    let failure = store.failed_observations("r2").await.unwrap();
    let baseline = failure[0].baseline_key().expect("compared with the last pass");
    assert_eq!((baseline.run_id.as_str(), baseline.attempt), ("r1", 2));
}

async fn step_records_keep_failures_and_baselines_and_lose_old_passes(store: Store) {
    // Three passes of `a`, then a failure: the failure is tied to the
    // newest pass (its baseline then), and the two older passes are only
    // kept for the window.
    store.create_run(&run("r1", 1_000, &["a", "b"])).await.unwrap();
    for (n, at) in [(1, 1_100), (2, 1_200), (3, 1_300)] {
        let id = format!("l{n}");
        store.grant_lease(&lease(&id, "r1", "a", n, 1)).await.unwrap();
        let outcome = AttemptOutcome { next_try: Some((n + 1, 1)), observed: observed(b"pass"), ..passed(5, at) };
        store.finish_attempt(&id, &outcome).await.unwrap();
    }
    store.grant_lease(&lease("l4", "r1", "a", 4, 1)).await.unwrap();
    let fail = AttemptOutcome { observed: observed(b"fail"), final_result: Some("failed".into()), ..failed(5, 1_400) };
    store.finish_attempt("l4", &fail).await.unwrap();
    let failure = store.failed_observations("r1").await.unwrap();
    assert_eq!(failure.len(), 1);
    assert_eq!(failure[0].body, b"fail");
    let baseline = failure[0].baseline_key().expect("compared with the last pass");
    assert_eq!((baseline.attempt, baseline.try_no), (3, 1));
    assert_eq!(store.observation_of(&baseline).await.unwrap().unwrap().body, b"pass");
    // Not yet past the window: nothing goes.
    assert_eq!(store.prune_observations(1_000, 1).await.unwrap(), 0);
    // Past it: the two older passes go, one statement at a time.
    assert_eq!(store.prune_observations(10_000, 1).await.unwrap(), 2);
    assert!(store.observation("r1", "a", 1).await.unwrap().is_none());
    assert!(store.observation("r1", "a", 3).await.unwrap().is_some(), "the baseline stays");
    assert!(store.observation("r1", "a", 4).await.unwrap().is_some(), "the failure stays");
    let (rows, bytes) = store.observation_bytes().await.unwrap();
    assert_eq!((rows, bytes), (2, 8));
    // A failure's cause is written once its run has ended, then ranked.
    assert!(store.unexplained_failures(10).await.unwrap().is_empty(), "r1 is still running");
    store.finish_run("r1", 1_500, r#"{"schema":1}"#).await.unwrap();
    let unexplained = store.unexplained_failures(10).await.unwrap();
    assert_eq!(unexplained.iter().map(|r| r.attempt).collect::<Vec<_>>(), [4]);
    store.set_cause(&unexplained[0].key(), "backend", "POST /api/cart 503").await.unwrap();
    assert!(store.unexplained_failures(10).await.unwrap().is_empty());
    let causes = store.failure_causes("shop", 1_000, 10).await.unwrap();
    assert_eq!(causes.len(), 1);
    assert_eq!((causes[0].cause.as_str(), causes[0].signature.as_str()), ("backend", "POST /api/cart 503"));
    assert!(store.failure_causes("shop", 1_401, 10).await.unwrap().is_empty(), "before the window");
    assert!(store.failure_causes("other", 0, 10).await.unwrap().is_empty(), "another project's");
}

async fn a_coordinator_with_a_window_prunes_by_itself(store: Store) {
    use std::time::Duration;
    store.create_run(&run("done", 1_000, &["a"])).await.unwrap();
    store.grant_lease(&lease("l1", "done", "a", 1, 1)).await.unwrap();
    store
        .finish_attempt("l1", &AttemptOutcome { final_result: Some("passed".into()), ..passed(5, 1_100) })
        .await
        .unwrap();
    store.finish_run("done", 1_200, r#"{"schema":1}"#).await.unwrap();
    store.create_run(&run("running", 1_000, &["b"])).await.unwrap();
    let (shutdown, tasks) = (tokio_util::sync::CancellationToken::new(), tokio_util::task::TaskTracker::new());
    // A window of a day: runs of 1970 are long past it.
    let day = Duration::from_secs(86_400);
    argus_store::prune::keep(store.clone(), None, day, Duration::from_millis(20), shutdown.clone(), &tasks);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.get_run("done").await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "the finished run was never pruned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(store.get_run("running").await.is_ok(), "a run still going is never pruned");
    shutdown.cancel();
    tasks.close();
    tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await.expect("the task ends on shutdown");
}

async fn old_runs_are_removed_whole_and_their_flakiness_stays(store: Store) {
    use argus_store::{Pruned, SessionRow};
    // An old run of more cases than one batch removes, one of them flaky.
    let ids: Vec<String> = (0..450).map(|i| format!("c{i:03}")).collect();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    store.create_run(&run("old", 1_000, &names)).await.unwrap();
    let leases: Vec<NewLease> = ids.iter().map(|c| lease(&format!("l-{c}"), "old", c, 1, 1)).collect();
    assert!(store.grant_leases(&leases).await.unwrap().iter().all(|g| *g));
    let results: Vec<(String, AttemptOutcome)> = leases
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let outcome = if i == 0 {
                AttemptOutcome { result: Some("failed".into()), next_try: Some((2, 1)), seq: 1, ..passed(5, 1_100) }
            } else {
                AttemptOutcome { seq: i as i64 + 1, final_result: Some("passed".into()), ..passed(5, 1_100) }
            };
            (l.id.clone(), outcome)
        })
        .collect();
    assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok));
    store.grant_lease(&lease("l-retry", "old", "c000", 2, 1)).await.unwrap();
    let retry = AttemptOutcome { seq: 500, final_result: Some("passed".into()), ..passed(5, 1_200) };
    store.finish_attempt("l-retry", &retry).await.unwrap();
    store.finish_run("old", 1_500, r#"{"schema":1}"#).await.unwrap();
    // A newer run, and an old one still running: both stay.
    for (id, at) in [("new", 10_000), ("running", 900)] {
        store.create_run(&run(id, at, &["a"])).await.unwrap();
    }
    store.grant_lease(&lease("l-new", "new", "a", 1, 1)).await.unwrap();
    store
        .finish_attempt("l-new", &AttemptOutcome { final_result: Some("passed".into()), ..passed(5, 10_100) })
        .await
        .unwrap();
    store.finish_run("new", 10_200, r#"{"schema":1}"#).await.unwrap();
    let session = |id: &str, at: i64| SessionRow {
        id: id.into(),
        device_id: "w/ios-1".into(),
        worker_id: "w".into(),
        platform: "ios".into(),
        capabilities_json: "{}".into(),
        created_at: at,
        ended_at: Some(at + 10),
        end_reason: Some("deleted by its client".into()),
    };
    let ends = [("s-old".to_owned(), 1_010, "deleted by its client".to_owned())];
    store.record_sessions(&[session("s-old", 1_000), session("s-new", 10_000)], &[], &ends).await.unwrap();
    // The coordinator's follow-up counts ended runs in the summary.
    store.count_ended_runs().await.unwrap();
    let flaky = store.flaky_cases("shop", 0, 10).await.unwrap();
    assert_eq!(flaky.iter().map(|f| (f.case_id.as_str(), f.passed_on_retry)).collect::<Vec<_>>(), [("c000", 1)]);

    let expected = Pruned { runs: 1, attempts: 451, steps: 451, sessions: 1 };
    assert_eq!(store.prunable(5_000).await.unwrap(), expected, "a dry run counts what would go");
    assert_eq!(argus_store::prune::prune(&store, None, 5_000).await.unwrap(), expected);
    assert!(matches!(store.get_run("old").await, Err(StoreError::NoRun(_))));
    assert!(store.run_cases("old").await.unwrap().is_empty());
    assert!(store.run_log("old").await.unwrap().is_empty());
    assert!(store.run_files("old").await.unwrap().is_empty());
    assert_eq!(store.run_lines("new").await.unwrap().len(), 1, "the newer run is whole");
    assert_eq!(store.open_attempts().await.unwrap().len(), 1, "the running one too");
    let sessions: Vec<String> = store.list_sessions(10).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(sessions, ["s-new"]);
    assert_eq!(store.flaky_cases("shop", 0, 10).await.unwrap(), flaky, "the flakiness summary stays");
    assert_eq!(store.oldest_run_started().await.unwrap(), Some(900));
    assert_eq!(argus_store::prune::prune(&store, None, 5_000).await.unwrap(), Pruned::default());
}

async fn webdriver_sessions_and_their_commands_are_kept(store: Store) {
    use argus_store::{CommandRow, SessionRow};
    let session = |id: &str, at: i64| SessionRow {
        id: id.into(),
        device_id: "w/ios-1".into(),
        worker_id: "w".into(),
        platform: "ios".into(),
        capabilities_json: r#"{"platformName":"ios"}"#.into(),
        created_at: at,
        ended_at: None,
        end_reason: None,
    };
    let command = |seq: i64, outcome: &str| CommandRow {
        session_id: "s1".into(),
        seq,
        at: 1_000 + seq,
        command: "POST /session/{sid}/element".into(),
        ms: 3,
        outcome: outcome.into(),
        message: (outcome != "ok").then(|| "no 'x' <here>".into()),
        screen_xml: (outcome != "ok").then(|| "<hierarchy/>".into()),
    };
    // Commands in chunks bigger than one statement, and a retried batch
    // (the store took it, its answer was lost) adds nothing twice.
    let commands: Vec<CommandRow> =
        (0..1_200).map(|n| command(n, if n == 7 { "no such element" } else { "ok" })).collect();
    store.record_sessions(&[session("s1", 1_000), session("s2", 2_000)], &commands, &[]).await.unwrap();
    store
        .record_sessions(
            &[session("s1", 1_000)],
            &commands[..10],
            &[("s1".into(), 5_000, "deleted by its client".into())],
        )
        .await
        .unwrap();
    let listed = store.list_sessions(10).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["s2", "s1"], "newest first");
    let s1 = store.get_session("s1").await.unwrap().unwrap();
    assert_eq!((s1.ended_at, s1.end_reason.as_deref()), (Some(5_000), Some("deleted by its client")));
    assert!(store.get_session("nope").await.unwrap().is_none());
    let kept = store.session_commands("s1").await.unwrap();
    assert_eq!(kept.len(), 1_200);
    assert_eq!(kept[7].outcome, "no such element");
    assert_eq!(kept[7].message.as_deref(), Some("no 'x' <here>"));
    assert_eq!(kept[7].screen_xml.as_deref(), Some("<hierarchy/>"));
    assert!(store.session_commands("s2").await.unwrap().is_empty());
}

async fn a_run_that_cannot_be_written_whole_leaves_nothing(store: Store) {
    // A run is written in parts (500 cases on SQLite, 10,000 on Postgres);
    // here the second part repeats a case of the first, and fails after the
    // first was committed.
    let mut ids: Vec<String> = (0..10_100).map(|i| format!("c{i}")).collect();
    ids[10_050] = "c10".into();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert!(store.create_run(&run("half", 1, &names)).await.is_err());
    assert!(store.open_attempts().await.unwrap().is_empty());
    assert!(store.run_cases("half").await.unwrap().is_empty());
    assert!(matches!(store.get_run("half").await, Err(StoreError::NoRun(_))));
    // Whole runs are what a starting coordinator keeps.
    store.create_run(&run("whole", 1, &names[..500])).await.unwrap();
    store.create_run(&run("small", 1, &["a"])).await.unwrap();
    assert_eq!(store.remove_unwritten_runs().await.unwrap(), 0);
    assert_eq!(store.open_attempts().await.unwrap().len(), 501);
}

async fn big_batches_cross_statement_chunks_whole(store: Store) {
    // More rows than one statement takes on either database.
    let ids: Vec<String> = (0..1_234).map(|i| format!("c{i}")).collect();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    store.create_run(&run("big", 1, &names)).await.unwrap();
    assert_eq!(store.open_attempts().await.unwrap().len(), ids.len());
    let leases: Vec<NewLease> = ids.iter().map(|c| lease(&format!("l-{c}"), "big", c, 1, 1)).collect();
    assert!(store.grant_leases(&leases).await.unwrap().iter().all(|g| *g));
    store.extend_leases(&leases.iter().map(|l| l.id.clone()).collect::<Vec<_>>(), 99).await.unwrap();
    let results: Vec<(String, AttemptOutcome)> = leases
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let outcome = AttemptOutcome { seq: i as i64 + 1, final_result: Some("passed".into()), ..passed(5, 10) };
            (l.id.clone(), outcome)
        })
        .collect();
    assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok));
    let cases = store.run_cases("big").await.unwrap();
    assert!(cases.iter().all(|c| c.final_result.as_deref() == Some("passed")));
    assert_eq!(store.run_log("big").await.unwrap().len(), ids.len());
    let history = store.expected_ms_many(&ids, "ios", 20).await.unwrap();
    assert_eq!(history.len(), ids.len());
}

async fn a_runs_record_replays_in_order_and_a_cancel_ends_it_whole(store: Store) {
    store.create_run(&run("r1", 1, &["a", "b", "c", "d"])).await.unwrap();
    for (lease_id, case) in [("l1", "a"), ("l2", "b"), ("l3", "c")] {
        store.grant_lease(&lease(lease_id, "r1", case, 1, 1)).await.unwrap();
    }
    // Finished out of the order of their places: the record follows seq.
    // What follows a result is written with it, and nothing of a refused one.
    let settled = AttemptOutcome { seq: 1, final_result: Some("passed".into()), ..passed(10, 40) };
    store.finish_attempt("l2", &settled).await.unwrap();
    let stale = AttemptOutcome { next_try: Some((2, 1)), final_result: Some("failed".into()), ..passed(10, 41) };
    assert!(store.finish_attempt("l2", &stale).await.is_err());
    let b = store.run_cases("r1").await.unwrap().into_iter().find(|c| c.case_id == "b").unwrap();
    assert_eq!(b.final_result.as_deref(), Some("passed"));
    assert!(store.open_attempts().await.unwrap().iter().all(|a| a.case_id != "b"), "no try queued by the stale result");
    store.revoke_lease("l1", "the worker went away", 30, 2).await.unwrap();
    store.extend_leases(&["l3".into(), "nope".into()], 99_999).await.unwrap();
    let log = store.run_log("r1").await.unwrap();
    let record: Vec<(Option<i64>, &str, i64)> =
        log.iter().map(|r| (r.seq, r.case_id.as_str(), r.infrastructure)).collect();
    assert_eq!(record, [(Some(1), "b", 0), (Some(2), "a", 1)]);
    assert_eq!(log[1].error.as_deref(), Some("the worker went away"));
    assert_eq!(log[0].device_id.as_deref(), Some("w1/8123"));
    // Queuing the same try twice (an answer lost, a retry) writes it once.
    store.queue("r1", "a", 1, 2, 31).await.unwrap();
    store.queue("r1", "a", 1, 2, 32).await.unwrap();
    store.set_waiting("r1", Some("every device that matches platform=ios is out")).await.unwrap();
    assert_eq!(
        store.get_run("r1").await.unwrap().waiting_reason.as_deref(),
        Some("every device that matches platform=ios is out")
    );
    // A cancel ends the open lease, drops what waits, and finishes the run.
    store.cancel_run("r1", "the run was cancelled by its client", 50, r#"{"schema":1}"#).await.unwrap();
    assert!(store.open_attempts().await.unwrap().is_empty(), "nothing of a cancelled run is left to run");
    let err = store.finish_attempt("l3", &passed(10, 60)).await.unwrap_err();
    assert!(matches!(err, StoreError::StaleLease(_)), "{err}");
    let row = store.get_run("r1").await.unwrap();
    assert_eq!((row.finished_at, row.result.as_deref(), row.waiting_reason), (Some(50), Some("cancelled"), None));
    assert!(store.open_runs().await.unwrap().is_empty());
    // Cancelling again changes nothing.
    store.cancel_run("r1", "again", 70, "{}").await.unwrap();
    assert_eq!(store.get_run("r1").await.unwrap().finished_at, Some(50));
}

fn run(id: &str, started_at: i64, cases: &[&str]) -> NewRun {
    NewRun {
        id: id.into(),
        project: "shop".into(),
        branch: Some("main".into()),
        commit: Some("abc123".into()),
        trigger: Some("ci".into()),
        selector_json: r#"{"platform":"ios"}"#.into(),
        config_json: "{}".into(),
        retries: 1,
        priority: 1,
        detached: false,
        rerun_of: None,
        testowners: None,
        started_at,
        manifest_json: format!(r#"{{"schema":1,"startedAt":"{started_at}"}}"#),
        files: vec![("cases/a.md".into(), "---\nid: a\n---\n".into())],
        cases: cases
            .iter()
            .enumerate()
            .map(|(i, id)| NewCase {
                case_id: id.to_string(),
                file: "cases/a.md".into(),
                title: None,
                ordinal: i as i64,
                expected_ms: 1000 * (i as i64 + 1),
                estimate_source: "default".into(),
                muted: None,
                owner: None,
            })
            .collect(),
    }
}

fn lease(id: &str, run: &str, case: &str, attempt: u32, try_no: u32) -> NewLease {
    NewLease {
        id: id.into(),
        run_id: run.into(),
        case_id: case.into(),
        attempt,
        try_no,
        device_id: "w1/8123".into(),
        worker_id: "w1".into(),
        platform: "ios".into(),
        granted_at: 10,
        deadline: 60_010,
    }
}

fn passed(ms: i64, at: i64) -> AttemptOutcome {
    AttemptOutcome {
        result: Some("passed".into()),
        infrastructure: false,
        error: None,
        finished_at: at,
        ms,
        run_case_json: Some(format!(
            r#"{{"id":"c","file":"c.md","attempt":1,"result":"passed","startedAt":"2026-01-01T00:00:00.000Z","ms":{ms},"steps":[]}}"#
        )),
        steps: vec![StepRow { step: "app.back".into(), status: "passed".into(), ms: 3, error: None }],
        seq: 0,
        next_try: None,
        final_result: None,
        observed: None,
        health: Default::default(),
    }
}

async fn a_run_and_its_pending_attempts(store: Store) {
    store.create_run(&run("r1", 1, &["a", "b", "c"])).await.unwrap();
    let open = store.open_attempts().await.unwrap();
    let ids: Vec<&str> = open.iter().map(|a| a.case_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert!(open.iter().all(|a| a.state == "pending" && a.attempt == 1 && a.try_no == 1));
    assert_eq!(open[2].expected_ms, 3000);
    // The same run twice is refused whole: nothing half-written.
    assert!(store.create_run(&run("r1", 1, &["d"])).await.is_err());
    assert_eq!(store.open_attempts().await.unwrap().len(), 3);
}

async fn a_lease_is_granted_once(store: Store) {
    store.create_run(&run("r1", 1, &["a"])).await.unwrap();
    store.grant_lease(&lease("l1", "r1", "a", 1, 1)).await.unwrap();
    let err = store.grant_lease(&lease("l2", "r1", "a", 1, 1)).await.unwrap_err();
    assert!(matches!(err, StoreError::NotPending(_)), "{err}");
    let open = store.open_attempts().await.unwrap();
    assert_eq!((open[0].state.as_str(), open[0].lease_id.as_deref()), ("leased", Some("l1")));
}

async fn a_result_from_a_lease_that_is_not_current_is_refused(store: Store) {
    store.create_run(&run("r1", 1, &["a", "b"])).await.unwrap();
    store.grant_lease(&lease("l1", "r1", "a", 1, 1)).await.unwrap();
    let key = store.finish_attempt("l1", &passed(1200, 50)).await.unwrap();
    assert_eq!((key.case_id.as_str(), key.attempt), ("a", 1));
    // The same result again: refused, nothing written twice.
    let err = store.finish_attempt("l1", &passed(1200, 51)).await.unwrap_err();
    assert!(matches!(err, StoreError::StaleLease(_)), "{err}");
    // A revoked lease cannot finish its attempt.
    store.grant_lease(&lease("l2", "r1", "b", 1, 1)).await.unwrap();
    assert!(store.revoke_lease("l2", "worker lost", 60, 2).await.unwrap().is_some());
    let err = store.finish_attempt("l2", &passed(900, 70)).await.unwrap_err();
    assert_eq!(err.to_string(), "lease l2 is not current (revoked, expired or already finished)");
    let ms = |lines: Vec<argus_proto::run::RunCase>| lines.iter().map(|l| l.ms).collect::<Vec<_>>();
    assert_eq!(ms(store.run_lines("r1").await.unwrap()), [1200]);
    assert!(store.open_attempts().await.unwrap().is_empty());
}

async fn a_lost_attempt_is_queued_again(store: Store) {
    store.create_run(&run("r1", 1, &["a"])).await.unwrap();
    store.grant_lease(&lease("l1", "r1", "a", 1, 1)).await.unwrap();
    let key = store.revoke_lease("l1", "device lost", 20, 1).await.unwrap().unwrap();
    assert!(store.revoke_lease("l1", "device lost", 21, 1).await.unwrap().is_none(), "revoked once");
    store.queue(&key.run_id, &key.case_id, 1, 2, 21).await.unwrap();
    let open = store.open_attempts().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!((open[0].attempt, open[0].try_no, open[0].state.as_str()), (1, 2, "pending"));
    store.grant_lease(&lease("l2", "r1", "a", 1, 2)).await.unwrap();
    store.finish_attempt("l2", &passed(800, 30)).await.unwrap();
    store.set_case_result("r1", "a", "passed").await.unwrap();
    assert_eq!(store.run_lines("r1").await.unwrap().len(), 1, "the infrastructure failure is not a line");
    // How each finished attempt ended, as a comparison reads them.
    let mut ends = store.run_ends("r1").await.unwrap();
    ends.sort_by_key(|e| (e.attempt, e.try_no));
    let seen: Vec<_> =
        ends.iter().map(|e| (e.attempt, e.try_no, e.result.as_deref(), e.infrastructure, e.ms)).collect();
    assert_eq!(seen, [(1, 1, None, 1, None), (1, 2, Some("passed"), 0, Some(800))]);
    assert!(store.failed_cases("r1").await.unwrap().is_empty());
    store.set_case_result("r1", "a", "failed").await.unwrap();
    assert_eq!(store.failed_cases("r1").await.unwrap(), ["a"]);
}

async fn history_gives_the_median_of_passing_attempts(store: Store) {
    store.create_run(&run("r1", 1, &["a"])).await.unwrap();
    assert_eq!(store.expected_ms("a", "ios", 20).await.unwrap(), None);
    for (n, ms) in [500, 900, 700].into_iter().enumerate() {
        let n = n as u32 + 1;
        if n > 1 {
            store.queue("r1", "a", n, 1, n as i64).await.unwrap();
        }
        store.grant_lease(&lease(&format!("l{n}"), "r1", "a", n, 1)).await.unwrap();
        store.finish_attempt(&format!("l{n}"), &passed(ms, 100 + n as i64)).await.unwrap();
    }
    assert_eq!(store.expected_ms("a", "ios", 20).await.unwrap(), Some(700));
    assert_eq!(store.expected_ms("a", "ios", 1).await.unwrap(), Some(700), "the newest only");
    assert_eq!(store.expected_ms("a", "android", 20).await.unwrap(), None);
    // A whole suite at once says the same, and leaves out what has no history.
    let many = store.expected_ms_many(&["a".into(), "zz".into()], "ios", 20).await.unwrap();
    assert_eq!(many, [("a".to_owned(), 700)].into_iter().collect());
    let newest = store.expected_ms_many(&["a".into()], "ios", 1).await.unwrap();
    assert_eq!(newest["a"], 700);
    let two = store.expected_ms_many(&["a".into()], "ios", 2).await.unwrap();
    assert_eq!(two["a"], 900, "the median of the two newest, 700 and 900");
}

async fn runs_are_listed_newest_first(store: Store) {
    store.create_run(&run("old", 1, &["a"])).await.unwrap();
    store.create_run(&run("new", 2, &["a"])).await.unwrap();
    let ids: Vec<String> = store.list_runs(10).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["new", "old"]);
    store.finish_run("old", 5, r#"{"schema":1}"#).await.unwrap();
    let old = store.get_run("old").await.unwrap();
    assert_eq!(old.finished_at, Some(5));
    assert!(matches!(store.get_run("nope").await, Err(StoreError::NoRun(_))));
    assert!(matches!(store.finish_run("nope", 5, "{}").await, Err(StoreError::NoRun(_))));
}

#[tokio::test]
async fn bad_urls_and_unreachable_databases_are_named() {
    let err = Store::open("mysql://db/argus").await.err().unwrap();
    assert_eq!(err.to_string(), "the database URL \"mysql://db/argus\" is neither postgres:// nor sqlite:");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = Store::open(&format!("postgres://argus:hunter2@127.0.0.1:{port}/argus")).await.err().unwrap();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("cannot open the database postgres://argus:…@127.0.0.1:{port}/argus: ")),
        "{message}"
    );
    assert!(!message.contains("hunter2"));
}

async fn a_batch_of_leases_and_results_commits_together_and_fences_each(store: Store) {
    store.create_run(&run("r1", 1, &["a", "b", "c"])).await.unwrap();
    store.grant_lease(&lease("early", "r1", "b", 1, 1)).await.unwrap();
    // b is leased already: the batch grants a and c and skips b.
    let batch = [lease("la", "r1", "a", 1, 1), lease("lb", "r1", "b", 1, 1), lease("lc", "r1", "c", 1, 1)];
    assert_eq!(store.grant_leases(&batch).await.unwrap(), [true, false, true]);
    // lb was never granted: its result is refused, the others are written.
    let results =
        [("la".to_owned(), passed(5, 20)), ("lb".to_owned(), passed(6, 21)), ("lc".to_owned(), passed(7, 22))];
    let finished = store.finish_attempts(&results).await.unwrap();
    assert_eq!(finished[0].as_ref().unwrap().case_id, "a");
    assert!(matches!(&finished[1], Err(StoreError::StaleLease(lease)) if lease == "lb"));
    assert_eq!(finished[2].as_ref().unwrap().case_id, "c");
    let ms: Vec<u64> = store.run_lines("r1").await.unwrap().iter().map(|l| l.ms).collect();
    assert_eq!(ms, [5, 7]);
    // The same results again are refused: each lease finishes once.
    assert!(store.finish_attempts(&results).await.unwrap().iter().all(|r| r.is_err()));
}

async fn a_result_and_the_lease_that_follows_it_commit_together_once(store: Store) {
    store.create_run(&run("r1", 1, &["a", "b", "c", "d", "e", "f"])).await.unwrap();
    let first = [lease("la", "r1", "a", 1, 1), lease("lb", "r1", "b", 1, 1), lease("lc", "r1", "c", 1, 1)];
    assert_eq!(store.grant_leases(&first).await.unwrap(), [true, true, true]);
    // b's result was written by an earlier try whose answer was lost.
    store.finish_attempt("lb", &passed(4, 19)).await.unwrap();
    // c's device would follow with d, which another device holds meanwhile.
    store.grant_lease(&lease("ld-elsewhere", "r1", "d", 1, 1)).await.unwrap();
    let results = [
        ("la".to_owned(), passed(5, 20)),
        ("lb".to_owned(), passed(4, 19)),
        ("lx".to_owned(), passed(6, 21)),
        ("lc".to_owned(), passed(7, 22)),
    ];
    let next = [
        ("la".to_owned(), lease("la2", "r1", "e", 1, 1)),
        ("lb".to_owned(), lease("lb2", "r1", "f", 1, 1)),
        ("lx".to_owned(), lease("lx2", "r1", "f", 1, 1)),
        ("lc".to_owned(), lease("lc2", "r1", "d", 1, 1)),
    ];
    let written = store.finish_and_grant(&results, &next).await.unwrap();
    let cases: Vec<Option<&str>> =
        written.finished.iter().map(|r| r.as_ref().ok().map(|k| k.case_id.as_str())).collect();
    assert_eq!(cases, [Some("a"), None, None, Some("c")]);
    // la2 follows a's result and lb2 b's (ended before); lx never was a
    // lease, so nothing follows it; d is no longer pending.
    assert_eq!(written.granted, [Some(true), Some(true), None, Some(false)]);
    let leased = |open: &[argus_store::AttemptRow], case: &str| {
        open.iter().find(|a| a.case_id == case).and_then(|a| a.lease_id.clone())
    };
    let open = store.open_attempts().await.unwrap();
    assert_eq!((leased(&open, "e"), leased(&open, "f")), (Some("la2".into()), Some("lb2".into())));
    // The same write again (its answer lost): each result is refused (a lease
    // finishes once), and each lease that followed is granted again, once:
    // its attempt keeps it, and it is one lease that finishes once.
    let again = store.finish_and_grant(&results, &next).await.unwrap();
    assert!(again.finished.iter().all(Result::is_err));
    assert_eq!(again.granted, [Some(true), Some(true), None, Some(false)]);
    assert_eq!(leased(&store.open_attempts().await.unwrap(), "e"), Some("la2".into()));
    store.finish_attempt("la2", &passed(8, 30)).await.unwrap();
    assert!(matches!(store.finish_attempt("la2", &passed(8, 31)).await, Err(StoreError::StaleLease(_))));
    // An attempt that another lease holds, or that is done, is not taken.
    let other = [("lc".to_owned(), lease("lc3", "r1", "e", 1, 1)), ("lc".to_owned(), lease("lc4", "r1", "f", 1, 1))];
    assert_eq!(store.finish_and_grant(&[], &other).await.unwrap().granted, [Some(false), Some(false)]);
}

fn failed(ms: i64, at: i64) -> AttemptOutcome {
    AttemptOutcome { result: Some("failed".into()), ..passed(ms, at) }
}

async fn the_dashboard_filters_runs_and_reads_cases_across_them(store: Store) {
    // r1 (main): a passes, b fails then passes on retry. r2 (feature): a fails twice.
    let mut r2 = run("r2", 2_000, &["a"]);
    r2.branch = Some("feature".into());
    store.create_run(&run("r1", 1_000, &["a", "b"])).await.unwrap();
    store.create_run(&r2).await.unwrap();
    store.grant_lease(&lease("1a", "r1", "a", 1, 1)).await.unwrap();
    store.finish_attempt("1a", &passed(400, 1_100)).await.unwrap();
    store.grant_lease(&lease("1b", "r1", "b", 1, 1)).await.unwrap();
    store.finish_attempt("1b", &failed(900, 1_200)).await.unwrap();
    store.queue("r1", "b", 2, 1, 1_200).await.unwrap();
    store.grant_lease(&lease("1b2", "r1", "b", 2, 1)).await.unwrap();
    store.finish_attempt("1b2", &passed(800, 1_300)).await.unwrap();
    let totals = |passed: u32, failed: u32, retried: u32| {
        format!(
            r#"{{"schema":1,"startedAt":"x","platform":"ios","totals":{{"cases":2,"passed":{passed},"failed":{failed},"unsupported":0,"retried":{retried}}}}}"#
        )
    };
    // Final results are written with the attempts' results, before the run ends.
    store.set_case_result("r1", "a", "passed").await.unwrap();
    store.set_case_result("r1", "b", "passed").await.unwrap();
    store.finish_run("r1", 1_400, &totals(2, 0, 1)).await.unwrap();
    store.grant_lease(&lease("2a", "r2", "a", 1, 1)).await.unwrap();
    store.finish_attempt("2a", &failed(300, 2_100)).await.unwrap();
    store.queue("r2", "a", 2, 1, 2_100).await.unwrap();
    store.grant_lease(&lease("2a2", "r2", "a", 2, 1)).await.unwrap();
    let health = argus_store::AppHealthRow {
        heap_start_kb: Some(42_496),
        heap_end_kb: Some(45_312),
        rss_start_kb: Some(153_600),
        rss_end_kb: None,
        render_commits: Some(12),
        render_us: Some(30_500),
    };
    store.finish_attempt("2a2", &AttemptOutcome { health, ..failed(350, 2_200) }).await.unwrap();
    store.set_case_result("r2", "a", "failed").await.unwrap();
    store.finish_run("r2", 2_300, &totals(0, 1, 1)).await.unwrap();
    store.finish_run("r2", 2_300, &totals(0, 1, 1)).await.unwrap();
    store.create_run(&run("r3", 3_000, &["a"])).await.unwrap();

    let ids = |runs: Vec<argus_store::RunRow>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let page = |filter: RunFilter, offset, limit| {
        let store = store.clone();
        async move { ids(store.runs_page(&filter, offset, limit).await.unwrap()) }
    };
    assert_eq!(page(RunFilter::default(), 0, 10).await, ["r3", "r2", "r1"]);
    assert_eq!(page(RunFilter::default(), 1, 1).await, ["r2", "r1"], "one more than asked: there is a next page");
    let only = |result: &str| RunFilter { result: Some(result.into()), ..RunFilter::default() };
    assert_eq!(page(only("failed"), 0, 10).await, ["r2"]);
    assert_eq!(page(only("passed"), 0, 10).await, ["r1"]);
    assert_eq!(page(only("running"), 0, 10).await, ["r3"]);
    let branch = RunFilter { branch: Some("feature".into()), platform: Some("ios".into()), ..RunFilter::default() };
    assert_eq!(page(branch, 0, 10).await, ["r2"]);
    let window = RunFilter { from: Some(1_500), to: Some(2_500), ..RunFilter::default() };
    assert_eq!(page(window, 0, 10).await, ["r2"]);
    let r1 = store.get_run("r1").await.unwrap();
    assert_eq!((r1.result.as_deref(), r1.cases, r1.passed, r1.retried), (Some("passed"), Some(2), Some(2), Some(1)));

    let attempts = store.run_attempts("r1").await.unwrap();
    let seen: Vec<(&str, i64, Option<&str>)> =
        attempts.iter().map(|a| (a.case_id.as_str(), a.attempt, a.result.as_deref())).collect();
    assert_eq!(seen, [("a", 1, Some("passed")), ("b", 1, Some("failed")), ("b", 2, Some("passed"))]);
    assert_eq!(store.finished_attempts("r1").await.unwrap(), 3);

    let history = store.case_history("shop", "a", 10).await.unwrap();
    let seen: Vec<(&str, i64, Option<&str>)> =
        history.iter().map(|h| (h.run_id.as_str(), h.attempt, h.result.as_deref())).collect();
    assert_eq!(seen, [("r2", 2, Some("failed")), ("r2", 1, Some("failed")), ("r1", 1, Some("passed"))]);
    assert_eq!(history[0].health, health, "the app's health is kept with its attempt");
    assert!(history[1].health.is_empty(), "and left empty where the app said nothing");
    assert!(store.case_history("other", "a", 10).await.unwrap().is_empty(), "per project");

    // The coordinator's follow-up counts ended runs in the summary.
    store.count_ended_runs().await.unwrap();
    let flaky = store.flaky_cases("shop", 0, 10).await.unwrap();
    let seen: Vec<(&str, i64, i64)> =
        flaky.iter().map(|f| (f.case_id.as_str(), f.retries, f.passed_on_retry)).collect();
    assert_eq!(seen, [("a", 1, 0), ("b", 1, 1)], "r2's end, recorded twice, is counted once");
    // a passed in r1 and failed in r2 (r3 is still going).
    assert_eq!(store.flipping_cases("shop", 0, 10).await.unwrap(), [("a".to_owned(), 1)]);
    let slow = store.slow_cases("shop", 0, 3_000, 10).await.unwrap();
    assert_eq!(slow[0].case_id, "b");
    assert_eq!((slow[0].mean_ms, slow[0].max_ms), (800.0, 800));
    // Busy time is read per device of the fleet, as the worker registered it.
    assert!(store.device_busy(0, 2_000).await.unwrap().is_empty(), "w1/8123 has not joined");
    store
        .upsert_devices(&[argus_store::DeviceRecord {
            id: "w1/8123".into(),
            worker_id: "w1".into(),
            slot: "8123".into(),
            platform: "ios".into(),
            state: "idle".into(),
            device_json: "{}".into(),
            updated_at: 0,
        }])
        .await
        .unwrap();
    let busy = store.device_busy(0, 2_000).await.unwrap();
    let seen: Vec<(i64, i64)> = busy.iter().map(|b| (b.bucket, b.attempts)).collect();
    assert_eq!(seen, [(0, 3), (1, 2)], "finished at 1,100-1,300 and 2,100-2,200, in 2-second buckets");
    assert!(busy.iter().all(|b| b.device_id == "w1/8123"));
    assert_eq!(store.projects().await.unwrap(), ["shop"]);
}

mod kept_windows_of_passes_read_as_the_attempts_do {
    #[tokio::test]
    async fn sqlite() {
        super::kept_windows_of_passes_read_as_the_attempts_do(false).await;
    }
    #[tokio::test]
    #[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
    async fn postgres() {
        super::kept_windows_of_passes_read_as_the_attempts_do(true).await;
    }
}

/// A comparison's windows of passes, kept as runs are counted, say what the
/// attempts say; a pass in a run not counted yet, and a window that does not
/// parse, are read from the attempts.
async fn kept_windows_of_passes_read_as_the_attempts_do(on_postgres: bool) {
    use argus_store::KEPT_PASSES;
    use sqlx::Connection;
    let url = argus_store::testkit::database_url(on_postgres, "argus_test").await;
    let store = Store::open(&url).await.unwrap();
    let pass = |ms: i64, at: i64| AttemptOutcome { final_result: Some("passed".into()), ..passed(ms, at) };
    // 35 runs in which `a` passed in 100 + n ms and `b` in 1000 - n ms,
    // counted in two goes.
    for n in 1..=35i64 {
        let id = format!("r{n:02}");
        store.create_run(&run(&id, n * 1_000, &["a", "b"])).await.unwrap();
        for (case, ms) in [("a", 100 + n), ("b", 1_000 - n)] {
            let lease_id = format!("l-{id}-{case}");
            store.grant_lease(&lease(&lease_id, &id, case, 1, 1)).await.unwrap();
            store.finish_attempt(&lease_id, &pass(ms, n * 1_000 + 10)).await.unwrap();
        }
        store.finish_run(&id, n * 1_000 + 20, r#"{"schema":1}"#).await.unwrap();
        if n == 20 {
            store.count_ended_runs().await.unwrap();
        }
    }
    store.count_ended_runs().await.unwrap();
    let ids = ["a".to_owned(), "b".to_owned(), "never".to_owned()];
    let live = store.recent_passed_ms(&ids, "ios", KEPT_PASSES).await.unwrap();
    assert_eq!(live["a"], (106..=135).collect::<Vec<i64>>(), "the last 30 of 35");
    assert!(!live.contains_key("never"));
    assert_eq!(store.kept_passed_ms(&ids, "ios").await.unwrap(), live);
    assert!(store.kept_passed_ms(&ids, "android").await.unwrap().is_empty());

    // What is kept is what is read: a window written over by hand shows.
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    sqlx::query("UPDATE case_windows SET recent_ms = '1,2,3,4,5' WHERE case_id = 'b'")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(store.kept_passed_ms(&ids, "ios").await.unwrap()["b"], [1, 2, 3, 4, 5]);
    // One that does not parse is read from the attempts.
    sqlx::query("UPDATE case_windows SET recent_ms = '5,x' WHERE case_id = 'b'").execute(&mut conn).await.unwrap();
    assert_eq!(store.kept_passed_ms(&ids, "ios").await.unwrap()["b"], live["b"]);

    // A pass in a run still going is in no window yet: its case is read
    // from the attempts, the others still from their windows.
    store.create_run(&run("going", 40_000, &["a"])).await.unwrap();
    store.grant_lease(&lease("l-going", "going", "a", 1, 1)).await.unwrap();
    store.finish_attempt("l-going", &pass(5, 40_010)).await.unwrap();
    let kept = store.kept_passed_ms(&ids, "ios").await.unwrap();
    assert_eq!(kept["a"], store.recent_passed_ms(&["a".into()], "ios", KEPT_PASSES).await.unwrap()["a"]);
    assert_eq!((kept["a"][0], kept["a"].len()), (5, 30), "the newest pass in, the oldest out");
    // Once that run has ended and is counted, its window holds it.
    store.finish_run("going", 40_020, r#"{"schema":1}"#).await.unwrap();
    store.count_ended_runs().await.unwrap();
    sqlx::query("UPDATE case_windows SET recent_ms = '7' WHERE case_id = 'a'").execute(&mut conn).await.unwrap();
    assert_eq!(store.kept_passed_ms(&ids, "ios").await.unwrap()["a"], [7], "read from its window again");
}

async fn a_build_is_recorded_once_by_its_sha256(store: Store) {
    let build = argus_store::BuildRow {
        sha256: "3f2a".repeat(16),
        platform: "ios".into(),
        bundle_id: "com.example.shop".into(),
        version: "4.2.0".into(),
        build_number: "4207".into(),
        min_os: Some("16.0".into()),
        launch: None,
        abis: String::new(),
        size: 112_000_000,
        file_name: "Shop.app".into(),
        uploaded_at: 10,
        last_used_at: 10,
    };
    assert!(store.put_build(&build).await.unwrap(), "new");
    let again = argus_store::BuildRow { uploaded_at: 20, file_name: "Other.zip".into(), ..build.clone() };
    assert!(!store.put_build(&again).await.unwrap(), "the same content is the same build");
    assert_eq!(store.build(&build.sha256).await.unwrap(), Some(build.clone()), "kept as first recorded");
    let newer = argus_store::BuildRow { sha256: "ab".repeat(32), last_used_at: 30, ..build.clone() };
    store.put_build(&newer).await.unwrap();
    let listed: Vec<String> = store.builds().await.unwrap().into_iter().map(|b| b.sha256).collect();
    assert_eq!(listed, [newer.sha256, build.sha256], "most recently used first");
    assert_eq!(store.build(&"00".repeat(32)).await.unwrap(), None);
}
