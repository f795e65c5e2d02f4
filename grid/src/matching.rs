//! Which devices fit: one vocabulary for the two kinds of request that want
//! a device. A run says what its cases need in a [`Selector`] (platform,
//! labels, app); a WebDriver session says it in W3C capabilities, read into
//! [`Wants`] (platform, device name, udid, platform version, app, labels).
//! Both are matched against the same [`Capabilities`], which the owner task
//! keeps for each device from its slot and its app's hello.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a device offers, from its slot and its app's `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub platform: String,
    pub labels: BTreeMap<String, String>,
    /// `hello.app.name`.
    pub app: Option<String>,
    /// Every name the app goes by in its hello (`bundleId`, `package`,
    /// `id`, `name`), for a session's `appium:bundleId`/`appium:appPackage`.
    pub app_ids: Vec<String>,
    /// The device's grid id, its slot's name, udid and serial.
    pub id: String,
    pub slot: String,
    pub udid: String,
    pub serial: String,
    /// Quarantined or mismatched: it runs nothing.
    pub quarantined: bool,
}

impl Capabilities {
    /// The names `hello.app` gives the app, as [`Capabilities::app_ids`] keeps them.
    pub fn app_ids_of(app: Option<&serde_json::Value>) -> Vec<String> {
        let Some(app) = app else { return Vec::new() };
        ["bundleId", "package", "id", "name"]
            .iter()
            .filter_map(|key| app.get(key).and_then(serde_json::Value::as_str).map(str::to_owned))
            .collect()
    }

    fn platform_is(&self, wanted: Option<&String>) -> bool {
        wanted.is_none_or(|p| p.eq_ignore_ascii_case(&self.platform))
    }

    fn labels_hold(&self, wanted: &BTreeMap<String, String>) -> bool {
        wanted.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }

    fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

/// Which devices may run a run's cases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `hello.app.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

impl Selector {
    /// Whether a device with `caps` may run this run's cases now.
    pub fn is_satisfied_by(&self, caps: &Capabilities) -> bool {
        !caps.quarantined
            && caps.platform_is(self.platform.as_ref())
            && self.app.as_ref().is_none_or(|a| caps.app.as_deref() == Some(a.as_str()))
            && caps.labels_hold(&self.labels)
    }

    /// `platform=ios, app=Shop, k=v`, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = &self.platform {
            parts.push(format!("platform={p}"));
        }
        if let Some(a) = &self.app {
            parts.push(format!("app={a}"));
        }
        parts.extend(self.labels.iter().map(|(k, v)| format!("{k}={v}")));
        if parts.is_empty() { "any device".to_owned() } else { parts.join(", ") }
    }
}

/// What a device must offer to take a WebDriver session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wants {
    /// `platformName`, compared without case.
    pub platform: Option<String>,
    /// `appium:deviceName`: the slot's `model` label, its name or the device id.
    pub device_name: Option<String>,
    /// `appium:udid`: the slot's udid or serial.
    pub udid: Option<String>,
    /// `appium:platformVersion`: the slot's `platformVersion` label, exactly.
    pub platform_version: Option<String>,
    /// `appium:bundleId` / `appium:appPackage`: the app's identity in its hello.
    pub app: Option<String>,
    /// `lynkeus:<label>`: slot labels that must be equal.
    pub labels: BTreeMap<String, String>,
}

impl Wants {
    /// Whether a device with `caps` fits (quarantine is the owner task's
    /// to weigh: a session waits for a quarantined device like any other).
    pub fn accepts(&self, caps: &Capabilities) -> bool {
        let name_ok = self.device_name.as_ref().is_none_or(|name| {
            [caps.label("model").unwrap_or_default(), caps.slot.as_str(), caps.id.as_str()]
                .iter()
                .any(|have| have.eq_ignore_ascii_case(name))
        });
        let udid_ok = self.udid.as_ref().is_none_or(|u| *u == caps.udid || *u == caps.serial);
        let version_ok =
            self.platform_version.as_ref().is_none_or(|v| caps.label("platformVersion") == Some(v.as_str()));
        let app_ok = self.app.as_ref().is_none_or(|want| caps.app_ids.iter().any(|id| id == want));
        caps.platform_is(self.platform.as_ref())
            && name_ok
            && udid_ok
            && version_ok
            && app_ok
            && caps.labels_hold(&self.labels)
    }

    /// `platformName=iOS, appium:deviceName=iPhone 15`, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut add = |name: &str, value: &Option<String>| {
            if let Some(v) = value {
                parts.push(format!("{name}={v}"));
            }
        };
        add("platformName", &self.platform);
        add("appium:deviceName", &self.device_name);
        add("appium:udid", &self.udid);
        add("appium:platformVersion", &self.platform_version);
        add("app", &self.app);
        parts.extend(self.labels.iter().map(|(k, v)| format!("lynkeus:{k}={v}")));
        if parts.is_empty() { "any device".into() } else { parts.join(", ") }
    }
}
