//! The diff of a 100-step failed attempt against its baseline: how long it
//! takes (p50, p99 over 2,000 diffs) and how many bytes a step's record
//! costs, encoded as the store keeps it. Each step has a screen of 40
//! named elements, two requests and an event, like a busy app's.
//!
//! `cargo bench -p argus-grid --bench explain`

use std::collections::HashMap;
use std::time::Instant;

use argus_history::explain::{Facts, Side, cause, diff};
use argus_proto::grpc::{AttemptObserved, ObservedElement, ObservedRequest, StepObservation};
use prost::Message;

const STEPS: u32 = 100;
const ELEMENTS: usize = 40;

fn attempt(failing: Option<u32>, status: u32) -> AttemptObserved {
    let steps = (0..STEPS)
        .map(|i| StepObservation {
            index: i,
            step: format!("app.press #item-{i}"),
            status: if Some(i) == failing { "failed".into() } else { "passed".into() },
            ms: 120 + u64::from(i % 7),
            error: if Some(i) == failing { "not on screen: {\"testId\":\"pay\"}".into() } else { String::new() },
            screen_read: true,
            route: format!("Screen{}", i / 10),
            window_w: 390.0,
            window_h: 844.0,
            elements: (0..ELEMENTS)
                .map(|e| ObservedElement {
                    kind: if e % 3 == 0 { "button".into() } else { "text".into() },
                    test_id: format!("item-{e}"),
                    text: format!("Item number {e} · 12.{e} €"),
                    value: String::new(),
                    disabled: e == 7,
                    hidden: String::new(),
                    covered: false,
                    frame: Some(argus_proto::grpc::ElementFrame {
                        x: 16.0,
                        y: 60.0 + 20.0 * e as f32,
                        w: 358.0,
                        h: 18.0,
                    }),
                })
                .collect(),
            requests: vec![
                ObservedRequest {
                    method: "GET".into(),
                    url: format!("https://api.shop.test/items?page={i}"),
                    status: 200,
                    ms: 80,
                    error: String::new(),
                },
                ObservedRequest {
                    method: "POST".into(),
                    url: "https://api.shop.test/api/cart".into(),
                    status,
                    ms: 60,
                    error: String::new(),
                },
            ],
            events: vec![format!("Viewed item {i}")],
            problems: Vec::new(),
            truncated: false,
            timeout_ms: 3_000,
        })
        .collect();
    AttemptObserved {
        steps,
        app_version: "2.4.0".into(),
        agent_version: "0.2.1".into(),
        device_model: "iPhone 15".into(),
        os_version: "17.4".into(),
        truncated: false,
    }
}

fn main() {
    let failed = Side { observed: attempt(Some(90), 503), device_id: "w1/8123".into(), ..Side::default() };
    let baseline = Side { observed: attempt(None, 200), device_id: "w2/8123".into(), ..Side::default() };
    let times: HashMap<usize, Vec<u64>> = (0..STEPS as usize).map(|i| (i, vec![120, 121, 125, 119, 130])).collect();
    let facts = Facts::default();
    let mut took = Vec::new();
    let mut kinds = HashMap::new();
    for _ in 0..2_000 {
        let started = Instant::now();
        let changes = diff::changes(&failed, Some(&baseline), &times);
        let cause = cause::cause(&failed, Some(&baseline), &changes, &facts);
        took.push(started.elapsed());
        *kinds.entry(cause.kind).or_insert(0) += 1;
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    let bytes = failed.observed.encoded_len();
    println!("diff of a {STEPS}-step attempt ({ELEMENTS} elements a step), 2,000 times: causes {kinds:?}");
    println!(
        "  p50 {:.3} ms, p99 {:.3} ms (goal: p99 < 20 ms)",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3
    );
    println!(
        "  record: {bytes} bytes encoded, {} bytes a step; a 10,000-case nightly of 10-step cases with 5% failures keeps {:.1} MiB of failures' records",
        bytes / STEPS as usize,
        (10_000.0 * 0.05 * 10.0 * (bytes / STEPS as usize) as f64) / (1024.0 * 1024.0)
    );
}
