//! The dashboard in a real headless browser (Debian's chromium through
//! chromedriver, driven over WebDriver): a grid on SQLite with two simulated
//! devices, a passing run on main and a failing one on a branch.
//!
//! chromedriver and chromium must be on the PATH when the test is built
//! (`.ci/run` installs them); without them it is reported `ignored` (see
//! build.rs), and under `CI=true` the build says what is missing.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use argus_proto::grpc::{self, run_update, runs_client::RunsClient};
use argus_testkit::{GridOptions, Sim, free_port};
use argus_worker::link::SlotConfig;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

struct Chromedriver(Child);

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// chromedriver on a free port, and a headless browser session through it.
async fn browser() -> (Chromedriver, Client) {
    let port = free_port();
    let child = match Command::new("chromedriver").arg(format!("--port={port}")).stdout(Stdio::null()).spawn() {
        Ok(child) => Chromedriver(child),
        Err(error) => panic!("chromedriver does not start ({error}); .ci/run installs it"),
    };
    let capabilities = json!({
        "goog:chromeOptions": {
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        },
        "goog:loggingPrefs": { "browser": "ALL" }
    });
    let Value::Object(capabilities) = capabilities else { unreachable!() };
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(capabilities);
    for _ in 0..100 {
        if let Ok(client) = builder.connect(&format!("http://127.0.0.1:{port}")).await {
            return (child, client);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start a session on port {port}");
}

/// A coordinator with its dashboard on a fresh SQLite file, and one worker
/// `mac` with `slots`, until dropped.
struct Grid {
    db: String,
    web: String,
    url: String,
    _stop: argus_testkit::Grid,
}

async fn grid(name: &str, coordinator: argus_coordinator::Options, slots: Vec<SlotConfig>) -> Grid {
    let database = argus_testkit::sqlite_url(name);
    let options = GridOptions { database: Some(database.clone()), http: true, coordinator, cancel: None, quiet: false };
    let mut grid = argus_testkit::Grid::serve(options).await;
    grid.spawn_worker(grid.worker_config("mac", slots));
    Grid { db: database, web: format!("http://{}", grid.http()), url: grid.url.clone(), _stop: grid }
}

/// chromedriver's browser log: what the page's console printed.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
    }
}

/// A Chrome DevTools command, through chromedriver.
#[derive(Debug)]
struct DevTools(Value);

impl WebDriverCompatibleCommand for DevTools {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/goog/cdp/execute", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.0.to_string()))
    }
}

async fn console_errors(client: &Client) -> Vec<String> {
    let log = client.issue_cmd(BrowserLog).await.unwrap();
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["level"] == "SEVERE")
        .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn text_of(client: &Client, css: &str) -> String {
    client.find(Locator::Css(css)).await.unwrap().text().await.unwrap()
}

/// The newest run of `branch`, from the API.
async fn runs_of(web: &str, branch: &str) -> String {
    let body = reqwest_free_get(&format!("{web}/api/v1/runs?branch={branch}")).await;
    let page: Value = serde_json::from_str(&body).unwrap();
    page["runs"][0]["id"].as_str().unwrap().to_owned()
}

/// A GET without a client library: the body.
async fn reqwest_free_get(url: &str) -> String {
    let url = url::Url::parse(url).unwrap();
    let mut stream = tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).await.unwrap();
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut response).await.unwrap();
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    // The API answers JSON in one piece or chunked: the JSON is the line that starts with `{`.
    body.lines().find(|l| l.starts_with('{')).unwrap_or(body).to_owned()
}

/// Submits a one-case run for `platform`, without waiting for it.
async fn submit_for(url: &str, platform: &str) -> String {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let request = grpc::SubmitRequest {
        cases: vec![grpc::CaseFile {
            path: "cases/shop.md".into(),
            source: "---\nid: far\n---\nsteps:\n  - app.see: \"#title\"\n".into(),
        }],
        project: "shop".into(),
        branch: "elsewhere".into(),
        selector: Some(grpc::Selector { platform: platform.into(), ..Default::default() }),
        detach: true,
        ..Default::default()
    };
    runs.submit(request).await.unwrap().into_inner().run_id
}

async fn submit_and_wait(url: &str, branch: &str, source: &str) -> String {
    let mut runs = RunsClient::connect(url.to_owned()).await.unwrap();
    let request = grpc::SubmitRequest {
        cases: vec![grpc::CaseFile { path: "cases/shop.md".into(), source: source.into() }],
        project: "shop".into(),
        branch: branch.into(),
        commit: "0123456789abcdef".into(),
        retries: 0,
        ..Default::default()
    };
    let run_id = runs.submit(request).await.unwrap().into_inner().run_id;
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: run_id.clone(), after_seq: 0 }).await.unwrap().into_inner();
    while let Some(update) = updates.message().await.unwrap() {
        if let Some(run_update::Kind::RunFinished(_)) = update.kind {
            break;
        }
    }
    run_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(argus_browser),
    ignore = "needs ARGUS_TEST_BROWSER=1 with chromedriver and chromium on the PATH (bash .ci/run sets it up)"
)]
async fn the_dashboard_in_a_browser_filters_runs_shows_a_failure_and_follows_the_fleet_live() {
    let (_driver, client) = browser().await;
    let artifacts_dir = tempfile::tempdir().unwrap();
    let artifacts = argus_store::artifacts::DirStore::open(artifacts_dir.path().into()).unwrap();
    let options = argus_coordinator::Options { artifacts: Some(Arc::new(artifacts)), ..Default::default() };
    let ports = [free_port(), free_port()];
    let slots = ports
        .iter()
        .map(|p| {
            let mut slot = SlotConfig::for_port(*p, "ios");
            slot.labels.insert("model".into(), "iPhone 15".into());
            // A device log whose lines a page must show as text.
            slot.hooks.log =
                Some("printf 'Shop started\\n<b>Order</b> refused: 503\\nShop idle\\n'; exec sleep 60".into());
            slot
        })
        .collect();
    let Grid { db, web, url, _stop } = grid("argus-dashboard", options, slots).await;
    let sims: Vec<Sim> = ports.iter().map(|p| Sim::start(*p, None)).collect();
    tokio::time::sleep(Duration::from_millis(800)).await;

    let green = "---\nid: home\nmatrix: { n: [1, 2, 3] }\n---\nsteps:\n  - app.see: \"#title\"\n";
    // The checkout case passes once on its branch (its baseline), then fails.
    let checkout = "---\nid: checkout\ntitle: Pay <script>alert(1)</script>\n---\nsteps:\n  - app.press: \"#feed\"\n";
    let passing = format!("{checkout}  - app.see: {{ route: Feed }}\n");
    let red = format!("{checkout}  - app.see: {{ text: \"<b>Order</b> placed\", timeoutMs: 200 }}\n");
    submit_and_wait(&url, "main", green).await;
    let paid = submit_and_wait(&url, "feature/pay", &passing).await;
    let failing = submit_and_wait(&url, "feature/pay", &red).await;
    let compared = format!("/runs/{paid}/compare/{failing}");

    // The runs list, then filtered to failures.
    client.goto(&format!("{web}/")).await.unwrap();
    assert_eq!(client.find_all(Locator::Css("#runs tbody tr")).await.unwrap().len(), 3);
    let result = client.find(Locator::Css("select[name=result]")).await.unwrap();
    result.select_by_value("failed").await.unwrap();
    client.find(Locator::Css("#filters button[type=submit]")).await.unwrap().click().await.unwrap();
    client
        .wait()
        .for_url(&url::Url::parse(&format!("{web}/?project=&branch=&platform=&result=failed&from=&to=")).unwrap())
        .await
        .unwrap();
    let rows = client.find_all(Locator::Css("#runs tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].text().await.unwrap().contains("feature/pay"));
    client.find(Locator::Css("input[name=branch]")).await.unwrap().send_keys("main").await.unwrap();
    client.find(Locator::Css("#filters button[type=submit]")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("p.empty")).await.unwrap();

    // The failing run: its failed step, its evidence, and the title escaped.
    client.goto(&format!("{web}/runs/{failing}")).await.unwrap();
    let step = text_of(&client, ".case.failed .failed-step").await;
    assert!(step.contains("Failed at app.see text: <b>Order</b> placed"), "{step}");
    let screen = text_of(&client, ".case.failed pre.screen").await;
    assert!(screen.contains("Feed"), "the screen it failed on: {screen}");
    assert!(text_of(&client, ".case.failed h3 small").await.contains("<script>"), "the title is shown as text");
    let alerts = client.execute("return document.querySelectorAll('h3 small script').length", vec![]).await.unwrap();
    assert_eq!(alerts, json!(0), "nothing the user wrote becomes markup");
    // Why it failed: the group, and the case's line against its baseline,
    // the text it was given shown as text.
    let causes = text_of(&client, "#causes").await;
    assert!(causes.contains("Why it failed") && causes.contains("1 case"), "{causes}");
    let why = text_of(&client, ".case.failed .why-line").await;
    assert!(
        why.starts_with("unknown first differs at step 2 `app.see") && why.contains("<b>Order</b> placed"),
        "{why}"
    );
    let markup = client.execute("return document.querySelectorAll('.why-line b, #causes b').length", vec![]).await;
    assert_eq!(markup.unwrap(), json!(0), "nothing the user wrote becomes markup");
    // The failed step's picture (the simulated app's screenshot), inline
    // with the step, loaded and drawn.
    let picture = "const img = document.querySelector('.case.failed li.step a.screenshot img'); \
                   return img && img.complete ? [img.naturalWidth, img.naturalHeight] : null";
    let drawn = client.execute(picture, vec![]).await.unwrap();
    assert_eq!(drawn, json!([780, 1688]), "the 390x844 window pictured at 2x");
    // Its device log, read when opened, shown as text, and searched.
    client.find(Locator::Css(".case.failed details.device-log summary")).await.unwrap().click().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !text_of(&client, ".case.failed pre.log").await.contains("Shop idle") {
        assert!(tokio::time::Instant::now() < deadline, "the device log was never shown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.find(Locator::Css(".case.failed input.log-filter")).await.unwrap().send_keys("refused").await.unwrap();
    assert_eq!(text_of(&client, ".case.failed pre.log").await, "<b>Order</b> refused: 503");
    let markup = client.execute("return document.querySelectorAll('pre.log b').length", vec![]).await.unwrap();
    assert_eq!(markup, json!(0), "a log line is never markup");
    // Its replay: the scrubber starts at the failed step, the screen it
    // failed on beside its last pass's at the same step; another step shows
    // its own screen.
    client.find(Locator::Css(".case.failed details.replay summary")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css(".case.failed .replay-panes .screen [data-test-id]")).await.unwrap();
    let replayed = "const r = document.querySelector('.case.failed details.replay'); \
                    const panes = [...r.querySelectorAll('.replay-pane .screen')]; \
                    return [r.querySelector('.scrubber').value, r.querySelector('.replay-step').textContent, \
                            panes.map(p => p.dataset.route), panes.length]";
    let at_failure = client.execute(replayed, vec![]).await.unwrap();
    assert_eq!(at_failure[0], json!("1"), "it opens at the failed step");
    let label = at_failure[1].as_str().unwrap();
    assert!(label.starts_with("Step 2 of 2: app.see") && label.contains("failed"), "{label}");
    assert_eq!(at_failure[2], json!(["Feed", "Feed"]), "the failure's screen and its last pass's");
    let go_to_first = "const s = document.querySelector('.case.failed details.replay .scrubber'); \
                       s.value = 0; s.dispatchEvent(new Event('input')); return true";
    client.execute(go_to_first, vec![]).await.unwrap();
    let first = client.execute(replayed, vec![]).await.unwrap();
    assert!(first[1].as_str().unwrap().starts_with("Step 1 of 2: app.press"), "{first}");
    assert_eq!(first[2], json!(["Feed", "Feed"]), "the screen after the press");
    let markup = client.execute("return document.querySelectorAll('.replay b').length", vec![]).await.unwrap();
    assert_eq!(markup, json!(0), "an app's text in a replay is never markup");
    assert_eq!(client.find_all(Locator::Css("figure.timeline rect.bar")).await.unwrap().len(), 1);
    let lane = text_of(&client, "figure.timeline text.lane").await;
    assert!(lane.starts_with("mac/") && lane.ends_with(" · ios · iPhone 15"), "device, platform, model: {lane}");
    let totals = text_of(&client, "#totals").await;
    assert!(totals.contains("0 passed") && totals.contains("1 failed"), "{totals}");
    assert!(totals.contains("of 1 case (1 ios) on 1 device in"), "{totals}");

    // The green run: the legend names every colour the timeline draws, and
    // a bar opens the attempt it stands for.
    let green = runs_of(&web, "main").await;
    client.goto(&format!("{web}/runs/{green}")).await.unwrap();
    let legend_covers = "const drawn = new Set([...document.querySelectorAll('figure.timeline rect.bar')] \
                           .map(r => r.classList[1])); \
                         const named = new Set([...document.querySelectorAll('figure.timeline figcaption .badge')] \
                           .map(b => b.textContent)); \
                         return [[...drawn].sort(), [...drawn].every(c => named.has(c))]";
    assert_eq!(client.execute(legend_covers, vec![]).await.unwrap(), json!([["passed"], true]));
    let bar = client.find(Locator::Css("figure.timeline a")).await.unwrap();
    let target = bar.attr("href").await.unwrap().unwrap();
    let opened = format!("return document.getElementById('{}').open", target.trim_start_matches('#'));
    assert_eq!(client.execute(&opened, vec![]).await.unwrap(), json!(false), "a passed attempt starts closed");
    bar.click().await.unwrap();
    // The page opens it as it follows the link: on a loaded machine a
    // moment after the click returns.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while client.execute(&opened, vec![]).await.unwrap() != json!(true) {
        assert!(tokio::time::Instant::now() < deadline, "its bar opened it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The case's page: its last failure since it last passed, and when it
    // started failing on its branch.
    client.goto(&format!("{web}/cases/checkout?project=shop")).await.unwrap();
    let since = text_of(&client, "#why").await;
    assert!(since.contains("Since it last passed") && since.contains("first differs at step 2"), "{since}");
    let started = text_of(&client, "#started").await;
    assert!(
        started.contains("Failing on feature/pay in 1 run in a row") && started.contains("last passed in run"),
        "{started}"
    );
    // The flaky page ranks the failure's signature once its cause is written.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        client.goto(&format!("{web}/flaky?project=shop")).await.unwrap();
        if !client.find_all(Locator::Css("#causes tbody tr")).await.unwrap().is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the flaky page never ranked the failure's cause");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let ranked = text_of(&client, "#causes tbody tr").await;
    assert!(ranked.starts_with("unknown") && ranked.contains("checkout"), "{ranked}");

    // A run no device can take says why, on its page.
    let mut fleet = grpc::fleet_client::FleetClient::connect(url.clone()).await.unwrap();
    let devices: Vec<String> = ports.iter().map(|p| format!("mac/{p}")).collect();
    for device in &devices {
        let quarantine = grpc::QuarantineRequest { device_id: device.clone(), reason: "cracked screen".into() };
        fleet.quarantine(quarantine).await.unwrap();
    }
    let waiting = submit_for(&url, "ios").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        client.goto(&format!("{web}/runs/{waiting}")).await.unwrap();
        if !client.find_all(Locator::Css("p.waiting")).await.unwrap().is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the waiting run never said why");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let why = text_of(&client, "p.waiting").await;
    assert!(why.contains("Waiting for devices") && why.contains("cracked screen"), "{why}");
    RunsClient::connect(url.clone()).await.unwrap().cancel(grpc::CancelRequest { run_id: waiting }).await.unwrap();
    for device in &devices {
        fleet.release(grpc::ReleaseRequest { device_id: device.clone() }).await.unwrap();
    }

    // The fleet: a device whose app goes away turns disconnected, live.
    client.goto(&format!("{web}/fleet")).await.unwrap();
    assert_eq!(client.find_all(Locator::Css("#fleet tbody tr.idle")).await.unwrap().len(), 2);
    client.execute("window.notReloaded = true", vec![]).await.unwrap();
    sims[0].stop();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let disconnected = client.find_all(Locator::Css("#fleet tbody tr.disconnected")).await.unwrap();
        if disconnected.len() == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the fleet view never showed the device disconnected");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(client.execute("return window.notReloaded === true", vec![]).await.unwrap(), json!(true));
    let bars = client.find_all(Locator::Css("#fleet tbody svg.spark rect")).await.unwrap();
    assert_eq!(bars.len(), 24, "each device's last hour, in twelve bars");

    // The failing run against the passing one before it: the new failure.
    client.goto(&format!("{web}{compared}")).await.unwrap();
    let rows = client.find_all(Locator::Css("table.compare tr.new-failure")).await.unwrap();
    assert_eq!(rows.len(), 1, "one new failure");
    assert!(rows[0].text().await.unwrap().contains("checkout"));

    // On a phone, in dark mode: nothing wider than the screen, dark colours.
    client.set_window_size(390, 844).await.unwrap();
    let dark = json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}});
    client.issue_cmd(DevTools(dark)).await.unwrap();
    for page in ["/", &format!("/runs/{failing}"), "/cases/checkout?project=shop", "/flaky", "/fleet", &compared] {
        client.goto(&format!("{web}{page}")).await.unwrap();
        let fits = client
            .execute("return document.documentElement.scrollWidth <= window.innerWidth + 1", vec![])
            .await
            .unwrap();
        assert_eq!(fits, json!(true), "{page} is wider than a phone");
        // Every text at 10 px or more as drawn: a chart's text by its
        // font size times the scale its SVG is drawn at.
        let smallest = "let min = Infinity; \
            for (const el of document.querySelectorAll('body *')) { \
              const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()); \
              if (!own || el.closest('title')) continue; \
              let size = parseFloat(getComputedStyle(el).fontSize); \
              const svg = el.closest('svg'); \
              if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width) { \
                size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width; } \
              min = Math.min(min, size); } \
            return min";
        let smallest = client.execute(smallest, vec![]).await.unwrap().as_f64().unwrap();
        assert!(smallest >= 10.0, "{page}: text drawn at {smallest:.1} px on a phone");
        let background =
            client.execute("return getComputedStyle(document.body).backgroundColor", vec![]).await.unwrap();
        assert_eq!(background, json!("rgb(20, 22, 27)"), "{page} in dark mode");
    }

    for page in ["/", &format!("/runs/{failing}"), "/cases/checkout?project=shop", "/flaky", "/fleet", &compared] {
        client.goto(&format!("{web}{page}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let errors = console_errors(&client).await;
        assert!(errors.is_empty(), "{page}: console errors {errors:?}");
    }
    client.close().await.unwrap();
    let _ = std::fs::remove_file(db);
}

/// Waits for the page's prompt, answers it with `text`; its question.
async fn answer_prompt(client: &Client, text: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(question) = client.get_alert_text().await {
            client.send_alert_text(text).await.unwrap();
            client.accept_alert().await.unwrap();
            return question;
        }
        assert!(tokio::time::Instant::now() < deadline, "the page never asked for the token");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(argus_browser),
    ignore = "needs ARGUS_TEST_BROWSER=1 with chromedriver and chromium on the PATH (bash .ci/run sets it up)"
)]
async fn acting_from_the_dashboard_asks_for_the_client_token_mutes_a_case_and_runs_the_failed_again() {
    let (_driver, client) = browser().await;
    let tokens = argus_coordinator::Tokens { client: Some("c-key".into()), ..Default::default() };
    let port = free_port();
    let options = argus_coordinator::Options { tokens, ..Default::default() };
    let Grid { db, web, url, _stop } =
        grid("argus-dashboard-acts", options, vec![SlotConfig::for_port(port, "ios")]).await;
    let _sim = Sim::start(port, None);
    let channel = tonic::transport::Channel::from_shared(url.clone()).unwrap().connect().await.unwrap();
    let bearer = argus_proto::auth::Bearer::new(Some("c-key")).unwrap();
    let mut runs = RunsClient::with_interceptor(channel, bearer);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let request = grpc::SubmitRequest {
        cases: vec![grpc::CaseFile {
            path: "cases/shop.md".into(),
            source: "---\nid: checkout\n---\nsteps:\n  - app.see: { text: Paid, timeoutMs: 100 }\n".into(),
        }],
        project: "shop".into(),
        branch: "main".into(),
        ..Default::default()
    };
    let failing = loop {
        match runs.submit(request.clone()).await {
            Ok(submitted) => break submitted.into_inner().run_id,
            Err(status) => assert!(tokio::time::Instant::now() < deadline, "no device came: {status}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut updates =
        runs.watch(grpc::WatchRequest { run_id: failing.clone(), after_seq: 0 }).await.unwrap().into_inner();
    while let Some(update) = updates.message().await.unwrap() {
        if let Some(run_update::Kind::RunFinished(_)) = update.kind {
            break;
        }
    }

    // Mute it from its page: the token is asked for, a wrong one again.
    client.goto(&format!("{web}/cases/checkout?project=shop")).await.unwrap();
    client
        .find(Locator::Css("form.mute input[name=reason]"))
        .await
        .unwrap()
        .send_keys("<b>stale</b> promo")
        .await
        .unwrap();
    client.find(Locator::Css("form.mute button")).await.unwrap().click().await.unwrap();
    assert!(answer_prompt(&client, "wrong").await.contains("client token"));
    answer_prompt(&client, "c-key").await;
    client.wait().for_element(Locator::Css("form.unmute")).await.unwrap();
    let mute = text_of(&client, "#mute").await;
    assert!(mute.contains("muted <b>stale</b> promo · by dashboard"), "{mute}");

    // Run its failure again from the run's page: the token is kept for the
    // tab; the new run links back, and its muted failure does not fail it.
    client.goto(&format!("{web}/runs/{failing}")).await.unwrap();
    client.find(Locator::Css("form.rerun button")).await.unwrap().click().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let here = client.current_url().await.unwrap();
        let on_new_run = here.path().starts_with("/runs/") && !here.path().ends_with(&failing);
        if on_new_run && text_of(&client, "h1 .badge").await == "passed" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the rerun never finished: {here}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        if on_new_run {
            client.refresh().await.unwrap();
        }
    }
    let meta = text_of(&client, "p.meta").await;
    assert!(meta.contains(&format!("runs again the failed cases of run {failing}")), "{meta}");
    let totals = text_of(&client, "#totals").await;
    assert!(totals.contains("1 muted-failed") && !totals.contains(" 1 failed"), "{totals}");
    assert!(text_of(&client, ".case .muted-why").await.contains("<b>stale</b> promo"));
    let errors = console_errors(&client).await;
    assert!(errors.iter().all(|e| e.contains("401")), "only the refused token: {errors:?}");
    client.close().await.unwrap();
    let _ = std::fs::remove_file(db);
}

/// The routes an app went through, each with when it got there.
fn follow_routes(sim: &Sim) -> Arc<std::sync::Mutex<Vec<(tokio::time::Instant, String)>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut routes = sim.app.routes();
    let kept = seen.clone();
    tokio::spawn(async move {
        loop {
            let route = routes.borrow_and_update().clone().unwrap_or_default();
            kept.lock().unwrap().push((tokio::time::Instant::now(), route));
            if routes.changed().await.is_err() {
                return;
            }
        }
    });
    seen
}

/// Whether the app showed `route` at some moment of the last `within`.
fn showed_lately(
    routes: &std::sync::Mutex<Vec<(tokio::time::Instant, String)>>,
    route: &str,
    within: Duration,
) -> bool {
    let routes = routes.lock().unwrap();
    let since = tokio::time::Instant::now() - within;
    // The route it was on when the window began counts too.
    let from = routes.iter().rposition(|(at, _)| *at <= since).unwrap_or(0);
    routes[from..].iter().any(|(_, r)| r == route)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(argus_browser),
    ignore = "needs ARGUS_TEST_BROWSER=1 with chromedriver and chromium on the PATH (bash .ci/run sets it up)"
)]
async fn the_fleet_page_draws_every_device_live_and_a_device_opens_large_with_its_trace() {
    let (_driver, client) = browser().await;
    let ports = [free_port(), free_port()];
    let slots = ports.iter().map(|p| SlotConfig::for_port(*p, "ios")).collect();
    let Grid { db, web, url, _stop } = grid("argus-dashboard-live", Default::default(), slots).await;
    // One app's texts hold markup, which the page must draw as text.
    let sims = [Sim::start_altered(ports[0], "Browse the feed", "<b>Browse</b> the feed"), Sim::start(ports[1], None)];
    let routes: Vec<_> = sims.iter().map(follow_routes).collect();
    let device_of = |port: u16| format!("mac/{port}");
    argus_testkit::wait_for_devices(&url, 2).await;

    // Nothing runs: each idle device is drawn from a read every few seconds.
    client.goto(&format!("{web}/fleet")).await.unwrap();
    let card = |port: u16| format!(".screen-card[data-device='{}']", device_of(port));
    for port in ports {
        let drawn = format!("{} .screen[data-route='Home'] [data-test-id='title']", card(port));
        client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(&drawn)).await.unwrap();
    }
    let feed = format!("{} [data-test-id='feed']", card(ports[0]));
    assert_eq!(text_of(&client, &feed).await, "<b>Browse</b> the feed", "an app's text is shown as text");
    let markup = client.execute("return document.querySelectorAll('#screens b').length", vec![]).await.unwrap();
    assert_eq!(markup, json!(0), "nothing an app wrote becomes markup");

    // A run: each device goes to its screen and waits there three seconds.
    let case = |id: &str, button: &str, route: &str| {
        format!(
            "---\nid: {id}\n---\nsteps:\n  - app.press: \"#{button}\"\n  - app.see: {{ route: {route} }}\n  - app.see: {{ text: Never there, timeoutMs: 3000 }}\n"
        )
    };
    let mut runs = RunsClient::connect(url.clone()).await.unwrap();
    let request = grpc::SubmitRequest {
        cases: vec![
            grpc::CaseFile { path: "cases/feed.md".into(), source: case("to-feed", "feed", "Feed") },
            grpc::CaseFile { path: "cases/settings.md".into(), source: case("to-settings", "settings", "Settings") },
        ],
        project: "shop".into(),
        retries: 0,
        detach: true,
        ..Default::default()
    };
    runs.submit(request).await.unwrap();

    // Both cards follow their apps: the case, the step and the screen it
    // waits on, each drawn as the app showed it within the last second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut matched = [false, false];
    while matched.contains(&false) {
        assert!(tokio::time::Instant::now() < deadline, "the cards never showed the running cases: {matched:?}");
        for (i, port) in ports.into_iter().enumerate() {
            let read = format!(
                "const card = document.querySelector(\"{}\"); if (!card) return null; \
                 const screen = card.querySelector('.screen'); \
                 return [card.classList.contains('running'), screen.dataset.route, \
                         card.querySelector('.screen-caption').textContent, \
                         [...screen.querySelectorAll('[data-test-id]')].map(e => e.dataset.testId)]",
                card(port)
            );
            let drawn = client.execute(&read, vec![]).await.unwrap();
            let (running, route) = (drawn[0] == json!(true), drawn[1].as_str().unwrap_or_default().to_owned());
            if !running || route == "Home" {
                continue;
            }
            assert!(showed_lately(&routes[i], &route, Duration::from_secs(1)), "{route} was not the app's lately");
            let caption = drawn[2].as_str().unwrap();
            if route == "Feed" || route == "Settings" {
                let (case, expected) = if route == "Feed" { ("to-feed", "refresh") } else { ("to-settings", "delete") };
                assert!(caption.starts_with(&format!("{case} #1 · step ")), "the case on its card: {caption}");
                let ids: Vec<&str> = drawn[3].as_array().unwrap().iter().filter_map(Value::as_str).collect();
                assert!(ids.contains(&expected), "the {route} screen's elements: {ids:?}");
                // The press that opened the screen may still be the card's
                // step for a moment (the screen came first): the next read
                // shows the step that waits on it.
                if caption.contains("app.see") {
                    matched[i] = true;
                } else {
                    assert!(caption.contains("app.press"), "the step it waits in: {caption}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A device opens large, with its recent trace.
    client.find(Locator::Css(&card(ports[1]))).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("#device-live [data-screen] [data-test-id]")).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let went = |trace: String| trace.contains("→ Settings") || trace.contains("→ Feed");
    while !went(text_of(&client, "#device-live [data-trace]").await) {
        assert!(tokio::time::Instant::now() < deadline, "the trace never said where the app went");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(text_of(&client, "h1").await, device_of(ports[1]));

    // Borrowed once the run is over: reset, a tap on the drawn Settings
    // button presses it in the app, and released it is back in the pool.
    let state_of = |device: String| {
        let web = web.clone();
        async move {
            let fleet: Value = serde_json::from_str(&reqwest_free_get(&format!("{web}/api/v1/fleet")).await).unwrap();
            fleet["devices"].as_array().unwrap().iter().find(|d| d["id"] == device.as_str()).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while state_of(device_of(ports[1])).await != "idle" {
        assert!(tokio::time::Instant::now() < deadline, "the run never ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.find(Locator::Css("[data-borrow]")).await.unwrap().click().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while client.find(Locator::Css("[data-borrowed]:not([hidden])")).await.is_err() {
        let said = text_of(&client, "[data-status]").await;
        assert!(tokio::time::Instant::now() < deadline, "the device was never borrowed: {said}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state_of(device_of(ports[1])).await, "held", "it left the pool");
    client.find(Locator::Css("[data-reset]")).await.unwrap().click().await.unwrap();
    let settings = "#device-live [data-screen][data-route='Home'] [data-test-id='settings']";
    client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(settings)).await.unwrap();
    client.find(Locator::Css(settings)).await.unwrap().click().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sims[1].app.current_route().as_deref() != Some("Settings") {
        let said = text_of(&client, "[data-status]").await;
        assert!(tokio::time::Instant::now() < deadline, "the tap never reached the app: {said}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drawn = "#device-live [data-screen][data-route='Settings']";
    client.wait().at_most(Duration::from_secs(5)).for_element(Locator::Css(drawn)).await.unwrap();
    let session = client.find(Locator::Css("[data-session]")).await.unwrap().attr("href").await.unwrap().unwrap();
    client.find(Locator::Css("[data-release]")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("[data-borrow]:not([hidden])")).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while state_of(device_of(ports[1])).await != "idle" {
        assert!(tokio::time::Instant::now() < deadline, "released, it never came back to the pool");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Each action is the session's command, as a WebDriver client's are.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let recorded = reqwest_free_get(&format!("{web}/api/v1{session}")).await;
        if recorded.matches("\"execute\"").count() + recorded.matches("execute/sync").count() >= 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the actions were not recorded: {recorded}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // At a phone's width the fleet's screens fit the page.
    client.set_window_size(390, 844).await.unwrap();
    client.goto(&format!("{web}/fleet")).await.unwrap();
    client.wait().for_element(Locator::Css(".screen-card .screen [data-test-id]")).await.unwrap();
    let overflow =
        client.execute("return document.documentElement.scrollWidth <= window.innerWidth", vec![]).await.unwrap();
    assert_eq!(overflow, json!(true), "no sideways scrolling on a phone");
    assert!(console_errors(&client).await.is_empty());
    client.close().await.unwrap();
    drop(sims);
    let _ = std::fs::remove_file(db);
}
