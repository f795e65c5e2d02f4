//! gRPC over TLS between workers, clients and the coordinator, and the words
//! each side gets when one speaks TLS and the other does not.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::path::{Path, PathBuf};
use std::time::Duration;

use argus_coordinator::{Options, TlsIdentity};
use argus_proto::connect::connect;
use argus_proto::grpc::{self, fleet_client::FleetClient, run_update, runs_client::RunsClient};
use argus_store::Store;
use argus_testkit::{Sim, capture_logs, free_port, logs};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls")
}

/// A coordinator on SQLite, with TLS or without; its port.
async fn coordinator(tls: bool, cancel: &CancellationToken) -> u16 {
    let store = Store::open(&argus_store::testkit::sqlite_url("argus_tls")).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = tls.then(|| TlsIdentity::load(&certs().join("server.pem"), &certs().join("server.key")).unwrap());
    let options = Options { tls, ..Default::default() };
    tokio::spawn(argus_coordinator::serve_with(listener, store, options, cancel.clone()));
    port
}

fn ca() -> PathBuf {
    certs().join("ca.pem")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_and_a_client_run_a_suite_over_tls() {
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let port = coordinator(true, &cancel).await;
    let url = format!("https://localhost:{port}");
    let device = free_port();
    let config = WorkerConfig {
        coordinator: url.clone(),
        name: "w1".into(),
        host: "127.0.0.1".into(),
        app_token: None,
        token: None,
        tls_ca: Some(ca()),
        slots: vec![SlotConfig::for_port(device, "ios")],
    };
    tokio::spawn(link::run(config, cancel.clone()));
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
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let port = coordinator(true, &cancel).await;
    refused(&format!("http://127.0.0.1:{port}"), None, "if it serves TLS, connect with https://").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = logs(&buffer);
    assert!(logs.contains("a client spoke plaintext to this TLS port: it should connect with https://"), "{logs}");
}

#[tokio::test]
async fn tls_to_a_plaintext_port_is_refused_with_words_on_both_sides() {
    let (_guard, buffer) = capture_logs();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let port = coordinator(false, &cancel).await;
    refused(&format!("https://localhost:{port}"), Some(&ca()), "does not speak TLS: connect with http://").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = logs(&buffer);
    assert!(logs.contains("a client spoke TLS to this plaintext port"), "{logs}");
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_is_refused_naming_the_flag() {
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let port = coordinator(true, &cancel).await;
    refused(&format!("https://localhost:{port}"), None, "give its CA with --tls-ca").await;
    refused(&format!("http://localhost:{port}"), Some(&ca()), "use https:// to connect with TLS").await;
}
