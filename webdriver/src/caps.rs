//! W3C capability processing for a new session: `alwaysMatch` merged with
//! each `firstMatch` entry, checked, and turned into what a device must
//! offer ([`Wants`], matched by the grid like a run's selector). Pure: the owner task matches [`Wants`] against its
//! devices, and a routing node may read these capabilities (W3C lets an
//! intermediary route on them).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

pub use argus_grid::matching::{Capabilities, Wants};

use super::error::{WdError, WdResult};

/// How long a new session waits for a free device unless it asks
/// otherwise (`lynkeus:queueTimeoutMs`); Selenium Grid's
/// `--session-request-timeout` is the model.
pub const QUEUE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a session may go without a command before its device is freed
/// (`lynkeus:idleTimeoutMs`); Selenium Grid's `--session-timeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest either may be set to.
const LONGEST: Duration = Duration::from_secs(3600);

/// The standard capability names a W3C endpoint accepts without a prefix.
const STANDARD: [&str; 12] = [
    "browserName",
    "browserVersion",
    "platformName",
    "acceptInsecureCerts",
    "pageLoadStrategy",
    "proxy",
    "setWindowRect",
    "timeouts",
    "unhandledPromptBehavior",
    "strictFileInteractability",
    "userAgent",
    "webSocketUrl",
];

/// One merged capability set, ready to match.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub wants: Wants,
    /// The merged capabilities, echoed back (routing caps left out).
    pub echoed: Map<String, Value>,
    pub queue_timeout: Duration,
    pub idle_timeout: Duration,
}

/// The body of `POST /session`, processed: each candidate set in the
/// client's order (the first a device matches wins).
pub fn process(body: &Value) -> WdResult<Vec<Request>> {
    let caps = body
        .get("capabilities")
        .ok_or_else(|| WdError::invalid_argument("the new session's body has no `capabilities` object"))?;
    let object = |value: &Value, what: &str| {
        value.as_object().cloned().ok_or_else(|| WdError::invalid_argument(format!("`{what}` must be a JSON object")))
    };
    let always = match caps.get("alwaysMatch") {
        None | Some(Value::Null) => Map::new(),
        Some(v) => object(v, "capabilities.alwaysMatch")?,
    };
    let first: Vec<Map<String, Value>> = match caps.get("firstMatch") {
        None | Some(Value::Null) => vec![Map::new()],
        Some(Value::Array(list)) if !list.is_empty() => list
            .iter()
            .enumerate()
            .map(|(n, v)| object(v, &format!("capabilities.firstMatch[{n}]")))
            .collect::<WdResult<_>>()?,
        Some(_) => return Err(WdError::invalid_argument("`capabilities.firstMatch` must be a non-empty list")),
    };
    validate(&always, "alwaysMatch")?;
    first
        .into_iter()
        .enumerate()
        .map(|(n, entry)| {
            validate(&entry, &format!("firstMatch[{n}]"))?;
            let mut merged = always.clone();
            for (key, value) in entry {
                if merged.contains_key(&key) {
                    return Err(WdError::invalid_argument(format!(
                        "capability `{key}` is in both alwaysMatch and firstMatch[{n}]"
                    )));
                }
                merged.insert(key, value);
            }
            request(merged)
        })
        .collect()
}

fn validate(caps: &Map<String, Value>, where_: &str) -> WdResult<()> {
    for key in caps.keys() {
        if !key.contains(':') && !STANDARD.contains(&key.as_str()) {
            return Err(WdError::invalid_argument(format!(
                "capability `{key}` in {where_} is not a W3C capability; vendor capabilities need a prefix (appium:{key})"
            )));
        }
    }
    Ok(())
}

fn request(merged: Map<String, Value>) -> WdResult<Request> {
    let text = |key: &str| -> WdResult<Option<String>> {
        match merged.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(WdError::invalid_argument(format!("capability `{key}` must be a string"))),
        }
    };
    let millis = |key: &str, default: Duration| -> WdResult<Duration> {
        match merged.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_u64().map(Duration::from_millis).filter(|d| *d <= LONGEST).ok_or_else(|| {
                WdError::invalid_argument(format!("capability `{key}` must be milliseconds, at most 3600000"))
            }),
        }
    };
    let mut labels = BTreeMap::new();
    let mut echoed = Map::new();
    let (mut queue_timeout, mut idle_timeout) = (QUEUE_TIMEOUT, IDLE_TIMEOUT);
    for (key, value) in &merged {
        match key.strip_prefix("lynkeus:") {
            Some("queueTimeoutMs") => queue_timeout = millis(key, QUEUE_TIMEOUT)?,
            Some("idleTimeoutMs") => idle_timeout = millis(key, IDLE_TIMEOUT)?,
            Some(label) => {
                let Some(value) = value.as_str() else {
                    return Err(WdError::invalid_argument(format!("routing capability `{key}` must be a string")));
                };
                labels.insert(label.to_owned(), value.to_owned());
            }
            // Routing capabilities are the grid's; the rest is echoed.
            None => {
                echoed.insert(key.clone(), value.clone());
            }
        }
    }
    let automation = text("appium:automationName")?;
    if let Some(name) = automation.as_ref().filter(|n| !n.eq_ignore_ascii_case("lynkeus")) {
        return Err(WdError::new(
            super::error::Code::SessionNotCreated,
            format!("appium:automationName is {name}; this grid drives lynkeus apps: leave it out or say Lynkeus"),
        ));
    }
    let wants = Wants {
        platform: text("platformName")?,
        device_name: text("appium:deviceName")?,
        udid: text("appium:udid")?,
        platform_version: text("appium:platformVersion")?,
        app: text("appium:bundleId")?.or(text("appium:appPackage")?),
        labels,
    };
    Ok(Request { wants, echoed, queue_timeout, idle_timeout })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn facts(platform: &str, labels: &[(&str, &str)], app: Option<&Value>) -> Capabilities {
        Capabilities {
            id: "w1/ios-1".into(),
            slot: "ios-1".into(),
            platform: platform.into(),
            udid: "UDID-1".into(),
            labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            app_ids: Capabilities::app_ids_of(app),
            ..Capabilities::default()
        }
    }

    #[test]
    fn always_and_first_match_merge_in_the_clients_order() {
        let body = json!({"capabilities": {"alwaysMatch": {"appium:automationName": "Lynkeus"},
            "firstMatch": [{"platformName": "iOS", "appium:deviceName": "iPhone 15"}, {"platformName": "Android"}]}});
        let sets = process(&body).unwrap();
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].wants.platform.as_deref(), Some("iOS"));
        assert_eq!(sets[0].wants.device_name.as_deref(), Some("iPhone 15"));
        assert_eq!(sets[1].wants.platform.as_deref(), Some("Android"));
        assert_eq!(sets[1].echoed["appium:automationName"], "Lynkeus");
    }

    #[test]
    fn bad_capabilities_are_named() {
        let twice =
            json!({"capabilities": {"alwaysMatch": {"platformName": "iOS"}, "firstMatch": [{"platformName": "iOS"}]}});
        assert!(process(&twice).unwrap_err().message.contains("`platformName` is in both"));
        let bare = json!({"capabilities": {"alwaysMatch": {"deviceName": "x"}}});
        let error = process(&bare).unwrap_err();
        assert_eq!(error.code.as_str(), "invalid argument");
        assert!(error.message.contains("appium:deviceName"), "{}", error.message);
        assert!(process(&json!({})).unwrap_err().message.contains("capabilities"));
        assert!(process(&json!({"capabilities": {"firstMatch": []}})).is_err());
        let other = json!({"capabilities": {"alwaysMatch": {"appium:automationName": "XCUITest"}}});
        assert_eq!(process(&other).unwrap_err().code.as_str(), "session not created");
    }

    #[test]
    fn routing_capabilities_are_labels_and_not_echoed() {
        let body = json!({"capabilities": {"alwaysMatch": {"platformName": "iOS", "lynkeus:pool": "smoke",
            "lynkeus:queueTimeoutMs": 1500, "se:remoteUrl": "http://x"}}});
        let set = process(&body).unwrap().remove(0);
        assert_eq!(set.wants.labels.get("pool").map(String::as_str), Some("smoke"));
        assert_eq!(set.queue_timeout, Duration::from_millis(1500));
        assert!(!set.echoed.contains_key("lynkeus:pool"));
        assert!(set.echoed.contains_key("se:remoteUrl"), "other vendors' caps are echoed, not matched");
    }

    #[test]
    fn a_device_is_matched_by_platform_name_udid_version_app_and_labels() {
        let app = json!({"name": "Shop", "bundleId": "com.example.shop"});
        let device =
            facts("ios", &[("model", "iPhone 15"), ("platformVersion", "17.4"), ("pool", "smoke")], Some(&app));
        let wants = |caps: Value| process(&json!({"capabilities": {"alwaysMatch": caps}})).unwrap().remove(0).wants;
        assert!(wants(json!({"platformName": "iOS"})).accepts(&device));
        assert!(!wants(json!({"platformName": "Android"})).accepts(&device));
        assert!(wants(json!({"appium:deviceName": "iphone 15"})).accepts(&device));
        assert!(wants(json!({"appium:deviceName": "ios-1"})).accepts(&device), "the slot's name");
        assert!(!wants(json!({"appium:deviceName": "Pixel 8"})).accepts(&device));
        assert!(wants(json!({"appium:udid": "UDID-1"})).accepts(&device));
        assert!(wants(json!({"appium:platformVersion": "17.4"})).accepts(&device));
        assert!(!wants(json!({"appium:platformVersion": "17"})).accepts(&device), "exactly, as Selenium Grid");
        assert!(wants(json!({"appium:bundleId": "com.example.shop"})).accepts(&device));
        assert!(!wants(json!({"appium:appPackage": "com.other"})).accepts(&device));
        assert!(wants(json!({"lynkeus:pool": "smoke"})).accepts(&device));
        assert!(!wants(json!({"lynkeus:pool": "nightly"})).accepts(&device));
        assert!(!wants(json!({"appium:platformVersion": "17.4"})).accepts(&facts("ios", &[], None)));
    }
}
