//! Two runs side by side: what a change broke, fixed, added or slowed
//! against the run it is compared with. A pure function of the two runs'
//! outcomes per case and platform and each case's own spread of passing
//! durations; [`compare_runs`] reads them from the store.

use std::collections::{BTreeMap, HashMap};

use argus_store::{AttemptEnd, Store};
use serde::Serialize;

use crate::explain::ExplainError;

/// How one case ended in one run, on one platform.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub case_id: String,
    pub platform: String,
    /// `passed`, `failed`, `unsupported`; `None` when it did not end.
    pub result: Option<String>,
    /// Its last attempt's duration.
    pub ms: Option<i64>,
    /// Why its last failed attempt failed ("Why it failed"), when it did.
    pub cause: Option<String>,
}

/// What changed for one case on one platform from run A to run B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `new-failure`, `fixed`, `still-failing`, `added`, `removed`,
    /// `slower`, `faster`.
    pub kind: &'static str,
    pub case_id: String,
    pub platform: String,
    pub from_result: Option<String>,
    pub to_result: Option<String>,
    pub from_cause: Option<String>,
    pub to_cause: Option<String>,
    /// For `still-failing`: whether the cause is another one.
    pub cause_changed: bool,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// For `slower` and `faster`: how far the case's own passing durations
    /// spread (1.4826 × their median absolute deviation).
    pub spread_ms: Option<i64>,
}

/// A duration moves when it is this many spreads away, and by more than
/// [`MOVED_MIN_MS`] (a 20 ms case jitters by more than its spread says).
const MOVED_SPREADS: f64 = 3.0;
const MOVED_MIN_MS: i64 = 50;
/// Fewer passing durations than this say nothing of a case's spread.
pub const SPREAD_SAMPLES: usize = 5;

/// A case's spread from its sorted passing durations; `None` with too few.
pub fn spread(sorted_ms: &[i64]) -> Option<f64> {
    if sorted_ms.len() < SPREAD_SAMPLES {
        return None;
    }
    let median = sorted_ms[sorted_ms.len() / 2];
    let mut deviations: Vec<i64> = sorted_ms.iter().map(|ms| (ms - median).abs()).collect();
    deviations.sort_unstable();
    Some(1.4826 * deviations[deviations.len() / 2] as f64)
}

/// The changes from `a` to `b`, new failures first, then fixed, still
/// failing, added, removed, slower, faster; by case within each. `spreads`
/// is keyed by case and platform.
pub fn compare(a: &[Outcome], b: &[Outcome], spreads: &HashMap<(String, String), f64>) -> Vec<Change> {
    // Keyed by borrowed names: a nightly run has 10,000 cases a side.
    fn key(o: &Outcome) -> (&str, &str) {
        (o.case_id.as_str(), o.platform.as_str())
    }
    let before: HashMap<(&str, &str), &Outcome> = a.iter().map(|o| (key(o), o)).collect();
    let after: HashMap<(&str, &str), &Outcome> = b.iter().map(|o| (key(o), o)).collect();
    let change = |kind, k: &(&str, &str), from: Option<&Outcome>, to: Option<&Outcome>| Change {
        kind,
        case_id: k.0.to_owned(),
        platform: k.1.to_owned(),
        from_result: from.and_then(|o| o.result.clone()),
        to_result: to.and_then(|o| o.result.clone()),
        from_cause: from.and_then(|o| o.cause.clone()),
        to_cause: to.and_then(|o| o.cause.clone()),
        cause_changed: false,
        from_ms: from.and_then(|o| o.ms),
        to_ms: to.and_then(|o| o.ms),
        spread_ms: None,
    };
    let failed = |o: &Outcome| o.result.as_deref() == Some("failed");
    let passed = |o: &Outcome| o.result.as_deref() == Some("passed");
    let mut changes = Vec::new();
    for (k, to) in &after {
        let Some(from) = before.get(k) else {
            changes.push(change("added", k, None, Some(to)));
            continue;
        };
        match (failed(from), failed(to)) {
            (false, true) => changes.push(change("new-failure", k, Some(from), Some(to))),
            (true, false) if passed(to) => changes.push(change("fixed", k, Some(from), Some(to))),
            (true, true) => changes.push(Change {
                cause_changed: from.cause != to.cause,
                ..change("still-failing", k, Some(from), Some(to))
            }),
            _ => {}
        }
        if passed(from)
            && passed(to)
            && let (Some(x), Some(y)) = (from.ms, to.ms)
            && (y - x).abs() > MOVED_MIN_MS
            && let Some(spread) = spreads.get(&(k.0.to_owned(), k.1.to_owned()))
        {
            let moved = y - x;
            if moved.abs() as f64 > MOVED_SPREADS * spread {
                let kind = if moved > 0 { "slower" } else { "faster" };
                changes
                    .push(Change { spread_ms: Some(spread.round() as i64), ..change(kind, k, Some(from), Some(to)) });
            }
        }
    }
    for (k, from) in &before {
        if !after.contains_key(k) {
            changes.push(change("removed", k, Some(from), None));
        }
    }
    const ORDER: [&str; 7] = ["new-failure", "fixed", "still-failing", "added", "removed", "slower", "faster"];
    let rank = |c: &Change| ORDER.iter().position(|k| *k == c.kind);
    changes.sort_by(|x, y| (rank(x), &x.case_id, &x.platform).cmp(&(rank(y), &y.case_id, &y.platform)));
    changes
}

/// Each case's outcome in a run: its last finished attempt's platform,
/// duration and result, and the cause of its failure when it failed.
pub fn outcomes(attempts: &[AttemptEnd], causes: &HashMap<String, String>) -> Vec<Outcome> {
    let mut last: HashMap<&str, &AttemptEnd> = HashMap::new();
    for attempt in attempts {
        let newer = last
            .get(attempt.case_id.as_str())
            .is_none_or(|l| (attempt.attempt, attempt.try_no) > (l.attempt, l.try_no));
        if newer {
            last.insert(&attempt.case_id, attempt);
        }
    }
    last.into_values()
        .map(|a| Outcome {
            case_id: a.case_id.clone(),
            platform: a.platform.clone().unwrap_or_default(),
            result: a.result.clone().or_else(|| (a.infrastructure != 0).then(|| "infrastructure".to_owned())),
            ms: a.ms,
            cause: causes.get(&a.case_id).cloned(),
        })
        .collect()
}

/// The cases whose spread can decide a change, by platform: those that
/// passed in both runs and moved by more than [`MOVED_MIN_MS`]. The others
/// are never `slower` or `faster`, so their passing history (the store's
/// [`argus_store::KEPT_PASSES`] each) is not read.
pub fn spreads_needed(a: &[Outcome], b: &[Outcome]) -> BTreeMap<String, Vec<String>> {
    let passed = |o: &Outcome| o.result.as_deref() == Some("passed");
    let before: HashMap<(&str, &str), &Outcome> =
        a.iter().filter(|o| passed(o)).map(|o| ((o.case_id.as_str(), o.platform.as_str()), o)).collect();
    let mut needed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for to in b.iter().filter(|o| passed(o)) {
        let Some(from) = before.get(&(to.case_id.as_str(), to.platform.as_str())) else { continue };
        if let (Some(x), Some(y)) = (from.ms, to.ms)
            && (y - x).abs() > MOVED_MIN_MS
        {
            needed.entry(to.platform.clone()).or_default().push(to.case_id.clone());
        }
    }
    needed
}

/// One side of a comparison: how each case of a run ended, and why.
async fn side(store: &Store, run: &str) -> Result<Vec<Outcome>, ExplainError> {
    store.get_run(run).await?;
    let (explained, ends) = tokio::try_join!(crate::explain::explain_run(store, run), async {
        store.run_ends(run).await.map_err(ExplainError::from)
    })?;
    let causes: HashMap<String, String> =
        explained.0.into_iter().map(|e| (e.case_id, e.cause.kind.to_owned())).collect();
    Ok(outcomes(&ends, &causes))
}

/// Reads two runs and compares them.
pub async fn compare_runs(store: &Store, a: &str, b: &str) -> Result<Vec<Change>, ExplainError> {
    // Both sides at once, each on connections of its own: a nightly run's
    // side is reads of 10,000 rows that the database answers meanwhile.
    let (before, after) = tokio::try_join!(side(store, a), side(store, b))?;
    let sides = [before, after];
    let mut spreads = HashMap::new();
    for (platform, case_ids) in spreads_needed(&sides[0], &sides[1]) {
        for (case_id, ms) in store.kept_passed_ms(&case_ids, &platform).await? {
            if let Some(spread) = spread(&ms) {
                spreads.insert((case_id, platform.clone()), spread);
            }
        }
    }
    Ok(compare(&sides[0], &sides[1], &spreads))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(case: &str, result: &str, ms: i64, cause: Option<&str>) -> Outcome {
        Outcome {
            case_id: case.into(),
            platform: "ios".into(),
            result: Some(result.into()),
            ms: Some(ms),
            cause: cause.map(str::to_owned),
        }
    }

    fn kinds(changes: &[Change]) -> Vec<(&str, &str)> {
        changes.iter().map(|c| (c.kind, c.case_id.as_str())).collect()
    }

    #[test]
    fn new_failures_fixes_still_failing_added_and_removed_are_named_in_that_order() {
        let a = [
            outcome("login", "passed", 100, None),
            outcome("cart", "failed", 100, Some("backend")),
            outcome("feed", "failed", 100, Some("app")),
            outcome("gone", "passed", 100, None),
            outcome("same", "passed", 100, None),
        ];
        let b = [
            outcome("login", "failed", 100, Some("timing")),
            outcome("cart", "passed", 100, None),
            outcome("feed", "failed", 100, Some("backend")),
            outcome("new", "passed", 100, None),
            outcome("same", "passed", 100, None),
        ];
        let changes = compare(&a, &b, &HashMap::new());
        assert_eq!(
            kinds(&changes),
            [
                ("new-failure", "login"),
                ("fixed", "cart"),
                ("still-failing", "feed"),
                ("added", "new"),
                ("removed", "gone")
            ]
        );
        assert!(changes[2].cause_changed);
        assert_eq!((changes[2].from_cause.as_deref(), changes[2].to_cause.as_deref()), (Some("app"), Some("backend")));
        assert_eq!(changes[0].to_cause.as_deref(), Some("timing"));
    }

    #[test]
    fn a_duration_moves_only_beyond_its_own_spread() {
        let spreads = HashMap::from([
            (("slow".to_owned(), "ios".to_owned()), 40.0),
            (("noisy".to_owned(), "ios".to_owned()), 400.0),
        ]);
        let a = [
            outcome("slow", "passed", 1_000, None),
            outcome("noisy", "passed", 1_000, None),
            outcome("unknown", "passed", 1_000, None),
        ];
        let b = [
            outcome("slow", "passed", 1_200, None),
            outcome("noisy", "passed", 2_000, None),
            outcome("unknown", "passed", 9_000, None),
        ];
        let changes = compare(&a, &b, &spreads);
        // 200 ms beyond 3 × 40; 1,000 ms within 3 × 400; no spread known.
        assert_eq!(kinds(&changes), [("slower", "slow")]);
        assert_eq!(changes[0].spread_ms, Some(40));
        let faster = compare(&b, &a, &spreads);
        assert_eq!(kinds(&faster), [("faster", "slow")]);
    }

    #[test]
    fn the_same_case_on_two_platforms_is_two_cases() {
        let a = [outcome("login", "passed", 100, None)];
        let b = [
            outcome("login", "passed", 100, None),
            Outcome { platform: "android".into(), ..outcome("login", "failed", 100, None) },
        ];
        assert_eq!(kinds(&compare(&a, &b, &HashMap::new())), [("added", "login")]);
    }

    #[test]
    fn only_cases_that_passed_twice_and_moved_have_their_spread_read() {
        let a = [
            outcome("steady", "passed", 1_000, None),
            outcome("moved", "passed", 1_000, None),
            outcome("broke", "passed", 1_000, None),
            outcome("gone", "passed", 1_000, None),
        ];
        let b = [
            outcome("steady", "passed", 1_050, None),
            outcome("moved", "passed", 1_051, None),
            outcome("broke", "failed", 3_000, Some("timeout")),
            outcome("new", "passed", 9_000, None),
        ];
        let needed = spreads_needed(&a, &b);
        assert_eq!(needed.into_iter().collect::<Vec<_>>(), [("ios".to_owned(), vec!["moved".to_owned()])]);
    }

    #[test]
    fn a_spread_needs_enough_passes_and_ignores_an_outlier() {
        assert_eq!(spread(&[100, 110, 120, 130]), None);
        let spread = spread(&[100, 100, 101, 102, 103, 5_000]).unwrap();
        assert!(spread < 5.0, "{spread}");
    }
}
