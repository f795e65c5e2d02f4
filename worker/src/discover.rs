//! The devices of this host: booted iOS simulators (`xcrun simctl list
//! devices booted -j`) and Android emulators and devices (`adb devices -l`),
//! proposed as slots, one driver port each, with the hooks that tell each
//! app its port. The story the slots follow, and what `--print-slots` says:
//!
//! - iOS: the simulator shares the host's network; the app dials
//!   `ws://127.0.0.1:PORT`, and learns PORT from its launch environment:
//!   `SIMCTL_CHILD_LYNKEUS_PORT=PORT xcrun simctl launch UDID BUNDLE`.
//! - Android: the emulator reaches the host at 10.0.2.2; the app dials
//!   `ws://10.0.2.2:PORT`, and learns PORT from a launch extra:
//!   `adb -s SERIAL shell am start -n ACTIVITY --ei LYNKEUS_PORT PORT`.

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;

use crate::slots::{Hooks, SlotConfig};

/// A device found on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub platform: &'static str,
    /// The simulator's UDID or the emulator's serial.
    pub id: String,
    pub model: String,
    /// `17.4`, when the tool says.
    pub version: Option<String>,
}

/// What the apps are: the iOS bundle id and the Android activity to launch.
#[derive(Debug, Clone, Default)]
pub struct Apps {
    pub ios_bundle: Option<String>,
    pub android_activity: Option<String>,
}

#[derive(Deserialize)]
struct SimctlList {
    devices: BTreeMap<String, Vec<Simulator>>,
}

#[derive(Deserialize)]
struct Simulator {
    udid: String,
    name: String,
    #[serde(default)]
    state: String,
}

/// Booted simulators, from `xcrun simctl list devices booted -j`'s output.
pub fn parse_simctl(json: &str) -> Result<Vec<Found>, DiscoverError> {
    let list: SimctlList = serde_json::from_str(json).map_err(DiscoverError::NotSimctlJson)?;
    let mut found = Vec::new();
    for (runtime, simulators) in list.devices {
        // com.apple.CoreSimulator.SimRuntime.iOS-17-4 → 17.4
        let version = runtime.rsplit_once(".iOS-").map(|(_, v)| v.replace('-', "."));
        for sim in simulators.into_iter().filter(|s| s.state == "Booted") {
            found.push(Found { platform: "ios", id: sim.udid, model: sim.name, version: version.clone() });
        }
    }
    Ok(found)
}

/// Attached emulators and devices, from `adb devices -l`'s output.
pub fn parse_adb(text: &str) -> Vec<Found> {
    text.lines()
        .skip_while(|l| !l.starts_with("List of devices attached"))
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let serial = words.next()?;
            // `offline` or `unauthorized` devices cannot run an app.
            (words.next()? == "device").then_some(())?;
            let model = words.find_map(|w| w.strip_prefix("model:")).unwrap_or(serial).replace('_', " ");
            Some(Found { platform: "android", id: serial.to_owned(), model, version: None })
        })
        .collect()
}

/// Why the host's devices could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("xcrun simctl list printed what is not its JSON: {0}")]
    NotSimctlJson(serde_json::Error),
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("cannot run {program}: {error}")]
    NotRun { program: String, error: std::io::Error },
}

fn run(program: &str, args: &[&str]) -> Result<Option<String>, DiscoverError> {
    match Command::new(program).args(args).output() {
        Ok(output) if output.status.success() => Ok(Some(String::from_utf8_lossy(&output.stdout).into_owned())),
        Ok(output) => Err(DiscoverError::Failed {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
        // Not on this host: no devices of that kind.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(DiscoverError::NotRun { program: program.to_owned(), error }),
    }
}

/// The devices of this host; a tool that is not installed finds none.
pub fn devices() -> Result<Vec<Found>, DiscoverError> {
    let mut found = Vec::new();
    if let Some(json) = run("xcrun", &["simctl", "list", "devices", "booted", "-j"])? {
        found.extend(parse_simctl(&json)?);
    }
    if let Some(text) = run("adb", &["devices", "-l"])? {
        found.extend(parse_adb(&text));
    }
    Ok(found)
}

/// A slot per device, with ports from `first_port` on.
pub fn propose(found: &[Found], first_port: u16, apps: &Apps) -> Vec<SlotConfig> {
    found
        .iter()
        .enumerate()
        .map(|(n, device)| {
            let port = first_port + n as u16;
            let mut slot = SlotConfig::for_port(port, device.platform);
            slot.name = format!("{}-{}", device.platform, slug(&device.model, n));
            slot.labels.insert("model".into(), device.model.clone());
            if let Some(version) = &device.version {
                slot.labels.insert("platformVersion".into(), version.clone());
            }
            slot.hooks = match device.platform {
                "ios" => {
                    slot.udid = Some(device.id.clone());
                    Hooks {
                        before: Some(ios_launch(apps.ios_bundle.as_deref().unwrap_or("BUNDLE.ID"))),
                        screenshot: Some("xcrun simctl io {udid} screenshot {file}".into()),
                        log: Some("xcrun simctl spawn {udid} log stream --style compact".into()),
                        ..Hooks::default()
                    }
                }
                _ => {
                    slot.serial = Some(device.id.clone());
                    Hooks {
                        before: Some(android_launch(
                            apps.android_activity.as_deref().unwrap_or("PACKAGE/.MainActivity"),
                        )),
                        screenshot: Some("adb -s {serial} exec-out screencap -p > {file}".into()),
                        log: Some("adb -s {serial} logcat -v threadtime".into()),
                        ..Hooks::default()
                    }
                }
            };
            slot
        })
        .collect()
}

fn slug(model: &str, n: usize) -> String {
    let slug: String =
        model.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    format!("{}-{}", slug.trim_matches('-'), n + 1)
}

/// The `before` hook that launches an iOS app with its port.
pub fn ios_launch(bundle: &str) -> String {
    format!("SIMCTL_CHILD_LYNKEUS_PORT={{port}} xcrun simctl launch --terminate-running-process {{udid}} {bundle}")
}

/// The `before` hook that launches an Android app with its port.
pub fn android_launch(activity: &str) -> String {
    format!("adb -s {{serial}} shell am start -S -n {activity} --ei LYNKEUS_PORT {{port}}")
}

/// What the app of `slot` must be told, in one line.
pub fn story(slot: &SlotConfig) -> String {
    let dials = format!("ws://{}:{}", slot.bridge, slot.port);
    match slot.platform.as_str() {
        "ios" => format!(
            "slot {} (ios{}): the app dials {dials}; launch it with its port: SIMCTL_CHILD_LYNKEUS_PORT={} xcrun simctl launch {} BUNDLE",
            slot.name,
            slot.udid.as_deref().map(|u| format!(", simulator {u}")).unwrap_or_default(),
            slot.port,
            slot.udid.as_deref().unwrap_or("UDID"),
        ),
        "android" => format!(
            "slot {} (android{}): the app dials {dials}; launch it with its port: adb -s {} shell am start -n ACTIVITY --ei LYNKEUS_PORT {}",
            slot.name,
            slot.serial.as_deref().map(|s| format!(", {s}")).unwrap_or_default(),
            slot.serial.as_deref().unwrap_or("SERIAL"),
            slot.port,
        ),
        other => format!("slot {} ({other}): the app dials {dials}", slot.name),
    }
}

/// The slots as a worker.toml (for `argus worker --discover`).
pub fn to_toml(coordinator: Option<&str>, slots: &[SlotConfig]) -> String {
    let mut out = String::from("# Proposed by `argus worker --discover`: one slot per device of this host.\n");
    if let Some(url) = coordinator {
        out.push_str(&format!("coordinator = {}\n", quote(url)));
    }
    for slot in slots {
        out.push_str(&format!(
            "\n[[slot]]\nname = {}\nport = {}\nplatform = {}\n",
            quote(&slot.name),
            slot.port,
            quote(&slot.platform)
        ));
        if let Some(udid) = &slot.udid {
            out.push_str(&format!("udid = {}\n", quote(udid)));
        }
        if let Some(serial) = &slot.serial {
            out.push_str(&format!("serial = {}\n", quote(serial)));
        }
        let labels: Vec<String> = slot.labels.iter().map(|(k, v)| format!("{k} = {}", quote(v))).collect();
        out.push_str(&format!("labels = {{ {} }}\n", labels.join(", ")));
        for (name, hook) in
            [("before", &slot.hooks.before), ("screenshot", &slot.hooks.screenshot), ("log", &slot.hooks.log)]
        {
            if let Some(hook) = hook {
                out.push_str(&format!("hooks.{name} = {}\n", quote(hook)));
            }
        }
    }
    out
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIMCTL: &str = r#"{"devices":{"com.apple.CoreSimulator.SimRuntime.iOS-17-4":[
        {"lastBootedAt":"2026-12-01T09:00:00Z","dataPath":"/x","dataPathSize":1,"logPath":"/y","udid":"5D1C-1","isAvailable":true,"deviceTypeIdentifier":"com.apple.CoreSimulator.SimDeviceType.iPhone-15","state":"Booted","name":"iPhone 15"}],
        "com.apple.CoreSimulator.SimRuntime.iOS-16-0":[]}}"#;
    const ADB: &str = "* daemon started successfully\nList of devices attached\n\
        emulator-5554          device product:sdk_gphone64_x86_64 model:sdk_gphone64_x86_64 device:emu64xa transport_id:1\n\
        emulator-5556          offline\n\n";

    #[test]
    fn booted_simulators_and_attached_emulators_are_found() {
        let ios = parse_simctl(SIMCTL).unwrap();
        assert_eq!(
            ios,
            [Found { platform: "ios", id: "5D1C-1".into(), model: "iPhone 15".into(), version: Some("17.4".into()) }]
        );
        let android = parse_adb(ADB);
        assert_eq!(android.len(), 1, "an offline emulator is left out");
        assert_eq!(android[0].model, "sdk gphone64 x86 64");
        assert!(parse_simctl("not json").unwrap_err().to_string().contains("not its JSON"));
    }

    #[test]
    fn each_device_gets_a_port_and_the_hook_that_tells_its_app() {
        let found = [parse_simctl(SIMCTL).unwrap(), parse_adb(ADB)].concat();
        let apps = Apps {
            ios_bundle: Some("com.example.shop".into()),
            android_activity: Some("com.example.shop/.Main".into()),
        };
        let slots = propose(&found, 8123, &apps);
        assert_eq!(
            slots[0].hooks.before.as_deref(),
            Some(
                "SIMCTL_CHILD_LYNKEUS_PORT={port} xcrun simctl launch --terminate-running-process {udid} com.example.shop"
            )
        );
        assert_eq!((slots[1].port, slots[1].bridge.as_str()), (8124, "10.0.2.2"));
        assert!(story(&slots[1]).contains("the app dials ws://10.0.2.2:8124; launch it with its port: adb -s emulator-5554 shell am start -n ACTIVITY --ei LYNKEUS_PORT 8124"));
        let file = crate::slots::WorkerFile::parse(&to_toml(Some("http://c:7171"), &slots), "proposed").unwrap();
        assert_eq!(file.slots, slots, "the proposal is a worker file that says the same");
    }
}
