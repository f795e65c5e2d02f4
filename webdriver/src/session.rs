//! Session-level commands: timeouts, the page source, screenshots, the
//! window, back, actions and contexts; and how a session calls its app.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use argus_proto::grpc::device_answer;
use argus_proto::wire::Screen;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};

use super::error::{Code, WdError, WdResult};
use super::registry::Session;
use super::{Answer, Wd, actions, body, page};
use crate::Facade;
use argus_grid::calls::CallFailure;

/// How long one lynkeus call of a command may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The context every session has.
pub const NATIVE_APP: &str = "NATIVE_APP";

pub fn routes() -> Router<Facade> {
    Router::new()
        .route("/session/{sid}/timeouts", get(get_timeouts).post(set_timeouts))
        .route("/session/{sid}/source", get(source))
        .route("/session/{sid}/screenshot", get(screenshot))
        .route("/session/{sid}/window/rect", get(window_rect))
        .route("/session/{sid}/window/{handle}/size", get(window_size))
        .route("/session/{sid}/orientation", get(orientation).post(set_orientation))
        .route("/session/{sid}/back", post(back))
        .route("/session/{sid}/actions", post(perform_actions).delete(release_actions))
        .route("/session/{sid}/contexts", get(contexts))
        .route("/session/{sid}/context", get(context).post(set_context))
        .route("/session/{sid}/appium/contexts", get(contexts))
        .route("/session/{sid}/appium/context", get(context).post(set_context))
}

/// One lynkeus call on the session's device, its failure as a W3C error.
pub async fn call(state: &Facade, session: &Session, method: &str, params: Option<Value>) -> WdResult<Value> {
    let outcome = state
        .sessions
        .call(session, method, params.as_ref(), CALL_TIMEOUT, super::traceparent())
        .await
        .map_err(|f| translate(&f, false))?;
    match outcome {
        device_answer::Outcome::ResultJson(json) => serde_json::from_str(&json)
            .map_err(|e| WdError::new(Code::UnknownError, format!("the app's answer to {method} is not JSON: {e}"))),
        device_answer::Outcome::Png(_) | device_answer::Outcome::Error(_) => {
            Err(WdError::new(Code::UnknownError, format!("the worker answered {method} with something else")))
        }
    }
}

/// The app's screen, typed.
pub async fn screen(state: &Facade, session: &Session) -> WdResult<Screen> {
    let value = call(state, session, "screen", None).await?;
    let screen: Screen = serde_json::from_value(value)
        .map_err(|e| WdError::new(Code::UnknownError, format!("the app's screen does not parse: {e}")))?;
    session.saw(Arc::new(screen.clone()));
    Ok(screen)
}

/// A lynkeus failure as the W3C error a client expects (webdriver.md §3.3).
pub fn translate(failure: &CallFailure, from_element: bool) -> WdError {
    let message = &failure.message;
    let code = if message.starts_with("No element matches") {
        if from_element { Code::StaleElementReference } else { Code::NoSuchElement }
    } else if message.contains(" is covered") || message.contains("is not presented") {
        Code::ElementClickIntercepted
    } else if message.contains(" is disabled") {
        Code::ElementNotInteractable
    } else if message.starts_with("Unknown method") || failure.code == "unsupported" {
        Code::UnsupportedOperation
    } else if message.starts_with("Timed out") || failure.code == "timeout" {
        Code::Timeout
    } else if failure.code == "unable-to-capture" {
        Code::UnableToCaptureScreen
    } else if failure.code == "ended" {
        Code::InvalidSessionId
    } else {
        Code::UnknownError
    };
    WdError::new(code, message.clone())
}

fn session(state: &Facade, sid: &str) -> WdResult<Arc<Session>> {
    state.sessions.get(sid)
}

pub async fn capabilities(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = session(&state, &sid)?;
    Ok(Wd(Value::Object(session.capabilities.clone())))
}

async fn get_timeouts(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let t = session(&state, &sid)?.timeouts();
    Ok(Wd(json!({ "implicit": t.implicit, "pageLoad": t.page_load, "script": t.script })))
}

async fn set_timeouts(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = session(&state, &sid)?;
    let body = body(&bytes)?;
    let mut timeouts = session.timeouts();
    let ms = |key: &str, value: &Value| {
        value.as_u64().filter(|ms| *ms <= 1 << 53).ok_or_else(|| {
            WdError::invalid_argument(format!("timeout {key} must be a whole number of milliseconds, not {value}"))
        })
    };
    // JSONWP clients send {"type": "implicit", "ms": 5000}.
    if let (Some(kind), Some(value)) = (body.get("type").and_then(Value::as_str), body.get("ms")) {
        let value = ms(kind, value)?;
        match kind {
            "implicit" => timeouts.implicit = value,
            "page load" => timeouts.page_load = value,
            "script" => timeouts.script = value,
            other => return Err(WdError::invalid_argument(format!("no timeout {other:?}"))),
        }
    }
    for (key, value) in &body {
        match key.as_str() {
            "implicit" => timeouts.implicit = ms(key, value)?,
            "pageLoad" => timeouts.page_load = ms(key, value)?,
            "script" if value.is_null() => {}
            "script" => timeouts.script = ms(key, value)?,
            "type" | "ms" => {}
            other => {
                return Err(WdError::invalid_argument(format!("no timeout {other:?}: implicit, pageLoad or script")));
            }
        }
    }
    session.set_timeouts(timeouts);
    Ok(Wd(Value::Null))
}

async fn source(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = session(&state, &sid)?;
    let screen = screen(&state, &session).await?;
    Ok(Wd(Value::String(page::Page::new(&screen).xml())))
}

/// A PNG of the device, base64.
pub async fn picture(state: &Facade, session: &Session) -> WdResult<Vec<u8>> {
    let outcome = state
        .sessions
        .call(session, "argus.screenshot", None, CALL_TIMEOUT, super::traceparent())
        .await
        .map_err(|f| WdError::new(Code::UnableToCaptureScreen, translate(&f, false).message))?;
    match outcome {
        device_answer::Outcome::Png(png) => Ok(png),
        _ => Err(WdError::new(Code::UnableToCaptureScreen, "the worker sent no picture")),
    }
}

async fn screenshot(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = session(&state, &sid)?;
    let png = picture(&state, &session).await?;
    Ok(Wd(Value::String(base64::engine::general_purpose::STANDARD.encode(png))))
}

async fn window(state: &Facade, sid: &str) -> WdResult<(f64, f64)> {
    let session = session(state, sid)?;
    let screen = screen(state, &session).await?;
    Ok((screen.window.w, screen.window.h))
}

async fn window_rect(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let (w, h) = window(&state, &sid).await?;
    Ok(Wd(json!({ "x": 0, "y": 0, "width": w.round() as i64, "height": h.round() as i64 })))
}

async fn window_size(State(state): State<Facade>, Path((sid, _)): Path<(String, String)>) -> Answer {
    let (w, h) = window(&state, &sid).await?;
    Ok(Wd(json!({ "width": w.round() as i64, "height": h.round() as i64 })))
}

async fn orientation(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let (w, h) = window(&state, &sid).await?;
    Ok(Wd(json!(if w > h { "LANDSCAPE" } else { "PORTRAIT" })))
}

async fn set_orientation(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    session(&state, &sid)?;
    Err(WdError::unsupported("a lynkeus app cannot be rotated from the grid"))
}

async fn back(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = session(&state, &sid)?;
    call(&state, &session, "back", None).await?;
    Ok(Wd(Value::Null))
}

async fn perform_actions(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = session(&state, &sid)?;
    let body = Value::Object(body(&bytes)?);
    run_actions(&state, &session, &body).await?;
    Ok(Wd(Value::Null))
}

/// Plans W3C actions against the screen and runs them in order.
pub async fn run_actions(state: &Facade, session: &Session, body: &Value) -> WdResult<()> {
    let screen = screen(state, session).await?;
    let mut centres = HashMap::new();
    for id in actions::origins(body) {
        let found = session.element(&id)?;
        let element = found.on(&screen).ok_or_else(|| {
            WdError::new(Code::StaleElementReference, format!("element {id} is no longer on the screen"))
        })?;
        let centre = element.frame.centre();
        centres.insert(id, (centre.x, centre.y));
    }
    let planned = actions::plan(body, &centres, (screen.window.w, screen.window.h))?;
    for step in &planned {
        call(state, session, step.method(), Some(step.params())).await?;
    }
    Ok(())
}

async fn release_actions(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    session(&state, &sid)?;
    Ok(Wd(Value::Null))
}

/// `NATIVE_APP`, and the contexts the app lists in its hello, if any.
fn context_names(session: &Session) -> Vec<String> {
    let mut names = vec![NATIVE_APP.to_owned()];
    let listed = session.grant.hello.as_ref().and_then(|hello| hello.extra.get("contexts"));
    if let Some(more) = listed.and_then(Value::as_array) {
        names.extend(more.iter().filter_map(Value::as_str).filter(|c| *c != NATIVE_APP).map(str::to_owned));
    }
    names
}

async fn contexts(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = session(&state, &sid)?;
    Ok(Wd(json!(context_names(&session))))
}

async fn context(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    session(&state, &sid)?;
    Ok(Wd(json!(NATIVE_APP)))
}

async fn set_context(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = session(&state, &sid)?;
    let body = body(&bytes)?;
    match body.get("name") {
        None | Some(Value::Null) => Ok(Wd(Value::Null)),
        Some(Value::String(name)) if name == NATIVE_APP => Ok(Wd(Value::Null)),
        Some(Value::String(name)) if context_names(&session).contains(name) => {
            Err(WdError::unsupported(format!("context {name} is listed by the app, but only NATIVE_APP can be driven")))
        }
        Some(Value::String(_)) => Err(WdError::no_such_context()),
        Some(other) => Err(WdError::invalid_argument(format!("a context's name is a string, not {other}"))),
    }
}
