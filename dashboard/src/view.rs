//! What the dashboard shows, built once from the store's rows and served
//! both as JSON (`/api/v1/…`) and as pages: one shape for both.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use argus_proto::run::RunCase;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use argus_store::{AttemptDetail, CaseAttempt, RunRow};

/// Epoch milliseconds as ISO 8601 (UTC, seconds).
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_default()
}

/// `1.2 s`, `3 m 04 s`, `850 ms`.
pub fn duration(ms: i64) -> String {
    match ms {
        ..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} m {:02} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub trigger: Option<String>,
    pub started_ms: i64,
    pub started: String,
    pub finished_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    /// `running`, `passed`, `failed` or `cancelled`.
    pub result: String,
    pub platform: Option<String>,
    pub cases: Option<i64>,
    pub passed: Option<i64>,
    pub failed: Option<i64>,
    pub retried: Option<i64>,
    /// For a run that is going: attempts finished so far.
    pub finished_attempts: Option<i64>,
    /// For a run that waits: why no device takes its attempts.
    pub waiting: Option<String>,
    /// Its failed cases that were muted (they did not fail it).
    pub muted_failed: Option<i64>,
    /// The run whose failed cases it ran again.
    pub rerun_of: Option<String>,
}

impl RunView {
    pub fn new(row: RunRow) -> Self {
        let result = match (&row.result, row.finished_at) {
            (_, None) => "running".to_owned(),
            (Some(result), Some(_)) => result.clone(),
            (None, Some(_)) => "cancelled".to_owned(),
        };
        Self {
            started: iso(row.started_at),
            duration_ms: row.finished_at.map(|f| f - row.started_at),
            id: row.id,
            project: row.project,
            branch: row.branch,
            commit: row.commit_sha,
            trigger: row.trigger_by,
            started_ms: row.started_at,
            finished_ms: row.finished_at,
            result,
            platform: row.platform,
            cases: row.cases,
            passed: row.passed,
            failed: row.failed,
            retried: row.retried,
            finished_attempts: None,
            waiting: row.waiting_reason.filter(|_| row.finished_at.is_none()),
            muted_failed: row.muted_failed.filter(|n| *n > 0),
            rerun_of: row.rerun_of,
        }
    }

    pub fn duration_text(&self) -> String {
        self.duration_ms.map(duration).unwrap_or_else(|| "—".into())
    }

    pub fn short_commit(&self) -> &str {
        self.commit.as_deref().map(|c| &c[..c.len().min(8)]).unwrap_or("")
    }
}

/// One attempt: where and when it ran, and its line of `cases.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    pub attempt: i64,
    pub try_no: i64,
    pub device: Option<String>,
    pub worker: Option<String>,
    pub platform: Option<String>,
    /// The page's anchor of this attempt (`c3a1`), where its bar on the
    /// timeline leads.
    pub anchor: String,
    /// `passed`, `failed`, `unsupported`, `infrastructure`, `running` or `pending`.
    pub result: String,
    pub error: Option<String>,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub ms: Option<i64>,
    /// Its line of `cases.jsonl` as it was written: served as it is (a
    /// nightly run's answer holds 10,000 of them; reading each into a
    /// [`RunCase`] and writing it out again cost a third of its time).
    #[serde(rename = "line")]
    pub record: Option<Box<RawValue>>,
    /// The same line read, for the page, the first time it is asked for.
    #[serde(skip)]
    read: OnceLock<Option<RunCase>>,
}

impl AttemptView {
    fn new(row: AttemptDetail) -> Self {
        let result = match (row.state.as_str(), row.infrastructure, row.result) {
            (_, 1, _) => "infrastructure".to_owned(),
            ("done", _, Some(result)) => result,
            ("leased", _, _) => "running".to_owned(),
            (state, _, _) => state.to_owned(),
        };
        Self {
            attempt: row.attempt,
            try_no: row.try_no,
            device: row.device_id,
            worker: row.worker_id,
            platform: row.platform,
            anchor: String::new(),
            result,
            error: row.error,
            started_ms: row.started_at,
            finished_ms: row.finished_at,
            ms: row.ms,
            record: row.run_case_json.and_then(|json| RawValue::from_string(json).ok()),
            read: OnceLock::new(),
        }
    }

    /// Its line of `cases.jsonl`, read (none when it has none, or it does
    /// not parse).
    pub fn line(&self) -> Option<&RunCase> {
        self.read
            .get_or_init(|| {
                let raw = self.record.as_ref()?;
                serde_json::from_str(raw.get())
                    .inspect_err(|error| {
                        tracing::warn!(attempt = self.attempt, device = ?self.device, %error, "an attempt's line does not read back; shown without it");
                    })
                    .ok()
            })
            .as_ref()
    }

    /// Its case's title, from its line without reading the rest of it.
    fn title(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Titled {
            title: Option<String>,
        }
        serde_json::from_str::<Titled>(self.record.as_ref()?.get()).ok()?.title
    }

    /// The app's crashes during it: step, message, route, stack.
    pub fn crashes(&self) -> Vec<Crash> {
        let Some(line) = self.line() else { return Vec::new() };
        let Some(listed) = line.extra.get(argus_proto::artifacts::CRASHES_KEY).and_then(|c| c.as_array()) else {
            return Vec::new();
        };
        let text = |c: &serde_json::Value, key: &str| c.get(key).and_then(|v| v.as_str()).unwrap_or("").to_owned();
        listed
            .iter()
            .map(|c| Crash {
                step: text(c, "step"),
                message: text(c, "message"),
                route: text(c, "route"),
                stack: text(c, "stack"),
            })
            .collect()
    }

    /// Where its device log is kept (the slot's `log` hook), when it is.
    pub fn log_path(&self) -> Option<&str> {
        self.line()?.extra.get(argus_proto::artifacts::LOG_KEY)?.as_str()
    }

    /// The first step that failed, with its error.
    pub fn failed_step(&self) -> Option<(&str, &str)> {
        let line = self.line()?;
        let step = line.steps.iter().find(|s| s.error.is_some())?;
        Some((step.step.as_str(), step.error.as_deref().unwrap_or("")))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseView {
    pub id: String,
    pub title: Option<String>,
    /// The last real attempt's result, or `pending`/`running`.
    pub result: String,
    /// It passed after an attempt that failed.
    pub flaky: bool,
    /// Why it was muted in this run: a failure of it did not fail the run.
    pub muted: Option<String>,
    /// Who owns it (TESTOWNERS), space-separated.
    pub owner: Option<String>,
    pub attempts: Vec<AttemptView>,
}

impl CaseView {
    /// What needs looking at first: failed, going, flaky, unsupported, then
    /// passed, each in suite order.
    fn rank(&self) -> u8 {
        match self.result.as_str() {
            "failed" if self.muted.is_none() => 0,
            "failed" => 1,
            "running" => 2,
            "pending" => 3,
            _ if self.flaky => 4,
            "unsupported" => 5,
            _ => 6,
        }
    }

    /// Failed, but muted: it did not fail the run.
    pub fn muted_failed(&self) -> bool {
        self.result == "failed" && self.muted.is_some()
    }

    pub fn retried(&self) -> bool {
        self.attempts.iter().any(|a| a.attempt > 1)
    }
}

/// What a run's header counts: each case by how it ended, and what the
/// run cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunCounts {
    pub cases: usize,
    pub passed: usize,
    /// Failed and not muted: what failed the run.
    pub failed: usize,
    /// Failed, but muted.
    pub muted_failed: usize,
    /// Passed after an attempt that failed (counted in `passed` too).
    pub flaky: usize,
    pub unsupported: usize,
    /// Attempts taken back from a lost device, worker or app and run again.
    pub infrastructure: usize,
    /// Devices that ran at least one attempt.
    pub devices: usize,
    /// Cases per platform, by the platform of each case's last attempt, in
    /// name order.
    pub platforms: Vec<(String, usize)>,
}

impl RunCounts {
    fn of(cases: &[CaseView]) -> Self {
        let mut counts = RunCounts { cases: cases.len(), ..Default::default() };
        let mut devices = std::collections::BTreeSet::new();
        let mut platforms: BTreeMap<String, usize> = BTreeMap::new();
        for case in cases {
            match case.result.as_str() {
                "passed" => counts.passed += 1,
                "failed" if case.muted.is_some() => counts.muted_failed += 1,
                "failed" => counts.failed += 1,
                "unsupported" => counts.unsupported += 1,
                _ => {}
            }
            counts.flaky += usize::from(case.flaky);
            counts.infrastructure += case.attempts.iter().filter(|a| a.result == "infrastructure").count();
            devices.extend(case.attempts.iter().filter_map(|a| a.device.as_deref()));
            if let Some(platform) = case.attempts.iter().rev().find_map(|a| a.platform.clone()) {
                *platforms.entry(platform).or_default() += 1;
            }
        }
        counts.devices = devices.len();
        counts.platforms = platforms.into_iter().collect();
        counts
    }

    /// `22 ios · 23 android`.
    pub fn platforms_text(&self) -> String {
        self.platforms.iter().map(|(p, n)| format!("{n} {p}")).collect::<Vec<_>>().join(" · ")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    pub run: RunView,
    pub counts: RunCounts,
    pub cases: Vec<CaseView>,
    /// Each device's model, where its slot names one (label `model`).
    pub models: BTreeMap<String, String>,
    /// Why each failed case failed, against its last pass (the diff API's
    /// `line`, `cause` and `signature`), and the failures that share a cause.
    pub why: Vec<WhyLine>,
    pub causes: Vec<argus_history::explain::Group>,
    /// The run of the same project and branch before this one, which the
    /// page links the comparison with.
    pub previous: Option<String>,
}

/// A crash of the app during an attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crash {
    pub step: String,
    pub message: String,
    pub route: String,
    pub stack: String,
}

/// The run's crashes by message: the message and the cases it crashed in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrashGroup {
    pub message: String,
    pub cases: Vec<String>,
}

/// One failed case, explained in a line.
#[derive(Debug, Clone, Serialize)]
pub struct WhyLine {
    pub case_id: String,
    pub attempt: u32,
    pub cause: &'static str,
    pub signature: String,
    pub line: String,
}

impl RunDetail {
    /// The line that explains `case`, when it failed.
    pub fn why_of(&self, case: &str) -> Option<&WhyLine> {
        self.why.iter().find(|w| w.case_id == case)
    }

    pub fn new(run: RunView, attempts: Vec<AttemptDetail>) -> Self {
        let mut cases: Vec<CaseView> = Vec::new();
        // Each case's place in `cases`, by id: a nightly run has 10,000 or
        // more (a search of the list for each attempt was quadratic).
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for row in attempts {
            let case_id = row.case_id.clone();
            let attempt = AttemptView::new(row);
            match index.get(&case_id) {
                Some(&at) => cases[at].attempts.push(attempt),
                None => {
                    index.insert(case_id.clone(), cases.len());
                    cases.push(CaseView {
                        id: case_id,
                        title: None,
                        result: String::new(),
                        flaky: false,
                        muted: None,
                        owner: None,
                        attempts: vec![attempt],
                    });
                }
            }
        }
        for case in &mut cases {
            case.attempts.sort_by_key(|a| (a.attempt, a.try_no));
            let last = case.attempts.iter().rev().find(|a| a.result != "infrastructure").or(case.attempts.last());
            case.result = last.map(|a| a.result.clone()).unwrap_or_else(|| "pending".into());
            case.flaky = case.result == "passed" && case.attempts.iter().any(|a| a.result == "failed");
        }
        cases.sort_by_key(CaseView::rank);
        for (c, case) in cases.iter_mut().enumerate() {
            for (a, attempt) in case.attempts.iter_mut().enumerate() {
                attempt.anchor = format!("c{c}a{a}");
            }
        }
        let counts = RunCounts::of(&cases);
        Self { run, counts, cases, models: BTreeMap::new(), why: Vec::new(), causes: Vec::new(), previous: None }
    }

    /// Titles the cases and marks those that were muted in the run (which
    /// the counts then keep apart) and their owners, from the run's cases
    /// as kept; a case kept without a title takes its line's.
    pub fn with_cases(mut self, rows: &[argus_store::CaseMarks]) -> Self {
        let by_id: std::collections::HashMap<&str, &argus_store::CaseMarks> =
            rows.iter().map(|r| (r.case_id.as_str(), r)).collect();
        for case in &mut self.cases {
            if let Some(row) = by_id.get(case.id.as_str()) {
                case.title.clone_from(&row.title);
                case.muted.clone_from(&row.muted);
                case.owner.clone_from(&row.owner);
            }
            if case.title.is_none() {
                case.title = case.attempts.iter().find_map(AttemptView::title);
            }
        }
        self.cases.sort_by_key(CaseView::rank);
        for (c, case) in self.cases.iter_mut().enumerate() {
            for (a, attempt) in case.attempts.iter_mut().enumerate() {
                attempt.anchor = format!("c{c}a{a}");
            }
        }
        self.counts = RunCounts::of(&self.cases);
        self
    }

    /// The app's crashes across the run, by message, most cases first.
    pub fn crash_groups(&self) -> Vec<CrashGroup> {
        let mut groups: Vec<CrashGroup> = Vec::new();
        for case in &self.cases {
            for crash in case.attempts.iter().flat_map(AttemptView::crashes) {
                match groups.iter_mut().find(|g| g.message == crash.message) {
                    Some(group) if !group.cases.contains(&case.id) => group.cases.push(case.id.clone()),
                    Some(_) => {}
                    None => groups.push(CrashGroup { message: crash.message, cases: vec![case.id.clone()] }),
                }
            }
        }
        groups.sort_by(|a, b| b.cases.len().cmp(&a.cases.len()).then_with(|| a.message.cmp(&b.message)));
        groups
    }

    /// The owners of `cases`, each once, space-separated.
    pub fn owners_of(&self, cases: &[String]) -> String {
        let owners: std::collections::HashMap<String, String> =
            self.cases.iter().filter_map(|c| Some((c.id.clone(), c.owner.clone()?))).collect();
        argus_cases::owners::of_cases(cases, &owners).join(" ")
    }

    /// Per device, the attempts it ran, for the timeline.
    pub fn lanes(&self) -> BTreeMap<String, Vec<(&str, &AttemptView)>> {
        let mut lanes: BTreeMap<String, Vec<(&str, &AttemptView)>> = BTreeMap::new();
        for case in &self.cases {
            for attempt in &case.attempts {
                if let (Some(device), Some(_)) = (&attempt.device, attempt.started_ms) {
                    lanes.entry(device.clone()).or_default().push((case.id.as_str(), attempt));
                }
            }
        }
        lanes
    }
}

/// A case across runs.
#[derive(Debug, Clone, Serialize)]
pub struct CaseHistory {
    pub project: String,
    pub case_id: String,
    pub attempts: Vec<CaseAttemptView>,
    /// How many runs the attempts shown come from.
    pub runs: usize,
    /// Runs in which an attempt failed and a later one passed, over `runs`.
    pub flake_rate: f64,
    /// Runs whose last attempt of the case failed, over `runs`.
    pub failing_rate: f64,
    pub failed_on: BTreeMap<String, i64>,
    pub last_failure: Option<CaseAttemptView>,
    /// The last failure against the last time the case passed, with its
    /// cause and when it started failing; `null` without a record of it.
    pub why: Option<argus_history::explain::Explained>,
    /// Its mute, while it is muted.
    pub mute: Option<argus_store::MuteRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseAttemptView {
    pub run_id: String,
    pub branch: Option<String>,
    pub run_started: String,
    pub attempt: i64,
    pub result: String,
    pub device: Option<String>,
    pub ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub error: Option<String>,
    /// The app's memory and rendering around the attempt, when it said.
    pub health: Option<argus_store::AppHealthRow>,
}

impl CaseHistory {
    /// When its mute ends, in words.
    pub fn mute_ends(&self) -> String {
        match self.mute.as_ref().and_then(|m| m.until_ms) {
            Some(until) => format!("until {}", iso(until)),
            None => "until it passes enough times in a row on the default branch".into(),
        }
    }

    pub fn flake_percent(&self) -> String {
        format!("{:.0}", self.flake_rate * 100.0)
    }

    pub fn failing_percent(&self) -> String {
        format!("{:.0}", self.failing_rate * 100.0)
    }

    pub fn new(project: String, case_id: String, rows: Vec<CaseAttempt>) -> Self {
        let attempts: Vec<CaseAttemptView> = rows
            .into_iter()
            .map(|r| CaseAttemptView {
                run_started: iso(r.run_started_at),
                run_id: r.run_id,
                branch: r.branch,
                attempt: r.attempt,
                result: if r.infrastructure == 1 { "infrastructure".into() } else { r.result.unwrap_or_default() },
                device: r.device_id,
                ms: r.ms,
                finished_ms: r.finished_at,
                error: r.error,
                health: (!r.health.is_empty()).then_some(r.health),
            })
            .collect();
        // Per run: whether an attempt failed, and how its last attempt ended.
        let mut runs: BTreeMap<&str, RunOutcome> = BTreeMap::new();
        let mut failed_on: BTreeMap<String, i64> = BTreeMap::new();
        for attempt in attempts.iter().filter(|a| a.result != "infrastructure") {
            let run = runs.entry(attempt.run_id.as_str()).or_default();
            if attempt.result == "failed" {
                *failed_on.entry(attempt.device.clone().unwrap_or_default()).or_default() += 1;
            }
            run.add(attempt.attempt, &attempt.result);
        }
        let share = |count: usize| if runs.is_empty() { 0.0 } else { count as f64 / runs.len() as f64 };
        let flake_rate = share(runs.values().filter(|r| r.flaky()).count());
        let failing_rate = share(runs.values().filter(|r| r.last.as_ref().is_some_and(|(_, l)| l == "failed")).count());
        let last_failure = attempts.iter().find(|a| a.result == "failed").cloned();
        Self {
            project,
            case_id,
            runs: runs.len(),
            attempts,
            flake_rate,
            failing_rate,
            failed_on,
            last_failure,
            why: None,
            mute: None,
        }
    }
}

/// How a case went in one run.
#[derive(Debug, Default)]
struct RunOutcome {
    failed: bool,
    /// The last attempt: its number and result.
    last: Option<(i64, String)>,
}

impl RunOutcome {
    fn add(&mut self, attempt: i64, result: &str) {
        self.failed |= result == "failed";
        if self.last.as_ref().is_none_or(|(n, _)| attempt >= *n) {
            self.last = Some((attempt, result.to_owned()));
        }
    }

    /// An attempt failed and the last one passed.
    fn flaky(&self) -> bool {
        self.failed && self.last.as_ref().is_some_and(|(_, result)| result == "passed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case_attempt(run: &str, attempt: i64, result: &str) -> CaseAttempt {
        CaseAttempt {
            run_id: run.into(),
            branch: None,
            run_started_at: 0,
            attempt,
            result: Some(result.into()),
            infrastructure: 0,
            device_id: Some("w/1".into()),
            platform: Some("ios".into()),
            ms: Some(100),
            finished_at: Some(1),
            error: None,
            health: Default::default(),
        }
    }

    fn detail(case: &str, attempt: i64, device: &str, platform: &str, result: &str, infra: bool) -> AttemptDetail {
        AttemptDetail {
            case_id: case.into(),
            attempt,
            try_no: 1,
            state: "done".into(),
            device_id: Some(device.into()),
            worker_id: Some("w".into()),
            platform: Some(platform.into()),
            result: Some(result.into()),
            infrastructure: i64::from(infra),
            error: None,
            started_at: Some(attempt),
            finished_at: Some(attempt + 1),
            ms: Some(1),
            run_case_json: None,
        }
    }

    fn run_view() -> RunView {
        RunView::new(RunRow {
            id: "r".into(),
            project: "p".into(),
            branch: None,
            commit_sha: None,
            trigger_by: None,
            selector_json: String::new(),
            config_json: String::new(),
            retries: 1,
            priority: 1,
            started_at: 0,
            finished_at: Some(10),
            manifest_json: String::new(),
            platform: Some("ios".into()),
            result: Some("failed".into()),
            cases: Some(4),
            passed: Some(2),
            failed: Some(1),
            retried: Some(1),
            detached: 0,
            waiting_reason: None,
            muted_failed: None,
            rerun_of: None,
            testowners: None,
        })
    }

    #[test]
    fn a_case_is_titled_as_its_run_kept_it_or_else_by_its_line() {
        let line = |title: &str| {
            Some(format!(
                r#"{{"id":"x","title":"{title}","file":"f.md","attempt":1,"result":"passed","startedAt":"t","ms":1,"steps":[]}}"#
            ))
        };
        let kept =
            AttemptDetail { run_case_json: line("from its line"), ..detail("kept", 1, "w/1", "ios", "passed", false) };
        let bare =
            AttemptDetail { run_case_json: line("from its line"), ..detail("bare", 1, "w/1", "ios", "passed", false) };
        let garbled = AttemptDetail {
            run_case_json: Some("{not json".into()),
            ..detail("garbled", 1, "w/1", "ios", "passed", false)
        };
        let marks = [argus_store::CaseMarks {
            case_id: "kept".into(),
            title: Some("from its case file".into()),
            muted: None,
            owner: Some("@ana".into()),
        }];
        let detail = RunDetail::new(run_view(), vec![kept, bare, garbled]).with_cases(&marks);
        let titles: Vec<(&str, Option<&str>, Option<&str>)> =
            detail.cases.iter().map(|c| (c.id.as_str(), c.title.as_deref(), c.owner.as_deref())).collect();
        assert_eq!(
            titles,
            [
                ("kept", Some("from its case file"), Some("@ana")),
                ("bare", Some("from its line"), None),
                ("garbled", None, None)
            ]
        );
        assert_eq!(detail.cases[1].attempts[0].line().map(|l| l.file.as_str()), Some("f.md"));
        assert!(detail.cases[2].attempts[0].line().is_none(), "a line that does not parse is none");
    }

    #[test]
    fn a_run_counts_its_cases_by_how_they_ended_and_per_platform() {
        let run = run_view();
        let detail = RunDetail::new(
            run,
            vec![
                detail("ok", 1, "w/1", "ios", "passed", false),
                detail("flaky", 1, "w/1", "ios", "failed", false),
                detail("flaky", 2, "w/2", "android", "passed", false),
                detail("red", 1, "w/2", "android", "failed", false),
                detail("red", 2, "w/1", "ios", "failed", false),
                detail("clock", 1, "w/3", "android", "passed", true),
                detail("clock", 1, "w/2", "android", "unsupported", false),
            ],
        );
        let counts = &detail.counts;
        assert_eq!((counts.cases, counts.passed, counts.failed, counts.flaky), (4, 2, 1, 1));
        assert_eq!((counts.unsupported, counts.infrastructure, counts.devices), (1, 1, 3));
        assert_eq!(counts.platforms_text(), "2 android · 2 ios", "by each case's last attempt");
        let order: Vec<&str> = detail.cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(order, ["red", "flaky", "clock", "ok"], "what needs looking at first");
        assert_eq!(detail.cases[1].attempts[1].anchor, "c1a1");
    }

    #[test]
    fn flaky_and_failing_are_told_apart() {
        let rows = vec![
            // r1: failed, then passed: flaky. r2: failed twice: failing.
            // r3: passed first time. r4: passed, then an infrastructure retry.
            case_attempt("r1", 2, "passed"),
            case_attempt("r1", 1, "failed"),
            case_attempt("r2", 2, "failed"),
            case_attempt("r2", 1, "failed"),
            case_attempt("r3", 1, "passed"),
            CaseAttempt { infrastructure: 1, ..case_attempt("r4", 1, "failed") },
            case_attempt("r4", 1, "passed"),
        ];
        let history = CaseHistory::new("p".into(), "c".into(), rows);
        assert_eq!(history.runs, 4);
        assert_eq!((history.flake_percent(), history.failing_percent()), ("25".into(), "25".into()));
        assert_eq!(history.failed_on["w/1"], 3, "an infrastructure retry is the device's fault, not a failure");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(1_250), "1.2 s");
        assert_eq!(duration(184_000), "3 m 04 s");
        assert_eq!(iso(0), "1970-01-01 00:00:00");
    }
}
