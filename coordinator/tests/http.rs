//! The coordinator's HTTP port over a real socket, with requests written by
//! hand (an HTTP library would refuse to send some of them): bad input gets
//! a 400 that says what was wrong, every API error is JSON, the read token
//! guards everything but `/healthz`, and a client that never finishes its
//! headers is let go.

use std::time::Duration;

use argus_coordinator::store::Store;
use argus_coordinator::{Options, Tokens};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A coordinator on SQLite with its HTTP port; the port's address.
async fn coordinator(read_token: Option<&str>) -> (String, CancellationToken) {
    let path = std::env::temp_dir().join(format!("argus-http-{}-{}.db", std::process::id(), rand::random::<u32>()));
    let store = Store::open(&format!("sqlite:{}", path.display())).await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = http.local_addr().unwrap().to_string();
    let tokens = Tokens { read: read_token.map(Into::into), ..Tokens::default() };
    let options = Options { tokens, http: Some(http), ..Options::default() };
    let cancel = CancellationToken::new();
    tokio::spawn(argus_coordinator::serve_with(grpc, store, options, cancel.clone()));
    (addr, cancel)
}

/// Sends `target` as a GET with `headers`; the status and the body.
async fn get(addr: &str, target: &[u8], headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(format!(" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}\r\n").as_bytes());
    stream.write_all(&request).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.unwrap().unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

fn error_of(body: &str) -> String {
    // Chunked or not, the JSON object is the one line that starts with `{`.
    let json = body.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("not JSON: {body:?}"));
    serde_json::from_str::<serde_json::Value>(json).unwrap()["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn bad_input_gets_a_400_that_says_what_was_wrong_and_api_errors_are_json() {
    let (addr, cancel) = coordinator(None).await;
    let (status, body) = get(&addr, b"/api/v1/runs?branch=a%00b", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's query holds a NUL byte"));
    let (status, body) = get(&addr, b"/api/v1/cases/x%00y?project=p", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's path holds a NUL byte"));
    let (status, body) = get(&addr, b"/api/v1/runs?branch=%ff%fe", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's query is not UTF-8"));
    let (status, body) = get(&addr, b"/api/v1/runs?page=-1", "").await;
    assert_eq!(status, 400);
    assert!(error_of(&body).contains("page"), "{body}");
    let (status, body) = get(&addr, b"/api/v1/flaky?days=-5", "").await;
    assert_eq!(status, 400);
    assert!(error_of(&body).contains("days"), "{body}");
    let (status, body) = get(&addr, b"/api/v1/runs?page=4294967295", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "page: 4294967295 is past the last page (100000 at most)"));
    let (status, body) = get(&addr, b"/api/v1/nothing/here", "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "no page /api/v1/nothing/here"));
    let (status, body) = get(&addr, b"/api/v1/runs/nope", "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "no run nope"));
    // A page, not the API: a plain message, still a 400.
    let (status, body) = get(&addr, b"/?branch=%00", "").await;
    assert_eq!((status, body.trim()), (400, "the request's query holds a NUL byte"));
    cancel.cancel();
}

#[tokio::test]
async fn the_read_token_guards_everything_but_health() {
    let (addr, cancel) = coordinator(Some("r-secret")).await;
    for target in [&b"/"[..], b"/api/v1/runs", b"/metrics", b"/fleet"] {
        let (status, _) = get(&addr, target, "").await;
        assert_eq!(status, 401, "{}", String::from_utf8_lossy(target));
    }
    let (status, body) = get(&addr, b"/api/v1/runs", "authorization: Bearer wrong\r\n").await;
    assert_eq!(status, 401);
    assert!(error_of(&body).starts_with("this dashboard needs its read token"), "{body}");
    let (status, _) = get(&addr, b"/api/v1/runs", "authorization: Bearer r-secret\r\n").await;
    assert_eq!(status, 200);
    // What a browser sends once the user typed the token as the password.
    let (status, _) = get(&addr, b"/", "authorization: Basic dXNlcjpyLXNlY3JldA==\r\n").await;
    assert_eq!(status, 200);
    let (status, body) = get(&addr, b"/healthz", "").await;
    assert_eq!((status, body.trim()), (200, "ok"));
    cancel.cancel();
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_let_go() {
    let (addr, cancel) = coordinator(None).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection was held open");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(14), "closed after {waited:?}");
    cancel.cancel();
}
