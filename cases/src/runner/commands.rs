//! `app.<name>` steps that name a command of lynkeus' table (`idle`,
//! `os clock`, `mock`, …) rather than one its runner does itself: the
//! step's value read as that command's arguments (`crate::commands`), and
//! the protocol call the command makes with them.

use serde_json::{Map, Value, json};

use super::app::IDLE_DEFAULT;
use super::{Attempt, CALL_TIMEOUT, Device, Done, StepError, StepResult};
use crate::commands::{self, Argv};
use crate::js::js_string;

/// `idle` gets its own timeout plus this on the wire.
const IDLE_SLACK_MS: u64 = 2_000;

/// `{key: value}` for each that is given.
fn params(pairs: &[(&str, Option<Value>)]) -> Value {
    Value::Object(pairs.iter().filter_map(|(k, v)| Some(((*k).to_owned(), v.clone()?))).collect::<Map<_, _>>())
}

fn number(argv: &Argv, flag: &str) -> Option<Value> {
    argv.number(flag).map(|n| json!(n.max(0.0) as u64))
}

fn text(argv: &Argv, flag: &str) -> Option<Value> {
    argv.text(flag).filter(|t| !t.is_empty()).map(Value::String)
}

fn set(argv: &Argv, flag: &str) -> Option<Value> {
    argv.is_set(flag).then_some(Value::Bool(true))
}

impl<D: Device> Attempt<'_, D> {
    pub(super) async fn lynkeus_command(&mut self, name: &str, value: &Value) -> StepResult {
        let Some(command) = commands::find(name) else {
            return Err(StepError::Failed(format!("app.{name} is not a step: lynkeus has no command {name}")));
        };
        let argv = commands::argv_for(command, value).map_err(|e| StepError::Failed(e.to_string()))?;
        let first = argv.positional(0).map(js_string);
        let (method, call_params) = match command.name {
            "screen" => ("screen", None),
            "back" => ("back", None),
            "requests" | "trace" | "perf" => ("trace", Some(json!({}))),
            // What the app said of itself, and why the last step failed:
            // read, never failed on.
            "hello" | "why" => return Ok(Done::Passed),
            "idle" => {
                let quiet = argv.number("quiet").map_or(IDLE_DEFAULT.0, |n| n.max(0.0) as u64);
                let timeout = argv.number("timeout").map_or(IDLE_DEFAULT.1, |n| n.max(0.0) as u64);
                let mut call = json!({"quietMs": quiet, "timeoutMs": timeout});
                if let Some(after) = number(&argv, "after") {
                    call["after"] = after;
                }
                let wait = std::time::Duration::from_millis(timeout + IDLE_SLACK_MS);
                self.call("idle", Some(call), wait).await?;
                return Ok(Done::Passed);
            }
            "screenshot" => ("screenshot", Some(params(&[("path", first.map(Value::String))]))),
            "profile" => ("profile", Some(params(&[("action", first.map(Value::String))]))),
            "os deeplink" => {
                let url = first.ok_or_else(|| StepError::Failed("os deeplink needs url".into()))?;
                ("deepLink", Some(json!({"url": url})))
            }
            "os appstate" | "os network" => {
                let state = first.ok_or_else(|| StepError::Failed(format!("{} needs state", command.name)))?;
                (name_of(command.name), Some(json!({"state": state})))
            }
            "os clock" => (
                "clock",
                Some(params(&[
                    ("now", text(&argv, "now")),
                    ("advanceMs", number(&argv, "advance")),
                    ("reset", set(&argv, "reset")),
                ])),
            ),
            "os biometrics" => {
                let next = argv.text("next").filter(|t| !t.is_empty()).map(|t| json!(t.split(',').collect::<Vec<_>>()));
                (
                    "biometrics",
                    Some(params(&[
                        ("available", text(&argv, "available")),
                        ("next", next),
                        ("fallback", text(&argv, "fallback")),
                    ])),
                )
            }
            "os scan" => {
                let kind = argv.text("type").unwrap_or_else(|| "qr".to_owned());
                ("scan", Some(json!({"value": first, "type": kind})))
            }
            "os gallery" if argv.is_set("cancel") => ("gallery", Some(json!({"cancel": true}))),
            "os gallery" => (
                "gallery",
                Some(params(&[
                    ("uri", first.map(Value::String)),
                    ("fileName", text(&argv, "name")),
                    ("type", text(&argv, "mime")),
                ])),
            ),
            "mock" => ("netmock", Some(mock(&argv, first)?)),
            // The CLI relaunches the app from the host (simctl, adb); a worker
            // relaunches through its slot's hooks, not a step.
            "launch" => return Err(StepError::Unsupported("launch".into())),
            // lynkeus reads these against its own rules and the simulator:
            // nothing here to judge the app with.
            "lint" | "os permissions" | "os push" | "os appearance" | "os location" | "os language" => {
                return Err(StepError::Unsupported(command.name.into()));
            }
            other => {
                return Err(StepError::Failed(format!("app.{name}: argus does not run lynkeus' {other} in a case")));
            }
        };
        self.call(method, call_params, CALL_TIMEOUT).await?;
        Ok(Done::Passed)
    }
}

/// The app command an `os` command calls: its last word.
fn name_of(command: &str) -> &str {
    command.rsplit(' ').next().unwrap_or(command)
}

/// `mock 'GET /path' [--status …] | --clear | --list` as the app's
/// `netmock` call.
fn mock(argv: &Argv, route: Option<String>) -> Result<Value, StepError> {
    if argv.is_set("clear") {
        return Ok(json!({"action": "clear"}));
    }
    if argv.is_set("list") {
        return Ok(json!({"action": "list"}));
    }
    let route = route.ok_or_else(|| StepError::Failed("mock needs 'METHOD /path' (or --clear, --list)".into()))?;
    let (method, path) = match route.split_once(char::is_whitespace) {
        Some((method, path)) => (method.to_owned(), path.trim().to_owned()),
        None => ("*".to_owned(), route),
    };
    let status = number(argv, "status").unwrap_or(json!(200));
    Ok(params(&[
        ("action", Some(json!("add"))),
        ("method", Some(json!(method))),
        ("path", Some(json!(path))),
        ("status", Some(status)),
        ("body", text(argv, "body")),
        ("delayMs", number(argv, "delay")),
        ("times", number(argv, "times")),
        ("sticky", set(argv, "sticky")),
        ("lost", set(argv, "lost")),
    ]))
}
