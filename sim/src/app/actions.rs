//! The model's behaviour: app commands, reset, and the actions a press or a
//! screen runs (navigate, set, request, after a delay).

use super::*;

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

impl App {
    pub(super) async fn reset(self: &Arc<Self>, params: Option<Value>) -> Outcome {
        let own = if self.model.file.commands.contains_key("reset") {
            self.command("reset", params).await?
        } else {
            Value::Null
        };
        {
            let mut state = self.lock();
            state.stores = self.model.file.stores.clone();
            state.resets += 1;
        }
        self.reset_to_root();
        Ok(own)
    }

    pub(super) async fn command(self: &Arc<Self>, method: &str, params: Option<Value>) -> Outcome {
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
            // recorded since: every commit, at the model's `renderMs` each (the
            // model keeps no per-route split, so `routes` stays empty).
            "profile" => {
                let action = params.as_ref().and_then(|p| p.get("action")).and_then(Value::as_str);
                let mut state = self.lock();
                if action == Some("start") {
                    state.profiling = Some(state.commits);
                    return Ok(json!({ "recording": true }));
                }
                let commits = state.profiling.map_or(0, |from| state.commits - from);
                if action == Some("stop") {
                    state.profiling = None;
                }
                let ms = (commits as f64 * self.model.file.render_ms * 10.0).round() / 10.0;
                Ok(json!({ "recording": state.profiling.is_some(), "commits": commits, "ms": ms, "routes": {} }))
            }
            // The headless host's answer (spec §3.3), from the model's
            // `memory`: the heap grows by its leak at every reset.
            "memory" => {
                let Some(memory) = &self.model.file.memory else {
                    return Err(fail(format!("Unknown method {method}")));
                };
                let state = self.lock();
                let leaked = f64::from(state.resets) * memory.leak_mb_per_reset;
                let heap = memory.heap_mb + leaked;
                Ok(json!({
                    "heapUsedMb": round1(heap),
                    "heapTotalMb": round1(heap * 1.5),
                    "rssMb": round1(memory.rss_mb + leaked),
                    "resets": state.resets,
                    "roots": 1,
                    "listeners": memory.listeners,
                    "commands": self.model.commands().len(),
                }))
            }
            _ => Err(fail(format!("Unknown method {method}"))),
        }
    }

    // ------------------------------------------------------------ actions

    /// Runs actions in order; a `wait` hands the rest to a task, so the
    /// press that started them answers at once.
    pub(super) fn run(self: &Arc<Self>, actions: Vec<Action>) {
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

    pub(super) fn holds(&self, condition: &crate::model::Condition) -> bool {
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

    pub(super) fn apply(self: &Arc<Self>, action: Action) {
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
                // A stack as React Native's error handler reports one.
                let screen = route.clone().unwrap_or_else(|| "App".into());
                let stack = format!(
                    "{message}\n    at {screen}Screen (index.bundle:1042:17)\n    at renderWithHooks (index.bundle:88:23)\n    at App (index.bundle:12:5)"
                );
                self.lock().push_trace(TraceKind::Crash { message, stack: Some(stack), route });
            }
            Action::Wait(_) | Action::If(_) => unreachable!("handled by run"),
        }
    }

    /// Changes every element with this testId on the screen on top.
    pub(super) fn set_on(&self, test_id: &str, change: impl Fn(&mut ScreenState, usize)) {
        let mut state = self.lock();
        let route = self.top_route(&state);
        let nodes = route.by_test_id.get(test_id).cloned().unwrap_or_default();
        let top = state.stack.last_mut().expect("never empty");
        for node in nodes {
            change(top, node);
        }
        state.commits += 1;
    }

    pub(super) fn start_request(self: &Arc<Self>, spec: RequestSpec) {
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
