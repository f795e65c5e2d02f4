//! The screen as the app reports it: its elements and the layer on top.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementKind {
    Button,
    Input,
    Text,
    Scroll,
    Switch,
    Image,
    View,
}

impl ElementKind {
    /// Buttons and inputs: matched by substring, checked for cover.
    pub fn is_control(self) -> bool {
        matches!(self, ElementKind::Button | ElementKind::Input)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ElementKind::Button => "button",
            ElementKind::Input => "input",
            ElementKind::Text => "text",
            ElementKind::Scroll => "scroll",
            ElementKind::Switch => "switch",
            ElementKind::Image => "image",
            ElementKind::View => "view",
        }
    }
}

/// Why an element is mounted but not presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HiddenReason {
    A11y,
    Inert,
    BehindModal,
    BehindOverlay,
}

impl HiddenReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HiddenReason::A11y => "a11y",
            HiddenReason::Inert => "inert",
            HiddenReason::BehindModal => "behind-modal",
            HiddenReason::BehindOverlay => "behind-overlay",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Frame {
    #[serde(serialize_with = "crate::number::js")]
    pub x: f64,
    #[serde(serialize_with = "crate::number::js")]
    pub y: f64,
    #[serde(serialize_with = "crate::number::js")]
    pub w: f64,
    #[serde(serialize_with = "crate::number::js")]
    pub h: f64,
}

impl Frame {
    pub fn centre(&self) -> Point {
        Point { x: self.x + self.w / 2.0, y: self.y + self.h / 2.0 }
    }

    pub fn contains(&self, p: Point) -> bool {
        p.x >= self.x && p.x <= self.x + self.w && p.y >= self.y && p.y <= self.y + self.h
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Point {
    #[serde(serialize_with = "crate::number::js")]
    pub x: f64,
    #[serde(serialize_with = "crate::number::js")]
    pub y: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Size {
    #[serde(serialize_with = "crate::number::js")]
    pub w: f64,
    #[serde(serialize_with = "crate::number::js")]
    pub h: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Element {
    pub i: usize,
    pub kind: ElementKind,
    pub frame: Frame,
    pub enabled: bool,
    pub depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessibility_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<HiddenReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offscreen: Option<bool>,
}

impl Element {
    pub fn is_covered(&self) -> bool {
        self.covered == Some(true)
    }

    pub fn is_offscreen(&self) -> bool {
        self.offscreen == Some(true)
    }

    pub fn is_focused(&self) -> bool {
        self.focused == Some(true)
    }
}

/// The layer on top, when the app presents one over its screen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presenting {
    pub i: usize,
    pub modal: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Screen {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default)]
    pub path: Vec<String>,
    #[serde(default)]
    pub elements: Vec<Element>,
    #[serde(default)]
    pub commit: u64,
    #[serde(default)]
    pub busy: bool,
    #[serde(default)]
    pub window: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presenting: Option<Presenting>,
    /// Whole milliseconds the snapshot took (the agent's `Date.now()`
    /// difference); a fraction from another app is rounded on reading.
    #[serde(default, deserialize_with = "whole_ms")]
    pub cost_ms: u64,
}

fn whole_ms<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let ms = f64::deserialize(deserializer)?;
    Ok(if ms.is_finite() && ms > 0.0 { ms.round() as u64 } else { 0 })
}
