//! The worker's part of the live view: what each slot's app shows now.
//!
//! An attempt already reads the app's `screen` after each app step and its
//! `trace` for the step's record; [`Watched`] keeps a copy of both as they
//! pass, at no extra call. While someone watches (the coordinator's
//! `Watch`), the link asks for at most one more `screen` a second during an
//! attempt (never while the app said it was busy) and one every
//! [`IDLE_READ_EVERY`] on an idle device, and sends a `LiveScreen` when
//! something changed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use argus_cases::runner::{CallFailure, Device};
use argus_proto::grpc;
use argus_proto::observe;
use argus_proto::wire::{Hello, Screen, TraceResult};
use serde_json::Value;

/// How often a device that runs an attempt is read when nothing else read
/// it meanwhile.
pub const BUSY_READ_EVERY: Duration = Duration::from_secs(1);
/// How often a watched idle device is read.
pub const IDLE_READ_EVERY: Duration = Duration::from_secs(3);
/// How long a live read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// One slot's live state.
#[derive(Default)]
pub struct Live {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The attempt running: run, case, attempt.
    attempt: Option<(String, String, u32)>,
    step: Option<(u32, String)>,
    screen: Option<grpc::LiveScreen>,
    read_at: Option<Instant>,
    /// Lines of the trace not yet sent.
    trace: Vec<String>,
    /// The newest trace entry already turned into a line.
    trace_seq: u64,
    /// Bumped by every change; `sent` is the version last sent.
    version: u64,
    sent: u64,
    /// A live read is in flight.
    reading: bool,
    /// Something changed the app (a session's or a borrower's call): read
    /// it at the next tick.
    poked: bool,
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An attempt of `case_id` in `run_id` begins on the slot.
    pub fn begin(&self, run_id: &str, case_id: &str, attempt: u32) {
        let mut state = self.lock();
        state.attempt = Some((run_id.to_owned(), case_id.to_owned(), attempt));
        state.step = None;
        state.version += 1;
    }

    /// The attempt ended: the device runs nothing.
    pub fn end(&self) {
        let mut state = self.lock();
        state.attempt = None;
        state.step = None;
        state.version += 1;
    }

    /// Step `index`, labelled `label`, just ran.
    pub fn step(&self, index: u32, label: &str) {
        let mut state = self.lock();
        state.step = Some((index, observe::clip(label)));
        state.version += 1;
    }

    /// The answer of a call to the slot's app, whoever made it: a `screen`
    /// is what it shows now, a `trace` what it did.
    pub fn saw(&self, method: &str, answer: &Value) {
        match method {
            "screen" => {
                if let Ok(screen) = serde_json::from_value::<Screen>(answer.clone()) {
                    self.screen(&screen);
                }
            }
            "trace" => {
                if let Ok(trace) = serde_json::from_value::<TraceResult>(answer.clone()) {
                    self.trace(&trace);
                }
            }
            _ => {}
        }
    }

    fn screen(&self, screen: &Screen) {
        let (elements, _) = observe::elements(screen);
        let live = grpc::LiveScreen {
            route: screen.route.as_deref().map(observe::clip).unwrap_or_default(),
            window_w: screen.window.w as f32,
            window_h: screen.window.h as f32,
            elements,
            read_unix_ms: unix_ms(),
            busy: screen.busy,
            ..Default::default()
        };
        let mut state = self.lock();
        if state.screen.as_ref().is_none_or(|was| !same_screen(was, &live)) {
            state.version += 1;
        }
        state.screen = Some(live);
        state.read_at = Some(Instant::now());
    }

    fn trace(&self, trace: &TraceResult) {
        let mut state = self.lock();
        // A relaunched app counts from the start again.
        if trace.last < state.trace_seq {
            state.trace_seq = 0;
        }
        let since = state.trace_seq;
        let fresh: Vec<_> = trace.events.iter().filter(|e| e.seq > since).cloned().collect();
        if fresh.is_empty() {
            return;
        }
        state.trace_seq = trace.last.max(fresh.iter().map(|e| e.seq).max().unwrap_or(0));
        state.trace.extend(observe::trace_lines(&fresh));
        let extra = state.trace.len().saturating_sub(observe::LIVE_TRACE_LINES);
        state.trace.drain(..extra);
        state.version += 1;
    }

    /// Read the app at the next tick (a call may have changed it).
    pub fn poke(&self) {
        self.lock().poked = true;
    }

    /// Whether the link should read the app now for the live view, and if
    /// so marks the read begun (`read_done` ends it). `attempt`: the slot
    /// runs one.
    pub fn read_due(&self, now: Instant) -> bool {
        let mut state = self.lock();
        if state.reading {
            return false;
        }
        let running = state.attempt.is_some();
        // An app that said it was busy is not asked again mid-attempt: the
        // attempt's own calls come first.
        if running && state.screen.as_ref().is_some_and(|s| s.busy) && !state.poked {
            return false;
        }
        let every = if running { BUSY_READ_EVERY } else { IDLE_READ_EVERY };
        let due = state.poked || state.read_at.is_none_or(|at| now.duration_since(at) >= every);
        if due {
            state.reading = true;
            state.poked = false;
        }
        due
    }

    /// A live read ended (whatever it answered).
    pub fn read_done(&self) {
        let mut state = self.lock();
        state.reading = false;
        // A failed read is not tried again before its interval.
        if state.read_at.is_none_or(|at| at.elapsed() >= READ_TIMEOUT) {
            state.read_at = Some(Instant::now());
        }
    }

    /// What to send for `slot` when something changed since the last time.
    pub fn take(&self, slot: &str) -> Option<grpc::LiveScreen> {
        let mut state = self.lock();
        if state.version == state.sent {
            return None;
        }
        state.sent = state.version;
        let mut live = state.screen.clone().unwrap_or_default();
        live.slot = slot.to_owned();
        if let Some((run_id, case_id, attempt)) = &state.attempt {
            (live.run_id, live.case_id, live.attempt) = (run_id.clone(), case_id.clone(), *attempt);
        }
        if let Some((index, step)) = &state.step {
            (live.step_index, live.step) = (*index, step.clone());
        }
        live.trace = std::mem::take(&mut state.trace);
        Some(live)
    }

    /// Everything is sent again to a new watcher.
    pub fn resend(&self) {
        let mut state = self.lock();
        state.version += 1;
    }
}

/// Whether two reads show the same thing (the time they were read aside).
fn same_screen(a: &grpc::LiveScreen, b: &grpc::LiveScreen) -> bool {
    a.route == b.route && a.elements == b.elements && a.window_w == b.window_w && a.busy == b.busy
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A device whose `screen` and `trace` answers are kept for the live view
/// as they pass.
pub struct Watched<'a, D> {
    pub device: &'a D,
    pub live: &'a Live,
}

impl<D: Device> Device for Watched<'_, D> {
    fn hello(&self) -> Option<std::sync::Arc<Hello>> {
        self.device.hello()
    }

    async fn call(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallFailure> {
        let answer = self.device.call(method, params, timeout).await?;
        self.live.saw(method, &answer);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn screen(route: &str, busy: bool) -> Value {
        json!({
            "route": route, "busy": busy, "commit": 1, "window": { "w": 390, "h": 844 },
            "elements": [{ "i": 0, "kind": "button", "frame": { "x": 10, "y": 20, "w": 100, "h": 44 },
                           "enabled": true, "depth": 1, "testId": "go", "text": "<b>Go</b>" }]
        })
    }

    #[test]
    fn what_passes_is_sent_once_with_the_attempt_and_step() {
        let live = Live::default();
        assert!(live.take("a").is_none(), "nothing changed yet");
        live.begin("run-1", "login", 2);
        live.step(3, "app.press");
        live.saw("screen", &screen("Home", false));
        live.saw(
            "trace",
            &json!({ "last": 2, "events": [
                { "seq": 1, "t": 5, "kind": "route", "route": "Home" },
                { "seq": 2, "t": 6, "kind": "request", "method": "GET", "url": "/api/feed", "status": 200, "ms": 12 }
            ]}),
        );
        let sent = live.take("a").expect("a change");
        assert_eq!((sent.run_id.as_str(), sent.case_id.as_str(), sent.attempt), ("run-1", "login", 2));
        assert_eq!((sent.step_index, sent.step.as_str(), sent.route.as_str()), (3, "app.press", "Home"));
        assert_eq!(sent.elements[0].text, "<b>Go</b>", "text is carried as it is; the page shows it as text");
        let frame = sent.elements[0].frame.expect("a frame");
        assert_eq!((frame.x, frame.y, frame.w, frame.h), (10.0, 20.0, 100.0, 44.0));
        assert_eq!(sent.trace, ["→ Home", "GET /api/feed 200 · 12 ms"]);
        assert!(live.take("a").is_none(), "sent once");
        // The same screen read again and the same trace are no change.
        live.saw("screen", &screen("Home", false));
        live.saw("trace", &json!({ "last": 2, "events": [{ "seq": 2, "t": 6, "kind": "event", "name": "x" }] }));
        assert!(live.take("a").is_none());
        live.end();
        let ended = live.take("a").expect("the end is a change");
        assert!(ended.run_id.is_empty() && ended.trace.is_empty());
        assert_eq!(ended.route, "Home", "the screen stays");
    }

    #[test]
    fn reads_are_bounded_and_a_busy_app_is_left_alone_mid_attempt() {
        let live = Live::default();
        let now = Instant::now();
        assert!(live.read_due(now), "never read");
        assert!(!live.read_due(now), "one read at a time");
        live.saw("screen", &screen("Home", false));
        live.read_done();
        assert!(!live.read_due(Instant::now()), "idle: not before {IDLE_READ_EVERY:?}");
        assert!(live.read_due(Instant::now() + IDLE_READ_EVERY));
        live.read_done();
        live.begin("r", "c", 1);
        live.saw("screen", &screen("Home", true));
        assert!(!live.read_due(Instant::now() + BUSY_READ_EVERY * 2), "busy mid-attempt: not asked");
        live.saw("screen", &screen("Home", false));
        assert!(!live.read_due(Instant::now()), "just read by the attempt");
        assert!(live.read_due(Instant::now() + BUSY_READ_EVERY));
        live.read_done();
        live.poke();
        assert!(live.read_due(Instant::now()), "a poke reads at once");
    }
}
