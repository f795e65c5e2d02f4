//! The simulated app: a navigation stack over the model's routes, the
//! agent's rings (requests, trace, analytics events), and every core method
//! with the agent's defaults, refusals and error texts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argus_proto::wire::{
    AppEvent, BatchParams, DeepLinkParams, DeepLinkResult, Direction, Element, ElementKind, ErrorBody, IdleParams,
    IdleResult, NavigateParams, PingResult, Point, PressMode, PressParams, PressResult, READ_METHODS, RequestRecord,
    RequestsResult, RouteResult, Screen, SinceParams, SwipeParams, SwipeResult, Target, TraceEvent, TraceKind,
    TraceResult, TypeParams, TypeResult, WaitForParams, WaitForResult,
};
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};

use crate::matching::{pick, pick_hidden};
use crate::model::{Action, Model, RequestSpec, Route};
use crate::screen::{ScreenState, Snapshot, mounted_alone, snapshot};

mod actions;
mod gestures;
mod navigation;
mod rings;
mod waits;

const REQUEST_RING: usize = 200;
const TRACE_RING: usize = 500;
const EVENT_RING: usize = 500;
const SECRET_WORDS: [&str; 9] = ["token", "key", "secret", "code", "otp", "password", "pin", "session", "auth"];

type Outcome = Result<Value, ErrorBody>;

fn fail(message: impl Into<String>) -> ErrorBody {
    ErrorBody::new(message)
}

struct State {
    stack: Vec<ScreenState>,
    /// Bumps on every change of the screen on top, so timers of a screen
    /// that has gone do nothing.
    generation: u64,
    commits: u64,
    requests: VecDeque<RequestRecord>,
    next_request: u64,
    in_flight: u64,
    trace: VecDeque<TraceEvent>,
    next_seq: u64,
    events: VecDeque<AppEvent>,
    stores: BTreeMap<String, Value>,
    /// `profile {action: start}` was called and not stopped, and the
    /// commit count then.
    profiling: Option<u64>,
    /// Resets since launch, for `memory`.
    resets: u32,
}

pub struct App {
    model: Arc<Model>,
    state: Mutex<State>,
    route: watch::Sender<Option<String>>,
}

impl App {
    pub fn new(model: Model) -> Arc<Self> {
        let model = Arc::new(model);
        let now = Instant::now();
        let initial = model.route(&model.file.initial_route).expect("checked when the model loaded");
        let state = State {
            stack: vec![ScreenState::new(initial, None, now)],
            generation: 0,
            commits: 1,
            requests: VecDeque::new(),
            next_request: 1,
            in_flight: 0,
            trace: VecDeque::new(),
            next_seq: 1,
            events: VecDeque::new(),
            stores: model.file.stores.clone(),
            profiling: None,
            resets: 0,
        };
        let route = model.file.navigation.then(|| initial.name.clone());
        let app = Arc::new(Self { model, state: Mutex::new(state), route: watch::channel(route).0 });
        app.screen_entered(0);
        app
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The focused route, as `hello` and `navigation` report it.
    pub fn routes(&self) -> watch::Receiver<Option<String>> {
        self.route.subscribe()
    }

    pub fn current_route(&self) -> Option<String> {
        self.route.borrow().clone()
    }

    /// Every method the agent answers, including app commands and `reset`.
    /// Non-read methods (and reads that fail) are traced as `command` events.
    pub async fn handle(self: &Arc<Self>, method: &str, params: Option<Value>) -> Outcome {
        let started = Instant::now();
        let outcome = self.dispatch(method.to_owned(), params).await;
        if !READ_METHODS.contains(&method) || outcome.is_err() {
            let ms = started.elapsed().as_millis() as u64;
            let error = outcome.as_ref().err().map(|e| e.message.clone());
            self.lock().push_trace(TraceKind::Command { method: method.to_owned(), ms, error });
        }
        outcome
    }

    /// Methods that never wait answer at once, so the agent may run them
    /// inline rather than on a task of their own.
    pub fn answers_at_once(method: &str) -> bool {
        matches!(
            method,
            "ping"
                | "screen"
                | "find"
                | "navigate"
                | "back"
                | "deepLink"
                | "requests"
                | "trace"
                | "dismissKeyboard"
                | "debug"
        )
    }

    fn dispatch(self: &Arc<Self>, method: String, params: Option<Value>) -> BoxFuture<'_, Outcome> {
        Box::pin(async move {
            match method.as_str() {
                "ping" => {
                    to_value(PingResult { pong: true, native: self.model.file.native, commands: self.model.commands() })
                }
                "screen" => to_value(self.screen()),
                "find" => {
                    let target: Target = parse("find", params)?;
                    Ok(self.find(&target).map_or(Value::Null, |e| to_value(e).unwrap_or(Value::Null)))
                }
                "press" => to_value(self.press(parse("press", params)?).await?),
                "type" => to_value(self.type_text(parse("type", params)?).await?),
                "swipe" => to_value(self.swipe(parse_or_default("swipe", params)?).await?),
                "navigate" => to_value(self.navigate(parse("navigate", params)?)?),
                "back" => to_value(self.back()?),
                "waitFor" => to_value(self.wait_for(parse_or_default("waitFor", params)?).await?),
                "idle" => to_value(self.idle(parse_or_default("idle", params)?).await),
                "deepLink" => to_value(self.deep_link(parse("deepLink", params)?)),
                "requests" => to_value(self.requests(parse_or_default("requests", params)?)),
                "trace" => to_value(self.trace(parse_or_default("trace", params)?)),
                "dismissKeyboard" => {
                    self.dismiss_keyboard();
                    Ok(Value::Bool(true))
                }
                "batch" => {
                    let batch: BatchParams = parse("batch", params)?;
                    let mut results = Vec::with_capacity(batch.calls.len());
                    for call in batch.calls {
                        results.push(self.dispatch(call.method, call.params).await?);
                    }
                    Ok(json!({ "results": results }))
                }
                "debug" => Ok(self.debug()),
                "reset" => self.reset(params).await,
                _ => self.command(&method, params).await,
            }
        })
    }

    // ------------------------------------------------------------ reads

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn top_route(&self, state: &State) -> &Route {
        let top = state.stack.last().expect("the stack is never empty");
        self.model.route(&top.route).expect("routes on the stack exist")
    }

    /// The screen on top now, with the route it was taken from (node
    /// indexes in the snapshot refer to that route).
    fn snap(&self) -> (Snapshot, &Route) {
        let state = self.lock();
        let top = state.stack.last().expect("the stack is never empty");
        let route = self.top_route(&state);
        (snapshot(route, top, Instant::now(), self.model.file.window), route)
    }

    fn elements(&self) -> Vec<Element> {
        self.snap().0.elements
    }

    fn busy(&self) -> bool {
        if self.lock().in_flight > 0 {
            return true;
        }
        self.model.file.commands.get("busy").and_then(|c| c.result.as_ref()).and_then(Value::as_bool) == Some(true)
    }

    pub fn screen(&self) -> Screen {
        let started = std::time::Instant::now();
        let (snap, _) = self.snap();
        let busy = self.busy();
        let state = self.lock();
        let top = state.stack.last().expect("the stack is never empty");
        let navigation = self.model.file.navigation;
        Screen {
            route: navigation.then(|| top.route.clone()),
            params: if navigation { top.params.clone() } else { None },
            path: if navigation { self.top_route(&state).path.clone() } else { Vec::new() },
            elements: snap.elements,
            commit: state.commits,
            busy,
            window: self.model.file.window,
            presenting: snap.presenting,
            cost_ms: started.elapsed().as_millis() as u64,
        }
    }

    pub fn find(&self, target: &Target) -> Option<Element> {
        pick(&self.elements(), target).cloned()
    }

    /// The element a target names, refusing what matches nothing or is hidden.
    fn presented(&self, target: &Target) -> Result<Element, ErrorBody> {
        let elements = self.elements();
        let element = match pick(&elements, target) {
            Some(element) => element.clone(),
            None => {
                return Err(match pick_hidden(&elements, target).and_then(|e| e.hidden) {
                    Some(hidden) => fail(format!("{} is not presented ({})", target.describe(), hidden.as_str())),
                    None => fail(format!("No element matches {}", target.describe())),
                });
            }
        };
        if let Some(hidden) = element.hidden {
            return Err(fail(format!("{} is not presented ({})", target.describe(), hidden.as_str())));
        }
        Ok(element)
    }

    fn point_of(&self, target: &Target) -> Result<(Point, Option<Element>), ErrorBody> {
        if let Target::Point { x, y } = target {
            return Ok((Point { x: *x, y: *y }, None));
        }
        let element = self.presented(target)?;
        Ok((element.frame.centre(), Some(element)))
    }

    fn in_window(&self, element: &Element) -> bool {
        let window = self.model.file.window;
        let c = element.frame.centre();
        !element.is_offscreen() && c.x >= 0.0 && c.y >= 0.0 && c.x <= window.w && c.y <= window.h
    }

    // ------------------------------------------------------------ press
}

impl State {
    fn push_trace(&mut self, kind: TraceKind) {
        if self.trace.len() == TRACE_RING {
            self.trace.pop_front();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.trace.push_back(TraceEvent { seq, t: epoch_ms(), kind });
    }
}

fn same_frame(a: &Element, b: &Element) -> bool {
    let (a, b) = (a.frame, b.frame);
    (a.x - b.x).abs() < 1.0 && (a.y - b.y).abs() < 1.0 && (a.w - b.w).abs() < 1.0 && (a.h - b.h).abs() < 1.0
}

fn shape_of(elements: &[Element]) -> String {
    elements
        .iter()
        .map(|e| format!("{}@{}", e.test_id.as_deref().or(e.text.as_deref()).unwrap_or(""), e.frame.y.round()))
        .collect::<Vec<_>>()
        .join("|")
}

fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Query values whose parameter name contains a secret word become `…`.
pub fn redact(url: &str) -> String {
    let (base, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let Some((path, query)) = base.split_once('?') else { return url.to_owned() };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if SECRET_WORDS.iter().any(|w| name.to_lowercase().contains(w)) => format!("{name}=…"),
            _ => pair.to_owned(),
        })
        .collect();
    let mut out = format!("{path}?{}", query.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// A store value as the trace keeps it: short.
fn short(key: &str, value: &Value) -> Value {
    let secret =
        ["token", "password", "session", "secret", "pin", "otp"].iter().any(|w| key.to_lowercase().contains(w));
    match value {
        _ if secret && !value.is_null() => Value::String("…".into()),
        Value::Object(map) => Value::String(format!("{{{}}}", map.len())),
        Value::Array(items) => Value::String(format!("[{}]", items.len())),
        Value::String(s) if s.chars().count() > 80 => Value::String(s.chars().take(80).collect::<String>() + "…"),
        other => other.clone(),
    }
}

fn to_value(value: impl Serialize) -> Outcome {
    serde_json::to_value(value).map_err(|e| fail(format!("cannot encode the answer: {e}")))
}

#[derive(serde::Deserialize)]
struct ScreenshotParams {
    path: String,
}

fn parse<T: DeserializeOwned>(method: &str, params: Option<Value>) -> Result<T, ErrorBody> {
    serde_json::from_value(params.unwrap_or(Value::Null)).map_err(|e| fail(format!("{method}: invalid params: {e}")))
}

fn parse_or_default<T: DeserializeOwned + Default>(method: &str, params: Option<Value>) -> Result<T, ErrorBody> {
    match params {
        None | Some(Value::Null) => Ok(T::default()),
        some => parse(method, some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_query_strings_are_redacted() {
        assert_eq!(
            redact("https://api.test/login?user=ada&access_token=abc&apiKey=k&page=2#top"),
            "https://api.test/login?user=ada&access_token=…&apiKey=…&page=2#top"
        );
        assert_eq!(redact("https://api.test/points"), "https://api.test/points");
        assert_eq!(redact("/verify?otp_code=123456"), "/verify?otp_code=…");
    }

    #[test]
    fn store_values_are_kept_short() {
        assert_eq!(short("items", &json!([1, 2, 3])), json!("[3]"));
        assert_eq!(short("user", &json!({"a": 1, "b": 2})), json!("{2}"));
        assert_eq!(short("authToken", &json!("abc")), json!("…"));
        assert_eq!(short("n", &json!(4)), json!(4));
    }
}
