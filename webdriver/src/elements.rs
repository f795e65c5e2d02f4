//! Finding elements and the commands on them. An element id stands for
//! what was found ([`Found`]): on the same screen (`commit`) it is the same
//! element; after a change it is found again by its fingerprint, and an
//! element that is gone is a `stale element reference`.

use std::sync::Arc;
use std::time::Duration;

use argus_proto::wire::{Element, Screen, Target, TypeParams};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::{Code, WdError, WdResult};
use super::registry::{ELEMENT_KEY, Fingerprint, Found, Session};
use super::session::{call, screen};
use super::{Answer, Wd, body, locate, page};
use crate::Facade;

/// How often an implicit wait looks at the screen again.
const POLL: Duration = Duration::from_millis(200);

pub fn routes() -> Router<Facade> {
    Router::new()
        .route("/session/{sid}/element", post(find_one))
        .route("/session/{sid}/elements", post(find_all))
        .route("/session/{sid}/element/active", get(active))
        .route("/session/{sid}/element/{eid}/element", post(find_one_within))
        .route("/session/{sid}/element/{eid}/elements", post(find_all_within))
        .route("/session/{sid}/element/{eid}/click", post(click))
        .route("/session/{sid}/element/{eid}/clear", post(clear))
        .route("/session/{sid}/element/{eid}/value", post(send_keys))
        .route("/session/{sid}/element/{eid}/text", get(text))
        .route("/session/{sid}/element/{eid}/name", get(tag_name))
        .route("/session/{sid}/element/{eid}/attribute/{name}", get(attribute))
        .route("/session/{sid}/element/{eid}/property/{name}", get(property))
        .route("/session/{sid}/element/{eid}/rect", get(rect))
        .route("/session/{sid}/element/{eid}/location", get(location))
        .route("/session/{sid}/element/{eid}/size", get(size))
        .route("/session/{sid}/element/{eid}/displayed", get(displayed))
        .route("/session/{sid}/element/{eid}/enabled", get(enabled))
        .route("/session/{sid}/element/{eid}/selected", get(selected))
        .route("/session/{sid}/element/{eid}/screenshot", get(element_screenshot))
}

/// An element reference as clients read it (W3C key, and the JSONWP one
/// older Appium clients still read).
pub fn reference(id: &str) -> Value {
    json!({ ELEMENT_KEY: id, "ELEMENT": id })
}

/// The element id in a reference a client sent back (an execute argument).
pub fn id_of(reference: &Value) -> Option<&str> {
    reference.get(ELEMENT_KEY).or_else(|| reference.get("ELEMENT")).and_then(Value::as_str)
}

/// What lynkeus would call the element without looking again: its testId,
/// and its place among the elements lynkeus matches by that testId.
fn target(screen: &Screen, i: usize) -> Option<Target> {
    let position = screen.elements.iter().position(|e| e.i == i)?;
    let element = &screen.elements[position];
    let test_id = element.test_id.clone()?;
    let matchable = |e: &Element| e.hidden.is_none_or(|h| h == argus_proto::wire::HiddenReason::Inert);
    if !matchable(element) {
        return None;
    }
    let nth =
        screen.elements[..position].iter().filter(|e| e.test_id.as_deref() == Some(&test_id) && matchable(e)).count();
    let more = screen.elements[position + 1..].iter().any(|e| e.test_id.as_deref() == Some(&test_id) && matchable(e));
    Some(Target::TestId { test_id, nth: (nth > 0 || more).then_some(nth), within: None })
}

fn found(screen: &Screen, i: usize) -> Option<Found> {
    Some(Found { i, commit: screen.commit, fingerprint: Fingerprint::of(screen, i)?, target: target(screen, i) })
}

struct Query {
    using: String,
    value: String,
}

fn query(bytes: &Bytes) -> WdResult<Query> {
    let body = body(bytes)?;
    let text = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| WdError::invalid_argument(format!("a find needs `{key}`, a string")))
    };
    Ok(Query { using: text("using")?, value: text("value")? })
}

/// Finds elements, looking again until the implicit wait is over while
/// none match. A single find prefers displayed elements.
async fn find(state: &Facade, session: &Session, query: &Query, within: Option<&str>) -> WdResult<Vec<String>> {
    let deadline = Instant::now() + session.timeouts().implicit();
    let parent = within.map(|id| session.element(id)).transpose()?;
    loop {
        let screen = screen(state, session).await?;
        let scope = match &parent {
            Some(found) => Some(
                found
                    .on(&screen)
                    .ok_or_else(|| WdError::new(Code::StaleElementReference, "the element searched from is gone"))?
                    .i,
            ),
            None => None,
        };
        let mut hits = locate::locate(&screen, &query.using, &query.value, scope)?;
        if !hits.is_empty() || Instant::now() >= deadline {
            let shown = |i: &usize| screen.elements.iter().find(|e| e.i == *i).is_some_and(page::displayed);
            hits.sort_by_key(|i| !shown(i));
            return Ok(hits.into_iter().filter_map(|i| found(&screen, i)).map(|f| session.remember(f)).collect());
        }
        tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
    }
}

async fn find_first(state: &Facade, sid: &str, bytes: &Bytes, within: Option<&str>) -> Answer {
    let session = state.sessions.get(sid)?;
    let query = query(bytes)?;
    let ids = find(state, &session, &query, within).await?;
    let id = ids.first().ok_or_else(|| {
        WdError::new(
            Code::NoSuchElement,
            format!(
                "An element could not be located on the page using the given search parameters ({}: {:?})",
                query.using, query.value
            ),
        )
    })?;
    Ok(Wd(reference(id)))
}

async fn find_every(state: &Facade, sid: &str, bytes: &Bytes, within: Option<&str>) -> Answer {
    let session = state.sessions.get(sid)?;
    let ids = find(state, &session, &query(bytes)?, within).await?;
    Ok(Wd(Value::Array(ids.iter().map(|id| reference(id)).collect())))
}

async fn find_one(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    find_first(&state, &sid, &bytes, None).await
}

async fn find_all(State(state): State<Facade>, Path(sid): Path<String>, bytes: Bytes) -> Answer {
    find_every(&state, &sid, &bytes, None).await
}

async fn find_one_within(
    State(state): State<Facade>,
    Path((sid, eid)): Path<(String, String)>,
    bytes: Bytes,
) -> Answer {
    find_first(&state, &sid, &bytes, Some(&eid)).await
}

async fn find_all_within(
    State(state): State<Facade>,
    Path((sid, eid)): Path<(String, String)>,
    bytes: Bytes,
) -> Answer {
    find_every(&state, &sid, &bytes, Some(&eid)).await
}

/// The focused input.
async fn active(State(state): State<Facade>, Path(sid): Path<String>) -> Answer {
    let session = state.sessions.get(&sid)?;
    let screen = screen(&state, &session).await?;
    let focused = screen
        .elements
        .iter()
        .find(|e| e.is_focused())
        .and_then(|e| found(&screen, e.i))
        .ok_or_else(|| WdError::new(Code::NoSuchElement, "no element has the focus"))?;
    Ok(Wd(reference(&session.remember(focused))))
}

/// The session and the element `eid` as the screen shows it now.
pub async fn current(state: &Facade, sid: &str, eid: &str) -> WdResult<(Arc<Session>, Screen, Element)> {
    let session = state.sessions.get(sid)?;
    let found = session.element(eid)?;
    let screen = screen(state, &session).await?;
    let element = found.on(&screen).cloned().ok_or_else(|| {
        WdError::new(Code::StaleElementReference, format!("element {eid} is no longer on the screen"))
    })?;
    Ok((session, screen, element))
}

/// How to name element `eid` in a call: its testId when it has one (no
/// look at the screen needed), else its index on the screen now.
async fn target_of(state: &Facade, sid: &str, eid: &str) -> WdResult<(Arc<Session>, Target)> {
    let session = state.sessions.get(sid)?;
    if let Some(target) = session.element(eid)?.target {
        return Ok((session, target));
    }
    let (session, _, element) = current(state, sid, eid).await?;
    Ok((session, Target::Index { i: element.i }))
}

/// A call on an element: a target that no longer matches is stale.
async fn element_call(state: &Facade, session: &Session, method: &str, params: Value) -> WdResult<Value> {
    call(state, session, method, Some(params)).await.map_err(|error| {
        if error.code == Code::NoSuchElement { WdError::new(Code::StaleElementReference, error.message) } else { error }
    })
}

pub async fn click_element(state: &Facade, sid: &str, eid: &str) -> WdResult<()> {
    let (session, target) = target_of(state, sid, eid).await?;
    let press = super::actions::press(target, None);
    element_call(state, &session, press.method(), press.params()).await.map(drop)
}

async fn click(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    click_element(&state, &sid, &eid).await?;
    Ok(Wd(Value::Null))
}

async fn clear(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (session, target) = target_of(&state, &sid, &eid).await?;
    let clear = TypeParams { text: String::new(), target: Some(target), clear: Some(true), paste: None, submit: None };
    element_call(&state, &session, "type", typed(&clear)).await?;
    Ok(Wd(Value::Null))
}

/// The text of send keys: W3C `text`, or JSONWP `value` (a list of keys).
/// A trailing Enter or Return submits; other special keys have no lynkeus
/// equivalent.
fn keys(body: &serde_json::Map<String, Value>) -> WdResult<(String, bool)> {
    let mut text = match (body.get("text"), body.get("value")) {
        (Some(Value::String(text)), _) => text.clone(),
        (_, Some(Value::Array(keys))) => keys.iter().filter_map(Value::as_str).collect(),
        _ => return Err(WdError::invalid_argument("send keys needs `text`, a string")),
    };
    let mut submit = false;
    while text.ends_with(['\u{E007}', '\u{E006}']) {
        text.pop();
        submit = true;
    }
    if let Some(key) = text.chars().find(|c| ('\u{E000}'..='\u{F8FF}').contains(c)) {
        return Err(WdError::invalid_argument(format!(
            "key U+{:04X} cannot be typed into a lynkeus app: only text, and Enter at the end",
            u32::from(key)
        )));
    }
    Ok((text, submit))
}

async fn send_keys(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>, bytes: Bytes) -> Answer {
    let (text, submit) = keys(&body(&bytes)?)?;
    let (session, target) = target_of(&state, &sid, &eid).await?;
    let params = TypeParams { text, target: Some(target), clear: None, paste: None, submit: Some(submit) };
    element_call(&state, &session, "type", typed(&params)).await?;
    Ok(Wd(Value::Null))
}

fn typed(params: &TypeParams) -> Value {
    serde_json::to_value(params).expect("lynkeus params are plain data")
}

pub fn text_of(element: &Element) -> String {
    element
        .text
        .clone()
        .or_else(|| element.value.clone())
        .or_else(|| element.accessibility_label.clone())
        .unwrap_or_default()
}

async fn text(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    Ok(Wd(json!(text_of(&element))))
}

async fn tag_name(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    Ok(Wd(json!(page::tag(element.kind))))
}

pub async fn attribute_of(state: &Facade, sid: &str, eid: &str, name: &str) -> WdResult<Value> {
    let (_, _, element) = current(state, sid, eid).await?;
    Ok(page::attribute(&element, name).map_or(Value::Null, Value::String))
}

async fn attribute(State(state): State<Facade>, Path((sid, eid, name)): Path<(String, String, String)>) -> Answer {
    attribute_of(&state, &sid, &eid, &name).await.map(Wd)
}

async fn property(State(state): State<Facade>, Path((sid, eid, name)): Path<(String, String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    let value = match page::attribute(&element, &name) {
        None => Value::Null,
        Some(text) => match text.as_str() {
            "true" => json!(true),
            "false" => json!(false),
            // Numbers stay numbers, except a text or value that looks like one.
            _ if matches!(name.as_str(), "x" | "y" | "width" | "height" | "depth" | "i") => {
                text.parse::<i64>().map_or(Value::String(text.clone()), |n| json!(n))
            }
            _ => Value::String(text),
        },
    };
    Ok(Wd(value))
}

fn rect_of(element: &Element) -> Value {
    let f = &element.frame;
    json!({ "x": f.x.round() as i64, "y": f.y.round() as i64, "width": f.w.round() as i64, "height": f.h.round() as i64 })
}

async fn rect(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    Ok(Wd(rect_of(&element)))
}

async fn location(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    let r = rect_of(&element);
    Ok(Wd(json!({ "x": r["x"], "y": r["y"] })))
}

async fn size(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    let r = rect_of(&element);
    Ok(Wd(json!({ "width": r["width"], "height": r["height"] })))
}

pub async fn is_displayed(state: &Facade, sid: &str, eid: &str) -> WdResult<bool> {
    let (_, _, element) = current(state, sid, eid).await?;
    Ok(page::displayed(&element))
}

async fn displayed(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    is_displayed(&state, &sid, &eid).await.map(|d| Wd(json!(d)))
}

async fn enabled(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    Ok(Wd(json!(element.enabled)))
}

async fn selected(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (_, _, element) = current(&state, &sid, &eid).await?;
    Ok(Wd(json!(page::selected(&element))))
}

/// The element's part of a screenshot of the device.
async fn element_screenshot(State(state): State<Facade>, Path((sid, eid)): Path<(String, String)>) -> Answer {
    let (session, screen, element) = current(&state, &sid, &eid).await?;
    let png = super::session::picture(&state, &session).await?;
    let cropped = crop(&png, screen.window.w, &element).map_err(|why| {
        WdError::new(Code::UnableToCaptureScreen, format!("cannot cut the element out of the screenshot: {why}"))
    })?;
    Ok(Wd(json!(base64::engine::general_purpose::STANDARD.encode(cropped))))
}

/// Cuts `element`'s frame out of a PNG of a window `window_w` points wide.
fn crop(png: &[u8], window_w: f64, element: &Element) -> Result<Vec<u8>, String> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().map_err(|e| e.to_string())?;
    let mut pixels = vec![0; reader.output_buffer_size().ok_or("the picture is too large")?];
    let info = reader.next_frame(&mut pixels).map_err(|e| e.to_string())?;
    if info.bit_depth != png::BitDepth::Eight {
        return Err(format!("a {:?}-bit picture", info.bit_depth));
    }
    let channels = info.color_type.samples();
    let scale = if window_w > 0.0 { f64::from(info.width) / window_w } else { 1.0 };
    let clamp = |v: f64, max: u32| (v * scale).round().clamp(0.0, f64::from(max)) as u32;
    let f = &element.frame;
    let (x0, y0) = (clamp(f.x, info.width), clamp(f.y, info.height));
    let (x1, y1) = (clamp(f.x + f.w, info.width), clamp(f.y + f.h, info.height));
    if x1 <= x0 || y1 <= y0 {
        return Err("the element is outside the picture".into());
    }
    let mut out = Vec::with_capacity(((x1 - x0) * (y1 - y0)) as usize * channels);
    for y in y0..y1 {
        let row = &pixels[y as usize * info.line_size..][..info.line_size];
        out.extend_from_slice(&row[x0 as usize * channels..x1 as usize * channels]);
    }
    let mut encoded = Vec::new();
    let mut encoder = png::Encoder::new(&mut encoded, x1 - x0, y1 - y0);
    encoder.set_color(info.color_type);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&out).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    use super::super::page::tests::login_screen;
    use super::*;

    #[test]
    fn an_element_is_found_again_after_the_screen_changed_or_is_stale() {
        let screen = login_screen();
        let again = found(&screen, 5).unwrap();
        assert_eq!(again.target, Some(Target::TestId { test_id: "login".into(), nth: Some(1), within: None }));
        let mut changed = screen.clone();
        changed.commit += 1;
        changed.elements.remove(2);
        assert_eq!(again.on(&changed).map(|e| e.i), Some(5), "by its fingerprint");
        changed.elements.retain(|e| e.i != 5);
        assert!(again.on(&changed).is_none(), "gone: stale");
    }

    #[test]
    fn send_keys_submits_on_enter_and_refuses_other_keys() {
        let body = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(keys(&body(json!({"text": "hi\u{E007}"}))).unwrap(), ("hi".into(), true));
        assert_eq!(keys(&body(json!({"value": ["h", "i"]}))).unwrap(), ("hi".into(), false));
        assert!(keys(&body(json!({"text": "a\u{E003}"}))).unwrap_err().message.contains("U+E003"));
    }
}
