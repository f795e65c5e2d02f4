//! The driver's cost over the wire it rides on, side by side in one process:
//!
//! 1. a raw tokio-tungstenite echo on loopback (the floor);
//! 2. the driver ⇄ simulated app round trip for a small request (`ping`);
//! 3. throughput with 64 calls in flight.
//!
//! Prints p50 and p99 of each and their ratio to the raw echo.
//! `cargo bench -p argus-worker --bench driver_roundtrip [-- ROUNDS]`

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

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let echo = raw_echo(rounds).await;
        let (driver, throughput) = driver_round_trip(rounds).await;
        println!("round trip of a small request on loopback, {rounds} rounds after {WARMUP} warm-up");
        println!("{:<28} {:>10} {:>10}", "", "p50 µs", "p99 µs");
        row("raw tokio-tungstenite echo", &echo);
        row("driver ⇄ simulated app", &driver);
        let p50 = driver.value_at_quantile(0.5) as f64 / echo.value_at_quantile(0.5) as f64;
        let p99 = driver.value_at_quantile(0.99) as f64 / echo.value_at_quantile(0.99) as f64;
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

/// A client sends a ping-sized text frame and waits for the server to echo it.
async fn raw_echo(rounds: usize) -> Histogram<u64> {
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
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(format!("ws://{addr}"), None, true).await.unwrap();
    let mut latencies = histogram();
    let frame = r#"{"id":1,"method":"ping"}"#;
    for round in 0..WARMUP + rounds {
        let started = Instant::now();
        ws.send(Message::text(frame)).await.unwrap();
        let echoed = ws.next().await.unwrap().unwrap();
        let elapsed = started.elapsed();
        assert!(echoed.is_text());
        if round >= WARMUP {
            latencies.record(elapsed.as_nanos() as u64).unwrap();
        }
    }
    latencies
}

/// `driver.call("ping")` answered by the simulated app running the shop model.
async fn driver_round_trip(rounds: usize) -> (Histogram<u64>, f64) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let driver =
        Arc::new(Driver::from_listener(listener, DriverConfig { port: 0, ..DriverConfig::default() }).unwrap());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let app = App::new(Model::load(&path).unwrap());
    let cancel = CancellationToken::new();
    let config = AgentConfig { port: driver.local_addr().port(), ..AgentConfig::default() };
    tokio::spawn(Agent::new(app, config).run(cancel.clone()));
    driver.wait_for_app(Duration::from_secs(5)).await.unwrap();

    let timeout = Duration::from_secs(5);
    let mut latencies = histogram();
    for round in 0..WARMUP + rounds {
        let started = Instant::now();
        driver.call("ping", None, timeout).await.unwrap();
        let elapsed = started.elapsed();
        if round >= WARMUP {
            latencies.record(elapsed.as_nanos() as u64).unwrap();
        }
    }

    let total = rounds * 4;
    let per_caller = total / IN_FLIGHT;
    let started = Instant::now();
    let callers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let driver = driver.clone();
            tokio::spawn(async move {
                for _ in 0..per_caller {
                    driver.call("ping", None, timeout).await.unwrap();
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let throughput = (per_caller * IN_FLIGHT) as f64 / started.elapsed().as_secs_f64();
    cancel.cancel();
    driver.close().await;
    (latencies, throughput)
}
