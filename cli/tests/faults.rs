//! The fault-injection suite: the real binaries as processes (coordinator on
//! Postgres, workers, simulated apps, `argus run`), and a fault in the
//! middle of a run. Each test asserts what CI relies on: every case has
//! exactly one final result, attempts are numbered without gaps or
//! duplicates, the store and the run directory agree, the client's exit
//! code is the run's, and how long the grid took to recover (printed as
//! `recovery: …`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argus_proto::run::RunDir;
use argus_store::{LogRow, Store};
use common::*;

/// Sixteen cases of about half a second: a run of a few seconds on two to
/// four devices, long enough to be hit in the middle.
const SUITE: &str = "---\nid: step\nmatrix: { n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] }\n---\n\
steps:\n  - app.see: \"#title\"\n  - app.idle: { quiet: 500 }\n";
const CASES: usize = 16;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A fresh database on the test Postgres server, or on `admin`.
fn database(admin: Option<&str>) -> String {
    runtime().block_on(argus_testkit::postgres_url(admin, "argus_faults"))
}

/// A coordinator, workers and their simulated apps, and a project with the
/// suite, all as processes that die with the test.
struct Grid {
    dir: Folder,
    url: String,
    listen: String,
    http: String,
    database: String,
    client_grace: u64,
    coordinator: Option<Killed>,
    workers: Vec<(Killed, Vec<u16>)>,
    sims: BTreeMap<u16, Killed>,
}

impl Grid {
    /// `workers` workers of `devices` devices each, on `database`.
    fn start(name: &str, workers: usize, devices: usize, database: String) -> Self {
        let dir = temp_dir(name);
        std::fs::create_dir_all(dir.join("cases")).unwrap();
        std::fs::write(dir.join("cases/step.md"), SUITE).unwrap();
        let port = free_port();
        let mut grid = Grid {
            url: format!("http://127.0.0.1:{port}"),
            listen: format!("127.0.0.1:{port}"),
            http: format!("127.0.0.1:{}", free_port()),
            dir,
            database,
            client_grace: 60,
            coordinator: None,
            workers: Vec::new(),
            sims: BTreeMap::new(),
        };
        grid.start_coordinator();
        for w in 0..workers {
            let ports: Vec<u16> = (0..devices).map(|_| free_port()).collect();
            let worker = grid.worker(&format!("w{w}"), &ports);
            grid.workers.push((worker, ports.clone()));
            for port in ports {
                grid.sims.insert(port, Killed(sim(port)));
            }
        }
        wait_for_idle(&grid.url, workers * devices, Duration::from_secs(30));
        grid
    }

    fn start_coordinator(&mut self) {
        let grace = self.client_grace.to_string();
        let args = [
            "coordinator",
            "--database-url",
            &self.database,
            "--listen",
            &self.listen,
            "--http",
            &self.http,
            "--client-grace",
            &grace,
        ];
        self.coordinator = Some(Killed(spawn(&args, &self.dir)));
    }

    fn worker(&self, name: &str, ports: &[u16]) -> Killed {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        Killed(spawn(&["worker", "--coordinator", &self.url, "--name", name, "--ports", &ports.join(",")], &self.dir))
    }

    /// `argus run` on the grid, its output captured.
    fn run(&self, extra: &[&str]) -> Child {
        Command::new(ARGUS)
            .current_dir(&self.dir)
            .args(["run", "--coordinator", &self.url, "--out", "out", "--reconnect-for", "60"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn argus(&self, args: &[&str]) -> Output {
        Command::new(ARGUS).current_dir(&self.dir).args(args).arg("--coordinator").arg(&self.url).output().unwrap()
    }

    fn store<T>(&self, read: impl AsyncFnOnce(&Store) -> T) -> T {
        runtime().block_on(async {
            let store = Store::open(&self.database).await.unwrap();
            let value = read(&store).await;
            store.close().await;
            value
        })
    }

    /// The run the newest client submitted.
    fn run_id(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(run) = self.store(async |s| s.list_runs(1).await.unwrap()).pop() {
                return run.id;
            }
            assert!(Instant::now() < deadline, "no run was submitted");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `count` attempts of the run have finished.
    fn wait_for_finished(&self, run_id: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.log(run_id).iter().filter(|r| r.infrastructure == 0).count() < count {
            assert!(Instant::now() < deadline, "{count} attempts never finished");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self, run_id: &str) -> Vec<LogRow> {
        self.store(async |s| s.run_log(run_id).await.unwrap())
    }
}

impl Drop for Grid {
    fn drop(&mut self) {
        // Processes first (they hold the directory); the directory goes
        // with the fields.
        self.sims.clear();
        self.workers.clear();
        self.coordinator = None;
    }
}

/// What every fault must leave: one final result per case, attempts
/// numbered 1, 2, … without gaps or repeats, and a run directory that says
/// what the store says. Answers the store's record of the run.
fn assert_whole(grid: &Grid, run_id: &str) -> Vec<LogRow> {
    let cases = grid.store(async |s| s.run_cases(run_id).await.unwrap());
    assert_eq!(cases.len(), CASES);
    assert!(cases.iter().all(|c| c.final_result.is_some()), "a case has no final result: {cases:?}");
    let log = grid.log(run_id);
    let mut attempts: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for row in log.iter().filter(|r| r.infrastructure == 0) {
        attempts.entry(&row.case_id).or_default().push(row.attempt);
    }
    assert_eq!(attempts.len(), CASES, "every case ran");
    for (case, numbers) in &attempts {
        let expected: Vec<i64> = (1..=numbers.len() as i64).collect();
        let mut sorted = numbers.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "{case}: attempts numbered without gaps or duplicates");
    }
    let seqs: Vec<i64> = log.iter().filter_map(|r| r.seq).collect();
    let unique: BTreeSet<i64> = seqs.iter().copied().collect();
    assert_eq!(unique.len(), seqs.len(), "each update has its own place: {seqs:?}");
    let dir = RunDir::read(&grid.dir.join("out")).expect("a complete run directory");
    let written: BTreeSet<(String, u32)> = dir.cases.iter().map(|c| (c.id.clone(), c.attempt)).collect();
    assert_eq!(written.len(), dir.cases.len(), "no line written twice");
    let stored: BTreeSet<(String, u32)> =
        log.iter().filter(|r| r.infrastructure == 0).map(|r| (r.case_id.clone(), r.attempt as u32)).collect();
    assert_eq!(written, stored, "the run directory and the store agree");
    assert_eq!(dir.manifest.totals.expect("totals").cases, CASES as u64);
    log
}

/// Time to recovery: from the fault (`since`) until the store records a
/// result the run did not have when the fault struck (`had` of them).
fn recovered(grid: &Grid, run_id: &str, fault: &str, had: usize, since: Instant) -> f64 {
    let deadline = since + Duration::from_secs(60);
    while results(grid, run_id) <= had {
        assert!(Instant::now() < deadline, "{fault}: the run never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = since.elapsed().as_secs_f64();
    println!("recovery: {fault}: {seconds:.2} s until the next result was recorded");
    seconds
}

fn results(grid: &Grid, run_id: &str) -> usize {
    grid.log(run_id).iter().filter(|r| r.infrastructure == 0).count()
}

/// How long after `since` the device's attempt was taken back, printed;
/// fails if it never was.
fn taken_back(log: &[LogRow], device: &str, fault: &str, since: Instant) -> f64 {
    let since_ms = now_ms() - since.elapsed().as_millis() as i64;
    let at = log
        .iter()
        .filter(|r| r.infrastructure == 1 && r.device_id.as_deref() == Some(device))
        .filter_map(|r| r.finished_at)
        .min()
        .unwrap_or_else(|| panic!("{fault}: {device}'s attempt was never taken back: {log:?}"));
    let seconds = (at - since_ms) as f64 / 1000.0;
    println!("recovery: {fault}: {device}'s attempt taken back after {seconds:.2} s");
    seconds
}

fn finish(client: Child) -> (Option<i32>, String) {
    let output = client.wait_with_output().unwrap();
    (output.status.code(), text(&output))
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_killed_worker_costs_reruns_not_results() {
    let mut grid = Grid::start("kill-worker", 2, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let had = results(&grid, &run_id);
    grid.workers[0].0.0.kill().unwrap();
    let seconds = recovered(&grid, &run_id, "worker SIGKILL", had, Instant::now());
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains("16/16 passed"), "{printed}");
    let log = assert_whole(&grid, &run_id);
    let taken_back: Vec<&LogRow> = log.iter().filter(|r| r.infrastructure == 1).collect();
    assert!(!taken_back.is_empty(), "the killed worker's attempts were taken back");
    assert!(taken_back.iter().all(|r| r.worker_id.as_deref() == Some("w0")), "{taken_back:?}");
    assert!(seconds < 5.0);
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_frozen_worker_is_given_up_within_15_s() {
    let grid = Grid::start("freeze-worker", 2, 1, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 2);
    let frozen = &grid.workers[0].0.0;
    signal(frozen, "STOP");
    let at = Instant::now();
    let (code, printed) = finish(client);
    signal(frozen, "CONT");
    assert_eq!(code, Some(0), "{printed}");
    let log = assert_whole(&grid, &run_id);
    let device = format!("w0/{}", grid.workers[0].1[0]);
    let seconds = taken_back(&log, &device, "worker SIGSTOP", at);
    assert!(seconds <= 15.0, "taken back after {seconds} s");
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn the_client_rides_out_a_coordinator_restart() {
    let mut grid = Grid::start("restart", 1, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let (had, at) = (results(&grid, &run_id), Instant::now());
    grid.coordinator = None;
    std::thread::sleep(Duration::from_millis(1000));
    grid.start_coordinator();
    recovered(&grid, &run_id, "coordinator SIGKILL, restarted after 1 s", had, at);
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "the run passed, so CI is green: {printed}");
    assert!(printed.contains("reconnected; resuming run"), "{printed}");
    assert!(printed.contains("16/16 passed"), "{printed}");
    assert_whole(&grid, &run_id);
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_postgres_restart_mid_run_loses_nothing() {
    // A server of its own: the others' tests keep theirs.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/postgres.sh");
    let started = Command::new("bash").arg(&script).output().unwrap();
    assert!(started.status.success(), "{}", text(&started));
    let line = String::from_utf8(started.stdout).unwrap();
    let (admin, pg_dir) = line.trim().split_once(' ').unwrap();
    let port = admin.rsplit(':').next().and_then(|p| p.split('/').next()).unwrap().to_owned();
    let pg = PgServer { script: script.clone(), dir: pg_dir.to_owned(), port };
    let grid = Grid::start("postgres-restart", 1, 2, database(Some(admin)));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let had = results(&grid, &run_id);
    pg.ctl("stop");
    std::thread::sleep(Duration::from_secs(3));
    pg.ctl("start");
    recovered(&grid, &run_id, "Postgres stopped for 3 s, then started", had, Instant::now());
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    assert_whole(&grid, &run_id);
}

/// A private Postgres server, stopped and removed when dropped.
struct PgServer {
    script: PathBuf,
    dir: String,
    port: String,
}

impl PgServer {
    fn ctl(&self, action: &str) {
        let data = format!("{}/data", self.dir);
        let log = format!("{}/postgres.log", self.dir);
        let bin = std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
        let mut args = vec![format!("{bin}/pg_ctl"), "-D".into(), data, "-w".into(), "-l".into(), log, action.into()];
        match action {
            "stop" => args.extend(["-m".into(), "fast".into()]),
            _ => args.extend([
                "-o".into(),
                format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200", self.port, self.dir),
            ]),
        }
        let as_postgres = is_root() && Command::new("id").arg("postgres").output().is_ok_and(|o| o.status.success());
        let status = if as_postgres {
            Command::new("runuser").args(["-u", "postgres", "--"]).args(&args).stdout(Stdio::null()).status()
        } else {
            Command::new(&args[0]).args(&args[1..]).stdout(Stdio::null()).status()
        };
        assert!(status.unwrap().success(), "pg_ctl {action}");
    }
}

/// Whether this process runs as root (Postgres will not).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(&self.script).args(["stop", &self.dir]).status();
    }
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_client_stopped_by_ci_cancels_its_run_and_frees_the_devices() {
    let grid = Grid::start("sigterm-client", 1, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 2);
    signal(&client, "TERM");
    let at = Instant::now();
    let (code, printed) = finish(client);
    assert_eq!(code, Some(143), "{printed}");
    assert!(printed.contains(&format!("cancelling run {run_id}")), "{printed}");
    let run = grid.store(async |s| s.get_run(&run_id).await.unwrap());
    assert_eq!(run.result.as_deref(), Some("cancelled"));
    let listing = text(&grid.argus(&["runs"]));
    let line = listing.lines().find(|l| l.starts_with(&run_id)).unwrap_or_else(|| panic!("{listing}"));
    assert!(line.contains(" cancelled "), "argus runs says so: {line}");
    assert!(grid.store(async |s| s.open_attempts().await.unwrap()).is_empty(), "nothing of it is left to run");
    // The attempts that were running stop, and their devices are free.
    wait_for_idle(&grid.url, 2, Duration::from_secs(3));
    println!("recovery: client SIGTERM: devices idle {:.2} s after the signal", at.elapsed().as_secs_f64());
    let finished = grid.log(&run_id).len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(grid.log(&run_id).len(), finished, "nothing more of the run ran");
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_client_that_vanishes_leaves_no_orphan_run() {
    let mut grid = Grid::start("vanished-client", 1, 2, database(None));
    grid.client_grace = 2;
    grid.coordinator = None;
    grid.start_coordinator();
    wait_for_idle(&grid.url, 2, Duration::from_secs(20));
    let mut client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 1);
    client.kill().unwrap();
    client.wait().unwrap();
    let at = Instant::now();
    let deadline = at + Duration::from_secs(10);
    loop {
        let run = grid.store(async |s| s.get_run(&run_id).await.unwrap());
        if run.result.as_deref() == Some("cancelled") {
            break;
        }
        assert!(Instant::now() < deadline, "the orphaned run was never cancelled");
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("recovery: client SIGKILL: its run cancelled {:.2} s later (grace 2 s)", at.elapsed().as_secs_f64());
    wait_for_idle(&grid.url, 2, Duration::from_secs(3));
    // A detached run is not an orphan.
    let detached = grid.run(&["--detach"]);
    let (code, printed) = finish(detached);
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains("detached"), "{printed}");
    let run_id = grid.run_id();
    std::thread::sleep(Duration::from_secs(4));
    let run = grid.store(async |s| s.get_run(&run_id).await.unwrap());
    assert_ne!(run.result.as_deref(), Some("cancelled"), "a detached run goes on without a client");
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_run_whose_devices_are_all_quarantined_says_why_and_ends() {
    let grid = Grid::start("quarantined", 1, 2, database(None));
    let client = grid.run(&["--wait-for-devices", "3"]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 1);
    let mut devices = [&grid.workers[0].1[0], &grid.workers[0].1[1]].map(|p| format!("w0/{p}"));
    devices.sort();
    let [a, b] = devices;
    for device in [&a, &b] {
        let output = grid.argus(&["devices", "quarantine", device, "--reason", "cracked screen"]);
        assert!(output.status.success(), "{}", text(&output));
    }
    let at = Instant::now();
    // While it waits, the dashboard says why.
    let page = loop {
        let (_, page) = http_get(&grid.http, &format!("/runs/{run_id}"));
        if page.contains("Waiting for devices") || at.elapsed() > Duration::from_secs(3) {
            break page;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(page.contains("<b>Waiting for devices:</b> every device is out:"), "{page}");
    assert!(page.contains("quarantined (cracked screen)"), "{page}");
    let (code, printed) = finish(client);
    assert_eq!(code, Some(2), "{printed}");
    let why =
        format!("waiting: every device is out: {a} quarantined (cracked screen), {b} quarantined (cracked screen)");
    assert!(printed.contains(&why), "{printed}");
    assert!(printed.contains("no device could take the run's cases for 3 s"), "{printed}");
    println!("recovery: all devices quarantined: the client gave up after {:.2} s", at.elapsed().as_secs_f64());
    let run = grid.store(async |s| s.get_run(&run_id).await.unwrap());
    assert_eq!(run.result.as_deref(), Some("cancelled"));
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn an_app_that_dies_and_comes_back_after_the_grace_costs_a_rerun() {
    let mut grid = Grid::start("app-relaunch", 1, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 2);
    // Into the device's next attempt (~0.9 s each), past its first call: an
    // app that is down before an attempt's first call is waited for, and
    // that attempt runs on the app once it is back, costing nothing.
    std::thread::sleep(Duration::from_millis(300));
    let port = grid.workers[0].1[0];
    grid.sims.remove(&port);
    let at = Instant::now();
    std::thread::sleep(Duration::from_secs(4));
    grid.sims.insert(port, Killed(sim(port)));
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    let log = assert_whole(&grid, &run_id);
    taken_back(&log, &format!("w0/{port}"), "app killed (back after 4 s)", at);
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_hung_app_is_given_up_and_its_case_runs_elsewhere() {
    let grid = Grid::start("hung-app", 1, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 2);
    let hung = &grid.sims[&grid.workers[0].1[0]].0;
    signal(hung, "STOP");
    let at = Instant::now();
    let (code, printed) = finish(client);
    signal(hung, "CONT");
    assert_eq!(code, Some(0), "{printed}");
    let log = assert_whole(&grid, &run_id);
    // The attempt on the frozen app ends (its call times out, or the app
    // is taken for gone), and its case gets its result on the other device.
    let device = format!("w0/{}", grid.workers[0].1[0]);
    let since_ms = now_ms() - at.elapsed().as_millis() as i64;
    let hit = log
        .iter()
        .filter(|r| r.device_id.as_deref() == Some(device.as_str()) && r.finished_at.is_some_and(|t| t > since_ms))
        .find(|r| r.infrastructure == 1 || r.run_case_json.as_deref().is_some_and(|l| l.contains("\"failed\"")))
        .unwrap_or_else(|| panic!("no attempt on the frozen app ended: {log:?}"));
    let done = log
        .iter()
        .filter(|r| r.case_id == hit.case_id && r.device_id.as_deref() != Some(device.as_str()))
        .filter_map(|r| r.finished_at)
        .max()
        .expect("the case ran again elsewhere");
    println!(
        "recovery: app frozen (SIGSTOP): its case {} done on another device {:.2} s after the freeze",
        hit.case_id,
        (done - since_ms) as f64 / 1000.0
    );
}

/// The `argus devices` line of one device.
fn device_line(grid: &Grid, device: &str) -> String {
    let listing = text(&grid.argus(&["devices"]));
    listing
        .lines()
        .find(|l| l.starts_with(device))
        .unwrap_or_else(|| panic!("{device} not listed: {listing}"))
        .to_owned()
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn operators_decisions_outlive_worker_and_coordinator_restarts() {
    let mut grid = Grid::start("fleet", 1, 2, database(None));
    let ports = grid.workers[0].1.clone();
    let device = format!("w0/{}", ports[0]);
    for args in
        [&["devices", "quarantine", device.as_str(), "--reason", "cracked screen"][..], &["devices", "drain", "w0"]]
    {
        let output = grid.argus(args);
        assert!(output.status.success(), "{}", text(&output));
    }
    let draining = |grid: &Grid| {
        let fleet = grid.store(async |s| s.fleet_memory("w0").await.unwrap());
        (fleet.draining, fleet.quarantined)
    };
    assert_eq!(draining(&grid), (true, vec![(device.clone(), "cracked screen".to_owned())]));
    // The worker restarts, then the coordinator: nothing operators said is lost.
    grid.workers[0].0.0.kill().unwrap();
    grid.workers[0].0.0.wait().unwrap();
    grid.workers[0].0 = grid.worker("w0", &ports);
    std::thread::sleep(Duration::from_millis(500));
    let line = device_line(&grid, &device);
    assert!(line.contains(" quarantined ") && line.ends_with(" cracked screen"), "the state and why: {line}");
    grid.coordinator = None;
    grid.start_coordinator();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text(&grid.argus(&["devices"])).contains(&device) {
        assert!(Instant::now() < deadline, "the worker never came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let line = device_line(&grid, &device);
    assert!(line.contains(" quarantined ") && line.ends_with(" cracked screen"), "the state and why: {line}");
    assert!(draining(&grid).0, "still drained after the restart");
    // A drained worker runs nothing: the run waits, and says why.
    let client = grid.run(&["--wait-for-devices", "2"]);
    let (code, printed) = finish(client);
    assert_eq!(code, Some(2), "{printed}");
    assert!(printed.contains(&format!("{device} quarantined (cracked screen)")), "{printed}");
    assert!(printed.contains(&format!("w0/{} draining", ports[1])), "{printed}");
    for args in [&["devices", "release", device.as_str()][..], &["devices", "resume", "w0"]] {
        let output = grid.argus(args);
        assert!(output.status.success(), "{}", text(&output));
    }
    assert_eq!(draining(&grid), (false, vec![]));
    wait_for_idle(&grid.url, 2, Duration::from_secs(5));

    // A slot that says android, whose app says ios, is flagged and runs nothing.
    let port = free_port();
    let _wrong = Killed(spawn(
        &["worker", "--coordinator", &grid.url, "--name", "w9", "--ports", &port.to_string(), "--platform", "android"],
        &grid.dir,
    ));
    grid.sims.insert(port, Killed(sim(port)));
    let flagged = format!("w9/{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listing = text(&grid.argus(&["devices"]));
        if listing.lines().any(|l| l.starts_with(&flagged) && l.contains(" mismatched ")) {
            break;
        }
        assert!(Instant::now() < deadline, "{listing}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        device_line(&grid, &flagged)
            .ends_with(" its slot is android but its app says ios: fix the slot's platform or the app it runs"),
        "{}",
        device_line(&grid, &flagged)
    );
    let client = grid.run(&["--on-platform", "android", "--wait-for-devices", "1"]);
    let (code, printed) = finish(client);
    assert_eq!(code, Some(2), "{printed}");
    assert!(printed.contains(&format!("{flagged} mismatched (its slot is android but its app says ios")), "{printed}");
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_worker_that_dials_again_keeps_its_name_and_its_devices_ids() {
    use argus_proto::grpc::{self, worker_message, workers_client::WorkersClient};
    let grid = Grid::start("redial", 1, 1, database(None));
    let runtime = runtime();
    runtime.block_on(async {
        let register = |name: &str| grpc::WorkerMessage {
            kind: Some(worker_message::Kind::Register(grpc::Register {
                worker_id_prefix: name.into(),
                devices: vec![grpc::Device {
                    slot: "s1".into(),
                    port: 1,
                    platform: "ios".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })),
        };
        let first_id = async |name: &str| {
            let mut client = WorkersClient::connect(grid.url.clone()).await.unwrap();
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tx.send(register(name)).await.unwrap();
            let mut inbound = client.link(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
            let Some(grpc::coordinator_message::Kind::Registered(registered)) =
                inbound.message().await.unwrap().unwrap().kind
            else {
                panic!("Registered first")
            };
            (registered.worker_id, tx, inbound)
        };
        // The old stream is still open (a blip the coordinator has not
        // noticed) when the worker dials again under the same name.
        let (old, _old_tx, _old_inbound) = first_id("blip").await;
        let (new, _new_tx, _new_inbound) = first_id("blip").await;
        assert_eq!((old.as_str(), new.as_str()), ("blip", "blip"), "one name, one identity");
        let mut client = WorkersClient::connect(grid.url.clone()).await.unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(register("a/b")).await.unwrap();
        let refused = client.link(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains("worker name \"a/b\": no `/`"), "{}", refused.message());
    });
    let listing = text(&grid.argus(&["devices"]));
    assert_eq!(listing.lines().filter(|l| l.starts_with("blip/s1")).count(), 1, "{listing}");
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn an_app_relaunched_again_and_again_within_the_grace_costs_reruns_not_failures() {
    let mut grid = Grid::start("relaunch-storm", 1, 2, database(None));
    let client = grid.run(&["--once"]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let port = grid.workers[0].1[0];
    let at = Instant::now();
    // Killed and launched again at once in the middle of an attempt's
    // steps (its first step done, as the device's live view says), three
    // attempts in a row: each time the driver resends the call in flight to
    // a fresh app, which it knows for another process before it does.
    let mut hit = BTreeSet::new();
    for _ in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(attempt) = live_step(&grid, "w0", port)
                && !hit.contains(&attempt.0)
                && attempt.1 == Some(0)
            {
                hit.insert(attempt.0);
                break;
            }
            assert!(Instant::now() < deadline, "no attempt of the run reached its second step");
            std::thread::sleep(Duration::from_millis(20));
        }
        grid.sims.remove(&port);
        grid.sims.insert(port, Killed(sim(port)));
    }
    let (code, printed) = finish(client);
    assert_eq!(
        code,
        Some(0),
        "no case is charged with the relaunches (--once: a failure would fail the run): {printed}"
    );
    let log = assert_whole(&grid, &run_id);
    let device = format!("w0/{port}");
    let relaunches = log
        .iter()
        .filter(|r| r.infrastructure == 1 && r.error.as_deref().is_some_and(|e| e.contains("relaunched")))
        .count();
    // A relaunch the live view saw a moment late (a loaded machine) may
    // land after the attempt's last step: that attempt stands, rightly.
    assert!((1..=3).contains(&relaunches), "a relaunch mid-attempt was recognised: {log:?}");
    taken_back(&log, &device, "app relaunched within the grace (three times)", at);
}

/// One case of about six seconds (twelve settles of half a second).
fn long_case() -> String {
    let settles = "  - app.idle: { quiet: 500 }\n".repeat(12);
    format!("---\nid: long\n---\nsteps:\n  - app.see: \"#title\"\n{settles}  - app.see: \"#title\"\n")
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_flaky_link_keeps_its_attempt_named_and_a_wrong_token_app_is_named_beside_the_right_one() {
    let mut grid = Grid::start("flaky-link", 1, 1, database(None));
    std::fs::create_dir_all(grid.dir.join("long")).unwrap();
    std::fs::write(grid.dir.join("long/long.md"), long_case()).unwrap();
    let port = grid.workers[0].1[0];
    let device = format!("w0/{port}");
    // The app dials through a link that drops: each drop closes its
    // connection before it dials again, as a flaky Wi-Fi or adb forward does.
    let links = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let proxy = links.block_on(argus_testkit::Proxy::start(format!("127.0.0.1:{port}").parse().unwrap()));
    grid.sims.remove(&port);
    grid.sims.insert(proxy.addr.port(), Killed(sim(proxy.addr.port())));
    wait_for_idle(&grid.url, 1, Duration::from_secs(20));
    let client = grid.run(&["long", "--once"]);
    let run_id = grid.run_id();
    // Drops while the attempt runs, until it is over.
    let mut cuts = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while grid.log(&run_id).is_empty() {
        assert!(Instant::now() < deadline, "the attempt never finished");
        proxy.cut();
        cuts += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "the run is green: the calls were resent to the same app ({cuts} drops): {printed}");
    let log = grid.log(&run_id);
    assert_eq!(log.len(), 1, "one attempt, kept: {log:?}");
    let attempt = &log[0];
    assert_eq!(attempt.infrastructure, 0, "{attempt:?}");
    let note = attempt.error.as_deref().unwrap_or_default();
    let reconnects: u64 = note
        .strip_prefix("the app reconnected ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the reconnects are named on the attempt: {note:?}"));
    assert!(reconnects >= 10, "{cuts} drops, {reconnects} reconnects named: {note}");
    // Named on the device too, which stays in service.
    let line = device_line(&grid, &device);
    assert!(line.contains(" idle ") && line.contains("(a flaky link)"), "{line}");
    assert!(!line.contains("quarantined"), "{line}");
    println!("flaky link: {cuts} drops, the attempt kept with {reconnects} reconnects named");

    // A second app with a wrong token dials a worker whose right app is
    // attached: named on the device and in the API while the right one runs.
    let right = free_port();
    let _worker = Killed(spawn(
        &["worker", "--coordinator", &grid.url, "--name", "w1", "--ports", &right.to_string(), "--app-token", "right"],
        &grid.dir,
    ));
    let with_token = |token: &str| {
        let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
        let args = ["sim", "--model", model.to_str().unwrap(), "--port", &right.to_string(), "--token", token];
        Killed(spawn(&args, &grid.dir))
    };
    let _app = with_token("right");
    let _intruder = with_token("wrong");
    let named = format!("an app connected on {right} but never answered auth (wrong token?)");
    let wrong = format!("w1/{right}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line =
            text(&grid.argus(&["devices"])).lines().find(|l| l.starts_with(&wrong)).unwrap_or_default().to_owned();
        if line.contains(" idle ") && line.contains(&named) {
            break;
        }
        assert!(Instant::now() < deadline, "never named beside the right app: {line}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, fleet) = http_get(&grid.http, "/api/v1/fleet");
    assert!(fleet.contains(&format!("\"app_problem\":\"{named}\"")), "{fleet}");
    // The right app runs cases meanwhile, and gets every call.
    let first_run = run_id;
    let client = grid.run(&["--once"]);
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    let run_id = grid.run_id();
    assert_ne!(run_id, first_run);
    let log = grid.log(&run_id);
    assert!(log.iter().any(|r| r.device_id.as_deref() == Some(wrong.as_str())), "{log:?}");
    assert!(log.iter().all(|r| r.infrastructure == 0), "{log:?}");
}

/// What a device's live view shows it running: the attempt (case and
/// number) and the index of its last finished step. Reading it is what
/// makes the worker send it.
fn live_step(grid: &Grid, worker: &str, port: u16) -> Option<((String, u64), Option<u64>)> {
    let (_, body) = http_get(&grid.http, &format!("/api/v1/fleet/{worker}/{port}/screen"));
    let view: serde_json::Value = serde_json::from_str(&body).ok()?;
    let case = view["case_id"].as_str()?.to_owned();
    Some(((case, view["attempt"].as_u64()?), view["step_index"].as_u64()))
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn two_apps_on_one_port_are_named_and_the_run_goes_on_elsewhere() {
    let mut grid = Grid::start("two-apps", 1, 2, database(None));
    let port = grid.workers[0].1[0];
    let client = grid.run(&["--once"]);
    let run_id = grid.run_id();
    // A second app dials the same port, both connections open: each hello
    // replaces the other's connection, again and again.
    let second = Killed(sim(port));
    let (code, printed) = finish(client);
    drop(second);
    assert_eq!(code, Some(0), "the run is green on the other device: {printed}");
    let log = assert_whole(&grid, &run_id);
    let named = format!("two apps seem to dial port {port}: their connections replaced each other");
    assert!(
        log.iter().any(|r| r.infrastructure == 1 && r.error.as_deref().is_some_and(|e| e.contains(&named))),
        "{log:?}"
    );
    grid.sims.remove(&port);
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_worker_stopped_with_sigterm_finishes_its_attempts_first() {
    let mut grid = Grid::start("drain-worker", 2, 1, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let had = grid.log(&run_id).iter().filter(|r| r.worker_id.as_deref() == Some("w0")).count();
    let at = Instant::now();
    signal(&grid.workers[0].0.0, "TERM");
    let status = grid.workers[0].0.0.wait().unwrap();
    let stopped = at.elapsed();
    let exited_ms = now_ms();
    assert!(status.success(), "the worker stops cleanly: {status:?}");
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    let log = assert_whole(&grid, &run_id);
    let from_w0: Vec<&LogRow> = log.iter().filter(|r| r.worker_id.as_deref() == Some("w0")).collect();
    // A lease the coordinator granted with the worker's last result, before
    // its Stopping arrived, crosses it: handed back unstarted (`is
    // stopping`) or taken back at its GoingAway (`went away`), and run
    // elsewhere (the run is whole). What it was running is never cut.
    let crossed = |r: &&&LogRow| {
        matches!(r.error.as_deref(), Some("the worker is stopping" | "the worker went away"))
            && r.run_case_json.is_none()
    };
    let ran: Vec<&&LogRow> = from_w0.iter().filter(|r| !crossed(r)).collect();
    assert!(ran.iter().all(|r| r.infrastructure == 0), "its attempts finished, none was cut: {from_w0:?}");
    assert!(ran.len() > had, "the attempt it was running was recorded");
    // Once its last attempt is in, the coordinator ends the stream at its
    // GoingAway: the worker does not sit out its 2 s drain timeout.
    let last = from_w0.iter().filter_map(|r| r.finished_at).max().unwrap();
    assert!(exited_ms - last < 1_500, "exited {} ms after its last result", exited_ms - last);
    println!("recovery: worker SIGTERM: it finished its attempt and stopped after {:.2} s", stopped.as_secs_f64());
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn a_coordinator_stopped_with_sigterm_commits_and_exits_and_the_run_goes_on_after() {
    let mut grid = Grid::start("stop-coordinator", 1, 2, database(None));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let at = Instant::now();
    let mut coordinator = grid.coordinator.take().unwrap();
    signal(&coordinator.0, "TERM");
    let status = coordinator.0.wait().unwrap();
    let stopped = at.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(stopped < Duration::from_secs(10), "stopped after {stopped:?}");
    println!("recovery: coordinator SIGTERM: it stopped after {:.2} s", stopped.as_secs_f64());
    grid.start_coordinator();
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "{printed}");
    assert_whole(&grid, &run_id);
}

/// The status of a GET of `/healthz`, or 0 when nothing answers.
fn health(http: &str) -> u16 {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(http) else { return 0 };
    let _ = write!(stream, "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn wait_for_health(http: &str, status: u16, within: Duration) -> Duration {
    let started = Instant::now();
    while health(http) != status {
        assert!(started.elapsed() < within, "{http} never answered {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

#[test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
fn two_coordinators_on_one_postgres_are_one_active_and_a_standby_that_takes_over() {
    let database = database(None);
    let dir = temp_dir("standby");
    std::fs::create_dir_all(dir.join("cases")).unwrap();
    std::fs::write(dir.join("cases/step.md"), SUITE).unwrap();
    let ends: Vec<(String, String)> =
        (0..2).map(|_| (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()))).collect();
    let coordinator = |(listen, http): &(String, String)| {
        // No flag: on Postgres every coordinator competes for the lock.
        let args = ["coordinator", "--database-url", &database, "--listen", listen, "--http", http];
        Killed(spawn(&args, &dir))
    };
    let active = coordinator(&ends[0]);
    wait_for_health(&ends[0].1, 200, Duration::from_secs(20));
    let standby = coordinator(&ends[1]);
    wait_for_health(&ends[1].1, 503, Duration::from_secs(20));
    let url = database.clone();
    let holders = move || {
        runtime().block_on(async {
            let store = Store::open(&url).await.unwrap();
            let holders = store.lock_holders().await.unwrap();
            store.close().await;
            holders
        })
    };
    assert_eq!(holders().len(), 1, "one coordinator active, one lock held");
    // Workers and the client know both; they find the active one.
    let urls = format!("http://{},http://{}", ends[0].0, ends[1].0);
    let mut grid = Grid {
        dir,
        url: urls.clone(),
        listen: ends[0].0.clone(),
        http: ends[0].1.clone(),
        database,
        client_grace: 60,
        coordinator: Some(active),
        workers: Vec::new(),
        sims: BTreeMap::new(),
    };
    for w in 0..2 {
        let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
        let worker = grid.worker(&format!("w{w}"), &ports);
        grid.workers.push((worker, ports.clone()));
        for port in ports {
            grid.sims.insert(port, Killed(sim(port)));
        }
    }
    wait_for_idle(&urls, 4, Duration::from_secs(30));
    let client = grid.run(&[]);
    let run_id = grid.run_id();
    grid.wait_for_finished(&run_id, 3);
    let (had, at) = (results(&grid, &run_id), Instant::now());
    grid.coordinator = None;
    let took = wait_for_health(&ends[1].1, 200, Duration::from_secs(10));
    println!("takeover: the standby served {:.2} s after the active coordinator was killed", took.as_secs_f64());
    assert_eq!(holders().len(), 1, "the standby holds the lock now");
    recovered(&grid, &run_id, "active coordinator SIGKILL, standby takes over", had, at);
    let (code, printed) = finish(client);
    assert_eq!(code, Some(0), "the run passed, so CI is green: {printed}");
    assert!(printed.contains("16/16 passed"), "{printed}");
    assert_whole(&grid, &run_id);
    drop(standby);
}
