//! The grid over real sockets: a coordinator on SQLite, workers with driver
//! slots, simulated apps dialing them, and a client submitting a run over
//! gRPC and watching it to the end.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::collections::HashMap;
use std::time::Duration;

use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_proto::run::{CaseResult, RunCase, RunManifest};
use argus_store::Store;
use argus_testkit::{Grid, GridOptions, Proxy, Sim, free_port, http_get, wait_for_devices};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio_util::sync::CancellationToken;

/// `n` cases: a matrix over the shop's screens, a few seconds of work.
fn suite(n: usize) -> Vec<grpc::CaseFile> {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let source = format!(
        "---\nid: browse\nmatrix: {{ n: [{}] }}\n---\nsteps:\n  - app.press: \"#feed\"\n  - app.wait: Feed\n  - app.see: \"Bo's chair\"\n  - app.back\n",
        items.join(", ")
    );
    vec![grpc::CaseFile { path: "cases/browse.md".into(), source }]
}

/// Submits and watches to the end: every finished attempt, and the manifest.
async fn run_to_end(url: &str, request: grpc::SubmitRequest) -> (Vec<RunCase>, Vec<String>, RunManifest) {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let submitted = runs.submit(request).await.unwrap().into_inner();
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: submitted.run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    let (mut lines, mut infra) = (Vec::new(), Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let Ok(update) = tokio::time::timeout_at(deadline, updates.message()).await else {
            let mut fleet = grpc::fleet_client::FleetClient::connect(url.to_owned()).await.unwrap();
            let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner();
            panic!("the run did not end in 120 s; so far {lines:?}, taken back {infra:?}; the fleet: {devices:?}");
        };
        let update = update.unwrap().unwrap();
        match update.kind {
            Some(run_update::Kind::Finished(finished)) if finished.infrastructure_failure => {
                infra.push(finished.infrastructure_reason)
            }
            Some(run_update::Kind::Finished(finished)) => {
                let mut line: RunCase = serde_json::from_str(&finished.run_case_json).unwrap();
                line.device = finished.device.as_ref().map(argus_proto::run::RunDevice::from);
                lines.push(line)
            }
            Some(run_update::Kind::RunFinished(done)) => {
                return (lines, infra, serde_json::from_str(&done.manifest_json).unwrap());
            }
            _ => {}
        }
    }
}

fn request(cases: Vec<grpc::CaseFile>) -> grpc::SubmitRequest {
    grpc::SubmitRequest {
        cases,
        selector: Some(grpc::Selector { platform: "ios".into(), ..Default::default() }),
        retries: 1,
        project: "shop".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_cases_sharded_over_eight_devices_on_two_workers() {
    forty_cases_on(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
async fn forty_cases_sharded_over_eight_devices_on_two_workers_on_postgres() {
    forty_cases_on(true).await;
}

async fn forty_cases_on(postgres: bool) {
    let database_url = argus_testkit::database_url(postgres, "argus_grid").await;
    let mut grid = Grid::on(&database_url).await;
    grid.worker("w1", 4);
    grid.worker("w2", 4);
    wait_for_devices(&grid.url, 8).await;
    let (lines, infra, manifest) = run_to_end(&grid.url, request(suite(40))).await;
    assert!(infra.is_empty(), "{infra:?}");
    assert_eq!(lines.len(), 40, "exactly one result per case");
    let mut per_case: HashMap<&str, usize> = HashMap::new();
    let mut per_device: HashMap<String, usize> = HashMap::new();
    for line in &lines {
        *per_case.entry(&line.id).or_default() += 1;
        assert_eq!(line.result, CaseResult::Passed, "{}", line.to_line());
        let device = line.device.as_ref().unwrap().id.as_str().to_owned();
        *per_device.entry(device).or_default() += 1;
    }
    assert_eq!(per_case.len(), 40);
    assert!(per_device.len() >= 6, "sharded over the fleet: {per_device:?}");
    let totals = manifest.totals.unwrap();
    assert_eq!((totals.cases, totals.passed, totals.failed), (40, 40, 0));
    assert_eq!(manifest.platform.as_deref(), Some("ios"));

    // What the client was told and what the database holds agree.
    let store = Store::open(&database_url).await.unwrap();
    let run = store.list_runs(1).await.unwrap().remove(0);
    let stored: Vec<RunCase> = store.run_lines(&run.id).await.unwrap();
    let key = |l: &RunCase| (l.id.clone(), l.attempt, l.result, l.device.as_ref().map(|d| d.id.clone()));
    let mut told: Vec<_> = lines.iter().map(key).collect();
    let mut held: Vec<_> = stored.iter().map(key).collect();
    told.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    held.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_eq!(told, held);
    let stored_manifest: RunManifest = serde_json::from_str(&run.manifest_json).unwrap();
    assert_eq!(stored_manifest.totals, manifest.totals);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_no_device_matches_is_refused_naming_the_fleet() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 1);
    wait_for_devices(&grid.url, 1).await;
    let mut runs = RunsClient::connect(grid.url.clone()).await.unwrap();
    let mut request = request(suite(2));
    request.selector = Some(grpc::Selector { platform: "android".into(), ..Default::default() });
    let status = runs.submit(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(status.message().starts_with("no device matches platform=android; the fleet: w1/"), "{}", status.message());
    assert!(status.message().contains(" ios (Shop)"), "{}", status.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_checks_what_it_is_sent_whoever_sends_it() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 1);
    wait_for_devices(&grid.url, 1).await;
    let mut runs = RunsClient::connect(grid.url.clone()).await.unwrap();
    let mut refused = async |request: grpc::SubmitRequest| {
        let status = runs.submit(request).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        status.message().to_owned()
    };
    let unknown = vec![grpc::CaseFile {
        path: "cases/x.md".into(),
        source: "---\nid: x\n---\nsteps:\n  - app.teleport: home\n".into(),
    }];
    assert_eq!(
        refused(request(unknown)).await,
        "cases/x.md:5: app.teleport is not a step: lynkeus has no command teleport, and the project declares no macro for it"
    );
    let message = refused(grpc::SubmitRequest { config_json: "{not json".into(), ..request(suite(1)) }).await;
    assert!(message.starts_with("config_json: not JSON"), "{message}");
    let message = refused(grpc::SubmitRequest { retries: u32::MAX, ..request(suite(1)) }).await;
    assert_eq!(message, "retries 4294967295: a run may retry a case 10 times at most");
    let climbing = vec![grpc::CaseFile { path: "../../../../etc/x.md".into(), ..suite(1).remove(0) }];
    let message = refused(request(climbing)).await;
    assert_eq!(message, "../../../../etc/x.md: a case file's path may not climb out of the suite with `..`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_case_is_retried_and_both_attempts_are_reported() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 2);
    wait_for_devices(&grid.url, 2).await;
    let red = grpc::CaseFile {
        path: "cases/red.md".into(),
        source: "---\nid: red\n---\nsteps:\n  - app.see: { text: Goodbye, timeoutMs: 100 }\n".into(),
    };
    let (lines, _, manifest) = run_to_end(&grid.url, request(vec![red])).await;
    let attempts: Vec<(u32, CaseResult)> = lines.iter().map(|l| (l.attempt, l.result)).collect();
    assert_eq!(attempts, [(1, CaseResult::Failed), (2, CaseResult::Failed)]);
    assert_eq!(manifest.totals.unwrap().failed, 1);
}

/// `n` cases of about `ms` each.
fn slow_suite(n: usize, ms: u64) -> Vec<grpc::CaseFile> {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let source = format!(
        "---\nid: slow\nmatrix: {{ n: [{}] }}\n---\nsteps:\n  - app.see: \"#title\"\n  - app.wait: {ms}\n  - app.see: \"#title\"\n",
        items.join(", ")
    );
    vec![grpc::CaseFile { path: "cases/slow.md".into(), source }]
}

fn check_one_final_result_each(lines: &[RunCase], cases: usize) {
    let mut last: HashMap<&str, &RunCase> = HashMap::new();
    for line in lines {
        let previous = last.insert(&line.id, line);
        if let Some(previous) = previous {
            assert!(line.attempt > previous.attempt, "{} reported twice for attempt {}", line.id, line.attempt);
        }
    }
    assert_eq!(last.len(), cases, "every case has a result");
    assert!(last.values().all(|l| l.result == CaseResult::Passed), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_loses_nothing() {
    let mut grid = Grid::start().await;
    // w1's link runs in a task the test can abort, as a kill would end it.
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let config = WorkerConfig {
        coordinator: grid.url.clone(),
        name: "w1".into(),
        host: "127.0.0.1".into(),
        app_token: None,
        token: None,
        tls_ca: None,
        slots: ports.iter().map(|p| SlotConfig::for_port(*p, "ios")).collect(),
    };
    let doomed = tokio::spawn(link::run(config, CancellationToken::new()));
    for port in ports {
        grid.sims.push(Sim::start(port, None));
    }
    grid.worker("w2", 2);
    wait_for_devices(&grid.url, 4).await;
    let url = grid.url.clone();
    let run = tokio::spawn(async move { run_to_end(&url, request(slow_suite(12, 400))).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed_at = tokio::time::Instant::now();
    doomed.abort();
    let (lines, infra, manifest) = run.await.unwrap();
    assert!(killed_at.elapsed() < Duration::from_secs(30), "the rest finished within 30 s");
    assert!(!infra.is_empty(), "the killed worker's attempts were taken back");
    check_one_final_result_each(&lines, 12);
    assert!(
        lines.iter().all(|l| l.device.as_ref().unwrap().worker == "w2" || l.device.as_ref().unwrap().worker == "w1")
    );
    assert_eq!(manifest.totals.unwrap().passed, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_leaves_for_good_hands_its_attempt_to_another_device() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 2);
    wait_for_devices(&grid.url, 2).await;
    let url = grid.url.clone();
    let run = tokio::spawn(async move { run_to_end(&url, request(slow_suite(4, 1_500))).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // One app goes away mid-attempt and never comes back.
    grid.sims[0].stop();
    let (lines, infra, _) = run.await.unwrap();
    assert!(!infra.is_empty(), "its attempt was an infrastructure failure");
    check_one_final_result_each(&lines, 4);
    let mut fleet = grpc::fleet_client::FleetClient::connect(grid.url.clone()).await.unwrap();
    let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
    let states: Vec<i32> = devices.iter().filter_map(|d| d.device.as_ref().map(|d| d.state)).collect();
    assert!(states.contains(&(grpc::DeviceState::Disconnected as i32)), "the device is marked: {states:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_relaunched_within_the_grace_is_the_infrastructure_not_a_failed_case() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 1);
    wait_for_devices(&grid.url, 1).await;
    let port = grid.sims[0].port();
    let source = "---\nid: feed\n---\nsteps:\n  - app.press: \"#feed\"\n  - app.idle: { quiet: 1500, timeoutMs: 5000 }\n  - app.see: \"Bo's chair\"\n";
    let cases = vec![grpc::CaseFile { path: "cases/feed.md".into(), source: source.into() }];
    let url = grid.url.clone();
    // No retries: a relaunch charged to the case would fail the run.
    let run = tokio::spawn(async move { run_to_end(&url, grpc::SubmitRequest { retries: 0, ..request(cases) }).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Killed mid-call and launched again well within the driver's 2.5 s
    // grace: the call is resent to a fresh app, at its first screen.
    grid.sims[0].stop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    grid.sims.push(Sim::start(port, None));
    let (lines, infra, manifest) = run.await.unwrap();
    assert_eq!(infra.len(), 1, "{infra:?} {lines:?}");
    assert!(infra[0].contains("the app was relaunched during the attempt"), "{infra:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!((lines[0].attempt, lines[0].result), (1, CaseResult::Passed), "it ran again as the same attempt");
    assert_eq!(manifest.totals.unwrap().failed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_whose_connection_blips_mid_call_carries_on() {
    // The app dials through a proxy whose connections can be cut: the same
    // app, on the same screen, comes back.
    let infra = blip_mid_feed(|port| Sim::start(port, None)).await;
    assert!(infra.is_empty(), "a blip is not a relaunch: {infra:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blip_after_a_press_navigated_is_not_a_relaunch_even_unannounced() {
    // An agent that says its route only in its hello, as some real ones do:
    // it comes back on Feed, where its own press took it, not on Home where
    // its last hello was. Its trace says it is the same process.
    let unannounced = |port| Sim::start_altered(port, "native: false\n", "native: false\nnavigationEvents: false\n");
    let infra = blip_mid_feed(unannounced).await;
    assert!(infra.is_empty(), "a blip is not a relaunch, whatever route it comes back on: {infra:?}");
}

/// One device whose app (started by `app` on the port it dials) goes
/// through a proxy whose connections are cut in the middle of a case that
/// presses into the feed: the attempt's infrastructure failures, once the
/// case passed on its first attempt.
async fn blip_mid_feed(app: impl FnOnce(u16) -> Sim) -> Vec<String> {
    let mut grid = Grid::start().await;
    let port = free_port();
    grid.worker_on("w1", &[port]);
    let proxy = Proxy::start(format!("127.0.0.1:{port}").parse().unwrap()).await;
    grid.sims.push(app(proxy.addr.port()));
    wait_for_devices(&grid.url, 1).await;
    let source = "---\nid: feed\n---\nsteps:\n  - app.press: \"#feed\"\n  - app.idle: { quiet: 1500, timeoutMs: 5000 }\n  - app.see: \"Bo's chair\"\n";
    let cases = vec![grpc::CaseFile { path: "cases/feed.md".into(), source: source.into() }];
    let url = grid.url.clone();
    let run = tokio::spawn(async move { run_to_end(&url, grpc::SubmitRequest { retries: 0, ..request(cases) }).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    proxy.cut();
    let (lines, infra, _) = run.await.unwrap();
    assert_eq!((lines.len(), lines[0].result), (1, CaseResult::Passed), "{lines:?}");
    infra
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_share_one_fleet_and_both_finish() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 3);
    wait_for_devices(&grid.url, 3).await;
    let (a, b) = (grid.url.clone(), grid.url.clone());
    let first = tokio::spawn(async move { run_to_end(&a, request(suite(10))).await });
    let second = tokio::spawn(async move { run_to_end(&b, request(slow_suite(6, 100))).await });
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    check_one_final_result_each(&first.0, 10);
    check_one_final_result_each(&second.0, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_out_workers_and_clients_without_them() {
    let tokens =
        argus_coordinator::Tokens { worker: Some("w-secret".into()), client: Some("c-secret".into()), read: None };
    let coordinator = argus_coordinator::Options { tokens, ..Default::default() };
    let mut grid = Grid::serve(GridOptions { coordinator, ..GridOptions::default() }).await;
    let url = grid.url.clone();
    let mut start_worker = |name: &str, token: Option<&str>| {
        let port = free_port();
        let config = grid.worker_config(name, vec![SlotConfig::for_port(port, "ios")]);
        grid.spawn_worker(WorkerConfig { token: token.map(str::to_owned), ..config });
        Sim::start(port, None)
    };
    let _intruder = start_worker("intruder", Some("guess"));
    let _anonymous = start_worker("anonymous", None);
    let _member = start_worker("member", Some("w-secret"));

    use argus_proto::auth::Bearer;
    let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().connect().await.unwrap();
    let mut anonymous = grpc::fleet_client::FleetClient::new(channel.clone());
    let refused = anonymous.list(grpc::ListFleetRequest {}).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    assert!(refused.message().starts_with("the client token is missing"), "{}", refused.message());
    let mut wrong =
        grpc::fleet_client::FleetClient::with_interceptor(channel.clone(), Bearer::new(Some("guess")).unwrap());
    assert!(
        wrong.list(grpc::ListFleetRequest {}).await.unwrap_err().message().starts_with("the client token is wrong")
    );

    let mut fleet = grpc::fleet_client::FleetClient::with_interceptor(channel, Bearer::new(Some("c-secret")).unwrap());
    for _ in 0..100 {
        if !fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().workers.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Time for the others to try, and be refused.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let workers = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().workers;
    let names: Vec<&str> = workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(names, ["member"], "only the worker with the token joined");
}

#[tokio::test]
async fn drivers_beyond_loopback_need_an_app_token() {
    let config = WorkerConfig {
        coordinator: "http://127.0.0.1:1".into(),
        name: "open".into(),
        host: "0.0.0.0".into(),
        app_token: None,
        token: None,
        tls_ca: None,
        slots: vec![SlotConfig::for_port(free_port(), "android")],
    };
    let error = link::run(config, CancellationToken::new()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the drivers listen on 0.0.0.0, beyond this machine: give the apps' token (--app-token or LYNKEUS_TOKEN)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_before_hook_sends_attempts_elsewhere_and_quarantines_its_device() {
    let mut grid = Grid::start().await;
    let port = free_port();
    let mut broken = SlotConfig::for_port(port, "ios");
    broken.hooks.before = Some("echo 'simulator {udid} on {port} will not boot' >&2; exit 3".into());
    let config = WorkerConfig {
        coordinator: grid.url.clone(),
        name: "broken".into(),
        host: "127.0.0.1".into(),
        app_token: None,
        token: None,
        tls_ca: None,
        slots: vec![broken],
    };
    let cancel = CancellationToken::new();
    tokio::spawn(link::run(config, cancel.clone()));
    grid.workers.push(cancel);
    grid.sims.push(Sim::start(port, None));
    grid.worker("good", 1);
    wait_for_devices(&grid.url, 2).await;
    let (lines, infra, _) = run_to_end(&grid.url, request(suite(6))).await;
    check_one_final_result_each(&lines, 6);
    assert!(lines.iter().all(|l| l.device.as_ref().unwrap().worker == "good"), "every case ran on the good device");
    assert!(infra.iter().any(|i| i.contains("will not boot")), "{infra:?}");
    let mut fleet = grpc::fleet_client::FleetClient::connect(grid.url.clone()).await.unwrap();
    let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
    let broken = devices.iter().find(|d| d.worker == "broken").unwrap();
    assert!(broken.quarantined, "{broken:?}");
    assert!(broken.quarantine_reason.starts_with("3 infrastructure failures in a row"), "{}", broken.quarantine_reason);
    // An operator releases it.
    fleet.release(grpc::ReleaseRequest { device_id: broken.id.clone() }).await.unwrap();
    let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
    assert!(!devices.iter().find(|d| d.worker == "broken").unwrap().quarantined);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_is_cut_short_and_frees_the_fleet() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 2);
    wait_for_devices(&grid.url, 2).await;
    let mut runs = RunsClient::connect(grid.url.clone()).await.unwrap();
    let submitted = runs.submit(request(slow_suite(8, 1_000))).await.unwrap().into_inner();
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: submitted.run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    tokio::time::sleep(Duration::from_millis(400)).await;
    runs.cancel(grpc::CancelRequest { run_id: submitted.run_id.clone() }).await.unwrap();
    // The workers stop the attempts at once (each had most of a second of
    // steps left), and their devices are idle again.
    let cancelled = tokio::time::Instant::now();
    let mut fleet = grpc::fleet_client::FleetClient::connect(grid.url.clone()).await.unwrap();
    loop {
        let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
        let idle =
            devices.iter().filter(|d| d.device.as_ref().is_some_and(|d| d.state == grpc::DeviceState::Idle as i32));
        if idle.count() == 2 {
            break;
        }
        assert!(cancelled.elapsed() < Duration::from_millis(500), "the cancelled attempts went on: {devices:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let manifest = loop {
        let update = tokio::time::timeout(Duration::from_secs(10), updates.message()).await.unwrap().unwrap().unwrap();
        if let Some(run_update::Kind::RunFinished(done)) = update.kind {
            break serde_json::from_str::<RunManifest>(&done.manifest_json).unwrap();
        }
    };
    assert!(manifest.finished_at.is_none() && manifest.totals.is_none(), "cut short: {manifest:?}");
    let missing = runs.cancel(grpc::CancelRequest { run_id: "nope".into() }).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    // The devices go on to the next run.
    let (lines, _, _) = run_to_end(&grid.url, request(suite(3))).await;
    check_one_final_result_each(&lines, 3);
}

/// A worker spoken by hand over gRPC: one device in `state`.
async fn fake_worker(
    url: &str,
    state: grpc::DeviceState,
) -> (tokio::sync::mpsc::Sender<grpc::WorkerMessage>, tonic::Streaming<grpc::CoordinatorMessage>) {
    use argus_proto::grpc::worker_message::Kind;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let hello = r#"{"protocolVersion":1,"platform":"ios","native":false,"commands":[],"app":{"name":"Shop"}}"#;
    let device = grpc::Device {
        slot: "9999".into(),
        port: 9999,
        platform: "ios".into(),
        state: state as i32,
        hello_json: hello.into(),
        ..Default::default()
    };
    let register = grpc::Register { worker_id_prefix: "fake".into(), devices: vec![device], ..Default::default() };
    tx.send(grpc::WorkerMessage { kind: Some(Kind::Register(register)) }).await.unwrap();
    let mut client = grpc::workers_client::WorkersClient::connect(url.to_owned()).await.unwrap();
    let inbound = client.link(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    (tx, inbound)
}

/// The coordinator's next message but keepalives (sent at any time).
async fn next_message(
    inbound: &mut tonic::Streaming<grpc::CoordinatorMessage>,
) -> Option<argus_proto::grpc::coordinator_message::Kind> {
    loop {
        let kind = inbound.message().await.unwrap().expect("the coordinator keeps the stream open").kind;
        if !matches!(kind, Some(argus_proto::grpc::coordinator_message::Kind::Keepalive(_))) {
            return kind;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_result_from_a_revoked_lease_is_refused() {
    use argus_proto::grpc::{coordinator_message, worker_message};
    let mut grid = Grid::start().await;
    let (tx, mut inbound) = fake_worker(&grid.url, grpc::DeviceState::Idle).await;
    let Some(coordinator_message::Kind::Registered(_)) = next_message(&mut inbound).await else {
        panic!("registered first")
    };
    let url = grid.url.clone();
    let run = tokio::spawn(async move { run_to_end(&url, request(suite(1))).await });
    let Some(coordinator_message::Kind::Lease(lease)) = next_message(&mut inbound).await else {
        panic!("then a lease")
    };
    // The fake worker is lost: its lease is taken back and the attempt queued again.
    drop(tx);
    drop(inbound);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // It comes back with the result of the lease it no longer holds.
    let (tx, mut inbound) = fake_worker(&grid.url, grpc::DeviceState::Waiting).await;
    next_message(&mut inbound).await;
    let late = format!(
        r#"{{"id":"{}","file":"cases/browse.md","attempt":1,"result":"failed","startedAt":"2026-01-01T00:00:00.000Z","ms":5,"steps":[]}}"#,
        lease.case_id
    );
    let result = grpc::AttemptResult::recorded(&lease.lease_id, &serde_json::from_str(&late).unwrap());
    tx.send(grpc::WorkerMessage { kind: Some(worker_message::Kind::Attempt(result)) }).await.unwrap();
    // A real device runs the attempt.
    grid.worker("real", 1);
    let (lines, infra, manifest) = run.await.unwrap();
    assert_eq!(infra.len(), 1, "the lost lease: {infra:?}");
    assert_eq!(lines.len(), 1, "the late result was refused: {lines:?}");
    assert_eq!(lines[0].device.as_ref().unwrap().worker, "real");
    assert_eq!(manifest.totals.unwrap().passed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_stream_to_the_client_as_they_finish() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 1);
    wait_for_devices(&grid.url, 1).await;
    let mut runs = RunsClient::connect(grid.url.clone()).await.unwrap();
    let submitted = runs.submit(request(slow_suite(1, 300))).await.unwrap().into_inner();
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: submitted.run_id, after_seq: 0 }).await.unwrap().into_inner();
    let mut steps = Vec::new();
    loop {
        let update = tokio::time::timeout(Duration::from_secs(10), updates.message()).await.unwrap().unwrap().unwrap();
        match update.kind {
            Some(run_update::Kind::Step(step)) => steps.push((step.index, step.run_step_json)),
            Some(run_update::Kind::Finished(_)) => break,
            _ => {}
        }
    }
    let indexes: Vec<u32> = steps.iter().map(|(i, _)| *i).collect();
    assert_eq!(indexes, [0, 1, 2], "each step, in order, before the attempt's end");
    assert!(steps[1].1.contains(r#""step":"app.wait 300""#), "{}", steps[1].1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_whose_failures_pass_elsewhere_is_quarantined() {
    let mut grid = Grid::start().await;
    let port = free_port();
    grid.worker_on("sick", &[port]);
    // The app on this device renders its title wrong; every case looks for it.
    grid.sims.push(Sim::start_altered(port, "Welcome to Shop", "Welcome to Sh0p"));
    grid.worker("good", 2);
    wait_for_devices(&grid.url, 3).await;
    let items: Vec<String> = (0..16).map(|i| i.to_string()).collect();
    let source = format!(
        "---\nid: title\nmatrix: {{ n: [{}] }}\n---\nsteps:\n  - app.see: {{ text: Welcome to Shop, timeoutMs: 200 }}\n  - app.wait: 400\n",
        items.join(", ")
    );
    let cases = vec![grpc::CaseFile { path: "cases/title.md".into(), source }];
    let (lines, _, manifest) = run_to_end(&grid.url, request(cases)).await;
    check_one_final_result_each(&lines, 16);
    assert_eq!(manifest.totals.unwrap().passed, 16);
    let sick: Vec<&RunCase> = lines.iter().filter(|l| l.device.as_ref().unwrap().worker == "sick").collect();
    assert!(sick.iter().all(|l| l.result == CaseResult::Failed), "the sick device passes nothing");
    // It fails fast, so it takes more cases while the first retries run
    // elsewhere; once three of them pass, it takes no more.
    assert!((3..=8).contains(&sick.len()), "it stops getting cases: {} ran there", sick.len());
    let mut fleet = grpc::fleet_client::FleetClient::connect(grid.url.clone()).await.unwrap();
    let devices = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices;
    let device = devices.iter().find(|d| d.worker == "sick").unwrap();
    assert!(device.quarantined, "{device:?}");
    assert!(
        device.quarantine_reason.starts_with("3 cases in a row failed here and passed on other devices: title[n="),
        "{}",
        device.quarantine_reason
    );
    assert!(devices.iter().filter(|d| d.worker == "good").all(|d| !d.quarantined));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_three_run_gets_three_devices_for_each_of_a_priority_one_run() {
    let mut grid = Grid::start().await;
    grid.worker("w1", 4);
    wait_for_devices(&grid.url, 4).await;
    // Every attempt that starts, in the order the coordinator started them.
    let (tx, mut starts) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    let mut runs = Vec::new();
    for (name, priority) in [("low", 1), ("high", 3)] {
        let mut client = RunsClient::connect(grid.url.clone()).await.unwrap();
        let mut submit = request(slow_suite(24, 150));
        submit.priority = priority;
        let run_id = client.submit(submit).await.unwrap().into_inner().run_id;
        let mut updates = client.watch(grpc::WatchRequest { run_id, after_seq: 0 }).await.unwrap().into_inner();
        let tx = tx.clone();
        runs.push(tokio::spawn(async move {
            while let Some(update) = updates.message().await.unwrap() {
                match update.kind {
                    Some(run_update::Kind::Started(_)) => tx.send(name).unwrap(),
                    Some(run_update::Kind::RunFinished(_)) => return,
                    _ => {}
                }
            }
        }));
    }
    drop(tx);
    for run in runs {
        tokio::time::timeout(Duration::from_secs(60), run).await.unwrap().unwrap();
    }
    let mut order = Vec::new();
    while let Some(name) = starts.recv().await {
        order.push(name);
    }
    // From the high run's first start to its last, both runs had work queued:
    // the low run got about one start in four.
    let first = order.iter().position(|n| *n == "high").unwrap();
    let last = order.iter().rposition(|n| *n == "high").unwrap();
    let low = order[first..=last].iter().filter(|n| **n == "low").count();
    let high = order[first..=last].iter().filter(|n| **n == "high").count();
    eprintln!("fair share: {high} high against {low} low");
    assert_eq!(high, 24);
    assert!((5..=12).contains(&low), "priority 3 against 1 while both wait: {high} against {low}; {order:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_scrape_shows_the_run_its_queue_and_the_fleet() {
    let mut grid = Grid::serve(GridOptions { http: true, ..GridOptions::default() }).await;
    let http_addr = grid.http();
    grid.worker("w1", 2);
    wait_for_devices(&grid.url, 2).await;
    assert_eq!(http_get(http_addr, "/healthz").await, (200, "ok\n".to_owned()));

    let mut client = RunsClient::connect(grid.url.clone()).await.unwrap();
    let run_id = client.submit(request(slow_suite(8, 300))).await.unwrap().into_inner().run_id;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, during) = http_get(http_addr, "/metrics").await;
    assert_eq!(status, 200);
    let value = |text: &str, name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let queued = value(&during, &format!("argus_queue_depth{{run=\"{run_id}\"}}"));
    assert!((1.0..=6.0).contains(&queued), "two of eight run, the rest wait: {queued}");
    assert_eq!(value(&during, "argus_leases_active"), 2.0);
    assert_eq!(value(&during, "argus_devices{state=\"busy\"}"), 2.0);

    let mut updates =
        client.watch(grpc::WatchRequest { run_id: run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    while let Some(update) = updates.message().await.unwrap() {
        if let Some(run_update::Kind::RunFinished(_)) = update.kind {
            break;
        }
    }
    let (_, after) = http_get(http_addr, "/metrics").await;
    assert!(!after.contains(&run_id), "a finished run leaves the queue gauge: {after}");
    assert_eq!(value(&after, "argus_leases_granted_total"), 8.0);
    assert_eq!(value(&after, "argus_attempt_duration_seconds_count{platform=\"ios\",result=\"passed\"}"), 8.0);
    assert_eq!(value(&after, "argus_devices{state=\"idle\"}"), 2.0);
    assert_eq!(http_get(http_addr, "/nothing").await.0, 404);
}
