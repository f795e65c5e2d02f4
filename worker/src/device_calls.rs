//! Calls a WebDriver session sends to the app of a slot it holds. The
//! coordinator decides which session holds which slot; the worker only
//! carries each call to its driver and the answer back, so that it stays
//! the one process that talks to its apps.

use std::time::Duration;

use argus_cases::runner::Camera;
use argus_proto::grpc::{self, device_answer};
use serde_json::{Value, json};

use crate::camera::HookCamera;
use crate::driver::{CallError, Driver};
use crate::slots::SlotConfig;

/// The method that asks for a picture of the device rather than of the app.
pub const SCREENSHOT: &str = "argus.screenshot";
/// The longest a call may be given, whatever the session asks.
const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the app's own `screenshot` command may take.
const APP_SCREENSHOT: Duration = Duration::from_secs(5);

/// Runs one call on `driver` and says how it went.
pub async fn answer(driver: &Driver, slot: &SlotConfig, call: &grpc::DeviceCall) -> grpc::DeviceAnswer {
    let timeout = Duration::from_millis(u64::from(call.timeout_ms).max(1)).min(MAX_TIMEOUT);
    let outcome = if call.method == SCREENSHOT {
        screenshot(driver, slot).await.map(device_answer::Outcome::Png)
    } else {
        match params(&call.params_json) {
            Ok(params) => driver
                .call(&call.method, params, timeout)
                .await
                .map(|value| device_answer::Outcome::ResultJson(value.to_string()))
                .map_err(|error| failure(&error)),
            Err(error) => Err(error),
        }
    };
    grpc::DeviceAnswer { call_id: call.call_id, outcome: Some(outcome.unwrap_or_else(device_answer::Outcome::Error)) }
}

fn params(json: &str) -> Result<Option<Value>, grpc::DeviceError> {
    if json.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(json).map(Some).map_err(|error| grpc::DeviceError {
        code: "invalid-params".into(),
        message: format!("the call's params are not JSON: {error}"),
    })
}

fn failure(error: &CallError) -> grpc::DeviceError {
    grpc::DeviceError { code: error.code().unwrap_or_default().to_owned(), message: error.to_string() }
}

/// A PNG of the device: the slot's `screenshot` hook when it has one (the
/// host's camera, as for a failed step), else the app's `screenshot` command.
async fn screenshot(driver: &Driver, slot: &SlotConfig) -> Result<Vec<u8>, grpc::DeviceError> {
    let unable = |message: String| grpc::DeviceError { code: "unable-to-capture".into(), message };
    let folder = tempfile::tempdir().map_err(|e| unable(format!("cannot make a folder for the picture: {e}")))?;
    let file = folder.path().join("screen.png");
    let taken = match &slot.hooks.screenshot {
        Some(command) => {
            let camera = HookCamera { command: command.clone(), placeholders: slot.placeholders("webdriver", 1) };
            camera.screenshot(&file).await.map_err(|e| unable(e.to_string()))
        }
        None if driver.hello().is_some_and(|h| h.has_command("screenshot")) => {
            let params = json!({ "path": file.display().to_string() });
            driver.call("screenshot", Some(params), APP_SCREENSHOT).await.map(drop).map_err(|e| failure(&e))
        }
        None => Err(unable(format!("slot {} has no screenshot hook and its app has no screenshot command", slot.name))),
    };
    taken?;
    tokio::fs::read(&file).await.map_err(|e| unable(format!("the screenshot left no file: {e}")))
}
