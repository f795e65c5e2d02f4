//! The driver's cost over the wire it rides on, side by side in one process:
//!
//! 1. a raw tokio-tungstenite echo on loopback (the floor);
//! 2. the driver ⇄ simulated app round trip for a small request (`ping`);
//! 3. throughput with 64 calls in flight.
//!
//! The two round trips alternate in batches of 100, so that whatever else
//! the machine does hits both alike. Prints p50 and p99 of each and their
//! ratio to the raw echo.
//! `cargo bench -p argus-worker --bench driver_roundtrip [-- ROUNDS]`
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use argus_sim::{Agent, AgentConfig, App, Model};
use argus_worker::driver::{Driver, DriverConfig};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 2_000;
const IN_FLIGHT: usize = 64;

/// Rounds of each side run in batches this small, alternating, so that a
/// burst of load on a shared machine lands on both and the ratio holds.
const BATCH: usize = 100;

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let mut echo_side = Echo::start().await;
        let (driver, cancel) = driver_and_app().await;
        let (mut echo, mut round_trip) = (histogram(), histogram());
        let mut done = 0;
        while done < WARMUP + rounds {
            let keep = done >= WARMUP;
            echo_side.rounds(BATCH, keep.then_some(&mut echo)).await;
            driver_rounds(&driver, BATCH, keep.then_some(&mut round_trip)).await;
            done += BATCH;
        }
        let throughput = throughput(&driver, rounds * 4).await;
        cancel.cancel();
        driver.close().await;
        println!("round trip of a small request on loopback, {rounds} rounds after {WARMUP} warm-up, interleaved in batches of {BATCH}");
        println!("{:<28} {:>10} {:>10}", "", "p50 µs", "p99 µs");
        row("raw tokio-tungstenite echo", &echo);
        row("driver ⇄ simulated app", &round_trip);
        let p50 = round_trip.value_at_quantile(0.5) as f64 / echo.value_at_quantile(0.5) as f64;
        let p99 = round_trip.value_at_quantile(0.99) as f64 / echo.value_at_quantile(0.99) as f64;
        println!("{:<28} {:>9.2}× {:>9.2}×", "ratio driver / echo", p50, p99);
        println!("goal: p50 ratio ≤ 1.30×, driver p99 < 500 µs");
        println!("throughput with {IN_FLIGHT} calls in flight: {throughput:.0} calls/s (goal ≥ 30000)");
    });
}

fn row(name: &str, histogram: &Histogram<u64>) {
    let us = |q| histogram.value_at_quantile(q) as f64 / 1000.0;
    println!("{name:<28} {:>10.1} {:>10.1}", us(0.5), us(0.99));
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
}

/// A raw tokio-tungstenite echo on loopback: the floor.
struct Echo {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
}

impl Echo {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
            while let Some(Ok(message)) = ws.next().await {
                if message.is_text() && ws.send(message).await.is_err() {
                    break;
                }
            }
        });
        let (ws, _) = tokio_tungstenite::connect_async_with_config(format!("ws://{addr}"), None, true).await.unwrap();
        Self { ws }
    }

    /// A ping-sized text frame sent and echoed, `n` times.
    async fn rounds(&mut self, n: usize, mut into: Option<&mut Histogram<u64>>) {
        let frame = r#"{"id":1,"method":"ping"}"#;
        for _ in 0..n {
            let started = Instant::now();
            self.ws.send(Message::text(frame)).await.unwrap();
            let echoed = self.ws.next().await.unwrap().unwrap();
            let elapsed = started.elapsed();
            assert!(echoed.is_text());
            if let Some(h) = into.as_deref_mut() {
                h.record(elapsed.as_nanos() as u64).unwrap();
            }
        }
    }
}

/// A driver and the simulated app of the shop model attached to it.
async fn driver_and_app() -> (Arc<Driver>, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let driver =
        Arc::new(Driver::from_listener(listener, DriverConfig { port: 0, ..DriverConfig::default() }).unwrap());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let app = App::new(Model::load(&path).unwrap());
    let cancel = CancellationToken::new();
    let config = AgentConfig { port: driver.local_addr().port(), ..AgentConfig::default() };
    tokio::spawn(Agent::new(app, config).run(cancel.clone()));
    driver.wait_for_app(Duration::from_secs(5)).await.unwrap();
    (driver, cancel)
}

/// `driver.call("ping")`, `n` times.
async fn driver_rounds(driver: &Driver, n: usize, mut into: Option<&mut Histogram<u64>>) {
    for _ in 0..n {
        let started = Instant::now();
        driver.call("ping", None, Duration::from_secs(5)).await.unwrap();
        if let Some(h) = into.as_deref_mut() {
            h.record(started.elapsed().as_nanos() as u64).unwrap();
        }
    }
}

/// Calls per second with [`IN_FLIGHT`] callers.
async fn throughput(driver: &Arc<Driver>, total: usize) -> f64 {
    let per_caller = total / IN_FLIGHT;
    let started = Instant::now();
    let callers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let driver = driver.clone();
            tokio::spawn(async move {
                for _ in 0..per_caller {
                    driver.call("ping", None, Duration::from_secs(5)).await.unwrap();
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    (per_caller * IN_FLIGHT) as f64 / started.elapsed().as_secs_f64()
}
