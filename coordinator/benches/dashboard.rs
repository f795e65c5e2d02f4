//! The dashboard against a realistic history on Postgres: 10,000 runs and
//! 1,000,000 attempts (100 cases a run, 3 projects, 5 branches, a few
//! failures; runs a minute apart over the last week). Each page is fetched over HTTP from a coordinator
//! serving that store, 50 times; the median and p95 are printed beside the
//! 100 ms goal. Indexes carry it, not caches: nothing is cached.
//!
//! `ARGUS_BENCH_POSTGRES_URL=postgres://… cargo bench -p argus-coordinator --bench dashboard`
//! (falls back to `ARGUS_TEST_POSTGRES_URL`). Seeding takes a minute.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::time::{Duration, Instant};

use argus_store::Store;
use sqlx::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const RUNS: i64 = 10_000;
const CASES: i64 = 100;
const ROUNDS: usize = 50;

/// Runs, cases and attempts written by Postgres itself (generate_series):
/// a million rows through the client would take far longer than the bench.
const SEED: &[&str] = &[
    "INSERT INTO runs (id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, priority, \
     started_at, finished_at, manifest_json, platform, result, cases, passed, failed, retried) \
     SELECT 'run' || r, 'project' || (r % 3), 'branch' || (r % 5), md5(r::text), 'ci', '{}', '{}', 1, 1, \
     BASE + r * 60000, BASE + r * 60000 + 300000, '{\"schema\":1}', \
     CASE WHEN r % 2 = 0 THEN 'ios' ELSE 'android' END, CASE WHEN r % 10 = 0 THEN 'failed' ELSE 'passed' END, \
     100, CASE WHEN r % 10 = 0 THEN 99 ELSE 100 END, CASE WHEN r % 10 = 0 THEN 1 ELSE 0 END, 1 \
     FROM generate_series(1, $1) AS r",
    "INSERT INTO cases (run_id, case_id, file, title, ordinal, expected_ms, estimate_source, final_result) \
     SELECT 'run' || r, 'case' || c, 'cases/c' || (c % 10) || '.md', NULL, c, 3000, 'history', 'passed' \
     FROM generate_series(1, $1) AS r, generate_series(1, $2) AS c",
    "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, lease_id, device_id, worker_id, platform, result, \
     infrastructure, error, created_at, started_at, finished_at, ms, run_case_json) \
     SELECT 'run' || r, 'case' || c, 1, 1, 'done', 'lease' || r || '_' || c, 'w' || (c % 4) || '/' || (8000 + c % 16), \
     'w' || (c % 4), CASE WHEN r % 2 = 0 THEN 'ios' ELSE 'android' END, \
     CASE WHEN c = 7 AND r % 10 = 0 THEN 'failed' ELSE 'passed' END, 0, NULL, \
     BASE + r * 60000, BASE + r * 60000 + c * 2000, \
     BASE + r * 60000 + c * 2000 + 1000 + (c * 37 + r) % 2000, 1000 + (c * 37 + r) % 2000, \
     '{\"id\":\"case' || c || '\",\"file\":\"cases/c.md\",\"attempt\":1,\"result\":\"passed\",\"startedAt\":\"2023-11-14T22:13:20.000Z\",\"ms\":1000,\"steps\":[{\"step\":\"app.see #title\",\"status\":\"passed\",\"ms\":12}]}' \
     FROM generate_series(1, $1) AS r, generate_series(1, $2) AS c",
    "ANALYZE",
];

fn argus_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, usize) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: argus\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let head = String::from_utf8_lossy(&response[..response.len().min(20)]).into_owned();
    (head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), response.len())
}

#[tokio::main]
async fn main() {
    let Some(admin) =
        std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL")).ok()
    else {
        eprintln!("dashboard: set ARGUS_BENCH_POSTGRES_URL (or ARGUS_TEST_POSTGRES_URL) to a Postgres server's URL");
        std::process::exit(2);
    };
    let name = format!("argus_dashboard_bench_{}", std::process::id());
    let url = Store::create_database(&admin, &name).await.expect("the bench Postgres answers");
    let store = Store::open(&url).await.unwrap();
    let seeding = Instant::now();
    let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
    for (index, statement) in SEED.iter().enumerate() {
        // Runs a minute apart, the newest a minute ago: two weeks of history.
        let base = argus_now_ms() - (RUNS + 1) * 60_000;
        let statement = statement.replace("BASE", &base.to_string());
        // Built from the constants above and a number.
        let query = sqlx::query(sqlx::AssertSqlSafe(statement));
        let query = match index {
            0 => query.bind(RUNS),
            1 | 2 => query.bind(RUNS).bind(CASES),
            _ => query,
        };
        query.execute(&mut connection).await.unwrap();
    }
    println!("seeded {RUNS} runs and {} attempts in {:.0} s ({name})", RUNS * CASES, seeding.elapsed().as_secs_f64());
    // The runs were written behind the store's back: they are counted into
    // the flaky-and-slow summary as a store that predates it would be.
    let counting = Instant::now();
    store.count_ended_runs().await.unwrap();
    println!("counted them into the flaky-and-slow summary in {:.1} s (once)", counting.elapsed().as_secs_f64());

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = http.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let options = argus_coordinator::Options { http: Some(http), ..Default::default() };
    tokio::spawn(argus_coordinator::serve_with(listener, store, options, cancel.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let pages = [
        ("runs list", "/".to_owned()),
        ("runs list, filtered", "/?project=project1&branch=branch2&result=failed".to_owned()),
        ("runs list, page 50", "/?page=50".to_owned()),
        ("a run (100 cases)", "/runs/run5000".to_owned()),
        ("a case's history", "/cases/case7?project=project1".to_owned()),
        ("flaky and slow (14 days)", "/flaky?project=project1&days=14".to_owned()),
        ("runs API", "/api/v1/runs".to_owned()),
    ];
    println!("{:<28} {:>9} {:>9} {:>9} {:>10}", "page", "median ms", "p95 ms", "goal ms", "goal/median");
    for (label, path) in pages {
        let (status, _) = get(addr, &path).await;
        assert_eq!(status, 200, "{path}");
        let mut times: Vec<f64> = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let started = Instant::now();
            get(addr, &path).await;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let (median, p95) = (times[ROUNDS / 2], times[ROUNDS * 95 / 100]);
        println!("{label:<28} {median:>9.1} {p95:>9.1} {:>9} {:>10}", 100, format!("{:.1}x", 100.0 / median));
    }
    cancel.cancel();
}
