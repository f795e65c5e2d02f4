//! The WebDriver facade driven by the real clients, unchanged: the Python
//! Appium client and selenium, and selenium-webdriver for Node (installed by
//! `scripts/test-clients.sh`; `.ci/run` runs it and sets `ARGUS_TEST_CLIENTS=1`,
//! without which these tests are reported ignored). A coordinator, a worker
//! with two iOS slots and one Android slot, and a simulated shop app on each,
//! as processes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where `scripts/test-clients.sh` put the clients; a missing client fails
/// the test (it never passes without running).
fn clients() -> PathBuf {
    let dir = workspace().join("target/test-clients");
    let python = dir.join("venv/bin/python");
    let node = dir.join("node/node_modules/selenium-webdriver");
    assert!(
        python.exists() && node.exists(),
        "the WebDriver test clients are not installed: run `bash scripts/test-clients.sh` (it installs Appium-Python-Client, selenium and selenium-webdriver into {})",
        dir.display()
    );
    dir
}

/// A grid of three devices with a WebDriver port.
struct Grid {
    url: String,
    grpc: String,
    dir: Folder,
    worker: Killed,
    _coordinator: Killed,
    _sims: Sims,
}

impl Grid {
    fn http(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// A session's id and capabilities, or the error's status and body.
    fn new_session(&self, capabilities: serde_json::Value) -> Result<(String, serde_json::Value), (u16, String)> {
        let body = serde_json::json!({ "capabilities": { "alwaysMatch": capabilities } }).to_string();
        let (status, answer) = http_json(self.http(), "POST", "/session", &body);
        if status != 200 {
            return Err((status, answer));
        }
        let value: serde_json::Value = serde_json::from_str(&answer).unwrap();
        Ok((value["value"]["sessionId"].as_str().unwrap().to_owned(), value["value"]["capabilities"].clone()))
    }
}

fn android_sim(model_dir: &Path, port: u16) -> Child {
    let model = std::fs::read_to_string(workspace().join("examples/shop/app.yaml")).unwrap();
    let android = model_dir.join("android.yaml");
    std::fs::write(&android, model.replace("\nplatform: ios\n", "\nplatform: android\n")).unwrap();
    Command::new(ARGUS)
        .args(["sim", "--model"])
        .arg(&android)
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn grid(name: &str) -> Grid {
    let dir = temp_dir(name);
    let (coordinator, grpc, http) = coordinator_on_free_ports(&dir, &[]);
    let ports = [free_port(), free_port(), free_port()];
    let worker_toml = format!(
        r#"
[[slot]]
name = "ios-1"
port = {}
udid = "SIM-1"
labels = {{ model = "iPhone 15", platformVersion = "17.4" }}

[[slot]]
name = "ios-2"
port = {}
labels = {{ model = "iPhone SE" }}

[[slot]]
name = "android-1"
port = {}
platform = "android"
serial = "emulator-5554"
labels = {{ model = "Pixel 8" }}
"#,
        ports[0], ports[1], ports[2]
    );
    std::fs::write(dir.join("worker.toml"), worker_toml).unwrap();
    let grpc_url = format!("http://{grpc}");
    let worker = spawn(&["worker", "--coordinator", &grpc_url, "--name", "w", "--config", "worker.toml"], &dir);
    let mut sims = Sims::start(&ports[..2]);
    sims.0.push(android_sim(&dir, ports[2]));
    wait_for_devices(&grpc_url, 3);
    Grid {
        url: format!("http://{http}"),
        grpc: grpc_url,
        dir,
        worker: Killed(worker),
        _coordinator: coordinator,
        _sims: sims,
    }
}

/// Runs a client script and returns what it printed; it must exit 0.
fn client(program: &Path, script: &Path, url: &str) -> String {
    let started = Instant::now();
    let output: Output = Command::new(program).arg(script).arg(url).output().unwrap();
    let printed = text(&output);
    println!("{} took {:.1} s:\n{printed}", script.display(), started.elapsed().as_secs_f64());
    assert_eq!(output.status.code(), Some(0), "{} failed:\n{printed}", script.display());
    printed
}

fn checks(printed: &str) -> Vec<&str> {
    printed.lines().filter_map(|l| l.strip_prefix("checked: ")).collect()
}

/// The id of the element whose testId is `test_id`.
fn find(grid: &Grid, sid: &str, test_id: &str) -> String {
    let body = serde_json::json!({ "using": "id", "value": test_id }).to_string();
    let (status, found) = http_json(grid.http(), "POST", &format!("/session/{sid}/element"), &body);
    assert_eq!(status, 200, "{found}");
    let found: serde_json::Value = serde_json::from_str(&found).unwrap();
    found["value"]["element-6066-11e4-a52e-4f735466cecf"].as_str().unwrap().to_owned()
}

#[test]
#[cfg_attr(
    not(argus_clients),
    ignore = "needs ARGUS_TEST_CLIENTS=1 after `bash scripts/test-clients.sh` (bash .ci/run does both)"
)]
fn the_python_appium_and_selenium_clients_drive_grid_devices() {
    let clients = clients();
    let grid = grid("wd-python");
    let script = workspace().join("cli/tests/clients/webdriver_python.py");
    let printed = client(&clients.join("venv/bin/python"), &script, &grid.url);
    let done = checks(&printed);
    // Every check the script has ran (a check skipped would be missing).
    let expected = std::fs::read_to_string(&script).unwrap().matches("\nchecked(").count();
    assert_eq!(done.len(), expected, "{printed}");
    assert!(printed.contains("all checks passed"), "{printed}");

    // The grid counted and timed the commands.
    let (status, metrics) = http_get_bytes(grid.http(), "/metrics");
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics.contains(
            r#"argus_webdriver_command_duration_seconds_count{command="POST /session/{sid}/element",outcome="ok"}"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains(r#"outcome="no such element""#), "{metrics}");
    assert!(metrics.contains(r#"argus_webdriver_sessions_ended_total{kind="grid"} 1"#), "the idle one: {metrics}");
    // Every session let go of its device.
    wait_for_idle(&grid.grpc, 3, Duration::from_secs(10));

    // Each session is on record: how it ended, and its commands, a failure
    // with the screen it saw.
    let (status, listed) = http_json(grid.http(), "GET", "/api/v1/sessions", "");
    assert_eq!(status, 200, "{listed}");
    let sessions: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    assert!(sessions.len() >= 10, "{listed}");
    let reasons: Vec<&str> = sessions.iter().filter_map(|s| s["end_reason"].as_str()).collect();
    assert!(reasons.iter().any(|r| r.starts_with("no command for 1 s")), "{reasons:?}");
    assert!(reasons.contains(&"deleted by its client"), "{reasons:?}");
    assert!(sessions.iter().all(|s| s["ended"].is_string()), "all ended: {listed}");
    // The list is newest first: the first session on SIM-1 is the long one.
    let first = sessions.iter().rev().find(|s| s["capabilities"]["appium:udid"] == "SIM-1").unwrap();
    let id = first["id"].as_str().unwrap();
    let (status, detail) = http_json(grid.http(), "GET", &format!("/api/v1/sessions/{id}"), "");
    assert_eq!(status, 200, "{detail}");
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    let commands = detail["commands"].as_array().unwrap();
    assert!(commands.len() > 40, "{detail}");
    let missing = commands.iter().find(|c| c["outcome"] == "no such element").expect("a failed find is recorded");
    assert!(missing["screen_xml"].as_str().unwrap().contains("<hierarchy"), "{missing}");
    assert!(commands.iter().all(|c| c["ms"].as_i64().unwrap() >= 0));
    let last: Vec<(&str, &str)> = commands[commands.len() - 2..]
        .iter()
        .map(|c| (c["command"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        last,
        [("DELETE /session/{sid}", "ok"), ("GET /session/{sid}/source", "invalid session id")],
        "the quit, and a command after it"
    );
    let (status, page) = http_get_bytes(grid.http(), &format!("/sessions/{id}"));
    let page = String::from_utf8(page).unwrap();
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("POST /session/{sid}/element") && page.contains("The screen it saw"), "{page}");
}

#[test]
fn a_suite_run_and_webdriver_sessions_share_one_fleet_and_a_lost_device_or_worker_ends_its_sessions() {
    let mut grid = grid("wd-share");
    // Eight cases of half a second for the two iOS devices.
    let project = grid.dir.join("project");
    std::fs::create_dir_all(project.join("cases")).unwrap();
    std::fs::write(
        project.join("cases/slow.md"),
        "---\nid: slow\nmatrix: { n: [1, 2, 3, 4, 5, 6, 7, 8] }\n---\nsteps:\n  - app.wait: 500\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    let started = Instant::now();
    let mut run = Command::new(ARGUS)
        .current_dir(&project)
        .args(["run", "--coordinator", &grid.grpc, "--on-platform", "ios"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both iOS devices are busy with the run: a session waits for the next
    // one to free, and gets it (its share) while the run still goes.
    std::thread::sleep(Duration::from_millis(700));
    let asked = Instant::now();
    let (sid, _) =
        grid.new_session(serde_json::json!({ "platformName": "iOS", "lynkeus:queueTimeoutMs": 20000 })).unwrap();
    let waited = asked.elapsed();
    assert!(run.try_wait().unwrap().is_none(), "the session got a device while the run still went");
    let (status, source) = http_json(grid.http(), "GET", &format!("/session/{sid}/source"), "");
    assert_eq!(status, 200, "{source}");
    // The fleet shows the device as the session's.
    let (_, fleet) = http_json(grid.http(), "GET", "/api/v1/fleet", "");
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    let held: Vec<&serde_json::Value> =
        fleet["devices"].as_array().unwrap().iter().filter(|d| d["session"] == sid.as_str()).collect();
    assert_eq!(held.len(), 1, "{fleet}");
    assert_eq!(held[0]["state"], "held", "held by a session, as argus devices and the metrics say it");
    // The legacy TouchAction endpoint older clients send: a tap on Settings.
    let touch = r#"{"actions":[{"action":"press","options":{"x":195,"y":210}},{"action":"wait","options":{"ms":50}},{"action":"release","options":{}}]}"#;
    let settings = find(&grid, &sid, "settings");
    let rect: serde_json::Value =
        serde_json::from_str(&http_json(grid.http(), "GET", &format!("/session/{sid}/element/{settings}/rect"), "").1)
            .unwrap();
    let (x, y) = (rect["value"]["x"].as_i64().unwrap() + 10, rect["value"]["y"].as_i64().unwrap() + 10);
    let touch = touch.replace("195", &x.to_string()).replace("210", &y.to_string());
    let (status, body) = http_json(grid.http(), "POST", &format!("/session/{sid}/touch/perform"), &touch);
    assert_eq!(status, 200, "{body}");
    let (_, source) = http_json(grid.http(), "GET", &format!("/session/{sid}/source"), "");
    assert!(source.contains("route='Settings'"), "the tap landed: {source}");
    // The run is not starved: it goes on with the other device and ends.
    let output = run.wait_with_output().unwrap();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("8/8 passed"), "{printed}");
    println!(
        "a session waited {:.2} s for a device; the run took {:.1} s",
        waited.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let (status, _) = http_json(grid.http(), "DELETE", &format!("/session/{sid}"), "");
    assert_eq!(status, 200);

    // A device's app goes away and stays away: its session ends, saying so.
    let (sid, _) = grid.new_session(serde_json::json!({ "platformName": "Android" })).unwrap();
    let mut android = grid._sims.0.remove(2);
    let _ = android.kill();
    let _ = android.wait();
    let gone = Instant::now();
    let deadline = gone + Duration::from_secs(30);
    loop {
        let (status, body) = http_json(grid.http(), "GET", &format!("/session/{sid}/window/rect"), "");
        if status == 404 {
            assert!(body.contains("the app of its device w/android-1 has been gone for 15 s"), "{body}");
            break;
        }
        assert_eq!(status, 500, "the app is gone: {body}");
        assert!(Instant::now() < deadline, "the session outlived its device: {body}");
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("a session ended {:.1} s after its device's app went away", gone.elapsed().as_secs_f64());

    // The worker goes away: its sessions end, saying so.
    let (sid, _) = grid.new_session(serde_json::json!({ "platformName": "iOS" })).unwrap();
    let _ = grid.worker.0.kill();
    let _ = grid.worker.0.wait();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = http_json(grid.http(), "GET", &format!("/session/{sid}/source"), "");
        if status == 404 {
            assert!(body.contains("invalid session id") && body.contains("its worker w"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "the session outlived its worker: {status} {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, body) = grid.new_session(serde_json::json!({ "platformName": "Android" })).unwrap_err();
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("session not created") && body.contains("no device of the grid matches platformName=Android"),
        "{body}"
    );
}

#[test]
#[cfg_attr(
    not(argus_clients),
    ignore = "needs ARGUS_TEST_CLIENTS=1 after `bash scripts/test-clients.sh` (bash .ci/run does both)"
)]
fn the_node_selenium_client_drives_a_grid_device() {
    let clients = clients();
    let grid = grid("wd-node");
    // Node resolves `selenium-webdriver` from the script's own folder.
    let script = clients.join("node/webdriver_node.mjs");
    std::fs::copy(workspace().join("cli/tests/clients/webdriver_node.mjs"), &script).unwrap();
    let printed = client(Path::new("node"), &script, &grid.url);
    assert_eq!(checks(&printed).len(), 6, "{printed}");
    assert!(printed.contains("all checks passed"), "{printed}");
}
