//! Targets: what names one element on the wire.

use serde::{Deserialize, Serialize};

/// Narrows a [`Target`] to the neighbourhood of another element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scope {
    TestId {
        #[serde(rename = "testId")]
        test_id: String,
    },
    Text {
        text: String,
    },
}

/// Names one element (or a point). On the wire it is always one of these
/// four objects; the CLI's spellings (`#id`, `12`, `"text"`) are the case
/// format's business.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Target {
    TestId {
        #[serde(rename = "testId")]
        test_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nth: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within: Option<Scope>,
    },
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nth: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within: Option<Scope>,
    },
    Index {
        i: usize,
    },
    Point {
        #[serde(serialize_with = "crate::number::js")]
        x: f64,
        #[serde(serialize_with = "crate::number::js")]
        y: f64,
    },
}

impl Target {
    pub fn test_id(id: impl Into<String>) -> Self {
        Target::TestId { test_id: id.into(), nth: None, within: None }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Target::Text { text: text.into(), nth: None, within: None }
    }

    /// The JSON the agent puts in its error messages.
    pub fn describe(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl From<Scope> for Target {
    fn from(scope: Scope) -> Self {
        match scope {
            Scope::TestId { test_id } => Target::test_id(test_id),
            Scope::Text { text } => Target::text(text),
        }
    }
}
