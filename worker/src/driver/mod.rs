//! The lynkeus driver: a WebSocket server on one port that one app dials.
//!
//! It plays lynkeus' `AgentServer` role (spec §2.2): `auth` first on every
//! connection, `hello` before any request, many calls in flight matched by id,
//! the newest connection replaces the older, and calls in flight survive a
//! reconnect: they wait for a grace period and are resent byte for byte, with
//! the same id, after the new `hello` (the app answers a resend it already ran
//! from its memory, so a press is never repeated).
//!
//! One task accepts connections; one task per connection reads frames and
//! keeps it alive with pings. A caller writes its own request to the socket,
//! so a call costs one task hop (the reader handing the answer back).

mod connection;
mod device;
mod error;
mod hello;
mod identity;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use argus_proto::wire::{Auth, Hello, Request, auth_frame};
use futures_util::SinkExt;
use futures_util::stream::SplitSink;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, info_span, warn};

pub use error::{CallError, ListenError};
pub use identity::{AppChange, AppIdentity};

use identity::Fingerprint;

/// lynkeus' default driver port.
pub const DEFAULT_PORT: u16 = 8123;
/// lynkeus' default wait for an app to attach.
pub const DEFAULT_ATTACH_TIMEOUT: Duration = Duration::from_millis(15_000);
/// lynkeus' default per-call timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_millis(20_000);

#[derive(Clone)]
pub struct DriverConfig {
    /// Loopback by default: an iOS simulator shares it, and an Android
    /// emulator reaches it as 10.0.2.2.
    pub host: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    /// Must match the app's token; never logged.
    pub token: Option<String>,
    /// How long calls in flight wait for the app to come back.
    pub reconnect_grace: Duration,
    /// A client that has not finished the WebSocket handshake by then is dropped.
    pub handshake_timeout: Duration,
    /// An app that has not answered `auth` with `hello` by then is reported
    /// (its token is likely wrong); it stays connected, and gets no calls.
    pub auth_timeout: Duration,
    /// The largest message (and frame) accepted from an app.
    pub max_message_bytes: usize,
    /// How often a ping goes to the app.
    pub ping_interval: Duration,
    /// An app silent for longer (not even a pong) is taken for dead. An app
    /// that dies is noticed within `ping_interval + liveness_timeout`.
    pub liveness_timeout: Duration,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            token: None,
            reconnect_grace: Duration::from_millis(2_500),
            handshake_timeout: Duration::from_secs(5),
            auth_timeout: Duration::from_secs(5),
            max_message_bytes: 16 << 20,
            ping_interval: Duration::from_secs(5),
            liveness_timeout: Duration::from_secs(10),
        }
    }
}

impl std::fmt::Debug for DriverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("reconnect_grace", &self.reconnect_grace)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("auth_timeout", &self.auth_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("ping_interval", &self.ping_interval)
            .field("liveness_timeout", &self.liveness_timeout)
            .finish()
    }
}

/// What a driver observes about its app.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverEvent {
    Hello(Arc<Hello>),
    Navigation(Option<String>),
    /// The attached app's connection dropped (not when a newer one replaced it).
    Disconnected,
    /// What the driver can tell of an app that does not attach changed
    /// ([`Driver::problem`]).
    Problem,
}

type Sink = Arc<tokio::sync::Mutex<SplitSink<WebSocketStream<TcpStream>, Message>>>;

/// The connection currently serving, if any.
struct Link {
    id: u64,
    sink: Sink,
    cancel: CancellationToken,
}

/// A connection whose app has not said hello yet.
struct Candidate {
    link: Link,
    /// It has been open `auth_timeout` without answering auth.
    silent: bool,
}

/// How long a driver asks a process that said hello for its trace before
/// it takes the process for the one it had (and resends the calls).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Where the driver's own reads are numbered from: 2^52, far above any
/// call's id and still exact as a JavaScript number.
const PROBE_IDS: u64 = 1 << 52;
/// Reconnects within this window name the app's link flaky on the device.
const FLAKY_WINDOW: Duration = Duration::from_secs(60);
/// Reconnects within [`FLAKY_WINDOW`] from which the link is named flaky.
const FLAKY_RECONNECTS: usize = 3;

struct Pending {
    /// The exact frame sent, resent unchanged after a reconnect.
    frame: Utf8Bytes,
    reply: oneshot::Sender<Result<Value, CallError>>,
}

#[derive(Default)]
struct State {
    /// The connection whose app said hello: the only one calls go to.
    link: Option<Link>,
    /// Connections that have not said hello yet (their app is starting, or
    /// its token is wrong). The newest to say hello replaces `link`; until
    /// then none of them gets a call.
    candidates: HashMap<u64, Candidate>,
    /// The connection whose app just said hello, while the driver tells
    /// which process it is ([`identity`]): calls wait, as in a reconnect.
    identifying: Option<Link>,
    /// When the last connection that never answered auth closed: an app
    /// with a wrong token redials, and is still named for a while.
    silent_left_at: Option<tokio::time::Instant>,
    /// The app processes seen on the port, and the newest trace event of
    /// the current one.
    identity: AppIdentity,
    fingerprint: Option<Fingerprint>,
    /// When the current process reconnected lately.
    reconnected_at: VecDeque<tokio::time::Instant>,
    /// The driver's own reads of a process that said hello.
    probes: HashMap<u64, oneshot::Sender<Result<Value, CallError>>>,
    /// The generation of the grace timer running since the link dropped.
    grace: Option<u64>,
    generation: u64,
    pending: HashMap<u64, Pending>,
    closed: bool,
    next_link: u64,
}

struct Shared {
    config: DriverConfig,
    addr: SocketAddr,
    session: String,
    auth: Utf8Bytes,
    next_id: AtomicU64,
    next_probe: AtomicU64,
    state: Mutex<State>,
    hello: watch::Sender<Option<Arc<Hello>>>,
    events: broadcast::Sender<DriverEvent>,
    tracker: TaskTracker,
    /// Cancelled when the driver stops: ends every task it started.
    stop: CancellationToken,
}

/// A running driver. Dropping it stops it; [`Driver::close`] also fails the
/// calls in flight and waits for its tasks.
pub struct Driver {
    shared: Arc<Shared>,
    cancel: CancellationToken,
}

impl Driver {
    /// Binds `config.host:config.port` and starts accepting apps.
    pub async fn listen(config: DriverConfig) -> Result<Self, ListenError> {
        let listener = TcpListener::bind((config.host.as_str(), config.port)).await.map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                ListenError::PortInUse { host: config.host.clone(), port: config.port }
            } else {
                ListenError::Io { host: config.host.clone(), port: config.port, source }
            }
        })?;
        Self::from_listener(listener, config)
    }

    /// Serves on a listener bound by the caller (port 0 in tests).
    pub fn from_listener(listener: TcpListener, config: DriverConfig) -> Result<Self, ListenError> {
        let addr = listener.local_addr().map_err(|source| ListenError::Io {
            host: config.host.clone(),
            port: config.port,
            source,
        })?;
        let session = new_session();
        let auth = auth_frame(&Auth { session: session.clone(), token: config.token.clone() }).into();
        let shared = Arc::new(Shared {
            config,
            addr,
            session,
            auth,
            next_id: AtomicU64::new(1),
            next_probe: AtomicU64::new(1),
            state: Mutex::new(State::default()),
            hello: watch::channel(None).0,
            events: broadcast::channel(256).0,
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
        });
        let cancel = shared.stop.clone();
        let span = info_span!("driver", port = addr.port());
        shared.tracker.spawn(accept_loop(shared.clone(), listener, cancel.clone()).instrument(span));
        info!(%addr, "driver listening");
        Ok(Self { shared, cancel })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The session string sent in every `auth`.
    pub fn session(&self) -> &str {
        &self.shared.session
    }

    /// An app is attached: its socket is open and it said `hello`.
    pub fn connected(&self) -> bool {
        self.shared.lock().link.is_some()
    }

    /// The attached app's `hello`.
    pub fn hello(&self) -> Option<Arc<Hello>> {
        self.shared.hello.borrow().clone()
    }

    /// What is wrong with the app's link, when the driver can tell,
    /// whether or not an app is attached: an app on the port that never
    /// answered auth (a wrong token?), an app that keeps reconnecting.
    pub fn problem(&self) -> Option<String> {
        let mut state = self.shared.lock();
        let now = tokio::time::Instant::now();
        let mut problems = Vec::new();
        let silent_open = state.candidates.values().any(|c| c.silent);
        let lingering = state.silent_left_at.is_some_and(|at| now - at < self.shared.config.auth_timeout * 2);
        if silent_open || lingering {
            problems.push(format!(
                "an app connected on {} but never answered auth (wrong token?)",
                self.shared.addr.port()
            ));
        }
        while state.reconnected_at.front().is_some_and(|at| now - *at > FLAKY_WINDOW) {
            state.reconnected_at.pop_front();
        }
        let reconnects = state.reconnected_at.len();
        if reconnects >= FLAKY_RECONNECTS {
            problems.push(format!("the app reconnected {reconnects} times in the last minute (a flaky link)"));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// The app processes seen on the port so far: an attempt compares the
    /// one before its first step with the one after its last.
    pub fn identity(&self) -> AppIdentity {
        self.shared.lock().identity
    }

    /// `hello`, navigation and disconnect events from now on.
    pub fn events(&self) -> broadcast::Receiver<DriverEvent> {
        self.shared.events.subscribe()
    }

    /// Resolves with the app's `hello`, at once if it is attached.
    pub async fn wait_for_app(&self, timeout: Duration) -> Result<Arc<Hello>, CallError> {
        let mut hello = self.shared.hello.subscribe();
        let waited = tokio::time::timeout(timeout, hello.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(hello)) => Ok(hello.clone().expect("waited for Some")),
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => {
                let silent_app = self.shared.lock().candidates.values().any(|c| c.silent);
                Err(CallError::AttachTimeout { addr: self.shared.addr, waited: timeout, silent_app })
            }
        }
    }

    /// Sends `method` and resolves with the app's result.
    ///
    /// Fails at once when no app is connected and none is awaited. While the
    /// app reconnects the call waits and is sent after `hello`; its deadline
    /// keeps running.
    pub async fn call(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("call", method, id);
        let started = std::time::Instant::now();
        let answer = self.shared.call(id, method, params, timeout).instrument(span).await;
        crate::metrics::call(method, started.elapsed());
        answer
    }

    /// Tasks still running: the accept loop, connections, grace timers.
    pub fn task_count(&self) -> usize {
        self.shared.tracker.len()
    }

    /// Stops listening, fails the calls in flight with `Agent server closed`,
    /// closes the app's socket and waits (briefly) for every task to end.
    pub async fn close(&self) {
        self.cancel.cancel();
        let failed = {
            let mut state = self.shared.lock();
            state.closed = true;
            state.grace = None;
            for link in state.link.take().into_iter().chain(state.identifying.take()) {
                link.cancel.cancel();
            }
            for (_, candidate) in state.candidates.drain() {
                candidate.link.cancel.cancel();
            }
            for (_, probe) in state.probes.drain() {
                let _ = probe.send(Err(CallError::Closed));
            }
            std::mem::take(&mut state.pending)
        };
        for (_, pending) in failed {
            let _ = pending.reply.send(Err(CallError::Closed));
        }
        self.shared.hello.send_replace(None);
        self.shared.tracker.close();
        if tokio::time::timeout(Duration::from_secs(2), self.shared.tracker.wait()).await.is_err() {
            debug!("driver tasks still ending after 2s");
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.cancel.cancel();
        let mut state = self.shared.lock();
        for link in state.link.take().into_iter().chain(state.identifying.take()) {
            link.cancel.cancel();
        }
        for (_, candidate) in state.candidates.drain() {
            candidate.link.cancel.cancel();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half-updated in
        // a way that matters more than stopping the driver would.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn call(
        self: &Arc<Self>,
        id: u64,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let frame = request_frame(id, method, params);
        let (reply, answer) = oneshot::channel();
        let sink = {
            let mut state = self.lock();
            if state.closed {
                return Err(CallError::Closed);
            }
            // Only an app that said hello gets calls: a connection that has
            // not (an app still starting, or one whose token is wrong, which
            // would answer `unauthenticated`) is not the device's app yet.
            // With none attached but a reconnect awaited, or a connection
            // that may yet say hello, the request waits for the next hello.
            let sink = match &state.link {
                Some(link) => Some(link.sink.clone()),
                None if state.grace.is_some() || state.identifying.is_some() || !state.candidates.is_empty() => None,
                None => return Err(CallError::NoApp { addr: self.addr }),
            };
            state.pending.insert(id, Pending { frame: frame.clone(), reply });
            sink
        };
        let _forget = ForgetOnDrop { shared: self, id };
        if let Some(sink) = sink {
            // A failed write means the socket is going; the reader notices,
            // and the request is resent after the app's next hello.
            if let Err(error) = sink.lock().await.send(Message::Text(frame)).await {
                debug!(%error, "write failed; the call waits for a reconnect");
            }
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => Err(CallError::Timeout { method: method.to_owned(), after: timeout }),
        }
    }

    /// A new connection waits for its app's hello beside the current one.
    fn attach(&self, sink: Sink, cancel: CancellationToken) -> Option<u64> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.next_link += 1;
        let id = state.next_link;
        state.candidates.insert(id, Candidate { link: Link { id, sink, cancel }, silent: false });
        Some(id)
    }

    /// `link` connected `auth_timeout` ago and has not said hello: if it is
    /// still waiting, that is what the device's app problem is now.
    fn silent(&self, link: u64) {
        let mut state = self.lock();
        let Some(candidate) = state.candidates.get_mut(&link) else {
            return;
        };
        candidate.silent = true;
        let attached = state.link.is_some();
        drop(state);
        warn!(
            link,
            attached,
            "an app connected on {} but never answered auth (wrong token?); it gets no calls",
            self.addr.port()
        );
        let _ = self.events.send(DriverEvent::Problem);
    }

    fn answered(&self, id: u64, outcome: Result<Value, CallError>) {
        let (pending, probe) = {
            let mut state = self.lock();
            match state.pending.remove(&id) {
                Some(pending) => (Some(pending), None),
                None => (None, state.probes.remove(&id)),
            }
        };
        match (pending, probe) {
            (Some(pending), _) => {
                let _ = pending.reply.send(outcome);
            }
            (None, Some(probe)) => {
                let _ = probe.send(outcome);
            }
            (None, None) => debug!(id, "answer for an unknown id dropped"),
        }
    }

    /// The connection `link` ended. When it was the current one, calls in
    /// flight wait `reconnect_grace` for the app to come back.
    fn detached(self: &Arc<Self>, link: u64) {
        let mut state = self.lock();
        if let Some(candidate) = state.candidates.remove(&link) {
            // It never said hello: the attached app, if any, goes on.
            if candidate.silent {
                state.silent_left_at = Some(tokio::time::Instant::now());
            }
            return;
        }
        if state.identifying.as_ref().is_some_and(|l| l.id == link) {
            state.identifying = None;
        } else if state.link.as_ref().is_some_and(|l| l.id == link) {
            state.link = None;
        } else {
            return;
        }
        if state.closed {
            return;
        }
        state.generation += 1;
        let generation = state.generation;
        state.grace = Some(generation);
        let waiting = state.pending.len();
        drop(state);
        self.hello.send_replace(None);
        let _ = self.events.send(DriverEvent::Disconnected);
        info!(waiting, grace_ms = self.config.reconnect_grace.as_millis() as u64, "app disconnected");
        let shared = self.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = shared.stop.cancelled() => return,
                _ = tokio::time::sleep(shared.config.reconnect_grace) => {}
            }
            let failed = {
                let mut state = shared.lock();
                if state.grace != Some(generation) {
                    return;
                }
                state.grace = None;
                std::mem::take(&mut state.pending)
            };
            if !failed.is_empty() {
                info!(failed = failed.len(), "app did not come back within the grace period");
            }
            for (_, pending) in failed {
                let _ = pending.reply.send(Err(CallError::Disconnected));
            }
        });
    }
}

/// Removes a call's entry when the call ends, however it ends (answered,
/// timed out, or its future dropped).
struct ForgetOnDrop<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.id);
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let span = info_span!("app", %peer);
                    shared
                        .tracker
                        .spawn(connection::serve(shared.clone(), stream, cancel.child_token()).instrument(span));
                }
                Err(error) => {
                    // Out of descriptors and the like: pause instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    debug!("driver stopped listening");
}

/// A request as the frame sent (and resent) to the app.
fn request_frame(id: u64, method: &str, params: Option<Value>) -> Utf8Bytes {
    let request = Request { id, method: method.to_owned(), params };
    // Plain data (a string and JSON values): it always serialises.
    serde_json::to_string(&request).expect("a request always serialises").into()
}

/// Random per driver: the app tells a reconnect from a new driver by it.
fn new_session() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..12).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_random_and_plain() {
        let a = new_session();
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(a, new_session());
    }

    #[test]
    fn the_token_is_never_printed() {
        let config = DriverConfig { token: Some("hunter2".into()), ..DriverConfig::default() };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
