//! gRPC over TLS between workers, clients and the coordinator, and the words
//! each side gets when one speaks TLS and the other does not.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::{Path, PathBuf};
use std::time::Duration;

use argus_coordinator::{Options, TlsIdentity};
use argus_proto::connect::connect;
use argus_proto::grpc::{self, fleet_client::FleetClient, run_update, runs_client::RunsClient};
use argus_testkit::{Grid, GridOptions, Sim, capture_logs, free_port, logs};
use argus_worker::link::{SlotConfig, WorkerConfig};

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls")
}

/// A coordinator on SQLite, with TLS or without; the grid and its port.
async fn coordinator(tls: bool) -> (Grid, u16) {
    let tls = tls.then(|| TlsIdentity::load(&certs().join("server.pem"), &certs().join("server.key")).unwrap());
    let grid =
        Grid::serve(GridOptions { coordinator: Options { tls, ..Default::default() }, ..Default::default() }).await;
    let port = grid.url.rsplit(':').next().unwrap().parse().unwrap();
    (grid, port)
}

fn ca() -> PathBuf {
    certs().join("ca.pem")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_and_a_client_run_a_suite_over_tls() {
    let (mut grid, port) = coordinator(true).await;
    let url = format!("https://localhost:{port}");
    let device = free_port();
    let config = grid.worker_config("w1", vec![SlotConfig::for_port(device, "ios")]);
    grid.spawn_worker(WorkerConfig { coordinator: url.clone(), tls_ca: Some(ca()), ..config });
    let _sim = Sim::start(device, None);
    let channel = connect(&url, Some(&ca())).await.unwrap();
    let mut fleet = FleetClient::new(channel.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the worker never joined over TLS");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut runs = RunsClient::new(channel);
    let case = grpc::CaseFile {
        path: "cases/title.md".into(),
        source: "---\nid: title\n---\nsteps:\n  - app.see: Welcome to Shop\n".into(),
    };
    let submitted = runs
        .submit(grpc::SubmitRequest { cases: vec![case], project: "shop".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: submitted.run_id, after_seq: 0 }).await.unwrap().into_inner();
    loop {
        let update = tokio::time::timeout(Duration::from_secs(20), updates.message()).await.unwrap().unwrap().unwrap();
        if let Some(run_update::Kind::RunFinished(done)) = update.kind {
            assert!(done.manifest_json.contains(r#""passed":1"#), "{}", done.manifest_json);
            break;
        }
    }
}

/// Connecting must fail within a few seconds, with `expected` in the error.
async fn refused(url: &str, ca: Option<&Path>, expected: &str) {
    let error = tokio::time::timeout(Duration::from_secs(10), connect(url, ca))
        .await
        .expect("the refusal comes quickly")
        .expect_err("the connection is refused");
    assert!(error.to_string().contains(expected), "{error}");
}

#[tokio::test]
async fn plaintext_to_a_tls_port_is_refused_with_words_on_both_sides() {
    let (_guard, buffer) = capture_logs();
    let (_grid, port) = coordinator(true).await;
    refused(&format!("http://127.0.0.1:{port}"), None, "if it serves TLS, connect with https://").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = logs(&buffer);
    assert!(logs.contains("a client spoke plaintext to this TLS port: it should connect with https://"), "{logs}");
}

#[tokio::test]
async fn tls_to_a_plaintext_port_is_refused_with_words_on_both_sides() {
    let (_guard, buffer) = capture_logs();
    let (_grid, port) = coordinator(false).await;
    refused(&format!("https://localhost:{port}"), Some(&ca()), "does not speak TLS: connect with http://").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = logs(&buffer);
    assert!(logs.contains("a client spoke TLS to this plaintext port"), "{logs}");
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_refused_naming_the_flag() {
    let (_grid, port) = coordinator(true).await;
    refused(&format!("https://localhost:{port}"), None, "give its CA with --tls-ca").await;
    refused(&format!("http://localhost:{port}"), Some(&ca()), "use https:// to connect with TLS").await;
}
