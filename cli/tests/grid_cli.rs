//! The grid from the command line: the demo, and `argus run` on a local
//! grid, through real processes and sockets.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

mod common;

use std::process::{Command, Stdio};

use argus_proto::run::{CaseResult, RunDir, StepStatus};
use common::*;

#[test]
fn the_demo_shards_its_suite_over_both_platforms_and_shows_a_flake_an_unsupported_step_and_a_relaunch() {
    let state = temp_dir("demo");
    let out = state.join("run");
    let output =
        Command::new(ARGUS).args(["demo", "--exit", "--state"]).arg(&state).arg("--out").arg(&out).output().unwrap();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("44/45 passed, 1 cannot run on this host, 1 retried"), "{printed}");
    assert!(printed.contains("↻ relaunch on demo/"), "an infrastructure retry: {printed}");
    assert!(printed.contains("/flaky"), "the flaky page's link: {printed}");
    let run = RunDir::read(&out).unwrap();
    assert_eq!(run.manifest.totals.unwrap().cases, 45);
    let platforms: std::collections::BTreeSet<&str> =
        run.cases.iter().filter_map(|c| Some(c.device.as_ref()?.platform.as_str())).collect();
    assert_eq!(platforms.into_iter().collect::<Vec<_>>(), ["android", "ios"]);
    assert_eq!(run.manifest.platform, None, "not one platform");
    assert_eq!(run.manifest.extra["platforms"], serde_json::json!(["android", "ios"]), "but these");
    let promo: Vec<_> = run.cases.iter().filter(|c| c.id == "promo").collect();
    assert_eq!(
        promo.iter().map(|c| (c.attempt, c.result)).collect::<Vec<_>>(),
        [(1, CaseResult::Failed), (2, CaseResult::Passed)],
        "flaky: failed once, passed on its retry"
    );
    let shot = promo[0].steps.iter().find_map(|s| s.screenshot.clone()).expect("the failure is pictured");
    assert!(std::fs::read(out.join(&shot)).unwrap().starts_with(b"\x89PNG"), "{shot} is in the run directory");
    assert!(run.cases.iter().any(|c| c.id == "clock" && c.result == CaseResult::Unsupported));
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuite name="demo""#), "one suite, named after the project");
    assert!(junit.contains(r#"<property name="attempt.2.device" value="demo/"#), "where each attempt ran: {junit}");
    assert!(printed.contains("flaky: promo (passed on attempt 2)"), "{printed}");
    assert!(printed.contains("infrastructure retry: 1 (relaunch on demo/"), "{printed}");
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
    // Why, in one line after the summary: it never passed, so nothing to compare with.
    assert!(
        printed.contains("✗ red [unknown] no passing attempt to compare with; failed at step 1 `app.see"),
        "{printed}"
    );
    let written = RunDir::read(&project.join("out")).unwrap();
    assert_eq!(written.cases.len(), 4);
    assert!(written.cases.iter().all(|c| c.device.as_ref().unwrap().worker == "local"));

    // A reader that has gone (`argus run … | head`): the run still ends,
    // writes its directory and says 1, without a panic.
    let mut child = Command::new(ARGUS)
        .current_dir(&project)
        .args(["run", "--ports", &ports_arg, "--once", "--out", "piped"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let local_grid = std::env::temp_dir().join(format!("argus-run-{}", child.id()));
    let output = child.wait_with_output().unwrap();
    let errors = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{errors}");
    assert!(!errors.contains("panicked") && !errors.contains("standard output"), "{errors}");
    assert_eq!(RunDir::read(&project.join("piped")).unwrap().cases.len(), 4);
    assert!(!local_grid.exists(), "the local grid's folder is removed once the run is over: {}", local_grid.display());

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
}

/// The last attempt of each case: its result, and each step's name and status.
fn finals(run: &RunDir) -> std::collections::BTreeMap<String, (CaseResult, Vec<(String, StepStatus)>)> {
    run.cases
        .iter()
        .map(|c| (c.id.clone(), (c.result, c.steps.iter().map(|s| (s.step.clone(), s.status)).collect())))
        .collect()
}

#[test]
fn the_shop_suite_on_a_grid_runs_its_fixtures_in_the_client_and_matches_one_device() {
    let shop = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop");
    let scratch = temp_dir("relay");
    // One device, the way lynkeus runs the suite.
    let port = free_port();
    let _one = Sims::start(&[port]);
    let local = Command::new(ARGUS)
        .current_dir(&shop)
        .args(["cases", "run", "--port", &port.to_string(), "--out"])
        .arg(scratch.join("local"))
        .output()
        .unwrap();
    assert_eq!(local.status.code(), Some(0), "{}", text(&local));

    // A coordinator and two workers that run in a directory with no project:
    // a fixture or exec they ran themselves could not work.
    let (listen, workers_dir) = (format!("127.0.0.1:{}", free_port()), scratch.join("workers"));
    std::fs::create_dir_all(&workers_dir).unwrap();
    let url = format!("http://{listen}");
    let database = format!("sqlite:{}", scratch.join("argus.db").display());
    let coordinator = Killed(spawn(&["coordinator", "--database-url", &database, "--listen", &listen], &workers_dir));
    let ports = [free_port(), free_port()];
    let workers: Vec<Killed> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let name = format!("w{i}");
            Killed(spawn(
                &["worker", "--coordinator", &url, "--name", &name, "--ports", &port.to_string()],
                &workers_dir,
            ))
        })
        .collect();
    let _sims = Sims::start(&ports);
    wait_for_devices(&url, 2);
    let grid = Command::new(ARGUS)
        .current_dir(&shop)
        .args(["run", "--coordinator", &url, "--out"])
        .arg(scratch.join("grid"))
        .output()
        .unwrap();
    let printed = text(&grid);
    assert_eq!(grid.status.code(), Some(0), "{printed}");
    let (local, grid) = (RunDir::read(&scratch.join("local")).unwrap(), RunDir::read(&scratch.join("grid")).unwrap());
    assert_eq!(finals(&grid), finals(&local), "case by case, the same results, step names and statuses");
    let flaky: Vec<_> = grid.cases.iter().filter(|c| c.id == "flaky").collect();
    assert_eq!(
        flaky[0].steps[0].error.as_deref(),
        Some("warm_cache: the cache is cold"),
        "the client's fixtures process, with its state"
    );
    assert!(
        grid.cases
            .iter()
            .any(|c| c.steps.iter().any(|s| s.step.starts_with("create_user") && s.status == StepStatus::Passed))
    );

    // Without fixtures, or detached, the cases that need them are named and refused.
    for flag in ["--no-fixtures", "--detach"] {
        let refused =
            Command::new(ARGUS).current_dir(&shop).args(["run", "--coordinator", &url, flag]).output().unwrap();
        let printed = text(&refused);
        assert_eq!(refused.status.code(), Some(2), "{printed}");
        assert!(printed.contains("cases/flaky.md:"), "{printed}");
        assert!(printed.contains("flaky: `warm_cache ` runs on the project's side (fixtures or exec)"), "{printed}");
    }

    // The coordinator keeps to ordinary pages (each huge page's fault
    // zeroed 2 MiB at every burst); a worker does not turn them off, since
    // its hooks' emulators would inherit that.
    #[cfg(target_os = "linux")]
    {
        let huge_pages = |process: &Killed| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", process.0.id())).unwrap();
            let line = status.lines().find_map(|l| l.strip_prefix("THP_enabled:")).map(str::trim).map(str::to_owned);
            line.expect("the kernel tells whether a process may have transparent huge pages (Linux 5.0 and later)")
        };
        assert_eq!(huge_pages(&coordinator), "0", "the coordinator turned transparent huge pages off");
        assert_eq!(huge_pages(&workers[0]), "1", "a worker keeps them");
    }
}

#[test]
fn a_failed_step_is_pictured_and_its_picture_reaches_the_store_the_run_directory_and_the_dashboard() {
    let scratch = temp_dir("pictures");
    let project = scratch.join("project");
    std::fs::create_dir_all(project.join("cases")).unwrap();
    // Fails on its first attempt, wherever it runs.
    std::fs::write(
        project.join("cases/red.md"),
        "---\nid: red\n---\nsteps:\n  - app.see: \"#title\"\n  - app.see: { text: Nope, timeoutMs: 100 }\n",
    )
    .unwrap();
    let (listen, http) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let url = format!("http://{listen}");
    let database = format!("sqlite:{}", scratch.join("argus.db").display());
    let artifacts = scratch.join("artifacts");
    let coordinator_args = ["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http];
    let mut coordinator = Command::new(ARGUS);
    coordinator.current_dir(&scratch).args(coordinator_args).arg("--artifacts").arg(&artifacts);
    let _coordinator = Killed(coordinator.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    // Worker w0's slot pictures with its hook (as `xcrun simctl io … screenshot`
    // would); worker w1's slot has none, so the app's own `screenshot` is used.
    let ports = [free_port(), free_port()];
    let config = scratch.join("worker.toml");
    std::fs::write(
        &config,
        format!(
            "[[slot]]\nport = {}\nhooks.screenshot = \"printf 'hook picture of %s on %s' \\\"$ARGUS_CASE\\\" {{slot}} > {{file}}\"\n{}",
            ports[0],
            // Films until SIGINT, then writes its file, as recordVideo does.
            "hooks.record = \"trap 'printf film > {file}; exit 0' INT; while :; do sleep 0.05; done\"\n"
        ),
    )
    .unwrap();
    let config_arg = config.display().to_string();
    let w0 = ["worker", "--coordinator", &url, "--name", "w0", "--config", &config_arg];
    let w1_port = ports[1].to_string();
    let w1 = ["worker", "--coordinator", &url, "--name", "w1", "--ports", &w1_port];
    let _workers = [Killed(spawn(&w0, &scratch)), Killed(spawn(&w1, &scratch))];
    let _sims = Sims::start(&ports);
    wait_for_devices(&url, 2);
    // Retried once: the retry runs on the other device, so both ways of
    // picturing are used.
    let output = Command::new(ARGUS)
        .current_dir(&project)
        .args(["run", "--coordinator", &url, "--retries", "1", "--out", "out"])
        .output()
        .unwrap();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    let run_id = printed
        .lines()
        .find_map(|l| l.strip_prefix("run ")?.split(':').next())
        .expect("argus run prints its run id")
        .to_owned();
    assert!(printed.contains(&format!("live at http://{http}/runs/{run_id}")), "the run's page: {printed}");
    let out = project.join("out");
    let run = RunDir::read(&out).unwrap();
    assert_eq!(run.cases.len(), 2, "{printed}");
    let run_page = String::from_utf8(http_get_bytes(&http, &format!("/runs/{run_id}")).1).unwrap();
    for attempt in &run.cases {
        let (passed, failed) = (&attempt.steps[0], &attempt.steps[1]);
        assert_eq!(passed.screenshot, None, "a step that passed is not pictured on a grid");
        let path = failed.screenshot.clone().expect("the failed step names its picture");
        let expected = argus_proto::artifacts::screenshot_path("red", attempt.attempt, 1, &failed.step);
        assert_eq!(path, expected, "where lynkeus puts it: <case id>/NN-<slug>.png");
        assert!(path.starts_with(if attempt.attempt == 1 { "red/02-app-see-" } else { "red/attempt-2/02-app-see-" }));
        let in_out = std::fs::read(out.join(&path)).expect("argus run --out fetched the picture");
        let in_store = std::fs::read(artifacts.join(&run_id).join(&path)).expect("the coordinator kept the picture");
        assert_eq!(in_out, in_store);
        match attempt.device.as_ref().unwrap().worker.as_str() {
            "w0" => {
                assert_eq!(in_out, format!("hook picture of red on {}", ports[0]).into_bytes(), "the slot's hook");
                let film = attempt.video.clone().expect("the slot's record hook filmed the attempt");
                assert_eq!(film, argus_proto::artifacts::video_path("red", attempt.attempt));
                assert_eq!(std::fs::read(out.join(&film)).unwrap(), b"film", "fetched with the run");
                assert_eq!(std::fs::read(artifacts.join(&run_id).join(&film)).unwrap(), b"film", "kept");
                assert!(attempt.steps.iter().all(|s| s.video_s.is_some()), "each step's place in the film");
                assert!(run_page.contains(&format!(
                    "<video class=\"film\" controls preload=\"metadata\" src=\"/runs/{run_id}/files/{film}\""
                )));
            }
            "w1" => {
                assert!(in_out.starts_with(b"\x89PNG\r\n"), "the simulated app's picture is a PNG");
                assert_eq!(attempt.video, None, "a slot without a record hook films nothing");
            }
            other => panic!("a device of worker {other}"),
        }
        let (status, served) = http_get_bytes(&http, &format!("/runs/{run_id}/files/{path}"));
        assert_eq!((status, served), (200, in_out), "the dashboard serves the picture");
        assert!(run_page.contains(&format!("<img src=\"/runs/{run_id}/files/{path}\"")), "{run_page}");
    }
    let (status, _) = http_get_bytes(&http, &format!("/runs/{run_id}/files/red/..%2F..%2Fargus.db"));
    assert_eq!(status, 400, "a path out of the run's folder is refused");
}

mod otlp {
    //! An OTLP trace receiver: every span exported to it, with its service.

    use std::sync::{Arc, Mutex};

    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
    use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use opentelemetry_proto::tonic::trace::v1::Span;

    #[derive(Clone, Default)]
    pub struct Receiver(pub Arc<Mutex<Vec<(String, Span)>>>);

    #[tonic::async_trait]
    impl TraceService for Receiver {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            for resource_spans in request.into_inner().resource_spans {
                let service = resource_spans
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                        Value::StringValue(name) => Some(name.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let spans = resource_spans.scope_spans.into_iter().flat_map(|s| s.spans);
                self.0.lock().unwrap().extend(spans.map(|span| (service.clone(), span)));
            }
            Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
        }
    }

    /// Serves on a free port; its endpoint.
    pub async fn start(receiver: Receiver) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        endpoint
    }

    pub fn attribute(span: &Span, key: &str) -> Option<String> {
        span.attributes.iter().find(|a| a.key == key).and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            Value::StringValue(value) => Some(value.clone()),
            _ => None,
        })
    }
}

#[test]
fn a_run_is_one_trace_from_the_client_through_the_coordinator_and_workers_to_the_app() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let receiver = otlp::Receiver::default();
    let endpoint = runtime.block_on(otlp::start(receiver.clone()));
    let dir = temp_dir("otlp");
    std::fs::create_dir_all(dir.join("cases")).unwrap();
    std::fs::write(
        dir.join("cases/title.md"),
        "---\nid: title\nmatrix: { n: [1, 2, 3] }\n---\nsteps:\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    let traced = |args: &[&str]| {
        Command::new(ARGUS)
            .current_dir(&dir)
            .args(args)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let http = format!("127.0.0.1:{}", free_port());
    let listen = format!("127.0.0.1:{port}");
    let coordinator = traced(&["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http]);
    let ports = [free_port(), free_port()];
    let worker = traced(&["worker", "--coordinator", &url, "--ports", &format!("{},{}", ports[0], ports[1])]);
    let sims = Sims::start(&ports);
    wait_for_devices(&url, 2);
    let run = traced(&["run", "--coordinator", &url]).wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    // A WebDriver client's command joins the client's trace, down to the
    // worker's call to the app.
    let (status, created) = http_json(&http, "POST", "/session", r#"{"capabilities":{"alwaysMatch":{}}}"#);
    assert_eq!(status, 200, "{created}");
    let created: serde_json::Value = serde_json::from_str(&created).unwrap();
    let sid = created["value"]["sessionId"].as_str().unwrap().to_owned();
    let (client_trace, client_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let traceparent = format!("traceparent: 00-{client_trace}-{client_span}-01\r\n");
    let (status, _) = http_json_with(&http, "GET", &format!("/session/{sid}/source"), "", &traceparent);
    assert_eq!(status, 200);
    assert_eq!(http_json(&http, "DELETE", &format!("/session/{sid}"), "").0, 200);
    terminate(worker);
    terminate(coordinator);
    drop(sims);

    let spans = receiver.0.lock().unwrap().clone();
    let named = |service: &str, name: &str| -> Vec<&opentelemetry_proto::tonic::trace::v1::Span> {
        spans.iter().filter(|(s, span)| s == service && span.name == name).map(|(_, span)| span).collect()
    };
    let summary: Vec<(String, String)> = spans.iter().map(|(s, span)| (s.clone(), span.name.clone())).collect();
    let client = named("argus-run", "argus run");
    assert_eq!(client.len(), 1, "{summary:?}");
    let client = client[0];
    assert!(client.parent_span_id.is_empty(), "the client's span is the root");
    let runs = named("argus-coordinator", "run");
    assert_eq!(runs.len(), 1, "{summary:?}");
    assert_eq!(runs[0].parent_span_id, client.span_id, "the coordinator's run is the client's child");
    let leases = named("argus-coordinator", "lease");
    assert_eq!(leases.len(), 3, "{summary:?}");
    assert!(leases.iter().all(|l| l.parent_span_id == runs[0].span_id), "each lease is the run's child");
    let attempts = named("argus-worker", "attempt");
    assert_eq!(attempts.len(), 3, "{summary:?}");
    for attempt in &attempts {
        assert!(leases.iter().any(|l| l.span_id == attempt.parent_span_id), "each attempt is a lease's child");
        assert_eq!(otlp::attribute(attempt, "trace_context").as_deref(), Some("handed"), "the app was told");
    }
    let trace_ids: std::collections::BTreeSet<&Vec<u8>> =
        [client].iter().chain(&runs).chain(&leases).chain(&attempts).map(|s| &s.trace_id).collect();
    assert_eq!(trace_ids.len(), 1, "one trace");
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let command = named("argus-coordinator", "webdriver")
        .into_iter()
        .find(|s| hex(&s.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736")
        .unwrap_or_else(|| panic!("the command's span is in the client's trace: {summary:?}"));
    assert_eq!(hex(&command.parent_span_id), "00f067aa0ba902b7", "a child of the client's span");
    let call = named("argus-worker", "device_call");
    assert!(
        call.iter().any(|c| c.parent_span_id == command.span_id && c.trace_id == command.trace_id),
        "the worker's call to the app is the command's child: {summary:?}"
    );
    drop(runtime);
}

#[test]
fn wrong_addresses_and_tokens_are_told_what_to_change() {
    let dir = temp_dir("addresses");
    let port = free_port();
    let http_port = free_port();
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let _coordinator = common::Killed(spawn(
        &[
            "coordinator",
            "--database-url",
            &database,
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--http",
            &format!("127.0.0.1:{http_port}"),
            "--worker-token",
            "w-secret",
        ],
        &dir,
    ));
    let url = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !Command::new(ARGUS).args(["devices", "--coordinator", &url]).output().unwrap().status.success() {
        assert!(std::time::Instant::now() < deadline, "the coordinator never answered");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // No scheme.
    let output = Command::new(ARGUS).args(["devices", "--coordinator", &format!("127.0.0.1:{port}")]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).contains(&format!("\"127.0.0.1:{port}\" has no scheme: give http://127.0.0.1:{port}")),
        "{}",
        text(&output)
    );
    // The HTTP port, not the gRPC one.
    let output = Command::new(ARGUS)
        .args(["devices", "--coordinator", &format!("http://127.0.0.1:{http_port}")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).contains("does not answer gRPC: is it the coordinator's HTTP (dashboard) port?"),
        "{}",
        text(&output)
    );
    // A worker with the wrong token stops at once, saying why, rather than
    // dialing for ever.
    let started = std::time::Instant::now();
    let output = Command::new(ARGUS)
        .args(["worker", "--coordinator", &url, "--ports", &free_port().to_string(), "--token", "wrong"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("the coordinator refused this worker"), "{}", text(&output));
    assert!(text(&output).contains("token"), "{}", text(&output));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_simulated_app_stops_on_sigterm() {
    let mut app = common::sim(free_port());
    std::thread::sleep(std::time::Duration::from_millis(300));
    common::signal(&app, "TERM");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if let Some(status) = app.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "argus sim outlived SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn logs_are_json_lines_for_a_collector_when_asked() {
    use std::io::BufRead;
    let dir = temp_dir("json-logs");
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let (listen, http) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let mut child = Command::new(ARGUS)
        .current_dir(&dir)
        .args(["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http])
        .env("ARGUS_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line: serde_json::Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!(line["level"], "INFO", "{first}");
    assert!(line["fields"]["message"].is_string(), "{first}");
    assert!(!first.contains('\u{1b}'), "no colour codes: {first}");
}

#[test]
fn standalone_serves_the_dashboard_and_metrics_too() {
    let dir = temp_dir("standalone");
    let (listen, http, port) =
        (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()), free_port());
    let _standalone = Killed(spawn(
        &[
            "standalone",
            "--listen",
            &listen,
            "--http",
            &http,
            "--ports",
            &port.to_string(),
            "--database-url",
            "sqlite:a.db",
        ],
        &dir,
    ));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&format!("http://{listen}"), 1);
    let (status, fleet) = http_get_bytes(&http, "/fleet");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&fleet).contains(&format!("local/{port}")), "the device is on the fleet page");
    let (status, metrics) = http_get_bytes(&http, "/metrics");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&metrics).contains("argus_build_info"));
}

/// Stand-ins for `xcrun` and `adb` on the PATH: they record their arguments
/// and print what the real tools print for one booted simulator and one
/// emulator.
fn stand_in_tools(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let simctl = r#"{"devices":{"com.apple.CoreSimulator.SimRuntime.iOS-17-4":[{"udid":"5D1C9A2E-1","isAvailable":true,"state":"Booted","name":"iPhone 15"}]}}"#;
    let adb = "List of devices attached\nemulator-5554          device product:sdk_gphone64_x86_64 model:Pixel_8 device:emu64xa transport_id:1\n";
    for (tool, output) in [("xcrun", simctl), ("adb", adb)] {
        let script =
            format!("#!/bin/sh\necho \"$*\" >> \"{}/{tool}.args\"\ncat <<'OUT'\n{output}\nOUT\n", dir.display());
        let path = bin.join(tool);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

#[test]
fn a_worker_discovers_its_hosts_simulators_and_emulators_and_says_what_each_app_must_be_told() {
    let dir = temp_dir("discover");
    let bin = stand_in_tools(&dir);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let output = Command::new(ARGUS)
        .current_dir(&dir)
        .env("PATH", &path)
        .args(["worker", "--discover", "--first-port", "9100", "--coordinator", "http://c:7171"])
        .args(["--ios-bundle", "com.example.shop", "--android-activity", "com.example.shop/.Main"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let proposed = String::from_utf8(output.stdout).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("xcrun.args")).unwrap().trim(), "simctl list devices booted -j");
    assert_eq!(std::fs::read_to_string(dir.join("adb.args")).unwrap().trim(), "devices -l");
    assert!(
        proposed.contains("udid = \"5D1C9A2E-1\"") && proposed.contains("serial = \"emulator-5554\""),
        "{proposed}"
    );
    assert!(proposed.contains("platformVersion = \"17.4\"") && proposed.contains("model = \"Pixel 8\""), "{proposed}");
    assert!(
        proposed.contains("hooks.log = \"xcrun simctl spawn {udid} log stream --style compact\"")
            && proposed.contains("hooks.log = \"adb -s {serial} logcat -v threadtime\""),
        "each device's log is proposed: {proposed}"
    );
    assert!(
        proposed.contains(
            "SIMCTL_CHILD_LYNKEUS_PORT={port} xcrun simctl launch --terminate-running-process {udid} com.example.shop"
        ),
        "{proposed}"
    );
    // The proposal is a worker file; each slot says what its app is told.
    std::fs::write(dir.join("worker.toml"), &proposed).unwrap();
    let output = Command::new(ARGUS)
        .current_dir(&dir)
        .args(["worker", "--config", "worker.toml", "--print-slots"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let said = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(lines[0].contains("the app dials ws://127.0.0.1:9100; launch it with its port: SIMCTL_CHILD_LYNKEUS_PORT=9100 xcrun simctl launch 5D1C9A2E-1"), "{said}");
    assert!(lines[1].contains("the app dials ws://10.0.2.2:9101; launch it with its port: adb -s emulator-5554 shell am start -n ACTIVITY --ei LYNKEUS_PORT 9101"), "{said}");
    // Without either tool, there is nothing to find, and it says so.
    let output = Command::new(ARGUS)
        .current_dir(&dir)
        .env("PATH", "/nonexistent")
        .args(["worker", "--discover"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).contains("no booted iOS simulator"), "{}", text(&output));
}

#[test]
fn a_worker_serves_its_metrics() {
    let dir = temp_dir("worker-metrics");
    std::fs::create_dir_all(dir.join("cases")).unwrap();
    std::fs::write(dir.join("cases/title.md"), "---\nid: title\n---\nsteps:\n  - app.see: \"#title\"\n").unwrap();
    let (listen, metrics, port) =
        (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()), free_port());
    let url = format!("http://{listen}");
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    let http = format!("127.0.0.1:{}", free_port());
    let _coordinator =
        Killed(spawn(&["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http], &dir));
    let _worker = Killed(spawn(
        &["worker", "--coordinator", &url, "--name", "m", "--ports", &port.to_string(), "--metrics", &metrics],
        &dir,
    ));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&url, 1);
    let run = Command::new(ARGUS).current_dir(&dir).args(["run", "--coordinator", &url]).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let (status, body) = http_get_bytes(&metrics, "/metrics");
    assert_eq!(status, 200);
    let body = String::from_utf8(body).unwrap();
    for line in [
        concat!(r#"argus_build_info{version=""#, env!("CARGO_PKG_VERSION"), r#"",component="worker"} 1"#),
        r#"argus_worker_attempts_total{name="passed"} 1"#,
    ] {
        assert!(body.lines().any(|l| l == line), "{line} missing from\n{body}");
    }
    let slot = format!(r#"argus_worker_slot{{slot="{port}",platform="ios",state="idle"}} 1"#);
    assert!(body.lines().any(|l| l == slot), "{slot} missing from\n{body}");
    assert!(body.contains(r#"argus_worker_driver_call_duration_seconds_count{name="screen"}"#), "{body}");
}

#[test]
fn a_suite_outside_the_working_folder_runs_from_anywhere_with_the_argus_that_runs_it() {
    let scratch = temp_dir("anywhere");
    let suite = scratch.join("e2e é/cases");
    std::fs::create_dir_all(&suite).unwrap();
    // `exec` runs `argus` from a PATH without it: the client's own folder
    // comes first, as for a fixtures command `argus demo-backend`.
    std::fs::write(
        suite.join("ok.md"),
        "---\nid: ok\n---\nsteps:\n  - exec: argus --version\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    std::fs::write(suite.join("two words.md"), "---\nid: two\n---\nsteps:\n  - app.see: \"#title\"\n").unwrap();
    let build = scratch.join("ios/build");
    std::fs::create_dir_all(&build).unwrap();
    std::os::unix::fs::symlink(&suite, build.join("linked")).unwrap();
    let argus = |args: &[&str]| {
        Command::new(ARGUS).current_dir(&build).args(args).env("PATH", "/usr/bin:/bin").output().unwrap()
    };
    for named in ["../../e2e é/cases", suite.to_str().unwrap(), "./linked", "../../e2e é/cases/two words.md"] {
        let output = argus(&["cases", "check", "--json", named]);
        let printed = text(&output);
        assert_eq!(output.status.code(), Some(0), "{named}: {printed}");
        let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let files: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|c| c["file"].as_str()).collect();
        let expected: &[&str] = match named {
            "./linked" => &["linked/ok.md", "linked/two words.md"],
            "../../e2e é/cases/two words.md" => &["two words.md"],
            _ => &["cases/ok.md", "cases/two words.md"],
        };
        assert_eq!(files, expected, "{named}");
    }
    let port = free_port();
    let _sims = Sims::start(&[port]);
    let output = argus(&["run", suite.to_str().unwrap(), "--ports", &port.to_string(), "--out", "out"]);
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    let run = RunDir::read(&build.join("out")).unwrap();
    let files: std::collections::BTreeSet<&str> = run.cases.iter().map(|c| c.file.as_str()).collect();
    assert_eq!(files.into_iter().collect::<Vec<_>>(), ["cases/ok.md", "cases/two words.md"]);
    let ok = run.cases.iter().find(|c| c.id == "ok").unwrap();
    assert_eq!(ok.steps[0].status, StepStatus::Passed, "{:?}", ok.steps[0]);
}

#[test]
fn prune_removes_whole_runs_with_their_pictures_and_says_what_it_would_do_first() {
    let scratch = temp_dir("prune");
    let project = scratch.join("project");
    std::fs::create_dir_all(project.join("cases")).unwrap();
    std::fs::write(
        project.join("cases/red.md"),
        "---\nid: red\n---\nsteps:\n  - app.see: { text: Nope, timeoutMs: 100 }\n",
    )
    .unwrap();
    let database = format!("sqlite:{}", scratch.join("argus.db").display());
    let artifacts = scratch.join("artifacts");
    let artifacts_arg = artifacts.display().to_string();
    let (_coordinator, url) = sqlite_coordinator(&scratch, &["--artifacts", &artifacts_arg]);
    let port = free_port();
    let _worker = Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port.to_string()], &scratch));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&url, 1);
    let output =
        Command::new(ARGUS).current_dir(&project).args(["run", "--coordinator", &url, "--once"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let folders = || std::fs::read_dir(&artifacts).unwrap().count();
    assert_eq!(folders(), 1, "the failure's picture is kept in the run's folder");
    let prune = |args: &[&str]| {
        Command::new(ARGUS)
            .current_dir(&scratch)
            .args(["prune", "--database-url", &database, "--artifacts", &artifacts_arg])
            .args(args)
            .output()
            .unwrap()
    };
    let output = prune(&["--older-than", "1d"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("removed 0 runs (0 attempts, 0 steps)"), "{}", text(&output));
    let output = prune(&["--older-than", "0s", "--dry-run"]);
    assert!(text(&output).contains("would remove 1 run (1 attempts, 1 steps)"), "{}", text(&output));
    assert_eq!(folders(), 1, "a dry run removes nothing");
    let output = prune(&["--older-than", "0s"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("removed 1 run (1 attempts, 1 steps)"), "{}", text(&output));
    assert!(text(&output).contains("the flakiness summaries stay"), "{}", text(&output));
    assert_eq!(folders(), 0, "its pictures went with it");
    let listed = Command::new(ARGUS).args(["runs", "--coordinator", &url]).output().unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(!text(&listed).contains("red") && !text(&listed).contains("failed"), "{}", text(&listed));
    // Bad ages and windows are refused, named.
    let output = prune(&["--older-than", "90"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("\"90\" is not an age: give a whole number and a unit"), "{}", text(&output));
    let output = Command::new(ARGUS).current_dir(&scratch).args(["coordinator", "--keep-days", "0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("keep_days 0 would remove every finished run"), "{}", text(&output));
}

#[test]
fn runs_compare_names_what_a_run_fixed_and_broke_and_exits_1_on_a_new_failure() {
    let scratch = temp_dir("compare");
    std::fs::create_dir_all(scratch.join("project/cases")).unwrap();
    let case = |steps: &str| {
        std::fs::write(scratch.join("project/cases/home.md"), format!("---\nid: home\n---\nsteps:\n{steps}")).unwrap()
    };
    let (_coordinator, url) = sqlite_coordinator(&scratch, &[]);
    let port = free_port();
    let _worker = Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port.to_string()], &scratch));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&url, 1);
    let run = || {
        let output = Command::new(ARGUS)
            .current_dir(scratch.join("project"))
            .args(["run", "--coordinator", &url, "--once"])
            .output()
            .unwrap();
        output.status.code()
    };
    case("  - app.see: { text: Nope, timeoutMs: 100 }\n");
    assert_eq!(run(), Some(1));
    case("  - app.see: \"#title\"\n");
    assert_eq!(run(), Some(0));
    let listed = text(&Command::new(ARGUS).args(["runs", "--coordinator", &url]).output().unwrap());
    // Newest first: the passing run, then the failing one.
    let ids: Vec<&str> = listed.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(ids.len(), 2, "{listed}");
    let compare = |from: &str, to: &str| {
        Command::new(ARGUS).args(["runs", "compare", from, to, "--coordinator", &url]).output().unwrap()
    };
    let fixed = compare(ids[1], ids[0]);
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed));
    assert!(text(&fixed).contains("fixed:") && text(&fixed).contains("home (ios)  failed ["), "{}", text(&fixed));
    let broke = compare(ids[0], ids[1]);
    assert_eq!(broke.status.code(), Some(1), "{}", text(&broke));
    assert!(
        text(&broke).contains("new-failure:") && text(&broke).contains("home (ios)  passed → failed"),
        "{}",
        text(&broke)
    );
    let missing = compare(ids[0], "no-such-run");
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(text(&missing).contains("no run no-such-run"), "{}", text(&missing));
    // Three more passes give the case a spread of its own; then it passes
    // 700 ms slower, beyond it.
    for _ in 0..3 {
        assert_eq!(run(), Some(0));
    }
    case("  - app.see: \"#title\"\n  - app.wait: 700\n");
    assert_eq!(run(), Some(0));
    let listed = text(&Command::new(ARGUS).args(["runs", "--coordinator", &url]).output().unwrap());
    let ids: Vec<&str> = listed.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    let slower = compare(ids[1], ids[0]);
    assert_eq!(slower.status.code(), Some(0), "slower is no new failure: {}", text(&slower));
    assert!(text(&slower).contains("slower:") && text(&slower).contains("home (ios)"), "{}", text(&slower));
    assert!(text(&slower).contains("(its spread"), "{}", text(&slower));
    let faster = compare(ids[0], ids[1]);
    assert!(text(&faster).contains("faster:"), "{}", text(&faster));
}

#[test]
fn a_second_app_with_a_wrong_token_neither_takes_calls_nor_goes_unnamed() {
    let scratch = temp_dir("wrong-token");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    std::fs::write(
        scratch.join("cases/home.md"),
        "---\nid: home\nmatrix: { n: [1, 2, 3, 4, 5, 6] }\n---\nsteps:\n  - app.see: \"#title\"\n  - app.press: \"#feed\"\n  - app.see: \"Bo's chair\"\n",
    )
    .unwrap();
    let (_coordinator, url) = sqlite_coordinator(&scratch, &[]);
    let port = free_port().to_string();
    let _worker = Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port, "--app-token", "good"], &scratch));
    let model = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let sim = |token: &str| {
        let child = Command::new(ARGUS)
            .args(["sim", "--model"])
            .arg(&model)
            .args(["--port", &port, "--token", token])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Killed(child)
    };
    let good = sim("good");
    wait_for_devices(&url, 1);
    // A second app dials the same port with a wrong token, again and again.
    let _stranger = sim("bad");
    let output = Command::new(ARGUS).current_dir(&scratch).args(["run", "--coordinator", &url]).output().unwrap();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("6/6 passed") && !printed.contains("flaky") && !printed.contains("↻"), "{printed}");
    // Without the right app, the device says what it sees.
    drop(good);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let wanted = format!("an app connected on {port} but never answered auth (wrong token?)");
    loop {
        let listing = text(&Command::new(ARGUS).args(["devices", "--coordinator", &url]).output().unwrap());
        if listing.contains(&wanted) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the device never said why: {listing}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_device_whose_before_hook_relaunches_its_app_is_not_out() {
    let scratch = temp_dir("relaunch-hook");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    std::fs::write(
        scratch.join("cases/home.md"),
        "---\nid: home\nmatrix: { n: [1, 2, 3, 4] }\n---\nsteps:\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    let model = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    // The app is launched anew before every attempt, as a hook that
    // relaunches a simulator's app does: gone for a moment, then back.
    let pid = scratch.join("app.pid");
    let relaunch = scratch.join("relaunch.sh");
    std::fs::write(
        &relaunch,
        format!(
            "kill \"$(cat '{pid}')\" 2>/dev/null\nsleep 0.3\n'{argus}' sim --model '{model}' --port \"$1\" >/dev/null 2>&1 &\necho $! > '{pid}'\n",
            pid = pid.display(),
            argus = ARGUS,
            model = model.display()
        ),
    )
    .unwrap();
    let port = free_port();
    let worker_file = scratch.join("worker.toml");
    std::fs::write(
        &worker_file,
        format!("[[slot]]\nport = {port}\nhooks.before = \"sh '{}' {{port}}\"\n", relaunch.display()),
    )
    .unwrap();
    let (_coordinator, url) = sqlite_coordinator(&scratch, &[]);
    let config = worker_file.display().to_string();
    let _worker = Killed(spawn(&["worker", "--coordinator", &url, "--config", &config], &scratch));
    assert!(Command::new("sh").arg(&relaunch).arg(port.to_string()).status().unwrap().success());
    wait_for_devices(&url, 1);
    let output = Command::new(ARGUS).current_dir(&scratch).args(["run", "--coordinator", &url]).output().unwrap();
    let _ = Command::new("sh").arg("-c").arg(format!("kill \"$(cat '{}')\"", pid.display())).status();
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(printed.contains("4/4 passed"), "{printed}");
    assert!(!printed.contains("is out"), "a device in its own attempt is not out: {printed}");
}

/// A coordinator on SQLite in `dir` (`dir/argus.db`), with `extra` flags:
/// the process and its gRPC URL.
fn sqlite_coordinator(dir: &std::path::Path, extra: &[&str]) -> (Killed, String) {
    let (coordinator, listen, _) = coordinator_on_free_ports(dir, extra);
    (coordinator, format!("http://{listen}"))
}

#[test]
fn a_muted_case_fails_without_failing_the_run_reruns_come_from_the_stored_files_and_passes_unmute_it() {
    let scratch = temp_dir("muted");
    let cases = scratch.join("project/cases");
    std::fs::create_dir_all(&cases).unwrap();
    let write = |name: &str, steps: &str| {
        std::fs::write(cases.join(format!("{name}.md")), format!("---\nid: {name}\n---\nsteps:\n{steps}")).unwrap()
    };
    write("home", "  - app.see: \"#title\"\n");
    write("promo", "  - app.see: { text: Nope, timeoutMs: 100 }\n");
    // Who owns what, named beside each failure.
    let owners = scratch.join("project/TESTOWNERS");
    std::fs::write(&owners, "cases/ ana\n").unwrap();
    let (_coordinator, url) = sqlite_coordinator(&scratch, &["--unmute-after", "2"]);
    let port = free_port();
    let _worker = Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port.to_string()], &scratch));
    let _sims = Sims::start(&[port]);
    wait_for_devices(&url, 1);
    let argus = |args: &[&str]| {
        Command::new(ARGUS)
            .current_dir(scratch.join("project"))
            // Runs on the default branch, whatever CI this runs under.
            .env("GITHUB_HEAD_REF", "main")
            .args(args)
            .args(["--coordinator", &url])
            .output()
            .unwrap()
    };
    let run_id = |output: &std::process::Output| {
        let printed = text(output);
        printed.lines().find_map(|l| l.strip_prefix("run ")?.split(':').next().map(str::to_owned)).unwrap()
    };
    let refused = argus(&["run", "--once"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("TESTOWNERS:1: \"ana\" is not an owner: write @user, @org/team or an email address"),
        "{}",
        text(&refused)
    );
    std::fs::write(&owners, "*  @shop-team\ncases/promo.md  @ana\n").unwrap();
    let first = argus(&["run", "--once"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(text(&first).contains("✗ promo [") && text(&first).contains(" (@ana)"), "{}", text(&first));
    let failed_run = run_id(&first);

    // A case that never ran is not muted by a typo.
    let typo = argus(&["cases", "mute", "prom", "--reason", "x"]);
    assert_eq!(typo.status.code(), Some(2), "{}", text(&typo));
    assert!(text(&typo).contains("no case \"prom\" has run in project \"project\""), "{}", text(&typo));
    let muted = argus(&["cases", "mute", "promo", "--reason", "stale promotion <#12>", "--owner", "ana", "--by", "ci"]);
    assert_eq!(muted.status.code(), Some(0), "{}", text(&muted));
    let listed = text(&argus(&["cases", "muted"]));
    assert!(listed.contains("promo") && listed.contains("stale promotion <#12>") && listed.contains("ana"), "{listed}");

    // Muted: it still runs and fails, and the run passes; JUnit skips it
    // with the reason.
    let junit = scratch.join("junit.xml");
    let second = argus(&["run", "--once", "--junit", junit.to_str().unwrap()]);
    let printed = text(&second);
    assert_eq!(second.status.code(), Some(0), "{printed}");
    assert!(printed.contains("1 case muted") && printed.contains("1/2 passed"), "{printed}");
    assert!(printed.contains("muted: promo failed and does not fail the run (stale promotion <#12>)"), "{printed}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<skipped message="muted: stale promotion &lt;#12&gt;">"#), "{xml}");
    assert!(xml.contains(r#"failures="0""#), "{xml}");

    // The files change here; a rerun of the first run runs what failed
    // there, as it was then.
    write("promo", "  - app.see: \"#title\"\n");
    write("added", "  - app.see: \"#title\"\n");
    let muted_run = run_id(&second);
    let nothing = argus(&["run", "--rerun-failed", &muted_run]);
    assert_eq!(nothing.status.code(), Some(2), "{}", text(&nothing));
    assert!(
        text(&nothing).contains("has no failed case to run again (1 muted case failed: --rerun-muted runs them too)"),
        "{}",
        text(&nothing)
    );
    let rerun = argus(&["run", "--rerun-failed", &failed_run, "--once", "--junit", junit.to_str().unwrap()]);
    let printed = text(&rerun);
    assert_eq!(rerun.status.code(), Some(0), "only the muted case failed: {printed}");
    assert!(printed.contains(": 1 case"), "{printed}");
    assert!(printed.contains(&format!("the cases that failed in run {failed_run}")), "{printed}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="1""#) && xml.contains("promo") && xml.contains("Nope"), "the old file ran: {xml}");

    // Two passes in a row on main unmute it.
    for _ in 0..2 {
        let pass = argus(&["run", "--once"]);
        assert_eq!(pass.status.code(), Some(0), "{}", text(&pass));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let listed = text(&argus(&["cases", "muted"]));
        if listed.contains("(no case is muted)") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still muted after two passes: {listed}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let again = argus(&["cases", "unmute", "promo"]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("promo is not muted in project"), "{}", text(&again));
}

#[test]
fn a_slots_log_hook_keeps_each_attempts_device_log_bounded_and_fetched_into_the_run_directory() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = temp_dir("device-log");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    std::fs::write(
        scratch.join("cases/home.md"),
        "---\nid: home\nmatrix: { n: [1, 2, 3] }\n---\nsteps:\n  - app.see: \"#title\"\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join("cases/pay.md"),
        "---\nid: pay\n---\nsteps:\n  - app.see: { text: Paid, timeoutMs: 200 }\n",
    )
    .unwrap();
    // Stand-ins that print as the real tools do: `log stream --style
    // compact` says a few lines and waits; `logcat -v threadtime` floods.
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tools = [
        (
            "xcrun",
            "echo \"$*\" >> \"$0.args\"\necho 'Filtering the log data using \"process == \\\"Shop\\\"\"'\necho '2026-12-06 12:00:00.001 Df Shop[812:1a2b] [com.example.shop:net] GET /api/feed 200'\necho '2026-12-06 12:00:00.002 E  Shop[812:1a2b] <b>Cart</b> is empty'\nexec sleep 600\n",
        ),
        (
            "adb",
            "echo \"$*\" >> \"$0.args\"\necho '--------- beginning of main'\ni=0\nwhile :; do echo \"12-06 12:00:00.000  1234  1234 I ShopApp: line $i\"; i=$((i+1)); done\n",
        ),
    ];
    for (tool, script) in tools {
        let path = bin.join(tool);
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (_coordinator, url) = sqlite_coordinator(&scratch, &[]);
    let (ios, android) = (free_port(), free_port());
    std::fs::write(
        scratch.join("worker.toml"),
        format!(
            "[[slot]]\nname = \"ios-1\"\nport = {ios}\nudid = \"SIM-1\"\nhooks.log = \"xcrun simctl spawn {{udid}} log stream --style compact\"\n\n\
             [[slot]]\nname = \"android-1\"\nport = {android}\nplatform = \"android\"\nserial = \"emulator-5554\"\nhooks.log = \"adb -s {{serial}} logcat -v threadtime\"\n"
        ),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let _worker = Killed(
        Command::new(ARGUS)
            .current_dir(&scratch)
            .env("PATH", &path)
            .args(["worker", "--coordinator", &url, "--name", "mac", "--config", "worker.toml"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let model =
        std::fs::read_to_string(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml"))
            .unwrap();
    std::fs::write(scratch.join("android.yaml"), model.replace("\nplatform: ios\n", "\nplatform: android\n")).unwrap();
    let mut sims = Sims::start(&[ios]);
    sims.0.push(
        Command::new(ARGUS)
            .args(["sim", "--model"])
            .arg(scratch.join("android.yaml"))
            .args(["--port", &android.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_devices(&url, 2);
    let out = scratch.join("out");
    let run = Command::new(ARGUS)
        .current_dir(&scratch)
        .args(["run", "--coordinator", &url, "--once", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let lines = argus_proto::run::RunDir::read(&out).unwrap().cases;
    let mut platforms = std::collections::BTreeSet::new();
    for line in &lines {
        let log = line.extra.get("log").and_then(|l| l.as_str()).unwrap_or_else(|| panic!("{} names no log", line.id));
        let kept = std::fs::read_to_string(out.join(log)).unwrap_or_else(|e| panic!("{log} was not fetched: {e}"));
        let platform = line.device.as_ref().unwrap().platform.as_str().to_owned();
        if platform == "android" {
            assert!(kept.starts_with("--------- beginning of main\n"), "its start is kept");
            assert!(kept.contains(" bytes of the device log left out …\n"), "a flood is bounded");
            assert!(kept.len() <= 256 * 1024 + 200, "{} bytes", kept.len());
            assert!(kept.trim_end().rsplit('\n').next().unwrap().contains("I ShopApp: line "), "its end is kept whole");
        } else {
            assert!(kept.contains("GET /api/feed 200") && kept.contains("<b>Cart</b> is empty"), "{kept}");
        }
        platforms.insert(platform);
    }
    assert_eq!(platforms.len(), 2, "both slots ran cases: {lines:?}");
    let said = |tool: &str| std::fs::read_to_string(bin.join(format!("{tool}.args"))).unwrap();
    assert!(said("adb").lines().all(|l| l == "-s emulator-5554 logcat -v threadtime"), "{}", said("adb"));
    assert!(said("xcrun").lines().all(|l| l == "simctl spawn SIM-1 log stream --style compact"), "{}", said("xcrun"));
}

#[test]
fn an_apps_crash_is_kept_with_its_stack_on_the_attempt_and_grouped_on_the_run_page() {
    let scratch = temp_dir("crash");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    let crash = "  - app.call: { command: crash }\n";
    std::fs::write(
        scratch.join("cases/cart.md"),
        format!("---\nid: cart\n---\nsteps:\n{crash}  - app.see: \"#title\"\n"),
    )
    .unwrap();
    std::fs::write(
        scratch.join("cases/pay.md"),
        format!("---\nid: pay\n---\nsteps:\n{crash}  - app.see: {{ text: Paid, timeoutMs: 100 }}\n"),
    )
    .unwrap();
    // The shop, with a command whose handler throws.
    let thrown = "TypeError: undefined is not an object (evaluating '<b>cart</b>.items')";
    let (_grid, url, http) = grid_of_one_shop(&scratch, |model| {
        model.replacen(
            "commands:\n",
            &format!("commands:\n  crash: {{ result: null, actions: [{{ crash: \"{thrown}\" }}] }}\n"),
            1,
        )
    });
    let out = scratch.join("out");
    let run = Command::new(ARGUS)
        .current_dir(&scratch)
        .args(["run", "--coordinator", &url, "--once", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let run_id = text(&run).lines().find_map(|l| l.strip_prefix("run ")?.split(':').next().map(str::to_owned)).unwrap();
    for line in argus_proto::run::RunDir::read(&out).unwrap().cases {
        let crashes =
            line.extra.get("crashes").and_then(|c| c.as_array()).unwrap_or_else(|| panic!("{}: no crashes", line.id));
        assert_eq!(crashes.len(), 1, "{crashes:?}");
        assert_eq!(crashes[0]["message"], thrown);
        assert_eq!(crashes[0]["route"], "Home");
        assert!(crashes[0]["stack"].as_str().unwrap().contains("\n    at HomeScreen ("), "{crashes:?}");
    }
    let (status, page) = http_json(&http, "GET", &format!("/runs/{run_id}"), "");
    assert_eq!(status, 200);
    assert!(page.contains("id=\"crashes\""), "{page}");
    let escaped = "TypeError: undefined is not an object (evaluating &#39;&#60;b&#62;cart&#60;/b&#62;.items&#39;)";
    assert!(page.contains(&format!("<code>{escaped}</code> · 2 cases")), "grouped, as text: {page}");
    assert!(page.contains("class=\"stack\"") && page.contains("at HomeScreen (index.bundle"), "{page}");
    assert!(!page.contains("<b>cart</b>"), "never markup");
}

#[test]
fn an_apps_memory_and_render_time_are_read_around_each_attempt_and_charted_on_its_case_page() {
    let scratch = temp_dir("health");
    std::fs::create_dir_all(scratch.join("cases")).unwrap();
    std::fs::write(
        scratch.join("cases/feed.md"),
        "---\nid: feed\n---\nsteps:\n  - app.press: \"#feed\"\n  - app.see: \"#list\"\n",
    )
    .unwrap();
    // A case that records its own profile: the worker leaves `profile` alone.
    std::fs::write(
        scratch.join("cases/own.md"),
        "---\nid: own\n---\nsteps:\n  - app.profile: start\n  - app.see: \"#title\"\n  - app.profile: stop\n",
    )
    .unwrap();
    // The shop as a headless host that leaks 2 MB at every reset, each
    // React commit costing 1.5 ms.
    let (_grid, url, http) = grid_of_one_shop(&scratch, |model| {
        format!("{model}\nrenderMs: 1.5\nmemory: {{ heapMb: 40, rssMb: 150, leakMbPerReset: 2 }}\n")
    });
    for _ in 0..3 {
        let run = Command::new(ARGUS)
            .current_dir(&scratch)
            .args(["run", "--coordinator", &url, "--once", "--project", "leaky"])
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    }
    let (status, body) = http_json(&http, "GET", "/api/v1/cases/feed?project=leaky", "");
    assert_eq!(status, 200, "{body}");
    let history: serde_json::Value = serde_json::from_str(&body).unwrap();
    let attempts = history["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{body}");
    // Newest first: each attempt began 4 MB above the one before it (two
    // resets of 2 MB a run: its own and the other case's).
    let heap = |a: &serde_json::Value, key: &str| a["health"][key].as_i64().unwrap_or_else(|| panic!("{key}: {a}"));
    for pair in attempts.windows(2) {
        assert_eq!(heap(&pair[0], "heap_start_kb") - heap(&pair[1], "heap_start_kb"), 2 * 2 * 1024, "{body}");
    }
    for attempt in attempts {
        assert_eq!(heap(attempt, "heap_end_kb"), heap(attempt, "heap_start_kb"), "no reset inside the attempt");
        assert_eq!(heap(attempt, "rss_start_kb") - heap(attempt, "heap_start_kb"), 110 * 1024);
        let commits = heap(attempt, "render_commits");
        assert!(commits >= 1, "the press navigated: {attempt}");
        assert_eq!(heap(attempt, "render_us"), commits * 1_500, "{attempt}");
    }
    let (_, own) = http_json(&http, "GET", "/api/v1/cases/own?project=leaky", "");
    let own: serde_json::Value = serde_json::from_str(&own).unwrap();
    for attempt in own["attempts"].as_array().unwrap() {
        assert!(attempt["health"]["heap_start_kb"].is_i64(), "{attempt}");
        assert!(attempt["health"]["render_commits"].is_null(), "the case's own profile is left alone: {attempt}");
    }
    let (status, page) = http_json(&http, "GET", "/cases/feed?project=leaky", "");
    assert_eq!(status, 200);
    assert!(page.contains("id=\"health\""), "{page}");
    assert!(page.contains("class=\"trend heap-start\"") && page.contains("class=\"trend heap-end\""), "{page}");
    assert!(page.contains("class=\"trend render\""), "{page}");
    assert_eq!(page.matches("class=\"dot heap-start\"").count(), 3, "{page}");
    assert!(!page.contains("render-not-measured"), "{page}");
    // No render figure recorded: said, not charted as zero.
    let (status, page) = http_json(&http, "GET", "/cases/own?project=leaky", "");
    assert_eq!(status, 200);
    assert!(page.contains("class=\"trend heap-start\"") && !page.contains("class=\"trend render\""), "{page}");
    assert!(page.contains("id=\"render-not-measured\"") && page.contains("Render time: not measured"), "{page}");
}

/// A grid of one device whose app is the shop's model as `change` makes it:
/// what keeps it running, the coordinator's URL and its HTTP address.
fn grid_of_one_shop(scratch: &std::path::Path, change: impl FnOnce(String) -> String) -> ([Killed; 3], String, String) {
    let shop = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    let model = scratch.join("app.yaml");
    std::fs::write(&model, change(std::fs::read_to_string(shop).unwrap())).unwrap();
    let (coordinator, listen, http) = coordinator_on_free_ports(scratch, &[]);
    let url = format!("http://{listen}");
    let port = free_port();
    let worker = Killed(spawn(&["worker", "--coordinator", &url, "--ports", &port.to_string()], scratch));
    let sim = Killed(sim_of(&model, port));
    wait_for_devices(&url, 1);
    ([coordinator, worker, sim], url, http)
}
