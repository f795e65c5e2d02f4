//! The dashboard over a year of history on Postgres. By default 100,000
//! runs and 10,000,000 attempts: nightly runs of a 10,000-case suite on
//! three device kinds (90% of the attempts), and CI runs of a few cases on
//! three projects and five branches for the rest, a thousand devices, a
//! few cases broken for a while and a few flaky ones retried. Every run is
//! written through the store's own write path (`create_run`, then each
//! attempt's lease and result, then `finish_run`), as the coordinator
//! writes it, so the rows, their indexes and the flaky-and-slow summary
//! are those a year of use leaves.
//!
//! Then a coordinator serves that store, and each page and `/api/v1`
//! answer is fetched over HTTP, `--rounds` times (100): the median and
//! p99 beside the goals (100 and 300 ms). Then the same pages once more
//! with every statement's plan (`auto_explain`): first as the planner
//! chooses (a read of a history table that no index bounds, a sequential
//! scan or a whole index read in its order, is a fault once the history
//! is a million attempts), then with sequential scans priced out (such a
//! read left means no index can bound it, at any size: the bench fails).
//!
//! `ARGUS_BENCH_POSTGRES_URL=postgres://… cargo bench -p argus --bench dashboard [-- RUNS ATTEMPTS NIGHTLY_CASES] [--rounds=N] [--fresh]`
//! (falls back to `ARGUS_TEST_POSTGRES_URL`). The history is written once
//! into a database named after its size and kept: the next run of the
//! bench reuses it (`--fresh` writes it again). Writing the full year
//! takes a while (the bench prints its rate).
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argus_grid::time::{iso, now_ms};
use argus_proto::run::{RunCase, RunManifest};
use argus_store::{
    AppHealthRow, AttemptOutcome, DeviceRecord, NewCase, NewLease, NewRun, StepRow, Store, WorkerRecord,
};
use argus_testkit::{Grid, GridOptions};
use sqlx::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing_subscriber::layer::SubscriberExt;

const DAY: i64 = 86_400_000;
/// The device kinds a nightly run covers, one run each, and their platform.
const NIGHTLY_KINDS: [(&str, &str); 3] = [("iphone", "ios"), ("ipad", "ios"), ("pixel", "android")];
const PROJECTS: [&str; 3] = ["shop", "wallet", "maps"];
const BRANCHES: [&str; 5] = ["main", "release", "feature-a", "feature-b", "feature-c"];
const WORKERS: usize = 50;
const SLOTS: usize = 20;
/// Results written per transaction, as a burst of a busy fleet is.
const BURST: usize = 2_048;
/// Runs written at once.
const WRITERS: usize = 3;
/// Tables that do not grow with the history (the fleet, the team's
/// settings, each case's last result and last passes): reading them whole
/// is cheap at any age.
const SMALL_TABLES: [&str; 6] = ["workers", "devices", "mutes", "mute_events", "case_last", "case_windows"];
/// A table with fewer rows than this is read whole at any age.
const FEW_ROWS: i64 = 10_000;
const MEDIAN_GOAL_MS: f64 = 100.0;
const P99_GOAL_MS: f64 = 300.0;

/// How much history, from the command line.
#[derive(Debug, Clone, Copy)]
struct Scale {
    runs: usize,
    attempts: usize,
    nightly_cases: usize,
    rounds: usize,
    fresh: bool,
}

impl Scale {
    fn from_args() -> Self {
        let mut scale = Scale { runs: 100_000, attempts: 10_000_000, nightly_cases: 10_000, rounds: 100, fresh: false };
        let mut numbers = Vec::new();
        for arg in std::env::args().skip(1) {
            if let Some(rounds) = arg.strip_prefix("--rounds=") {
                scale.rounds = rounds.parse().expect("--rounds=N");
            } else if arg == "--fresh" {
                scale.fresh = true;
            } else if let Ok(number) = arg.replace([',', '_'], "").parse::<usize>() {
                numbers.push(number);
            }
            // cargo bench passes `--bench`: anything else is not ours.
        }
        for (slot, number) in [&mut scale.runs, &mut scale.attempts, &mut scale.nightly_cases].into_iter().zip(numbers)
        {
            *slot = number;
        }
        scale
    }

    /// The year this scale makes: nights of three nightly runs holding
    /// 90% of the attempts, and CI runs sharing the rest.
    fn year(&self) -> Year {
        let per_night = NIGHTLY_KINDS.len() * self.nightly_cases;
        let nights = (self.attempts * 9 / 10 / per_night).clamp(2, 365);
        let ci_runs = self.runs.saturating_sub(nights * NIGHTLY_KINDS.len()).max(1);
        let ci_cases = (self.attempts.saturating_sub(nights * per_night) / ci_runs).max(1);
        Year { nights, ci_runs, ci_cases, nightly_cases: self.nightly_cases, ends_at: now_ms() - DAY }
    }

    fn database(&self) -> String {
        format!("argus_history_{}_{}_{}", self.runs, self.attempts, self.nightly_cases)
    }
}

struct Year {
    nights: usize,
    ci_runs: usize,
    ci_cases: usize,
    nightly_cases: usize,
    ends_at: i64,
}

/// One run of the year, in the order they started.
#[derive(Debug, Clone)]
struct RunSpec {
    id: String,
    project: &'static str,
    branch: &'static str,
    trigger: &'static str,
    platform: &'static str,
    kind: &'static str,
    started_at: i64,
    /// Its cases: indexes into the project's suite.
    first_case: usize,
    cases: usize,
    /// Its place among all runs (what breaks and flakes follows it).
    n: usize,
}

impl Year {
    fn runs(&self) -> Vec<RunSpec> {
        let starts_at = self.ends_at - 365 * DAY;
        let mut runs = Vec::with_capacity(self.nights * NIGHTLY_KINDS.len() + self.ci_runs);
        for night in 0..self.nights {
            let at = starts_at + (night as i64 * 365 / self.nights as i64) * DAY + 2 * 3_600_000;
            for (k, (kind, platform)) in NIGHTLY_KINDS.iter().enumerate() {
                runs.push(RunSpec {
                    id: String::new(),
                    project: PROJECTS[0],
                    branch: BRANCHES[0],
                    trigger: "nightly",
                    platform,
                    kind,
                    started_at: at + k as i64 * 1_000,
                    first_case: 0,
                    cases: self.nightly_cases,
                    n: 0,
                });
            }
        }
        let gap = 365 * DAY / self.ci_runs as i64;
        for ci in 0..self.ci_runs {
            let (kind, platform) = NIGHTLY_KINDS[ci % NIGHTLY_KINDS.len()];
            runs.push(RunSpec {
                id: String::new(),
                project: PROJECTS[ci % PROJECTS.len()],
                branch: BRANCHES[(ci / 3) % BRANCHES.len()],
                trigger: "ci",
                platform,
                kind,
                started_at: starts_at + ci as i64 * gap + 60_000,
                first_case: (ci * 37) % self.nightly_cases.max(1),
                cases: self.ci_cases,
                n: 0,
            });
        }
        runs.sort_by_key(|r| r.started_at);
        for (n, run) in runs.iter_mut().enumerate() {
            run.n = n;
            run.id = format!("{:012x}", mix(n as u64) & 0xffff_ffff_ffff);
        }
        runs
    }
}

/// A well-spread 64-bit hash (splitmix64): ids and outcomes that look
/// random and come out the same on every run of the bench.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn case_id(index: usize) -> String {
    format!("checkout-{index:05}")
}

/// How an attempt of case `index` in run `n` ends: a few cases are broken
/// for stretches of the year, a few fail one attempt in five and pass on
/// their retry.
fn fails(n: usize, index: usize, attempt: u32) -> bool {
    let broken = index % 1_000 == 7 && (n / 500) % 4 == 1;
    let flaky = index % 97 == 3 && attempt == 1 && mix((n as u64) << 20 | index as u64).is_multiple_of(5);
    broken || flaky
}

/// The devices: `WORKERS` hosts of `SLOTS`, the first 60% macOS hosts with
/// simulators, the rest Linux hosts with emulators.
fn fleet(at: i64) -> (Vec<WorkerRecord>, Vec<DeviceRecord>) {
    let workers: Vec<WorkerRecord> = (0..WORKERS)
        .map(|w| WorkerRecord {
            id: format!("host{w:02}"),
            hostname: format!("host{w:02}.ci.internal"),
            connected: false,
            draining: false,
            last_seen: at,
        })
        .collect();
    let devices = (0..WORKERS * SLOTS)
        .map(|d| {
            let (worker, slot) = (d / SLOTS, (8100 + d % SLOTS).to_string());
            let platform = if worker < WORKERS * 6 / 10 { "ios" } else { "android" };
            DeviceRecord {
                id: format!("host{worker:02}/{slot}"),
                worker_id: format!("host{worker:02}"),
                slot: slot.clone(),
                platform: platform.into(),
                state: "disconnected".into(),
                device_json: serde_json::json!({ "slot": slot, "platform": platform, "labels": {} }).to_string(),
                updated_at: at,
            }
        })
        .collect();
    (workers, devices)
}

/// The ids of the fleet's devices of `platform`.
fn devices_of(devices: &[DeviceRecord], platform: &str) -> Vec<String> {
    devices.iter().filter(|d| d.platform == platform).map(|d| d.id.clone()).collect()
}

/// Writes one run as the coordinator does: created with its cases, each
/// attempt leased then finished in bursts, a failure retried once, ended.
/// Answers how many attempts it wrote.
async fn write_run(store: &Store, run: &RunSpec, devices: &[String]) -> usize {
    let file_of = |index: usize| format!("cases/area{:03}.md", index / 100);
    let indexes: Vec<usize> = (0..run.cases).map(|k| (run.first_case + k) % 100_000).collect();
    let manifest = RunManifest { platform: Some(run.platform.into()), ..RunManifest::started(iso(run.started_at)) };
    let mut files: Vec<String> = indexes.iter().map(|i| file_of(*i)).collect();
    files.dedup();
    let files: Vec<(String, String)> = files
        .into_iter()
        .map(|file| {
            let text = format!("---\nid: {file}\n---\nsteps:\n  - app.see: \"#title\"\n");
            (file, text)
        })
        .collect();
    store
        .create_run(&NewRun {
            id: run.id.clone(),
            project: run.project.into(),
            branch: Some(run.branch.into()),
            commit: Some(format!("{:040x}", u128::from(mix(run.n as u64 ^ 0xc0ffee)))),
            trigger: Some(run.trigger.into()),
            selector_json: serde_json::json!({ "platform": run.platform, "labels": { "kind": run.kind } }).to_string(),
            config_json: "{}".into(),
            retries: 1,
            priority: 1,
            detached: run.trigger == "nightly",
            started_at: run.started_at,
            manifest_json: serde_json::to_string(&manifest).unwrap(),
            files,
            cases: indexes
                .iter()
                .enumerate()
                .map(|(ordinal, index)| NewCase {
                    case_id: case_id(*index),
                    file: file_of(*index),
                    title: None,
                    ordinal: ordinal as i64,
                    expected_ms: 2_000,
                    estimate_source: "history".into(),
                    muted: None,
                    owner: None,
                })
                .collect(),
            rerun_of: None,
            testowners: None,
        })
        .await
        .unwrap();
    let mut lines: Vec<RunCase> = Vec::with_capacity(run.cases);
    let mut seq = 0i64;
    let mut finished_at = run.started_at;
    // First attempts, then the retries of those that failed.
    let mut tries: Vec<(usize, u32)> = indexes.iter().map(|i| (*i, 1)).collect();
    while !tries.is_empty() {
        let mut retries = Vec::new();
        for (round, burst) in tries.chunks(BURST).enumerate() {
            let at = run.started_at + (seq / devices.len() as i64) * 2_500 + round as i64;
            let leases: Vec<NewLease> = burst
                .iter()
                .enumerate()
                .map(|(k, (index, attempt))| NewLease {
                    id: format!("{:016x}{:016x}", mix(run.n as u64), mix((*index as u64) << 8 | u64::from(*attempt))),
                    run_id: run.id.clone(),
                    case_id: case_id(*index),
                    attempt: *attempt,
                    try_no: 1,
                    device_id: devices[(run.n + k + *attempt as usize) % devices.len()].clone(),
                    worker_id: devices[(run.n + k + *attempt as usize) % devices.len()]
                        .split('/')
                        .next()
                        .unwrap()
                        .into(),
                    platform: run.platform.into(),
                    granted_at: at,
                    deadline: at + 600_000,
                })
                .collect();
            assert!(store.grant_leases(&leases).await.unwrap().iter().all(|g| *g), "{}", run.id);
            let results: Vec<(String, AttemptOutcome)> = leases
                .iter()
                .zip(burst)
                .map(|(lease, (index, attempt))| {
                    seq += 1;
                    let failed = fails(run.n, *index, *attempt);
                    let ms = 800 + (mix(seq as u64 ^ run.n as u64) % 3_000) as i64;
                    finished_at = finished_at.max(at + ms);
                    let error = failed.then(|| "app.see: no element matches #pay within 5000 ms".to_owned());
                    let status = if failed { "failed" } else { "passed" };
                    let line: RunCase = serde_json::from_value(serde_json::json!({
                        "id": case_id(*index), "file": file_of(*index), "attempt": attempt, "result": status,
                        "startedAt": iso(at), "ms": ms,
                        "steps": [{ "step": "app.see #title", "status": status, "ms": ms - 40, "error": error }],
                    }))
                    .unwrap();
                    let retried = failed && *attempt == 1;
                    if retried {
                        retries.push((*index, 2));
                    }
                    let outcome = AttemptOutcome {
                        result: Some(status.into()),
                        infrastructure: false,
                        error: error.clone(),
                        finished_at: at + ms,
                        ms,
                        run_case_json: Some(line.to_line()),
                        steps: vec![StepRow {
                            step: "app.see #title".into(),
                            status: status.into(),
                            ms: ms - 40,
                            error,
                        }],
                        seq,
                        next_try: retried.then_some((2, 1)),
                        final_result: (!retried).then(|| status.to_owned()),
                        observed: None,
                        health: AppHealthRow {
                            heap_start_kb: Some(80_000 + (seq % 500)),
                            heap_end_kb: Some(81_000 + (seq % 700)),
                            rss_start_kb: Some(210_000),
                            rss_end_kb: Some(212_000 + (seq % 900)),
                            render_commits: Some(12),
                            render_us: Some(9_000 + (seq % 4_000)),
                        },
                    };
                    lines.push(line);
                    (lease.id.clone(), outcome)
                })
                .collect();
            assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok), "{}", run.id);
        }
        tries = retries;
    }
    let manifest =
        RunManifest { finished_at: Some(iso(finished_at)), totals: Some(argus_proto::run::totals(&lines)), ..manifest };
    store.finish_run(&run.id, finished_at, &serde_json::to_string(&manifest).unwrap()).await.unwrap();
    lines.len()
}

/// Writes the whole year, `WRITERS` runs at a time, printing its rate.
async fn write_year(store: &Store, runs: Arc<Vec<RunSpec>>) {
    let (workers, devices) = fleet(now_ms());
    for worker in &workers {
        store.upsert_worker(worker).await.unwrap();
    }
    store.upsert_devices(&devices).await.unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let written = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let (ios, android) = (devices_of(&devices, "ios"), devices_of(&devices, "android"));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (store, runs, next, written) = (store.clone(), runs.clone(), next.clone(), written.clone());
            let (ios, android) = (ios.clone(), android.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(n) else { break };
                    let attempts = write_run(&store, run, if run.platform == "ios" { &ios } else { &android }).await;
                    let before = written.fetch_add(attempts, Ordering::Relaxed);
                    let tenth = |count: usize| count * 10 / runs.len();
                    if tenth(n + 1) > tenth(n) {
                        let elapsed = started.elapsed().as_secs_f64();
                        println!(
                            "  {:>3}%: {} runs, {} attempts in {elapsed:.0} s ({:.0} attempts/s)",
                            (n + 1) * 100 / runs.len(),
                            n + 1,
                            before + attempts,
                            (before + attempts) as f64 / elapsed
                        );
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
}

/// The history database for this scale: reused when a previous run of the
/// bench wrote it whole, else written now. Its URL.
async fn history(admin: &str, scale: &Scale, runs: &Arc<Vec<RunSpec>>) -> String {
    let name = scale.database();
    let mut admin_connection = sqlx::PgConnection::connect(admin).await.expect("the bench Postgres answers");
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut admin_connection)
        .await
        .unwrap();
    if exists && !scale.fresh {
        let url = Store::database_url_on(admin, &name);
        let store = Store::open(&url).await.unwrap();
        let ended: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE finished_at IS NOT NULL")
            .fetch_one(&mut sqlx::PgConnection::connect(&url).await.unwrap())
            .await
            .unwrap();
        if ended as usize == runs.len() {
            println!("history: reusing {name} ({ended} runs; --fresh writes it again)");
            follow_up_all(&store).await;
            store.close().await;
            return url;
        }
        store.close().await;
        println!("history: {name} holds {ended} of {} runs: writing it again", runs.len());
    }
    if exists {
        // Built from the bench's own constants and numbers.
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
            .execute(&mut admin_connection)
            .await
            .unwrap();
    }
    let url = Store::create_database(admin, &name).await.unwrap();
    let store = Store::open(&url).await.unwrap();
    let attempts: usize = runs.iter().map(|r| r.cases).sum();
    println!("history: writing {} runs, {attempts}+ attempts into {name} through the store", runs.len());
    let started = Instant::now();
    write_year(&store, runs.clone()).await;
    println!("history: written in {:.0} s", started.elapsed().as_secs_f64());
    let counting = Instant::now();
    store.count_ended_runs().await.unwrap();
    println!("history: counted into the flaky-and-slow summary in {:.1} s", counting.elapsed().as_secs_f64());
    follow_up_all(&store).await;
    store.close().await;
    // As autovacuum would have by then, over a year.
    sqlx::query("VACUUM ANALYZE").execute(&mut sqlx::PgConnection::connect(&url).await.unwrap()).await.unwrap();
    url
}

/// Follows up every ended run (its webhooks' events, the mutes its passes
/// lift), as the coordinator does within a second of each run's end: a
/// coordinator that started on a year's backlog would spend the
/// measurement on it.
async fn follow_up_all(store: &Store) {
    let started = Instant::now();
    let mut followed = 0;
    loop {
        let policy = argus_history::follow_up::FollowUp::default();
        match argus_history::follow_up::follow_up(store, &policy, 1_000).await.unwrap() {
            0 => break,
            n => followed += n,
        }
    }
    if followed > 0 {
        println!("history: {followed} runs followed up in {:.1} s", started.elapsed().as_secs_f64());
    }
}

/// The same database, each session logging every statement's plan to the
/// client as a notice; `indexable` prices sequential scans out.
fn explaining(url: &str, indexable: bool) -> String {
    let mut options = String::from(
        "-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 -c auto_explain.log_level=notice",
    );
    if indexable {
        options.push_str(" -c enable_seqscan=off");
    }
    let encoded: String = options.replace(' ', "%20").replace('=', "%3D");
    format!("{url}{}options={encoded}", if url.contains('?') { "&" } else { "?" })
}

/// The plans Postgres sent as notices (`sqlx::postgres::notice` events).
#[derive(Clone, Default)]
struct Notices(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Notices {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    self.0 = value.to_owned();
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        if message.0.contains("Query Text:") {
            self.0.lock().unwrap().push(message.0);
        }
    }
}

impl Notices {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The reads of a history table in a plan that no index bounds: a
/// sequential scan, or an index scan with no condition on the index (the
/// whole index read in its order) outside a `LIMIT`. Each with the
/// statement's first line.
fn unbounded_reads(plan: &str, partial: &[String], few_rows: &[String]) -> Vec<(String, String)> {
    let query = plan
        .split("Query Text:")
        .nth(1)
        .map(|q| q.trim().lines().next().unwrap_or("").chars().take(120).collect::<String>())
        .unwrap_or_default();
    let history = |table: &str| !SMALL_TABLES.contains(&table) && !few_rows.iter().any(|t| t == table);
    let lines: Vec<&str> = plan.lines().collect();
    let limited = lines.iter().any(|l| l.contains("Limit  ("));
    let mut found = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if let Some(table) = line.split("Seq Scan on ").nth(1).and_then(|t| t.split_whitespace().next()) {
            if history(table) {
                found.push((format!("Seq Scan on {table}"), query.clone()));
            }
            continue;
        }
        let Some(scan) = line.split("Index Scan using ").nth(1).or_else(|| line.split("Index Only Scan using ").nth(1))
        else {
            continue;
        };
        let mut words = scan.split_whitespace();
        let (Some(index), Some("on"), Some(table)) = (words.next(), words.next(), words.next()) else { continue };
        let bounded = lines[at + 1..].iter().take_while(|l| !l.contains("->")).any(|l| l.contains("Index Cond:"));
        // A partial index holds only the rows its predicate keeps.
        let partial = partial.iter().any(|p| p == index);
        if history(table) && !bounded && !limited && !partial {
            found.push((format!("all of index {index} on {table}"), query.clone()));
        }
    }
    found
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

/// A coordinator serving `url`'s store, once its dashboard answers.
async fn coordinator(url: &str) -> Grid {
    let options = GridOptions { database: Some(url.to_owned()), http: true, quiet: true, ..GridOptions::default() };
    let grid = Grid::serve(options).await;
    let addr = grid.http();
    // Serving once the dashboard answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_err() || get(addr, "/healthz").await.0 != 200 {
        assert!(Instant::now() < deadline, "the coordinator never served its dashboard");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    grid
}

async fn stop(grid: Grid) {
    grid.shut_down().await;
}

/// The pages a team opens, over this year's runs.
fn pages(runs: &[RunSpec]) -> Vec<(&'static str, String)> {
    let nightly: Vec<&RunSpec> = runs.iter().filter(|r| r.trigger == "nightly" && r.kind == "iphone").collect();
    let (last, before) = (nightly[nightly.len() - 1], nightly[nightly.len() - 2]);
    let flaky = case_id(3);
    vec![
        ("runs list", "/".to_owned()),
        ("runs list, filtered", "/?project=shop&branch=main&result=failed".to_owned()),
        ("runs list, page 50", "/?page=50".to_owned()),
        ("runs API", "/api/v1/runs".to_owned()),
        ("nightly run page", format!("/runs/{}", last.id)),
        ("nightly run API", format!("/api/v1/runs/{}", last.id)),
        ("case page", format!("/cases/{flaky}?project=shop")),
        ("case API", format!("/api/v1/cases/{flaky}?project=shop")),
        ("flaky page (14 days)", "/flaky?project=shop&days=14".to_owned()),
        ("flaky API (14 days)", "/api/v1/flaky?project=shop".to_owned()),
        ("flaky page (90 days)", "/flaky?project=shop&days=90".to_owned()),
        ("fleet page", "/fleet".to_owned()),
        ("fleet API", "/api/v1/fleet".to_owned()),
        ("compare page", format!("/runs/{}/compare/{}", before.id, last.id)),
        ("compare API", format!("/api/v1/runs/{}/compare/{}", before.id, last.id)),
    ]
}

#[tokio::main]
async fn main() {
    let Some(admin) =
        std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL")).ok()
    else {
        eprintln!("dashboard: set ARGUS_BENCH_POSTGRES_URL (or ARGUS_TEST_POSTGRES_URL) to a Postgres server's URL");
        std::process::exit(2);
    };
    let notices = Notices::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::filter::Targets::new().with_target("sqlx::postgres::notice", tracing::Level::INFO),
            )
            .with(notices.clone()),
    )
    .unwrap();
    let scale = Scale::from_args();
    let year = scale.year();
    let runs = Arc::new(year.runs());
    let attempts: usize = runs.iter().map(|r| r.cases).sum();
    println!(
        "a year: {} nights of {} nightly runs of {} cases, {} CI runs of {} cases: {} runs, {attempts} first attempts",
        year.nights,
        NIGHTLY_KINDS.len(),
        year.nightly_cases,
        year.ci_runs,
        year.ci_cases,
        runs.len()
    );
    let url = history(&admin, &scale, &runs).await;
    let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, n_live_tup FROM pg_stat_user_tables WHERE relname IN ('runs', 'attempts', 'steps', 'cases') \
         ORDER BY relname",
    )
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let size: String = sqlx::query_scalar("SELECT pg_size_pretty(pg_database_size(current_database()))")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let counted = rows.iter().map(|(table, rows)| format!("{table} {rows}")).collect::<Vec<_>>().join(", ");
    println!("history: {counted} rows; {size} on disk");

    let partial: Vec<String> =
        sqlx::query_scalar("SELECT indexrelid::regclass::text FROM pg_index WHERE indpred IS NOT NULL")
            .fetch_all(&mut connection)
            .await
            .unwrap();
    // Tables this history leaves (nearly) empty, such as the observations
    // of apps that record none: the planner rightly reads them whole.
    let few_rows: Vec<String> =
        sqlx::query_scalar("SELECT relname::text FROM pg_stat_user_tables WHERE n_live_tup < $1")
            .bind(FEW_ROWS)
            .fetch_all(&mut connection)
            .await
            .unwrap();
    let pages = pages(&runs);
    let served = coordinator(&url).await;
    let addr = served.http();
    println!();
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9}  {}",
        "page",
        "median ms",
        "p99 ms",
        "goal",
        "bytes",
        format_args!("({} rounds)", scale.rounds)
    );
    let mut missed = Vec::new();
    for (label, path) in &pages {
        let (status, bytes) = get(addr, path).await;
        assert_eq!(status, 200, "{path}");
        let mut times: Vec<f64> = Vec::with_capacity(scale.rounds);
        for _ in 0..scale.rounds.max(1) {
            let started = Instant::now();
            get(addr, path).await;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let p99 = times[((times.len() * 99).div_ceil(100)).saturating_sub(1)];
        let met = median < MEDIAN_GOAL_MS && p99 < P99_GOAL_MS;
        if !met {
            missed.push(*label);
        }
        println!(
            "{label:<22} {median:>9.1} {p99:>9.1} {:>9} {bytes:>9}  {}",
            format!("{MEDIAN_GOAL_MS:.0}/{P99_GOAL_MS:.0}"),
            if met { "✓" } else { "✗" }
        );
    }
    stop(served).await;
    println!(
        "{} of {} pages within the goals (median < {MEDIAN_GOAL_MS:.0} ms, p99 < {P99_GOAL_MS:.0} ms){}",
        pages.len() - missed.len(),
        pages.len(),
        if missed.is_empty() { String::new() } else { format!("; not: {}", missed.join(", ")) }
    );

    // The plans: as the planner chooses, then with sequential scans priced
    // out. Statements of the coordinator's own loops (the follow-up, the
    // sweep) that run meanwhile are checked too.
    let big_history = attempts >= 1_000_000;
    let mut unindexable = Vec::new();
    for indexable in [false, true] {
        let served = coordinator(&explaining(&url, indexable)).await;
        notices.take();
        let mut report = String::new();
        let mut statements = 0;
        for (label, path) in &pages {
            get(served.http(), path).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let plans = notices.take();
            statements += plans.len();
            for (read, query) in plans.iter().flat_map(|p| unbounded_reads(p, &partial, &few_rows)) {
                let _ = writeln!(report, "  {label}: {read}: {query}");
                if indexable {
                    unindexable.push(format!("{label}: {read}"));
                }
            }
        }
        stop(served).await;
        let pass = if indexable { "with sequential scans priced out" } else { "as the planner chooses" };
        if report.is_empty() {
            println!("plans {pass}: {statements} statements, each read of a history table bounded by an index");
        } else {
            println!("plans {pass}: {statements} statements; reads of a history table no index bounds:\n{report}");
            if !indexable && big_history {
                unindexable.push(format!("the planner reads a history table of {attempts}+ attempts unbounded"));
            }
        }
    }
    if !unindexable.is_empty() {
        eprintln!("dashboard: statements no index serves: {}", unindexable.join("; "));
        std::process::exit(1);
    }
}
