//! Gestures: press (native and by handler), type, swipe and drag, on the
//! element a target names once the screen has settled.

use super::*;

impl App {
    /// Two identical measurements 40 ms apart, for up to 600 ms: an element
    /// still sliding in would be tapped where it was.
    pub(super) async fn settled(&self, target: &Target) -> Result<(Point, Option<Element>), ErrorBody> {
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

    pub(super) async fn press_native(
        self: &Arc<Self>,
        target: &Target,
        hold_ms: u64,
    ) -> Result<PressResult, ErrorBody> {
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

    pub(super) async fn press(self: &Arc<Self>, params: PressParams) -> Result<PressResult, ErrorBody> {
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
    pub(super) fn touch(self: &Arc<Self>, point: Point) {
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
    pub(super) fn press_handler(self: &Arc<Self>, element: &Element) {
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

    pub(super) async fn type_text(self: &Arc<Self>, params: TypeParams) -> Result<TypeResult, ErrorBody> {
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
    pub(super) fn typing_field(&self, element: Option<&Element>) -> Option<usize> {
        let (snap, _) = self.snap();
        let node = match element {
            Some(e) => snap.nodes.get(e.i).copied(),
            None => self.lock().stack.last().and_then(|s| s.focused),
        }?;
        let state = self.lock();
        (self.top_route(&state).nodes[node].spec.kind == ElementKind::Input).then_some(node)
    }

    pub(super) fn edit(&self, node: usize, change: impl FnOnce(&mut String)) {
        let mut state = self.lock();
        let route = self.top_route(&state).clone();
        let top = state.stack.last_mut().expect("never empty");
        let mut value = top.current_value(&route, node).unwrap_or_default();
        change(&mut value);
        top.value.insert(node, value);
        state.commits += 1;
    }

    pub(super) fn dismiss_keyboard(&self) {
        let mut state = self.lock();
        let top = state.stack.last_mut().expect("never empty");
        if top.focused.take().is_some() {
            state.commits += 1;
        }
    }

    // ------------------------------------------------------------ swipe

    pub(super) async fn swipe(self: &Arc<Self>, params: SwipeParams) -> Result<SwipeResult, ErrorBody> {
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
    pub(super) async fn drag(&self, from: Point, to: Point, duration: Duration) {
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
    pub(super) async fn swipe_towards(&self, all: &[Element], target: Option<&Element>, back: bool) {
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
}
