//! `app.*` steps as the protocol calls lynkeus makes for them (spec §1.8),
//! with the same default timeouts.

use std::time::{Duration, Instant};

use argus_proto::wire::{Direction, Point, Target};
use serde_json::{Map, Value, json};

use super::{Attempt, CALL_TIMEOUT, CallFailure, Device, Done, StepError, StepResult};
use crate::format::Step;
use crate::js::js_string;
use crate::targets::{is_route, parse_target, scoped_target};

/// `app.idle` without arguments, as the lynkeus CLI sends it (`lynkeus idle`
/// waits for 300 ms of quiet, 5 s at most; the protocol's own defaults,
/// 150/3000, apply only to a bare `idle` call).
pub const IDLE_DEFAULT: (u64, u64) = (300, 5_000);

/// `waitFor` and `idle` get their own timeout plus this on the wire.
const TRANSPORT_SLACK: Duration = Duration::from_millis(2_000);

fn ms(value: &Value, key: &str) -> Option<u64> {
    match value.get(key)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn flag(value: &Value, key: &str) -> bool {
    value.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The target a step names: a string, or `{target | testId, within?, nth?}`.
pub(super) fn target_of(verb: &str, value: &Value) -> Result<Target, StepError> {
    let needs = || StepError::Failed(format!("app.{verb} needs a target"));
    let (raw, within, nth) = match value {
        Value::String(raw) => (raw.clone(), None, None),
        Value::Object(_) => {
            let raw = match (text_of(value, "target"), text_of(value, "testId")) {
                (Some(target), _) => target,
                (None, Some(id)) => format!("#{id}"),
                (None, None) => return Err(needs()),
            };
            let nth = value.get("nth").and_then(Value::as_u64).map(|n| n as usize);
            (raw, text_of(value, "within").or_else(|| text_of(value, "in")), nth)
        }
        _ => return Err(needs()),
    };
    scoped_target(&raw, within.as_deref(), nth).map_err(|e| StepError::Failed(e.to_string()))
}

fn point(raw: &str) -> Option<Point> {
    let (x, y) = raw.split_once(',')?;
    Some(Point { x: x.trim().parse().ok()?, y: y.trim().parse().ok()? })
}

fn target_json(target: &Target) -> Value {
    serde_json::to_value(target).unwrap_or(Value::Null)
}

impl<D: Device> Attempt<'_, D> {
    pub(super) async fn app(&mut self, command: &str, value: &Value) -> StepResult {
        match command {
            "press" => self.press(value).await,
            "type" => self.type_text(value).await,
            "swipe" => self.swipe(value).await,
            "see" => self.see(value).await,
            "wait" => self.wait(value).await,
            "nav" => self.nav(value).await,
            "requests" => {
                self.mark = Some(self.trace_last().await?);
                Ok(Done::Passed)
            }
            "call" => self.app_call(value).await,
            "events" => {
                let collected = self.take_events().await.unwrap_or_default();
                self.carried_events.extend(collected);
                self.call("events", Some(json!({"clear": true})), CALL_TIMEOUT).await?;
                if self.events_seen.is_some() {
                    self.events_seen = Some(0);
                }
                Ok(Done::Passed)
            }
            "event" => self.see_event(value).await,
            "run" => Err(StepError::Failed(
                "app.run plays a lynkeus flow, which argus does not run; write the flow as a macro (cases.macros)"
                    .into(),
            )),
            "reset" => {
                self.call("reset", None, CALL_TIMEOUT).await?;
                Ok(Done::Passed)
            }
            // Every other command of lynkeus' table, as the call its CLI
            // command makes (`runner/commands.rs`).
            other => self.lynkeus_command(other, value).await,
        }
    }

    pub(super) async fn idle(&self, quiet_ms: u64, timeout_ms: u64) -> Result<Value, CallFailure> {
        let params = json!({"quietMs": quiet_ms, "timeoutMs": timeout_ms});
        self.call("idle", Some(params), Duration::from_millis(timeout_ms) + TRANSPORT_SLACK).await
    }

    async fn find(&self, target: &Target) -> Result<Value, StepError> {
        Ok(self.call("find", Some(target_json(target)), CALL_TIMEOUT).await?)
    }

    async fn wait_for(&self, mut params: Map<String, Value>, timeout_ms: u64) -> Result<Value, CallFailure> {
        params.insert("timeoutMs".into(), json!(timeout_ms));
        self.call("waitFor", Some(Value::Object(params)), Duration::from_millis(timeout_ms) + TRANSPORT_SLACK).await
    }

    /// A device on the wall clock: touches are real and time is not mocked.
    fn wall_clock(&self) -> bool {
        self.device.hello().is_some_and(|h| h.native && !h.has_command("clock"))
    }

    /// Interruptions: a known pop-up on screen is dealt with before the step.
    pub(super) async fn interrupt(&mut self, value: &Value) -> Result<(), StepError> {
        if self.interrupting {
            return Ok(());
        }
        self.interrupting = true;
        // An interruption's own steps must not become what the step was
        // about: evidence names the step's target, not the pop-up's.
        let (target, route) = (self.last_target.clone(), self.last_route.clone());
        let outcome = self.run_interruptions(value).await;
        (self.last_target, self.last_route) = (target, route);
        self.interrupting = false;
        outcome
    }

    async fn run_interruptions(&mut self, value: &Value) -> Result<(), StepError> {
        let interruptions = self.run.config.interruptions.clone();
        for interruption in interruptions {
            if let Some(unless) = &interruption.unless {
                let pattern = regex::RegexBuilder::new(unless).case_insensitive(true).build();
                if pattern.is_ok_and(|p| p.is_match(&value.to_string())) {
                    continue;
                }
            }
            let target = parse_target(&interruption.see);
            let present = |found: &Value| !found.is_null() && found.get("hidden").is_none();
            if !present(&self.find(&target).await?) {
                continue;
            }
            let steps = match &interruption.steps {
                Value::Array(items) => items.clone(),
                one => vec![one.clone()],
            };
            for step in steps {
                let Some((verb, value)) =
                    step.as_object().and_then(|m| m.iter().next()).map(|(k, v)| (k.clone(), v.clone()))
                else {
                    continue;
                };
                let step = Step { verb, value, on: None, line: 0 };
                if let Err(error) = Box::pin(self.step(&step)).await
                    && present(&self.find(&target).await?)
                {
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    async fn press(&mut self, value: &Value) -> StepResult {
        let target = target_of("press", value)?;
        self.last_target = Some(target.clone());
        self.interrupt(value).await?;
        if flag(value, "optional") {
            let _ = self.idle(150, 1_000).await;
            let mut params = Map::new();
            params.insert("target".into(), target_json(&target));
            if self.wait_for(params, 300).await.is_err() {
                let _ = self.idle(50, 400).await;
                return Ok(Done::Skipped);
            }
        }
        if self.find(&target).await?.is_null() {
            let mut params = Map::new();
            params.insert("target".into(), target_json(&target));
            let _ = self.wait_for(params, 500).await;
        }
        // lynkeus then polls an element named by testId until it can be
        // pressed, or the step's time is up: one that is not there yet
        // (arriving late) is waited for too, not pressed at once.
        if matches!(target, Target::TestId { .. }) {
            self.until_pressable(&target, value).await?;
        }
        let mut params = match target_json(&target) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        if let Some(hold) = ms(value, "holdMs").or_else(|| ms(value, "hold")) {
            params.insert("holdMs".into(), json!(hold));
        }
        if flag(value, "js") {
            params.insert("mode".into(), json!("js"));
        }
        self.call("press", Some(Value::Object(params)), CALL_TIMEOUT).await?;
        if flag(value, "settle") {
            // `press --settle`: until the app stops committing, as its CLI
            // does before it prints the screen.
            let _ = self.idle(200, 3_000).await;
        }
        let _ = self.idle(50, 400).await;
        Ok(Done::Passed)
    }

    /// Until the element is there, enabled, uncovered and still (the same
    /// frame twice running), or the step's time is up while the app is not
    /// busy (15 s at the most).
    async fn until_pressable(&self, target: &Target, value: &Value) -> Result<(), StepError> {
        let started = Instant::now();
        let deadline = Duration::from_millis(ms(value, "timeoutMs").unwrap_or(3_000));
        self.waits(deadline.as_millis() as u64);
        let hard = Duration::from_secs(15);
        let mut previous: Option<Value> = None;
        loop {
            let current = self.find(target).await?;
            let still = previous.as_ref().is_some_and(|p| p.get("frame") == current.get("frame"));
            let ready = current.get("enabled") == Some(&Value::Bool(true))
                && current.get("covered") != Some(&Value::Bool(true))
                && still;
            if ready || started.elapsed() >= hard {
                return Ok(());
            }
            if started.elapsed() >= deadline {
                let screen = self.call("screen", None, CALL_TIMEOUT).await?;
                if screen.get("busy") != Some(&Value::Bool(true)) {
                    return Ok(());
                }
            }
            let _ = self.idle(50, 200).await;
            previous = Some(current);
        }
    }

    async fn type_text(&mut self, value: &Value) -> StepResult {
        self.interrupt(value).await?;
        let (text, target) = match value {
            Value::String(text) => (text.clone(), None),
            Value::Object(_) => {
                let text = match value.get("text") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other @ (Value::Number(_) | Value::Bool(_))) => js_string(other),
                    _ => return Err(StepError::Failed("app.type needs a text".into())),
                };
                let target = if value.get("target").is_some() || value.get("testId").is_some() {
                    Some(target_of("type", value)?)
                } else {
                    None
                };
                (text, target)
            }
            _ => return Err(StepError::Failed("app.type needs a text".into())),
        };
        self.last_target = target.clone();
        let mut params = json!({
            "text": text,
            "paste": flag(value, "paste"),
            "clear": flag(value, "clear"),
            "submit": flag(value, "submit"),
        });
        if let Some(target) = &target {
            params["target"] = target_json(target);
        }
        self.call("type", Some(params), CALL_TIMEOUT).await?;
        Ok(Done::Passed)
    }

    async fn swipe(&mut self, value: &Value) -> StepResult {
        self.interrupt(value).await?;
        let direction = |s: &str| -> Result<Direction, StepError> {
            serde_json::from_value(json!(s))
                .map_err(|_| StepError::Failed(format!("app.swipe: {s:?} is not a direction (up, down, left, right)")))
        };
        let params = match value {
            Value::String(d) => json!({"direction": direction(d)?}),
            Value::Object(map) if map.contains_key("from") || map.contains_key("to") => {
                let end = |key: &str| {
                    text_of(value, key)
                        .as_deref()
                        .and_then(point)
                        .ok_or_else(|| StepError::Failed(format!("app.swipe: {key} must be \"x,y\"")))
                };
                let mut params = json!({"from": end("from")?, "to": end("to")?});
                if let Some(d) = ms(value, "durationMs").or_else(|| ms(value, "duration")) {
                    params["durationMs"] = json!(d);
                }
                params
            }
            Value::Object(_) => {
                let mut params = Map::new();
                if let Some(d) = text_of(value, "direction") {
                    params.insert("direction".into(), json!(direction(&d)?));
                }
                if value.get("target").is_some() || value.get("testId").is_some() {
                    params.insert("target".into(), target_json(&target_of("swipe", value)?));
                }
                if let Some(distance) = value.get("distance") {
                    params.insert("distance".into(), distance.clone());
                }
                if let Some(d) = ms(value, "durationMs").or_else(|| ms(value, "duration")) {
                    params.insert("durationMs".into(), json!(d));
                }
                Value::Object(params)
            }
            _ => return Err(StepError::Failed("app.swipe needs a direction, a target, or from/to points".into())),
        };
        self.call("swipe", Some(params), CALL_TIMEOUT).await?;
        if self.wall_clock() {
            let _ = self.idle(700, 8_000).await;
        }
        Ok(Done::Passed)
    }

    async fn wait(&mut self, value: &Value) -> StepResult {
        let sleep = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
            _ => None,
        };
        if let Some(ms) = sleep {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(Done::Passed);
        }
        if let Some(request) = text_of(value, "request") {
            return self.wait_request(&request, value).await;
        }
        let what = match value {
            Value::String(s) => Some(s.clone()),
            _ => text_of(value, "route").or_else(|| text_of(value, "what")),
        };
        let mut params = Map::new();
        let mut route_wait = false;
        match what {
            Some(what) if is_route(&what) && value.get("target").is_none() => {
                self.last_route = Some(what.clone());
                params.insert("route".into(), json!(what));
                route_wait = true;
            }
            Some(what) => {
                let target = scoped_target(
                    &what,
                    text_of(value, "within").or_else(|| text_of(value, "in")).as_deref(),
                    value.get("nth").and_then(Value::as_u64).map(|n| n as usize),
                )
                .map_err(|e| StepError::Failed(e.to_string()))?;
                self.last_target = Some(target.clone());
                params.insert("target".into(), target_json(&target));
            }
            None => {
                let target = target_of("wait", value)?;
                self.last_target = Some(target.clone());
                params.insert("target".into(), target_json(&target));
            }
        }
        for key in ["gone", "scroll"] {
            if flag(value, key) {
                params.insert(key.into(), json!(true));
            }
        }
        let timeout = ms(value, "timeoutMs").or_else(|| ms(value, "timeout")).unwrap_or(10_000);
        self.waits(timeout);
        if self.run.config.interruptions.is_empty() {
            self.wait_for(params, timeout).await?;
        } else {
            // In slices, so that an interruption can be dealt with meanwhile.
            let deadline = Instant::now() + Duration::from_millis(timeout);
            loop {
                self.interrupt(value).await?;
                let left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
                match self.wait_for(params.clone(), left.clamp(100, 1_000)).await {
                    Ok(_) => break,
                    Err(failure) if Instant::now() >= deadline || failure.unknown_method().is_some() => {
                        return Err(failure.into());
                    }
                    Err(_) => {}
                }
            }
        }
        if route_wait && self.wall_clock() {
            let _ = self.idle(700, 8_000).await;
        }
        Ok(Done::Passed)
    }

    async fn nav(&mut self, value: &Value) -> StepResult {
        let (route, params) = match value {
            Value::String(route) => (route.clone(), None),
            Value::Object(_) => (
                text_of(value, "route").ok_or_else(|| StepError::Failed("app.nav needs a route".into()))?,
                value.get("params").cloned(),
            ),
            _ => return Err(StepError::Failed("app.nav needs a route".into())),
        };
        let mut call = json!({"name": route});
        if let Some(params) = params {
            call["params"] = params;
        }
        self.call("navigate", Some(call), CALL_TIMEOUT).await?;
        let mut wait = Map::new();
        wait.insert("route".into(), json!(route));
        self.wait_for(wait, 8_000).await?;
        self.idle(300, 8_000).await?;
        Ok(Done::Passed)
    }

    /// An app command, called again every 250 ms until `expect` holds.
    async fn app_call(&mut self, value: &Value) -> StepResult {
        let command = match value {
            Value::String(command) => command.clone(),
            _ => text_of(value, "command").ok_or_else(|| StepError::Failed("app.call needs a command".into()))?,
        };
        let params = value.get("params").cloned();
        let expect = value.get("expect").and_then(Value::as_object).cloned().unwrap_or_default();
        let timeout = ms(value, "timeoutMs").unwrap_or(3_000);
        self.waits(timeout);
        let deadline = Instant::now() + Duration::from_millis(timeout);
        loop {
            let answer = self.call(&command, params.clone(), CALL_TIMEOUT).await?;
            let mismatch = expect.iter().find_map(|(path, want)| {
                let got = crate::values::dig(&answer, path);
                let holds = match (want, &got) {
                    (Value::Null, got) => got.is_none(),
                    (want, Some(got)) => js_string(got) == js_string(want),
                    (_, None) => false,
                };
                (!holds).then(|| {
                    let got = got.as_ref().map_or("undefined".to_owned(), js_string);
                    format!("{command}: {path} is {got}, expected {}", js_string(want))
                })
            });
            match mismatch {
                None => {
                    if let Some(alias) = text_of(value, "as") {
                        self.scope.insert(alias, answer);
                    }
                    return Ok(Done::Passed);
                }
                Some(message) if Instant::now() >= deadline => return Err(StepError::Failed(message)),
                Some(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_from_step_values() {
        let t = target_of("press", &json!("#send")).unwrap();
        assert_eq!(t, Target::test_id("send"));
        let t = target_of("press", &json!({"testId": "like", "within": "hi from Ana", "nth": 1})).unwrap();
        assert_eq!(target_json(&t), json!({"testId": "like", "nth": 1, "within": {"text": "hi from Ana"}}));
        assert_eq!(target_of("press", &json!(12)).unwrap_err(), StepError::Failed("app.press needs a target".into()));
    }
}
