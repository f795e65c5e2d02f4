//! The grid end to end on loopback: a coordinator (SQLite), one worker with
//! eight device slots and eight simulated apps, and a run of short cases.
//! It prints the wall time and the grid's overhead per case, from the lease's
//! grant to the worker's first call to the app, beside the cost of that call
//! made straight to a driver, and their ratio.
//!
//! `cargo bench -p argus --bench end_to_end [CASES]`
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use argus_proto::grpc::{self, fleet_client::FleetClient, run_update, runs_client::RunsClient};
use argus_sim::{Agent, AgentConfig, App, Model};
use argus_store::Store;
use argus_worker::driver::{Driver, DriverConfig};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const DEVICES: usize = 8;

use argus_testkit::free_port;

fn sim(port: u16, cancel: &CancellationToken) {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let app = App::new(Model::load(&model).unwrap());
    let config = AgentConfig { port, ..AgentConfig::default() };
    tokio::spawn(Agent::new(app, config).run(cancel.clone()));
}

fn main() {
    let cases: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(400);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let direct = direct_reset(cases).await;
        let (grid, wall) = grid_run(cases).await;
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "{cases} cases on {DEVICES} simulated devices, one worker, loopback: {:.2} s wall, {:.0} cases/s",
            wall.as_secs_f64(),
            cases as f64 / wall.as_secs_f64()
        );
        println!("{:<44} {:>9} {:>9} {:>9}", "", "p50 ms", "p99 ms", "max ms");
        for (name, h) in
            [("lease granted -> first call to the app", &grid), ("a reset call straight to a driver", &direct)]
        {
            println!("{name:<44} {:>9.2} {:>9.2} {:>9.2}", ms(h, 0.5), ms(h, 0.99), h.max() as f64 / 1000.0);
        }
        println!(
            "{:<44} {:>8.1}x {:>8.1}x",
            "ratio",
            grid.value_at_quantile(0.5) as f64 / direct.value_at_quantile(0.5).max(1) as f64,
            grid.value_at_quantile(0.99) as f64 / direct.value_at_quantile(0.99).max(1) as f64
        );
        println!("goal: lease granted -> first call under 20 ms at p99");
    });
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap()
}

/// The first call of every attempt, `reset`, made straight to a driver.
async fn direct_reset(rounds: usize) -> Histogram<u64> {
    let cancel = CancellationToken::new();
    let port = free_port();
    let driver = Driver::listen(DriverConfig { port, ..DriverConfig::default() }).await.unwrap();
    sim(port, &cancel);
    driver.wait_for_app(Duration::from_secs(10)).await.unwrap();
    let mut latencies = histogram();
    for _ in 0..rounds {
        let started = Instant::now();
        driver.call("reset", None, Duration::from_secs(5)).await.unwrap();
        latencies.record(started.elapsed().as_micros() as u64).unwrap();
    }
    driver.close().await;
    cancel.cancel();
    latencies
}

async fn grid_run(cases: usize) -> (Histogram<u64>, Duration) {
    let cancel = CancellationToken::new();
    let db = std::env::temp_dir().join(format!("argus-e2e-bench-{}.db", std::process::id()));
    let store = Store::open(&format!("sqlite:{}", db.display())).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(argus_coordinator::serve(listener, store, cancel.clone()));
    let ports: Vec<u16> = (0..DEVICES).map(|_| free_port()).collect();
    let config = WorkerConfig {
        coordinator: url.clone(),
        name: "bench".into(),
        host: "127.0.0.1".into(),
        app_token: None,
        token: None,
        tls_ca: None,
        slots: ports.iter().map(|p| SlotConfig::for_port(*p, "ios")).collect(),
    };
    tokio::spawn(link::run(config, cancel.clone()));
    for port in &ports {
        sim(*port, &cancel);
    }
    let mut fleet = FleetClient::connect(url.clone()).await.unwrap();
    loop {
        let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
        let idle =
            devices.iter().filter(|d| d.device.as_ref().is_some_and(|d| d.state == grpc::DeviceState::Idle as i32));
        if idle.count() == DEVICES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A matrix holds 256 cases at most: a file per 200.
    let files: Vec<grpc::CaseFile> = (0..cases)
        .collect::<Vec<_>>()
        .chunks(200)
        .enumerate()
        .map(|(file, chunk)| {
            let items: Vec<String> = chunk.iter().map(|i| i.to_string()).collect();
            let source = format!(
                "---\nid: title{file}\nmatrix: {{ n: [{}] }}\n---\nsteps:\n  - app.see: \"#title\"\n",
                items.join(", ")
            );
            grpc::CaseFile { path: format!("cases/title{file}.md"), source }
        })
        .collect();
    let mut runs = RunsClient::connect(url).await.unwrap();
    let started = Instant::now();
    let request = grpc::SubmitRequest { cases: files, project: "bench".into(), ..Default::default() };
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let mut updates = runs.watch(grpc::WatchRequest { run_id, after_seq: 0 }).await.unwrap().into_inner();
    let mut overhead = histogram();
    while let Some(update) = updates.message().await.unwrap() {
        match update.kind {
            Some(run_update::Kind::Finished(finished)) if !finished.infrastructure_failure => {
                overhead.record(finished.lease_to_first_call_us.max(1) as u64).unwrap();
            }
            Some(run_update::Kind::RunFinished(_)) => break,
            _ => {}
        }
    }
    let wall = started.elapsed();
    cancel.cancel();
    let _ = std::fs::remove_file(db);
    assert_eq!(overhead.len() as usize, cases, "every case finished once");
    (overhead, wall)
}
