//! What the whole-system benchmarks share: free ports, histograms, and a
//! grid on the real path (the real coordinator and store, real gRPC on
//! loopback, real workers of 50 devices each, simulated apps in this
//! process).
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use argus_proto::grpc;
use argus_sim::Model;
use argus_store::{AttemptOutcome, NewCase, NewLease, NewRun, Store};
use argus_worker::link::SlotConfig;
use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

pub const DEVICES_PER_WORKER: usize = 50;

#[allow(unused_imports)] // Each benchmark takes what it needs.
pub use argus_testkit::{Grid, GridOptions, Sim, free_port, free_ports, http_get};

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap()
}

pub fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// The whole machine's CPU ticks so far, busy and in all (Linux's
/// `/proc/stat`, every core): what Postgres, the coordinator and the
/// devices used together, which no one process's figures show.
#[derive(Clone, Copy)]
pub struct MachineCpu {
    busy: u64,
    total: u64,
}

impl MachineCpu {
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // `cpu  user nice system idle iowait irq softirq steal …`: idle and
        // iowait are the ticks no one used.
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|t| t.parse().ok())
            .collect();
        let total = ticks.iter().sum();
        let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        Self { busy: total - idle, total }
    }

    /// The share of the machine's cores busy since `self` (0 to 1).
    pub fn busy_since(self) -> f64 {
        let now = Self::now();
        let total = now.total.saturating_sub(self.total);
        if total == 0 { 0.0 } else { now.busy.saturating_sub(self.busy) as f64 / total as f64 }
    }
}

/// A grid of `devices` simulated apps on `database`, until `cancel` or
/// until it is dropped.
pub async fn grid(database: &str, devices: usize, cancel: &CancellationToken) -> Grid {
    grid_with(database, devices, true, cancel).await
}

/// The same, its slots recording every step (`observe`, the default) or
/// not: what the cost of the records is measured with.
pub async fn grid_with(database: &str, devices: usize, observe: bool, cancel: &CancellationToken) -> Grid {
    grid_options(database, devices, observe, argus_coordinator::Options::default(), cancel).await
}

/// The same, the coordinator served with `options` (webhooks, say).
pub async fn grid_options(
    database: &str,
    devices: usize,
    observe: bool,
    coordinator: argus_coordinator::Options,
    cancel: &CancellationToken,
) -> Grid {
    let options = GridOptions {
        database: Some(database.to_owned()),
        coordinator,
        cancel: Some(cancel.clone()),
        http: false,
        quiet: true,
    };
    let mut grid = Grid::serve(options).await;
    let model = Model::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml")).unwrap();
    let ports = free_ports(devices);
    for (w, chunk) in ports.chunks(DEVICES_PER_WORKER).enumerate() {
        let slots = chunk.iter().map(|p| SlotConfig { observe, ..SlotConfig::for_port(*p, "ios") }).collect();
        grid.spawn_worker(grid.worker_config(&format!("bench{w}"), slots));
        for port in chunk {
            grid.sims.push(Sim::start_with(*port, None, model.clone()));
        }
    }
    grid.wait_for_devices(devices).await;
    grid
}

/// `cases` cases, 200 to a matrix file, whose steps are `steps`.
pub fn suite(cases: usize, name: &str, steps: &str) -> Vec<grpc::CaseFile> {
    (0..cases)
        .collect::<Vec<_>>()
        .chunks(200)
        .enumerate()
        .map(|(file, chunk)| {
            let items: Vec<String> = chunk.iter().map(|i| i.to_string()).collect();
            let source =
                format!("---\nid: {name}{file}\nmatrix: {{ n: [{}] }}\n---\nsteps:\n{steps}", items.join(", "));
            grpc::CaseFile { path: format!("cases/{name}{file}.md"), source }
        })
        .collect()
}

/// A run of `cases` one-step cases written straight to the store, and a
/// lease granted for each (on as many devices, or 64): what the store-alone
/// measurements write results for.
pub async fn leased_run(store: &Store, name: &str, cases: usize, grant: bool) -> Vec<NewLease> {
    let id = format!("{name}{}", free_port());
    let file = format!("cases/{name}.md");
    let new_run = NewRun {
        id: id.clone(),
        project: "bench".into(),
        branch: None,
        commit: None,
        trigger: None,
        selector_json: "{}".into(),
        config_json: "{}".into(),
        retries: 0,
        priority: 1,
        detached: true,
        rerun_of: None,
        testowners: None,
        started_at: 0,
        manifest_json: "{}".into(),
        files: vec![(file.clone(), String::new())],
        cases: (0..cases)
            .map(|i| NewCase {
                case_id: format!("c{i}"),
                file: file.clone(),
                title: None,
                ordinal: i as i64,
                expected_ms: 1,
                estimate_source: "default".into(),
                muted: None,
                owner: None,
            })
            .collect(),
    };
    store.create_run(&new_run).await.unwrap();
    let leases: Vec<NewLease> = (0..cases)
        .map(|i| NewLease {
            id: format!("{id}-{i}"),
            run_id: id.clone(),
            case_id: format!("c{i}"),
            attempt: 1,
            try_no: 1,
            device_id: format!("w/{}", i % 64),
            worker_id: "w".into(),
            platform: "ios".into(),
            granted_at: 1,
            deadline: 20_001,
        })
        .collect();
    if grant {
        assert!(store.grant_leases(&leases).await.unwrap().iter().all(|g| *g));
    }
    leases
}

/// A one-step pass, as a worker reports it.
pub fn passed(seq: i64, observed: Option<argus_store::Observed>) -> AttemptOutcome {
    AttemptOutcome {
        result: Some("passed".into()),
        infrastructure: false,
        error: None,
        finished_at: 2 + seq,
        ms: 3,
        run_case_json: Some(r#"{"id":"c","result":"passed","ms":3}"#.into()),
        steps: vec![argus_store::StepRow {
            step: "app.see #title".into(),
            status: "passed".into(),
            ms: 3,
            error: None,
        }],
        seq,
        next_try: None,
        final_result: Some("passed".into()),
        observed,
        health: Default::default(),
    }
}

/// A counter's value in a Prometheus text exposition (0 when absent).
pub fn counter(exposition: &str, name: &str) -> f64 {
    exposition.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0.0)
}

/// The store alone, for as many attempts, in rounds of `batch` (the most a
/// fleet of that many devices has running): each round's leases in one
/// transaction, then their results in another, as the owner task does per
/// burst at best. Leases per second and results per second.
pub async fn store_alone(database: &str, attempts: usize, batch: usize) -> (f64, f64) {
    let store = Store::open(database).await.unwrap();
    let leases = leased_run(&store, "alone", attempts, false).await;
    let (mut leasing, mut recording) = (Duration::ZERO, Duration::ZERO);
    for round in leases.chunks(batch.max(1)) {
        let started = Instant::now();
        assert!(store.grant_leases(round).await.unwrap().iter().all(|g| *g));
        leasing += started.elapsed();
        let results: Vec<(String, AttemptOutcome)> = round.iter().map(|l| (l.id.clone(), passed(1, None))).collect();
        let started = Instant::now();
        assert!(store.finish_attempts(&results).await.unwrap().iter().all(Result::is_ok));
        recording += started.elapsed();
    }
    store.close().await;
    (attempts as f64 / leasing.as_secs_f64(), attempts as f64 / recording.as_secs_f64())
}
