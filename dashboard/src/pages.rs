//! The pages, rendered here from the same views the API serves. Templates
//! are in `dashboard/templates/`; askama escapes everything they print.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::api::{self, ApiError, FlakyAndSlow, FleetView, ProjectQuery, RunsPage, RunsQuery};
use super::svg::{TREND_HEIGHT, Timeline, Trend, WIDTH};
use super::view::{CaseHistory, RunDetail};
use crate::Dashboard;

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsTemplate {
    query: RunsQuery,
    projects: Vec<String>,
    page: RunsPage,
    error: Option<String>,
    prev_query: String,
    next_query: String,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunTemplate {
    detail: RunDetail,
    timeline: Timeline,
    svg_width: f64,
}

#[derive(Template)]
#[template(path = "case.html")]
struct CaseTemplate {
    history: CaseHistory,
    trend: Trend,
    memory: Option<Trend>,
    render: Option<Trend>,
    svg_width: f64,
    trend_height: f64,
}

#[derive(Template)]
#[template(path = "flaky.html")]
struct FlakyTemplate {
    report: FlakyAndSlow,
    projects: Vec<String>,
    history: api::History,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct CompareTemplate {
    from: String,
    to: String,
    project: String,
    /// Each kind of change with a heading, in the comparison's order.
    groups: Vec<(&'static str, Vec<argus_history::compare::Change>)>,
}

#[derive(Template)]
#[template(path = "fleet.html")]
struct FleetTemplate {
    fleet: FleetView,
}

pub(super) fn render(template: impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the page: {error}")).into_response(),
    }
}

/// An error as a page of its own.
pub(super) fn error_page(error: ApiError) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><link rel=stylesheet href=/static/argus.css><link rel=icon href=/static/favicon.svg><main><h1>{}</h1><p class=error>{}</p><p><a href=/>Runs</a></p></main>",
        error.0,
        escape(&error.1)
    );
    (error.0, Html(body)).into_response()
}

fn escape(text: &str) -> String {
    askama::filters::escape(text, askama::filters::Html).map(|e| e.to_string()).unwrap_or_default()
}

fn with_page(query: &RunsQuery, page: u32) -> String {
    let query = RunsQuery { page: Some(page), ..query.clone() };
    serde_urlencoded::to_string(&query).unwrap_or_default()
}

pub async fn runs(State(state): State<Dashboard>, Query(query): Query<RunsQuery>) -> Response {
    let projects = state.store.projects().await.unwrap_or_default();
    // A bad filter shows the form again with the message, not an error page.
    let (page, error) = match api::runs_page(&state, &query).await {
        Ok(page) => (page, None),
        Err(error) if error.0 == StatusCode::BAD_REQUEST => {
            (RunsPage { runs: Vec::new(), page: 1, more: false, history: api::History::default() }, Some(error.1))
        }
        Err(error) => return error_page(error),
    };
    let (prev_query, next_query) = (with_page(&query, page.page.saturating_sub(1)), with_page(&query, page.page + 1));
    let status = if error.is_some() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let mut response = render(RunsTemplate { query, projects, page, error, prev_query, next_query });
    *response.status_mut() = status;
    response
}

pub async fn run(State(state): State<Dashboard>, Path(id): Path<String>) -> Response {
    match api::run_detail(&state, &id).await {
        Ok(detail) => {
            let timeline = Timeline::new(&detail, argus_grid::time::now_ms());
            render(RunTemplate { detail, timeline, svg_width: WIDTH })
        }
        Err(error) => error_page(error),
    }
}

pub async fn case(
    State(state): State<Dashboard>,
    Path(case_id): Path<String>,
    Query(query): Query<ProjectQuery>,
) -> Response {
    match api::case_history(&state, &query.project, &case_id).await {
        Ok(history) => {
            let (trend, memory, render_time) =
                (Trend::new(&history.attempts), Trend::memory(&history.attempts), Trend::render(&history.attempts));
            render(CaseTemplate {
                history,
                trend,
                memory,
                render: render_time,
                svg_width: WIDTH,
                trend_height: TREND_HEIGHT,
            })
        }
        Err(error) => error_page(error),
    }
}

pub async fn flaky(State(state): State<Dashboard>, Query(query): Query<ProjectQuery>) -> Response {
    let projects = state.store.projects().await.unwrap_or_default();
    match api::flaky_and_slow(&state, &query).await {
        Ok(report) => {
            render(FlakyTemplate { report, projects, history: api::History::of(&state).await.unwrap_or_default() })
        }
        Err(error) => error_page(error),
    }
}

pub async fn compare(State(state): State<Dashboard>, Path((from, to)): Path<(String, String)>) -> Response {
    const TITLES: [(&str, &str); 7] = [
        ("new-failure", "New failures"),
        ("fixed", "Fixed"),
        ("still-failing", "Still failing"),
        ("added", "Added"),
        ("removed", "Removed"),
        ("slower", "Slower"),
        ("faster", "Faster"),
    ];
    let compared = async {
        let project = state.store.get_run(&to).await?.project;
        Ok::<_, ApiError>((project, argus_history::compare::compare_runs(&state.store, &from, &to).await?))
    };
    match compared.await {
        Ok((project, changes)) => {
            let groups = TITLES
                .iter()
                .map(|(kind, title)| (*title, changes.iter().filter(|c| c.kind == *kind).cloned().collect::<Vec<_>>()))
                .filter(|(_, changes)| !changes.is_empty())
                .collect();
            render(CompareTemplate { from, to, project, groups })
        }
        Err(error) => error_page(error),
    }
}

pub async fn fleet(State(state): State<Dashboard>) -> Response {
    match api::fleet_view(&state).await {
        Ok(fleet) => render(FleetTemplate { fleet }),
        Err(error) => error_page(error),
    }
}
