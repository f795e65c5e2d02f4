//! The agent's side of the wire: dial the driver, wait for `auth`, answer
//! `hello`, run requests (several at once, answered as each finishes), and
//! answer a request it has already run from memory instead of running it
//! again. As the agent does, an answer is remembered only once the work is
//! done: a request resent while its first run is still going runs again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use argus_proto::wire::{
    DriverMessage, ErrorBody, Hello, Navigation, PROTOCOL_VERSION, Request, Response, hello_frame, navigation_frame,
};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::app::App;
use crate::backoff::{Backoff, DEFAULT_MAX};

/// How many answers the agent remembers per session.
pub const REMEMBERED_ANSWERS: usize = 64;

#[derive(Clone)]
pub struct AgentConfig {
    /// Where the driver listens: `localhost` from an iOS simulator,
    /// `10.0.2.2` from an Android emulator.
    pub host: String,
    pub port: u16,
    /// `Some("")` keeps the agent off: it never dials.
    pub token: Option<String>,
    /// The longest wait between dials once the eager phase is over.
    pub reconnect_max: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self { host: "127.0.0.1".into(), port: 8123, token: None, reconnect_max: DEFAULT_MAX }
    }
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("reconnect_max", &self.reconnect_max)
            .finish()
    }
}

type Sink = Arc<tokio::sync::Mutex<SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>>>;

/// Answers by `session:id`, oldest first.
#[derive(Default)]
struct Memory {
    session: Option<String>,
    answers: VecDeque<(String, Utf8Bytes)>,
}

pub struct Agent {
    app: Arc<App>,
    config: AgentConfig,
    memory: Mutex<Memory>,
}

impl Agent {
    pub fn new(app: Arc<App>, config: AgentConfig) -> Arc<Self> {
        Arc::new(Self { app, config, memory: Mutex::new(Memory::default()) })
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Dials until `cancel`, serving each connection it gets.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if self.config.token.as_deref() == Some("") {
            warn!("the agent's token option is empty: the agent stays off and never dials");
            cancel.cancelled().await;
            return;
        }
        let url = format!("ws://{}:{}", self.config.host, self.config.port);
        info!(%url, "agent dialing");
        let mut backoff = Backoff::new(self.config.reconnect_max, Instant::now());
        loop {
            // A small read buffer: tungstenite zeroes it before each read.
            let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
            let dial = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true);
            let dialed = tokio::select! {
                _ = cancel.cancelled() => return,
                dialed = dial => dialed,
            };
            // Nobody listening is normal: dial again, quietly.
            if let Ok((socket, _)) = dialed {
                debug!(%url, "connected");
                self.serve(socket, &cancel).await;
                if cancel.is_cancelled() {
                    return;
                }
                debug!(%url, "connection dropped");
                backoff.reset(Instant::now());
            }
            let delay = backoff.next_delay(Instant::now());
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn hello(&self) -> Hello {
        let file = &self.app.model().file;
        Hello {
            protocol_version: PROTOCOL_VERSION,
            agent_version: Some(file.agent_version.clone()),
            platform: file.platform.clone(),
            native: file.native,
            commands: self.app.model().commands(),
            route: self.app.current_route(),
            app: file.app.clone(),
            extra: Default::default(),
        }
    }

    async fn serve(self: &Arc<Self>, socket: WebSocketStream<MaybeTlsStream<TcpStream>>, cancel: &CancellationToken) {
        let (sink, mut frames) = socket.split();
        let sink: Sink = Arc::new(tokio::sync::Mutex::new(sink));
        // Without a token the agent answers from the start; with one, only
        // after an auth that carries it.
        let mut authenticated = self.config.token.is_none();
        let mut session = String::new();
        let mut said_hello = false;
        let mut routes = self.app.routes();
        routes.mark_unchanged();
        let tells_routes = self.app.model().file.navigation_events;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = sink.lock().await.close().await;
                    return;
                }
                changed = routes.changed(), if said_hello && tells_routes => {
                    if changed.is_err() {
                        return;
                    }
                    let route = routes.borrow_and_update().clone();
                    send(&sink, navigation_frame(&Navigation { route }).into()).await;
                }
                frame = frames.next() => {
                    let text = match frame {
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                        Some(Ok(_)) => continue,
                    };
                    match DriverMessage::parse(&text) {
                        Ok(DriverMessage::Auth(auth)) => {
                            self.adopt_session(&auth.session);
                            session = auth.session;
                            authenticated = match &self.config.token {
                                None => true,
                                Some(token) => auth.token.as_deref() == Some(token.as_str()),
                            };
                            if authenticated {
                                send(&sink, hello_frame(&self.hello()).into()).await;
                                said_hello = true;
                            } else {
                                // A wrong token gets no answer at all.
                                warn!("the driver's token does not match the app's; staying silent");
                            }
                        }
                        Ok(DriverMessage::Request(request)) if !authenticated => {
                            let refusal = Response { id: request.id, outcome: Err(ErrorBody::unauthenticated()) };
                            send(&sink, encode(&refusal)).await;
                        }
                        Ok(DriverMessage::Request(request)) => self.request(request, &session, &sink).await,
                        Ok(DriverMessage::OtherEvent(event)) => debug!(event, "unknown event from the driver ignored"),
                        Err(error) => warn!(%error, "malformed message from the driver ignored"),
                    }
                }
            }
        }
    }

    /// A new session clears the answers of the old one.
    fn adopt_session(&self, session: &str) {
        let mut memory = self.memory();
        if memory.session.as_deref() != Some(session) {
            memory.session = Some(session.to_owned());
            memory.answers.clear();
        }
    }

    async fn request(self: &Arc<Self>, request: Request, session: &str, sink: &Sink) {
        let key = format!("{session}:{}", request.id);
        let remembered = self.memory().answers.iter().find(|(k, _)| *k == key).map(|(_, answer)| answer.clone());
        if let Some(answer) = remembered {
            debug!(id = request.id, "answered from memory");
            send(sink, answer).await;
            return;
        }
        if App::answers_at_once(&request.method) {
            let answer = self.execute(request).await;
            self.remember(key, answer.clone());
            send(sink, answer).await;
            return;
        }
        let agent = self.clone();
        let sink = sink.clone();
        argus_proto::task::spawn("answer a call", async move {
            let answer = agent.execute(request).await;
            agent.remember(key, answer.clone());
            // If this connection is gone, the driver resends after it
            // reconnects and gets the answer from memory.
            send(&sink, answer).await;
        });
    }

    async fn execute(&self, request: Request) -> Utf8Bytes {
        let outcome = self.app.handle(&request.method, request.params).await;
        encode(&Response { id: request.id, outcome })
    }

    fn remember(&self, key: String, answer: Utf8Bytes) {
        let mut memory = self.memory();
        if memory.answers.len() == REMEMBERED_ANSWERS {
            memory.answers.pop_front();
        }
        memory.answers.push_back((key, answer));
    }
}

fn encode(response: &Response) -> Utf8Bytes {
    serde_json::to_string(response).expect("a response always serialises").into()
}

async fn send(sink: &Sink, frame: Utf8Bytes) {
    if let Err(error) = sink.lock().await.send(Message::Text(frame)).await {
        debug!(%error, "send failed; the connection is going");
    }
}
