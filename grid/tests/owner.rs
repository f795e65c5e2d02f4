//! The owner task in process, in milliseconds: workers are channels the
//! test reads and writes (no gRPC, no app), the store is a fresh SQLite
//! (Postgres behind a proxy where a commit's answer must be lost),
//! and time passes only when the test moves tokio's clock forward
//! ([`pass`]), so that a 20-second lease expires at once and nothing waits
//! on a fixed sleep. Each rule is tested beside its control: the same
//! scenario where the rule must not fire, so that a broken rule fails one
//! of the two.

use std::time::Duration;

use argus_grid::metrics::Metrics;
use argus_grid::owner::{self, Handle, Link, OwnerConfig};
use argus_proto::grpc::{self, coordinator_message, worker_message};
use argus_store::Store;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest the test waits for the owner task to say something: it
/// answers in milliseconds, so this only bounds a failure.
const ANSWER: Duration = Duration::from_secs(5);

/// Moves tokio's clock forward by `by` at once: every timer due in that
/// time fires (the owner's sweep, its lease and silence checks), then the
/// clock runs on in real time, so that the store's own threads are never
/// raced by a clock that leaps while they work. Before the leap, the owner
/// task has handled everything sent to it (a heartbeat is seen at the time
/// it was sent); after it, it has woken.
async fn pass(handle: &Handle, by: Duration) {
    handle.snapshot().await.unwrap();
    tokio::time::pause();
    tokio::time::advance(by).await;
    tokio::time::resume();
    handle.snapshot().await.unwrap();
}

struct Grid {
    handle: Handle,
    store: Store,
    shutdown: CancellationToken,
    owner: tokio::task::JoinHandle<()>,
}

async fn start(store: Store) -> Grid {
    start_with(store, OwnerConfig::default()).await
}

async fn start_with(store: Store, config: OwnerConfig) -> Grid {
    let shutdown = CancellationToken::new();
    let metrics = std::sync::Arc::new(Metrics::default());
    let (handle, owner) = owner::start(store.clone(), config, metrics, shutdown.clone()).await.unwrap();
    Grid { handle, store, shutdown, owner }
}

impl Grid {
    async fn stop(self) -> Store {
        self.shutdown.cancel();
        tokio::time::timeout(ANSWER, self.owner).await.expect("the owner task stops").unwrap();
        self.store
    }

    /// A detached run (no client must watch it) of one-step cases `ids`.
    async fn submit(&self, ids: &[&str], priority: u32, retries: u32) -> String {
        let cases = ids
            .iter()
            .map(|id| grpc::CaseFile {
                path: format!("cases/{id}.md"),
                source: format!("---\nid: {id}\n---\nsteps:\n  - app.back\n"),
            })
            .collect();
        let request = grpc::SubmitRequest {
            cases,
            selector: Some(grpc::Selector { platform: "ios".into(), ..Default::default() }),
            project: "shop".into(),
            priority,
            retries,
            detach: true,
            ..Default::default()
        };
        let submission = argus_grid::submit::Submission::new(request);
        argus_grid::submit::submit(&self.handle, &self.store, submission, String::new()).await.unwrap().run_id
    }

    async fn result(&self, run: &str) -> Option<String> {
        self.store.get_run(run).await.unwrap().result
    }

    /// Waits until run `run` has ended; its result.
    async fn ended(&self, run: &str) -> String {
        let deadline = tokio::time::Instant::now() + ANSWER;
        loop {
            if let Some(result) = self.result(run).await {
                return result;
            }
            assert!(tokio::time::Instant::now() < deadline, "run {run} never ended");
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// A worker as the owner task sees one: a link and the channel it is sent on.
struct Worker {
    handle: Handle,
    link: Link,
    rx: mpsc::Receiver<Result<grpc::CoordinatorMessage, tonic::Status>>,
    slots: Vec<String>,
}

const HELLO: &str = r#"{"protocolVersion":1,"platform":"ios","app":{"name":"Shop","bundleId":"com.example.shop"}}"#;

fn device(slot: &str) -> grpc::Device {
    grpc::Device {
        slot: slot.into(),
        port: 8123,
        platform: "ios".into(),
        state: grpc::DeviceState::Idle as i32,
        hello_json: HELLO.into(),
        ..Default::default()
    }
}

async fn join(grid: &Grid, name: &str, slots: &[&str]) -> Worker {
    let (tx, mut rx) = mpsc::channel(1024);
    let register = grpc::Register {
        worker_id_prefix: name.into(),
        hostname: format!("{name}.local"),
        version: "test".into(),
        devices: slots.iter().map(|s| device(s)).collect(),
        ..Default::default()
    };
    let link = grid.handle.worker_joined(register, tx).await.unwrap();
    match tokio::time::timeout(ANSWER, rx.recv()).await.unwrap().unwrap().unwrap().kind {
        Some(coordinator_message::Kind::Registered(r)) => assert_eq!(r.worker_id, link.worker),
        other => panic!("a joining worker is told Registered first, not {other:?}"),
    }
    Worker { handle: grid.handle.clone(), link, rx, slots: slots.iter().map(|s| (*s).to_owned()).collect() }
}

impl Worker {
    /// The next thing the owner task sends (keepalives skipped); `None`
    /// when it sends nothing within a moment.
    async fn next(&mut self, within: Duration) -> Option<coordinator_message::Kind> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(Ok(grpc::CoordinatorMessage { kind: Some(coordinator_message::Kind::Keepalive(_)) }))) => {}
                Ok(Some(Ok(message))) => return message.kind,
                Ok(Some(Err(status))) => panic!("the owner task ended the link: {status}"),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    async fn lease(&mut self) -> grpc::Lease {
        match self.next(ANSWER).await {
            Some(coordinator_message::Kind::Lease(lease)) => lease,
            other => panic!("expected a lease, got {other:?}"),
        }
    }

    /// The leases sent at once, up to `n`.
    async fn leases(&mut self, n: usize) -> Vec<grpc::Lease> {
        let mut leases = Vec::new();
        while leases.len() < n {
            match self.next(Duration::from_millis(200)).await {
                Some(coordinator_message::Kind::Lease(lease)) => leases.push(lease),
                Some(other) => panic!("expected leases, got {other:?}"),
                None => break,
            }
        }
        leases
    }

    async fn say(&self, kind: worker_message::Kind) {
        self.handle.worker_message(self.link.clone(), grpc::WorkerMessage { kind: Some(kind) }).await.unwrap();
    }

    async fn heartbeat(&self, leases: &[&grpc::Lease]) {
        let lease_ids = leases.iter().map(|l| l.lease_id.clone()).collect();
        self.say(worker_message::Kind::Heartbeat(grpc::Heartbeat { lease_ids })).await;
    }

    /// The device of `lease` is busy, then free again.
    async fn device_state(&self, slot: &str, state: grpc::DeviceState) {
        let device = grpc::Device { state: state as i32, ..device(slot) };
        self.say(worker_message::Kind::Device(grpc::DeviceUpdate { device: Some(device) })).await;
    }

    async fn finish(&self, lease: &grpc::Lease, result: &str) {
        let line = serde_json::json!({
            "id": lease.case_id, "file": lease.case_file, "attempt": lease.attempt, "result": result,
            "startedAt": "2026-01-01T00:00:00.000Z", "ms": 5,
            "steps": [{"step": "app.back", "status": result, "ms": 5}],
        });
        let line: argus_proto::run::RunCase = serde_json::from_value(line).unwrap();
        let attempt = grpc::AttemptResult::recorded(&lease.lease_id, &line);
        self.say(worker_message::Kind::Attempt(attempt)).await;
    }
}

async fn fresh() -> Store {
    argus_store::testkit::fresh(false).await
}

/// Waits until `holds` (the owner task acts on a timer between two
/// commands, so an effect of time is awaited, not assumed).
async fn eventually<F: Future<Output = bool>>(what: &str, holds: impl Fn() -> F) {
    let deadline = tokio::time::Instant::now() + ANSWER;
    while !holds().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Which workers the fleet still has.
async fn workers(grid: &Grid) -> Vec<String> {
    let fleet = grid.handle.fleet().await.unwrap();
    let mut ids: Vec<String> = fleet.workers.into_iter().filter(|w| w.connected).map(|w| w.id).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_silent_worker_is_taken_for_gone_and_its_attempt_runs_elsewhere() {
    let grid = start(fresh().await).await;
    let mut quiet = join(&grid, "quiet", &["ios-1"]).await;
    let mut talking = join(&grid, "talking", &["ios-1"]).await;
    let run = grid.submit(&["a", "b"], 1, 0).await;
    let (on_quiet, on_talking) = (quiet.lease().await, talking.lease().await);
    // Five seconds at a time: the talking worker's heartbeats keep it (and
    // its lease) alive; the quiet one says nothing for 12 s.
    for _ in 0..3 {
        talking.heartbeat(&[&on_talking]).await;
        pass(&grid.handle, Duration::from_secs(4)).await;
    }
    talking.heartbeat(&[&on_talking]).await;
    let left = [talking.link.worker.clone()];
    eventually("the quiet worker is gone, the talking one is not", || async { workers(&grid).await == left }).await;
    // Its attempt is queued again and goes to the worker that is left, once free.
    talking.finish(&on_talking, "passed").await;
    let again = talking.lease().await;
    assert_eq!((again.case_id.as_str(), again.attempt), (on_quiet.case_id.as_str(), on_quiet.attempt));
    talking.finish(&again, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    grid.stop().await;
}

#[tokio::test]
async fn a_lease_without_heartbeats_expires_and_one_with_them_does_not() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1", "ios-2"]).await;
    let run = grid.submit(&["a", "b"], 1, 0).await;
    let leases = worker.leases(2).await;
    let (kept, dropped) = (&leases[0], &leases[1]);
    // 24 s in steps of 4: the worker stays (it heartbeats), but names only one lease.
    for _ in 0..6 {
        worker.heartbeat(&[kept]).await;
        pass(&grid.handle, Duration::from_secs(4)).await;
    }
    // The expired attempt is queued again, on the device it left (the
    // worker ends the attempt itself at the lease's deadline).
    let again = worker.lease().await;
    assert_eq!(again.slot, dropped.slot, "the device of the lease that was kept is still busy");
    assert_eq!(again.case_id, dropped.case_id);
    assert_ne!(again.lease_id, dropped.lease_id);
    worker.finish(kept, "passed").await;
    worker.finish(&again, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let attempts = grid.store.run_attempts(&run).await.unwrap();
    let expired: Vec<_> =
        attempts.iter().filter(|a| a.error.as_deref().is_some_and(|e| e.contains("expired"))).collect();
    assert_eq!(expired.len(), 1, "the expired lease is recorded as such: {attempts:?}");
    grid.stop().await;
}

#[tokio::test]
async fn a_result_from_a_revoked_lease_is_refused() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let run = grid.submit(&["a"], 1, 0).await;
    let first = worker.lease().await;
    for _ in 0..6 {
        worker.heartbeat(&[]).await;
        pass(&grid.handle, Duration::from_secs(4)).await;
    }
    let second = worker.lease().await;
    assert_eq!(second.case_id, first.case_id, "the expired attempt runs again");
    // The first lease's result arrives late: a failure that must not count.
    worker.finish(&first, "failed").await;
    worker.heartbeat(&[&second]).await;
    assert_eq!(grid.result(&run).await, None, "a revoked lease's result neither ends nor fails the run");
    worker.finish(&second, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let attempts = grid.store.run_attempts(&run).await.unwrap();
    assert!(attempts.iter().all(|a| a.result.as_deref() != Some("failed")), "{attempts:?}");
    grid.stop().await;
}

/// The owner judges a result by its typed verdict: a result without one, or
/// with one for another attempt, proves nothing about the case; it runs
/// again as the infrastructure's, saying why, and its record is not kept.
/// The control: the same attempt with its own verdict is kept as it came.
#[tokio::test]
async fn a_result_without_its_own_verdict_runs_again_and_says_why() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let run = grid.submit(&["a"], 1, 0).await;
    let first = worker.lease().await;
    let line: argus_proto::run::RunCase = serde_json::from_value(serde_json::json!({
        "id": "a", "file": "cases/a.md", "attempt": 1, "result": "failed",
        "startedAt": "2026-01-01T00:00:00.000Z", "ms": 5, "steps": [],
    }))
    .unwrap();
    let bare = grpc::AttemptResult { verdict: None, ..grpc::AttemptResult::recorded(&first.lease_id, &line) };
    worker.say(worker_message::Kind::Attempt(bare)).await;
    let second = worker.lease().await;
    let mut other = grpc::AttemptResult::recorded(&second.lease_id, &line);
    other.verdict.as_mut().unwrap().case_id = "b".into();
    worker.say(worker_message::Kind::Attempt(other)).await;
    let third = worker.lease().await;
    assert_eq!((third.case_id.as_str(), third.attempt), ("a", 1), "neither used the case's retry budget");
    worker.finish(&third, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let attempts = grid.store.run_attempts(&run).await.unwrap();
    let errors: Vec<&str> = attempts.iter().filter_map(|a| a.error.as_deref()).collect();
    assert_eq!(
        errors,
        [
            "the worker sent a record without its verdict",
            "the worker's verdict is for case \"b\" attempt 1, the lease for \"a\" attempt 1"
        ]
    );
    let lines = grid.store.run_lines(&run).await.unwrap();
    assert_eq!(lines.len(), 1, "only the attempt with its own verdict is a line: {lines:?}");
    assert_eq!(lines[0].device.as_ref().map(|d| d.id.as_str()), Some("w/ios-1"), "the device is the grid's, typed");
    grid.stop().await;
}

#[tokio::test]
async fn after_a_restart_a_leased_attempt_is_run_again_and_the_run_ends() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let run = grid.submit(&["a", "b"], 1, 0).await;
    let first = worker.lease().await;
    worker.finish(&first, "passed").await;
    let interrupted = worker.lease().await;
    let store = grid.stop().await;

    // A new owner task on the same database: the leased attempt was lost
    // with the old one, and is queued again.
    let grid = start(store).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let again = worker.lease().await;
    assert_eq!(again.case_id, interrupted.case_id);
    assert_ne!(again.lease_id, interrupted.lease_id);
    worker.finish(&again, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let row = grid.store.get_run(&run).await.unwrap();
    assert_eq!((row.cases, row.passed), (Some(2), Some(2)), "the first coordinator's result is counted once");
    grid.stop().await;
}

#[tokio::test]
async fn runs_share_the_fleet_by_priority() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1", "ios-2", "ios-3", "ios-4"]).await;
    let cases: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let ids: Vec<&str> = cases.iter().map(String::as_str).collect();
    // Submitted while no device is free, so that one dispatch decides all four.
    for slot in &worker.slots.clone() {
        worker.device_state(slot, grpc::DeviceState::Busy).await;
    }
    let high = grid.submit(&ids, 3, 0).await;
    let low = grid.submit(&ids, 1, 0).await;
    for slot in &worker.slots.clone() {
        worker.device_state(slot, grpc::DeviceState::Idle).await;
    }
    let leases = worker.leases(4).await;
    let of = |run: &str| leases.iter().filter(|l| l.run_id == run).count();
    assert_eq!((of(&high), of(&low)), (3, 1), "priority 3 gets three devices for each of priority 1's");
    grid.stop().await;
}

#[tokio::test]
async fn a_quarantined_device_runs_nothing_until_released() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1", "ios-2"]).await;
    let bad = format!("{}/ios-1", worker.link.worker);
    grid.handle.quarantine(bad.clone(), Some("its screen flickers".into())).await.unwrap();
    let run = grid.submit(&["a", "b"], 1, 0).await;
    let leases = worker.leases(2).await;
    assert_eq!(
        leases.iter().map(|l| l.slot.as_str()).collect::<Vec<_>>(),
        ["ios-2"],
        "one lease, on the healthy device"
    );
    grid.handle.quarantine(bad, None).await.unwrap();
    let released = worker.lease().await;
    assert_eq!(released.slot, "ios-1", "released, it takes the other case");
    worker.finish(&leases[0], "passed").await;
    worker.finish(&released, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    grid.stop().await;
}

#[tokio::test]
async fn a_device_whose_attempts_fail_where_others_pass_is_quarantined() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1", "ios-2"]).await;
    let cases: Vec<String> = (0..12).map(|i| format!("c{i:02}")).collect();
    let ids: Vec<&str> = cases.iter().map(String::as_str).collect();
    let run = grid.submit(&ids, 1, 1).await;
    // Every attempt on ios-1 fails, every one on ios-2 passes, until ios-1
    // is taken out of the pool.
    let mut quarantined = false;
    for _ in 0..40 {
        let lease = match worker.next(Duration::from_millis(500)).await {
            Some(coordinator_message::Kind::Lease(lease)) => lease,
            Some(_) => continue,
            None => break,
        };
        worker.finish(&lease, if lease.slot == "ios-1" { "failed" } else { "passed" }).await;
        let fleet = grid.handle.fleet().await.unwrap();
        if fleet.devices.iter().any(|d| d.device.as_ref().is_some_and(|i| i.slot == "ios-1") && d.quarantined) {
            quarantined = true;
            break;
        }
    }
    assert!(quarantined, "a device that fails what passes elsewhere is quarantined");
    let _ = run;
    grid.stop().await;
}

#[tokio::test]
async fn a_cancelled_run_takes_its_leases_back_and_ends_cancelled() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let run = grid.submit(&["a", "b", "c"], 1, 0).await;
    let lease = worker.lease().await;
    grid.handle.cancel(run.clone()).await.unwrap();
    match worker.next(ANSWER).await {
        Some(coordinator_message::Kind::Cancel(cancel)) => assert_eq!(cancel.lease_id, lease.lease_id),
        other => panic!("expected the running attempt's cancel, got {other:?}"),
    }
    assert_eq!(grid.ended(&run).await, "cancelled");
    // Its other cases are never leased.
    worker.finish(&lease, "failed").await;
    assert!(worker.next(Duration::from_millis(300)).await.is_none(), "nothing more is leased");
    grid.stop().await;
}

#[tokio::test]
async fn an_unwatched_run_is_cancelled_after_the_clients_grace_and_a_detached_one_is_not() {
    let grid =
        start_with(fresh().await, OwnerConfig { client_grace: Duration::from_secs(60), ..OwnerConfig::default() })
            .await;
    let _worker = join(&grid, "w", &["ios-1"]).await;
    let detached = grid.submit(&["a"], 1, 0).await;
    let request = grpc::SubmitRequest {
        cases: vec![grpc::CaseFile {
            path: "cases/b.md".into(),
            source: "---\nid: b\n---\nsteps:\n  - app.back\n".into(),
        }],
        selector: Some(grpc::Selector { platform: "ios".into(), ..Default::default() }),
        ..Default::default()
    };
    let submission = argus_grid::submit::Submission::new(request);
    let watched =
        argus_grid::submit::submit(&grid.handle, &grid.store, submission, String::new()).await.unwrap().run_id;
    for _ in 0..16 {
        _worker.heartbeat(&[]).await;
        pass(&grid.handle, Duration::from_secs(4)).await;
    }
    assert_eq!(grid.ended(&watched).await, "cancelled", "nobody watched it for 64 s");
    assert_eq!(grid.result(&detached).await, None, "a detached run needs no client");
    grid.stop().await;
}

#[tokio::test]
async fn a_device_gets_its_next_attempt_with_its_result_and_not_after_an_infrastructure_failure() {
    let grid = start(fresh().await).await;
    let mut worker = join(&grid, "w", &["ios-1"]).await;
    let run = grid.submit(&["c0", "c1", "c2"], 1, 0).await;
    let first = worker.lease().await;
    // As a worker does: busy while it runs the attempt, and it says idle
    // again only after it sent the result.
    worker.device_state("ios-1", grpc::DeviceState::Busy).await;
    worker.finish(&first, "passed").await;
    // The next lease is written with the result, so it comes before the
    // worker's idle: the device waits for one commit, not two in a row.
    let second = tokio::time::timeout(ANSWER, worker.lease()).await.expect("the next lease comes with the result");
    assert_ne!(second.case_id, first.case_id);
    // An attempt that could not run may say something about the device: it
    // waits for the worker's word that the device is idle.
    let broken = grpc::AttemptResult {
        lease_id: second.lease_id.clone(),
        infrastructure_failure: true,
        error: "the app went away".into(),
        ..Default::default()
    };
    worker.say(worker_message::Kind::Attempt(broken)).await;
    assert_eq!(worker.next(Duration::from_millis(300)).await, None, "no lease while the device says it is busy");
    worker.device_state("ios-1", grpc::DeviceState::Idle).await;
    let third = worker.lease().await;
    worker.device_state("ios-1", grpc::DeviceState::Busy).await;
    worker.finish(&third, "passed").await;
    let fourth = worker.lease().await;
    worker.finish(&fourth, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let lines = grid.store.run_lines(&run).await.unwrap();
    assert_eq!(lines.len(), 3, "each case passed once: {lines:?}");
    grid.stop().await;
}

/// A dispatch's leases commit, and the answer is lost (the connection to
/// Postgres dies between the commit and its answer): the same leases are
/// written again, not new ones, which the store would refuse for attempts
/// the lost commit leased, stranding them until a restart.
#[tokio::test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
async fn leases_whose_commit_answer_was_lost_are_granted_once_and_sent() {
    let (grid, lossy, mut worker) = lossy_grid(b"SET state = 'leased'").await;
    let run = grid.submit(&["a"], 1, 0).await;
    let lease = worker.lease().await;
    assert!(lossy.lost(), "the commit of the first lease lost its answer");
    worker.finish(&lease, "passed").await;
    assert_eq!(grid.ended(&run).await, "passed");
    let attempts = grid.store.run_attempts(&run).await.unwrap();
    assert_eq!(attempts.len(), 1, "one attempt, leased once: {attempts:?}");
    grid.stop().await;
}

/// A cancel commits and its answer is lost: the client is told it did not
/// go through, and the next sweep writes it again (the store takes it once)
/// and ends the run here too: its device is told to stop, where before the
/// run stayed going in the coordinator (its attempts cancelled in the
/// store) until someone asked again.
#[tokio::test]
#[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
async fn a_cancel_whose_commit_answer_was_lost_is_written_again_and_ends_the_run() {
    let (grid, lossy, mut worker) = lossy_grid(b"result = 'cancelled', waiting_reason").await;
    let run = grid.submit(&["a", "b"], 1, 0).await;
    let lease = worker.lease().await;
    assert!(grid.handle.cancel(run.clone()).await.is_err(), "the client is told the cancel is not through");
    assert!(lossy.lost(), "the cancel's commit lost its answer");
    match worker.next(ANSWER).await {
        Some(coordinator_message::Kind::Cancel(cancel)) => assert_eq!(cancel.lease_id, lease.lease_id),
        other => panic!("the device is told to stop once the cancel is written again, not {other:?}"),
    }
    assert_eq!(grid.ended(&run).await, "cancelled");
    assert!(grid.handle.cancel(run).await.is_ok(), "a cancel asked again finds the run ended");
    grid.stop().await;
}

/// A grid on a fresh Postgres database reached through a proxy that loses
/// the answer of the first commit whose statements hold `marker`, and a
/// worker with one device.
async fn lossy_grid(marker: &'static [u8]) -> (Grid, LosesACommitAnswer, Worker) {
    let url = argus_store::testkit::postgres_url(None, "argus_owner").await;
    let lossy = LosesACommitAnswer::start(&url, marker).await;
    let grid = start(Store::open(&lossy.url).await.unwrap()).await;
    let worker = join(&grid, "w", &["ios-1"]).await;
    (grid, lossy, worker)
}

/// A TCP proxy in front of Postgres that loses the answer of one commit:
/// that of the first transaction whose statements hold `marker`. The
/// commit goes through, the connection is cut before its answer comes back.
struct LosesACommitAnswer {
    url: String,
    lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LosesACommitAnswer {
    async fn start(url: &str, marker: &'static [u8]) -> Self {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // postgres://user@host:port/database: the proxy takes host:port.
        let (head, rest) = url.split_once('@').expect("the test URL names a user");
        let (target, database) = rest.split_once('/').expect("the test URL names a database");
        let target = target.to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // Plain text, so that the statements can be read on the way.
        let proxied = format!("{head}@{}/{database}?sslmode=disable", listener.local_addr().unwrap());
        let lost = Arc::new(AtomicBool::new(false));
        let once = lost.clone();
        argus_proto::task::spawn("lossy proxy", async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else { return };
                let (mut client_rx, mut client_tx) = client.into_split();
                let (mut server_rx, mut server_tx) = server.into_split();
                let (once, cut) = (once.clone(), Arc::new(AtomicBool::new(false)));
                let answers = cut.clone();
                argus_proto::task::spawn("lossy proxy: answers", async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = server_rx.read(&mut buf).await {
                        if answers.load(Ordering::SeqCst) || client_tx.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
                argus_proto::task::spawn("lossy proxy: statements", async move {
                    let (mut buf, mut seen, mut armed) = (vec![0u8; 64 * 1024], Vec::new(), false);
                    while let Ok(n @ 1..) = client_rx.read(&mut buf).await {
                        let chunk = &buf[..n];
                        seen.extend_from_slice(chunk);
                        armed |= seen.windows(marker.len()).any(|w| w == marker);
                        seen.drain(..seen.len().saturating_sub(marker.len()));
                        let commit = chunk.windows(6).any(|w| w == b"COMMIT");
                        if armed && commit && !once.swap(true, Ordering::SeqCst) {
                            cut.store(true, Ordering::SeqCst);
                            let _ = server_tx.write_all(chunk).await;
                            // The server commits; its answer goes nowhere.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            return;
                        }
                        if server_tx.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url: proxied, lost }
    }

    fn lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }
}
