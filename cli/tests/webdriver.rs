//! The WebDriver facade driven by the real clients, unchanged: the Python
//! Appium client and selenium, and selenium-webdriver for Node (installed by
//! `scripts/test-clients.sh`; `.ci/run` runs it). A coordinator, a worker
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
    dir: PathBuf,
    _processes: Vec<Killed>,
    _sims: Sims,
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
    let (grpc, http) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let coordinator = spawn(&["coordinator", "--database-url", &database, "--listen", &grpc, "--http", &http], &dir);
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
        _processes: vec![Killed(coordinator), Killed(worker)],
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

#[test]
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
    let (status, metrics) = http_get_bytes(grid.url.trim_start_matches("http://"), "/metrics");
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
    let _ = std::fs::remove_dir_all(&grid.dir);
}

#[test]
fn the_node_selenium_client_drives_a_grid_device() {
    let clients = clients();
    let grid = grid("wd-node");
    // Node resolves `selenium-webdriver` from the script's own folder.
    let script = clients.join("node/webdriver_node.mjs");
    std::fs::copy(workspace().join("cli/tests/clients/webdriver_node.mjs"), &script).unwrap();
    let printed = client(Path::new("node"), &script, &grid.url);
    assert_eq!(checks(&printed).len(), 6, "{printed}");
    assert!(printed.contains("all checks passed"), "{printed}");
    let _ = std::fs::remove_dir_all(&grid.dir);
}
