//! The driver over real sockets: the wire exchanges of spec §6.8, against
//! bare apps (every frame visible) and the simulated app.
#![allow(clippy::disallowed_methods)] // Tests and benchmarks start their helpers with tokio::spawn.

mod common;

use std::time::Duration;

use argus_worker::driver::{CallError, DriverConfig, DriverEvent, ListenError};
use common::{BareApp, Proxy, Sim, WAIT, driver, quick};
use serde_json::{Value, json};

#[tokio::test]
async fn handshake_with_a_token() {
    let driver = driver(DriverConfig { token: Some("secret".into()), ..quick() }).await;
    let mut app = BareApp::connect(driver.local_addr()).await;
    let auth = app.recv_text().await;
    assert_eq!(auth, format!(r#"{{"event":"auth","session":"{}","token":"secret"}}"#, driver.session()));
    assert!(!driver.connected(), "not attached before hello");
    app.hello().await;
    let hello = driver.wait_for_app(WAIT).await.unwrap();
    assert_eq!(hello.platform, "ios");
    assert!(driver.connected());
    assert_eq!(driver.hello().unwrap().platform, "ios");
}

#[tokio::test]
async fn auth_without_a_token_leaves_it_out() {
    let driver = driver(quick()).await;
    let (_app, auth) = BareApp::attach(driver.local_addr()).await;
    assert_eq!(auth, json!({"event": "auth", "session": driver.session()}));
}

#[tokio::test]
async fn calls_results_and_app_errors() {
    let driver = driver(quick()).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let call = tokio::spawn({
        let driver = std::sync::Arc::new(driver);
        async move {
            let ping = driver.call("ping", None, WAIT).await;
            let nope = driver.call("nope", None, WAIT).await;
            (ping, nope)
        }
    });
    assert_eq!(app.recv_text().await, r#"{"id":1,"method":"ping"}"#);
    app.send(json!({"id": 1, "result": {"pong": true}})).await;
    assert_eq!(app.recv_text().await, r#"{"id":2,"method":"nope"}"#);
    app.send(json!({"id": 2, "error": {"message": "Unknown method", "code": "unknown"}})).await;
    let (ping, nope) = call.await.unwrap();
    assert_eq!(ping.unwrap(), json!({"pong": true}));
    let nope = nope.unwrap_err();
    assert_eq!(nope.code(), Some("unknown"));
    assert_eq!(nope.to_string(), "Unknown method");
}

#[tokio::test]
async fn answers_are_matched_out_of_order() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let slow = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("screen", None, WAIT).await }
    });
    let first = app.recv().await;
    let fast = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("ping", None, WAIT).await }
    });
    let second = app.recv().await;
    assert_ne!(first["id"], second["id"], "ids are never reused");
    app.send(json!({"id": second["id"], "result": "second"})).await;
    app.send(json!({"id": first["id"], "result": "first"})).await;
    assert_eq!(fast.await.unwrap().unwrap(), "second");
    assert_eq!(slow.await.unwrap().unwrap(), "first");
}

#[tokio::test]
async fn a_call_times_out_with_code_timeout() {
    let driver = driver(quick()).await;
    let (_app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let started = std::time::Instant::now();
    let error = driver.call("screen", None, Duration::from_millis(100)).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(error.code(), Some("timeout"));
    assert_eq!(error.to_string(), "screen timed out after 100ms");
}

#[tokio::test]
async fn without_an_app() {
    let driver = driver(quick()).await;
    let error = driver.wait_for_app(Duration::from_millis(50)).await.unwrap_err();
    assert!(error.to_string().starts_with("No app attached on 127.0.0.1:"), "{error}");
    assert_eq!(error.code(), None);
    let started = std::time::Instant::now();
    let error = driver.call("ping", None, WAIT).await.unwrap_err();
    assert!(matches!(error, CallError::NoApp { .. }));
    assert!(started.elapsed() < Duration::from_millis(50), "fails at once");
}

#[tokio::test]
async fn resend_after_a_reconnect_is_byte_identical() {
    let driver =
        std::sync::Arc::new(driver(DriverConfig { reconnect_grace: Duration::from_millis(1000), ..quick() }).await);
    let (mut first, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let call = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("screen", None, Duration::from_millis(3000)).await }
    });
    let sent = first.recv_text().await;
    let mut events = driver.events();
    drop(first);
    assert_eq!(tokio::time::timeout(WAIT, events.recv()).await.unwrap().unwrap(), DriverEvent::Disconnected);

    let mut second = BareApp::connect(driver.local_addr()).await;
    let auth = second.recv().await;
    assert_eq!(auth["session"], driver.session(), "the same session on every connection");
    second.hello().await;
    second.answer_probe().await;
    let resent = second.recv_text().await;
    assert_eq!(resent, sent);
    let id: Value = serde_json::from_str::<Value>(&resent).unwrap()["id"].clone();
    second.send(json!({"id": id, "result": {"route": "Settings.Main"}})).await;
    assert_eq!(call.await.unwrap().unwrap(), json!({"route": "Settings.Main"}));
}

#[tokio::test]
async fn a_press_cut_off_mid_call_runs_exactly_once() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let proxy = Proxy::start(driver.local_addr()).await;
    let sim = Sim::start(proxy.addr.port(), None);
    driver.wait_for_app(WAIT).await.unwrap();
    let press = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("press", Some(json!({"testId": "login"})), WAIT).await }
    });
    // The press takes at least 90 ms in the app (settle 40 + hold 50): cut
    // the link while it runs, so its answer is lost.
    tokio::time::sleep(Duration::from_millis(30)).await;
    proxy.cut();
    let pressed = press.await.unwrap().expect("answered after the reconnect");
    assert_eq!(pressed["element"]["testId"], "login");
    assert_eq!(sim.traced("press").await, 1, "the resend was answered from memory");
    let events = driver.call("events", None, WAIT).await.unwrap();
    assert_eq!(events.as_array().unwrap().len(), 1, "one tap: {events}");
}

#[tokio::test]
async fn calls_fail_with_disconnected_when_the_grace_runs_out() {
    let driver = driver(DriverConfig { reconnect_grace: Duration::from_millis(100), ..quick() }).await;
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let (error, _) = tokio::join!(driver.call("screen", None, WAIT), async {
        app.recv().await;
        drop(app);
    });
    let error = error.unwrap_err();
    assert_eq!(error.code(), Some("disconnected"));
    assert_eq!(error.to_string(), "App disconnected mid-call");
    // Once the grace is over, calls fail at once again.
    assert!(matches!(driver.call("ping", None, WAIT).await, Err(CallError::NoApp { .. })));
}

#[tokio::test]
async fn the_newest_connection_wins() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let (mut old, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let (mut new, auth) = BareApp::attach(driver.local_addr()).await;
    assert_eq!(auth["event"], "auth");
    assert_eq!(old.closed().await.as_deref(), Some("replaced by a newer connection"));
    driver.wait_for_app(WAIT).await.unwrap();
    let call = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("ping", None, WAIT).await }
    });
    let request = new.recv().await;
    new.send(json!({"id": request["id"], "result": "new"})).await;
    assert_eq!(call.await.unwrap().unwrap(), "new");
}

#[tokio::test]
async fn navigation_and_hello_are_observable() {
    let driver = driver(quick()).await;
    let mut events = driver.events();
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    let DriverEvent::Hello(hello) = tokio::time::timeout(WAIT, events.recv()).await.unwrap().unwrap() else {
        panic!("hello first")
    };
    assert_eq!(hello.platform, "ios");
    app.send(json!({"event": "navigation", "route": "Auth.Login"})).await;
    assert_eq!(
        tokio::time::timeout(WAIT, events.recv()).await.unwrap().unwrap(),
        DriverEvent::Navigation(Some("Auth.Login".into()))
    );
}

#[tokio::test]
async fn a_wrong_token_gets_no_calls_and_is_named() {
    let config = DriverConfig { token: Some("b".into()), auth_timeout: Duration::from_millis(200), ..quick() };
    let driver = driver(config).await;
    let port = driver.local_addr().port();
    let _sim = Sim::start(port, Some("a"));
    let error = driver.wait_for_app(Duration::from_millis(500)).await.unwrap_err();
    assert!(error.to_string().contains("Does the driver's token match the app's?"), "{error}");
    assert_eq!(
        driver.problem().as_deref(),
        Some(format!("an app connected on {port} but never answered auth (wrong token?)").as_str())
    );
    // The silent app is never asked: the call waits for an app that says
    // hello, and is never answered `unauthenticated`.
    let error = driver.call("screen", None, Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(error.code(), Some("timeout"), "{error}");
    // An app with the right token attaches and gets the calls; the one
    // that never answered auth is still named while it dials.
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    assert!(driver.connected());
    assert_eq!(
        driver.problem().as_deref(),
        Some(format!("an app connected on {port} but never answered auth (wrong token?)").as_str()),
        "named beside the attached app"
    );
    let driver = std::sync::Arc::new(driver);
    let call = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("ping", None, WAIT).await }
    });
    let request = app.recv().await;
    app.send(json!({"id": request["id"], "result": "pong"})).await;
    assert_eq!(call.await.unwrap().unwrap(), "pong");
    // Once it is gone (and has not dialed again for a while), so is the name.
    drop(_sim);
    let deadline = tokio::time::Instant::now() + WAIT;
    while driver.problem().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", driver.problem());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_flaky_link_is_one_process_reconnecting() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let proxy = Proxy::start(driver.local_addr()).await;
    let sim = Sim::start(proxy.addr.port(), None);
    driver.wait_for_app(WAIT).await.unwrap();
    let first = driver.identity();
    assert_eq!((first.process, first.reconnects, first.replacements), (1, 0, 0));
    // A press in flight at each cut is resent and answered from the same
    // process's memory: it runs once each time.
    for n in 1..=4 {
        let press = tokio::spawn({
            let driver = driver.clone();
            async move { driver.call("press", Some(json!({"testId": "login"})), WAIT).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        proxy.cut();
        press.await.unwrap().expect("answered after the reconnect");
        assert_eq!(sim.traced("press").await, n);
        driver.call("reset", None, WAIT).await.unwrap();
        let now = driver.identity();
        assert_eq!((now.process, now.reconnects, now.replacements), (1, n as u64, 0), "one process reconnected");
    }
    assert_eq!(driver.problem().as_deref(), Some("the app reconnected 4 times in the last minute (a flaky link)"));
}

#[tokio::test]
async fn a_relaunch_is_a_new_process_before_any_call_is_resent() {
    let driver =
        std::sync::Arc::new(driver(DriverConfig { reconnect_grace: Duration::from_millis(3000), ..quick() }).await);
    let port = driver.local_addr().port();
    let first = Sim::start(port, None);
    driver.wait_for_app(WAIT).await.unwrap();
    assert_eq!(driver.identity().process, 1);
    // A fresh app's trace is empty: the driver's `events` read gives it an
    // event to be known by.
    assert_eq!(first.traced("events").await, 1);
    first.stop();
    let mut events = driver.events();
    assert_eq!(tokio::time::timeout(WAIT, events.recv()).await.unwrap().unwrap(), DriverEvent::Disconnected);
    let call = tokio::spawn({
        let driver = driver.clone();
        async move {
            let answer = driver.call("screen", None, WAIT).await;
            (answer, driver.identity())
        }
    });
    let _second = Sim::start(port, None);
    let (answer, identity) = call.await.unwrap();
    answer.expect("the held call is answered by the new process");
    assert_eq!((identity.process, identity.reconnects, identity.replacements), (2, 0, 0), "known before the resend");
}

#[tokio::test]
async fn two_apps_on_one_port_replace_each_other() {
    let driver = driver(quick()).await;
    let port = driver.local_addr().port();
    let _one = Sim::start(port, None);
    driver.wait_for_app(WAIT).await.unwrap();
    let _two = Sim::start(port, None);
    // Each is replaced by the other, and dials again: both connections open.
    let deadline = tokio::time::Instant::now() + WAIT;
    while driver.identity().replacements < 3 {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", driver.identity());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(driver.identity().process >= 4, "{:?}", driver.identity());
}

#[tokio::test]
async fn a_connection_that_never_says_hello_leaves_the_attached_app_its_calls() {
    let driver = std::sync::Arc::new(driver(DriverConfig { token: Some("b".into()), ..quick() }).await);
    let (mut app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    // A second app on the same port with a wrong token: it connects, gets
    // auth, and stays silent.
    let mut stranger = BareApp::connect(driver.local_addr()).await;
    assert_eq!(stranger.recv().await["event"], "auth");
    for n in 0..3 {
        let call = tokio::spawn({
            let driver = driver.clone();
            async move { driver.call("ping", None, WAIT).await }
        });
        let request = app.recv().await;
        app.send(json!({"id": request["id"], "result": n})).await;
        assert_eq!(call.await.unwrap().unwrap(), n, "the attached app answers");
    }
    assert!(driver.connected());
}

#[tokio::test]
async fn close_fails_calls_in_flight_and_ends_every_task() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let (_app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let call = tokio::spawn({
        let driver = driver.clone();
        async move { driver.call("screen", None, WAIT).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    driver.close().await;
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(error.to_string(), "Agent server closed");
    assert_eq!(driver.task_count(), 0);
    assert!(matches!(driver.call("ping", None, WAIT).await, Err(CallError::Closed)));
}

#[tokio::test]
async fn a_port_in_use_is_a_typed_error_naming_the_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let error = argus_worker::driver::Driver::listen(DriverConfig { port, ..DriverConfig::default() })
        .await
        .err()
        .expect("the port is taken");
    assert!(matches!(error, ListenError::PortInUse { .. }));
    assert_eq!(error.code(), Some("port-in-use"));
    assert!(error.to_string().contains(&port.to_string()), "{error}");
}

#[tokio::test]
async fn many_calls_in_flight_with_the_simulated_app() {
    let driver = std::sync::Arc::new(driver(quick()).await);
    let _sim = Sim::start(driver.local_addr().port(), None);
    driver.wait_for_app(WAIT).await.unwrap();
    let calls: Vec<_> = (0..64)
        .map(|n| {
            let driver = driver.clone();
            tokio::spawn(async move {
                let method = if n % 2 == 0 { "ping" } else { "screen" };
                (method, driver.call(method, None, WAIT).await.unwrap())
            })
        })
        .collect();
    for call in calls {
        let (method, answer) = call.await.unwrap();
        match method {
            "ping" => assert_eq!(answer["pong"], true),
            _ => assert_eq!(answer["route"], "Home"),
        }
    }
}

#[tokio::test]
async fn a_dead_app_is_noticed_by_its_silence() {
    let config = DriverConfig {
        ping_interval: Duration::from_millis(50),
        liveness_timeout: Duration::from_millis(150),
        ..quick()
    };
    let driver = driver(config).await;
    let mut events = driver.events();
    // An app that attaches and then stops reading: it never answers a ping.
    let (_app, _) = BareApp::attach(driver.local_addr()).await;
    driver.wait_for_app(WAIT).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        let event = tokio::time::timeout(WAIT, events.recv()).await.unwrap().unwrap();
        if event == DriverEvent::Disconnected {
            break;
        }
    }
    assert!(started.elapsed() <= Duration::from_millis(400), "noticed after {:?}", started.elapsed());
    assert!(!driver.connected());
}

#[test]
fn by_default_a_dead_app_is_noticed_within_15_seconds() {
    let config = DriverConfig::default();
    assert!(config.ping_interval + config.liveness_timeout <= Duration::from_secs(15));
    assert_eq!(config.reconnect_grace, Duration::from_millis(2500));
    assert_eq!(config.host, "127.0.0.1");
    assert_eq!(config.port, 8123);
}
