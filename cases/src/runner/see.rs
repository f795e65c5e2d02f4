//! `app.see` (and `app.event`): poll the screen until everything named
//! holds; `app.wait {request}`: poll the trace for a request.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::app::target_of;
use super::{Attempt, CALL_TIMEOUT, Device, Done, StepError, StepResult};
use crate::js::js_string;
use crate::targets::parse_target;

const POLL: Duration = Duration::from_millis(150);
const REQUEST_POLL: Duration = Duration::from_millis(300);

/// `"METHOD /path"` or `"/path"` against a trace `request` event: the
/// pathname must end with the path, the method is compared ignoring case.
pub fn request_matches(wanted: &str, event: &Value, status: Option<u64>, need_2xx: bool) -> bool {
    if event.get("kind").and_then(Value::as_str) != Some("request") {
        return false;
    }
    let (method, path) = match wanted.trim().split_once(' ') {
        Some((method, path)) => (Some(method), path.trim()),
        None => (None, wanted.trim()),
    };
    let url = event.get("url").and_then(Value::as_str).unwrap_or("");
    let event_method = event.get("method").and_then(Value::as_str).unwrap_or("");
    let got = event.get("status").and_then(Value::as_u64);
    method.is_none_or(|m| m.eq_ignore_ascii_case(event_method))
        && pathname(url).ends_with(path)
        && status.is_none_or(|s| got == Some(s))
        && (!need_2xx || status.is_some() || got.is_some_and(|s| (200..300).contains(&s)))
}

/// The pathname of a URL, or of a path with its query cut off.
fn pathname(url: &str) -> &str {
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// A step's parameters as lynkeus' `see` holds them, in their order; `None`
/// is a key set to `undefined`.
type SeeParams = Vec<(String, Option<Value>)>;

/// `app.see`'s value as lynkeus reads it: a string is its `target`.
fn lynkeus_params(value: &Value) -> SeeParams {
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect(),
        Value::String(_) => vec![("target".into(), Some(value.clone()))],
        _ => Vec::new(),
    }
}

/// `app.event`'s parameters as lynkeus hands them to its `see`:
/// `{...value, event: name, name: undefined}`.
fn event_params(value: &Value) -> SeeParams {
    let mut params: SeeParams = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect(),
        _ => Vec::new(),
    };
    let name = match value {
        Value::Object(map) => map.get("name").cloned(),
        other => Some(other.clone()),
    };
    for (key, set) in [("event", name), ("name", None)] {
        match params.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = set,
            None => params.push((key.into(), set)),
        }
    }
    params
}

/// `still there: …` in lynkeus' words: its label of the parameters with
/// `absent` set to `undefined` in its place.
fn still_there(named: &SeeParams) -> String {
    let mut pairs: Vec<(&str, Option<&Value>)> = named.iter().map(|(k, v)| (k.as_str(), v.as_ref())).collect();
    if !pairs.iter().any(|(k, _)| *k == "absent") {
        pairs.push(("absent", None));
    }
    crate::format::still_there(&pairs)
}

impl<D: Device> Attempt<'_, D> {
    pub(super) async fn see(&mut self, value: &Value) -> StepResult {
        let named = lynkeus_params(value);
        self.see_as(value, &named).await
    }

    /// `app.event`: an event name, or `{name, props?, absent?, timeoutMs?}`.
    pub(super) async fn see_event(&mut self, value: &Value) -> StepResult {
        let check = match value {
            Value::String(name) => json!({"event": name}),
            Value::Object(map) => {
                let mut check = serde_json::Map::new();
                check.insert("event".into(), map.get("name").cloned().unwrap_or(Value::Null));
                for key in ["props", "absent", "timeoutMs"] {
                    if let Some(v) = map.get(key) {
                        check.insert(key.into(), v.clone());
                    }
                }
                Value::Object(check)
            }
            _ => return Err(StepError::Failed("app.event needs an event name".into())),
        };
        self.see_as(&check, &event_params(value)).await
    }

    /// `see`, whose `absent` failure names `named`: the parameters as
    /// lynkeus' own `see` was handed them (`app.event` hands it others).
    async fn see_as(&mut self, value: &Value, named: &SeeParams) -> StepResult {
        let timeout = value.get("timeoutMs").and_then(Value::as_u64).unwrap_or(3_000);
        self.waits(timeout);
        let deadline = Duration::from_millis(timeout);
        let hard = deadline.max(Duration::from_secs(12));
        let absent = value.get("absent").and_then(Value::as_bool).unwrap_or(false);
        let started = Instant::now();
        loop {
            self.interrupt(value).await?;
            let (holds, message) = self.check(value).await?;
            if holds != absent {
                return Ok(Done::Passed);
            }
            let elapsed = started.elapsed();
            if elapsed >= deadline {
                // Past the deadline, a busy app still gets time, up to a limit.
                let busy = self.call("screen", None, CALL_TIMEOUT).await?.get("busy") == Some(&Value::Bool(true));
                if !busy || elapsed >= hard {
                    let message = if absent { still_there(named) } else { message };
                    return Err(StepError::Failed(message));
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether everything the step names holds now; if not, why.
    async fn check(&mut self, value: &Value) -> Result<(bool, String), StepError> {
        let screen = self.call("screen", None, CALL_TIMEOUT).await?;
        if self.run.observe {
            self.checked_screen = Some(screen.clone());
        }
        let elements = screen.get("elements").and_then(Value::as_array).cloned().unwrap_or_default();
        let presented = |e: &Value| matches!(e.get("hidden").and_then(Value::as_str), None | Some("inert"));
        // lynkeus' `textOf`: the element's text, else its value, else its
        // accessibility label.
        let text_of = |e: &Value| -> String {
            ["text", "value", "accessibilityLabel"]
                .iter()
                .find_map(|k| e.get(*k).filter(|v| !v.is_null()).map(js_string))
                .unwrap_or_default()
        };
        let shows = |e: &Value, text: &str| text_of(e).contains(text);
        let named_target = match value {
            Value::String(raw) => Some(parse_target(raw)),
            Value::Object(_) if value.get("target").is_some() || value.get("testId").is_some() => {
                Some(target_of("see", value)?)
            }
            _ => None,
        };
        if let Some(route) = value.get("route").and_then(Value::as_str) {
            let on = screen.get("route").and_then(Value::as_str).unwrap_or("no route");
            if on != route {
                return Ok((false, format!("on {on}, not {route}")));
            }
        }
        if let Some(layer) = value.get("layer") {
            let open = screen.get("presenting").filter(|p| !p.is_null());
            let open_id = open.and_then(|p| p.get("testId")).and_then(Value::as_str).unwrap_or("");
            match layer {
                Value::Bool(true) if open.is_none() => return Ok((false, "no layer is open".into())),
                Value::Bool(false) if open.is_some() => return Ok((false, "a layer is open".into())),
                Value::String(id) if open.is_none() || !open_id.contains(id.as_str()) => {
                    return Ok((false, format!("no layer {id} is open")));
                }
                _ => {}
            }
        }
        let text = value.get("text").and_then(Value::as_str);
        if let Some(target) = named_target {
            self.last_target = Some(target.clone());
            let found =
                self.call("find", Some(serde_json::to_value(&target).unwrap_or_default()), CALL_TIMEOUT).await?;
            if found.is_null() || !presented(&found) {
                return Ok((false, format!("not on screen: {}", target.describe())));
            }
            if let Some(text) = text {
                let i = found.get("i").cloned();
                let says = shows(&found, text)
                    || elements.iter().any(|e| presented(e) && e.get("parent") == i.as_ref() && shows(e, text));
                if !says {
                    // The element is there; its words are not.
                    return Ok((
                        false,
                        format!("{} says {}, not {}", target.describe(), json!(text_of(&found)), json!(text)),
                    ));
                }
            }
        } else if let Some(text) = text
            && !elements.iter().any(|e| presented(e) && shows(e, text))
        {
            return Ok((false, format!("not on screen: {}", json!(text))));
        }
        if let Some(request) = value.get("request").and_then(Value::as_str) {
            let status = value.get("status").and_then(Value::as_u64);
            let since = self.mark.unwrap_or(0);
            let trace = self.call("trace", Some(json!({"since": since})), CALL_TIMEOUT).await?;
            let events = trace.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
            if !events.iter().any(|e| request_matches(request, e, status, false)) {
                return Ok((false, format!("not requested since the mark: {request}")));
            }
        }
        if let Some(name) = value.get("event").and_then(Value::as_str) {
            let props = value.get("props").and_then(Value::as_object);
            let buffer = self.call("events", None, CALL_TIMEOUT).await?;
            let buffer = buffer.as_array().cloned().unwrap_or_default();
            let matching = buffer.iter().any(|e| {
                e.get("name").and_then(Value::as_str) == Some(name)
                    && props.is_none_or(|props| {
                        props.iter().all(|(k, want)| {
                            e.get("props").and_then(|p| p.get(k)).is_some_and(|got| js_string(got) == js_string(want))
                        })
                    })
            });
            if !matching {
                let with = props.map(|p| format!(" with {}", Value::Object(p.clone()))).unwrap_or_default();
                return Ok((false, format!("no {name} event{with}")));
            }
        }
        Ok((true, String::new()))
    }

    pub(super) async fn wait_request(&mut self, request: &str, value: &Value) -> StepResult {
        let timeout = value.get("timeoutMs").and_then(Value::as_u64).unwrap_or(10_000);
        self.waits(timeout);
        let status = value.get("status").and_then(Value::as_u64);
        let deadline = Instant::now() + Duration::from_millis(timeout);
        loop {
            let since = self.mark.unwrap_or(0);
            let trace = self.call("trace", Some(json!({"since": since})), CALL_TIMEOUT).await?;
            let events = trace.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
            if events.iter().any(|e| request_matches(request, e, status, true)) {
                return Ok(Done::Passed);
            }
            if Instant::now() >= deadline {
                let wanted = status.map_or("2xx".to_owned(), |s| s.to_string());
                return Err(StepError::Failed(format!("no {wanted} {request} within {timeout} ms")));
            }
            tokio::time::sleep(REQUEST_POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_matching() {
        let event =
            json!({"kind": "request", "method": "GET", "url": "https://api.test/v1/api/points?page=2", "status": 200});
        assert!(request_matches("GET /api/points", &event, None, true));
        assert!(request_matches("get /api/points", &event, None, true));
        assert!(request_matches("/points", &event, None, false));
        assert!(!request_matches("POST /api/points", &event, None, false));
        assert!(!request_matches("GET /api/points", &event, Some(201), false));
        let failed = json!({"kind": "request", "method": "GET", "url": "/api/points", "status": 500});
        assert!(request_matches("GET /api/points", &failed, None, false));
        assert!(!request_matches("GET /api/points", &failed, None, true), "wait needs a 2xx");
        assert!(!request_matches("GET /api/points", &json!({"kind": "route"}), None, false));
    }
}
