//! `execute/sync`: `mobile:` and `lynkeus:` commands (lynkeus methods and
//! the app's own commands), the two JavaScript atoms plain selenium sends
//! for `is_displayed` and `get_attribute`; network connection; and the
//! legacy Appium endpoints older clients fall back to.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use argus_proto::wire::{Direction, SwipeParams, Target};

use super::actions::{Call, press};
use super::elements::{self, id_of};
use super::error::{Code, WdError, WdResult};
use super::registry::Session;
use super::session::{call, run_actions, screen};
use super::{Answer, Wd, body};
use crate::Facade;

pub fn routes() -> Router<Facade> {
    Router::new()
        .route("/session/{sid}/execute/sync", post(execute))
        .route("/session/{sid}/execute/async", post(execute))
        .route("/session/{sid}/execute", post(execute))
        .route("/session/{sid}/network_connection", get(get_network).post(set_network))
        .route("/session/{sid}/appium/device/hide_keyboard", post(hide_keyboard))
        .route("/session/{sid}/appium/device/is_keyboard_shown", get(keyboard_shown))
        .route("/session/{sid}/touch/perform", post(touch_perform))
}

/// lynkeus core methods a `lynkeus:` script may call by name.
const CORE_METHODS: [&str; 12] = [
    "screen", "navigate", "back", "waitFor", "idle", "requests", "trace", "batch", "deepLink", "reset", "find", "ping",
];

async fn execute(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = state.sessions.get(&sid)?;
    let body = body(&bytes)?;
    let script = body
        .get("script")
        .and_then(Value::as_str)
        .ok_or_else(|| WdError::invalid_argument("execute needs `script`, a string"))?;
    let args = match body.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(args)) => args.clone(),
        Some(_) => return Err(WdError::invalid_argument("execute's `args` must be a list")),
    };
    let first = args.first().cloned().unwrap_or(Value::Null);
    if script.starts_with("/* isDisplayed */") || script.starts_with("/* getAttribute */") {
        let eid =
            id_of(&first).ok_or_else(|| WdError::invalid_argument("the atom's first argument is not an element"))?;
        return if script.starts_with("/* isDisplayed */") {
            elements::is_displayed(&state, &sid, eid).await.map(|d| Wd(json!(d)))
        } else {
            let name = args.get(1).and_then(Value::as_str).unwrap_or_default();
            elements::attribute_of(&state, &sid, eid, name).await.map(Wd)
        };
    }
    let Some((prefix, name)) = script.split_once(':').filter(|(p, _)| matches!(*p, "mobile" | "lynkeus")) else {
        return Err(WdError::new(
            Code::JavascriptError,
            "scripts are not supported in NATIVE_APP: use `mobile: <command>` or `lynkeus: <method>`",
        ));
    };
    let params = match first {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => return Err(WdError::invalid_argument(format!("{script}'s argument must be an object, not {other}"))),
    };
    mobile(&state, &session, prefix, name.trim(), params).await.map(Wd)
}

/// The element named by `elementId` (or `element`) in a mobile command's
/// params, as a lynkeus target.
async fn element_target(state: &Facade, session: &Session, params: &Map<String, Value>) -> WdResult<Option<Target>> {
    let Some(eid) = params.get("elementId").or_else(|| params.get("element")).and_then(|v| v.as_str().or(id_of(v)))
    else {
        return Ok(None);
    };
    let found = session.element(eid)?;
    if let Some(target) = found.target {
        return Ok(Some(target));
    }
    let screen = screen(state, session).await?;
    let element = found.on(&screen).ok_or_else(|| {
        WdError::new(Code::StaleElementReference, format!("element {eid} is no longer on the screen"))
    })?;
    Ok(Some(Target::Index { i: element.i }))
}

/// The point of a gesture: an element, or `x`/`y`.
async fn gesture_target(state: &Facade, session: &Session, params: &Map<String, Value>) -> WdResult<Target> {
    if let Some(target) = element_target(state, session, params).await? {
        return Ok(target);
    }
    match (params.get("x").and_then(Value::as_f64), params.get("y").and_then(Value::as_f64)) {
        (Some(x), Some(y)) => Ok(Target::Point { x, y }),
        _ => Err(WdError::invalid_argument("the gesture needs elementId, or x and y")),
    }
}

fn has_command(session: &Session, name: &str) -> bool {
    session.grant.hello.as_ref().is_some_and(|hello| hello.has_command(name))
}

async fn mobile(
    state: &Facade,
    session: &Session,
    prefix: &str,
    name: &str,
    params: Map<String, Value>,
) -> WdResult<Value> {
    let direction = |params: &Map<String, Value>| -> WdResult<Direction> {
        let named = params.get("direction").and_then(Value::as_str).map(str::to_lowercase);
        serde_json::from_value(json!(named)).map_err(|_| {
            WdError::invalid_argument(format!("{prefix}: {name} needs direction: up, down, left or right"))
        })
    };
    let run =
        |call: Call| async move { super::session::call(state, session, call.method(), Some(call.params())).await };
    match name {
        "swipe" | "swipeGesture" => {
            let target = element_target(state, session, &params).await?;
            run(Call::Swipe(SwipeParams { direction: Some(direction(&params)?), target, ..Default::default() })).await
        }
        "scroll" | "scrollGesture" => {
            // Scrolling down brings what is below into view: a swipe up.
            let opposite = match direction(&params)? {
                Direction::Down => Direction::Up,
                Direction::Up => Direction::Down,
                Direction::Left => Direction::Right,
                Direction::Right => Direction::Left,
            };
            let target = element_target(state, session, &params).await?;
            run(Call::Swipe(SwipeParams { direction: Some(opposite), target, ..Default::default() })).await
        }
        "tap" | "clickGesture" => run(press(gesture_target(state, session, &params).await?, None)).await,
        "doubleTap" | "doubleClickGesture" => {
            let target = gesture_target(state, session, &params).await?;
            run(press(target.clone(), None)).await?;
            run(press(target, None)).await
        }
        "touchAndHold" | "longClickGesture" => {
            let target = gesture_target(state, session, &params).await?;
            let duration = params.get("duration").and_then(Value::as_f64);
            // XCUITest's duration is seconds; UiAutomator2's is ms.
            let hold_ms = match (name, duration) {
                ("touchAndHold", Some(s)) => (s * 1000.0) as u64,
                (_, Some(ms)) => ms as u64,
                _ => 1000,
            };
            if hold_ms > super::actions::MAX_GESTURE_MS {
                return Err(WdError::invalid_argument(format!(
                    "{prefix}: {name} holds for {hold_ms} ms; a gesture takes at most {} ms",
                    super::actions::MAX_GESTURE_MS
                )));
            }
            run(press(target, Some(hold_ms))).await
        }
        "hideKeyboard" => call(state, session, "dismissKeyboard", None).await.map(|_| Value::Null),
        "isKeyboardShown" => keyboard_is_shown(state, session).await.map(Value::Bool),
        "getConnectivity" => connectivity(state, session, None).await,
        "setConnectivity" => connectivity(state, session, Some(Value::Object(params))).await,
        "deepLink" => {
            let url = params
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| WdError::invalid_argument("deepLink needs url"))?;
            call(state, session, "deepLink", Some(json!({ "url": url }))).await
        }
        "reset" | "idle" | "waitFor" | "navigate" | "requests" | "trace" | "batch" | "screen" | "find" | "ping"
            if prefix == "lynkeus" || matches!(name, "reset" | "idle" | "waitFor") =>
        {
            call(state, session, name, (!params.is_empty()).then_some(Value::Object(params))).await
        }
        _ if has_command(session, name) => {
            call(state, session, name, (!params.is_empty()).then_some(Value::Object(params))).await
        }
        _ => Err(WdError::unsupported(format!(
            "{prefix}: {name} is not a command of this app (it has: {}) nor a lynkeus method ({})",
            session.grant.hello.as_ref().map_or_else(|| "none".into(), |hello| json!(hello.commands).to_string()),
            CORE_METHODS.join(", ")
        ))),
    }
}

async fn keyboard_is_shown(state: &Facade, session: &Session) -> WdResult<bool> {
    let screen = screen(state, session).await?;
    Ok(screen.elements.iter().any(|e| e.kind == argus_proto::wire::ElementKind::Input && e.is_focused()))
}

/// The app's `network` command (`{wifi, data, airplaneMode}` in and out),
/// when it has one; a lynkeus app has no other way to change its network.
async fn connectivity(state: &Facade, session: &Session, set: Option<Value>) -> WdResult<Value> {
    if !has_command(session, "network") {
        return Err(WdError::unsupported(
            "this app has no `network` command, and the grid cannot change a device's network: network connection is not available",
        ));
    }
    call(state, session, "network", set).await
}

/// The seed's bit mask: 1 airplane mode, 2 wifi, 4 data.
fn mask_of(state: &Value) -> u64 {
    let on = |key: &str| state.get(key).and_then(Value::as_bool).unwrap_or(false);
    u64::from(on("airplaneMode")) | u64::from(on("wifi")) << 1 | u64::from(on("data")) << 2
}

async fn get_network(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = state.sessions.get(&sid)?;
    let now = connectivity(&state, &session, None).await?;
    Ok(Wd(json!(mask_of(&now))))
}

async fn set_network(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = state.sessions.get(&sid)?;
    let body = body(&bytes)?;
    let mask = body
        .get("parameters")
        .and_then(|p| p.get("type"))
        .or_else(|| body.get("type"))
        .and_then(Value::as_u64)
        .filter(|m| *m < 8)
        .ok_or_else(|| WdError::invalid_argument("network_connection needs parameters.type, a bit mask from 0 to 7"))?;
    let wanted = json!({ "airplaneMode": mask & 1 != 0, "wifi": mask & 2 != 0, "data": mask & 4 != 0 });
    connectivity(&state, &session, Some(wanted)).await?;
    let now = connectivity(&state, &session, None).await?;
    Ok(Wd(json!(mask_of(&now))))
}

async fn hide_keyboard(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = state.sessions.get(&sid)?;
    call(&state, &session, "dismissKeyboard", None).await?;
    Ok(Wd(Value::Null))
}

async fn keyboard_shown(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = state.sessions.get(&sid)?;
    keyboard_is_shown(&state, &session).await.map(|s| Wd(json!(s)))
}

/// The legacy TouchAction (`press`, `wait`, `moveTo`, `release`, `tap`,
/// `longPress`), as the W3C pointer actions it stands for.
async fn touch_perform(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    let session = state.sessions.get(&sid)?;
    let body = body(&bytes)?;
    let steps = body
        .get("actions")
        .and_then(Value::as_array)
        .ok_or_else(|| WdError::invalid_argument("touch/perform needs `actions`, a list"))?;
    let mut pointer = Vec::new();
    for step in steps {
        let action = step.get("action").and_then(Value::as_str).unwrap_or_default();
        let options = step.get("options").cloned().unwrap_or(json!({}));
        let origin = match options.get("element").and_then(|v| v.as_str().or(id_of(v))) {
            Some(eid) => json!({ super::registry::ELEMENT_KEY: eid }),
            None => json!("viewport"),
        };
        let at = json!({ "type": "pointerMove", "duration": 0, "origin": origin,
            "x": options.get("x").cloned().unwrap_or(json!(0)), "y": options.get("y").cloned().unwrap_or(json!(0)) });
        match action {
            "press" => pointer.extend([at, json!({ "type": "pointerDown" })]),
            "longPress" => pointer.extend([
                at,
                json!({ "type": "pointerDown" }),
                json!({ "type": "pause", "duration": options.get("duration").and_then(Value::as_u64).unwrap_or(1000) }),
            ]),
            "tap" => pointer.extend([at, json!({ "type": "pointerDown" }), json!({ "type": "pointerUp" })]),
            "moveTo" => pointer.push(at),
            "wait" => pointer
                .push(json!({ "type": "pause", "duration": options.get("ms").and_then(Value::as_u64).unwrap_or(0) })),
            "release" => pointer.push(json!({ "type": "pointerUp" })),
            other => {
                return Err(WdError::invalid_argument(format!(
                    "touch action {other:?} is not press, longPress, tap, moveTo, wait or release"
                )));
            }
        }
    }
    let actions = json!({ "actions": [{ "type": "pointer", "id": "touch", "parameters": { "pointerType": "touch" }, "actions": pointer }] });
    run_actions(&state, &session, &actions).await?;
    Ok(Wd(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_mask_is_the_seeds() {
        assert_eq!(mask_of(&json!({"wifi": true, "data": true, "airplaneMode": false})), 6);
        assert_eq!(mask_of(&json!({"airplaneMode": true})), 1);
        assert_eq!(mask_of(&json!({"wifi": true})), 2);
    }
}
