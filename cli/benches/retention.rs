//! Retention on the real path: `argus prune`'s work (whole runs removed a
//! batch of cases per transaction) on Postgres while another run flows
//! through the real coordinator, gRPC, workers and simulated apps on the same
//! database. It prints, side by side in one run, the flowing run's lease
//! granted → first call p50/p99 without a prune (just before it and just
//! after it) and during one, their ratio (goal ≤ 1.5 at p99), and how fast
//! the prune removed attempts.
//!
//! `cargo bench -p argus --bench retention [-- ATTEMPTS [DEVICES]]`, default
//! `1000000 32`. Postgres from `ARGUS_BENCH_POSTGRES_URL` (or
//! `ARGUS_TEST_POSTGRES_URL`); give it a server with fsync on, as a team runs
//! it (the bench prints the server's `fsync`). The old history is made by
//! the database itself (`generate_series`), the fastest way to a million
//! rows; what is measured is only the prune and the flowing run.

use std::time::{Duration, Instant};

use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_store::Store;
use argus_store::prune;
use hdrhistogram::Histogram;
use sqlx::Connection;
use tokio_util::sync::CancellationToken;

mod support;

use support::{grid, histogram, ms, suite};

// The allocator the `argus` binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Cases per old run: a nightly suite.
const CASES_PER_RUN: i64 = 10_000;

/// A year ago and more: what a prune of 90 days removes.
const OLD_MS: i64 = 1_000_000_000;

/// `attempts` attempts (one step each) in finished, counted runs of 10,000
/// cases that started long ago, written by the database in a few statements.
async fn old_history(url: &str, attempts: i64) {
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    let runs = (attempts + CASES_PER_RUN - 1) / CASES_PER_RUN;
    let statements = [
        format!(
            "INSERT INTO runs (id, project, selector_json, config_json, retries, priority, started_at, finished_at, \
             manifest_json, result, cases, passed, failed, counted, written) \
             SELECT 'old-' || r, 'bench', '{{}}', '{{}}', 0, 1, {OLD_MS} + r::bigint * 86400000, {OLD_MS} + r::bigint * 86400000 + 60000, \
             '{{}}', 'passed', {CASES_PER_RUN}, {CASES_PER_RUN}, 0, 1, 1 FROM generate_series(1, {runs}) AS r"
        ),
        format!(
            "INSERT INTO cases (run_id, case_id, file, ordinal, expected_ms, estimate_source, final_result) \
             SELECT 'old-' || (n / {CASES_PER_RUN} + 1), 'case-' || (n % {CASES_PER_RUN}), 'cases/old.md', \
             n % {CASES_PER_RUN}, 400, 'history', 'passed' FROM generate_series(0, {attempts} - 1) AS n"
        ),
        format!(
            "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, lease_id, device_id, worker_id, platform, \
             result, created_at, started_at, finished_at, ms, run_case_json, seq) \
             SELECT 'old-' || (n / {CASES_PER_RUN} + 1), 'case-' || (n % {CASES_PER_RUN}), 1, 1, 'done', \
             'old-lease-' || n, 'bench0/' || (n % 64), 'bench0', 'ios', 'passed', {OLD_MS}, {OLD_MS}, {OLD_MS} + 400, \
             400, '{{\"id\":\"case-' || (n % {CASES_PER_RUN}) || '\",\"result\":\"passed\",\"ms\":400}}', \
             n % {CASES_PER_RUN} + 1 FROM generate_series(0, {attempts} - 1) AS n"
        ),
        format!(
            "INSERT INTO steps (run_id, case_id, attempt, try_no, idx, step, status, ms) \
             SELECT 'old-' || (n / {CASES_PER_RUN} + 1), 'case-' || (n % {CASES_PER_RUN}), 1, 1, 0, \
             'app.see #title', 'passed', 12 FROM generate_series(0, {attempts} - 1) AS n"
        ),
        "ANALYZE".to_owned(),
    ];
    for sql in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut db).await.unwrap();
    }
    db.close().await.unwrap();
}

/// A flowing run of one-step cases: lease → first call of each attempt
/// that finished while `window` says so, until `stop` or the run's end.
async fn flow(url: &str, cases: usize, window: impl Fn() -> bool, stop: &CancellationToken) -> (Histogram<u64>, usize) {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let request = grpc::SubmitRequest {
        cases: suite(cases, "flow", "  - app.see: \"#title\"\n"),
        project: "bench".into(),
        retries: 0,
        ..Default::default()
    };
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    let (mut first_call, mut seen) = (histogram(), 0);
    loop {
        let update = tokio::select! {
            _ = stop.cancelled() => break,
            update = updates.message() => update.unwrap(),
        };
        match update.and_then(|u| u.kind) {
            Some(run_update::Kind::Finished(finished)) if !finished.infrastructure_failure => {
                seen += 1;
                if window() {
                    first_call.record(finished.lease_to_first_call_us.max(1) as u64).unwrap();
                }
            }
            Some(run_update::Kind::RunFinished(_)) | None => break,
            _ => {}
        }
    }
    let _ = runs.cancel(grpc::CancelRequest { run_id }).await;
    (first_call, seen)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let attempts: i64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let devices: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(32);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let Ok(admin) = std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL"))
        else {
            println!("retention: set ARGUS_BENCH_POSTGRES_URL (or ARGUS_TEST_POSTGRES_URL) to a Postgres server");
            return;
        };
        let name = format!("argus_retention_bench_{}", std::process::id());
        let url = Store::create_database(&admin, &name).await.expect("the bench Postgres answers");
        let store = Store::open(&url).await.unwrap();
        let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
        let fsync: String = sqlx::query_scalar("SHOW fsync").fetch_one(&mut db).await.unwrap();
        db.close().await.unwrap();
        let made = Instant::now();
        old_history(&url, attempts).await;
        println!(
            "Postgres (fsync {fsync}), {attempts} old attempts in runs of {CASES_PER_RUN} cases, made in {:.1} s; {devices} devices",
            made.elapsed().as_secs_f64()
        );
        let cancel = CancellationToken::new();
        let served = grid(&url, devices, &cancel).await;
        let grid_url = served.url.clone();
        // Without a prune: a warm-up run (its figures are not kept: the
        // first leases of a fresh grid are slower), then ~20 s of attempts.
        let quiet = CancellationToken::new();
        flow(&grid_url, devices * 10, || true, &quiet).await;
        let (before, _) = flow(&grid_url, devices * 60, || true, &quiet).await;
        // During one: a run long enough to outlast it, measured while the
        // prune goes on, cancelled once it is done.
        let pruning = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let done = CancellationToken::new();
        let (during, prune) = {
            let flag = pruning.clone();
            let done_flowing = done.clone();
            let grid = grid_url.clone();
            // Run after run (a suite holds 10,000 cases at most) until the
            // prune is done.
            let flowing = async move {
                let (mut during, mut seen) = (histogram(), 0);
                while !done_flowing.is_cancelled() {
                    let window = { let flag = flag.clone(); move || flag.load(std::sync::atomic::Ordering::SeqCst) };
                    let (h, n) = flow(&grid, (devices * 300).min(10_000), window, &done_flowing).await;
                    during.add(&h).unwrap();
                    seen += n;
                }
                (during, seen)
            };
            let prune = async {
                // Into the flow first.
                tokio::time::sleep(Duration::from_secs(2)).await;
                let started = Instant::now();
                let cutoff = prune::cutoff_from_now(Duration::from_secs(90 * 86_400));
                let pruned = prune::prune(&store, None, cutoff).await.unwrap();
                pruning.store(false, std::sync::atomic::Ordering::SeqCst);
                done.cancel();
                (pruned, started.elapsed())
            };
            let ((during, _), prune) = tokio::join!(flowing, prune);
            (during, prune)
        };
        let (pruned, took) = prune;
        // And as long again once it is done: the figures without a prune
        // are those from before and after it.
        let (after, _) = flow(&grid_url, devices * 60, || true, &quiet).await;
        let mut before = before;
        before.add(&after).unwrap();
        assert_eq!(pruned.attempts as i64, attempts, "every old attempt pruned");
        println!(
            "  {:<40} {:>10.1} s   {} runs, {} attempts, {} steps: {:.0} attempts/s",
            "prune (argus prune --older-than 90d)",
            took.as_secs_f64(),
            pruned.runs,
            pruned.attempts,
            pruned.steps,
            pruned.attempts as f64 / took.as_secs_f64()
        );
        println!(
            "  {:<40} {:>10} attempts without a prune (before and after it), {} during it",
            "the flowing run measured",
            before.len(),
            during.len()
        );
        println!(
            "  {:<40} {:>7.2} ms p50 {:>7.2} ms p99   during the prune {:>7.2} ms p50 {:>7.2} ms p99   ratio p99 {:.2} (goal <= 1.5)",
            "lease granted -> first call",
            ms(&before, 0.5),
            ms(&before, 0.99),
            ms(&during, 0.5),
            ms(&during, 0.99),
            ms(&during, 0.99) / ms(&before, 0.99)
        );
        cancel.cancel();
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
}
