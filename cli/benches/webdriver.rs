//! The WebDriver facade's cost: a `find_element` + `click` round trip as a
//! WebDriver client makes it (HTTP to the coordinator, the worker's link, the
//! driver, the simulated app, and back), beside the same two calls (`find`
//! and `press`) made straight to a driver, and their ratio. Rounds of each
//! alternate in small batches so that a burst of load on a shared machine
//! falls on both sides. The real coordinator (SQLite), worker and apps, on
//! loopback.
//!
//! `cargo bench -p argus --bench webdriver [ROUNDS]`
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use argus_sim::{Agent, AgentConfig, App, Model};
use argus_worker::driver::{Driver, DriverConfig};
use argus_worker::link::SlotConfig;
use hdrhistogram::Histogram;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Rounds of one side before the other takes its turn.
const BATCH: usize = 10;
const CALL: Duration = Duration::from_secs(5);

use argus_testkit::{Grid, GridOptions, free_port};

fn sim(port: u16, cancel: &CancellationToken) {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let app = App::new(Model::load(&model).unwrap());
    tokio::spawn(Agent::new(app, AgentConfig { port, ..AgentConfig::default() }).run(cancel.clone()));
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()
}

struct WebDriver {
    client: Client<HttpConnector, String>,
    base: String,
}

impl WebDriver {
    async fn post(&self, path: &str, body: Value) -> Value {
        let request = hyper::Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .unwrap();
        let response = self.client.request(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 1 << 24).await.unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(status.is_success(), "{path}: {status} {value}");
        value["value"].clone()
    }
}

/// A coordinator with its HTTP port, one worker, one simulated app; a
/// session on its device.
async fn grid(cancel: &CancellationToken) -> (WebDriver, String, Grid) {
    let db = std::env::temp_dir().join(format!("argus-wd-bench-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&db);
    let options = GridOptions {
        database: Some(format!("sqlite:{}", db.display())),
        http: true,
        cancel: Some(cancel.clone()),
        quiet: true,
        ..GridOptions::default()
    };
    let mut grid = Grid::serve(options).await;
    let port = free_port();
    grid.spawn_worker(grid.worker_config("bench", vec![SlotConfig::for_port(port, "ios")]));
    sim(port, cancel);
    grid.wait_for_devices(1).await;
    let base = format!("http://{}", grid.http());
    let webdriver = WebDriver { client: Client::builder(TokioExecutor::new()).build_http(), base };
    let created =
        webdriver.post("/session", json!({ "capabilities": { "alwaysMatch": { "platformName": "iOS" } } })).await;
    let sid = created["sessionId"].as_str().unwrap().to_owned();
    (webdriver, sid, grid)
}

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let cancel = CancellationToken::new();
        let (webdriver, sid, _grid) = grid(&cancel).await;
        let port = free_port();
        let driver = Driver::listen(DriverConfig { port, ..DriverConfig::default() }).await.unwrap();
        sim(port, &cancel);
        driver.wait_for_app(Duration::from_secs(10)).await.unwrap();
        let target = json!({ "testId": "title" });
        let (mut direct, mut facade) = (histogram(), histogram());
        // The find alone: no gesture time of the app to hide the overhead.
        let (mut direct_find, mut facade_find) = (histogram(), histogram());
        let find = json!({ "using": "accessibility id", "value": "title" });
        let mut done = 0;
        while done < rounds {
            let batch = BATCH.min(rounds - done);
            for _ in 0..batch {
                let started = Instant::now();
                let found = driver.call("find", Some(target.clone()), CALL).await.unwrap();
                assert!(!found.is_null());
                direct_find.record(started.elapsed().as_micros() as u64).unwrap();
                driver.call("press", Some(target.clone()), CALL).await.unwrap();
                direct.record(started.elapsed().as_micros() as u64).unwrap();
            }
            for _ in 0..batch {
                let started = Instant::now();
                let element = webdriver.post(&format!("/session/{sid}/element"), find.clone()).await;
                facade_find.record(started.elapsed().as_micros() as u64).unwrap();
                let id = element["element-6066-11e4-a52e-4f735466cecf"].as_str().unwrap().to_owned();
                webdriver.post(&format!("/session/{sid}/element/{id}/click"), json!({})).await;
                facade.record(started.elapsed().as_micros() as u64).unwrap();
            }
            done += batch;
        }
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!("{rounds} rounds of each, interleaved in batches of {BATCH}, one simulated app each, loopback");
        println!("{:<52} {:>9} {:>9} {:>9}", "", "p50 ms", "p99 ms", "max ms");
        let ratio = |a: &Histogram<u64>, b: &Histogram<u64>, q: f64| {
            a.value_at_quantile(q) as f64 / b.value_at_quantile(q).max(1) as f64
        };
        for (facade, direct, what) in
            [(&facade, &direct, "find_element + click"), (&facade_find, &direct_find, "find_element alone")]
        {
            for (name, h) in [("WebDriver, through the grid", facade), ("lynkeus, straight to a driver", direct)] {
                let name = format!("{what}: {name}");
                println!("{name:<52} {:>9.2} {:>9.2} {:>9.2}", ms(h, 0.5), ms(h, 0.99), h.max() as f64 / 1000.0);
            }
            println!(
                "{:<52} {:>8.2}x {:>8.2}x",
                format!("{what}: ratio"),
                ratio(facade, direct, 0.5),
                ratio(facade, direct, 0.99)
            );
        }
        println!("goal: find_element + click at most 2x at p50 (the press holds 50 ms in the app, on both sides)");
        driver.close().await;
        cancel.cancel();
    });
}
