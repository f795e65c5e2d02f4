//! What goes into the store and what comes back out.

/// A run as submitted, with its cases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRun {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub trigger: Option<String>,
    pub selector_json: String,
    pub config_json: String,
    pub retries: u32,
    pub priority: u32,
    /// Goes on when no client watches it.
    pub detached: bool,
    pub started_at: i64,
    /// The `RunManifest` as written at the start.
    pub manifest_json: String,
    /// Case files: path and text.
    pub files: Vec<(String, String)>,
    pub cases: Vec<NewCase>,
    /// The run whose failed cases it runs again.
    pub rerun_of: Option<String>,
    /// The project's TESTOWNERS as it was sent.
    pub testowners: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewCase {
    pub case_id: String,
    pub file: String,
    pub title: Option<String>,
    pub ordinal: i64,
    pub expected_ms: i64,
    /// `history`, `estimate` or `default`.
    pub estimate_source: String,
    /// Why it is muted, when it was muted as the run was submitted: its
    /// failure does not fail the run.
    pub muted: Option<String>,
    /// Who owns it (TESTOWNERS), space-separated.
    pub owner: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewLease {
    pub id: String,
    pub run_id: String,
    pub case_id: String,
    pub attempt: u32,
    pub try_no: u32,
    pub device_id: String,
    pub worker_id: String,
    pub platform: String,
    pub granted_at: i64,
    pub deadline: i64,
}

/// What [`crate::Store::finish_and_grant`] wrote.
#[derive(Debug)]
pub struct FinishedAndGranted {
    /// Per result, in order: its attempt, or `StaleLease` (fencing).
    pub finished: Vec<Result<AttemptKey, crate::StoreError>>,
    /// Per following lease, in order: `None` when the result before it was
    /// refused (its attempt is still pending, nothing was tried), else
    /// whether it was granted (`false`: its attempt is no longer pending).
    pub granted: Vec<Option<bool>>,
}

/// An attempt that has not finished, with what scheduling needs.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AttemptRow {
    pub run_id: String,
    pub case_id: String,
    pub attempt: i64,
    pub try_no: i64,
    pub state: String,
    pub lease_id: Option<String>,
    pub device_id: Option<String>,
    pub expected_ms: i64,
    pub ordinal: i64,
    pub priority: i64,
    pub selector_json: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, sqlx::FromRow)]
pub struct AttemptKey {
    pub run_id: String,
    pub case_id: String,
    pub attempt: i64,
    pub try_no: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub step: String,
    pub status: String,
    pub ms: i64,
    pub error: Option<String>,
}

/// How a leased attempt ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptOutcome {
    /// `passed`, `failed` or `unsupported`; `None` for an infrastructure failure.
    pub result: Option<String>,
    pub infrastructure: bool,
    pub error: Option<String>,
    pub finished_at: i64,
    pub ms: i64,
    pub run_case_json: Option<String>,
    pub steps: Vec<StepRow>,
    /// Its place in the run's updates (`RunUpdate.seq`).
    pub seq: i64,
    /// What follows, written in the same transaction when the result is
    /// taken: the next try to queue (attempt, try), or the case's final
    /// result.
    pub next_try: Option<(u32, u32)>,
    pub final_result: Option<String>,
    /// What the attempt saw at each step, when its worker recorded it.
    pub observed: Option<crate::observations::Observed>,
    /// What the app said of its memory and rendering around the attempt.
    pub health: AppHealthRow,
}

/// The app's health around one attempt (`AppHealth`) in whole KiB and µs;
/// `None` where the app did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct AppHealthRow {
    pub heap_start_kb: Option<i64>,
    pub heap_end_kb: Option<i64>,
    pub rss_start_kb: Option<i64>,
    pub rss_end_kb: Option<i64>,
    pub render_commits: Option<i64>,
    pub render_us: Option<i64>,
}

impl AppHealthRow {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a finished attempt came to ([`crate::Store::run_outcomes`]).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OutcomeRow {
    pub case_id: String,
    pub attempt: i64,
    /// `passed`, `failed` or `unsupported`.
    pub result: String,
    pub device_id: Option<String>,
    pub platform: Option<String>,
}

/// A finished attempt as a run's update log replays it, in `seq` order.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LogRow {
    pub seq: Option<i64>,
    pub case_id: String,
    pub attempt: i64,
    pub infrastructure: i64,
    pub error: Option<String>,
    pub run_case_json: Option<String>,
    pub device_id: Option<String>,
    pub worker_id: Option<String>,
    pub platform: Option<String>,
    pub finished_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RunRow {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
    pub trigger_by: Option<String>,
    pub selector_json: String,
    pub config_json: String,
    pub retries: i64,
    pub priority: i64,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub manifest_json: String,
    /// Set when the run finishes: the platform of its devices, `passed`,
    /// `failed` or `cancelled`, and its totals.
    pub platform: Option<String>,
    pub result: Option<String>,
    pub cases: Option<i64>,
    pub passed: Option<i64>,
    pub failed: Option<i64>,
    pub retried: Option<i64>,
    pub detached: i64,
    /// Why the run waits, while no device can take its attempts.
    pub waiting_reason: Option<String>,
    /// How many of its failed cases were muted (set when it finishes).
    pub muted_failed: Option<i64>,
    /// The run whose failed cases it runs again.
    pub rerun_of: Option<String>,
    /// The TESTOWNERS its cases' owners were read from.
    pub testowners: Option<String>,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CaseRow {
    pub case_id: String,
    pub file: String,
    pub ordinal: i64,
    pub expected_ms: i64,
    pub final_result: Option<String>,
    /// Why it was muted in this run.
    pub muted: Option<String>,
    /// Who owns it (TESTOWNERS), space-separated.
    pub owner: Option<String>,
}

/// What a run's page says of one of its cases beside its attempts.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CaseMarks {
    pub case_id: String,
    pub title: Option<String>,
    /// Why it was muted in this run.
    pub muted: Option<String>,
    /// Who owns it (TESTOWNERS), space-separated.
    pub owner: Option<String>,
}

/// Which runs the runs list shows.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct RunFilter {
    pub project: Option<String>,
    pub branch: Option<String>,
    pub platform: Option<String>,
    /// `passed`, `failed`, `cancelled` or `running`.
    pub result: Option<String>,
    /// Started at or after, epoch ms.
    pub from: Option<i64>,
    /// Started before, epoch ms.
    pub to: Option<i64>,
}

/// One attempt of a run, as the run page shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AttemptDetail {
    pub case_id: String,
    pub attempt: i64,
    pub try_no: i64,
    pub state: String,
    pub device_id: Option<String>,
    pub worker_id: Option<String>,
    pub platform: Option<String>,
    pub result: Option<String>,
    pub infrastructure: i64,
    pub error: Option<String>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub ms: Option<i64>,
    pub run_case_json: Option<String>,
}

/// How one finished attempt of a run ended.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AttemptEnd {
    pub case_id: String,
    pub attempt: i64,
    pub try_no: i64,
    pub platform: Option<String>,
    pub result: Option<String>,
    pub infrastructure: i64,
    pub ms: Option<i64>,
}

/// One attempt of a case in its history across runs.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CaseAttempt {
    pub run_id: String,
    pub branch: Option<String>,
    pub run_started_at: i64,
    pub attempt: i64,
    pub result: Option<String>,
    pub infrastructure: i64,
    pub device_id: Option<String>,
    pub platform: Option<String>,
    pub ms: Option<i64>,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
    #[sqlx(flatten)]
    pub health: AppHealthRow,
}

/// A case that cost retries: how often, and how often the retry passed.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct FlakyCase {
    pub case_id: String,
    pub retries: i64,
    pub passed_on_retry: i64,
    pub runs: i64,
}

/// A case's passing time, in the older and the newer half of a window.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct SlowCase {
    pub case_id: String,
    pub attempts: i64,
    pub mean_ms: f64,
    pub max_ms: i64,
    pub older_mean_ms: Option<f64>,
    pub newer_mean_ms: Option<f64>,
}

/// Busy time of a device in one bucket of a window.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct DeviceBusy {
    pub device_id: String,
    /// Which bucket of the window, from 0.
    pub bucket: i64,
    pub attempts: i64,
    pub busy_ms: i64,
}

/// A worker row of the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    pub id: String,
    pub hostname: String,
    pub connected: bool,
    pub draining: bool,
    pub last_seen: i64,
}

/// A device row of the fleet: `worker/slot`, and what its slot and app say.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRecord {
    pub id: String,
    pub worker_id: String,
    pub slot: String,
    pub platform: String,
    /// idle, busy, waiting, disconnected.
    pub state: String,
    /// The slot and the app's hello, as the worker reported them.
    pub device_json: String,
    pub updated_at: i64,
}

/// What the store remembers of a worker's operator decisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetMemory {
    pub draining: bool,
    /// Quarantined devices and why.
    pub quarantined: Vec<(String, String)>,
}

/// A try of an attempt to queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTry {
    pub run_id: String,
    pub case_id: String,
    pub attempt: u32,
    pub try_no: u32,
}
