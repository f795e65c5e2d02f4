//! The grid from the command line: the demo, and `argus run` on a local
//! grid, through real processes and sockets.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use argus_proto::run::RunDir;

const ARGUS: &str = env!("CARGO_BIN_EXE_argus");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("argus-cli-{name}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

struct Sims(Vec<Child>);

impl Sims {
    fn start(ports: &[u16]) -> Self {
        let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
        Sims(
            ports
                .iter()
                .map(|port| {
                    Command::new(ARGUS)
                        .args(["sim", "--model"])
                        .arg(&model)
                        .args(["--port", &port.to_string()])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Sims {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn the_demo_shards_42_cases_over_both_platforms() {
    let state = temp_dir("demo");
    let out = state.join("run");
    let output =
        Command::new(ARGUS).args(["demo", "--exit", "--state"]).arg(&state).arg("--out").arg(&out).output().unwrap();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("42/42 passed"), "{printed}");
    let run = RunDir::read(&out).unwrap();
    assert_eq!(run.manifest.totals.unwrap().cases, 42);
    let platforms: std::collections::BTreeSet<&str> =
        run.cases.iter().filter_map(|c| c.extra.get("device")?.get("platform")?.as_str()).collect();
    assert_eq!(platforms.into_iter().collect::<Vec<_>>(), ["android", "ios"]);
    assert!(out.join("junit.xml").exists());
    std::fs::remove_dir_all(state).unwrap();
}

#[test]
fn run_on_a_local_grid_and_its_exit_codes() {
    let ports = [free_port(), free_port()];
    let _sims = Sims::start(&ports);
    let project = temp_dir("project");
    std::fs::create_dir_all(project.join("cases")).unwrap();
    std::fs::write(
        project.join("cases/ok.md"),
        "---\nid: ok\nmatrix: { n: [1, 2, 3] }\n---\nsteps:\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    std::fs::write(
        project.join("cases/red.md"),
        "---\nid: red\n---\nsteps:\n  - app.see: { text: Nope, timeoutMs: 100 }\n",
    )
    .unwrap();
    let ports_arg = format!("{},{}", ports[0], ports[1]);
    let run = |extra: &[&str]| {
        Command::new(ARGUS).current_dir(&project).args(["run", "--ports", &ports_arg]).args(extra).output().unwrap()
    };
    let output = run(&["--once", "--out", "out"]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(1), "a case failed: {printed}");
    assert!(printed.contains("3/4 passed, 1 failed"), "{printed}");
    let written = RunDir::read(&project.join("out")).unwrap();
    assert_eq!(written.cases.len(), 4);
    assert!(written.cases.iter().all(|c| c.extra["device"]["worker"] == "local"));

    let output = run(&["--on-platform", "android", "cases/ok.md"]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(2), "{printed}");
    assert!(printed.contains("no device matches platform=android; the fleet: local/"), "{printed}");

    let output = Command::new(ARGUS).current_dir(&project).arg("run").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).contains("give --coordinator URL, or --ports"), "{}", text(&output));

    let output = Command::new(ARGUS)
        .current_dir(&project)
        .args(["run", "--coordinator", &format!("http://127.0.0.1:{}", free_port())])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).contains("cannot reach the coordinator at http://127.0.0.1:"), "{}", text(&output));
    std::fs::remove_dir_all(project).unwrap();
}

fn spawn(args: &[&str], cwd: &std::path::Path) -> Child {
    Command::new(ARGUS).current_dir(cwd).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_restarted_coordinator_takes_its_runs_up_again() {
    let dir = temp_dir("restart");
    std::fs::create_dir_all(dir.join("cases")).unwrap();
    std::fs::write(
        dir.join("cases/slow.md"),
        "---\nid: slow\nmatrix: { n: [1, 2, 3, 4, 5, 6, 7, 8] }\n---\nsteps:\n  - app.see: \"#title\"\n  - app.wait: 700\n",
    )
    .unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let listen = format!("127.0.0.1:{port}");
    let http = format!("127.0.0.1:{}", free_port());
    let coordinator = |dir: &std::path::Path| {
        spawn(&["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http], dir)
    };
    let mut first = Killed(coordinator(&dir));
    let ports = [free_port(), free_port()];
    let _worker =
        Killed(spawn(&["worker", "--coordinator", &url, "--ports", &format!("{},{}", ports[0], ports[1])], &dir));
    let _sims = Sims::start(&ports);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let client = spawn(&["run", "--coordinator", &url], &dir);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // The coordinator dies mid-run, and comes back on the same database.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let _second = Killed(coordinator(&dir));
    let output = client.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "the client lost its coordinator: {}", text(&output));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let runs = Command::new(ARGUS).args(["runs", "--coordinator", &url]).output().unwrap();
        let listing = text(&runs);
        if listing.contains("8/8 passed") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not finish after the restart: {listing}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let _ = std::fs::remove_dir_all(dir);
}
