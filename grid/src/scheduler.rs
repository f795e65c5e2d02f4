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

pub use crate::matching::{Capabilities, Selector};

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

/// Pending attempts, each run's kept in the order it wants them run
/// (longest expected first, then suite order): a device's next attempt is
/// found at the head of each run's queue rather than by looking at every
/// pending attempt, so a dispatch costs the number of runs, not of cases.
#[derive(Debug)]
pub struct Queue<K> {
    runs: BTreeMap<String, BTreeMap<Rank, Pending<K>>>,
    len: usize,
    /// Tells apart attempts of equal rank (a case's retries), first queued first.
    pushed: u64,
}

/// Longest expected first, then the suite's order, then first queued.
type Rank = (std::cmp::Reverse<i64>, i64, u64);

impl<K> Default for Queue<K> {
    fn default() -> Self {
        Self { runs: BTreeMap::new(), len: 0, pushed: 0 }
    }
}

/// A new run's attempts, ranked before they join the queue: a suite of
/// 100,000 cases is ranked off the owner task, then joins at once.
#[derive(Debug)]
pub struct RunQueue<K> {
    run_id: String,
    ranked: BTreeMap<Rank, Pending<K>>,
}

impl<K> RunQueue<K> {
    /// `attempts` of run `run_id`, in the order they would have been pushed.
    pub fn of(run_id: String, attempts: impl IntoIterator<Item = Pending<K>>) -> Self {
        let ranked = attempts
            .into_iter()
            .enumerate()
            .map(|(n, attempt)| ((std::cmp::Reverse(attempt.expected_ms), attempt.ordinal, n as u64), attempt))
            .collect();
        Self { run_id, ranked }
    }
}

impl<K> Queue<K> {
    /// Adds a new run's ranked attempts: as if each had been pushed.
    pub fn add_run(&mut self, queue: RunQueue<K>) {
        let RunQueue { run_id, ranked } = queue;
        if self.runs.contains_key(&run_id) {
            // Not new after all: each is ranked after what is queued.
            ranked.into_values().for_each(|attempt| self.push(attempt));
            return;
        }
        // What is pushed later ranks after these among equals.
        self.pushed = self.pushed.max(ranked.len() as u64);
        self.len += ranked.len();
        if !ranked.is_empty() {
            self.runs.insert(run_id, ranked);
        }
    }

    pub fn push(&mut self, attempt: Pending<K>) {
        self.pushed += 1;
        let rank = (std::cmp::Reverse(attempt.expected_ms), attempt.ordinal, self.pushed);
        self.runs.entry(attempt.run_id.clone()).or_default().insert(rank, attempt);
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many attempts each run with any has waiting.
    pub fn per_run(&self) -> impl Iterator<Item = (&str, usize)> {
        self.runs.iter().map(|(run, queue)| (run.as_str(), queue.len()))
    }

    /// Drops a run's attempts (it was cancelled or ended).
    pub fn remove_run(&mut self, run_id: &str) {
        if let Some(queue) = self.runs.remove(run_id) {
            self.len -= queue.len();
        }
    }

    /// Takes the attempt `device` should run, if any.
    ///
    /// Each run whose selector the device satisfies offers its best
    /// attempt, preferring one that does not ask to avoid this device
    /// (when any run has such an attempt, only those are offered); then the
    /// run furthest below its share gives its offer, ties to the run id.
    pub fn next_for(
        &mut self,
        device_id: &str,
        caps: &Capabilities,
        selectors: &HashMap<String, Selector>,
        shares: &HashMap<String, Share>,
    ) -> Option<Pending<K>> {
        let load = |run: &str| {
            let share = shares.get(run).copied().unwrap_or(Share { priority: 1, running: 0 });
            share.running as f64 / f64::from(share.priority.max(1))
        };
        // (free to run here, load, run id, rank) of the best offer so far.
        let mut best: Option<(bool, f64, &str, Rank)> = None;
        for (run, queue) in &self.runs {
            if !selectors.get(run).is_some_and(|s| s.is_satisfied_by(caps)) {
                continue;
            }
            let here = queue.iter().find(|(_, p)| p.avoid_device.as_deref() != Some(device_id));
            let Some((rank, free_here)) =
                here.map(|(rank, _)| (*rank, true)).or_else(|| queue.keys().next().map(|rank| (*rank, false)))
            else {
                continue;
            };
            let offer = (free_here, load(run), run.as_str(), rank);
            let wins = match &best {
                None => true,
                Some((b_free, b_load, b_run, _)) => {
                    (free_here && !b_free)
                        || (free_here == *b_free && offer.1.total_cmp(b_load).then_with(|| offer.2.cmp(b_run)).is_lt())
                }
            };
            if wins {
                best = Some(offer);
            }
        }
        let (_, _, run, rank) = best?;
        let run = run.to_owned();
        let queue = self.runs.get_mut(&run)?;
        let attempt = queue.remove(&rank)?;
        if queue.is_empty() {
            self.runs.remove(&run);
        }
        self.len -= 1;
        Some(attempt)
    }
}

/// Whether a free device goes to a WebDriver session that waits for one
/// rather than to a run's pending attempt. The sessions are one tenant of
/// priority 1 in the fair share: the device goes to them while they hold no
/// more devices than the least served of the `competing` runs (those with
/// work this device can do) holds per unit of priority; ties to the session,
/// whose client waits on the line.
pub fn session_goes_first(sessions_running: usize, competing: impl IntoIterator<Item = Share>) -> bool {
    let least = competing.into_iter().map(|s| s.running as f64 / f64::from(s.priority.max(1))).min_by(f64::total_cmp);
    least.is_none_or(|least| sessions_running as f64 <= least)
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

    fn queue(attempts: impl IntoIterator<Item = Pending<String>>) -> Queue<String> {
        let mut queue = Queue::default();
        for attempt in attempts {
            queue.push(attempt);
        }
        queue
    }

    fn next(queue: &mut Queue<String>, device: &str, selectors: &HashMap<String, Selector>) -> Option<String> {
        queue.next_for(device, &caps("ios"), selectors, &HashMap::new()).map(|p| p.key)
    }

    #[test]
    fn a_run_ranked_apart_comes_out_as_if_each_attempt_were_pushed() {
        let attempts = || {
            [pending("r1", "a", 10, 0), pending("r1", "b", 50, 1), pending("r1", "c", 50, 2), pending("r1", "d", 5, 3)]
        };
        let (mut pushed, mut added) = (queue([pending("r0", "x", 20, 0)]), queue([pending("r0", "x", 20, 0)]));
        attempts().into_iter().for_each(|a| pushed.push(a));
        added.add_run(RunQueue::of("r1".into(), attempts()));
        assert_eq!(added.len(), pushed.len());
        // A retry queued later ranks after its equals either way.
        pushed.push(pending("r1", "b", 50, 1));
        added.push(pending("r1", "b", 50, 1));
        let selectors = HashMap::from([("r0".to_owned(), Selector::default()), ("r1".to_owned(), Selector::default())]);
        let order = |q: &mut Queue<String>| std::iter::from_fn(|| next(q, "d1", &selectors)).collect::<Vec<_>>();
        let expected = order(&mut pushed);
        assert_eq!(expected.len(), 6);
        assert_eq!(order(&mut added), expected);
        assert!(added.is_empty());
    }

    #[test]
    fn the_longest_expected_case_goes_first_ties_in_suite_order() {
        let selectors = HashMap::from([("r".to_owned(), Selector::default())]);
        let mut queue = queue([pending("r", "a", 100, 0), pending("r", "c", 900, 2), pending("r", "b", 900, 1)]);
        let order: Vec<Option<String>> = (0..4).map(|_| next(&mut queue, "d1", &selectors)).collect();
        assert_eq!(order, [Some("r/b".into()), Some("r/c".into()), Some("r/a".into()), None]);
        assert!(queue.is_empty());
    }

    #[test]
    fn nothing_for_a_device_no_run_can_use() {
        let selectors =
            HashMap::from([("r".to_owned(), Selector { platform: Some("android".into()), ..Default::default() })]);
        let mut queue = queue([pending("r", "a", 100, 0)]);
        assert_eq!(next(&mut queue, "d1", &selectors), None);
        assert_eq!(queue.len(), 1, "the attempt stays queued");
        let no_selector = HashMap::new();
        assert_eq!(next(&mut queue, "d1", &no_selector), None, "a run the owner does not know runs nowhere");
    }

    #[test]
    fn runs_share_devices_by_priority() {
        let selectors =
            HashMap::from([("low".to_owned(), Selector::default()), ("high".to_owned(), Selector::default())]);
        let mut queue = queue(
            (0..20).flat_map(|i| [pending("low", &format!("l{i}"), 100, i), pending("high", &format!("h{i}"), 100, i)]),
        );
        let mut shares = HashMap::from([
            ("low".to_owned(), Share { priority: 1, running: 0 }),
            ("high".to_owned(), Share { priority: 3, running: 0 }),
        ]);
        // Eight devices free up one after another.
        for device in 0..8 {
            let run = queue.next_for(&format!("d{device}"), &caps("ios"), &selectors, &shares).unwrap().run_id;
            shares.get_mut(&run).unwrap().running += 1;
        }
        assert_eq!((shares["high"].running, shares["low"].running), (6, 2));
        assert_eq!(queue.per_run().collect::<Vec<_>>(), [("high", 14), ("low", 18)]);
        queue.remove_run("high");
        assert_eq!(queue.len(), 18);
    }

    #[test]
    fn a_retry_avoids_the_device_it_failed_on_while_there_is_other_work() {
        let selectors = HashMap::from([("r".to_owned(), Selector::default()), ("s".to_owned(), Selector::default())]);
        let mut retry = pending("r", "flaky", 5_000, 0);
        retry.avoid_device = Some("d1".into());
        let attempts = [retry.clone(), pending("r", "b", 100, 1)];
        assert_eq!(next(&mut queue(attempts.clone()), "d1", &selectors), Some("r/b".into()));
        assert_eq!(next(&mut queue(attempts), "d2", &selectors), Some("r/flaky".into()));
        // Another run's work comes before a retry that avoids this device…
        let mut two_runs = queue([retry.clone(), pending("s", "x", 100, 0)]);
        assert_eq!(next(&mut two_runs, "d1", &selectors), Some("s/x".into()));
        // …but the retry is better than leaving the device idle.
        assert_eq!(next(&mut queue([retry]), "d1", &selectors), Some("r/flaky".into()), "better than idle");
    }

    #[test]
    fn sessions_and_runs_share_the_fleet() {
        let share = |priority, running| Share { priority, running };
        assert!(session_goes_first(0, []), "no run wants the device");
        assert!(session_goes_first(0, [share(1, 4)]), "a run holding devices gives one up to a waiting session");
        assert!(session_goes_first(2, [share(1, 2)]), "ties go to the session");
        assert!(!session_goes_first(3, [share(1, 2)]), "sessions holding more than the run wait");
        assert!(!session_goes_first(2, [share(3, 3), share(1, 1)]), "measured against the least served run");
        assert!(session_goes_first(1, [share(3, 6)]), "a priority-3 run with 6 devices has 2 per unit");
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
