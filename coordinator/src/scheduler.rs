//! Scheduling as a pure decision: which pending attempt a device that has
//! just freed up should run. Data in, decision out; the owner task does the
//! I/O (commit the lease, then send it).
//!
//! - **Matching**: a run's selector (platform, labels, app) against the
//!   device's capabilities; quarantined devices run nothing.
//! - **Fair share**: among runs with work this device can do, the one with
//!   the fewest running attempts per unit of priority goes first, so a
//!   priority-3 run gets three devices for each of a priority-1 run's, and a
//!   run alone gets every device.
//! - **Longest expected first** within a run, ties by the suite's order.
//! - **Retries elsewhere**: an attempt avoids the device its last try failed
//!   on while it has other work to offer that device.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// Which devices may run a run's cases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `hello.app.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

/// What a device offers, from its slot and its app's `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub platform: String,
    pub labels: BTreeMap<String, String>,
    pub app: Option<String>,
    pub quarantined: bool,
}

impl Selector {
    pub fn is_satisfied_by(&self, caps: &Capabilities) -> bool {
        !caps.quarantined
            && self.platform.as_ref().is_none_or(|p| p.eq_ignore_ascii_case(&caps.platform))
            && self.app.as_ref().is_none_or(|a| caps.app.as_deref() == Some(a.as_str()))
            && self.labels.iter().all(|(k, v)| caps.labels.get(k) == Some(v))
    }

    /// `platform=ios, app=Shop, k=v`, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = &self.platform {
            parts.push(format!("platform={p}"));
        }
        if let Some(a) = &self.app {
            parts.push(format!("app={a}"));
        }
        parts.extend(self.labels.iter().map(|(k, v)| format!("{k}={v}")));
        if parts.is_empty() { "any device".to_owned() } else { parts.join(", ") }
    }
}

/// A pending attempt, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending<K> {
    pub key: K,
    pub run_id: String,
    pub expected_ms: i64,
    /// The case's place in the suite: the tie-break.
    pub ordinal: i64,
    /// The device its previous try failed on.
    pub avoid_device: Option<String>,
}

/// A run's share of the fleet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub priority: u32,
    pub running: usize,
}

/// The index in `pending` of the attempt `device` should run, if any.
///
/// One pass over `pending`: each run's selector is checked once, and the
/// best attempt of each run is kept twice, among all its attempts and among
/// those that do not ask to avoid this device (preferred when there are
/// any). Then the run furthest below its share gives its best.
pub fn next_for<K>(
    device_id: &str,
    caps: &Capabilities,
    pending: &[Pending<K>],
    selectors: &HashMap<String, Selector>,
    shares: &HashMap<String, Share>,
) -> Option<usize> {
    let better = |a: usize, b: usize| {
        let (a, b) = (&pending[a], &pending[b]);
        a.expected_ms.cmp(&b.expected_ms).then_with(|| b.ordinal.cmp(&a.ordinal)) == std::cmp::Ordering::Greater
    };
    let mut runs_match: HashMap<&str, bool> = HashMap::new();
    // Per run: its best attempt of all, and of those free to run here.
    let mut best_any: HashMap<&str, usize> = HashMap::new();
    let mut best_here: HashMap<&str, usize> = HashMap::new();
    for (i, attempt) in pending.iter().enumerate() {
        let run = attempt.run_id.as_str();
        let matches =
            *runs_match.entry(run).or_insert_with(|| selectors.get(run).is_some_and(|s| s.is_satisfied_by(caps)));
        if !matches {
            continue;
        }
        keep_best(&mut best_any, run, i, &better);
        if attempt.avoid_device.as_deref() != Some(device_id) {
            keep_best(&mut best_here, run, i, &better);
        }
    }
    let candidates = if best_here.is_empty() { best_any } else { best_here };
    // The run furthest below its share.
    let load = |run: &str| {
        let share = shares.get(run).copied().unwrap_or(Share { priority: 1, running: 0 });
        share.running as f64 / f64::from(share.priority.max(1))
    };
    candidates
        .into_iter()
        .min_by(|(a, _), (b, _)| load(a).total_cmp(&load(b)).then_with(|| a.cmp(b)))
        .map(|(_, index)| index)
}

/// Keeps `index` as `run`'s best if it is better than the one kept.
fn keep_best<'a>(
    best: &mut HashMap<&'a str, usize>,
    run: &'a str,
    index: usize,
    better: &impl Fn(usize, usize) -> bool,
) {
    let slot = best.entry(run).or_insert(index);
    if better(index, *slot) {
        *slot = index;
    }
}

/// Expected durations for a run's cases: each case's history where there is
/// some, else the median of the run's known cases, else `default_ms`.
pub fn estimate(history: &[Option<i64>], default_ms: i64) -> Vec<(i64, &'static str)> {
    let mut known: Vec<i64> = history.iter().flatten().copied().collect();
    known.sort_unstable();
    let fallback = known.get(known.len() / 2).copied();
    history
        .iter()
        .map(|h| match (h, fallback) {
            (Some(ms), _) => (*ms, "history"),
            (None, Some(ms)) => (ms, "estimate"),
            (None, None) => (default_ms, "default"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(platform: &str) -> Capabilities {
        Capabilities { platform: platform.into(), ..Default::default() }
    }

    fn pending(run: &str, case: &str, ms: i64, ordinal: i64) -> Pending<String> {
        Pending { key: format!("{run}/{case}"), run_id: run.into(), expected_ms: ms, ordinal, avoid_device: None }
    }

    #[test]
    fn selectors_match_platform_labels_and_app() {
        let mut device = caps("ios");
        device.labels.insert("os".into(), "17".into());
        device.app = Some("Shop".into());
        let cases = [
            (Selector::default(), true),
            (Selector { platform: Some("ios".into()), ..Default::default() }, true),
            (Selector { platform: Some("IOS".into()), ..Default::default() }, true),
            (Selector { platform: Some("android".into()), ..Default::default() }, false),
            (Selector { app: Some("Shop".into()), ..Default::default() }, true),
            (Selector { app: Some("Bank".into()), ..Default::default() }, false),
            (Selector { labels: [("os".to_owned(), "17".to_owned())].into(), ..Default::default() }, true),
            (Selector { labels: [("os".to_owned(), "16".to_owned())].into(), ..Default::default() }, false),
            (Selector { labels: [("tablet".to_owned(), "yes".to_owned())].into(), ..Default::default() }, false),
        ];
        for (selector, expected) in cases {
            assert_eq!(selector.is_satisfied_by(&device), expected, "{}", selector.describe());
        }
        device.quarantined = true;
        assert!(!Selector::default().is_satisfied_by(&device), "a quarantined device runs nothing");
    }

    #[test]
    fn the_longest_expected_case_goes_first_ties_in_suite_order() {
        let selectors = HashMap::from([("r".to_owned(), Selector::default())]);
        let queue = vec![pending("r", "a", 100, 0), pending("r", "b", 900, 1), pending("r", "c", 900, 2)];
        let pick = next_for("d1", &caps("ios"), &queue, &selectors, &HashMap::new());
        assert_eq!(pick, Some(1));
    }

    #[test]
    fn nothing_for_a_device_no_run_can_use() {
        let selectors =
            HashMap::from([("r".to_owned(), Selector { platform: Some("android".into()), ..Default::default() })]);
        let queue = vec![pending("r", "a", 100, 0)];
        assert_eq!(next_for("d1", &caps("ios"), &queue, &selectors, &HashMap::new()), None);
    }

    #[test]
    fn runs_share_devices_by_priority() {
        let selectors =
            HashMap::from([("low".to_owned(), Selector::default()), ("high".to_owned(), Selector::default())]);
        let queue: Vec<Pending<String>> = (0..20)
            .flat_map(|i| [pending("low", &format!("l{i}"), 100, i), pending("high", &format!("h{i}"), 100, i)])
            .collect();
        let mut shares = HashMap::from([
            ("low".to_owned(), Share { priority: 1, running: 0 }),
            ("high".to_owned(), Share { priority: 3, running: 0 }),
        ]);
        let mut queue = queue;
        // Eight devices free up one after another.
        for device in 0..8 {
            let i = next_for(&format!("d{device}"), &caps("ios"), &queue, &selectors, &shares).unwrap();
            let run = queue.remove(i).run_id;
            shares.get_mut(&run).unwrap().running += 1;
        }
        assert_eq!((shares["high"].running, shares["low"].running), (6, 2));
    }

    #[test]
    fn a_retry_avoids_the_device_it_failed_on_while_there_is_other_work() {
        let selectors = HashMap::from([("r".to_owned(), Selector::default())]);
        let mut retry = pending("r", "flaky", 5_000, 0);
        retry.avoid_device = Some("d1".into());
        let queue = vec![retry, pending("r", "b", 100, 1)];
        assert_eq!(next_for("d1", &caps("ios"), &queue, &selectors, &HashMap::new()), Some(1));
        assert_eq!(next_for("d2", &caps("ios"), &queue, &selectors, &HashMap::new()), Some(0));
        let only_retry = vec![queue[0].clone()];
        assert_eq!(next_for("d1", &caps("ios"), &only_retry, &selectors, &HashMap::new()), Some(0), "better than idle");
    }

    #[test]
    fn estimates_come_from_history_then_the_run_then_a_default() {
        assert_eq!(
            estimate(&[Some(900), None, Some(300), Some(600)], 30_000),
            [(900, "history"), (600, "estimate"), (300, "history"), (600, "history")]
        );
        assert_eq!(estimate(&[None, None], 30_000), [(30_000, "default"), (30_000, "default")]);
    }
}
