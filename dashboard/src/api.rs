//! `/api/v1/…`: everything the pages show, as JSON, for scripts.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::view::{CaseHistory, RunDetail, RunView, WhyLine, iso};

use crate::Dashboard;
use argus_grid::time::now_ms;
use argus_store::{DeviceBusy, FlakyCase, MuteEvent, MuteRow, RunFilter, SlowCase, StoreError};

/// A failed request: its status, and a message that names what was wrong.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    /// A coded error's answer, as the gRPC API gives it
    /// ([`argus_proto::errors`]).
    pub fn of(error: &impl argus_proto::errors::Coded) -> Self {
        let (status, message) = argus_proto::errors::http_answer(error);
        ApiError(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        ApiError::of(&error)
    }
}

impl From<argus_history::explain::ExplainError> for ApiError {
    fn from(error: argus_history::explain::ExplainError) -> Self {
        ApiError::of(&error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

/// The runs list's query: what the filter form sends.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
pub struct RunsQuery {
    #[serde(default)]
    pub project: String,
    #[serde(default)]
    pub branch: String,
    #[serde(default)]
    pub platform: String,
    #[serde(default)]
    pub result: String,
    /// `YYYY-MM-DD`, inclusive.
    #[serde(default)]
    pub from: String,
    /// `YYYY-MM-DD`, inclusive.
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub page: Option<u32>,
}

const RESULTS: [&str; 4] = ["passed", "failed", "cancelled", "running"];
pub const PER_PAGE: u32 = 50;
/// The furthest page: 5,000,000 runs back.
pub const MAX_PAGE: u32 = 100_000;

impl RunsQuery {
    pub fn filter(&self) -> Result<RunFilter, ApiError> {
        let day = |name: &str, text: &str, next: bool| -> Result<Option<i64>, ApiError> {
            if text.is_empty() {
                return Ok(None);
            }
            let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
                ApiError(StatusCode::BAD_REQUEST, format!("{name}: {text:?} is not a date (YYYY-MM-DD)"))
            })?;
            let date = if next { date.succ_opt().unwrap_or(date) } else { date };
            Ok(date.and_hms_opt(0, 0, 0).map(|t| t.and_utc().timestamp_millis()))
        };
        if !self.result.is_empty() && !RESULTS.contains(&self.result.as_str()) {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("result: {:?} is not one of {}", self.result, RESULTS.join(", ")),
            ));
        }
        let text = |value: &str| (!value.is_empty()).then(|| value.to_owned());
        Ok(RunFilter {
            project: text(&self.project),
            branch: text(&self.branch),
            platform: text(&self.platform),
            result: text(&self.result),
            from: day("from", &self.from, false)?,
            to: day("to", &self.to, true)?,
        })
    }

    pub fn page(&self) -> u32 {
        self.page.unwrap_or(1).max(1)
    }

    /// How many runs the page skips; a page past any list is refused.
    pub fn offset(&self) -> Result<u32, ApiError> {
        (self.page() - 1).checked_mul(PER_PAGE).filter(|_| self.page() <= MAX_PAGE).ok_or_else(|| {
            ApiError(
                StatusCode::BAD_REQUEST,
                format!("page: {} is past the last page ({MAX_PAGE} at most)", self.page()),
            )
        })
    }
}

#[derive(Debug, Serialize)]
pub struct RunsPage {
    pub runs: Vec<RunView>,
    pub page: u32,
    pub more: bool,
    /// How long runs are kept.
    pub history: History,
}

/// The window of history the store keeps.
#[derive(Debug, Default, Serialize)]
pub struct History {
    /// Runs older than this many days are removed (`--keep-days`); `null`:
    /// every run is kept (or pruned by hand with `argus prune`).
    pub keep_days: Option<u64>,
    /// When the oldest run kept started (ISO 8601), if there is one.
    pub oldest_run: Option<String>,
}

impl History {
    pub async fn of(state: &Dashboard) -> Result<Self, ApiError> {
        let oldest = state.store.oldest_run_started().await?;
        Ok(Self { keep_days: state.keep.map(|k| k.as_secs() / 86_400), oldest_run: oldest.map(crate::view::iso) })
    }

    /// One line for a page: the window, and how far back the runs go.
    pub fn text(&self) -> String {
        let kept = match self.keep_days {
            Some(days) => format!("Runs are kept {days} days, then removed (--keep-days)"),
            None => "Every run is kept (no --keep-days)".to_owned(),
        };
        match &self.oldest_run {
            Some(oldest) => format!("{kept}; the oldest here started {oldest}. Flakiness summaries are kept for ever."),
            None => format!("{kept}. Flakiness summaries are kept for ever."),
        }
    }
}

pub async fn runs_page(state: &Dashboard, query: &RunsQuery) -> Result<RunsPage, ApiError> {
    let filter = query.filter()?;
    let page = query.page();
    let mut rows = state.store.runs_page(&filter, query.offset()?, PER_PAGE).await?;
    let more = rows.len() > PER_PAGE as usize;
    rows.truncate(PER_PAGE as usize);
    let mut runs: Vec<RunView> = rows.into_iter().map(RunView::new).collect();
    for run in runs.iter_mut().filter(|r| r.result == "running") {
        run.finished_attempts = Some(state.store.finished_attempts(&run.id).await?);
        run.cases = Some(state.store.run_cases(&run.id).await?.len() as i64);
    }
    Ok(RunsPage { runs, page, more, history: History::of(state).await? })
}

pub async fn runs(State(state): State<Dashboard>, Query(query): Query<RunsQuery>) -> Result<Json<RunsPage>, ApiError> {
    Ok(Json(runs_page(&state, &query).await?))
}

pub async fn run_detail(state: &Dashboard, id: &str) -> Result<RunDetail, ApiError> {
    let run = state.store.get_run(id).await?;
    let attempts = state.store.run_attempts(id).await?;
    let mut view = RunView::new(run);
    if view.result == "running" {
        view.finished_attempts = Some(state.store.finished_attempts(id).await?);
    }
    let previous =
        state.store.previous_run(&view.project, view.branch.as_deref().unwrap_or(""), view.started_ms).await?;
    let cases = state.store.run_case_marks(id).await?;
    let mut detail = RunDetail { previous, ..RunDetail::new(view, attempts).with_cases(&cases) };
    let devices: Vec<String> = detail.lanes().into_keys().collect();
    detail.models = state.store.device_models(&devices).await?.into_iter().collect();
    if detail.counts.failed + detail.counts.muted_failed > 0 {
        let (explained, causes) = argus_history::explain::explain_run(&state.store, id).await?;
        detail.why = explained
            .into_iter()
            .map(|e| WhyLine {
                case_id: e.case_id,
                attempt: e.attempt,
                cause: e.cause.kind,
                signature: e.signature,
                line: e.line,
            })
            .collect();
        detail.causes = causes;
    }
    Ok(detail)
}

/// `?attempt=N`: which failed attempt a diff explains (the case's last
/// failed one when left out).
#[derive(Debug, Default, Deserialize)]
pub struct DiffQuery {
    pub attempt: Option<u32>,
}

/// `GET /api/v1/runs/{id}/cases/{case}/diff`: a failed attempt against the
/// last time its case passed, with the cause and its evidence.
pub async fn diff(
    State(state): State<Dashboard>,
    Path((id, case)): Path<(String, String)>,
    Query(query): Query<DiffQuery>,
) -> Result<Json<argus_history::explain::Explained>, ApiError> {
    state.store.get_run(&id).await?;
    match argus_history::explain::explain_case(&state.store, &id, &case, query.attempt).await? {
        Some(explained) => Ok(Json(explained)),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            match query.attempt {
                Some(n) => format!("run {id} has no record of a failed attempt {n} of case {case}"),
                None => format!("run {id} has no record of a failed attempt of case {case}"),
            },
        )),
    }
}

/// One attempt replayed step by step from its record, with its baseline's
/// steps when it failed.
pub async fn replay(
    State(state): State<Dashboard>,
    Path((id, case, attempt)): Path<(String, String, u32)>,
) -> Result<Json<argus_history::replay::Replay>, ApiError> {
    state.store.get_run(&id).await?;
    match argus_history::replay::replay(&state.store, &id, &case, attempt).await? {
        Some(replay) => Ok(Json(replay)),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no step record is kept of attempt {attempt} of case {case} in run {id}"),
        )),
    }
}

/// Run B against run A: what it broke, fixed, added, removed or slowed.
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub from: String,
    pub to: String,
    pub changes: Vec<argus_history::compare::Change>,
}

pub async fn compare(
    State(state): State<Dashboard>,
    Path((a, b)): Path<(String, String)>,
) -> Result<Json<Comparison>, ApiError> {
    let changes = argus_history::compare::compare_runs(&state.store, &a, &b).await?;
    Ok(Json(Comparison { from: a, to: b, changes }))
}

pub async fn run(State(state): State<Dashboard>, Path(id): Path<String>) -> Result<Json<RunDetail>, ApiError> {
    Ok(Json(run_detail(&state, &id).await?))
}

/// The run directory's `cases.jsonl`, one line per attempt.
pub async fn cases_jsonl(State(state): State<Dashboard>, Path(id): Path<String>) -> Result<Response, ApiError> {
    state.store.get_run(&id).await?;
    let mut body = String::new();
    for line in state.store.run_lines(&id).await? {
        body.push_str(&line.to_line());
        body.push('\n');
    }
    Ok(download(&format!("{id}-cases.jsonl"), "application/x-ndjson", body))
}

/// The run directory's `run.json`.
pub async fn run_json(State(state): State<Dashboard>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let run = state.store.get_run(&id).await?;
    Ok(download(&format!("{id}-run.json"), "application/json", run.manifest_json))
}

pub async fn junit(State(state): State<Dashboard>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let run = state.store.get_run(&id).await?;
    // A line that does not read back is an error naming it (the store's),
    // never a test left out of the report.
    let lines = state.store.run_lines(&id).await?;
    let muted = state.store.run_muted(&id).await?.into_iter().collect();
    let xml = argus_cases::report::junit_muted(&run.project, &lines, &muted);
    Ok(download(&format!("{id}-junit.xml"), "application/xml", xml))
}

/// A screenshot or film of the run, at the path its `cases.jsonl` names.
/// Served under `/runs/{id}/files/…` for the pages too, so that a page's
/// `<img>` works with the browser's login.
pub async fn file(
    State(state): State<Dashboard>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let Some(artifacts) = &state.artifacts else {
        return Err(ApiError(StatusCode::NOT_FOUND, "this coordinator keeps no screenshots or films".into()));
    };
    match artifacts.get(&id, &path).await {
        Ok(Some(bytes)) => Ok((
            [
                (header::CONTENT_TYPE, argus_proto::artifacts::content_type(&path)),
                // A run's files never change once kept.
                (header::CACHE_CONTROL, "private, max-age=86400"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            bytes,
        )
            .into_response()),
        Ok(None) => Err(ApiError(StatusCode::NOT_FOUND, format!("run {id} has no file {path}"))),
        Err(argus_store::artifacts::ArtifactError::BadPath(problem)) => Err(ApiError(StatusCode::BAD_REQUEST, problem)),
        Err(error) => {
            tracing::warn!(run = %id, %error, "cannot read a file of a run");
            Err(ApiError(StatusCode::SERVICE_UNAVAILABLE, "the file could not be read; try again".into()))
        }
    }
}

fn download(name: &str, content_type: &'static str, body: String) -> Response {
    let disposition = format!("attachment; filename=\"{name}\"");
    ([(header::CONTENT_TYPE, content_type.to_owned()), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response()
}

#[derive(Debug, Deserialize)]
pub struct ProjectQuery {
    #[serde(default)]
    pub project: String,
    /// How far back, in days (flaky and slow).
    pub days: Option<u32>,
    /// Only cases this owner owns (TESTOWNERS): `@ana`, `@org/team`.
    #[serde(default)]
    pub owner: String,
}

pub async fn case_history(state: &Dashboard, project: &str, case_id: &str) -> Result<CaseHistory, ApiError> {
    if project.is_empty() {
        return Err(ApiError(StatusCode::BAD_REQUEST, "project: give the case's project (?project=…)".into()));
    }
    let rows = state.store.case_history(project, case_id, 200).await?;
    if rows.is_empty() {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no attempts of {case_id} in project {project}")));
    }
    let mut history = CaseHistory::new(project.to_owned(), case_id.to_owned(), rows);
    history.mute = state.store.mutes(Some(project)).await?.into_iter().find(|m| m.case_id == case_id);
    if let Some(failure) = &history.last_failure {
        let attempt = u32::try_from(failure.attempt).ok();
        history.why = argus_history::explain::explain_case(&state.store, &failure.run_id, case_id, attempt).await?;
    }
    Ok(history)
}

pub async fn case(
    State(state): State<Dashboard>,
    Path(case_id): Path<String>,
    Query(query): Query<ProjectQuery>,
) -> Result<Json<CaseHistory>, ApiError> {
    Ok(Json(case_history(&state, &query.project, &case_id).await?))
}

#[derive(Debug, Serialize)]
pub struct FlakyAndSlow {
    pub project: String,
    pub days: u32,
    pub flaky: Vec<FlakyCase>,
    /// Cases whose final result flipped between consecutive runs, and how often.
    pub flipping: Vec<Flipping>,
    pub slow: Vec<SlowCase>,
    /// Failures by cause and signature, ranked by the cases and runs they
    /// cost in the window.
    pub causes: Vec<argus_history::explain::Costly>,
    /// The cases muted now, and every mute and unmute, newest first.
    pub mutes: Mutes,
    /// Every owner TESTOWNERS names for the project's cases (as its last
    /// counted run said), and the one the lists are filtered to (empty:
    /// none).
    pub owners: Vec<String>,
    pub owner: String,
}

/// Failed attempts read to rank their signatures.
const CAUSES_READ: i64 = 10_000;
/// Signatures shown.
const CAUSES_SHOWN: usize = 50;

#[derive(Debug, Serialize)]
pub struct Flipping {
    pub case_id: String,
    pub flips: i64,
}

pub async fn flaky_and_slow(state: &Dashboard, query: &ProjectQuery) -> Result<FlakyAndSlow, ApiError> {
    let project = if query.project.is_empty() {
        state.store.projects().await?.into_iter().next().unwrap_or_default()
    } else {
        query.project.clone()
    };
    let days = query.days.unwrap_or(14).clamp(1, 365);
    let now = now_ms();
    let since = now - i64::from(days) * 86_400_000;
    let owners = state.store.case_owners(&project).await?;
    let owner = query.owner.trim().to_owned();
    // With an owner asked for, only the cases it owns.
    let mine =
        |case: &str| owner.is_empty() || owners.get(case).is_some_and(|o| o.split_whitespace().any(|w| w == owner));
    let mut flaky = state.store.flaky_cases(&project, since, 500).await?;
    flaky.retain(|f| mine(&f.case_id));
    flaky.truncate(50);
    let mut slow = state.store.slow_cases(&project, since, now, 500).await?;
    slow.retain(|f| mine(&f.case_id));
    slow.truncate(50);
    let mut failures = state.store.failure_causes(&project, since, CAUSES_READ).await?;
    failures.retain(|f| mine(&f.case_id));
    let mut owners_named: Vec<String> = owners.values().flat_map(|o| o.split_whitespace().map(str::to_owned)).collect();
    owners_named.sort();
    owners_named.dedup();
    Ok(FlakyAndSlow {
        flaky,
        flipping: state
            .store
            .flipping_cases(&project, since, 500)
            .await?
            .into_iter()
            .filter(|(case_id, _)| mine(case_id))
            .take(50)
            .map(|(case_id, flips)| Flipping { case_id, flips })
            .collect(),
        slow,
        causes: {
            let mut ranked = argus_history::explain::rank(&failures);
            ranked.truncate(CAUSES_SHOWN);
            ranked
        },
        mutes: mutes_of(state, &project).await?,
        owners: owners_named,
        owner,
        project,
        days,
    })
}

/// The cases muted now and every mute and unmute, newest first.
#[derive(Debug, Serialize)]
pub struct Mutes {
    pub mutes: Vec<MuteRow>,
    pub history: Vec<MuteEvent>,
}

/// Mutes and unmutes shown.
pub const HISTORY_SHOWN: u32 = 200;

pub async fn mutes_of(state: &Dashboard, project: &str) -> Result<Mutes, ApiError> {
    let project = Some(project).filter(|p| !p.is_empty());
    Ok(Mutes {
        mutes: state.store.mutes(project).await?,
        history: state.store.mute_events(project, HISTORY_SHOWN).await?,
    })
}

/// `GET /api/v1/mutes?project=P`.
pub async fn mutes(State(state): State<Dashboard>, Query(query): Query<ProjectQuery>) -> Result<Json<Mutes>, ApiError> {
    Ok(Json(mutes_of(&state, &query.project).await?))
}

pub async fn flaky(
    State(state): State<Dashboard>,
    Query(query): Query<ProjectQuery>,
) -> Result<Json<FlakyAndSlow>, ApiError> {
    Ok(Json(flaky_and_slow(&state, &query).await?))
}

#[derive(Debug, Serialize)]
pub struct FleetView {
    pub workers: Vec<WorkerView>,
    pub devices: Vec<DeviceView>,
    /// Utilisation is measured over this window.
    pub window_ms: i64,
}

impl FleetView {
    /// `minute`, `12 m 00 s`, `hour`: what follows "over the last".
    pub fn window_text(&self) -> String {
        match self.window_ms {
            FLEET_WINDOW_MS.. => "hour".into(),
            ..=60_000 => "minute".into(),
            ms => super::view::duration(ms),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct WorkerView {
    pub id: String,
    pub hostname: String,
    pub draining: bool,
    pub last_seen: String,
}

#[derive(Debug, Serialize)]
pub struct DeviceView {
    pub id: String,
    pub worker: String,
    pub platform: String,
    /// idle, busy, held, quarantined, draining, mismatched, waiting,
    /// disconnected: the coordinator's one state of a device.
    pub state: String,
    pub since: String,
    pub app: Option<String>,
    pub app_version: Option<String>,
    pub agent_version: Option<String>,
    pub running_case: Option<String>,
    /// The WebDriver session that holds it.
    pub session: Option<String>,
    pub quarantine_reason: Option<String>,
    /// Why it takes no work though it is not quarantined (its app's platform
    /// is not its slot's).
    pub problem: Option<String>,
    /// Why its app is not attached, when its worker can tell (an app
    /// connected but never answered auth: a wrong token?).
    pub app_problem: Option<String>,
    /// Busy share of the window, 0 to 1.
    pub utilisation: f64,
    /// Busy share of each bucket of the window, oldest first.
    pub recent: Vec<f64>,
}

/// The longest window utilisation is measured over.
pub const FLEET_WINDOW_MS: i64 = 3_600_000;
pub const FLEET_BUCKETS: i64 = 12;

/// The window utilisation is measured over: the last hour, or as much of
/// it as this coordinator has seen (at least a minute), so that a fleet
/// that has just run a suite shows it busy rather than at 0%.
pub fn fleet_window(uptime_ms: i64) -> i64 {
    uptime_ms.clamp(60_000, FLEET_WINDOW_MS)
}

pub async fn fleet_view(state: &Dashboard) -> Result<FleetView, ApiError> {
    let stopped = || ApiError(StatusCode::SERVICE_UNAVAILABLE, "the coordinator is shutting down".into());
    let fleet = state.handle.fleet().await.map_err(|_| stopped())?;
    let window_ms = fleet_window(now_ms() - state.started_ms);
    let bucket_ms = window_ms / FLEET_BUCKETS;
    let busy: Vec<DeviceBusy> = state.store.device_busy(now_ms() - window_ms, bucket_ms).await?;
    let workers = fleet
        .workers
        .into_iter()
        .map(|w| WorkerView {
            id: w.id,
            hostname: w.hostname,
            draining: w.draining,
            last_seen: iso(w.last_seen_unix_ms),
        })
        .collect();
    let devices = fleet
        .devices
        .into_iter()
        .map(|d| {
            let info = d.device.unwrap_or_default();
            let text = |value: String| (!value.is_empty()).then_some(value);
            // The coordinator's one state of a device, as `argus devices`
            // and the metrics show it.
            let state = d.state.clone();
            let mut recent = vec![0.0; FLEET_BUCKETS as usize];
            for b in busy.iter().filter(|b| b.device_id == d.id) {
                if let Some(share) = usize::try_from(b.bucket).ok().and_then(|i| recent.get_mut(i)) {
                    *share = (b.busy_ms as f64 / bucket_ms as f64).min(1.0);
                }
            }
            let busy_ms: i64 = busy.iter().filter(|b| b.device_id == d.id).map(|b| b.busy_ms).sum();
            DeviceView {
                platform: info.platform,
                state,
                since: iso(d.state_since_unix_ms),
                app: text(d.app_name),
                app_version: text(d.app_version),
                agent_version: text(d.agent_version),
                running_case: (!d.running_case.is_empty()).then_some(d.running_case),
                session: (!d.session.is_empty()).then_some(d.session),
                quarantine_reason: d.quarantined.then_some(d.quarantine_reason),
                problem: (!d.problem.is_empty()).then_some(d.problem),
                app_problem: (!info.app_problem.is_empty()).then_some(info.app_problem),
                utilisation: (busy_ms as f64 / window_ms as f64).min(1.0),
                recent,
                id: d.id,
                worker: d.worker,
            }
        })
        .collect();
    Ok(FleetView { workers, devices, window_ms })
}

pub async fn fleet(State(state): State<Dashboard>) -> Result<Json<FleetView>, ApiError> {
    Ok(Json(fleet_view(&state).await?))
}

pub async fn projects(State(state): State<Dashboard>) -> Result<Json<Vec<String>>, ApiError> {
    Ok(Json(state.store.projects().await?))
}
