//! "Why it failed" over the real grid: a coordinator, a worker, simulated
//! apps whose model (the app and its backend) changes between runs, and
//! each failure explained against the last time its case passed.
#![allow(clippy::disallowed_methods)] // Tests start their helpers with tokio::spawn.

use std::time::Duration;

use argus_history::explain::{self, Explained};
use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_sim::model::Model;
use argus_store::Store;
use argus_testkit::{Grid, GridOptions, Sim, free_ports, http_get};

/// The app under test, as a model: a cart whose `POST /api/cart` answers
/// `status`, whose checkout button is `#checkout_id`, at `version`, with a
/// note that appears after `late_ms`.
struct App {
    status: u16,
    checkout_id: &'static str,
    version: &'static str,
    late_ms: u64,
    total: &'static str,
}

const GOOD: App = App { status: 200, checkout_id: "checkout", version: "2.3.1", late_ms: 1_600, total: "Total 10" };

impl App {
    fn model(&self) -> Model {
        let after_add = if self.status < 400 { "navigate: Cart" } else { "show: unavailable" };
        let text = format!(
            r#"
app: {{ name: Cart, version: {version} }}
platform: ios
initialRoute: Home
routes:
  Home:
    elements:
      - {{ kind: text, testId: title, text: Cart }}
      - kind: button
        testId: add
        text: Add to cart
        onPress:
          - request: {{ method: POST, url: "https://api.shop.test/api/cart?session=abc", status: {status}, ms: 40 }}
          - wait: 60
          - {after_add}
      - {{ kind: text, testId: unavailable, text: Service unavailable, visible: false }}
      - {{ kind: text, testId: late, text: Ready, appearAfterMs: {late} }}
  Cart:
    elements:
      - {{ kind: text, testId: total, text: "{total}" }}
      - {{ kind: button, testId: {checkout}, text: Checkout }}
"#,
            version = self.version,
            status = self.status,
            after_add = after_add,
            late = self.late_ms,
            total = self.total,
            checkout = self.checkout_id,
        );
        Model::parse(&text, "cart.yaml").unwrap()
    }
}

fn file(id: &str, steps: &str) -> grpc::CaseFile {
    grpc::CaseFile { path: format!("cases/{id}.md"), source: format!("---\nid: {id}\n---\nsteps:\n{steps}") }
}

const CART: &str =
    "  - app.press: \"#add\"\n  - app.wait: Cart\n  - app.see: \"#total\"\n  - app.press: \"#checkout\"\n";

const TOTAL: &str = "  - app.press: \"#add\"\n  - app.wait: Cart\n  - app.see: { testId: total, text: Total 10 }\n";

/// Cases that add to the cart, one that waits for a late note.
fn suite() -> Vec<grpc::CaseFile> {
    vec![
        file("cart", CART),
        file("cart-again", CART),
        file("late", "  - app.see: { testId: late, timeoutMs: 2500 }\n  - app.see: \"#title\"\n"),
        file("total", TOTAL),
        file("total-again", TOTAL),
    ]
}

/// Submits on `main` at `commit` and waits for the end; the run's id.
async fn run(url: &str, cases: Vec<grpc::CaseFile>, commit: &str, retries: u32) -> String {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let request = grpc::SubmitRequest {
        cases,
        selector: Some(grpc::Selector { platform: "ios".into(), ..Default::default() }),
        retries,
        project: "cart".into(),
        branch: "main".into(),
        commit: commit.into(),
        ..Default::default()
    };
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let update =
            tokio::time::timeout_at(deadline, updates.message()).await.expect("the run ended").unwrap().unwrap();
        if let Some(run_update::Kind::RunFinished(_)) = update.kind {
            return run_id;
        }
    }
}

/// Every app of the grid replaced by one of `apps` (one per port).
async fn serve(grid: &mut Grid, ports: &[u16], apps: &[&App]) {
    for sim in grid.sims.drain(..) {
        sim.stop();
    }
    // The old apps' links close before the new ones dial.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (port, app) in ports.iter().zip(apps) {
        grid.sims.push(Sim::start_with(*port, None, app.model()));
    }
    grid.wait_for_devices(ports.len()).await;
}

/// A coordinator with its HTTP port on `database`: the grid and the port.
async fn grid_with_pages(database: &str) -> (Grid, String) {
    let grid = Grid::serve(GridOptions { database: Some(database.into()), http: true, ..GridOptions::default() }).await;
    let pages = grid.http().to_string();
    (grid, pages)
}

/// The JSON object of a response, chunked or not.
fn json_of(body: &str) -> serde_json::Value {
    let start = body.find('{').unwrap_or_else(|| panic!("not JSON: {body:?}"));
    let end = body.rfind('}').unwrap();
    serde_json::from_str(&body[start..=end]).unwrap()
}

fn case<'a>(explained: &'a [Explained], id: &str) -> &'a Explained {
    explained.iter().find(|e| e.case_id == id).unwrap_or_else(|| panic!("{id} explained: {explained:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_names_what_changed_since_it_last_passed_and_why() {
    let database = argus_testkit::sqlite_url("argus-why");
    let (mut grid, pages) = grid_with_pages(&database).await;
    let ports = free_ports(2);
    grid.worker_on("w1", &ports);
    serve(&mut grid, &ports, &[&GOOD, &GOOD]).await;
    let store = Store::open(&database).await.unwrap();

    // 1. Everything passes: each case has a baseline.
    let first = run(&grid.url, suite(), "c1", 0).await;
    let (explained, _) = explain::explain_run(&store, &first).await.unwrap();
    assert!(explained.is_empty(), "{explained:#?}");

    // 2. The backend answers 503 to POST /api/cart.
    let backend = App { status: 503, ..GOOD };
    serve(&mut grid, &ports, &[&backend, &backend]).await;
    let second = run(&grid.url, suite(), "c2", 0).await;
    let (explained, groups) = explain::explain_run(&store, &second).await.unwrap();
    assert_eq!(explained.len(), 4, "{explained:#?}");
    let cart = case(&explained, "cart");
    assert_eq!(cart.cause.kind, "backend", "{cart:#?}");
    let first_difference = cart.changes.first_difference.as_ref().unwrap();
    // The press left the app on Home, where it had gone on to the cart.
    assert_eq!((first_difference.step, first_difference.label.as_str()), (1, "app.press #add"), "{cart:#?}");
    assert_eq!(
        (first_difference.route.as_deref(), first_difference.baseline_route.as_deref()),
        (Some("Home"), Some("Cart"))
    );
    assert_eq!(cart.changes.requests[0].describe(), "POST /api/cart 200 → 503");
    assert!(cart.changes.screen.appeared.iter().any(|e| e.0 == "#unavailable"), "{cart:#?}");
    assert!(
        cart.line.starts_with("first differs at step 1 `app.press #add`: on Home, not Cart; POST /api/cart 200 → 503"),
        "{}",
        cart.line
    );
    let commits = cart.commits.as_ref().unwrap();
    assert_eq!((commits.from.as_str(), commits.to.as_str(), commits.runs_between), ("c1", "c2", 0));
    let started = cart.started.as_ref().unwrap();
    assert_eq!(
        (started.first_failure.commit.as_str(), started.last_pass.as_ref().unwrap().commit.as_str()),
        ("c2", "c1")
    );
    // Both failures share the cause: one group.
    assert_eq!(groups.len(), 1, "{groups:#?}");
    assert_eq!((groups[0].cause, groups[0].signature.as_str()), ("backend", "POST /api/cart 503"));
    assert_eq!(groups[0].cases.len(), 4);
    // The same, as `argus run` asks for it.
    let mut runs = RunsClient::connect(grid.url.clone()).await.unwrap();
    let told = runs.explain(grpc::ExplainRequest { run_id: second.clone() }).await.unwrap().into_inner();
    assert_eq!(told.cases.len(), 4);
    assert_eq!(told.cases[0].line, explained[0].line);
    assert_eq!(told.groups[0].case_ids.len(), 4);
    // Compared with the run before: four new failures, each `backend`; and
    // the other way round, four fixed.
    let request = grpc::CompareRequest { from_run_id: first.clone(), to_run_id: second.clone() };
    let compared = runs.compare(request).await.unwrap().into_inner().changes;
    assert_eq!(compared.len(), 4, "{compared:#?}");
    assert!(compared.iter().all(|c| c.kind == "new-failure" && c.to_cause == "backend" && c.from_result == "passed"));
    assert!(compared.iter().any(|c| c.case_id == "cart" && c.platform == "ios"), "{compared:#?}");
    let (status, body) = http_get(&pages, &format!("/api/v1/runs/{second}/compare/{first}")).await;
    assert_eq!(status, 200, "{body}");
    let back = json_of(&body);
    let kinds: Vec<&str> = back["changes"].as_array().unwrap().iter().filter_map(|c| c["kind"].as_str()).collect();
    assert_eq!(kinds, ["fixed"; 4], "{back}");
    assert_eq!(back["changes"][0]["from_cause"], "backend");
    let (status, body) = http_get(&pages, &format!("/api/v1/runs/{first}/compare/nope")).await;
    assert_eq!((status, body.contains("no run nope")), (404, true), "{body}");
    // The page, and the run page's link to it from the run after.
    let (status, body) = http_get(&pages, &format!("/runs/{first}/compare/{second}")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("New failures <small>4</small>") && body.contains(">cart</a>"), "{body}");
    let (status, body) = http_get(&pages, &format!("/runs/{second}")).await;
    assert_eq!(status, 200);
    assert!(body.contains(&format!("href=\"/runs/{first}/compare/{second}\"")), "{body}");
    // And as the dashboard shows it: the diff's JSON, the run page.
    let (status, body) = http_get(&pages, &format!("/api/v1/runs/{second}/cases/cart/diff")).await;
    assert_eq!(status, 200, "{body}");
    let diff = json_of(&body);
    assert_eq!(diff["cause"]["kind"], "backend", "{diff}");
    assert_eq!(diff["cause"]["evidence"][0], "POST /api/cart 200 → 503", "{diff}");
    assert_eq!((diff["requests"][0]["from"].as_u64(), diff["requests"][0]["to"].as_u64()), (Some(200), Some(503)));
    assert_eq!(diff["first_difference"]["step"], 1);
    assert_eq!(diff["baseline"]["commit"], "c1");
    assert_eq!(diff["line"], cart.line.as_str());
    let (status, body) = http_get(&pages, &format!("/api/v1/runs/{second}/cases/late/diff")).await;
    assert_eq!(status, 404, "late passed: {body}");
    assert_eq!(json_of(&body)["error"], format!("run {second} has no record of a failed attempt of case late"));
    let (status, body) = http_get(&pages, &format!("/runs/{second}")).await;
    assert_eq!(status, 200);
    assert!(body.contains("Why it failed") && body.contains("POST /api/cart 503 · 4 cases"), "{body}");
    assert!(
        body.contains("first differs at step 1 <code>") || body.contains("first differs at step 1 `app.press #add`"),
        "{body}"
    );

    // 3. A new app version renames the checkout button.
    let renamed = App { checkout_id: "buy", version: "2.4.0", ..GOOD };
    serve(&mut grid, &ports, &[&renamed, &renamed]).await;
    let third = run(&grid.url, suite(), "c3", 0).await;
    let (explained, _) = explain::explain_run(&store, &third).await.unwrap();
    let cart = case(&explained, "cart");
    assert_eq!(cart.cause.kind, "app", "{cart:#?}");
    assert_eq!(cart.changes.first_difference.as_ref().unwrap().step, 4);
    assert_eq!(cart.changes.screen.disappeared.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["#checkout"]);
    assert_eq!(cart.changes.screen.appeared.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["#buy"]);
    assert!(cart.line.contains("app 2.3.1 → 2.4.0"), "{}", cart.line);
    assert_eq!(cart.signature, "#checkout missing");
    // Its baseline is still the last pass, two runs back.
    assert_eq!(cart.baseline.as_ref().unwrap().commit, "c1");
    assert_eq!(cart.commits.as_ref().unwrap().runs_between, 1);

    // 4. The late note comes too late.
    let slow = App { late_ms: 3_000, version: "2.4.0", ..GOOD };
    serve(&mut grid, &ports, &[&slow, &slow]).await;
    let fourth = run(&grid.url, suite(), "c4", 0).await;
    let (explained, _) = explain::explain_run(&store, &fourth).await.unwrap();
    assert_eq!(explained.len(), 1, "{explained:#?}");
    let late = case(&explained, "late");
    assert_eq!(late.cause.kind, "timing", "{late:#?}");
    assert_eq!(late.changes.slower.first().map(|s| s.step), Some(1), "{late:#?}");

    // 5. A fixture step fails: test data, not the app.
    let fixture = file("fixture", "  - app.see: \"#title\"\n  - create_user: { name: Ada }\n");
    let fifth = run(&grid.url, vec![fixture], "c5", 0).await;
    let (explained, _) = explain::explain_run(&store, &fifth).await.unwrap();
    assert_eq!(explained[0].cause.kind, "test-data", "{explained:#?}");

    // 6. One device's app is subtly wrong: the case fails there (only that
    // device has an app), then passes on the other (only it has one). Once
    // is not enough to blame the device; twice since it last passed is.
    let right = App { version: "2.4.0", ..GOOD };
    let wrong = App { total: "Total ?", ..right };
    let (mut on_the_wrong_device, mut explained) = (Vec::new(), Vec::new());
    for (runs, commit) in [(1, "c6"), (2, "c8")] {
        serve(&mut grid, &ports[..1], &[&wrong]).await;
        for n in 0..runs {
            on_the_wrong_device.push(run(&grid.url, vec![file("total", TOTAL)], &format!("{commit}.{n}"), 0).await);
        }
        serve(&mut grid, &ports[1..], &[&right]).await;
        run(&grid.url, vec![file("total", TOTAL)], &format!("{commit}.pass"), 0).await;
        // Judged as the coordinator judges it: once the pass elsewhere is in.
        let failed = store.failed_observations(on_the_wrong_device.last().unwrap()).await.unwrap();
        assert_eq!(failed.len(), 1, "it ran on the wrong app");
        explained.push(explain::explain_row(&store, &failed[0]).await.unwrap());
    }
    let kinds: Vec<&str> = explained.iter().map(|e| e.cause.kind).collect();
    assert_eq!(kinds, ["unknown", "device"], "{explained:#?}");
    let last = &explained[1];
    assert!(last.changes.screen.changed.iter().any(|c| c.field == "text" && c.to == "Total ?"), "{last:#?}");
    assert!(last.cause.evidence.iter().any(|e| e.contains("failed 2 times")), "{last:#?}");

    // 7. Across runs: the coordinator writes each ended run's failures'
    // causes, and the flaky page ranks their signatures by what they cost.
    let mut failed_attempts = 0;
    for run in [&second, &third, &fourth, &fifth].into_iter().chain(&on_the_wrong_device) {
        failed_attempts += store.failed_observations(run).await.unwrap().len() as u64;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let flaky = loop {
        let (status, body) = http_get(&pages, "/api/v1/flaky?project=cart&days=1").await;
        assert_eq!(status, 200, "{body}");
        let flaky = json_of(&body);
        let attempts: u64 = flaky["causes"].as_array().unwrap().iter().map(|c| c["attempts"].as_u64().unwrap()).sum();
        if attempts == failed_attempts {
            break flaky;
        }
        assert!(tokio::time::Instant::now() < deadline, "the causes were not all written: {flaky}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let top = &flaky["causes"][0];
    assert_eq!(
        (top["cause"].as_str(), top["signature"].as_str()),
        (Some("backend"), Some("POST /api/cart 503")),
        "{flaky}"
    );
    assert_eq!(
        (top["cases"].as_u64(), top["runs"].as_u64(), top["last_run"].as_str()),
        (Some(4), Some(1), Some(second.as_str()))
    );
    let kinds: Vec<&str> = flaky["causes"].as_array().unwrap().iter().filter_map(|c| c["cause"].as_str()).collect();
    for kind in ["app", "timing", "test-data"] {
        assert!(kinds.contains(&kind), "{kind} in {flaky}");
    }
    let (status, body) = http_get(&pages, "/flaky?project=cart&days=1").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("Failures by cause") && body.contains("POST /api/cart 503") && body.contains("#checkout missing"),
        "{body}"
    );

    // The case page: its last failure (run 3) since it last passed (run 1),
    // and when it started (run 2, after run 1's pass).
    let (status, body) = http_get(&pages, "/api/v1/cases/cart?project=cart").await;
    assert_eq!(status, 200, "{body}");
    let why = &json_of(&body)["why"];
    assert_eq!((why["run_id"].as_str(), why["cause"]["kind"].as_str()), (Some(third.as_str()), Some("app")), "{why}");
    assert_eq!(
        (why["started"]["first_failure"]["commit"].as_str(), why["started"]["last_pass"]["commit"].as_str()),
        (Some("c2"), Some("c1"))
    );
    assert_eq!(why["started"]["failing_runs"], 2);
    let (status, body) = http_get(&pages, "/cases/cart?project=cart").await;
    assert_eq!(status, 200);
    for shown in [
        "Since it last passed",
        "When it started",
        "app 2.3.1 → 2.4.0",
        "#checkout",
        "<code>c2</code>",
        "<code>c1</code>",
    ] {
        assert!(body.contains(shown), "{shown} on the case page: {body}");
    }
}
