//! The simulated app's side of the wire, against a bare WebSocket server
//! playing the driver: handshake, tokens, answers from memory, navigation.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use argus_sim::{Agent, AgentConfig, App, Model};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(5);

struct Sim {
    app: Arc<App>,
    cancel: CancellationToken,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn start_sim(port: u16, token: Option<&str>) -> Sim {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let app = App::new(Model::load(&path).unwrap());
    let config = AgentConfig { port, token: token.map(str::to_owned), ..AgentConfig::default() };
    let cancel = CancellationToken::new();
    tokio::spawn(Agent::new(app.clone(), config).run(cancel.clone()));
    Sim { app, cancel }
}

async fn accept(listener: &TcpListener) -> WebSocketStream<TcpStream> {
    let (stream, _) = tokio::time::timeout(WAIT, listener.accept()).await.expect("the app dials").unwrap();
    tokio_tungstenite::accept_async(stream).await.unwrap()
}

async fn send(ws: &mut WebSocketStream<TcpStream>, value: Value) {
    ws.send(Message::text(value.to_string())).await.unwrap();
}

async fn recv(ws: &mut WebSocketStream<TcpStream>) -> Value {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next()).await.expect("a frame in time").unwrap().unwrap();
        if let Message::Text(text) = frame {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

/// The next answer, skipping the navigation events a press may cause.
async fn reply(ws: &mut WebSocketStream<TcpStream>) -> Value {
    loop {
        let value = recv(ws).await;
        if value.get("event").is_none() {
            return value;
        }
    }
}

async fn silent_for(ws: &mut WebSocketStream<TcpStream>, window: Duration) -> bool {
    tokio::time::timeout(window, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(_))) => return,
                Some(Ok(_)) => continue,
                _ => std::future::pending::<()>().await,
            }
        }
    })
    .await
    .is_err()
}

async fn press_count(app: &Arc<App>) -> usize {
    let trace = app.handle("trace", None).await.unwrap();
    trace["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "command" && e["method"] == "press").count()
}

#[tokio::test]
async fn hello_answers_auth_with_every_field() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _sim = start_sim(listener.local_addr().unwrap().port(), None);
    let mut ws = accept(&listener).await;
    assert!(silent_for(&mut ws, Duration::from_millis(200)).await, "the app waits for auth before it speaks");
    send(&mut ws, json!({"event": "auth", "session": "s1"})).await;
    let hello = recv(&mut ws).await;
    assert_eq!(
        hello,
        json!({
            "event": "hello", "protocolVersion": 1, "agentVersion": "0.2.1", "platform": "ios", "native": false,
            "commands": ["broken", "events", "profile", "screenshot", "seed", "slow", "stores", "traceContext"],
            "route": "Home", "app": {"name": "Shop", "version": "1.4.0"}
        })
    );
    send(&mut ws, json!({"id": 1, "method": "ping"})).await;
    assert_eq!(recv(&mut ws).await["result"]["pong"], true);
}

#[tokio::test]
async fn a_wrong_token_gets_no_hello_and_every_request_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = start_sim(listener.local_addr().unwrap().port(), Some("a"));
    let mut ws = accept(&listener).await;
    // A request before any auth is refused too.
    send(&mut ws, json!({"id": 1, "method": "screen"})).await;
    assert_eq!(
        recv(&mut ws).await,
        json!({"id": 1, "error": {"message": "Not authenticated", "code": "unauthenticated"}})
    );
    send(&mut ws, json!({"event": "auth", "session": "s", "token": "b"})).await;
    assert!(silent_for(&mut ws, Duration::from_millis(300)).await, "no hello for a wrong token");
    send(&mut ws, json!({"id": 2, "method": "press", "params": {"testId": "login"}})).await;
    assert_eq!(
        recv(&mut ws).await,
        json!({"id": 2, "error": {"message": "Not authenticated", "code": "unauthenticated"}})
    );
    assert_eq!(press_count(&sim.app).await, 0);

    send(&mut ws, json!({"event": "auth", "session": "s", "token": "a"})).await;
    assert_eq!(recv(&mut ws).await["event"], "hello");
}

#[tokio::test]
async fn an_empty_token_keeps_the_agent_off() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _sim = start_sim(listener.local_addr().unwrap().port(), Some(""));
    let dialed = tokio::time::timeout(Duration::from_millis(600), listener.accept()).await;
    assert!(dialed.is_err(), "the app never opens a socket");
}

#[tokio::test]
async fn a_resent_request_is_answered_from_memory_and_a_new_session_clears_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = start_sim(listener.local_addr().unwrap().port(), None);
    let mut ws = accept(&listener).await;
    send(&mut ws, json!({"event": "auth", "session": "s1"})).await;
    recv(&mut ws).await;
    let press = json!({"id": 5, "method": "press", "params": {"testId": "login"}});
    send(&mut ws, press.clone()).await;
    let first = reply(&mut ws).await;
    assert_eq!(first["id"], 5);
    send(&mut ws, press.clone()).await;
    assert_eq!(reply(&mut ws).await, first, "the same answer");
    assert_eq!(press_count(&sim.app).await, 1, "no second tap");

    // The same id while the first run is still going runs a second time, as
    // the agent does: it remembers an answer only once the work is done.
    send(&mut ws, json!({"id": 6, "method": "press", "params": {"testId": "email"}})).await;
    send(&mut ws, json!({"id": 6, "method": "press", "params": {"testId": "email"}})).await;
    let (a, b) = (reply(&mut ws).await, reply(&mut ws).await);
    assert_eq!((a["id"].clone(), b["id"].clone()), (json!(6), json!(6)));
    assert_eq!(press_count(&sim.app).await, 3, "two taps for one id");

    send(&mut ws, json!({"event": "auth", "session": "s2"})).await;
    assert_eq!(recv(&mut ws).await["event"], "hello");
    send(&mut ws, json!({"id": 5, "method": "press", "params": {"testId": "password"}})).await;
    assert_eq!(reply(&mut ws).await["result"]["element"]["testId"], "password");
    assert_eq!(press_count(&sim.app).await, 4, "a new session runs id 5 again");
}

#[tokio::test]
async fn memory_keeps_the_last_64_answers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = start_sim(listener.local_addr().unwrap().port(), None);
    let mut ws = accept(&listener).await;
    send(&mut ws, json!({"event": "auth", "session": "s1"})).await;
    recv(&mut ws).await;
    send(&mut ws, json!({"id": 1, "method": "dismissKeyboard"})).await;
    recv(&mut ws).await;
    for id in 2..=65 {
        send(&mut ws, json!({"id": id, "method": "ping"})).await;
        recv(&mut ws).await;
    }
    let count = |app: Arc<App>| async move {
        let trace = app.handle("trace", None).await.unwrap();
        trace["events"].as_array().unwrap().iter().filter(|e| e["method"] == "dismissKeyboard").count()
    };
    assert_eq!(count(sim.app.clone()).await, 1);
    // Id 1 fell out of memory after 64 more answers: it runs again.
    send(&mut ws, json!({"id": 1, "method": "dismissKeyboard"})).await;
    recv(&mut ws).await;
    assert_eq!(count(sim.app.clone()).await, 2);
}

#[tokio::test]
async fn navigation_events_follow_the_route() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _sim = start_sim(listener.local_addr().unwrap().port(), None);
    let mut ws = accept(&listener).await;
    send(&mut ws, json!({"event": "auth", "session": "s1"})).await;
    recv(&mut ws).await;
    send(&mut ws, json!({"id": 1, "method": "navigate", "params": {"name": "Feed"}})).await;
    let mut got = [recv(&mut ws).await, recv(&mut ws).await];
    got.sort_by_key(|v| v.get("event").is_none());
    assert_eq!(got[0], json!({"event": "navigation", "route": "Feed"}));
    assert_eq!(got[1], json!({"id": 1, "result": {"route": "Feed"}}));
}

#[tokio::test]
async fn malformed_frames_from_a_driver_are_ignored() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _sim = start_sim(listener.local_addr().unwrap().port(), None);
    let mut ws = accept(&listener).await;
    ws.send(Message::text("{not json")).await.unwrap();
    send(&mut ws, json!({"event": "auth"})).await;
    send(&mut ws, json!({"event": "auth", "session": "s1"})).await;
    assert_eq!(recv(&mut ws).await["event"], "hello");
}

#[tokio::test]
async fn the_app_dials_again_soon_after_a_drop() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _sim = start_sim(listener.local_addr().unwrap().port(), None);
    let ws = accept(&listener).await;
    drop(ws);
    let started = std::time::Instant::now();
    let _again = accept(&listener).await;
    assert!(started.elapsed() < Duration::from_millis(1_000), "redialed in {:?}", started.elapsed());
}
