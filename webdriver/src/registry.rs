//! The WebDriver sessions this coordinator serves: which device each holds
//! (the owner task granted it), its timeouts and element ids. HTTP handlers
//! read it without going through the owner task; a session the owner task
//! ends for its own reasons (the worker went away, the idle timeout) ends
//! here when its grant says so. One lock, never held across an await.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argus_grid::calls::{CallFailure, DeviceCalls};
use argus_grid::owner::Grant;
use argus_grid::time::now_ms;
use argus_proto::grpc::device_answer;
use argus_proto::wire::{Element, Screen};
use serde_json::{Map, Value};
use tokio::sync::{OnceCell, watch};

use super::error::{Code, WdError, WdResult};
use super::log::{Entry, SessionLog};
use argus_store::{CommandRow, SessionRow};

/// The key W3C clients read an element reference from.
pub const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long an ended session is remembered, to say why it ended.
const ENDED_KEPT: Duration = Duration::from_secs(3600);
/// How long a new-session answer is kept for a retry with the same
/// `X-Idempotency-Key`.
const IDEMPOTENCY_KEPT: Duration = Duration::from_secs(600);

/// What a found element was, to find it again after the screen changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub i: usize,
    pub commit: u64,
    pub fingerprint: Fingerprint,
    /// How lynkeus names it without another look at the screen: its
    /// `testId` (and `nth`), when it has one.
    pub target: Option<argus_proto::wire::Target>,
}

impl Found {
    /// The element this names on `screen`, if it is still there: the same
    /// one while the screen has not changed, else by its fingerprint.
    pub fn on<'s>(&self, screen: &'s Screen) -> Option<&'s Element> {
        if screen.commit == self.commit {
            return screen.elements.iter().find(|e| e.i == self.i);
        }
        self.fingerprint.find(screen)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fingerprint {
    pub kind: argus_proto::wire::ElementKind,
    pub test_id: Option<String>,
    pub text: Option<String>,
    pub label: Option<String>,
    /// Its place among the elements of the same fingerprint, in tree order.
    pub nth: usize,
}

impl Fingerprint {
    fn same(&self, element: &Element) -> bool {
        element.kind == self.kind
            && element.test_id == self.test_id
            && element.text == self.text
            && element.accessibility_label == self.label
    }

    pub fn of(screen: &Screen, i: usize) -> Option<Self> {
        let position = screen.elements.iter().position(|e| e.i == i)?;
        let element = &screen.elements[position];
        let mut fingerprint = Fingerprint {
            kind: element.kind,
            test_id: element.test_id.clone(),
            text: element.text.clone(),
            label: element.accessibility_label.clone(),
            nth: 0,
        };
        fingerprint.nth = screen.elements[..position].iter().filter(|e| fingerprint.same(e)).count();
        Some(fingerprint)
    }

    /// The element of `screen` this fingerprint names, if it is still there.
    pub fn find<'s>(&self, screen: &'s Screen) -> Option<&'s Element> {
        screen.elements.iter().filter(|e| self.same(e)).nth(self.nth)
    }
}

/// The timeouts a client set (ms).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub implicit: u64,
    pub page_load: u64,
    pub script: u64,
}

impl Timeouts {
    /// How long a find looks again while nothing matches.
    pub fn implicit(&self) -> Duration {
        Duration::from_millis(self.implicit)
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { implicit: 0, page_load: 300_000, script: 30_000 }
    }
}

pub struct Session {
    pub id: String,
    pub grant: Grant,
    /// The capabilities answered to the client.
    pub capabilities: Map<String, Value>,
    pub created_ms: i64,
    /// When the client last sent a command (epoch ms); the owner task frees
    /// the device once it is older than the idle timeout.
    pub last_used: Arc<AtomicI64>,
    /// The next command's number in the session's record.
    seq: AtomicI64,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    /// The last screen the app showed a command, for the record of a
    /// command that fails.
    last_screen: Option<Arc<Screen>>,
    timeouts: Timeouts,
    elements: HashMap<String, Found>,
    next_element: u64,
}

impl Session {
    pub fn new(id: String, grant: Grant, capabilities: Map<String, Value>, last_used: Arc<AtomicI64>) -> Self {
        Self {
            id,
            grant,
            capabilities,
            created_ms: now_ms(),
            last_used,
            seq: AtomicI64::new(0),
            state: Mutex::default(),
        }
    }

    pub fn saw(&self, screen: Arc<Screen>) {
        self.state().last_screen = Some(screen);
    }

    pub fn last_screen(&self) -> Option<Arc<Screen>> {
        self.state().last_screen.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn touch(&self) {
        self.last_used.store(now_ms(), Ordering::Relaxed);
    }

    pub fn timeouts(&self) -> Timeouts {
        self.state().timeouts
    }

    pub fn set_timeouts(&self, timeouts: Timeouts) {
        self.state().timeouts = timeouts;
    }

    /// An id for a found element (the same id for the same element).
    pub fn remember(&self, found: Found) -> String {
        let mut state = self.state();
        if let Some((id, _)) = state.elements.iter().find(|(_, f)| **f == found) {
            return id.clone();
        }
        state.next_element += 1;
        let id = format!("{}-e{}", &self.id[..8.min(self.id.len())], state.next_element);
        state.elements.insert(id.clone(), found);
        id
    }

    pub fn element(&self, id: &str) -> WdResult<Found> {
        self.state()
            .elements
            .get(id)
            .cloned()
            .ok_or_else(|| WdError::new(Code::NoSuchElement, format!("no element {id} was found in this session")))
    }
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, Arc<Session>>,
    /// Sessions that ended, why and when: a late command is told why, and
    /// the command that ended it is still recorded.
    ended: HashMap<String, (String, Instant, Arc<Session>)>,
    idempotent: HashMap<String, (Arc<OnceCell<Value>>, Instant)>,
}

#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// The calls in flight to devices' apps: a session's fail when it ends.
    calls: Arc<DeviceCalls>,
    /// Where sessions and their commands are recorded; none in tests of
    /// the registry alone.
    log: Option<SessionLog>,
}

impl Registry {
    pub fn new(calls: Arc<DeviceCalls>, log: SessionLog) -> Self {
        Self { inner: Mutex::default(), calls, log: Some(log) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, session: Arc<Session>) {
        if let Some(log) = &self.log {
            log.add(Entry::Started(SessionRow {
                id: session.id.clone(),
                device_id: session.grant.device.clone(),
                worker_id: session.grant.worker.clone(),
                platform: session.grant.platform.clone(),
                capabilities_json: Value::Object(session.capabilities.clone()).to_string(),
                created_at: session.created_ms,
                ended_at: None,
                end_reason: None,
            }));
        }
        self.lock().sessions.insert(session.id.clone(), session);
    }

    /// Records a command of session `sid` (live or just ended); a failure
    /// keeps the screen the session last saw.
    pub fn command(&self, sid: &str, command: &str, started_ms: i64, ms: i64, error: Option<&WdError>) {
        let Some(log) = &self.log else { return };
        let session = {
            let inner = self.lock();
            inner.sessions.get(sid).or_else(|| inner.ended.get(sid).map(|(_, _, s)| s)).cloned()
        };
        let Some(session) = session else { return };
        let screen_xml = error.and_then(|_| session.last_screen()).map(|screen| super::page::Page::new(&screen).xml());
        log.add(Entry::Command(CommandRow {
            session_id: sid.to_owned(),
            seq: session.seq.fetch_add(1, Ordering::Relaxed),
            at: started_ms,
            command: command.to_owned(),
            ms,
            outcome: error.map_or("ok", |e| e.code.as_str()).to_owned(),
            message: error.map(|e| e.message.clone()),
            screen_xml,
        }));
    }

    /// The live session `id`, touched; or why there is none.
    pub fn get(&self, id: &str) -> WdResult<Arc<Session>> {
        let inner = self.lock();
        if let Some(session) = inner.sessions.get(id) {
            session.touch();
            return Ok(session.clone());
        }
        let message = match inner.ended.get(id) {
            Some((why, _, _)) => format!("session {id} has ended: {why}"),
            None => format!("no session {id} on this grid"),
        };
        Err(WdError::new(Code::InvalidSessionId, message))
    }

    pub fn list(&self) -> Vec<Arc<Session>> {
        let mut sessions: Vec<_> = self.lock().sessions.values().cloned().collect();
        sessions.sort_by(|a, b| a.id.cmp(&b.id));
        sessions
    }

    /// Forgets session `id` (its calls in flight fail with `why`); the
    /// session if it was live.
    pub fn end(&self, id: &str, why: &str) -> Option<Arc<Session>> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.ended.retain(|_, (_, at, _)| now.duration_since(*at) < ENDED_KEPT);
        let session = inner.sessions.remove(id)?;
        // Kept for an hour, to say why it ended: without what it found.
        session.state().elements.clear();
        inner.ended.insert(id.to_owned(), (why.to_owned(), now, session.clone()));
        if let Some(log) = &self.log {
            log.add(Entry::Ended { id: id.to_owned(), at: now_ms(), reason: why.to_owned() });
        }
        drop(inner);
        self.calls.fail_all(id, &CallFailure { code: "ended".into(), message: format!("the session ended: {why}") });
        Some(session)
    }

    /// The cell a new session's answer is kept in for `key`: a retried
    /// request waits for the first one's answer rather than taking a
    /// second device.
    pub fn idempotent(&self, key: &str) -> Arc<OnceCell<Value>> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.idempotent.retain(|_, (_, at)| now.duration_since(*at) < IDEMPOTENCY_KEPT);
        inner.idempotent.entry(key.to_owned()).or_insert_with(|| (Arc::default(), now)).0.clone()
    }

    /// Sends one call to the app of the session's device and waits for the
    /// answer (see [`DeviceCalls::call`]).
    pub async fn call(
        &self,
        session: &Session,
        method: &str,
        params: Option<&Value>,
        timeout: Duration,
        traceparent: String,
    ) -> Result<device_answer::Outcome, CallFailure> {
        self.calls.call(&session.id, &session.grant, method, params, timeout, traceparent).await
    }

    /// Ends session `id` when the owner task says so (its worker went away,
    /// its device was lost, its idle timeout), in a task that ends with the
    /// grant: at that word, or when the owner task lets the grant go.
    pub fn end_when_the_grid_does(self: &Arc<Self>, id: String, mut ended: watch::Receiver<Option<String>>) {
        let registry = Arc::downgrade(self);
        drop(argus_proto::task::spawn("webdriver-session-end", async move {
            loop {
                // A word sent just before the grant was let go still counts.
                let closed = ended.changed().await.is_err();
                let why = ended.borrow_and_update().clone();
                if let Some(why) = why {
                    if let Some(registry) = registry.upgrade() {
                        registry.end(&id, &why);
                    }
                    return;
                }
                if closed {
                    return;
                }
            }
        }));
    }
}
