//! The coordinator's HTTP port over a real socket, with requests written by
//! hand (an HTTP library would refuse to send some of them): bad input gets
//! a 400 that says what was wrong, every API error is JSON, the read token
//! guards everything but `/healthz`, and a client that never finishes its
//! headers is let go.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::time::Duration;

use argus_coordinator::{Options, Tokens};
use argus_testkit::{Grid, GridOptions, http_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A coordinator on SQLite with its HTTP port; the port's address, the
/// grid, and the folder of its files (removed when dropped).
async fn coordinator(read_token: Option<&str>) -> (String, Grid, tempfile::TempDir) {
    coordinator_with(Tokens { read: read_token.map(Into::into), ..Tokens::default() }).await
}

async fn coordinator_with(tokens: Tokens) -> (String, Grid, tempfile::TempDir) {
    let files = tempfile::Builder::new().prefix("argus-http-files").tempdir().unwrap();
    let artifacts = argus_store::artifacts::DirStore::open(files.path().to_owned()).unwrap();
    let coordinator = Options { tokens, artifacts: Some(std::sync::Arc::new(artifacts)), ..Options::default() };
    let grid = Grid::serve(GridOptions { http: true, coordinator, ..GridOptions::default() }).await;
    (grid.http().to_string(), grid, files)
}

fn error_of(body: &str) -> String {
    // Chunked or not, the JSON object is the one line that starts with `{`.
    let json = body.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("not JSON: {body:?}"));
    serde_json::from_str::<serde_json::Value>(json).unwrap()["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn bad_input_gets_a_400_that_says_what_was_wrong_and_api_errors_are_json() {
    let (addr, grid, _files) = coordinator(None).await;
    let (status, body) = http_request(&addr, b"/api/v1/runs?branch=a%00b", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's query holds a NUL byte"));
    let (status, body) = http_request(&addr, b"/api/v1/cases/x%00y?project=p", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's path holds a NUL byte"));
    let (status, body) = http_request(&addr, b"/api/v1/runs?branch=%ff%fe", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "the request's query is not UTF-8"));
    let (status, body) = http_request(&addr, b"/api/v1/runs?page=-1", "").await;
    assert_eq!(status, 400);
    assert!(error_of(&body).contains("page"), "{body}");
    let (status, body) = http_request(&addr, b"/api/v1/flaky?days=-5", "").await;
    assert_eq!(status, 400);
    assert!(error_of(&body).contains("days"), "{body}");
    let (status, body) = http_request(&addr, b"/api/v1/runs?page=4294967295", "").await;
    assert_eq!((status, error_of(&body).as_str()), (400, "page: 4294967295 is past the last page (100000 at most)"));
    let (status, body) = http_request(&addr, b"/api/v1/nothing/here", "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "no page /api/v1/nothing/here"));
    let (status, body) = http_request(&addr, b"/api/v1/runs/nope", "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "no run nope"));
    // A page, not the API: a plain message, still a 400.
    let (status, body) = http_request(&addr, b"/?branch=%00", "").await;
    assert_eq!((status, body.trim()), (400, "the request's query holds a NUL byte"));
    grid.stop();
}

#[tokio::test]
async fn the_read_token_guards_everything_but_health() {
    let (addr, grid, _files) = coordinator(Some("r-secret")).await;
    for target in [&b"/"[..], b"/api/v1/runs", b"/metrics", b"/fleet"] {
        let (status, _) = http_request(&addr, target, "").await;
        assert_eq!(status, 401, "{}", String::from_utf8_lossy(target));
    }
    let (status, body) = http_request(&addr, b"/api/v1/runs", "authorization: Bearer wrong\r\n").await;
    assert_eq!(status, 401);
    assert!(error_of(&body).starts_with("this dashboard needs its read token"), "{body}");
    let (status, _) = http_request(&addr, b"/api/v1/runs", "authorization: Bearer r-secret\r\n").await;
    assert_eq!(status, 200);
    // What a browser sends once the user typed the token as the password.
    let (status, _) = http_request(&addr, b"/", "authorization: Basic dXNlcjpyLXNlY3JldA==\r\n").await;
    assert_eq!(status, 200);
    let (status, body) = http_request(&addr, b"/healthz", "").await;
    assert_eq!((status, body.trim()), (200, "ok"));
    grid.stop();
}

/// A W3C error body's `error` and `message`.
fn w3c_error(body: &str) -> (String, String) {
    let json = body.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("not JSON: {body:?}"));
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    (value["value"]["error"].as_str().unwrap().to_owned(), value["value"]["message"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn webdriver_needs_the_client_token_and_every_error_is_w3c_json() {
    let tokens = Tokens { client: Some("c-key".into()), read: Some("r-secret".into()), ..Tokens::default() };
    let (addr, grid, _files) = coordinator_with(tokens).await;
    for path in [&b"/status"[..], b"/wd/hub/status", b"/session/x/source"] {
        let (status, body) = http_request(&addr, path, "authorization: Bearer r-secret\r\n").await;
        assert_eq!(status, 401, "the read token does not drive devices: {body}");
        let (error, message) = w3c_error(&body);
        assert_eq!(error, "unknown error");
        assert!(message.contains("client token"), "{message}");
    }
    // The Python clients send a URL's password as HTTP Basic.
    let basic = "authorization: Basic YXJndXM6Yy1rZXk=\r\n";
    let (status, body) = http_request(&addr, b"/wd/hub/status", basic).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_request(&addr, b"/session/nope/source", basic).await;
    assert_eq!((status, w3c_error(&body).0.as_str()), (404, "invalid session id"));
    let (status, body) = http_request(&addr, b"/session/nope/no/such/command", basic).await;
    assert_eq!((status, w3c_error(&body).0.as_str()), (404, "unknown command"));
    let (status, body) = http_request(&addr, b"/session", basic).await;
    assert_eq!((status, w3c_error(&body).0.as_str()), (405, "unknown method"), "GET on a POST route");
    grid.stop();
}

#[tokio::test]
async fn metrics_are_openmetrics_text_labelled_as_such_with_the_build() {
    let (addr, grid, _files) = coordinator(None).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response).to_lowercase();
    assert!(
        response.contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{response}"
    );
    assert!(
        response.contains(&format!(
            "argus_build_info{{version=\"{}\",component=\"coordinator\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{response}"
    );
    assert!(response.trim_end().ends_with("# eof"), "{response}");
    grid.stop();
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_let_go() {
    let (addr, grid, _files) = coordinator(None).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection was held open");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(14), "closed after {waited:?}");
    grid.stop();
}

/// Runs the spec's `report push` client against `base`; one JSON object per
/// request it made.
fn report_push(base: &str, key: &str, run_dir: &std::path::Path, project: &str) -> Vec<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/report_push.py");
    let output = std::process::Command::new("python3")
        .arg(script)
        .args([base, key])
        .arg(run_dir)
        .arg(project)
        .output()
        .expect("python3 runs the report-push client");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    printed.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

// Two threads: the client is a blocking child process, the coordinator
// serves meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lynkeus_report_push_lands_a_run_in_the_history() {
    let tokens = Tokens { client: Some("c-key".into()), read: Some("r-secret".into()), ..Tokens::default() };
    let (addr, grid, _files) = coordinator_with(tokens).await;
    let base = format!("http://{addr}");
    let report = tempfile::Builder::new().prefix("argus-push").tempdir().unwrap();
    let dir = report.path().to_owned();
    std::fs::create_dir_all(dir.join("pay")).unwrap();
    std::fs::write(dir.join("pay/01-app-see-sent.png"), b"not really a png").unwrap();
    let run = r#"{"schema":1,"startedAt":"2026-01-02T03:00:00.000Z","finishedAt":"2026-01-02T03:01:00.000Z","platform":"ios","native":false,"totals":{"cases":1,"passed":1,"failed":0,"unsupported":0,"retried":1}}"#;
    let failed = r#"{"id":"pay","title":"Paying a friend","file":"cases/pay.md","attempt":1,"result":"failed","startedAt":"2026-01-02T03:00:01.000Z","ms":1200,"steps":[{"step":"app.see Sent","status":"failed","ms":3000,"error":"not on screen: Sent","section":"steps","screenshot":"pay/01-app-see-sent.png"}],"evidence":{"why":"the transfer was refused"}}"#;
    let passed = r#"{"id":"pay","title":"Paying a friend","file":"cases/pay.md","attempt":2,"result":"passed","startedAt":"2026-01-02T03:00:30.000Z","ms":1200,"steps":[{"step":"app.see Sent","status":"passed","ms":5,"section":"steps"}]}"#;
    std::fs::write(dir.join("run.json"), run).unwrap();
    std::fs::write(dir.join("cases.jsonl"), format!("{failed}\n{passed}\n")).unwrap();

    let wrong = report_push(&base, "nope", &dir, "shop");
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert_eq!(wrong[0]["status"], 401);
    assert!(wrong[0]["body"]["error"].as_str().unwrap().contains("LYNKEUS_REPORTS_KEY"), "{wrong:?}");

    let sent = report_push(&base, "c-key", &dir, "shop");
    let steps: Vec<(&str, u64)> =
        sent.iter().map(|s| (s["step"].as_str().unwrap(), s["status"].as_u64().unwrap())).collect();
    assert_eq!(
        steps,
        [("create", 201), ("cases", 204), ("file pay/01-app-see-sent.png", 204), ("finish", 200)],
        "{sent:?}"
    );
    let id = sent[0]["body"]["id"].as_str().unwrap().to_owned();
    assert_eq!(sent[0]["body"]["url"], format!("http://{addr}/runs/{id}"));
    assert_eq!(sent[3]["body"]["url"], format!("http://{addr}/runs/{id}"));

    // In the history, marked as pushed, with its cases, lines and case page.
    let read = "authorization: Bearer r-secret\r\n";
    let (status, body) = http_request(&addr, b"/api/v1/runs?project=shop", read).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id) && body.contains("lynkeus report push"), "{body}");
    let (status, body) = http_request(&addr, format!("/api/v1/runs/{id}/cases.jsonl").as_bytes(), read).await;
    assert_eq!(status, 200);
    assert!(body.contains(failed) && body.contains(passed), "the lines to the byte: {body}");
    // The run's answer carries each attempt's line as it was written, and
    // the case's title from it.
    let (status, body) = http_request(&addr, format!("/api/v1/runs/{id}").as_bytes(), read).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("\"line\":{failed}")) && body.contains(&format!("\"line\":{passed}")), "{body}");
    assert!(body.contains(r#""title":"Paying a friend""#), "{body}");
    let (status, body) = http_request(&addr, b"/api/v1/cases/pay?project=shop", read).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id), "{body}");
    let (status, body) = http_request(&addr, b"/cases/pay?project=shop", read).await;
    assert_eq!(status, 200, "{body}");
    // The screenshot it pushed, kept with the run and shown on its page.
    let (status, body) =
        http_request(&addr, format!("/api/v1/runs/{id}/files/pay/01-app-see-sent.png").as_bytes(), read).await;
    assert_eq!((status, body.as_str()), (200, "not really a png"));
    let (status, body) = http_request(&addr, format!("/runs/{id}").as_bytes(), read).await;
    assert_eq!(status, 200);
    assert!(body.contains(&format!("<img src=\"/runs/{id}/files/pay/01-app-see-sent.png\"")), "{body}");

    // A schema it does not read, in lynkeus' words.
    std::fs::write(dir.join("run.json"), run.replace(r#""schema":1"#, r#""schema":2"#)).unwrap();
    let refused = report_push(&base, "c-key", &dir, "shop");
    assert_eq!(refused[0]["status"], 422);
    assert_eq!(refused[0]["body"]["error"], "run schema 2 is not one this service reads (1)");
    std::fs::remove_dir_all(dir).unwrap();
    grid.stop();
}

/// Sends `method target` with `headers` and `body`; the status and the body.
async fn send(addr: &str, method: &str, target: &str, headers: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.unwrap().unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn a_case_is_muted_and_unmuted_over_the_api_with_the_client_token_and_the_pages_show_it() {
    let tokens = Tokens { client: Some("c-key".into()), read: Some("r-secret".into()), ..Tokens::default() };
    let (addr, grid, _files) = coordinator_with(tokens).await;
    let read = "authorization: Bearer r-secret\r\n";
    let client = "authorization: Bearer c-key\r\n";
    // A case that has run in the project, landed as lynkeus' report push does.
    let run = r#"{"project":"shop","run":{"schema":1,"startedAt":"2026-01-02T03:00:00.000Z","finishedAt":"2026-01-02T03:01:00.000Z","totals":{"cases":1,"passed":0,"failed":1,"unsupported":0,"retried":0}}}"#;
    let (status, body) = send(&addr, "POST", "/v1/runs", client, run).await;
    assert_eq!(status, 201, "{body}");
    let id =
        serde_json::from_str::<serde_json::Value>(body.lines().find(|l| l.starts_with('{')).unwrap()).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let line = r#"{"id":"pay<1>","file":"cases/pay.md","attempt":1,"result":"failed","startedAt":"2026-01-02T03:00:01.000Z","ms":1200,"steps":[]}"#;
    let (status, body) = send(&addr, "PUT", &format!("/v1/runs/{id}/cases"), client, line).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = send(&addr, "POST", &format!("/v1/runs/{id}/finish"), client, "").await;
    assert_eq!(status, 200, "{body}");

    let path = "/api/v1/mutes/shop/pay%3C1%3E";
    let mute = r#"{"reason":"<script>alert(1)</script> flaky","owner":"ana","until":"2999-12-31"}"#;
    let (status, body) = send(&addr, "PUT", path, "", mute).await;
    assert_eq!(
        (status, error_of(&body).as_str()),
        (401, "this needs the coordinator's client token: Authorization: Bearer TOKEN")
    );
    let (status, _) = send(&addr, "PUT", path, read, mute).await;
    assert_eq!(status, 401, "the read token reads; it does not act");
    let (status, body) = send(&addr, "PUT", path, client, r#"{"reason":"x","until":"soon"}"#).await;
    assert_eq!(status, 400);
    assert!(error_of(&body).starts_with("until: \"soon\" is neither a day"), "{body}");
    let (status, body) = send(&addr, "PUT", path, client, r#"{"reason":"x","color":"red"}"#).await;
    assert_eq!(status, 422);
    assert!(error_of(&body).contains("unknown field `color`"), "{body}");
    let (status, body) = send(&addr, "PUT", "/api/v1/mutes/shop/nope", client, mute).await;
    assert_eq!(
        (status, error_of(&body).as_str()),
        (404, "no case \"nope\" has run in project \"shop\": `argus cases check` lists a suite's case ids")
    );
    let (status, body) = send(&addr, "PUT", path, client, mute).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""muted_by":"dashboard""#) && body.contains(r#""until_ms":32503679999999"#), "{body}");

    let (status, body) = http_request(&addr, b"/api/v1/mutes?project=shop", read).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""case_id":"pay<1>""#) && body.contains(r#""action":"muted""#), "{body}");
    // The pages show it as text, never as HTML.
    let (status, page) = http_request(&addr, b"/cases/pay%3C1%3E?project=shop", read).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("&#60;script&#62;alert(1)&#60;/script&#62; flaky") && !page.contains("<script>alert"),
        "{page}"
    );
    assert!(page.contains("class=\"act unmute\"") && page.contains("until 2999-12-31 23:59:59"), "{page}");
    let (_, page) = http_request(&addr, b"/flaky?project=shop", read).await;
    assert!(page.contains("id=\"mutes\"") && page.contains("pay&#60;1&#62;"), "{page}");

    let unmute = format!("{path}?by=ana&reason=fixed%20in%20%2312");
    let (status, body) = send(&addr, "DELETE", &unmute, client, "").await;
    assert_eq!((status, body.contains(r#""was_muted":true"#)), (200, true), "{body}");
    let (status, body) = send(&addr, "DELETE", &unmute, client, "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "pay<1> is not muted in shop"));
    let (_, body) = http_request(&addr, b"/api/v1/mutes?project=shop", read).await;
    assert!(body.contains(r#""mutes":[]"#) && body.contains(r#""by_who":"ana","reason":"fixed in #12""#), "{body}");
    // Rerunning a run that is not there, or has no failure, says so.
    let (status, body) = send(&addr, "POST", "/api/v1/runs/nope/rerun-failed", client, "").await;
    assert_eq!((status, error_of(&body).as_str()), (404, "no run nope"));
    grid.stop();
}
