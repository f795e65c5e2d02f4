//! A fresh app for every attempt: where a device's time goes between two
//! attempts, on the grid and the way lynkeus spends it, side by side in one
//! run. Each device's slot has a `before` hook that ends the app it had
//! and starts a fresh simulated app (`argus sim`, a process of its own), as
//! lynkeus' `--jobs N --host-command` does for each attempt.
//!
//! - lynkeus' way: per device, the same hook, a wait for the app's hello,
//!   then the case (whose runner settles the app with `idle {300, 5000}`
//!   first), straight on a driver: no coordinator, no store.
//! - the grid: the real coordinator (Postgres with fsync on when
//!   `ARGUS_BENCH_POSTGRES_URL` names a server, else SQLite), gRPC on
//!   loopback, one worker in this process with the same hook.
//!
//! A device's time between two attempts is from one attempt's last step to
//! the next one's first (`startedAt + ms` to the next `startedAt`). The
//! grid's is broken down from its workers' debug log
//! (`argus_worker::between`): the hook, the wait for the app, the reset,
//! the settle, the health reads, what follows the last step, and what is
//! left (the result's way to the store and the next lease's back).
//!
//! `cargo bench -p argus --bench fresh_app [CASES] [--devices=N]`
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_cases::runner::{LocalProject, RunContext, run_attempt};
use argus_cases::{CaseFile, CasesConfig};
use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_proto::run::RunCase;
use argus_worker::driver::{Driver, DriverConfig};
use argus_worker::link::SlotConfig;
use argus_worker::slots::{Hooks, run_hook};
use support::{Grid, GridOptions};
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

mod support;

const ARGUS: &str = env!("CARGO_BIN_EXE_argus");
/// lynkeus' settle before a case's first step: `idle {quietMs: 300}`.
const LYNKEUS_SETTLE_MS: f64 = 300.0;
/// The goal: a grid device's time between two attempts at most this much
/// above lynkeus' own (the hook, the app's attach, its 300 ms settle).
const GOAL_MS: f64 = 50.0;

const STEPS: &str = "  - app.see: \"#title\"\n  - app.idle: { quiet: 100 }\n";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cases: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(40);
    let devices: usize =
        args.iter().find_map(|a| a.strip_prefix("--devices=")).and_then(|n| n.parse().ok()).unwrap_or(4);
    let between = Between::default();
    let subscriber = tracing_subscriber::registry().with(between.clone());
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let hook = relaunch_hook(dir.path());
        let file = CaseFile::parse(&source(cases), "cases/fresh.md").unwrap();
        let lynkeus = lynkeus_way(&file, devices, &hook).await;
        stop_apps(dir.path());
        let (grid, database) = grid_way(&source(cases), devices, &hook).await;
        stop_apps(dir.path());
        print_report(cases, devices, &database, &lynkeus, &grid, &between.take());
    });
}

fn source(cases: usize) -> String {
    let items: Vec<String> = (0..cases).map(|n| n.to_string()).collect();
    format!("---\nid: fresh\nmatrix: {{ n: [{}] }}\n---\nsteps:\n{STEPS}", items.join(", "))
}

/// A shell script that ends the app a port had (and waits for it to go,
/// as lynkeus waits for its host) and starts a fresh one in the background.
fn relaunch_hook(dir: &Path) -> String {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let script = dir.join("relaunch.sh");
    let body = format!(
        "#!/bin/sh\npid=\"{dir}/app-$1.pid\"\nif [ -f \"$pid\" ]; then\n  old=$(cat \"$pid\")\n  kill \"$old\" 2>/dev/null\n  \
         while grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/$old/status; do sleep 0.002; done\nfi\n\
         '{argus}' sim --model '{model}' --port \"$1\" >/dev/null 2>&1 &\necho $! > \"$pid\"\n",
        dir = dir.display(),
        argus = ARGUS,
        model = model.display()
    );
    std::fs::write(&script, body).unwrap();
    format!("sh '{}' {{port}}", script.display())
}

/// Ends the apps the hook started.
fn stop_apps(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".pid")
            && let Ok(pid) = std::fs::read_to_string(entry.path())
        {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// One attempt as a device went through it.
struct Attempt {
    device: String,
    line: RunCase,
}

/// lynkeus' way: per device, the hook, the wait for the app, the case.
async fn lynkeus_way(file: &CaseFile, devices: usize, hook: &str) -> Vec<Attempt> {
    let cases = file.cases().unwrap();
    let queue = Arc::new(Mutex::new(cases));
    let config = CasesConfig::defaults(Path::new("."));
    // As the grid runs a case: events gathered, no fixtures, no pictures.
    let context = Arc::new(RunContext {
        project: Arc::new(LocalProject::of(&config)),
        config,
        collect_events: true,
        keep_going: false,
        pictures: None,
        observe: false,
    });
    let mut jobs = Vec::new();
    for _ in 0..devices {
        let (queue, context, hook) = (queue.clone(), context.clone(), hook.to_owned());
        jobs.push(tokio::spawn(async move {
            let port = support::free_port();
            let driver = Driver::listen(DriverConfig { port, ..DriverConfig::default() }).await.unwrap();
            let slot = SlotConfig {
                hooks: Hooks { before: Some(hook), ..Hooks::default() },
                ..SlotConfig::for_port(port, "ios")
            };
            let mut done = Vec::new();
            loop {
                let Some(case) = queue.lock().unwrap().pop() else { break };
                run_hook("before", slot.hooks.before.as_deref().unwrap(), &slot.placeholders(&case.id, 1))
                    .await
                    .unwrap();
                driver.wait_for_app(Duration::from_secs(15)).await.unwrap();
                let line = run_attempt(&driver, &case, 1, &context).await;
                done.push(Attempt { device: port.to_string(), line });
            }
            driver.close().await;
            done
        }));
    }
    let mut attempts = Vec::new();
    for job in jobs {
        attempts.extend(job.await.unwrap());
    }
    attempts
}

/// The grid's way: the coordinator, its store and a worker with the hook.
async fn grid_way(source: &str, devices: usize, hook: &str) -> (Vec<Attempt>, String) {
    let cancel = CancellationToken::new();
    let (name, database) = match std::env::var("ARGUS_BENCH_POSTGRES_URL") {
        Ok(admin) => {
            let url = argus_testkit::postgres_url(Some(&admin), "argus_fresh_bench").await;
            (format!("Postgres ({})", fsync(&url).await), url)
        }
        Err(_) => {
            let path = std::env::temp_dir().join(format!("argus-fresh-bench-{}.db", std::process::id()));
            ("SQLite".to_owned(), format!("sqlite:{}", path.display()))
        }
    };
    let options =
        GridOptions { database: Some(database), cancel: Some(cancel.clone()), quiet: true, ..GridOptions::default() };
    let mut grid = Grid::serve(options).await;
    let url = grid.url.clone();
    let slots: Vec<SlotConfig> = support::free_ports(devices)
        .into_iter()
        .map(|port| SlotConfig {
            hooks: Hooks { before: Some(hook.to_owned()), ..Hooks::default() },
            ..SlotConfig::for_port(port, "ios")
        })
        .collect();
    grid.spawn_worker(grid.worker_config("fresh", slots.clone()));
    // A first app on each port, so that the devices come up.
    for slot in &slots {
        run_hook("before", hook, &slot.placeholders("warm-up", 1)).await.unwrap();
    }
    grid.wait_for_devices(devices).await;
    let mut runs = RunsClient::connect(url).await.unwrap();
    let files = vec![grpc::CaseFile { path: "cases/fresh.md".into(), source: source.to_owned() }];
    let request = grpc::SubmitRequest { cases: files, project: "fresh".into(), ..Default::default() };
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let mut updates = runs.watch(grpc::WatchRequest { run_id, after_seq: 0 }).await.unwrap().into_inner();
    let mut attempts = Vec::new();
    while let Some(update) = updates.message().await.unwrap() {
        match update.kind {
            Some(run_update::Kind::Finished(finished)) if !finished.infrastructure_failure => {
                let line: RunCase = serde_json::from_str(&finished.run_case_json).unwrap();
                let device = finished.device.map(|d| d.id).unwrap_or_default();
                attempts.push(Attempt { device: device.rsplit('/').next().unwrap_or_default().to_owned(), line });
            }
            Some(run_update::Kind::RunFinished(_)) => break,
            _ => {}
        }
    }
    cancel.cancel();
    (attempts, name)
}

async fn fsync(url: &str) -> String {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let row: (String,) = sqlx::query_as("SHOW fsync").fetch_one(&pool).await.unwrap();
    pool.close().await;
    format!("fsync {}", row.0)
}

/// Each device's times between two attempts, in ms.
fn gaps(attempts: &[Attempt]) -> Vec<f64> {
    let mut by_device: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
    for a in attempts {
        let start = chrono_ms(&a.line.started_at);
        by_device.entry(&a.device).or_default().push((start, start + a.line.ms as i64));
    }
    let mut gaps = Vec::new();
    for spans in by_device.values_mut() {
        spans.sort_unstable();
        gaps.extend(spans.windows(2).map(|w| (w[1].0 - w[0].1) as f64));
    }
    gaps
}

fn chrono_ms(iso: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(iso).map(|t| t.timestamp_millis()).unwrap_or(0)
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 }
}

fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0)
}

fn print_report(
    cases: usize,
    devices: usize,
    database: &str,
    lynkeus: &[Attempt],
    grid: &[Attempt],
    between: &[Phases],
) {
    println!(
        "{cases} cases on {devices} devices, a fresh simulated app for every attempt (a before hook); the grid on {database}"
    );
    let (ours, theirs) = (gaps(grid), gaps(lynkeus));
    println!("{:<52} {:>9} {:>9} {:>9}", "a device's time between two attempts", "mean ms", "p50 ms", "p99 ms");
    for (name, g) in [("lynkeus' way (hook, attach, settle; no grid)", &theirs), ("the grid", &ours)] {
        println!("{name:<52} {:>9.1} {:>9.1} {:>9.1}", mean(g), quantile(g, 0.5), quantile(g, 0.99));
    }
    println!(
        "{:<52} {:>8.2}x {:>8.2}x",
        "ratio (grid / lynkeus' way)",
        mean(&ours) / mean(&theirs).max(1.0),
        quantile(&ours, 0.5) / quantile(&theirs, 0.5).max(1.0)
    );
    // Where the grid's went, per device: each phase's sum and mean.
    let mut per_device: BTreeMap<String, Vec<&Phases>> = BTreeMap::new();
    for p in between {
        per_device.entry(p.slot.clone()).or_default().push(p);
    }
    let names = ["hook", "attach", "reset", "settle", "health_start", "health_end", "after"];
    println!("\nthe grid, summed per device over the run (ms; health_start runs during the settle):");
    println!("{:<10} {:>8} {}", "device", "attempts", names.map(|n| format!("{n:>13}")).join(""));
    for (slot, phases) in &per_device {
        let sums = names.map(|n| phases.iter().map(|p| p.get(n)).sum::<u64>());
        println!("{slot:<10} {:>8} {}", phases.len(), sums.map(|s| format!("{s:>13}")).join(""));
    }
    let all: Vec<&Phases> = between.iter().collect();
    let mean_of = |name: &str| mean(&all.iter().map(|p| p.get(name) as f64).collect::<Vec<_>>());
    let resets = all.iter().filter(|p| p.get("reset") > 0).count();
    println!(
        "per attempt: hook {:.1}, attach {:.1}, reset {:.1} ({resets} of {} attempts reset), settle {:.1}, health end {:.1}, after {:.1}",
        mean_of("hook"),
        mean_of("attach"),
        mean_of("reset"),
        all.len(),
        mean_of("settle"),
        mean_of("health_end"),
        mean_of("after")
    );
    let phases_sum: f64 = ["hook", "attach", "reset", "settle", "health_end", "after"].iter().map(|n| mean_of(n)).sum();
    println!(
        "left: {:.1} ms a gap (the result's way to the store, the next lease's back, the case read before the hook)",
        mean(&ours) - phases_sum
    );
    // What lynkeus itself spends there: the hook, the attach, its settle.
    let floor = mean_of("hook") + mean_of("attach") + LYNKEUS_SETTLE_MS;
    let measured_floor = mean_of("hook") + mean_of("attach") + mean_of("settle");
    let above = mean(&ours) - floor;
    println!(
        "lynkeus' own time there: hook + attach + 300 ms settle = {floor:.1} ms (with the settle as measured: {measured_floor:.1} ms)"
    );
    println!(
        "the grid above it: {above:.1} ms a gap ({:.1} ms above the measured settle); goal: at most {GOAL_MS:.0} ms: {}",
        mean(&ours) - measured_floor,
        if above <= GOAL_MS { "met" } else { "NOT met" }
    );
}

/// One attempt's `argus_worker::between` debug line.
#[derive(Debug, Default, Clone)]
struct Phases {
    slot: String,
    ms: BTreeMap<String, u64>,
}

impl Phases {
    fn get(&self, name: &str) -> u64 {
        self.ms.get(&format!("{name}_ms")).copied().unwrap_or(0)
    }
}

impl Visit for Phases {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.ms.insert(field.name().to_owned(), value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "slot" {
            self.slot = value.to_owned();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "slot" {
            self.slot = format!("{value:?}").trim_matches('"').to_owned();
        }
    }
}

/// Collects the workers' `argus_worker::between` lines.
#[derive(Clone, Default)]
struct Between(Arc<Mutex<Vec<Phases>>>);

impl Between {
    fn take(&self) -> Vec<Phases> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Between {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() == "argus_worker::between" {
            let mut phases = Phases::default();
            event.record(&mut phases);
            self.0.lock().unwrap().push(phases);
        }
    }
}
