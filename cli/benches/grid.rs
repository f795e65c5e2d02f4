//! The grid on the real path, at scale: the real coordinator and its store,
//! real gRPC on loopback, real workers (one per 50 devices) and simulated
//! apps (in this process, so that hundreds of them do not each cost a
//! process on a small machine). For each store and fleet size it prints:
//!
//! - one-step cases (`app.see`): leases and results per second through the
//!   grid, beside what the store alone sustains for the same writes in the
//!   same run (grant every lease in one transaction, record every result in
//!   another), and their ratio; the most the devices could do (each
//!   attempt's reset app settles for 300 ms first) and the grid's share of
//!   it; the submit time; lease granted → first call p50/p99;
//! - cases of ~0.4 s: makespan ÷ lower bound, and the gap between one
//!   attempt ending and the next starting on the same device, p50/p99;
//! - the process's CPU time and peak RSS (coordinator, workers and apps
//!   together);
//! - what recording every step costs: the one-step results per second and
//!   the same-device gap p50 and p99 of grids whose slots record (the
//!   default) and do not (`observe = false`), five rounds of two fresh
//!   grids, which goes first alternating: each round, their medians and
//!   ratio (goal ≥ 0.95);
//! - with `--nightly`, instead: what the records weigh, two nights of a
//!   10,000-case suite (the shop's login, nine steps, and in 5% of cases a
//!   tenth that fails) through the grid, the stored bytes per step, per
//!   attempt and per night, before and after the records of passing
//!   attempts that are no baseline age out, and what a night adds for good.
//!
//! - with `--webhooks`, instead: what telling webhooks costs, the same
//!   comparison between grids with four webhooks (each format at a receiver
//!   that takes 2 s to answer, and one where nothing listens) and none,
//!   on suites where one case in twenty fails (a `case.failing` each).
//! - with `--live`, instead: what the live view costs, the same comparison
//!   between grids with the fleet page open (its script's reads of the
//!   screens every 500 ms and of the fleet every second) and closed, and
//!   the screens, bytes and extra screen reads per device per second.
//!
//! `cargo bench -p argus --bench grid [-- DEVICES[,DEVICES…] [CASES]
//! [--records] [--webhooks] [--live] [--nightly[=CASES]]]`, default `64 1000`;
//! `--records` measures the records' cost alone, `--webhooks` the
//! webhooks', `--nightly` the records' weight alone (10,000 cases, on
//! Postgres when there is one).
//! Postgres from `ARGUS_BENCH_POSTGRES_URL` (or `ARGUS_TEST_POSTGRES_URL`);
//! give it a server with fsync on, as a team runs it. SQLite always.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_proto::run::RunCase;
use argus_store::{AttemptOutcome, Store};
use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

mod support;

use support::{
    MachineCpu, counter, free_port, grid, grid_options, grid_with, histogram, http_get, leased_run, ms, passed,
    store_alone, suite,
};

// The allocator the `argus` binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// CPU seconds this process has used, and its peak RSS in MiB (Linux).
fn usage() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    (cpu, peak_kib / 1024.0)
}

struct Measured {
    submit: Duration,
    wall: Duration,
    lines: Vec<RunCase>,
    first_call: Histogram<u64>,
}

/// Submits and watches a run to its end.
async fn run(url: &str, cases: Vec<grpc::CaseFile>, expected: usize) -> Measured {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let request = grpc::SubmitRequest { cases, project: "bench".into(), retries: 0, ..Default::default() };
    let started = Instant::now();
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let submit = started.elapsed();
    let mut updates = runs.watch(grpc::WatchRequest { run_id, after_seq: 0 }).await.unwrap().into_inner();
    let (mut lines, mut first_call) = (Vec::with_capacity(expected), histogram());
    while let Some(update) = updates.message().await.unwrap() {
        match update.kind {
            Some(run_update::Kind::Finished(finished)) if !finished.infrastructure_failure => {
                first_call.record(finished.lease_to_first_call_us.max(1) as u64).unwrap();
                let mut line: RunCase = serde_json::from_str(&finished.run_case_json).unwrap();
                line.device = finished.device.as_ref().map(argus_proto::run::RunDevice::from);
                lines.push(line);
            }
            Some(run_update::Kind::RunFinished(_)) => break,
            _ => {}
        }
    }
    assert_eq!(lines.len(), expected, "every case finished once");
    Measured { submit, wall: started.elapsed(), lines, first_call }
}

/// A 10,000-case suite submitted while another run's leases flow: how long
/// the submit takes, and how many results the other run got while it was
/// submitted, beside how many it got in as long just before (a submit that
/// held the owner task up would show as fewer).
async fn submit_under_load(url: &str, devices: usize) -> (Duration, usize, usize) {
    let one_step = "  - app.see: \"#title\"\n";
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let flowing = grpc::SubmitRequest {
        cases: suite(devices * 8, "flow", one_step),
        project: "bench".into(),
        ..Default::default()
    };
    let flow_id = runs.submit(flowing).await.unwrap().into_inner().run_id;
    let mut updates = runs.watch(grpc::WatchRequest { run_id: flow_id, after_seq: 0 }).await.unwrap().into_inner();
    let results = tokio::spawn(async move {
        let mut at = Vec::new();
        while let Ok(Some(update)) = updates.message().await {
            match update.kind {
                Some(run_update::Kind::Finished(_)) => at.push(Instant::now()),
                Some(run_update::Kind::RunFinished(_)) => break,
                _ => {}
            }
        }
        at
    });
    // Well into the flow, then the big suite.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let big =
        grpc::SubmitRequest { cases: suite(10_000, "big", one_step), project: "bench".into(), ..Default::default() };
    let started = Instant::now();
    let big_id = runs.submit(big).await.unwrap().into_inner().run_id;
    let submit = started.elapsed();
    runs.cancel(grpc::CancelRequest { run_id: big_id }).await.unwrap();
    let at = results.await.unwrap();
    let during = at.iter().filter(|t| **t >= started && **t < started + submit).count();
    let before = at.iter().filter(|t| **t < started && **t >= started - submit).count();
    (submit, during, before)
}

/// The store's share of the records' cost: `bursts` bursts of eight
/// one-step results written as the owner task writes a burst, every other
/// one carrying step records of `body` bytes each: each kind's p50 and p99.
async fn burst_cost(database: &str, bursts: usize, body: usize) -> [(f64, f64); 2] {
    const BURST: usize = 8;
    let store = Store::open(database).await.unwrap();
    let leases = leased_run(&store, "bursts", bursts * BURST, true).await;
    let (mut with, mut without) = (histogram(), histogram());
    for (n, chunk) in leases.chunks(BURST).enumerate() {
        let records = n % 2 == 1;
        let results: Vec<(String, AttemptOutcome)> = chunk
            .iter()
            .map(|l| {
                let observed = records.then(|| argus_store::Observed {
                    project: "bench".into(),
                    branch: "main".into(),
                    commit: "abc".into(),
                    platform: "ios".into(),
                    device_id: l.device_id.clone(),
                    worker_id: "w".into(),
                    body: vec![7; body],
                });
                (l.id.clone(), passed(n as i64 + 1, observed))
            })
            .collect();
        let started = Instant::now();
        assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok));
        let took = started.elapsed().as_micros().max(1) as u64;
        if records { with.record(took).unwrap() } else { without.record(took).unwrap() }
    }
    store.close().await;
    [(ms(&with, 0.5), ms(&with, 0.99)), (ms(&without, 0.5), ms(&without, 0.99))]
}

/// How long an attempt held its device: the case's own `ms` (lynkeus',
/// its steps) and the reset, hook and settle before it (`prepareMs`).
fn held_ms(line: &RunCase) -> u64 {
    line.ms + line.extra.get(argus_cases::runner::PREPARE_MS).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// Per device, from one attempt's end to the next one's start (its reset).
fn same_device_gaps(lines: &[RunCase]) -> Histogram<u64> {
    let mut per_device: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for line in lines {
        let device = line.device.as_ref().map(|d| d.id.clone()).unwrap_or_default();
        let steps = chrono::DateTime::parse_from_rfc3339(&line.started_at).unwrap().timestamp_micros();
        let began = steps - (held_ms(line) - line.ms) as i64 * 1000;
        per_device.entry(device).or_default().push((began, steps + line.ms as i64 * 1000));
    }
    let mut gaps = histogram();
    for attempts in per_device.values_mut() {
        attempts.sort_unstable();
        for pair in attempts.windows(2) {
            gaps.record((pair[1].0 - pair[0].1).max(1) as u64).unwrap();
        }
    }
    gaps
}

/// The steps of a one-step case, and of a ~0.4 s one.
const ONE_STEP: &str = "  - app.see: \"#title\"\n";
const TIMED: &str = "  - app.see: \"#title\"\n  - app.wait: 400\n";

async fn bench(store: &str, database: &str, devices: usize, cases: usize) {
    let cancel = CancellationToken::new();
    let (cpu_before, _) = usage();
    let served = grid(database, devices, &cancel).await;
    let url = served.url.clone();
    // Throughput: one-step cases, ten per device at least.
    let quick = cases.max(devices * 10);
    let (machine, (cpu_quick, _)) = (MachineCpu::now(), usage());
    let measured = run(&url, suite(quick, "see", ONE_STEP), quick).await;
    let (busy, cpu_per_attempt) = (machine.busy_since(), (usage().0 - cpu_quick) / quick as f64);
    let rate = quick as f64 / measured.wall.as_secs_f64();
    let (leases_alone, results_alone) = store_alone(database, quick, quick).await;
    println!("{store}, {devices} devices, {quick} one-step cases:");
    println!(
        "  {:<46} {:>10.0}   store alone {:>8.0}   grid/store {:>5.2}",
        "leases granted / s",
        rate,
        leases_alone,
        rate / leases_alone
    );
    println!(
        "  {:<46} {:>10.0}   store alone {:>8.0}   grid/store {:>5.2}",
        "results written / s",
        rate,
        results_alone,
        rate / results_alone
    );
    // Each attempt starts on a reset app that must settle (`idle {300,
    // 5000}`, as lynkeus does after a launch), so a device runs a one-step
    // case in no less than its median attempt: the most a fleet can do.
    let mut attempt_ms: Vec<u64> = measured.lines.iter().map(held_ms).collect();
    attempt_ms.sort_unstable();
    let median_ms = attempt_ms.get(attempt_ms.len() / 2).copied().unwrap_or(0).max(1);
    let ceiling = devices as f64 * 1000.0 / median_ms as f64;
    println!(
        "  {:<46} {:>10.0}   (devices / median attempt of {median_ms} ms)   grid/ceiling {:>5.2}",
        "device-bound ceiling / s",
        ceiling,
        rate / ceiling
    );
    // The apps, their workers and the coordinator share this process: at
    // the ceiling's rate they would need this many cores, beside Postgres.
    println!(
        "  {:<46} {:>10.2}   this process {:.2} ms CPU per attempt: {:.2} cores at the ceiling",
        "the machine's cores busy (both, all processes)",
        busy,
        cpu_per_attempt * 1000.0,
        cpu_per_attempt * ceiling
    );
    println!("  {:<46} {:>10.1} ms", "submit", measured.submit.as_secs_f64() * 1000.0);
    let fc = &measured.first_call;
    println!("  {:<46} {:>10.2} ms p50 {:>8.2} ms p99", "lease granted -> first call", ms(fc, 0.5), ms(fc, 0.99));
    // Makespan: cases of ~0.4 s.
    let timed = run(&url, suite(cases, "wait", TIMED), cases).await;
    let busy_ms: f64 = timed.lines.iter().map(|l| held_ms(l) as f64).sum();
    let longest = timed.lines.iter().map(held_ms).max().unwrap_or(0) as f64;
    let lower = (busy_ms / devices as f64).max(longest);
    let gaps = same_device_gaps(&timed.lines);
    println!("{store}, {devices} devices, {cases} cases of ~0.4 s:");
    println!(
        "  {:<46} {:>10.3}   ({:.2} s / {:.2} s)",
        "makespan / lower bound",
        timed.wall.as_secs_f64() * 1000.0 / lower,
        timed.wall.as_secs_f64(),
        lower / 1000.0
    );
    println!("  {:<46} {:>10.2} ms p50 {:>8.2} ms p99", "same-device gap", ms(&gaps, 0.5), ms(&gaps, 0.99));
    let (submit, during, before) = submit_under_load(&url, devices).await;
    println!("{store}, {devices} devices, a 10,000-case suite submitted while another run's leases flow:");
    println!("  {:<46} {:>10.1} ms", "submit", submit.as_secs_f64() * 1000.0);
    println!("  {:<46} {:>10}   in as long just before {:>6}", "the other run's results meanwhile", during, before);
    let (cpu_after, peak) = usage();
    println!(
        "  {:<46} {:>10.1} s CPU, {:.0} MiB peak RSS",
        "this process (coordinator, workers, apps)",
        cpu_after - cpu_before,
        peak
    );
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Rounds of the comparison with and without step records, each on two
/// fresh grids, which goes first alternating.
const ROUNDS: usize = 5;

/// A grid's one-step results per second, its same-device gap, and this
/// process's CPU time per attempt (coordinator, workers and apps; not the
/// database's).
struct Paced {
    rate: f64,
    gap_mean: f64,
    gap_p50: f64,
    gap_p99: f64,
    cpu_ms: f64,
    gaps: Histogram<u64>,
}

impl Paced {
    /// `results` one-step results in `wall`, the same-device `gaps` of the
    /// timed run after them, and the CPU seconds both took over `attempts`.
    fn of(results: usize, wall: Duration, gaps: Histogram<u64>, cpu_seconds: f64, attempts: usize) -> Self {
        Self {
            rate: results as f64 / wall.as_secs_f64(),
            // The lines' times are whole milliseconds: the mean of many gaps
            // resolves a fraction of one, where a percentile moves by whole ones.
            gap_mean: gaps.mean() / 1000.0,
            gap_p50: ms(&gaps, 0.5),
            gap_p99: ms(&gaps, 0.99),
            cpu_ms: cpu_seconds * 1000.0 / attempts as f64,
            gaps,
        }
    }
}

async fn paced(database: &str, devices: usize, observe: bool, quick: usize, cases: usize) -> Paced {
    let cancel = CancellationToken::new();
    let served = grid_with(database, devices, observe, &cancel).await;
    let url = served.url.clone();
    let (cpu_before, _) = usage();
    let measured = run(&url, suite(quick, "see", ONE_STEP), quick).await;
    let gaps = same_device_gaps(&run(&url, suite(cases, "wait", TIMED), cases).await.lines);
    let (cpu_after, _) = usage();
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    Paced::of(quick, measured.wall, gaps, cpu_after - cpu_before, quick + cases)
}

/// A receiver that takes `delay` to answer each request (200), and counts
/// them: a slow webhook.
async fn slow_receiver(
    delay: Duration,
    cancel: CancellationToken,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((mut stream, _)) = accepted else { continue };
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                let _ = stream.read(&mut buffer).await;
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(delay).await;
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
            });
        }
    });
    (addr, seen)
}

/// Webhooks that want every event, in each format, at `receiver`, and one
/// at an address where nothing listens (tried again and again).
fn webhooks_at(receiver: &str) -> Vec<argus_history::notify::Webhook> {
    use argus_history::notify::{Format, Webhook};
    let hook = |name: &str, url: String, format: Format| Webhook {
        name: name.into(),
        url,
        events: Vec::new(),
        format,
        secret: Some("bench".into()),
        token: Some("token".into()),
        repository: Some("acme/shop".into()),
        projects: Vec::new(),
        owners: Vec::new(),
    };
    vec![
        hook("json", format!("{receiver}/json"), Format::Json),
        hook("slack", format!("{receiver}/slack"), Format::Slack),
        hook("github", receiver.to_owned(), Format::GithubStatus),
        hook("dead", format!("http://127.0.0.1:{}/gone", free_port()), Format::Json),
    ]
}

/// One-step cases of which one in twenty fails: a `case.failing` each.
fn failing_suite(cases: usize) -> Vec<grpc::CaseFile> {
    let mut files = suite(cases - cases / 20, "see", ONE_STEP);
    files.extend(suite(cases / 20, "fail", "  - app.see: { text: Nope, timeoutMs: 50 }\n"));
    files
}

/// What telling webhooks costs: the same suites (one case in twenty
/// failing, so that each run raises a `case.failing` per failure besides
/// its end) on fresh grids with four webhooks configured (each format at a
/// receiver that takes 2 s to answer, and one where nothing listens) and
/// with none, `ROUNDS` times each.
async fn webhooks_cost(store: &str, databases: &[String], devices: usize, cases: usize) {
    let quick = cases.max(devices * 10);
    let receiver_stop = CancellationToken::new();
    let (receiver, seen) = slow_receiver(Duration::from_secs(2), receiver_stop.clone()).await;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        for told in order {
            let cancel = CancellationToken::new();
            let options = argus_coordinator::Options {
                webhooks: if told { webhooks_at(&receiver) } else { Vec::new() },
                ..Default::default()
            };
            let served = grid_options(&databases[round * 2 + usize::from(told)], devices, true, options, &cancel).await;
            let url = served.url.clone();
            let (cpu_before, _) = usage();
            let started = Instant::now();
            let mut runs = RunsClient::connect(url.clone()).await.unwrap();
            let request =
                grpc::SubmitRequest { cases: failing_suite(quick), project: "bench".into(), ..Default::default() };
            let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
            let mut updates = runs.watch(grpc::WatchRequest { run_id, after_seq: 0 }).await.unwrap().into_inner();
            while let Some(update) = updates.message().await.unwrap() {
                if let Some(run_update::Kind::RunFinished(_)) = update.kind {
                    break;
                }
            }
            let wall = started.elapsed();
            // The next run goes while the first one's events are delivered.
            let gaps = same_device_gaps(&run(&url, suite(cases, "wait", TIMED), cases).await.lines);
            let (cpu_after, _) = usage();
            cancel.cancel();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let measured = Paced::of(quick, wall, gaps, cpu_after - cpu_before, quick + cases);
            if told { with.push(measured) } else { without.push(measured) }
        }
    }
    receiver_stop.cancel();
    println!(
        "{store}, {devices} devices, with four webhooks (a receiver that answers in 2 s, one that is gone) and without, {ROUNDS} rounds of fresh grids, medians ({} requests reached the receiver):",
        seen.load(std::sync::atomic::Ordering::Relaxed)
    );
    compare_paced(&with, &without);
}

/// A browser with the fleet page open, as its script reads the grid: the
/// screens every 500 ms and the fleet every second, over HTTP, until
/// `cancel`.
async fn fleet_page(http: std::net::SocketAddr, cancel: CancellationToken) {
    let mut tick = 0u64;
    loop {
        let _ = http_get(http, "/api/v1/fleet/screens").await;
        if tick.is_multiple_of(2) {
            let _ = http_get(http, "/api/v1/fleet").await;
        }
        tick += 1;
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// What the live view sent while a grid ran: screens and bytes from the
/// coordinator's `/metrics`, the workers' extra reads from their metrics
/// (one registry for every worker of this process).
async fn live_sent(http: std::net::SocketAddr) -> [f64; 3] {
    let coordinator = http_get(http, "/metrics").await.1;
    let workers = argus_worker::metrics::render();
    [
        counter(&coordinator, "argus_live_screens_total"),
        counter(&coordinator, "argus_live_screen_bytes_total"),
        counter(&workers, "argus_worker_live_reads_total"),
    ]
}

/// What the live view costs: the same suites on fresh grids with the fleet
/// page open in a "browser" (its script's reads, every 500 ms) and closed,
/// `ROUNDS` times each; and what it sent per device per second while open.
async fn live_cost(store: &str, databases: &[String], devices: usize, cases: usize) {
    let quick = cases.max(devices * 10);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    // Per arm: screens, bytes and extra reads, device-seconds, attempts.
    let mut sent = [[0.0f64; 5]; 2];
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        for open in order {
            let cancel = CancellationToken::new();
            let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let http_addr = http.local_addr().unwrap();
            let options = argus_coordinator::Options { http: Some(http), ..Default::default() };
            let database = &databases[round * 2 + usize::from(open)];
            let served = grid_options(database, devices, true, options, &cancel).await;
            let url = served.url.clone();
            if open {
                tokio::spawn(fleet_page(http_addr, cancel.clone()));
            }
            // The page's first reads tell the workers; both arms wait alike.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let before = live_sent(http_addr).await;
            let started = Instant::now();
            let (cpu_before, _) = usage();
            let measured = run(&url, suite(quick, "see", ONE_STEP), quick).await;
            let gaps = same_device_gaps(&run(&url, suite(cases, "wait", TIMED), cases).await.lines);
            let (cpu_after, _) = usage();
            let seconds = started.elapsed().as_secs_f64();
            let after = live_sent(http_addr).await;
            let arm = &mut sent[usize::from(open)];
            for i in 0..3 {
                arm[i] += after[i] - before[i];
            }
            arm[3] += devices as f64 * seconds;
            arm[4] += (quick + cases) as f64;
            cancel.cancel();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let measured = Paced::of(quick, measured.wall, gaps, cpu_after - cpu_before, quick + cases);
            if open { with.push(measured) } else { without.push(measured) }
        }
    }
    println!(
        "{store}, {devices} devices, the fleet page open (screens read every 500 ms) and closed, {ROUNDS} rounds of fresh grids, medians:"
    );
    for (arm, label) in [(1, "open"), (0, "closed")] {
        let [screens, bytes, reads, device_seconds, attempts] = sent[arm];
        println!(
            "  live view, page {label:<6}: {:.2} screens and {:.0} bytes per device per second; {:.3} extra screen reads per device per second, {:.3} per attempt",
            screens / device_seconds,
            bytes / device_seconds,
            reads / device_seconds,
            reads / attempts
        );
    }
    compare_paced(&with, &without);
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What recording every step costs: the same suites on fresh grids whose
/// slots record (the default) and do not (`observe = false`), `ROUNDS`
/// times each, one `databases` each.
async fn records_cost(store: &str, databases: &[String], devices: usize, cases: usize) {
    let quick = cases.max(devices * 10);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        for observe in order {
            let measured = paced(&databases[round * 2 + usize::from(observe)], devices, observe, quick, cases).await;
            if observe { with.push(measured) } else { without.push(measured) }
        }
    }
    println!(
        "{store}, {devices} devices, recording every step and not (`observe = false`), {ROUNDS} rounds of fresh grids, medians:"
    );
    let [(with_p50, with_p99), (bare_p50, bare_p99)] = burst_cost(&databases[0], 200, 1_300).await;
    println!(
        "  {:<46} {:>8.2} ms p50 {:>6.2} ms p99   without {:.2} ms p50 {:.2} ms p99",
        "the store alone: a burst of 8 results", with_p50, with_p99, bare_p50, bare_p99
    );
    compare_paced(&with, &without);
}

/// Each figure of two sets of rounds, medians and ratio, and every round's
/// gaps pooled.
fn compare_paced(with: &[Paced], without: &[Paced]) {
    type Figure = fn(&Paced) -> f64;
    let rows: [(&str, Figure, &str); 5] = [
        ("results written / s", |p| p.rate, ""),
        ("same-device gap mean", |p| p.gap_mean, " ms"),
        ("same-device gap p50", |p| p.gap_p50, " ms"),
        ("same-device gap p99", |p| p.gap_p99, " ms"),
        ("CPU per attempt (this process)", |p| p.cpu_ms, " ms"),
    ];
    // Every round's gaps in one distribution: a round's own figure moves
    // with the grid it ran on (±30% between fresh grids of one kind).
    let pooled = |runs: &[Paced]| {
        let mut all = histogram();
        for run in runs {
            all.add(&run.gaps).unwrap();
        }
        all
    };
    let (all_with, all_without) = (pooled(with), pooled(without));
    println!(
        "  {:<46} {:>8.2} ms mean {:>5.1} p50 {:>5.1} p99   without {:.2} ms mean {:.1} p50 {:.1} p99   mean with/without {:.2}",
        format!("same-device gap, {} gaps of {ROUNDS} rounds", all_with.len()),
        all_with.mean() / 1000.0,
        ms(&all_with, 0.5),
        ms(&all_with, 0.99),
        all_without.mean() / 1000.0,
        ms(&all_without, 0.5),
        ms(&all_without, 0.99),
        all_with.mean() / all_without.mean()
    );
    for (name, of, unit) in rows {
        let (a, b) = (median(with.iter().map(of).collect()), median(without.iter().map(of).collect()));
        let rounds: Vec<String> = with.iter().zip(without).map(|(w, o)| format!("{:.1}/{:.1}", of(w), of(o))).collect();
        println!(
            "  {:<46} {:>8.1}{unit} without {:>8.1}{unit}   with/without {:>5.2}   (rounds {})",
            name,
            a,
            b,
            a / b,
            rounds.join(", ")
        );
    }
}

/// Two nights of `cases` login cases (nine steps each, with requests and
/// screens) of which one in twenty has a tenth step that fails, on a fresh
/// grid: the bytes their step records take in the store as they are
/// written, once the passing attempts' records that are no baseline have
/// aged out, and what the second night added for good.
async fn records_weight(store: &str, database: &str, devices: usize, cases: usize) {
    let login =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/shop/cases/login.md")).unwrap();
    let steps: String = login
        .split("steps:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| format!("{}\n", l.replace("{{matrix.user}}", "ada")))
        .collect();
    let failing = cases / 20;
    let mut suite_files = suite(cases - failing, "nightly", &steps);
    suite_files.extend(suite(
        failing,
        "broken",
        &format!("{steps}  - app.see: {{ testId: nowhere, timeoutMs: 200 }}\n"),
    ));
    let cancel = CancellationToken::new();
    let served = grid(database, devices, &cancel).await;
    let url = served.url.clone();
    let store_now = Store::open(database).await.unwrap();
    let mut kept = Vec::new();
    for night in 1..=2 {
        let measured = run(&url, suite_files.clone(), cases).await;
        let failed = measured.lines.iter().filter(|l| l.result == argus_proto::run::CaseResult::Failed).count();
        let steps_run: u64 = measured.lines.iter().map(|l| l.steps.len() as u64).sum();
        let before = kept.last().map_or((0, 0), |k: &(i64, i64)| *k);
        let (rows, bytes) = store_now.observation_bytes().await.unwrap();
        let (rows, bytes) = (rows - before.0, bytes - before.1);
        let on_disk = table_bytes(database).await;
        println!(
            "{store}, night {night}: {cases} nine-step cases, {failed} failed, {steps_run} steps, in {:.0} s:",
            measured.wall.as_secs_f64()
        );
        println!(
            "  {:<46} {:>10} rows {:>8.1} MiB   {:>6.0} B/attempt {:>5.0} B/step{}",
            "step records written",
            rows,
            bytes as f64 / 1048576.0,
            bytes as f64 / rows.max(1) as f64,
            bytes as f64 / steps_run.max(1) as f64,
            on_disk.map(|d| format!("   tables {:.1} MiB on disk", d as f64 / 1048576.0)).unwrap_or_default()
        );
        // As the hourly keeper leaves them once the window has passed.
        store_now.prune_observations(i64::MAX, 500).await.unwrap();
        kept.push(store_now.observation_bytes().await.unwrap());
        let (rows, bytes) = kept[kept.len() - 1];
        println!(
            "  {:<46} {:>10} rows {:>8.1} MiB   (one baseline per case, and the failures)",
            "kept past the window (--step-records-days)",
            rows,
            bytes as f64 / 1048576.0
        );
    }
    let grown = (kept[1].0 - kept[0].0, kept[1].1 - kept[0].1);
    println!(
        "  {:<46} {:>10} rows {:>8.1} MiB   (its failures: baselines are replaced)",
        "what a nightly adds for good",
        grown.0,
        grown.1 as f64 / 1048576.0
    );
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    store_now.close().await;
}

/// The step records' tables on disk with their indexes (Postgres).
async fn table_bytes(database: &str) -> Option<i64> {
    use sqlx::Connection;
    if !database.starts_with("postgres") {
        return None;
    }
    let mut db = sqlx::PgConnection::connect(database).await.ok()?;
    sqlx::query_scalar(
        "SELECT CAST(pg_total_relation_size('observations') + pg_total_relation_size('baselines') AS BIGINT)",
    )
    .fetch_one(&mut db)
    .await
    .ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let fleets: Vec<usize> =
        args.first().map(|a| a.split(',').filter_map(|n| n.parse().ok()).collect()).unwrap_or_else(|| vec![64]);
    let cases: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    // `--records`: the cost of step records alone.
    let records_only = std::env::args().any(|a| a == "--records");
    // `--webhooks`: the cost of telling webhooks alone; `--live`: the live
    // view's, the fleet page open against closed.
    let webhooks_only = std::env::args().any(|a| a == "--webhooks");
    let live_only = std::env::args().any(|a| a == "--live");
    // `--nightly[=CASES]`: the weight of a nightly's step records, alone.
    let nightly = std::env::args().find_map(|a| {
        a.strip_prefix("--nightly").map(|n| n.strip_prefix('=').and_then(|n| n.parse().ok()).unwrap_or(10_000))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let postgres =
            std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL")).ok();
        let sqlite = |name: &str, devices: usize| {
            std::env::temp_dir().join(format!("argus-grid-bench-{}-{name}-{devices}.db", std::process::id()))
        };
        if std::env::args().any(|a| a == "--bursts") {
            // The store's share of the records' cost, alone.
            if let Some(admin) = &postgres {
                let name = format!("argus_grid_bench_{}_bursts", std::process::id());
                let url = Store::create_database(admin, &name).await.expect("the bench Postgres answers");
                println!("Postgres, a burst of 8 one-step results (with and without records): {:?}", burst_cost(&url, 500, 1_300).await);
            }
            return;
        }
        if webhooks_only || live_only {
            let tag = if live_only { "live" } else { "told" };
            for devices in fleets.iter().copied() {
                let files: Vec<_> = (0..2 * ROUNDS).map(|n| sqlite(&format!("{tag}{n}"), devices)).collect();
                let urls: Vec<String> = files.iter().map(|f| format!("sqlite:{}", f.display())).collect();
                let mut stores = vec![("SQLite", urls)];
                if let Some(admin) = &postgres {
                    let mut urls = Vec::new();
                    for n in 0..2 * ROUNDS {
                        let name = format!("argus_grid_bench_{}_{devices}_{tag}{n}", std::process::id());
                        urls.push(Store::create_database(admin, &name).await.expect("the bench Postgres answers"));
                    }
                    stores.push(("Postgres", urls));
                }
                for (store, urls) in stores {
                    match live_only {
                        true => live_cost(store, &urls, devices, cases).await,
                        false => webhooks_cost(store, &urls, devices, cases).await,
                    }
                }
                for file in files {
                    let _ = std::fs::remove_file(file);
                }
            }
            return;
        }
        for devices in fleets.iter().copied().filter(|_| nightly.is_none()) {
            let files: Vec<_> = (0..=2 * ROUNDS).map(|n| sqlite(&n.to_string(), devices)).collect();
            let urls: Vec<String> = files.iter().map(|f| format!("sqlite:{}", f.display())).collect();
            if !records_only {
                bench("SQLite", &urls[0], devices, cases).await;
            }
            records_cost("SQLite", &urls[1..], devices, cases).await;
            for file in files {
                let _ = std::fs::remove_file(file);
            }
            match &postgres {
                Some(admin) => {
                    let mut urls = Vec::new();
                    for n in 0..=2 * ROUNDS {
                        let name = format!("argus_grid_bench_{}_{devices}_{n}", std::process::id());
                        urls.push(Store::create_database(admin, &name).await.expect("the bench Postgres answers"));
                    }
                    if !records_only {
                        bench("Postgres", &urls[0], devices, cases).await;
                    }
                    records_cost("Postgres", &urls[1..], devices, cases).await;
                }
                None => println!("Postgres: set ARGUS_BENCH_POSTGRES_URL (or ARGUS_TEST_POSTGRES_URL) to measure it"),
            }
        }
        if let Some(nightly) = nightly {
            let devices = fleets.first().copied().unwrap_or(64);
            match &postgres {
                Some(admin) => {
                    let name = format!("argus_grid_bench_{}_nightly", std::process::id());
                    let db = Store::create_database(admin, &name).await.expect("the bench Postgres answers");
                    records_weight("Postgres", &db, devices, nightly).await;
                }
                None => {
                    let db = sqlite("nightly", devices);
                    records_weight("SQLite", &format!("sqlite:{}", db.display()), devices, nightly).await;
                    let _ = std::fs::remove_file(db);
                }
            }
        }
        println!("goals: makespan/lower bound <= 1.10; same-device gap p99 <= 20 ms and lease -> first call p99 < 10 ms at 64 devices; at 500 devices >= 2,000 leases/s and >= 5,000 results/s, grid/store >= 0.8; submit of 10,000 cases < 1 s");
    });
}
