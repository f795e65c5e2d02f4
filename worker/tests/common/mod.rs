//! What the driver tests share: drivers on port 0 and bare apps that show
//! every frame; the rest comes from the test kit.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::net::SocketAddr;
use std::time::Duration;

#[allow(unused_imports)] // Each test file takes what it needs.
pub use argus_testkit::{Proxy, Sim, capture_logs, free_port, logs};
use argus_worker::driver::{Driver, DriverConfig};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const WAIT: Duration = Duration::from_secs(5);

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

    /// Connects, reads the driver's auth, answers hello and the driver's
    /// read of its (empty) trace.
    pub async fn attach(addr: SocketAddr) -> (Self, Value) {
        let mut app = Self::connect(addr).await;
        let auth = app.recv().await;
        app.hello().await;
        app.answer_probe().await;
        (app, auth)
    }

    /// Answers the driver's read of the app's trace after a hello, as an
    /// app that has traced nothing yet.
    pub async fn answer_probe(&mut self) {
        let probe = self.recv().await;
        assert_eq!(probe["method"], "trace", "the driver reads the trace of an app that said hello: {probe}");
        self.send(json!({"id": probe["id"], "result": {"last": 0, "events": []}})).await;
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
