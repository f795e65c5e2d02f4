//! What one coordinator carries, measured apart from the devices: a real
//! `argus coordinator` process on a real store, and stand-in workers in this
//! process that speak the real worker protocol over gRPC (register,
//! heartbeats, a step result per step, the attempt's RunCase) but whose
//! devices answer every lease at once with a well-formed pass: no app, no
//! driver. So what is measured is the coordinator and its store alone.
//!
//! For each fleet size it prints, side by side in one run:
//! - the time from every device joining at once (one run's cases waiting)
//!   to each holding its first lease;
//! - one-step and ten-step cases through the coordinator (lease → result →
//!   next lease), attempts per second from each run's acceptance to its end,
//!   beside the store alone doing the same writes on a database of its own
//!   (in rounds of one fleet's worth, the most a coordinator of that fleet
//!   has in flight: the round's leases in one transaction, their results in
//!   another), and their ratio;
//! - several runs at once, attempts per second;
//! - the coordinator's CPU time per attempt and its resident memory per
//!   device (its own process, from /proc);
//! - lease → device: from the lease's commit (coordinator clock) to the
//!   stand-in holding it, p50/p99;
//! - a big run (`--big`, default the most cases a suite may hold) submitted
//!   while another run's leases flow on every device: its submit time, the
//!   other run's lease rate in the second before and during the submit, and
//!   the big run's attempts per second once the other is cancelled.
//!
//! `cargo bench -p argus --bench capacity [-- DEVICES[,DEVICES…] [CASES]
//! [--workers-per=N] [--runs=N] [--big=N]]`, default `1000,10000 10000`,
//! 50 devices per worker stream up to 100 streams, 4 concurrent runs.
//! Postgres from `ARGUS_BENCH_POSTGRES_URL` (or `ARGUS_TEST_POSTGRES_URL`;
//! give it a server with fsync on, as a team runs it); SQLite without one.
#![allow(clippy::disallowed_methods)] // Benchmarks start their helpers with tokio::spawn.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argus_proto::grpc::{self, coordinator_message, run_update, runs_client::RunsClient, worker_message};
use argus_proto::run::{CaseResult, RunCase, RunStep, StepStatus};
use argus_store::Store;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod support;

use support::{MachineCpu, free_port, histogram, http_get, ms, store_alone, suite};

/// A coordinator process and its gRPC URL.
struct Coordinator {
    child: Child,
    url: String,
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Coordinator {
    async fn start(database: &str) -> Self {
        let (grpc_port, http_port) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_argus"))
            .args(["coordinator", "--listen", &format!("127.0.0.1:{grpc_port}")])
            .args(["--http", &format!("127.0.0.1:{http_port}"), "--database-url", database])
            // `ARGUS_BENCH_LOG=warn,argus_grid=debug` shows where a submit goes.
            .env("RUST_LOG", std::env::var("ARGUS_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the argus binary starts");
        let http: std::net::SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(http, "/healthz").await.0 != 200 {
            assert!(Instant::now() < deadline, "the coordinator did not come up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { child, url: format!("http://127.0.0.1:{grpc_port}") }
    }

    /// CPU seconds the process has used, and its resident memory in MiB.
    fn usage(&self) -> (f64, f64) {
        let pid = self.child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime and stime
        // are the 12th and 13th (ticks of 1/100 s).
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        ((ticks(11) + ticks(12)) / 100.0, rss_kib / 1024.0)
    }
}

/// What the stand-in devices saw: when each first held a lease, and lease
/// → device times.
#[derive(Default)]
struct Seen {
    leased: AtomicUsize,
    first_leases: AtomicUsize,
    lease_to_device: Mutex<Option<Histogram<u64>>>,
}

impl Seen {
    fn record(&self, us: i64) {
        let mut h = self.lease_to_device.lock().unwrap();
        h.get_or_insert_with(histogram).record(us.max(1) as u64).unwrap();
    }

    fn take(&self) -> Histogram<u64> {
        self.lease_to_device.lock().unwrap().take().unwrap_or_else(histogram)
    }
}

const HELLO: &str = r#"{"protocolVersion":1,"platform":"ios","native":false,"commands":[],"app":{"name":"Shop"}}"#;

/// One worker stream of `devices` stand-in devices, until `cancel`; one
/// that does not `answer` holds every lease it is given.
async fn stand_in_worker(
    url: String,
    name: String,
    devices: usize,
    answers: Answers,
    seen: Arc<Seen>,
    cancel: CancellationToken,
) {
    let (tx, rx) = mpsc::channel::<grpc::WorkerMessage>(4 * devices + 16);
    let slots: Vec<grpc::Device> = (0..devices)
        .map(|i| grpc::Device {
            slot: format!("s{i}"),
            port: 20_000 + i as u32,
            platform: "ios".into(),
            state: grpc::DeviceState::Idle as i32,
            hello_json: HELLO.into(),
            ..Default::default()
        })
        .collect();
    let register = grpc::Register {
        worker_id_prefix: name,
        hostname: "stand-in".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        devices: slots,
        ..Default::default()
    };
    let send = |kind| grpc::WorkerMessage { kind: Some(kind) };
    tx.send(send(worker_message::Kind::Register(register))).await.unwrap();
    let mut client = grpc::workers_client::WorkersClient::connect(url).await.unwrap();
    let mut inbound = client.link(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    let mut first = vec![true; devices];
    // First leases held until the release, then answered.
    let mut held: Vec<grpc::Lease> = Vec::new();
    let release = match &answers {
        Answers::Never => None,
        Answers::AfterFirstHeld(release) => Some(release.clone()),
    };
    let mut released = false;
    let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
    loop {
        let message = tokio::select! {
            _ = cancel.cancelled() => return,
            _ = async { release.as_ref().expect("guarded").cancelled().await }, if release.is_some() && !released => {
                released = true;
                for lease in std::mem::take(&mut held) {
                    for message in answer(&lease) {
                        if tx.send(send(message)).await.is_err() {
                            return;
                        }
                    }
                }
                continue;
            }
            _ = heartbeat.tick() => {
                let _ = tx.send(send(worker_message::Kind::Heartbeat(grpc::Heartbeat::default()))).await;
                continue;
            }
            message = inbound.message() => message,
        };
        let Ok(Some(message)) = message else { return };
        match message.kind {
            Some(coordinator_message::Kind::Registered(registered)) => {
                let every = Duration::from_millis(u64::from(registered.heartbeat_ms.max(100)));
                heartbeat = tokio::time::interval(every);
            }
            Some(coordinator_message::Kind::Lease(lease)) => {
                seen.record(now_us() - lease.granted_unix_us);
                seen.leased.fetch_add(1, Ordering::Relaxed);
                let slot: usize = lease.slot.trim_start_matches('s').parse().unwrap_or(0);
                let is_first = std::mem::take(&mut first[slot]);
                if is_first {
                    seen.first_leases.fetch_add(1, Ordering::Relaxed);
                }
                if release.is_none() {
                    continue;
                }
                if is_first && !released {
                    held.push(lease);
                    continue;
                }
                for message in answer(&lease) {
                    if tx.send(send(message)).await.is_err() {
                        return;
                    }
                }
            }
            _ => {}
        }
    }
}

/// When a stand-in answers its leases.
enum Answers {
    /// Never: it holds what it is leased until its stream ends (the seed).
    Never,
    /// Its devices' first leases once the token is cancelled (when every
    /// device of the fleet holds one, so that none is leased a second case
    /// before another joined), every later one at once.
    AfterFirstHeld(CancellationToken),
}

/// A pass of every step of the leased case, at once: a step result each,
/// then the attempt's RunCase, as a worker sends them.
fn answer(lease: &grpc::Lease) -> Vec<worker_message::Kind> {
    let steps = lease.case_source.matches("\n  - ").count().max(1);
    let step = RunStep {
        step: "app.see #title".into(),
        status: StepStatus::Passed,
        ms: 0,
        error: None,
        section: None,
        events: None,
        screenshot: None,
        video_s: None,
        extra: Default::default(),
    };
    let line = RunCase {
        id: lease.case_id.clone(),
        title: None,
        description: None,
        file: lease.case_file.clone(),
        attempt: lease.attempt,
        result: CaseResult::Passed,
        started_at: "2026-12-06T00:00:00.000Z".into(),
        ms: 1,
        steps: vec![step.clone(); steps],
        evidence: None,
        video: None,
        device: None,
        extra: Default::default(),
    };
    let mut messages: Vec<worker_message::Kind> = (0..steps)
        .map(|index| {
            worker_message::Kind::Step(grpc::StepResult {
                lease_id: lease.lease_id.clone(),
                index: index as u32,
                run_step_json: serde_json::to_string(&step).unwrap(),
            })
        })
        .collect();
    messages.push(worker_message::Kind::Attempt(grpc::AttemptResult {
        lease_to_first_call_us: 1,
        ..grpc::AttemptResult::recorded(&lease.lease_id, &line)
    }));
    messages
}

fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Watches a run until it ends, watching again after the last `seq` seen
/// when the coordinator says this watch fell behind (as `argus run` does).
async fn watch_to_end(client: &mut RunsClient<tonic::transport::Channel>, run_id: String) {
    let mut after_seq = 0;
    loop {
        let request = grpc::WatchRequest { run_id: run_id.clone(), after_seq };
        let mut updates = client.watch(request).await.unwrap().into_inner();
        loop {
            match updates.message().await {
                Ok(Some(update)) => {
                    after_seq = after_seq.max(update.seq);
                    if let Some(run_update::Kind::RunFinished(_)) = update.kind {
                        return;
                    }
                }
                Ok(None) => panic!("the watch of {run_id} ended before the run"),
                Err(status) if status.code() == tonic::Code::ResourceExhausted => break,
                Err(status) => panic!("watching {run_id}: {status}"),
            }
        }
    }
}

/// Submits `runs` runs of `cases` cases each at once and waits for all to
/// end: the longest submit, and the time from the first run's acceptance to
/// the last one's end (what flows through the coordinator, lease → result →
/// next lease; the submit is measured on its own).
async fn through(url: &str, runs: usize, cases: usize, steps: &str) -> (Duration, Duration) {
    let mut waiting = Vec::new();
    for n in 0..runs {
        let url = url.to_owned();
        let files = suite(cases, &format!("c{n}_"), steps);
        waiting.push(tokio::spawn(async move {
            let mut client = RunsClient::connect(url).await.unwrap();
            let request = grpc::SubmitRequest { cases: files, project: "capacity".into(), ..Default::default() };
            let submitting = Instant::now();
            let run_id = client.submit(request).await.unwrap().into_inner().run_id;
            let accepted = Instant::now();
            watch_to_end(&mut client, run_id).await;
            (accepted - submitting, accepted, Instant::now())
        }));
    }
    let (mut submit, mut first, mut last) = (Duration::ZERO, None::<Instant>, None::<Instant>);
    for run in waiting {
        let (took, accepted, ended) = run.await.unwrap();
        submit = submit.max(took);
        first = Some(first.map_or(accepted, |f| f.min(accepted)));
        last = Some(last.map_or(ended, |l| l.max(ended)));
    }
    (submit, last.unwrap() - first.unwrap())
}

/// What a big submit costs the runs already going: a run of `others`
/// cases flows on every device; its lease rate is read over the second
/// before the big run is submitted and over the submit itself; once the big
/// run is accepted the other is cancelled, and the big run goes through
/// alone. The submit time, the others' lease rates before and during it,
/// and the big run's wall and coordinator CPU time from acceptance to its
/// end.
async fn big_run(coordinator: &Coordinator, seen: &Seen, cases: usize, others: usize) -> BigRun {
    let mut client = RunsClient::connect(coordinator.url.clone()).await.unwrap();
    let files = suite(others, "bg_", ONE_STEP);
    let request = grpc::SubmitRequest { cases: files, project: "capacity".into(), detach: true, ..Default::default() };
    let background = client.submit(request).await.unwrap().into_inner().run_id;
    let files = suite(cases, "big_", ONE_STEP);
    // Flowing steadily first (at 10,000 devices the first leases of a run
    // take most of a second).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rate = |from: (Instant, usize)| {
        let leased = seen.leased.load(Ordering::Relaxed) - from.1;
        leased as f64 / from.0.elapsed().as_secs_f64()
    };
    let (before, machine, (cpu, _)) =
        ((Instant::now(), seen.leased.load(Ordering::Relaxed)), MachineCpu::now(), coordinator.usage());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (others_before, busy_before) = (rate(before), machine.busy_since());
    let coordinator_before = (coordinator.usage().0 - cpu) / before.0.elapsed().as_secs_f64();
    assert!(others_before > 0.0, "the other run of {others} cases ended before the submit: give it more");
    let request = grpc::SubmitRequest { cases: files, project: "capacity".into(), ..Default::default() };
    let (submitting, machine) = ((Instant::now(), seen.leased.load(Ordering::Relaxed)), MachineCpu::now());
    let (cpu_at_submit, _) = coordinator.usage();
    let run_id = client.submit(request).await.unwrap().into_inner().run_id;
    let (submit, others_during, busy_during) = (submitting.0.elapsed(), rate(submitting), machine.busy_since());
    let (accepted, (cpu, _)) = (Instant::now(), coordinator.usage());
    let coordinator_during = (cpu - cpu_at_submit) / submit.as_secs_f64();
    client.cancel(grpc::CancelRequest { run_id: background }).await.unwrap();
    watch_to_end(&mut client, run_id).await;
    BigRun {
        submit,
        others_before,
        others_during,
        busy_before,
        busy_during,
        coordinator_before,
        coordinator_during,
        wall: accepted.elapsed(),
        cpu: coordinator.usage().0 - cpu,
    }
}

/// What [`big_run`] measured.
struct BigRun {
    submit: Duration,
    /// The other run's leases per second in the second before the submit
    /// and during it.
    others_before: f64,
    others_during: f64,
    /// The share of the machine's cores busy over those two spans.
    busy_before: f64,
    busy_during: f64,
    /// The coordinator's cores busy over those two spans (the other run's
    /// leases and, during, the submit).
    coordinator_before: f64,
    coordinator_during: f64,
    /// The big run from acceptance to its end, and the coordinator's CPU.
    wall: Duration,
    cpu: f64,
}

const ONE_STEP: &str = "  - app.see: \"#title\"\n";

fn ten_steps() -> String {
    ONE_STEP.repeat(10)
}

struct Options {
    fleets: Vec<usize>,
    cases: usize,
    per_worker: usize,
    runs: usize,
    big: usize,
}

impl Options {
    fn parse() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let flag = |name: &str, default: usize| {
            args.iter().find_map(|a| a.strip_prefix(name)?.strip_prefix('=')?.parse().ok()).unwrap_or(default)
        };
        Self {
            fleets: positional
                .first()
                .map(|a| a.split(',').filter_map(|n| n.parse().ok()).collect())
                .unwrap_or_else(|| vec![1_000, 10_000]),
            cases: positional.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000),
            per_worker: flag("--workers-per", 0),
            runs: flag("--runs", 4),
            // The most cases a suite may hold (`MAX_SUITE_CASES`, 100,000).
            big: flag("--big", argus_cases::suite::MAX_SUITE_CASES),
        }
    }
}

async fn fleet(store: &str, databases: [String; 2], devices: usize, options: &Options) {
    // The store alone first, while nothing else uses the database server:
    // measured after the coordinator's runs, it shared the server with
    // their ends' follow-up writes and varied from 9,500 to 18,000
    // attempts/s between runs of the same code.
    let machine = MachineCpu::now();
    let (lease_rate, result_rate) = store_alone(&databases[1], options.cases, devices).await;
    let alone_busy = machine.busy_since();
    let coordinator = Coordinator::start(&databases[0]).await;
    let (_, rss_empty) = coordinator.usage();
    // 50 devices per stream, at most 100 streams (a big host's worker).
    let per_worker = match options.per_worker {
        0 => devices.div_ceil(100).max(50).min(devices),
        n => n,
    };
    let streams = devices.div_ceil(per_worker);
    let seen = Arc::new(Seen::default());
    let cancel = CancellationToken::new();

    // Every device joins at once while a run's cases wait. A run is
    // accepted only while a device matches it: one stand-in holds the
    // first case (and lets it go, lost with its stream, once the fleet
    // is in). There is a case for every device, and each device holds its
    // first until all do: a device that answered at once could be leased
    // the case a later one was waiting for.
    let seed_stop = CancellationToken::new();
    let seed =
        stand_in_worker(coordinator.url.clone(), "seed".into(), 1, Answers::Never, Arc::default(), seed_stop.clone());
    tokio::spawn(seed);
    argus_testkit::wait_for_listed(&coordinator.url, 1).await;
    let url = coordinator.url.clone();
    let runs = (devices + 1).div_ceil(argus_cases::suite::MAX_SUITE_CASES);
    let waiting = tokio::spawn(async move { through(&url, runs, (devices + 1).div_ceil(runs), ONE_STEP).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let release = CancellationToken::new();
    let joining = Instant::now();
    for w in 0..streams {
        let count = per_worker.min(devices - w * per_worker);
        let name = format!("w{w}");
        let answers = Answers::AfterFirstHeld(release.clone());
        tokio::spawn(stand_in_worker(coordinator.url.clone(), name, count, answers, seen.clone(), cancel.clone()));
    }
    while seen.first_leases.load(Ordering::Relaxed) < devices {
        assert!(joining.elapsed() < Duration::from_secs(300), "the devices were not all leased work");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let joined = joining.elapsed();
    release.cancel();
    seed_stop.cancel();
    waiting.await.unwrap();
    let (_, rss_fleet) = coordinator.usage();
    seen.take();

    let mut rows: Vec<(String, f64, f64, Histogram<u64>)> = Vec::new();
    let mut rate_of = |label: String, attempts: usize, wall: Duration, cpu: f64| {
        rows.push((label, attempts as f64 / wall.as_secs_f64(), cpu * 1000.0 / attempts as f64, seen.take()));
        attempts as f64 / wall.as_secs_f64()
    };
    let ((cpu, _), machine) = (coordinator.usage(), MachineCpu::now());
    let (_, wall) = through(&coordinator.url, 1, options.cases, ONE_STEP).await;
    let one_step_busy = machine.busy_since();
    let one_step = rate_of(
        format!("one-step cases, one run of {}", options.cases),
        options.cases,
        wall,
        coordinator.usage().0 - cpu,
    );
    let (cpu, _) = coordinator.usage();
    let ten = options.cases / 5;
    let (_, wall) = through(&coordinator.url, 1, ten, &ten_steps()).await;
    rate_of(format!("ten-step cases, one run of {ten}"), ten, wall, coordinator.usage().0 - cpu);
    let (cpu, _) = coordinator.usage();
    let each = options.cases / options.runs;
    let (_, wall) = through(&coordinator.url, options.runs, each, ONE_STEP).await;
    rate_of(
        format!("one-step cases, {} runs of {each} at once", options.runs),
        each * options.runs,
        wall,
        coordinator.usage().0 - cpu,
    );
    // Enough to flow through the wait, the second before and the submit
    // (at 9,000 attempts/s, ten seconds); cancelled once the big run is in.
    let others = argus_cases::suite::MAX_SUITE_CASES;
    seen.take();
    let big = big_run(&coordinator, &seen, options.big, others).await;
    let (wall, cpu) = (big.wall, big.cpu);
    rate_of(format!("one-step cases, one run of {}", options.big), options.big, wall, cpu);
    let (_, rss_after) = coordinator.usage();
    cancel.cancel();
    let alone = 1.0 / (1.0 / lease_rate + 1.0 / result_rate);
    let plural = if streams == 1 { "" } else { "s" };
    println!("{store}, {devices} stand-in devices on {streams} worker stream{plural}:");
    println!("  {:<52} {:>8.2} s", "all joining at once, until each holds a lease", joined.as_secs_f64());
    println!(
        "  {:<52} {:>8.1} KiB per device ({:.0} MiB empty, {:.0} MiB with the fleet, {:.0} MiB at the end)",
        "coordinator resident memory",
        (rss_fleet - rss_empty) * 1024.0 / devices as f64,
        rss_empty,
        rss_fleet,
        rss_after
    );
    for (label, rate, cpu_ms, lease_to_device) in &rows {
        println!(
            "  {label:<52} {rate:>8.0} attempts/s  {cpu_ms:>6.3} ms coordinator CPU per attempt  lease -> device p50 {:.2} ms p99 {:.2} ms",
            ms(lease_to_device, 0.5),
            ms(lease_to_device, 0.99)
        );
    }
    println!(
        "  {:<52} {:>8.0} attempts/s (leases {:.0}/s, results {:.0}/s)   coordinator/store {:.2}",
        "the store alone, the same writes",
        alone,
        lease_rate,
        result_rate,
        one_step / alone
    );
    println!(
        "  {:<52} {:>8.2} alone (the bench waiting on one connection)   {:.2} the one-step run through the coordinator",
        "the machine's cores busy (both, all processes)", alone_busy, one_step_busy
    );
    println!(
        "  {:<52} {:>8.2} s   another run's leases/s before {:.0}, during {:.0} ({:.2})",
        format!("submit of the {}-case run", options.big),
        big.submit.as_secs_f64(),
        big.others_before,
        big.others_during,
        big.others_during / big.others_before
    );
    println!(
        "  {:<52} {:>8.2} before, {:.2} during   the coordinator's cores before {:.2}, during {:.2}",
        "  the machine's cores busy (both, all processes)",
        big.busy_before,
        big.busy_during,
        big.coordinator_before,
        big.coordinator_during
    );
}

fn main() {
    let options = Options::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let postgres =
            std::env::var("ARGUS_BENCH_POSTGRES_URL").or_else(|_| std::env::var("ARGUS_TEST_POSTGRES_URL")).ok();
        for devices in options.fleets.iter().copied() {
            match &postgres {
                Some(admin) => {
                    let mut databases = Vec::new();
                    for side in ["grid", "alone"] {
                        let name = format!("argus_capacity_{}_{devices}_{side}", std::process::id());
                        databases.push(Store::create_database(admin, &name).await.expect("the bench Postgres answers"));
                    }
                    let databases: [String; 2] = databases.try_into().unwrap();
                    fleet("Postgres", databases, devices, &options).await;
                }
                None => {
                    let file = |side: &str| {
                        std::env::temp_dir().join(format!("argus-capacity-{}-{devices}-{side}.db", std::process::id()))
                    };
                    let databases = [file("grid"), file("alone")].map(|f| format!("sqlite:{}", f.display()));
                    fleet("SQLite", databases, devices, &options).await;
                    for side in ["grid", "alone"] {
                        let _ = std::fs::remove_file(file(side));
                    }
                }
            }
        }
        println!("goals: coordinator/store >= 0.8 at 1,000 and 10,000 devices; CPU per attempt and memory per device at 10,000 within 1.5x of 1,000");
    });
}
