//! What the app records: requests and the trace ring.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    pub id: u64,
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One entry of the app's trace ring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub seq: u64,
    pub t: u64,
    #[serde(flatten)]
    pub kind: TraceKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreChange {
    pub from: Value,
    pub to: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TraceKind {
    Route {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
        #[serde(default)]
        path: Vec<String>,
    },
    Request {
        method: String,
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Store {
        store: String,
        changed: Map<String, Value>,
    },
    Event {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        props: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
    },
    Command {
        method: String,
        ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Touch {
        #[serde(serialize_with = "crate::number::js")]
        x: f64,
        #[serde(serialize_with = "crate::number::js")]
        y: f64,
        #[serde(default, rename = "testId", skip_serializing_if = "Option::is_none")]
        test_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
    },
    Stall {
        renders: u64,
        #[serde(rename = "windowMs")]
        window_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        component: Option<String>,
    },
    Crash {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
    },
    /// A kind a newer agent added.
    #[serde(other)]
    Other,
}
