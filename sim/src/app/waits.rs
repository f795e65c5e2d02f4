//! Waiting: for an element, a route or a request (`waitFor`), and for the
//! app to be idle.

use super::*;

impl App {
    pub(super) async fn wait_for(&self, params: WaitForParams) -> Result<WaitForResult, ErrorBody> {
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

    pub(super) async fn idle(&self, params: IdleParams) -> IdleResult {
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
}
