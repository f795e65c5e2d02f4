//! What the whole-system benchmarks share: free ports, histograms, and a
//! grid on the real path (the real coordinator and store, real gRPC on
//! loopback, real workers of 50 devices each, simulated apps in this
//! process).
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use argus_proto::grpc::{self, fleet_client::FleetClient};
use argus_sim::{Agent, AgentConfig, App, Model};
use argus_store::Store;
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub const DEVICES_PER_WORKER: usize = 50;

#[allow(unused_imports)] // Each benchmark takes what it needs.
pub use argus_testkit::{free_port, free_ports};

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap()
}

pub fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// A grid of `devices` simulated apps on `database`: its URL.
pub async fn grid(database: &str, devices: usize, cancel: &CancellationToken) -> String {
    grid_with(database, devices, true, cancel).await
}

/// The same, its slots recording every step (`observe`, the default) or
/// not: what the cost of the records is measured with.
pub async fn grid_with(database: &str, devices: usize, observe: bool, cancel: &CancellationToken) -> String {
    grid_options(database, devices, observe, argus_coordinator::Options::default(), cancel).await
}

/// The same, the coordinator served with `options` (webhooks, say).
pub async fn grid_options(
    database: &str,
    devices: usize,
    observe: bool,
    options: argus_coordinator::Options,
    cancel: &CancellationToken,
) -> String {
    let store = Store::open(database).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(argus_coordinator::serve_with(listener, store, options, cancel.clone()));
    let model = Model::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml")).unwrap();
    let ports = free_ports(devices);
    for (w, chunk) in ports.chunks(DEVICES_PER_WORKER).enumerate() {
        let config = WorkerConfig {
            coordinator: url.clone(),
            name: format!("bench{w}"),
            host: "127.0.0.1".into(),
            app_token: None,
            token: None,
            tls_ca: None,
            slots: chunk.iter().map(|p| SlotConfig { observe, ..SlotConfig::for_port(*p, "ios") }).collect(),
        };
        tokio::spawn(link::run(config, cancel.clone()));
        for port in chunk {
            let config = AgentConfig { port: *port, ..AgentConfig::default() };
            tokio::spawn(Agent::new(App::new(model.clone()), config).run(cancel.clone()));
        }
    }
    let mut fleet = FleetClient::connect(url.clone()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner();
        let idle = list
            .devices
            .iter()
            .filter(|d| d.device.as_ref().is_some_and(|d| d.state == grpc::DeviceState::Idle as i32));
        if idle.count() == devices {
            return url;
        }
        assert!(Instant::now() < deadline, "{devices} devices did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
