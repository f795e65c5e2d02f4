//! The lynkeus wire protocol, version 1.
//!
//! One JSON text frame per WebSocket message. The app dials the driver; the
//! driver speaks first with [`Auth`]; the app answers [`Hello`] and then
//! answers [`Request`]s with [`Response`]s, in any order, matched by id.
//! Field names are the protocol's own (camelCase); every `Option` is left out
//! when `None`, as the TypeScript reference leaves out `undefined`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The core methods; any other name is an app command.
pub const CORE_METHODS: [&str; 16] = [
    "ping",
    "screen",
    "find",
    "press",
    "type",
    "swipe",
    "navigate",
    "back",
    "waitFor",
    "idle",
    "deepLink",
    "requests",
    "trace",
    "dismissKeyboard",
    "batch",
    "debug",
];

/// Methods that only read; the agent does not trace them as `command` events
/// unless they fail.
pub const READ_METHODS: [&str; 9] = ["screen", "find", "trace", "requests", "ping", "debug", "idle", "waitFor", "busy"];

/// The error code an app sends until the driver's token matches.
pub const CODE_UNAUTHENTICATED: &str = "unauthenticated";
/// The message that goes with [`CODE_UNAUTHENTICATED`].
pub const MESSAGE_UNAUTHENTICATED: &str = "Not authenticated";

// ---------------------------------------------------------------- events

/// Driver → app, always the first message on a new connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    /// Random per driver, the same on every connection it accepts: the app
    /// tells a reconnect from a new driver by it.
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// App → driver, the answer to an [`Auth`] with the right token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub protocol_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    pub platform: String,
    #[serde(default)]
    pub native: bool,
    #[serde(default)]
    pub commands: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<Value>,
    /// Fields a newer agent adds, kept so that they can be shown and passed on.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Hello {
    /// Whether the app answers `command` beyond the core methods.
    pub fn has_command(&self, command: &str) -> bool {
        self.commands.iter().any(|c| c == command)
    }

    /// `app.name`, when the app passed one.
    pub fn app_name(&self) -> Option<&str> {
        self.app.as_ref()?.get("name")?.as_str()
    }

    /// `app.version`, when the app passed one.
    pub fn app_version(&self) -> Option<&str> {
        self.app.as_ref()?.get("version")?.as_str()
    }
}

/// App → driver, whenever the focused route may have changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Navigation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
}

// ---------------------------------------------------------------- requests

/// Driver → app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// The error half of a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl ErrorBody {
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), code: None }
    }

    pub fn with_code(message: impl Into<String>, code: impl Into<String>) -> Self {
        Self { message: message.into(), code: Some(code.into()) }
    }

    pub fn unauthenticated() -> Self {
        Self::with_code(MESSAGE_UNAUTHENTICATED, CODE_UNAUTHENTICATED)
    }
}

/// App → driver: `{"id", "result"}` or `{"id", "error"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: u64,
    pub outcome: Result<Value, ErrorBody>,
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(result) => map.serialize_entry("result", result)?,
            Err(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }
}

/// Why a frame is not a protocol message.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("neither an event nor a message with a numeric id")]
    Unrecognised,
    #[error("malformed {what}: {source}")]
    Field { what: &'static str, source: serde_json::Error },
}

/// Everything an app may send a driver.
#[derive(Debug, Clone, PartialEq)]
pub enum AppMessage {
    Hello(Hello),
    Navigation(Navigation),
    Response(Response),
    /// An event this version does not know: logged and ignored, since a newer
    /// agent may add events.
    OtherEvent(String),
}

impl AppMessage {
    /// Decodes one text frame from an app.
    pub fn parse(text: &str) -> Result<Self, WireError> {
        let Value::Object(mut object) = serde_json::from_str::<Value>(text)? else {
            return Err(WireError::NotAnObject);
        };
        if let Some(event) = object.get("event").and_then(Value::as_str) {
            return match event {
                "hello" => serde_json::from_value(Value::Object(object))
                    .map(AppMessage::Hello)
                    .map_err(|source| WireError::Field { what: "hello", source }),
                "navigation" => serde_json::from_value(Value::Object(object))
                    .map(AppMessage::Navigation)
                    .map_err(|source| WireError::Field { what: "navigation", source }),
                other => Ok(AppMessage::OtherEvent(other.to_owned())),
            };
        }
        let id = object.get("id").and_then(Value::as_u64).ok_or(WireError::Unrecognised)?;
        let outcome = match object.remove("error") {
            Some(error) => {
                Err(serde_json::from_value(error).map_err(|source| WireError::Field { what: "error", source })?)
            }
            None => Ok(object.remove("result").unwrap_or(Value::Null)),
        };
        Ok(AppMessage::Response(Response { id, outcome }))
    }
}

/// Everything a driver may send an app.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverMessage {
    Auth(Auth),
    Request(Request),
    OtherEvent(String),
}

impl DriverMessage {
    /// Decodes one text frame from a driver.
    pub fn parse(text: &str) -> Result<Self, WireError> {
        let value = serde_json::from_str::<Value>(text)?;
        let Value::Object(object) = &value else {
            return Err(WireError::NotAnObject);
        };
        if let Some(event) = object.get("event").and_then(Value::as_str) {
            return match event {
                "auth" => serde_json::from_value(value)
                    .map(DriverMessage::Auth)
                    .map_err(|source| WireError::Field { what: "auth", source }),
                other => Ok(DriverMessage::OtherEvent(other.to_owned())),
            };
        }
        serde_json::from_value(value)
            .map(DriverMessage::Request)
            .map_err(|source| WireError::Field { what: "request", source })
    }
}

/// `{"event":"auth",…}` as the driver sends it.
pub fn auth_frame(auth: &Auth) -> String {
    let mut object = Map::new();
    object.insert("event".into(), "auth".into());
    object.insert("session".into(), auth.session.clone().into());
    if let Some(token) = &auth.token {
        object.insert("token".into(), token.clone().into());
    }
    Value::Object(object).to_string()
}

/// `{"event":"hello",…}` as the app sends it.
pub fn hello_frame(hello: &Hello) -> String {
    event_frame("hello", hello)
}

/// `{"event":"navigation",…}` as the app sends it.
pub fn navigation_frame(navigation: &Navigation) -> String {
    event_frame("navigation", navigation)
}

fn event_frame(event: &str, body: &impl Serialize) -> String {
    let mut object = Map::new();
    object.insert("event".into(), event.into());
    if let Ok(Value::Object(fields)) = serde_json::to_value(body) {
        object.extend(fields);
    }
    Value::Object(object).to_string()
}

mod calls;
mod records;
mod screen;
mod targets;

pub use calls::*;
pub use records::*;
pub use screen::*;
pub use targets::*;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn auth_leaves_out_a_missing_token() {
        let auth = Auth { session: "k1x9".into(), token: None };
        assert_eq!(auth_frame(&auth), r#"{"event":"auth","session":"k1x9"}"#);
        let auth = Auth { session: "k1x9".into(), token: Some("secret".into()) };
        assert_eq!(auth_frame(&auth), r#"{"event":"auth","session":"k1x9","token":"secret"}"#);
    }

    #[test]
    fn hello_keeps_fields_a_newer_agent_adds() {
        let text = r#"{"event":"hello","protocolVersion":1,"agentVersion":"0.2.1","platform":"ios","native":true,"commands":["busy","events"],"route":"Settings.Main","app":{"name":"example"},"runtimeFlags":{"x":1}}"#;
        let AppMessage::Hello(hello) = AppMessage::parse(text).unwrap() else { panic!("not a hello") };
        assert_eq!(hello.platform, "ios");
        assert!(hello.native);
        assert_eq!(hello.app_name(), Some("example"));
        assert!(hello.has_command("busy"));
        assert_eq!(hello.extra.get("runtimeFlags"), Some(&json!({"x": 1})));
        assert_eq!(hello_frame(&hello), text);
    }

    #[test]
    fn responses_decode_result_null_and_errors() {
        let r = AppMessage::parse(r#"{"id":7,"result":null}"#).unwrap();
        assert_eq!(r, AppMessage::Response(Response { id: 7, outcome: Ok(Value::Null) }));
        let r =
            AppMessage::parse(r#"{"id":1,"error":{"message":"Not authenticated","code":"unauthenticated"}}"#).unwrap();
        assert_eq!(r, AppMessage::Response(Response { id: 1, outcome: Err(ErrorBody::unauthenticated()) }));
        let text =
            serde_json::to_string(&Response { id: 8, outcome: Err(ErrorBody::new("Unknown method nope")) }).unwrap();
        assert_eq!(text, r#"{"id":8,"error":{"message":"Unknown method nope"}}"#);
    }

    #[test]
    fn bad_frames_are_refused_with_a_reason() {
        assert!(matches!(AppMessage::parse("{nope"), Err(WireError::Json(_))));
        assert!(matches!(AppMessage::parse("[1,2]"), Err(WireError::NotAnObject)));
        assert!(matches!(AppMessage::parse(r#"{"id":"x"}"#), Err(WireError::Unrecognised)));
        assert!(matches!(AppMessage::parse(r#"{"event":"hello"}"#), Err(WireError::Field { what: "hello", .. })));
        assert!(matches!(AppMessage::parse(r#"{"id":1,"error":"boom"}"#), Err(WireError::Field { what: "error", .. })));
        assert_eq!(AppMessage::parse(r#"{"event":"future"}"#).unwrap(), AppMessage::OtherEvent("future".into()));
    }

    #[test]
    fn targets_in_all_four_forms() {
        let cases = [
            (json!({"testId": "next"}), Target::test_id("next")),
            (json!({"text": "Log in", "nth": 1}), Target::Text { text: "Log in".into(), nth: Some(1), within: None }),
            (json!({"i": 4}), Target::Index { i: 4 }),
            (json!({"x": 10.5, "y": 20}), Target::Point { x: 10.5, y: 20.0 }),
            (
                json!({"testId": "like", "within": {"text": "Ada"}}),
                Target::TestId { test_id: "like".into(), nth: None, within: Some(Scope::Text { text: "Ada".into() }) },
            ),
        ];
        for (json, target) in cases {
            assert_eq!(serde_json::from_value::<Target>(json.clone()).unwrap(), target);
            assert_eq!(serde_json::to_value(&target).unwrap(), json);
        }
        assert_eq!(Target::test_id("nope").describe(), r#"{"testId":"nope"}"#);
    }

    #[test]
    fn press_params_flatten_the_target() {
        let p: PressParams = serde_json::from_value(json!({"testId": "go", "holdMs": 600, "mode": "js"})).unwrap();
        assert_eq!(p.target, Target::test_id("go"));
        assert_eq!(p.hold_ms, Some(600));
        assert_eq!(p.mode, Some(PressMode::Js));
    }

    #[test]
    fn trace_events_of_every_kind_and_unknown_kinds() {
        let events = json!([
            {"seq": 1, "t": 5, "kind": "route", "route": "Home", "path": ["Home"]},
            {"seq": 2, "t": 6, "kind": "request", "method": "GET", "url": "/a", "status": 200, "ms": 3},
            {"seq": 3, "t": 7, "kind": "store", "store": "cart", "changed": {"n": {"from": 1, "to": 2}}},
            {"seq": 4, "t": 8, "kind": "event", "name": "Tap", "props": {"a": 1}, "route": "Home"},
            {"seq": 5, "t": 9, "kind": "command", "method": "press", "ms": 50},
            {"seq": 6, "t": 10, "kind": "touch", "x": 1, "y": 2, "testId": "go"},
            {"seq": 7, "t": 11, "kind": "stall", "renders": 100, "windowMs": 1000},
            {"seq": 8, "t": 12, "kind": "crash", "message": "boom"},
            {"seq": 9, "t": 13, "kind": "hologram", "depth": 3}
        ]);
        let decoded: Vec<TraceEvent> = serde_json::from_value(events.clone()).unwrap();
        assert_eq!(decoded.len(), 9);
        assert_eq!(decoded[8].kind, TraceKind::Other);
        // Every known kind survives a round trip unchanged.
        for (event, json) in decoded.iter().zip(events.as_array().unwrap()).take(8) {
            assert_eq!(&serde_json::to_value(event).unwrap(), json);
        }
    }

    #[test]
    fn elements_and_screens_ignore_unknown_fields() {
        let screen: Screen = serde_json::from_value(json!({
            "route": "Home", "path": ["Home"], "commit": 3, "busy": false,
            "window": {"w": 390, "h": 844}, "costMs": 1,
            "elements": [{"i": 0, "kind": "button", "frame": {"x": 0, "y": 0, "w": 10, "h": 10},
                          "enabled": true, "depth": 0, "testId": "go", "hidden": "behind-modal",
                          "glow": true}],
            "presenting": {"i": 0, "modal": true},
            "somethingNew": 1
        }))
        .unwrap();
        assert_eq!(screen.elements[0].hidden, Some(HiddenReason::BehindModal));
        assert_eq!(screen.presenting.unwrap().i, 0);
    }
}
