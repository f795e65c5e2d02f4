//! W3C actions (`POST /session/{id}/actions`) as lynkeus calls: each
//! pointer's down…up becomes a `press` at its point (held for the pauses in
//! between) or, when it moved, a `swipe` from where it went down to where it
//! came up; printable keys become `type`; a wheel scroll becomes a swipe.
//! lynkeus has one finger: pointers whose downs overlap are refused.

use std::collections::HashMap;

use argus_proto::wire::{Direction, Point, PressParams, SwipeParams, Target, TypeParams};
use serde::Deserialize;
use serde_json::Value;

use super::error::{Code, WdError, WdResult};
use super::registry::ELEMENT_KEY;

/// A press or swipe that moved less than this is a press.
const SLOP: f64 = 10.0;
/// The shortest hold lynkeus is given (its own default).
const MIN_HOLD_MS: u64 = 50;
/// The longest gesture taken: a call to the app waits for all of it.
pub const MAX_GESTURE_MS: u64 = 60_000;

#[derive(Debug, Deserialize)]
struct Body {
    actions: Vec<Source>,
}

#[derive(Debug, Deserialize)]
struct Source {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    parameters: Option<Parameters>,
    #[serde(default)]
    actions: Vec<Action>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Parameters {
    #[serde(default)]
    pointer_type: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Action {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    x: Option<f64>,
    #[serde(default)]
    y: Option<f64>,
    #[serde(default, rename = "deltaX")]
    delta_x: Option<f64>,
    #[serde(default, rename = "deltaY")]
    delta_y: Option<f64>,
    #[serde(default)]
    origin: Option<Value>,
    #[serde(default)]
    value: Option<String>,
}

/// One lynkeus call of a planned action sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Press(PressParams),
    Swipe(SwipeParams),
    Type(TypeParams),
}

impl Call {
    pub fn method(&self) -> &'static str {
        match self {
            Call::Press(_) => "press",
            Call::Swipe(_) => "swipe",
            Call::Type(_) => "type",
        }
    }

    pub fn params(&self) -> Value {
        let params = match self {
            Call::Press(p) => serde_json::to_value(p),
            Call::Swipe(p) => serde_json::to_value(p),
            Call::Type(p) => serde_json::to_value(p),
        };
        params.expect("lynkeus params are plain data")
    }
}

/// A lynkeus press at `target`, held `hold_ms`.
pub fn press(target: Target, hold_ms: Option<u64>) -> Call {
    Call::Press(PressParams { target, hold_ms, mode: None })
}

/// The element ids the actions use as origins (their centres are needed).
pub fn origins(body: &Value) -> Vec<String> {
    let Ok(body) = Body::deserialize(body) else { return Vec::new() };
    body.actions
        .iter()
        .flat_map(|s| &s.actions)
        .filter_map(|a| a.origin.as_ref()?.get(ELEMENT_KEY)?.as_str().map(str::to_owned))
        .collect()
}

/// A gesture of one pointer, at the tick its pointer went down.
struct Gesture {
    down_tick: usize,
    up_tick: usize,
    call: Call,
}

/// The calls `body` stands for, in order. `centres` holds the centre of each
/// element named as an origin; `window` is the screen's size.
pub fn plan(body: &Value, centres: &HashMap<String, (f64, f64)>, window: (f64, f64)) -> WdResult<Vec<Call>> {
    let body =
        Body::deserialize(body).map_err(|e| WdError::invalid_argument(format!("the actions do not parse: {e}")))?;
    let mut gestures: Vec<Gesture> = Vec::new();
    let mut typed = String::new();
    let mut submit = false;
    for source in &body.actions {
        match source.kind.as_str() {
            "pointer" => {
                let pointer = source.parameters.as_ref().and_then(|p| p.pointer_type.as_deref()).unwrap_or("mouse");
                if !matches!(pointer, "mouse" | "pen" | "touch") {
                    return Err(WdError::invalid_argument(format!(
                        "pointer {:?} has pointerType {pointer:?}: mouse, pen or touch",
                        source.id
                    )));
                }
                gestures.extend(pointer_gestures(source, centres, window)?);
            }
            "key" => {
                for action in &source.actions {
                    match action.kind.as_str() {
                        "keyDown" => match action.value.as_deref() {
                            Some("\u{E007}" | "\u{E006}") => submit = true,
                            Some(key) if key.chars().all(|c| !('\u{E000}'..='\u{F8FF}').contains(&c)) => {
                                typed.push_str(key)
                            }
                            Some(key) => {
                                return Err(WdError::unsupported(format!(
                                    "key {:?} has no lynkeus equivalent: only text and Enter can be typed",
                                    key.escape_unicode().to_string()
                                )));
                            }
                            None => return Err(WdError::invalid_argument("a keyDown without a value")),
                        },
                        "keyUp" | "pause" => {}
                        other => return Err(WdError::invalid_argument(format!("a key source cannot {other}"))),
                    }
                }
            }
            "wheel" => {
                for (tick, action) in source.actions.iter().enumerate() {
                    if action.kind == "scroll" {
                        let (dx, dy) = (action.delta_x.unwrap_or(0.0), action.delta_y.unwrap_or(0.0));
                        // Scrolling down shows what is below: a swipe up.
                        let direction = if dy.abs() >= dx.abs() {
                            if dy > 0.0 { Direction::Up } else { Direction::Down }
                        } else if dx > 0.0 {
                            Direction::Left
                        } else {
                            Direction::Right
                        };
                        let call = Call::Swipe(SwipeParams { direction: Some(direction), ..Default::default() });
                        gestures.push(Gesture { down_tick: tick, up_tick: tick, call });
                    }
                }
            }
            "none" => {}
            other => return Err(WdError::invalid_argument(format!("action source type {other:?} is not a W3C one"))),
        }
    }
    gestures.sort_by_key(|g| g.down_tick);
    if gestures.windows(2).any(|pair| pair[1].down_tick <= pair[0].up_tick) {
        return Err(WdError::unsupported(
            "the pointers are down at the same time (a pinch or multi-finger gesture): lynkeus apps take one finger",
        ));
    }
    let mut calls: Vec<Call> = gestures.into_iter().map(|g| g.call).collect();
    if !typed.is_empty() || submit {
        calls.push(Call::Type(TypeParams {
            text: typed,
            target: None,
            clear: None,
            paste: None,
            submit: Some(submit),
        }));
    }
    Ok(calls)
}

fn pointer_gestures(
    source: &Source,
    centres: &HashMap<String, (f64, f64)>,
    window: (f64, f64),
) -> WdResult<Vec<Gesture>> {
    let mut at = (0.0_f64, 0.0_f64);
    // Where and when it went down, how long it was held and how long it moved.
    let mut down: Option<(usize, (f64, f64), u64, u64)> = None;
    let mut gestures = Vec::new();
    for (tick, action) in source.actions.iter().enumerate() {
        let ms = action.duration.unwrap_or(0.0).max(0.0) as u64;
        match action.kind.as_str() {
            "pointerMove" => {
                let (x, y) = (action.x.unwrap_or(0.0), action.y.unwrap_or(0.0));
                at = match &action.origin {
                    None => (x, y),
                    Some(Value::String(o)) if o == "viewport" => (x, y),
                    Some(Value::String(o)) if o == "pointer" => (at.0 + x, at.1 + y),
                    Some(origin) => {
                        let id = origin.get(ELEMENT_KEY).and_then(Value::as_str).ok_or_else(|| {
                            WdError::invalid_argument(format!("origin {origin} is not viewport, pointer or an element"))
                        })?;
                        let centre = centres.get(id).ok_or_else(|| {
                            WdError::new(Code::NoSuchElement, format!("no element {id} in this session"))
                        })?;
                        (centre.0 + x, centre.1 + y)
                    }
                };
                if at.0 < 0.0 || at.1 < 0.0 || at.0 > window.0 || at.1 > window.1 {
                    return Err(WdError::new(
                        Code::MoveTargetOutOfBounds,
                        format!("({}, {}) is outside the {}x{} window", at.0, at.1, window.0, window.1),
                    ));
                }
                if let Some((_, _, _, moving)) = down.as_mut() {
                    *moving = moving.saturating_add(ms);
                }
            }
            "pointerDown" => down = Some((tick, at, 0, 0)),
            "pause" => {
                if let Some((_, _, held, _)) = down.as_mut() {
                    *held = held.saturating_add(ms);
                }
            }
            "pointerUp" => {
                let Some((down_tick, from, held, moving)) = down.take() else {
                    return Err(WdError::invalid_argument(format!(
                        "pointer {:?} went up without going down",
                        source.id
                    )));
                };
                if held.saturating_add(moving) > MAX_GESTURE_MS {
                    return Err(WdError::invalid_argument(format!(
                        "pointer {:?} is down for {} ms; a gesture takes at most {MAX_GESTURE_MS} ms",
                        source.id,
                        held.saturating_add(moving)
                    )));
                }
                let distance = ((at.0 - from.0).powi(2) + (at.1 - from.1).powi(2)).sqrt();
                let call = if distance < SLOP {
                    let (x, y) = (from.0.round(), from.1.round());
                    press(Target::Point { x, y }, Some(held.max(MIN_HOLD_MS)))
                } else {
                    Call::Swipe(SwipeParams {
                        from: Some(point(from)),
                        to: Some(point(at)),
                        duration_ms: Some((moving + held).max(MIN_HOLD_MS)),
                        ..Default::default()
                    })
                };
                gestures.push(Gesture { down_tick, up_tick: tick, call });
            }
            "pointerCancel" => down = None,
            other => return Err(WdError::invalid_argument(format!("a pointer cannot {other}"))),
        }
    }
    if down.is_some() {
        return Err(WdError::unsupported(format!(
            "pointer {:?} is left down: lynkeus gestures end with the finger up",
            source.id
        )));
    }
    Ok(gestures)
}

fn point((x, y): (f64, f64)) -> Point {
    Point { x: x.round(), y: y.round() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const WINDOW: (f64, f64) = (390.0, 844.0);

    fn plan_of(body: Value) -> WdResult<Vec<Call>> {
        let centres = HashMap::from([("el-1".to_owned(), (195.0, 242.0))]);
        plan(&body, &centres, WINDOW)
    }

    #[test]
    fn a_tap_is_a_press_held_for_its_pause() {
        let tap = json!({"actions":[{"type":"pointer","parameters":{"pointerType":"touch"},"id":"finger","actions":[
            {"type":"pointerMove","duration":250,"x":100,"y":200,"origin":"viewport"},
            {"type":"pointerDown","duration":0,"button":0},{"type":"pause","duration":100},
            {"type":"pointerUp","duration":0,"button":0}]}]});
        let calls = plan_of(tap).unwrap();
        assert_eq!(
            calls.iter().map(|c| (c.method(), c.params())).collect::<Vec<_>>(),
            [("press", json!({"x": 100, "y": 200, "holdMs": 100}))]
        );
    }

    #[test]
    fn a_drag_is_a_swipe_and_an_element_origin_is_its_centre() {
        let swipe = json!({"actions":[{"type":"pointer","parameters":{"pointerType":"touch"},"id":"touch","actions":[
            {"type":"pointerMove","duration":250,"x":200,"y":700,"origin":"viewport"},
            {"type":"pointerDown","duration":0,"button":0},
            {"type":"pointerMove","duration":400,"x":200,"y":200,"origin":"viewport"},
            {"type":"pointerUp","duration":0,"button":0}]}]});
        let calls = plan_of(swipe).unwrap();
        assert_eq!(
            calls[0].params(),
            json!({"from": {"x": 200, "y": 700}, "to": {"x": 200, "y": 200}, "durationMs": 400})
        );
        let click = json!({"actions":[{"type":"pointer","parameters":{"pointerType":"mouse"},"id":"mouse","actions":[
            {"type":"pointerMove","duration":250,"x":0,"y":0,"origin":{"element-6066-11e4-a52e-4f735466cecf":"el-1"}},
            {"type":"pointerDown","duration":0,"button":0},{"type":"pointerUp","duration":0,"button":0}]},
            {"type":"key","id":"key","actions":[{"type":"pause","duration":0},{"type":"pause","duration":0}]}]});
        assert_eq!(plan_of(click).unwrap()[0].params(), json!({"x": 195, "y": 242, "holdMs": 50}));
    }

    #[test]
    fn two_fingers_at_once_and_moves_off_screen_are_refused() {
        let finger = |id: &str, x: i64| {
            json!({"type":"pointer","parameters":{"pointerType":"touch"},"id":id,"actions":[
            {"type":"pointerMove","x":x,"y":300},{"type":"pointerDown"},{"type":"pause","duration":100},{"type":"pointerUp"}]})
        };
        let pinch = json!({"actions":[finger("a", 100), finger("b", 200)]});
        assert_eq!(plan_of(pinch).unwrap_err().code, Code::UnsupportedOperation);
        let away = json!({"actions":[{"type":"pointer","id":"m","actions":[{"type":"pointerMove","x":5000,"y":1}]}]});
        assert_eq!(plan_of(away).unwrap_err().code, Code::MoveTargetOutOfBounds);
        let pen = json!({"actions":[{"type":"pointer","id":"m","parameters":{"pointerType":"laser"},"actions":[]}]});
        assert_eq!(plan_of(pen).unwrap_err().code, Code::InvalidArgument);
        let forever = json!({"actions":[{"type":"pointer","id":"f","actions":[
            {"type":"pointerDown"},{"type":"pause","duration":1e30},{"type":"pointerUp"}]}]});
        assert!(plan_of(forever).unwrap_err().message.contains("at most 60000 ms"));
    }

    #[test]
    fn keys_are_typed_and_enter_submits() {
        let keys = json!({"actions":[{"type":"key","id":"k","actions":[
            {"type":"keyDown","value":"h"},{"type":"keyUp","value":"h"},{"type":"keyDown","value":"i"},
            {"type":"keyDown","value":"\u{E007}"}]}]});
        assert_eq!(plan_of(keys).unwrap()[0].params(), json!({"text": "hi", "submit": true}));
    }
}
