//! Leases and results against real Postgres, as 500 devices make them: each
//! round every device is granted a lease, then reports a result of five
//! steps. Side by side: one transaction per lease and per result, against
//! what the coordinator does (one transaction per dispatch and per burst of
//! results). Every lease is committed before it would be sent, in both.
//!
//! `ARGUS_BENCH_POSTGRES_URL=postgres://… cargo bench -p argus-store --bench leases`
//! (falls back to `ARGUS_TEST_POSTGRES_URL`; `.ci/postgres.sh` starts one).

use std::time::{Duration, Instant};

use argus_store::{AttemptOutcome, NewCase, NewLease, NewRun, StepRow, Store};

const DEVICES: usize = 500;
const ROUNDS: usize = 10;
const STEPS: usize = 5;

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: id.into(),
        project: "bench".into(),
        branch: None,
        commit: None,
        trigger: None,
        selector_json: "{}".into(),
        config_json: "{}".into(),
        retries: 0,
        priority: 1,
        detached: false,
        rerun_of: None,
        testowners: None,
        started_at: 0,
        manifest_json: "{}".into(),
        files: vec![("cases/bench.md".into(), String::new())],
        cases: (0..DEVICES * ROUNDS)
            .map(|i| NewCase {
                case_id: format!("case-{i}"),
                file: "cases/bench.md".into(),
                title: None,
                ordinal: i as i64,
                expected_ms: 1000,
                estimate_source: "default".into(),
                muted: None,
                owner: None,
            })
            .collect(),
    }
}

fn lease(run: &str, case: usize, device: usize) -> NewLease {
    NewLease {
        id: format!("{run}-{case}"),
        run_id: run.into(),
        case_id: format!("case-{case}"),
        attempt: 1,
        try_no: 1,
        device_id: format!("w{}/{}", device / 50, 8000 + device),
        worker_id: format!("w{}", device / 50),
        platform: "ios".into(),
        granted_at: 1,
        deadline: 20_001,
    }
}

fn outcome() -> AttemptOutcome {
    AttemptOutcome {
        result: Some("passed".into()),
        infrastructure: false,
        error: None,
        finished_at: 2,
        ms: 1234,
        run_case_json: Some(r#"{"id":"case","result":"passed","ms":1234}"#.into()),
        steps: (0..STEPS)
            .map(|i| StepRow { step: format!("app.press \"#b{i}\""), status: "passed".into(), ms: 12, error: None })
            .collect(),
        seq: 1,
        next_try: None,
        final_result: None,
        observed: None,
        health: Default::default(),
    }
}

#[derive(Default)]
struct Timing {
    leasing: Duration,
    recording: Duration,
}

async fn one_at_a_time(store: &Store, run: &str, round: usize, timing: &mut Timing) {
    let leases: Vec<NewLease> = (0..DEVICES).map(|d| lease(run, round * DEVICES + d, d)).collect();
    let start = Instant::now();
    for lease in &leases {
        store.grant_lease(lease).await.unwrap();
    }
    timing.leasing += start.elapsed();
    let start = Instant::now();
    for lease in &leases {
        store.finish_attempt(&lease.id, &outcome()).await.unwrap();
    }
    timing.recording += start.elapsed();
}

async fn batched(store: &Store, run: &str, round: usize, timing: &mut Timing) {
    let leases: Vec<NewLease> = (0..DEVICES).map(|d| lease(run, round * DEVICES + d, d)).collect();
    let start = Instant::now();
    assert!(store.grant_leases(&leases).await.unwrap().into_iter().all(|granted| granted));
    timing.leasing += start.elapsed();
    let results: Vec<(String, AttemptOutcome)> = leases.iter().map(|l| (l.id.clone(), outcome())).collect();
    let start = Instant::now();
    assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok));
    timing.recording += start.elapsed();
}

fn per_second(count: usize, spent: Duration) -> f64 {
    count as f64 / spent.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let Some(admin) =
        std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL")).ok()
    else {
        eprintln!("leases: set ARGUS_BENCH_POSTGRES_URL (or ARGUS_TEST_POSTGRES_URL) to a Postgres server's URL");
        std::process::exit(2);
    };
    let name = format!("argus_bench_{}", std::process::id());
    let url = Store::create_database(&admin, &name).await.expect("the bench Postgres answers");
    let store = Store::open(&url).await.unwrap();
    store.create_run(&new_run("single")).await.unwrap();
    store.create_run(&new_run("batch")).await.unwrap();
    let (mut single, mut batch) = (Timing::default(), Timing::default());
    // Rounds alternate, so that both see the tables grow alike.
    for round in 0..ROUNDS {
        one_at_a_time(&store, "single", round, &mut single).await;
        batched(&store, "batch", round, &mut batch).await;
    }
    let attempts = DEVICES * ROUNDS;
    let rows = attempts * (1 + STEPS);
    println!("{attempts} attempts on {DEVICES} devices, {STEPS} steps each, Postgres ({name})");
    println!("{:<38} {:>16} {:>16} {:>9}", "", "per lease/result", "per dispatch", "ratio");
    let (a, b) = (per_second(attempts, single.leasing), per_second(attempts, batch.leasing));
    println!("{:<38} {:>16.0} {:>16.0} {:>8.1}x", "leases granted / s (goal >= 1,000)", a, b, b / a);
    let (a, b) = (per_second(attempts, single.recording), per_second(attempts, batch.recording));
    println!("{:<38} {:>16.0} {:>16.0} {:>8.1}x", "results recorded / s (goal >= 10,000)", a, b, b / a);
    let (a, b) = (per_second(rows, single.recording), per_second(rows, batch.recording));
    println!("{:<38} {:>16.0} {:>16.0} {:>8.1}x", "  rows written / s (result + steps)", a, b, b / a);
    store.close().await;
}
