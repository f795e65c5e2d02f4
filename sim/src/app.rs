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
    /// `profile {action: start}` was called and not stopped.
    profiling: bool,
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
            profiling: false,
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

    /// Two identical measurements 40 ms apart, for up to 600 ms: an element
    /// still sliding in would be tapped where it was.
    async fn settled(&self, target: &Target) -> Result<(Point, Option<Element>), ErrorBody> {
        let deadline = Instant::now() + Duration::from_millis(600);
        let mut previous = self.point_of(target)?;
        while Instant::now() < deadline {
            sleep(Duration::from_millis(40)).await;
            let current = self.point_of(target)?;
            match (&current.1, &previous.1) {
                (None, _) => return Ok(current),
                (Some(a), Some(b)) if same_frame(a, b) => return Ok(current),
                _ => previous = current,
            }
        }
        Ok(previous)
    }

    async fn press_native(self: &Arc<Self>, target: &Target, hold_ms: u64) -> Result<PressResult, ErrorBody> {
        let mut point = self.settled(target).await?;
        let into_input = point.1.as_ref().is_some_and(|e| e.kind == ElementKind::Input);
        if !into_input && self.elements().iter().any(Element::is_focused) {
            // With the keyboard up, a tap elsewhere would only close it.
            self.dismiss_keyboard();
            sleep(Duration::from_millis(300)).await;
            point = self.settled(target).await?;
        }
        sleep(Duration::from_millis(hold_ms)).await;
        self.touch(point.0);
        Ok(PressResult { x: point.0.x, y: point.0.y, element: point.1, mode: PressMode::Native })
    }

    async fn press(self: &Arc<Self>, params: PressParams) -> Result<PressResult, ErrorBody> {
        let target = params.target;
        if params.mode == Some(PressMode::Js) {
            let element = self.presented(&target)?;
            if !element.enabled {
                return Err(fail(format!("{} is disabled", target.describe())));
            }
            if element.is_covered() {
                return Err(fail(format!("{} is covered", target.describe())));
            }
            self.press_handler(&element);
            let c = element.frame.centre();
            return Ok(PressResult { x: c.x, y: c.y, element: Some(element), mode: PressMode::Js });
        }
        if self.model.file.native && !matches!(target, Target::Point { .. }) {
            // A finger cannot reach what lies outside the window: bring it in.
            if self.find(&target).is_some_and(|e| e.hidden.is_none() && !self.in_window(&e)) {
                let wait = WaitForParams {
                    target: Some(target.clone()),
                    scroll: Some(true),
                    timeout_ms: Some(5000),
                    ..Default::default()
                };
                self.wait_for(wait).await?;
            }
        }
        self.press_native(&target, params.hold_ms.unwrap_or(50)).await
    }

    /// A touch at `point` reaches the topmost presented element there, and
    /// bubbles up to the nearest one that handles touches.
    fn touch(self: &Arc<Self>, point: Point) {
        let (snap, route) = self.snap();
        let hit =
            snap.elements.iter().rev().find(|e| e.hidden.is_none() && !e.is_offscreen() && e.frame.contains(point));
        let Some(mut element) = hit else { return };
        loop {
            let node = &route.nodes[snap.nodes[element.i]];
            let handles = matches!(element.kind, ElementKind::Button | ElementKind::Input | ElementKind::Switch)
                || !node.spec.on_press.is_empty();
            if handles {
                break;
            }
            match element.parent.and_then(|p| snap.elements.get(p)) {
                Some(parent) => element = parent,
                None => return,
            }
        }
        if !element.enabled {
            return;
        }
        let node_index = snap.nodes[element.i];
        if element.kind == ElementKind::Input {
            let mut state = self.lock();
            let top = state.stack.last_mut().expect("the stack is never empty");
            if top.focused != Some(node_index) {
                top.focused = Some(node_index);
                state.commits += 1;
            }
            return;
        }
        if element.kind == ElementKind::Switch {
            let mut state = self.lock();
            let top = state.stack.last_mut().expect("the stack is never empty");
            let on = top.current_value(route, node_index).as_deref() == Some("true");
            top.text.insert(node_index, (!on).to_string());
            state.commits += 1;
        }
        let actions = route.nodes[node_index].spec.on_press.clone();
        self.run(actions);
    }

    /// The nearest `onPress` at or above the element: what `mode: js` calls.
    fn press_handler(self: &Arc<Self>, element: &Element) {
        let (snap, route) = self.snap();
        let mut current = snap.elements.get(element.i);
        while let Some(e) = current {
            let actions = &route.nodes[snap.nodes[e.i]].spec.on_press;
            if !actions.is_empty() {
                self.run(actions.clone());
                return;
            }
            current = e.parent.and_then(|p| snap.elements.get(p));
        }
    }

    // ------------------------------------------------------------ type

    async fn type_text(self: &Arc<Self>, params: TypeParams) -> Result<TypeResult, ErrorBody> {
        let mut element = None;
        if let Some(target) = &params.target {
            let found = self.find(target);
            if found.as_ref().is_some_and(|e| {
                e.kind == ElementKind::Input && e.hidden == Some(argus_proto::wire::HiddenReason::Inert)
            }) {
                element = found;
            } else {
                element = self.press_native(target, 50).await?.element;
                // The keyboard needs a frame to attach to the field.
                sleep(Duration::from_millis(80)).await;
            }
        }
        let field = self.typing_field(element.as_ref()).ok_or_else(|| {
            fail(match &params.target {
                Some(target) => format!("{} is not a text field", target.describe()),
                None => "No text field has focus".to_owned(),
            })
        })?;
        if params.clear == Some(true) {
            self.edit(field, |value| value.clear());
        }
        if params.paste == Some(true) {
            self.edit(field, |value| value.push_str(&params.text));
        } else {
            // A controlled input formats on every change; keys faster than a
            // render would race the formatter.
            for c in params.text.chars() {
                self.edit(field, |value| value.push(c));
                sleep(Duration::from_millis(25)).await;
            }
        }
        let (on_change, on_submit) = {
            let state = self.lock();
            let spec = &self.top_route(&state).nodes[field].spec;
            (spec.on_change.clone(), spec.on_submit.clone())
        };
        self.run(on_change);
        if params.submit == Some(true) {
            self.run(on_submit);
        }
        Ok(TypeResult { typed: params.text, element })
    }

    /// The input that receives keys: the element typed at, or the focused one.
    fn typing_field(&self, element: Option<&Element>) -> Option<usize> {
        let (snap, _) = self.snap();
        let node = match element {
            Some(e) => snap.nodes.get(e.i).copied(),
            None => self.lock().stack.last().and_then(|s| s.focused),
        }?;
        let state = self.lock();
        (self.top_route(&state).nodes[node].spec.kind == ElementKind::Input).then_some(node)
    }

    fn edit(&self, node: usize, change: impl FnOnce(&mut String)) {
        let mut state = self.lock();
        let route = self.top_route(&state).clone();
        let top = state.stack.last_mut().expect("never empty");
        let mut value = top.current_value(&route, node).unwrap_or_default();
        change(&mut value);
        top.value.insert(node, value);
        state.commits += 1;
    }

    fn dismiss_keyboard(&self) {
        let mut state = self.lock();
        let top = state.stack.last_mut().expect("never empty");
        if top.focused.take().is_some() {
            state.commits += 1;
        }
    }

    // ------------------------------------------------------------ swipe

    async fn swipe(self: &Arc<Self>, params: SwipeParams) -> Result<SwipeResult, ErrorBody> {
        let window = self.model.file.window;
        let duration = Duration::from_millis(params.duration_ms.unwrap_or(250));
        if let Some(target) = &params.target {
            let element = self.presented(target)?;
            let direction = params.direction.unwrap_or(Direction::Up);
            let vertical = matches!(direction, Direction::Up | Direction::Down);
            let distance = params.distance.unwrap_or(if vertical { window.h } else { window.w } * 0.6);
            let (dx, dy) = match direction {
                Direction::Left => (-distance, 0.0),
                Direction::Right => (distance, 0.0),
                Direction::Up => (0.0, -distance),
                Direction::Down => (0.0, distance),
            };
            // A touch that leaves the window is cancelled: slide the drag inside.
            let inset = 8.0;
            let along = |start: f64, delta: f64, size: f64| {
                start.max(inset - delta.min(0.0)).min(size - inset - delta.max(0.0))
            };
            let middle = element.frame.centre();
            let from = Point { x: along(middle.x, dx, window.w), y: along(middle.y, dy, window.h) };
            let to = Point { x: from.x + dx, y: from.y + dy };
            self.drag(from, to, duration).await;
            return Ok(SwipeResult { from, to });
        }
        let preset = params.direction.map(|d| {
            let (w, h) = (window.w, window.h);
            match d {
                Direction::Up => (Point { x: w / 2.0, y: h * 0.7 }, Point { x: w / 2.0, y: h * 0.3 }),
                Direction::Down => (Point { x: w / 2.0, y: h * 0.3 }, Point { x: w / 2.0, y: h * 0.7 }),
                Direction::Left => (Point { x: w * 0.8, y: h / 2.0 }, Point { x: w * 0.2, y: h / 2.0 }),
                Direction::Right => (Point { x: w * 0.2, y: h / 2.0 }, Point { x: w * 0.8, y: h / 2.0 }),
            }
        });
        let from = params.from.or(preset.map(|p| p.0));
        let to = params.to.or(preset.map(|p| p.1));
        let (Some(from), Some(to)) = (from, to) else {
            return Err(fail("swipe needs a direction, a target, or from/to points"));
        };
        self.drag(from, to, duration).await;
        Ok(SwipeResult { from, to })
    }

    /// A finger dragged from `from` to `to` scrolls the scroll container it
    /// starts on.
    async fn drag(&self, from: Point, to: Point, duration: Duration) {
        sleep(duration).await;
        let (snap, _) = self.snap();
        let scroller = snap
            .elements
            .iter()
            .rev()
            .find(|e| e.kind == ElementKind::Scroll && e.hidden.is_none() && e.frame.contains(from));
        let Some(scroller) = scroller else { return };
        let node = snap.nodes[scroller.i];
        let max = (snap.content.get(&node).copied().unwrap_or(0.0) - scroller.frame.h).max(0.0);
        let mut state = self.lock();
        let top = state.stack.last_mut().expect("never empty");
        let before = top.scroll.get(&node).copied().unwrap_or(0.0);
        let after = (before + (from.y - to.y)).clamp(0.0, max);
        if after != before {
            top.scroll.insert(node, after);
            state.commits += 1;
        }
    }

    /// One swipe toward an element known to lie outside the window, or on
    /// through the list when it is not mounted yet (`back`: upwards).
    async fn swipe_towards(&self, all: &[Element], target: Option<&Element>, back: bool) {
        let window = self.model.file.window;
        let mut scroller = None;
        let mut parent = target.and_then(|t| t.parent);
        while let (None, Some(p)) = (scroller, parent) {
            if all[p].kind == ElementKind::Scroll {
                scroller = Some(&all[p]);
            }
            parent = all[p].parent;
        }
        let scroller = scroller.or_else(|| {
            all.iter()
                .filter(|e| e.kind == ElementKind::Scroll && e.hidden.is_none())
                .max_by(|a, b| (a.frame.w * a.frame.h).total_cmp(&(b.frame.w * b.frame.h)))
        });
        let b =
            scroller.map(|s| s.frame).unwrap_or(argus_proto::wire::Frame { x: 0.0, y: 0.0, w: window.w, h: window.h });
        let (left, top) = (b.x.max(0.0), b.y.max(0.0));
        let (right, bottom) = ((b.x + b.w).min(window.w), (b.y + b.h).min(window.h));
        let (cx, cy) = ((left + right) / 2.0, (top + bottom) / 2.0);
        let (dx, dy) = ((right - left) * 0.3, (bottom - top) * 0.3);
        let at = target.map(|t| t.frame.centre());
        let duration = Duration::from_millis(250);
        if let Some(at) = at.filter(|a| (a.x < 0.0 || a.x > window.w) && a.y >= 0.0 && a.y <= window.h) {
            let forward = at.x > window.w;
            let sign = if forward { 1.0 } else { -1.0 };
            self.drag(Point { x: cx + sign * dx, y: at.y }, Point { x: cx - sign * dx, y: at.y }, duration).await;
            return;
        }
        let up = at.map_or(back, |a| a.y < 0.0);
        let x = at.map_or(cx, |a| a.x.clamp(left + 1.0, right - 1.0));
        let sign = if up { -1.0 } else { 1.0 };
        self.drag(Point { x, y: cy + sign * dy }, Point { x, y: cy - sign * dy }, duration).await;
    }

    // ------------------------------------------------------------ waits

    async fn wait_for(&self, params: WaitForParams) -> Result<WaitForResult, ErrorBody> {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(params.timeout_ms.unwrap_or(5000));
        let gone = params.gone == Some(true);
        let scroll = params.scroll == Some(true);
        let between_swipes = Duration::from_millis(if self.model.file.native { 400 } else { 50 });
        let (mut swipes, mut back, mut before) = (0u32, false, String::new());
        let mut last_swipe: Option<Instant> = None;
        loop {
            let route = self.current_route();
            let route_ok = params.route.is_none() || route == params.route;
            let all = if params.target.is_some() || params.any_of.is_some() { self.elements() } else { Vec::new() };
            let found = params.target.as_ref().and_then(|t| pick(&all, t));
            let present = params.target.is_none() || found.is_some_and(|f| !scroll || self.in_window(f));
            let target_ok = if gone { !present } else { present };
            let matched = params.any_of.as_ref().and_then(|any| any.iter().find(|t| pick(&all, t).is_some()));
            let any_ok = params.any_of.is_none() || matched.is_some();
            if route_ok && target_ok && any_ok {
                return Ok(WaitForResult {
                    route,
                    matched: matched.cloned(),
                    waited_ms: started.elapsed().as_millis() as u64,
                });
            }
            if Instant::now() > deadline {
                return Err(fail(format!(
                    "Timed out waiting for {} {}{} (on {})",
                    params.route.as_deref().unwrap_or(""),
                    params.target.as_ref().map(Target::describe).unwrap_or_default(),
                    if gone { " to disappear" } else { "" },
                    route.as_deref().unwrap_or("undefined"),
                )));
            }
            let may_swipe = last_swipe.is_none_or(|t| t.elapsed() > between_swipes);
            if scroll && params.target.is_some() && !gone && swipes < 30 && may_swipe {
                let shape = shape_of(&all);
                // Not mounted yet: down until the list stops moving, then up.
                if found.is_none() && swipes > 0 && shape == before {
                    if back {
                        swipes = 30;
                    }
                    back = true;
                }
                before = shape;
                self.swipe_towards(&all, found, back).await;
                swipes += 1;
                last_swipe = Some(Instant::now());
                continue;
            }
            sleep(Duration::from_millis(40)).await;
        }
    }

    async fn idle(&self, params: IdleParams) -> IdleResult {
        let quiet = Duration::from_millis(params.quiet_ms.unwrap_or(150));
        let deadline = Instant::now() + Duration::from_millis(params.timeout_ms.unwrap_or(3000));
        let commits = || self.lock().commits;
        let mut last = commits();
        let mut quiet_since = Instant::now();
        let mut arrived = params.after.is_none_or(|after| last > after);
        while Instant::now() < deadline {
            sleep(Duration::from_millis(30)).await;
            let commit = commits();
            if params.after.is_some_and(|after| commit > after) {
                arrived = true;
            }
            if commit != last || self.busy() {
                last = commit;
                quiet_since = Instant::now();
            } else if arrived && quiet_since.elapsed() >= quiet {
                return IdleResult { commit, idle: true };
            }
        }
        IdleResult { commit: commits(), idle: false }
    }

    // ------------------------------------------------------------ navigation

    fn no_adapter(&self) -> Result<(), ErrorBody> {
        if self.model.file.navigation { Ok(()) } else { Err(fail("No navigation adapter configured")) }
    }

    fn navigate(self: &Arc<Self>, params: NavigateParams) -> Result<RouteResult, ErrorBody> {
        self.no_adapter()?;
        // The agent hands the name to React Navigation, which ignores a
        // route it does not know: the answer names it, the app stays put.
        if self.model.route(&params.name).is_none() {
            return Ok(RouteResult { route: Some(params.name) });
        }
        self.push(&params.name, params.params);
        Ok(RouteResult { route: Some(params.name) })
    }

    fn back(self: &Arc<Self>) -> Result<RouteResult, ErrorBody> {
        self.no_adapter()?;
        if !self.pop() {
            return Err(fail("Nothing to go back to"));
        }
        Ok(RouteResult { route: self.current_route() })
    }

    fn push(self: &Arc<Self>, name: &str, params: Option<Value>) {
        let Some(route) = self.model.route(name) else { return };
        let generation = {
            let mut state = self.lock();
            state.stack.push(ScreenState::new(route, params, Instant::now()));
            state.generation += 1;
            state.commits += 1;
            state.generation
        };
        self.route_changed();
        self.screen_entered(generation);
    }

    fn pop(self: &Arc<Self>) -> bool {
        let generation = {
            let mut state = self.lock();
            if state.stack.len() < 2 {
                return false;
            }
            state.stack.pop();
            state.generation += 1;
            state.commits += 1;
            state.generation
        };
        self.route_changed();
        self.screen_entered(generation);
        true
    }

    fn reset_to_root(self: &Arc<Self>) {
        let initial = self.model.route(&self.model.file.initial_route).expect("checked at load");
        let generation = {
            let mut state = self.lock();
            state.stack = vec![ScreenState::new(initial, None, Instant::now())];
            state.generation += 1;
            state.commits += 1;
            state.generation
        };
        self.route_changed();
        self.screen_entered(generation);
    }

    fn route_changed(&self) {
        let (route, path) = {
            let state = self.lock();
            (state.stack.last().map(|s| s.route.clone()), self.top_route(&state).path.clone())
        };
        if !self.model.file.navigation {
            return;
        }
        self.lock().push_trace(TraceKind::Route { route: route.clone(), path });
        self.route.send_replace(route);
    }

    /// Elements that appear or go with time make the UI render again then.
    fn screen_entered(self: &Arc<Self>, generation: u64) {
        let thresholds: Vec<u64> = {
            let state = self.lock();
            let route = self.top_route(&state);
            let mut t: Vec<u64> =
                route.nodes.iter().flat_map(|n| [n.spec.appear_after_ms, n.spec.gone_after_ms]).flatten().collect();
            t.sort_unstable();
            t.dedup();
            t
        };
        if thresholds.is_empty() || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let app = Arc::downgrade(self);
        argus_proto::task::spawn("timed elements", async move {
            let start = Instant::now();
            for t in thresholds {
                tokio::time::sleep_until(start + Duration::from_millis(t)).await;
                let Some(app) = app.upgrade() else { return };
                let mut state = app.lock();
                if state.generation != generation {
                    return;
                }
                state.commits += 1;
            }
        });
    }

    fn deep_link(self: &Arc<Self>, params: DeepLinkParams) -> DeepLinkResult {
        if let Some(link) = self.model.file.links.iter().find(|l| params.url.starts_with(&l.prefix)) {
            self.push(link.navigate.name(), link.navigate.params());
        }
        DeepLinkResult { opened: params.url }
    }

    // ------------------------------------------------------------ rings

    fn requests(&self, params: SinceParams) -> RequestsResult {
        let state = self.lock();
        let requests = state.requests.iter().filter(|r| params.since.is_none_or(|s| r.id > s)).cloned().collect();
        RequestsResult { in_flight: state.in_flight, requests }
    }

    fn trace(&self, params: SinceParams) -> TraceResult {
        let state = self.lock();
        let events = state.trace.iter().filter(|e| params.since.is_none_or(|s| e.seq > s)).cloned().collect();
        TraceResult { last: state.next_seq - 1, events }
    }

    fn debug(&self) -> Value {
        let (snap, _) = self.snap();
        let state = self.lock();
        json!({
            "simulated": true,
            "stack": state.stack.iter().map(|s| s.route.clone()).collect::<Vec<_>>(),
            "elements": snap.elements.len(),
            "hidden": snap.elements.iter().filter(|e| e.hidden.is_some()).count(),
            "commits": state.commits,
            "generation": state.generation,
        })
    }

    // ------------------------------------------------------------ commands

    async fn reset(self: &Arc<Self>, params: Option<Value>) -> Outcome {
        let own = if self.model.file.commands.contains_key("reset") {
            self.command("reset", params).await?
        } else {
            Value::Null
        };
        {
            let mut state = self.lock();
            state.stores = self.model.file.stores.clone();
        }
        self.reset_to_root();
        Ok(own)
    }

    async fn command(self: &Arc<Self>, method: &str, params: Option<Value>) -> Outcome {
        if let Some(spec) = self.model.file.commands.get(method) {
            if let Some(ms) = spec.delay_ms {
                sleep(Duration::from_millis(ms)).await;
            }
            self.run(spec.actions.clone());
            if let Some(message) = &spec.error {
                return Err(fail(message.clone()));
            }
            return Ok(spec.result.clone().unwrap_or(Value::Null));
        }
        match method {
            // As lynkeus' hosts offer it (spec §1.12): the picture goes to
            // `path`, a file on the machine the app shares with its host.
            "screenshot" => {
                let params: ScreenshotParams = parse("screenshot", params)?;
                let bytes = crate::picture::png(&self.screen())
                    .map_err(|e| fail(format!("screenshot: cannot encode the picture: {e}")))?;
                tokio::fs::write(&params.path, &bytes)
                    .await
                    .map_err(|e| fail(format!("screenshot: cannot write {}: {e}", params.path)))?;
                Ok(json!({ "path": params.path, "bytes": bytes.len() }))
            }
            "events" => {
                let clear = params.as_ref().and_then(|p| p.get("clear")).and_then(Value::as_bool) == Some(true);
                let mut state = self.lock();
                let events: Vec<AppEvent> = state.events.iter().cloned().collect();
                if clear {
                    state.events.clear();
                }
                to_value(events)
            }
            "stores" => {
                let state = self.lock();
                match params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str) {
                    Some(name) if !name.is_empty() => state.stores.get(name).cloned().ok_or_else(|| {
                        let observed: Vec<&str> = state.stores.keys().map(String::as_str).collect();
                        let observed = if observed.is_empty() { "none".to_owned() } else { observed.join(", ") };
                        fail(format!("No store observed as {name:?}; observed: {observed}"))
                    }),
                    _ => Ok(json!({ "stores": state.stores.keys().collect::<Vec<_>>() })),
                }
            }
            // The agent's answer: `{recording}` on start, otherwise what was
            // recorded since (a model has no render cost: nothing is).
            "profile" => {
                let action = params.as_ref().and_then(|p| p.get("action")).and_then(Value::as_str);
                let mut state = self.lock();
                match action {
                    Some("start") => {
                        state.profiling = true;
                        Ok(json!({ "recording": true }))
                    }
                    _ => {
                        if action == Some("stop") {
                            state.profiling = false;
                        }
                        Ok(json!({ "recording": state.profiling, "commits": 0, "ms": 0, "routes": {} }))
                    }
                }
            }
            _ => Err(fail(format!("Unknown method {method}"))),
        }
    }

    // ------------------------------------------------------------ actions

    /// Runs actions in order; a `wait` hands the rest to a task, so the
    /// press that started them answers at once.
    fn run(self: &Arc<Self>, actions: Vec<Action>) {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Wait(ms) => {
                    let app = self.clone();
                    let rest: Vec<Action> = queue.into();
                    argus_proto::task::spawn("deferred actions", async move {
                        sleep(Duration::from_millis(ms)).await;
                        app.run(rest);
                    });
                    return;
                }
                Action::If(condition) => {
                    let holds = self.holds(&condition);
                    let branch = if holds { condition.then } else { condition.otherwise };
                    for action in branch.into_iter().rev() {
                        queue.push_front(action);
                    }
                }
                other => self.apply(other),
            }
        }
    }

    fn holds(&self, condition: &crate::model::Condition) -> bool {
        let state = self.lock();
        let top = state.stack.last().expect("never empty");
        let route = self.top_route(&state);
        let elapsed = top.entered.elapsed().as_millis() as u64;
        let nodes = route.by_test_id.get(&condition.test_id).cloned().unwrap_or_default();
        let node = nodes.into_iter().find(|n| mounted_alone(route, top, *n, elapsed));
        if condition.shown.is_some_and(|shown| node.is_some() != shown) {
            return false;
        }
        match (&condition.equals, node) {
            (Some(expected), Some(node)) => top.current_value(route, node).as_deref() == Some(expected.as_str()),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    fn apply(self: &Arc<Self>, action: Action) {
        match action {
            Action::Navigate(to) => self.push(to.name(), to.params()),
            Action::Back(_) => {
                self.pop();
            }
            Action::ResetToRoot(_) => self.reset_to_root(),
            Action::Show(id) => self.set_on(&id, |s, n| {
                s.mounted.insert(n, true);
            }),
            Action::Hide(id) => self.set_on(&id, |s, n| {
                s.mounted.insert(n, false);
            }),
            Action::Enable(id) => self.set_on(&id, |s, n| {
                s.enabled.insert(n, true);
            }),
            Action::Disable(id) => self.set_on(&id, |s, n| {
                s.enabled.insert(n, false);
            }),
            Action::SetText { test_id, text } => self.set_on(&test_id, |s, n| {
                s.text.insert(n, text.clone());
            }),
            Action::SetValue { test_id, value } => self.set_on(&test_id, |s, n| {
                s.value.insert(n, value.clone());
            }),
            Action::Request(spec) => self.start_request(spec),
            Action::Event { name, props } => {
                let route = self.current_route();
                let mut state = self.lock();
                if state.events.len() == EVENT_RING {
                    state.events.pop_front();
                }
                state.events.push_back(AppEvent {
                    t: epoch_ms(),
                    name: name.clone(),
                    props: props.clone(),
                    route: route.clone(),
                });
                state.push_trace(TraceKind::Event { name, props, route });
            }
            Action::Store { name, set } => {
                let mut state = self.lock();
                let store = state.stores.entry(name.clone()).or_insert_with(|| json!({}));
                let mut changed = serde_json::Map::new();
                if let Value::Object(fields) = store {
                    for (key, to) in set {
                        let from = fields.insert(key.clone(), to.clone()).unwrap_or(Value::Null);
                        if from != to {
                            changed.insert(key.clone(), json!({ "from": short(&key, &from), "to": short(&key, &to) }));
                        }
                    }
                }
                state.commits += 1;
                state.push_trace(TraceKind::Store { store: name, changed });
            }
            Action::Crash(message) => {
                let route = self.current_route();
                self.lock().push_trace(TraceKind::Crash { message, stack: None, route });
            }
            Action::Wait(_) | Action::If(_) => unreachable!("handled by run"),
        }
    }

    /// Changes every element with this testId on the screen on top.
    fn set_on(&self, test_id: &str, change: impl Fn(&mut ScreenState, usize)) {
        let mut state = self.lock();
        let route = self.top_route(&state);
        let nodes = route.by_test_id.get(test_id).cloned().unwrap_or_default();
        let top = state.stack.last_mut().expect("never empty");
        for node in nodes {
            change(top, node);
        }
        state.commits += 1;
    }

    fn start_request(self: &Arc<Self>, spec: RequestSpec) {
        let url = redact(&spec.url);
        let id = {
            let mut state = self.lock();
            let id = state.next_request;
            state.next_request += 1;
            state.in_flight += 1;
            if state.requests.len() == REQUEST_RING {
                state.requests.pop_front();
            }
            state.requests.push_back(RequestRecord {
                id,
                method: spec.method.clone(),
                url: url.clone(),
                status: None,
                started_at: epoch_ms(),
                ms: None,
                error: None,
            });
            id
        };
        let app = self.clone();
        argus_proto::task::spawn("simulated request", async move {
            sleep(Duration::from_millis(spec.ms)).await;
            let status = if spec.error.is_some() { 0 } else { spec.status };
            let mut state = app.lock();
            if let Some(record) = state.requests.iter_mut().find(|r| r.id == id) {
                record.status = Some(status);
                record.ms = Some(spec.ms);
                record.error = spec.error.clone();
            }
            state.in_flight -= 1;
            state.commits += 1;
            state.push_trace(TraceKind::Request {
                method: spec.method,
                url,
                status: Some(status),
                ms: Some(spec.ms),
                error: spec.error,
            });
        });
    }
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
