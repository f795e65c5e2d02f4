//! What the driver tests share: drivers on port 0, bare apps that show every
//! frame, simulated apps, and a proxy whose connections can be cut.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_sim::{Agent, AgentConfig, App, Model};
use argus_worker::driver::{Driver, DriverConfig};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(5);

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub async fn driver(config: DriverConfig) -> Driver {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    Driver::from_listener(listener, config).unwrap()
}

pub fn quick() -> DriverConfig {
    DriverConfig { port: 0, ..DriverConfig::default() }
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A bare app: the test says every frame it sends.
pub struct BareApp {
    pub ws: Socket,
}

impl BareApp {
    pub async fn connect(addr: SocketAddr) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}")).await.unwrap();
        Self { ws }
    }

    /// Connects, reads the driver's auth and answers hello.
    pub async fn attach(addr: SocketAddr) -> (Self, Value) {
        let mut app = Self::connect(addr).await;
        let auth = app.recv().await;
        app.hello().await;
        (app, auth)
    }

    pub async fn hello(&mut self) {
        self.send(json!({"event": "hello", "protocolVersion": 1, "platform": "ios", "native": false, "commands": []}))
            .await;
    }

    pub async fn send(&mut self, value: Value) {
        self.ws.send(Message::text(value.to_string())).await.unwrap();
    }

    pub async fn recv_text(&mut self) -> String {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next()).await.expect("a frame in time") {
                Some(Ok(Message::Text(text))) => return text.to_string(),
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}"),
            }
        }
    }

    pub async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_text().await).unwrap()
    }

    /// Waits until the driver closes this connection; the close reason.
    pub async fn closed(&mut self) -> Option<String> {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next()).await.expect("closed in time") {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| f.reason.to_string()),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    }
}

/// A simulated app running the example shop model.
pub struct Sim {
    pub app: Arc<App>,
    port: u16,
    cancel: CancellationToken,
}

impl Sim {
    pub fn start(port: u16, token: Option<&str>) -> Self {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
        Self::start_with(port, token, Model::load(&path).unwrap())
    }

    /// The shop with one text changed: a device whose app is subtly wrong.
    pub fn start_altered(port: u16, from: &str, to: &str) -> Self {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
        let altered = std::env::temp_dir().join(format!("argus-altered-{}-{port}.yaml", std::process::id()));
        std::fs::write(&altered, std::fs::read_to_string(&path).unwrap().replace(from, to)).unwrap();
        Self::start_with(port, None, Model::load(&altered).unwrap())
    }

    pub fn start_with(port: u16, token: Option<&str>, model: Model) -> Self {
        let app = App::new(model);
        let config = AgentConfig { port, token: token.map(str::to_owned), ..AgentConfig::default() };
        let cancel = CancellationToken::new();
        tokio::spawn(Agent::new(app.clone(), config).run(cancel.clone()));
        Self { app, port, cancel }
    }

    /// The port it dials.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }

    pub async fn traced(&self, method: &str) -> usize {
        let trace = self.app.handle("trace", None).await.unwrap();
        trace["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "command" && e["method"] == method).count()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A TCP proxy in front of a driver; `cut()` drops every connection through
/// it, as a flaky link or a relaunched app would.
pub struct Proxy {
    pub addr: SocketAddr,
    links: Arc<Mutex<Vec<CancellationToken>>>,
    cancel: CancellationToken,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let links: Arc<Mutex<Vec<CancellationToken>>> = Arc::default();
        let cancel = CancellationToken::new();
        let (registry, stop) = (links.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                let link = CancellationToken::new();
                registry.lock().unwrap().push(link.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = link.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Self { addr, links, cancel }
    }

    pub fn cut(&self) {
        for link in self.links.lock().unwrap().drain(..) {
            link.cancel();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.cut();
    }
}

/// Log lines written while `f` runs on this thread (the tests' runtime is
/// single-threaded, so every task's lines land here).
pub fn capture_logs() -> (tracing::subscriber::DefaultGuard, Arc<Mutex<Vec<u8>>>) {
    let buffer: Arc<Mutex<Vec<u8>>> = Arc::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || LogWriter(writer.clone()))
        .finish();
    (tracing::subscriber::set_default(subscriber), buffer)
}

pub fn logs(buffer: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned()
}

pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
