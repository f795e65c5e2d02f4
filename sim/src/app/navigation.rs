//! Navigation: the route stack, pushed and popped, reset to its root, and
//! what entering a screen starts.

use super::*;

impl App {
    pub(super) fn no_adapter(&self) -> Result<(), ErrorBody> {
        if self.model.file.navigation { Ok(()) } else { Err(fail("No navigation adapter configured")) }
    }

    pub(super) fn navigate(self: &Arc<Self>, params: NavigateParams) -> Result<RouteResult, ErrorBody> {
        self.no_adapter()?;
        // The agent hands the name to React Navigation, which ignores a
        // route it does not know: the answer names it, the app stays put.
        if self.model.route(&params.name).is_none() {
            return Ok(RouteResult { route: Some(params.name) });
        }
        self.push(&params.name, params.params);
        Ok(RouteResult { route: Some(params.name) })
    }

    pub(super) fn back(self: &Arc<Self>) -> Result<RouteResult, ErrorBody> {
        self.no_adapter()?;
        if !self.pop() {
            return Err(fail("Nothing to go back to"));
        }
        Ok(RouteResult { route: self.current_route() })
    }

    pub(super) fn push(self: &Arc<Self>, name: &str, params: Option<Value>) {
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

    pub(super) fn pop(self: &Arc<Self>) -> bool {
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

    pub(super) fn reset_to_root(self: &Arc<Self>) {
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

    pub(super) fn route_changed(&self) {
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
    pub(super) fn screen_entered(self: &Arc<Self>, generation: u64) {
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

    pub(super) fn deep_link(self: &Arc<Self>, params: DeepLinkParams) -> DeepLinkResult {
        if let Some(link) = self.model.file.links.iter().find(|l| params.url.starts_with(&l.prefix)) {
            self.push(link.navigate.name(), link.navigate.params());
        }
        DeepLinkResult { opened: params.url }
    }

    // ------------------------------------------------------------ rings
}
