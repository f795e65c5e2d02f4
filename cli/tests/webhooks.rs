//! Webhooks over real processes: a coordinator configured from argus.toml
//! tells a receiver on loopback of a run's end, a case that started
//! failing, a mute and a quarantine; the receiver checks each signature
//! with its own HMAC (Python's), answers 500 at first and gets retries,
//! takes each event once; the Slack message and the GitHub status request
//! are checked against Slack's published Block Kit types and GitHub's
//! published OpenAPI description (`scripts/test-clients.sh` installs them).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// A request the receiver got, and what it answered.
#[derive(Debug, Clone)]
struct Got {
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    answered: u16,
}

/// An HTTP receiver on loopback that answers 500 to the first `failing`
/// requests on `/json`, then 200 (201 for a commit status).
fn receiver(failing: usize) -> (String, Arc<Mutex<Vec<Got>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let kept = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() || line.is_empty() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let mut headers = BTreeMap::new();
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    headers.insert(name.trim().to_lowercase(), value.trim().to_owned());
                }
            }
            let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut got = kept.lock().unwrap();
            let json_so_far = got.iter().filter(|g| g.path == "/json").count();
            let answered = match path.as_str() {
                "/json" if json_so_far < failing => 500,
                p if p.contains("/statuses/") => 201,
                _ => 200,
            };
            got.push(Got { path, headers, body, answered });
            drop(got);
            let reason = if answered == 500 { "Internal Server Error" } else { "OK" };
            let _ = write!(stream, "HTTP/1.1 {answered} {reason}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (addr, got)
}

/// Whether `signature` is the HMAC-SHA256 of `body` under `secret`, by
/// Python's own hmac module.
fn python_says_signed(secret: &str, body: &[u8], signature: &str) -> bool {
    let check = "import hmac, hashlib, sys; secret, signature = sys.argv[1], sys.argv[2]; body = sys.stdin.buffer.read(); \
                 expected = 'sha256=' + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(); \
                 sys.exit(0 if hmac.compare_digest(expected, signature) else 1)";
    let mut child = Command::new("python3")
        .args(["-c", check, secret, signature])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 checks signatures");
    child.stdin.take().unwrap().write_all(body).unwrap();
    child.wait().unwrap().success()
}

fn secret_file(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
#[cfg_attr(
    not(argus_clients),
    ignore = "needs ARGUS_TEST_CLIENTS=1 after `bash scripts/test-clients.sh` (bash .ci/run does both)"
)]
fn webhooks_are_told_each_event_once_signed_retried_and_in_slacks_and_githubs_shapes() {
    let scratch = temp_dir("webhooks");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    std::fs::write(scratch.join("cases/home.md"), "---\nid: home\n---\nsteps:\n  - app.see: \"#title\"\n").unwrap();
    std::fs::write(
        scratch.join("cases/pay.md"),
        "---\nid: pay\n---\nsteps:\n  - app.see: { text: \"<!channel> paid\", timeoutMs: 100 }\n",
    )
    .unwrap();
    std::fs::write(scratch.join("TESTOWNERS"), "cases/pay.md @ana\n").unwrap();
    let (receiver_addr, got) = receiver(2);
    secret_file(&scratch.join("secret"), "s3cret\n");
    secret_file(&scratch.join("gh-token"), "ghp_example\n");
    secret_file(&scratch.join("slack-url"), &format!("http://{receiver_addr}/slack/T0/B0/XYZ\n"));
    let listen = format!("127.0.0.1:{}", free_port());
    let http = format!("127.0.0.1:{}", free_port());
    std::fs::write(
        scratch.join("argus.toml"),
        format!(
            r#"[coordinator]
database_url = "sqlite:{db}"
listen = "{listen}"
http = "{http}"
public_url = "http://argus.example"

[[coordinator.webhooks]]
name = "team"
url = "http://{receiver_addr}/json"
secret_file = "secret"

[[coordinator.webhooks]]
name = "slack"
format = "slack"
url_file = "slack-url"
events = ["run.finished", "case.failing"]

[[coordinator.webhooks]]
name = "github"
format = "github-status"
url = "http://{receiver_addr}/gh"
repository = "acme/shop"
token_file = "gh-token"
"#,
            db = scratch.join("argus.db").display()
        ),
    )
    .unwrap();
    let _coordinator = Killed(spawn(&["coordinator", "--config", "argus.toml"], &scratch));
    let url = format!("http://{listen}");
    let port = free_port();
    let _worker =
        Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port.to_string(), "--name", "mac"], &scratch));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&url, 1);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let run = Command::new(ARGUS)
        .current_dir(&scratch)
        .env("GITHUB_HEAD_REF", "main")
        .env("GITHUB_SHA", sha)
        .args(["run", "--coordinator", &url, "--once", "--project", "shop"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let run_id = text(&run).lines().find_map(|l| l.strip_prefix("run ")?.split(':').next().map(str::to_owned)).unwrap();
    let mute = Command::new(ARGUS)
        .current_dir(&scratch)
        .args(["cases", "mute", "pay", "--project", "shop", "--reason", "known", "--coordinator", &url])
        .output()
        .unwrap();
    assert_eq!(mute.status.code(), Some(0), "{}", text(&mute));
    let device = format!("mac/{port}");
    let quarantine = Command::new(ARGUS)
        .args(["devices", "quarantine", &device, "--reason", "cracked screen", "--coordinator", &url])
        .output()
        .unwrap();
    assert_eq!(quarantine.status.code(), Some(0), "{}", text(&quarantine));

    // Every event reaches each webhook that wants it: the JSON one all
    // four, after two 500s; Slack the run's end and the failing case;
    // GitHub the status of the run's commit.
    let taken = |path: &str| -> Vec<Got> {
        got.lock().unwrap().iter().filter(|g| g.path.starts_with(path) && g.answered < 300).cloned().collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while taken("/json").len() < 4 || taken("/slack").len() < 2 || taken("/gh").is_empty() {
        assert!(Instant::now() < deadline, "not everything arrived: {:#?}", got.lock().unwrap());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let all = got.lock().unwrap().clone();
    let json: Vec<&Got> = all.iter().filter(|g| g.path == "/json").collect();
    let events: BTreeMap<String, serde_json::Value> = json
        .iter()
        .filter(|g| g.answered == 200)
        .map(|g| (g.headers["x-argus-event"].clone(), serde_json::from_slice(&g.body).unwrap()))
        .collect();
    assert_eq!(events.keys().collect::<Vec<_>>(), ["case.failing", "case.muted", "device.quarantined", "run.finished"]);
    let taken_ids: Vec<&str> =
        json.iter().filter(|g| g.answered == 200).map(|g| g.headers["x-argus-delivery"].as_str()).collect();
    let mut distinct = taken_ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), taken_ids.len(), "each delivery taken once: {taken_ids:?}");
    // The two refused were tried again, under the same delivery id.
    let refused: Vec<&str> =
        json.iter().filter(|g| g.answered == 500).map(|g| g.headers["x-argus-delivery"].as_str()).collect();
    assert_eq!(refused.len(), 2);
    assert!(refused.iter().all(|id| taken_ids.contains(id)), "{refused:?} then {taken_ids:?}");
    for g in &json {
        let signature = &g.headers["x-argus-signature-256"];
        assert!(python_says_signed("s3cret", &g.body, signature), "a valid signature: {signature}");
        assert!(!python_says_signed("wrong", &g.body, signature), "a wrong secret is found out");
    }
    let finished = &events["run.finished"];
    assert_eq!(finished["run"]["id"], run_id.as_str());
    assert_eq!((finished["run"]["result"].as_str(), finished["run"]["commit"].as_str()), (Some("failed"), Some(sha)));
    assert_eq!(finished["url"], format!("http://argus.example/runs/{run_id}"));
    let failing = &events["case.failing"];
    assert_eq!((failing["case"]["id"].as_str(), failing["case"]["owner"].as_str()), (Some("pay"), Some("@ana")));
    assert!(failing["case"]["line"].as_str().unwrap().contains("<!channel> paid"), "{failing}");
    assert_eq!(events["case.muted"]["mute"]["reason"], "known");
    assert_eq!(events["device.quarantined"]["device"]["id"], device.as_str());

    // Slack's message escapes what a case said; GitHub's status says failure.
    let slack = taken("/slack");
    let failing_message = slack.iter().find(|g| g.headers["x-argus-event"] == "case.failing").unwrap();
    let message: serde_json::Value = serde_json::from_slice(&failing_message.body).unwrap();
    assert!(message["text"].as_str().unwrap().contains("&lt;!channel&gt; paid"), "{message}");
    let status = &taken("/gh")[0];
    assert_eq!(status.path, format!("/gh/repos/acme/shop/statuses/{sha}"));
    assert_eq!(status.headers["authorization"], "Bearer ghp_example");
    let github_request = serde_json::json!({
        "method": "POST",
        "path": status.path.trim_start_matches("/gh"),
        "headers": status.headers,
        "body": serde_json::from_slice::<serde_json::Value>(&status.body).unwrap(),
    });
    std::fs::write(scratch.join("slack.json"), &failing_message.body).unwrap();
    std::fs::write(scratch.join("github.json"), github_request.to_string()).unwrap();
    let node = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-clients/node");
    let checked = Command::new("node")
        .arg(node.join("validate_webhooks.js"))
        .arg(scratch.join("slack.json"))
        .arg(scratch.join("github.json"))
        .output()
        .expect("node runs the webhook checks");
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(text(&checked).contains("ok slack") && text(&checked).contains("ok github"), "{}", text(&checked));

    // The dashboard lists each delivery and its answer.
    let (code, listed) = http_json(&http, "GET", "/api/v1/webhooks", "");
    assert_eq!(code, 200);
    let listed: serde_json::Value = serde_json::from_str(listed.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    let deliveries = listed["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 7, "{listed}");
    assert!(deliveries.iter().all(|d| d["state"] == "delivered"), "{listed}");
    let tries: i64 =
        deliveries.iter().filter(|d| d["webhook"] == "team").map(|d| d["attempts"].as_i64().unwrap()).sum();
    assert_eq!(tries, 4 + 2, "four events, two of them refused once: {listed}");
    assert!(!listed.to_string().contains("XYZ") && !listed.to_string().contains("s3cret"), "no secret shown: {listed}");
}
