//! Scheduling on virtual time: how close each strategy gets to the lower
//! bound max(total work / devices, longest case), side by side, for 2,000
//! cases on 50 and 500 devices, with estimates off by up to ±30 %, with and
//! without history.
//!
//! - Argus: pull-based, longest expected first (`scheduler::Queue::next_for`).
//! - Static by count: the suite cut into equal shards in file order (most CI splits).
//! - Static by duration: shards balanced on the estimates, longest first
//!   (Flank, Firebase Test Lab).
//!
//! `cargo bench -p argus-grid --bench scheduling`

use std::collections::HashMap;

use argus_grid::scheduler::{Capabilities, Pending, Queue, Selector, estimate};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const CASES: usize = 2_000;
const DEFAULT_MS: i64 = 30_000;

/// Durations like a real suite: mostly short, some long.
fn suite(rng: &mut StdRng) -> Vec<i64> {
    (0..CASES)
        .map(|_| {
            let p: f64 = rng.random();
            let seconds: f64 = if p < 0.70 {
                rng.random_range(5.0..30.0)
            } else if p < 0.95 {
                rng.random_range(30.0..120.0)
            } else {
                rng.random_range(120.0..600.0)
            };
            (seconds * 1000.0) as i64
        })
        .collect()
}

fn argus(actual: &[i64], expected: &[i64], devices: usize) -> i64 {
    let selectors = HashMap::from([("run".to_owned(), Selector::default())]);
    let mut pending = Queue::default();
    for (i, &expected_ms) in expected.iter().enumerate() {
        pending.push(Pending { key: i, run_id: "run".into(), expected_ms, ordinal: i as i64, avoid_device: None });
    }
    let caps = Capabilities { platform: "ios".into(), ..Default::default() };
    let mut free_at = vec![0i64; devices];
    while !pending.is_empty() {
        // The device that frees up first pulls the next attempt.
        let (device, now) = free_at.iter().enumerate().min_by_key(|(_, t)| **t).map(|(d, t)| (d, *t)).unwrap();
        let case = pending.next_for(&device.to_string(), &caps, &selectors, &HashMap::new()).unwrap().key;
        free_at[device] = now + actual[case];
    }
    *free_at.iter().max().unwrap()
}

fn by_count(actual: &[i64], devices: usize) -> i64 {
    let per = actual.len().div_ceil(devices);
    actual.chunks(per).map(|shard| shard.iter().sum::<i64>()).max().unwrap()
}

fn by_duration(actual: &[i64], expected: &[i64], devices: usize) -> i64 {
    let mut order: Vec<usize> = (0..actual.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(expected[i]));
    let mut planned = vec![0i64; devices];
    let mut real = vec![0i64; devices];
    for i in order {
        let shard = (0..devices).min_by_key(|&s| planned[s]).unwrap();
        planned[shard] += expected[i];
        real[shard] += actual[i];
    }
    *real.iter().max().unwrap()
}

fn main() {
    let mut rng = StdRng::seed_from_u64(7);
    let actual = suite(&mut rng);
    let total: i64 = actual.iter().sum();
    let longest = *actual.iter().max().unwrap();
    println!(
        "{CASES} cases, {:.1} h of work, longest {:.0} s; makespan ÷ lower bound (1.00 is perfect)",
        total as f64 / 3.6e6,
        longest as f64 / 1e3
    );
    println!("{:>8} {:>9} {:>8} {:>16} {:>19}", "devices", "history", "argus", "static by count", "static by duration");
    let mut worst = (0.0f64, 0.0f64);
    for devices in [50, 500] {
        let bound = (total / devices as i64).max(longest);
        for history in [true, false] {
            // With history: the median of past runs, off by up to ±30 %.
            // Without: every case gets the same estimate (the default).
            let known: Vec<Option<i64>> =
                actual.iter().map(|&ms| history.then(|| (ms as f64 * rng.random_range(0.7..1.3)) as i64)).collect();
            let expected: Vec<i64> = estimate(&known, DEFAULT_MS).into_iter().map(|(ms, _)| ms).collect();
            let ratio = |makespan: i64| makespan as f64 / bound as f64;
            let (a, c, d) = (
                ratio(argus(&actual, &expected, devices)),
                ratio(by_count(&actual, devices)),
                ratio(by_duration(&actual, &expected, devices)),
            );
            println!("{devices:>8} {:>9} {a:>8.3} {c:>16.3} {d:>19.3}", if history { "yes" } else { "no" });
            let slot = if history { &mut worst.0 } else { &mut worst.1 };
            *slot = slot.max(a);
            assert!(a <= c.min(d) + 1e-9, "argus must never lose to a static split");
        }
    }
    println!("goal: argus ≤ 1.10 with history (worst {:.3}), ≤ 1.30 without (worst {:.3})", worst.0, worst.1);
}
