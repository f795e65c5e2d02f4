//! Every core method of the simulated app, on the example shop model, with
//! the agent's defaults, refusals and error texts. Time is virtual: waits in
//! the app advance the clock instead of sleeping.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use argus_sim::{App, Model};
use serde_json::{Value, json};

fn shop() -> Arc<App> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml");
    App::new(Model::load(&path).expect("the example model loads"))
}

async fn ok(app: &Arc<App>, method: &str, params: Value) -> Value {
    let params = (!params.is_null()).then_some(params);
    match app.handle(method, params).await {
        Ok(value) => value,
        Err(error) => panic!("{method} failed: {}", error.message),
    }
}

async fn err(app: &Arc<App>, method: &str, params: Value) -> (String, Option<String>) {
    let params = (!params.is_null()).then_some(params);
    match app.handle(method, params).await {
        Ok(value) => panic!("{method} answered {value} where an error was expected"),
        Err(error) => (error.message, error.code),
    }
}

async fn route(app: &Arc<App>) -> Value {
    ok(app, "screen", Value::Null).await["route"].clone()
}

fn commands_traced(trace: &Value, method: &str) -> usize {
    trace["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "command" && e["method"] == method).count()
}

#[tokio::test]
async fn screenshot_writes_a_png_of_the_screen_where_it_is_asked_to() {
    let app = shop();
    let file = std::env::temp_dir().join(format!("argus-sim-screenshot-{}.png", std::process::id()));
    let answer = ok(&app, "screenshot", json!({"path": file.display().to_string()})).await;
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(answer, json!({"path": file.display().to_string(), "bytes": bytes.len()}));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let (message, _) = err(&app, "screenshot", json!({"path": "/nonexistent-dir/x.png"})).await;
    assert!(message.starts_with("screenshot: cannot write /nonexistent-dir/x.png: "), "{message}");
    assert!(err(&app, "screenshot", Value::Null).await.0.starts_with("screenshot: invalid params"));
}

#[tokio::test(start_paused = true)]
async fn ping_lists_the_commands_sorted() {
    let app = shop();
    let pong = ok(&app, "ping", Value::Null).await;
    assert_eq!(
        pong,
        json!({"pong": true, "native": false, "commands": ["broken", "events", "profile", "screenshot", "seed", "slow", "stores", "traceContext"]})
    );
}

#[tokio::test(start_paused = true)]
async fn screen_reports_route_path_elements_and_layers() {
    let app = shop();
    let screen = ok(&app, "screen", Value::Null).await;
    assert_eq!(screen["route"], "Home");
    assert_eq!(screen["path"], json!(["Main", "Home"]));
    assert_eq!(screen["window"], json!({"w": 390, "h": 844}));
    assert_eq!(screen["busy"], false);
    assert!(screen["costMs"].is_u64(), "whole milliseconds, as Date.now() differences are: {}", screen["costMs"]);
    let elements = screen["elements"].as_array().unwrap();
    let by_id = |id: &str| elements.iter().find(|e| e["testId"] == id).cloned().unwrap();
    assert_eq!(by_id("checkout")["enabled"], false);
    assert_eq!(by_id("pay")["covered"], true, "the banner lies over it");
    assert!(elements.iter().all(|e| e["testId"] != "promo"), "the promo appears after 400 ms");
    for (index, element) in elements.iter().enumerate() {
        assert_eq!(element["i"], index);
    }

    tokio::time::sleep(Duration::from_millis(400)).await;
    let screen = ok(&app, "screen", Value::Null).await;
    assert!(screen["elements"].as_array().unwrap().iter().any(|e| e["testId"] == "promo"));
}

#[tokio::test(start_paused = true)]
async fn find_answers_the_best_match_or_null() {
    let app = shop();
    assert_eq!(ok(&app, "find", json!({"text": "log"})).await["testId"], "login", "a control by substring");
    assert_eq!(ok(&app, "find", json!({"text": "welcome"})).await, Value::Null, "a paragraph only exactly");
    assert_eq!(ok(&app, "find", json!({"text": " WELCOME TO SHOP "})).await["testId"], "title");
    assert_eq!(ok(&app, "find", json!({"testId": "nope"})).await, Value::Null);
    let covered = ok(&app, "find", json!({"testId": "pay"})).await;
    assert_eq!(covered["covered"], true, "find answers covered elements too");

    ok(&app, "navigate", json!({"name": "Feed"})).await;
    let like = ok(&app, "find", json!({"testId": "like", "within": {"text": "Bo's chair"}})).await;
    let chair = ok(&app, "find", json!({"text": "Bo's chair"})).await;
    assert_eq!(like["parent"], chair["parent"], "the like button of Bo's row");
    let third = ok(&app, "find", json!({"testId": "like", "nth": 2})).await;
    assert_eq!(third["offscreen"], true);
    assert_eq!(ok(&app, "find", json!({"testId": "like", "nth": 3})).await, Value::Null);
}

#[tokio::test(start_paused = true)]
async fn press_native_goes_through_and_records_the_command() {
    let app = shop();
    let pressed = ok(&app, "press", json!({"testId": "login"})).await;
    assert_eq!(pressed["mode"], "native");
    assert_eq!(pressed["element"]["testId"], "login");
    assert_eq!(route(&app).await, "Login");
    let mut events = ok(&app, "events", Value::Null).await;
    assert!(events[0]["t"].is_u64());
    events[0].as_object_mut().unwrap().remove("t");
    assert_eq!(events, json!([{"name": "Tap - Login", "route": "Home"}]));
    let trace = ok(&app, "trace", Value::Null).await;
    assert_eq!(commands_traced(&trace, "press"), 1);
    assert_eq!(commands_traced(&trace, "screen"), 0, "reads are not traced");
}

#[tokio::test(start_paused = true)]
async fn press_refuses_what_it_cannot_reach() {
    let app = shop();
    let (message, code) = err(&app, "press", json!({"testId": "nope"})).await;
    assert_eq!(message, r#"No element matches {"testId":"nope"}"#);
    assert_eq!(code, None);
    assert_eq!(
        err(&app, "press", json!({"testId": "checkout", "mode": "js"})).await.0,
        r#"{"testId":"checkout"} is disabled"#
    );
    assert_eq!(err(&app, "press", json!({"testId": "pay", "mode": "js"})).await.0, r#"{"testId":"pay"} is covered"#);

    // A native touch on a disabled control or under a banner does nothing.
    ok(&app, "press", json!({"testId": "checkout"})).await;
    ok(&app, "press", json!({"testId": "pay"})).await;
    assert_eq!(ok(&app, "events", Value::Null).await, json!([]));
    assert_eq!(route(&app).await, "Home");

    // Once the banner is dismissed the button is reachable.
    ok(&app, "press", json!({"text": "OK"})).await;
    let pressed = ok(&app, "press", json!({"testId": "pay", "mode": "js"})).await;
    assert_eq!(pressed["mode"], "js");
    assert_eq!(ok(&app, "events", Value::Null).await[0]["name"], "Tap - Pay");

    // Behind a modal: not presented.
    ok(&app, "navigate", json!({"name": "Settings"})).await;
    ok(&app, "press", json!({"testId": "delete"})).await;
    let screen = ok(&app, "screen", Value::Null).await;
    assert_eq!(screen["presenting"]["testId"], "confirm");
    assert_eq!(screen["presenting"]["modal"], true);
    assert_eq!(
        err(&app, "press", json!({"testId": "dark"})).await.0,
        r#"{"testId":"dark"} is not presented (behind-modal)"#
    );
    // Hidden from assistive technology: never matched.
    assert_eq!(ok(&app, "find", json!({"testId": "hidden-note"})).await, Value::Null);
    ok(&app, "press", json!({"testId": "confirm-yes"})).await;
    assert_eq!(route(&app).await, "Home", "the confirm resets to the root");
}

#[tokio::test(start_paused = true)]
async fn press_at_a_point_touches_what_is_there() {
    let app = shop();
    let login = ok(&app, "find", json!({"testId": "login"})).await;
    let (x, y) = (login["frame"]["x"].as_f64().unwrap() + 5.0, login["frame"]["y"].as_f64().unwrap() + 5.0);
    let pressed = ok(&app, "press", json!({"x": x, "y": y})).await;
    assert_eq!(pressed, json!({"x": x as i64, "y": y as i64, "mode": "native"}));
    assert_eq!(route(&app).await, "Login");
}

#[tokio::test(start_paused = true)]
async fn typing_fills_fields_masks_secrets_and_submits() {
    let app = shop();
    ok(&app, "navigate", json!({"name": "Login"})).await;
    let typed = ok(&app, "type", json!({"text": "ada@shop.test", "target": {"testId": "email"}})).await;
    assert_eq!(typed["typed"], "ada@shop.test");
    assert_eq!(ok(&app, "find", json!({"testId": "email"})).await["value"], "ada@shop.test");
    assert_eq!(ok(&app, "find", json!({"testId": "email"})).await["focused"], true);
    ok(&app, "type", json!({"text": "wrong", "target": {"text": "Password"}, "paste": true})).await;
    assert_eq!(ok(&app, "find", json!({"testId": "password"})).await["value"], "•••••");

    // A wrong password shows the error once the request has answered.
    ok(&app, "press", json!({"testId": "submit"})).await;
    let waited = ok(&app, "waitFor", json!({"target": {"testId": "error"}})).await;
    assert!(waited["waitedMs"].as_u64().unwrap() >= 100);
    assert_eq!(route(&app).await, "Login");

    ok(&app, "type", json!({"text": "hunter2", "target": {"testId": "password"}, "clear": true})).await;
    assert_eq!(ok(&app, "find", json!({"testId": "password"})).await["value"], "•••••••");
    ok(&app, "press", json!({"testId": "submit"})).await;
    ok(&app, "waitFor", json!({"route": "Feed"})).await;

    ok(&app, "back", Value::Null).await;
    let (message, _) = err(&app, "type", json!({"text": "x"})).await;
    assert_eq!(message, "No text field has focus");
}

#[tokio::test(start_paused = true)]
async fn keys_go_out_25_ms_apart_unless_pasted() {
    let app = shop();
    ok(&app, "navigate", json!({"name": "Login"})).await;
    ok(&app, "press", json!({"testId": "email"})).await;
    let start = tokio::time::Instant::now();
    ok(&app, "type", json!({"text": "abcd"})).await;
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    let start = tokio::time::Instant::now();
    ok(&app, "type", json!({"text": "efgh", "paste": true})).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(ok(&app, "find", json!({"testId": "email"})).await["value"], "abcdefgh");
    assert_eq!(ok(&app, "dismissKeyboard", Value::Null).await, true);
    assert_eq!(ok(&app, "find", json!({"testId": "email"})).await.get("focused"), None);
}

#[tokio::test(start_paused = true)]
async fn swipe_needs_a_direction_and_scrolls_lists() {
    let app = shop();
    assert_eq!(err(&app, "swipe", json!({})).await.0, "swipe needs a direction, a target, or from/to points");
    let swiped = ok(&app, "swipe", json!({"direction": "left"})).await;
    assert_eq!(swiped, json!({"from": {"x": 312, "y": 422}, "to": {"x": 78, "y": 422}}));

    ok(&app, "navigate", json!({"name": "Feed"})).await;
    let before = ok(&app, "find", json!({"text": "Cy's rug"})).await;
    let swiped = ok(&app, "swipe", json!({"direction": "up", "target": {"testId": "list"}, "distance": 500})).await;
    assert_eq!(swiped["to"]["y"].as_f64().unwrap() - swiped["from"]["y"].as_f64().unwrap(), -500.0);
    let after = ok(&app, "find", json!({"text": "Cy's rug"})).await;
    assert_eq!(before["frame"]["y"].as_f64().unwrap() - after["frame"]["y"].as_f64().unwrap(), 500.0);
}

#[tokio::test(start_paused = true)]
async fn wait_for_conditions_and_its_timeout_text() {
    let app = shop();
    let gone = ok(&app, "waitFor", json!({"target": {"testId": "promo"}, "gone": true})).await;
    assert_eq!(gone["waitedMs"], 0);
    let shown = ok(&app, "waitFor", json!({"target": {"testId": "promo"}})).await;
    assert!((400..=440).contains(&shown["waitedMs"].as_u64().unwrap()), "{shown}");
    let any = ok(&app, "waitFor", json!({"anyOf": [{"testId": "nope"}, {"text": "Settings"}]})).await;
    assert_eq!(any["matched"], json!({"text": "Settings"}));
    assert_eq!(any["route"], "Home");

    let (message, _) = err(&app, "waitFor", json!({"route": "Feed", "timeoutMs": 200})).await;
    assert_eq!(message, "Timed out waiting for Feed  (on Home)");
    let (message, _) =
        err(&app, "waitFor", json!({"target": {"testId": "title"}, "gone": true, "timeoutMs": 100})).await;
    assert_eq!(message, r#"Timed out waiting for  {"testId":"title"} to disappear (on Home)"#);
    let start = tokio::time::Instant::now();
    err(&app, "waitFor", json!({"target": {"testId": "never"}})).await;
    assert!(start.elapsed() >= Duration::from_millis(5000), "the default timeout is 5 s");
}

#[tokio::test(start_paused = true)]
async fn wait_for_with_scroll_brings_the_target_into_the_window() {
    let app = shop();
    ok(&app, "navigate", json!({"name": "Feed"})).await;
    ok(&app, "waitFor", json!({"target": {"text": "Cy's rug"}, "scroll": true})).await;
    let rug = ok(&app, "find", json!({"text": "Cy's rug"})).await;
    assert_eq!(rug.get("offscreen"), None, "{rug}");
    let (message, _) =
        err(&app, "waitFor", json!({"target": {"text": "Nobody's vase"}, "scroll": true, "timeoutMs": 20000})).await;
    assert!(message.starts_with("Timed out waiting for"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn idle_waits_for_requests_and_commits() {
    let app = shop();
    ok(&app, "navigate", json!({"name": "Feed"})).await;
    let commit = ok(&app, "screen", Value::Null).await["commit"].as_u64().unwrap();
    ok(&app, "press", json!({"testId": "refresh"})).await;
    assert_eq!(ok(&app, "screen", Value::Null).await["busy"], true);
    let start = tokio::time::Instant::now();
    let idle = ok(&app, "idle", json!({"after": commit})).await;
    assert_eq!(idle["idle"], true);
    assert!(idle["commit"].as_u64().unwrap() > commit);
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert_eq!(ok(&app, "requests", Value::Null).await["inFlight"], 0);

    // Waiting for a commit that never comes: no error, idle false.
    let start = tokio::time::Instant::now();
    let idle = ok(&app, "idle", json!({"after": 1_000_000, "timeoutMs": 300})).await;
    assert_eq!(idle["idle"], false);
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn requests_are_recorded_redacted_and_filtered_by_since() {
    let app = shop();
    ok(&app, "navigate", json!({"name": "Login"})).await;
    ok(&app, "press", json!({"testId": "submit"})).await;
    let during = ok(&app, "requests", Value::Null).await;
    assert_eq!(during["inFlight"], 1);
    let record = &during["requests"][0];
    assert_eq!(record["id"], 1);
    assert_eq!(record["method"], "POST");
    assert_eq!(record["url"], "https://api.shop.test/login?session=…&lang=en");
    assert_eq!(record.get("status"), None, "in flight: no status yet");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = ok(&app, "requests", Value::Null).await;
    assert_eq!(after["requests"][0]["status"], 200);
    assert_eq!(after["requests"][0]["ms"], 150);
    assert_eq!(ok(&app, "requests", json!({"since": 1})).await["requests"], json!([]));
}

#[tokio::test(start_paused = true)]
async fn trace_reads_only_what_is_new() {
    let app = shop();
    let first = ok(&app, "trace", json!({})).await;
    let mark = first["last"].as_u64().unwrap();
    ok(&app, "press", json!({"testId": "login"})).await;
    let next = ok(&app, "trace", json!({"since": mark})).await;
    let kinds: Vec<&str> = next["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["event", "route", "command"]);
    assert_eq!(next["events"][1]["path"], json!(["Auth", "Login"]));
    assert!(next["last"].as_u64().unwrap() > mark);
}

#[tokio::test(start_paused = true)]
async fn navigate_back_and_deep_links() {
    let app = shop();
    assert_eq!(err(&app, "back", Value::Null).await.0, "Nothing to go back to");
    assert_eq!(ok(&app, "navigate", json!({"name": "Feed"})).await, json!({"route": "Feed"}));
    assert_eq!(ok(&app, "back", Value::Null).await, json!({"route": "Home"}));
    // As React Navigation does with a name it does not know: answered, ignored.
    assert_eq!(ok(&app, "navigate", json!({"name": "Mars"})).await, json!({"route": "Mars"}));
    assert_eq!(route(&app).await, "Home");
    assert_eq!(ok(&app, "deepLink", json!({"url": "shop://item/42"})).await, json!({"opened": "shop://item/42"}));
    let screen = ok(&app, "screen", Value::Null).await;
    assert_eq!(screen["route"], "Item");
    assert_eq!(screen["params"], json!({"from": "link"}));
}

#[tokio::test(start_paused = true)]
async fn without_a_navigation_adapter() {
    let app =
        App::new(Model::parse("navigation: false\ninitialRoute: A\nroutes: { A: {}, B: {} }\n", "m.yaml").unwrap());
    assert_eq!(err(&app, "navigate", json!({"name": "B"})).await.0, "No navigation adapter configured");
    assert_eq!(err(&app, "back", Value::Null).await.0, "No navigation adapter configured");
    let screen = ok(&app, "screen", Value::Null).await;
    assert_eq!(screen.get("route"), None);
    let (message, _) = err(&app, "waitFor", json!({"route": "B", "timeoutMs": 50})).await;
    assert_eq!(message, "Timed out waiting for B  (on undefined)");
}

#[tokio::test(start_paused = true)]
async fn batch_runs_in_order_and_stops_at_the_first_error() {
    let app = shop();
    let done = ok(
        &app,
        "batch",
        json!({"calls": [
            {"method": "press", "params": {"testId": "login"}},
            {"method": "waitFor", "params": {"route": "Login"}},
            {"method": "ping"}
        ]}),
    )
    .await;
    assert_eq!(done["results"].as_array().unwrap().len(), 3);
    assert_eq!(done["results"][1]["route"], "Login");

    let (message, _) = err(
        &app,
        "batch",
        json!({"calls": [
            {"method": "back"},
            {"method": "nope"},
            {"method": "navigate", "params": {"name": "Feed"}}
        ]}),
    )
    .await;
    assert_eq!(message, "Unknown method nope");
    assert_eq!(route(&app).await, "Home", "the call after the error did not run");
}

#[tokio::test(start_paused = true)]
async fn app_commands_reset_and_unknown_methods() {
    let app = shop();
    assert_eq!(ok(&app, "seed", Value::Null).await, json!({"seeded": true}));
    let session = ok(&app, "stores", json!({"name": "session"})).await;
    assert_eq!(session, json!({"user": "ada", "token": "s3cr3t"}));
    let trace = ok(&app, "trace", Value::Null).await;
    let store = trace["events"].as_array().unwrap().iter().find(|e| e["kind"] == "store").unwrap().clone();
    assert_eq!(store["changed"]["token"], json!({"from": null, "to": "…"}), "secrets stay out of the trace");
    assert_eq!(ok(&app, "stores", Value::Null).await, json!({"stores": ["cart", "session"]}));

    // A handler that throws: the agent sends `{message}` and no code.
    assert_eq!(err(&app, "broken", Value::Null).await, ("the seed service is down".into(), None));
    assert_eq!(
        err(&app, "stores", json!({"name": "nope"})).await.0,
        "No store observed as \"nope\"; observed: cart, session"
    );
    assert_eq!(
        ok(&app, "profile", Value::Null).await,
        json!({"recording": false, "commits": 0, "ms": 0.0, "routes": {}})
    );
    assert_eq!(ok(&app, "profile", json!({"action": "start"})).await, json!({"recording": true}));
    assert_eq!(ok(&app, "profile", json!({"action": "stop"})).await["recording"], false);
    assert_eq!(err(&app, "nope", Value::Null).await, ("Unknown method nope".into(), None));
    let start = tokio::time::Instant::now();
    assert_eq!(ok(&app, "slow", Value::Null).await, "slow done");
    assert_eq!(start.elapsed(), Duration::from_millis(300));

    ok(&app, "navigate", json!({"name": "Feed"})).await;
    assert_eq!(ok(&app, "reset", Value::Null).await, Value::Null, "reset is never an unknown method");
    assert_eq!(route(&app).await, "Home");
    assert_eq!(ok(&app, "stores", json!({"name": "session"})).await, json!({"user": null, "token": null}));
    assert!(ok(&app, "debug", Value::Null).await["simulated"].as_bool().unwrap());
}

#[tokio::test(start_paused = true)]
async fn events_can_be_read_and_cleared() {
    let app = shop();
    ok(&app, "press", json!({"testId": "login"})).await;
    let events = ok(&app, "events", json!({"clear": true})).await;
    assert_eq!(events.as_array().unwrap().len(), 1);
    assert!(events[0]["t"].as_u64().unwrap() > 1_600_000_000_000, "each entry carries its time: {events}");
    assert_eq!(ok(&app, "events", Value::Null).await, json!([]));
}

#[tokio::test(start_paused = true)]
async fn bad_params_are_refused_with_the_method_named() {
    let app = shop();
    let (message, _) = err(&app, "press", json!({"holdMs": 5})).await;
    assert!(message.starts_with("press: invalid params"), "{message}");
    let (message, _) = err(&app, "navigate", Value::Null).await;
    assert!(message.starts_with("navigate: invalid params"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn memory_answers_as_the_headless_host_and_grows_by_its_leak_at_each_reset_profile_counts_commits() {
    let model = Model::parse(
        "initialRoute: Home\nrenderMs: 2.5\nmemory: { heapMb: 40, rssMb: 150, leakMbPerReset: 1.5, listeners: 7 }\n\
         routes:\n  Home: { elements: [{ kind: button, testId: go, text: Go, onPress: [{ navigate: Next }] }] }\n  Next: {}\n",
        "leaky.yaml",
    )
    .unwrap();
    let app = App::new(model);
    assert!(ok(&app, "ping", Value::Null).await["commands"].as_array().unwrap().contains(&json!("memory")));
    assert_eq!(
        ok(&app, "memory", Value::Null).await,
        json!({"heapUsedMb": 40.0, "heapTotalMb": 60.0, "rssMb": 150.0, "resets": 0, "roots": 1, "listeners": 7, "commands": 5})
    );
    ok(&app, "reset", Value::Null).await;
    ok(&app, "reset", Value::Null).await;
    let memory = ok(&app, "memory", Value::Null).await;
    assert_eq!(
        (memory["heapUsedMb"].clone(), memory["rssMb"].clone(), memory["resets"].clone()),
        (json!(43.0), json!(153.0), json!(2))
    );
    assert_eq!(ok(&app, "profile", json!({"action": "start"})).await, json!({"recording": true}));
    ok(&app, "press", json!({"testId": "go"})).await;
    let profile = ok(&app, "profile", json!({"action": "stop"})).await;
    assert_eq!(profile["recording"], false);
    let commits = profile["commits"].as_u64().unwrap();
    assert!(commits >= 1, "the press navigated: {profile}");
    assert_eq!(profile["ms"], json!(commits as f64 * 2.5));
    // The shop model has no `memory`: the method is unknown there, as on a device.
    assert_eq!(err(&shop(), "memory", Value::Null).await.0, "Unknown method memory");
}
