//! Bad input from apps: each is logged clearly, answered by closing that
//! connection (or ignored where harmless), and the driver keeps serving.
//! Single-threaded runtimes, so that every task's log lines are captured.

mod common;

use std::time::Duration;

use argus_worker::driver::{Driver, DriverConfig};
use common::{BareApp, WAIT, capture_logs, driver, logs, quick};
use futures_util::SinkExt;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

/// After the bad input, a new app attaches and a call goes through, and
/// closing the driver leaves no task behind.
async fn still_serves(driver: &Driver) {
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let (answer, _) = tokio::join!(driver.call("ping", None, WAIT), async {
        let request = app.recv().await;
        app.send(json!({"id": request["id"], "result": "pong"})).await;
    });
    assert_eq!(answer.unwrap(), "pong");
    driver.close().await;
    assert_eq!(driver.task_count(), 0, "no task leaked");
}

#[tokio::test]
async fn invalid_json_closes_that_connection() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    app.ws.send(Message::text("{\"id\": 1, oops")).await.unwrap();
    assert_eq!(app.closed().await.as_deref(), Some("malformed message"));
    assert!(logs(&buffer).contains("malformed message from the app; closing its connection"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_message_that_is_not_a_protocol_message_closes_that_connection() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    app.send(json!({"hello": "world"})).await;
    assert_eq!(app.closed().await.as_deref(), Some("malformed message"));
    assert!(logs(&buffer).contains("neither an event nor a message with a numeric id"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_frame_over_the_limit_closes_that_connection() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(DriverConfig { max_message_bytes: 1024, ..quick() }).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    let big = format!(r#"{{"id":1,"result":"{}"}}"#, "x".repeat(4096));
    app.ws.send(Message::text(big)).await.unwrap();
    assert_eq!(app.closed().await.as_deref(), Some("bad frame"));
    assert!(logs(&buffer).contains("bad frame from the app; closing its connection"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn invalid_utf8_closes_that_connection() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    app.ws.send(Message::Frame(frame)).await.unwrap();
    app.closed().await;
    assert!(logs(&buffer).contains("closing its connection"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_binary_frame_closes_that_connection() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    app.ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(app.closed().await.as_deref(), Some("binary frames are not part of the protocol"));
    assert!(logs(&buffer).contains("binary frame from the app"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn an_answer_for_an_unknown_id_is_dropped_and_the_connection_kept() {
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    app.send(json!({"id": 999, "result": "stray"})).await;
    let (answer, _) = tokio::join!(driver.call("ping", None, WAIT), async {
        let request = app.recv().await;
        app.send(json!({"id": request["id"], "result": "pong"})).await;
    });
    assert_eq!(answer.unwrap(), "pong", "the same connection still serves");
}

#[tokio::test]
async fn events_before_hello_do_not_attach_the_app() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let mut events = driver.events();
    let mut app = BareApp::connect(driver.local_addr()).await;
    app.send(json!({"event": "navigation", "route": "Early"})).await;
    app.send(json!({"event": "telemetry", "data": 1})).await;
    let _auth = app.recv().await;
    assert!(matches!(events.recv().await.unwrap(), argus_worker::driver::DriverEvent::Navigation(_)));
    assert!(!driver.connected());
    assert!(driver.wait_for_app(Duration::from_millis(100)).await.is_err());
    app.hello().await;
    driver.wait_for_app(WAIT).await.unwrap();
    let _ = logs(&buffer);
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_second_app_on_the_same_port_replaces_the_first_with_a_log_line() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let (mut first, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let (_second, _) = BareApp::attach(driver.local_addr()).await;
    assert_eq!(first.closed().await.as_deref(), Some("replaced by a newer connection"));
    assert!(logs(&buffer).contains("a newer connection replaces the older one"), "{}", logs(&buffer));
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_client_that_never_finishes_the_handshake_is_dropped() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(DriverConfig { handshake_timeout: Duration::from_millis(200), ..quick() }).await;
    let mut stalled = tokio::net::TcpStream::connect(driver.local_addr()).await.unwrap();
    // Meanwhile a real app attaches and is served.
    let (_app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, stalled.read(&mut byte)).await.expect("dropped in time");
    assert!(matches!(read, Ok(0) | Err(_)), "the driver closed the socket");
    assert!(logs(&buffer).contains("did not finish the websocket handshake in time"), "{}", logs(&buffer));
    assert!(driver.connected(), "the real app is unaffected");
    still_serves(&driver).await;
}

#[tokio::test]
async fn a_plain_http_request_is_dropped() {
    let (_guard, buffer) = capture_logs();
    let driver = driver(quick()).await;
    let mut stream = tokio::net::TcpStream::connect(driver.local_addr()).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut reply)).await;
    assert!(logs(&buffer).contains("websocket handshake failed"), "{}", logs(&buffer));
    still_serves(&driver).await;
}
