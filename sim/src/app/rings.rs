//! What the app keeps of its past: its requests, trace and debug state.

use super::*;

impl App {
    pub(super) fn requests(&self, params: SinceParams) -> RequestsResult {
        let state = self.lock();
        let requests = state.requests.iter().filter(|r| params.since.is_none_or(|s| r.id > s)).cloned().collect();
        RequestsResult { in_flight: state.in_flight, requests }
    }

    pub(super) fn trace(&self, params: SinceParams) -> TraceResult {
        let state = self.lock();
        let events = state.trace.iter().filter(|e| params.since.is_none_or(|s| e.seq > s)).cloned().collect();
        TraceResult { last: state.next_seq - 1, events }
    }

    pub(super) fn debug(&self) -> Value {
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
}
