//! The app model: what a simulated app shows and how it reacts.
//!
//! A model is a YAML (or JSON) file:
//!
//! ```yaml
//! app: { name: Shop }            # hello.app
//! platform: ios                  # hello.platform
//! native: false                  # hello.native: presses are real touches
//! initialRoute: Home
//! routes:
//!   Home:
//!     elements:
//!       - { kind: button, testId: login, text: Log in, onPress: [{ navigate: Login }] }
//!       - { kind: text, text: Welcome, appearAfterMs: 300 }
//! ```
//!
//! Elements nest through `children`; tree order is file order. An element
//! without a `frame` is laid out in a column (see `layout`). Actions run in
//! order; a `wait` defers the rest without holding up the press that started
//! them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use argus_proto::wire::{ElementKind, Frame, Size};
use serde::Deserialize;
use serde_json::Value;

/// Bounds on a model, so that a runaway file is refused rather than simulated.
pub const MAX_MODEL_BYTES: usize = 4 << 20;
pub const MAX_ELEMENTS_PER_ROUTE: usize = 5_000;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: cannot read the app model: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: the app model is {size} bytes; the limit is {MAX_MODEL_BYTES}")]
    TooLarge { path: String, size: usize },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelFile {
    #[serde(default)]
    pub app: Option<Value>,
    #[serde(default = "default_platform")]
    pub platform: String,
    #[serde(default)]
    pub native: bool,
    #[serde(default = "default_agent_version")]
    pub agent_version: String,
    #[serde(default = "default_window")]
    pub window: Size,
    /// Without a navigation adapter, `navigate` and `back` fail and screens
    /// have no route.
    #[serde(default = "yes")]
    pub navigation: bool,
    /// Whether the agent tells the driver of each route change (a
    /// `navigation` event); `false` as some real agents do, which say the
    /// route only in their hello and screens.
    #[serde(default = "yes")]
    pub navigation_events: bool,
    pub initial_route: String,
    pub routes: BTreeMap<String, RouteSpec>,
    /// App commands beyond the built-in `events`, `stores`, `profile` (and
    /// `memory` when the model gives one).
    #[serde(default)]
    pub commands: BTreeMap<String, CommandSpec>,
    /// Store states the `stores` command answers.
    #[serde(default)]
    pub stores: BTreeMap<String, Value>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    /// The headless host's `memory` command, when given: what it answers,
    /// growing by `leakMbPerReset` at every reset (a leak a suite shows).
    #[serde(default)]
    pub memory: Option<MemorySpec>,
    /// What each React commit costs while `profile` records (0: a model has
    /// no render cost).
    #[serde(default)]
    pub render_ms: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySpec {
    #[serde(default = "default_heap_mb")]
    pub heap_mb: f64,
    #[serde(default = "default_rss_mb")]
    pub rss_mb: f64,
    #[serde(default)]
    pub leak_mb_per_reset: f64,
    #[serde(default)]
    pub listeners: u32,
}

fn default_heap_mb() -> f64 {
    40.0
}
fn default_rss_mb() -> f64 {
    160.0
}

fn default_platform() -> String {
    "ios".into()
}
fn default_agent_version() -> String {
    "0.2.1".into()
}
fn default_window() -> Size {
    Size { w: 390.0, h: 844.0 }
}
fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteSpec {
    /// Route names from the root navigator down; `[route]` when left out.
    #[serde(default)]
    pub path: Option<Vec<String>>,
    #[serde(default)]
    pub params: Option<Value>,
    #[serde(default)]
    pub elements: Vec<ElementSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElementSpec {
    #[serde(default = "default_kind")]
    pub kind: ElementKind,
    #[serde(default)]
    pub test_id: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub accessibility_label: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub placeholder: Option<String>,
    /// A secure entry: its value reads as bullets.
    #[serde(default)]
    pub secure: bool,
    #[serde(default)]
    pub frame: Option<Frame>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Mounted at first; `show`/`hide` actions change it.
    #[serde(default = "yes")]
    pub visible: bool,
    /// Hidden from assistive technology (`hidden: a11y`), with its subtree.
    #[serde(default)]
    pub a11y_hidden: bool,
    /// `pointerEvents: 'none'`: readable, not touchable (`hidden: inert`), with its subtree.
    #[serde(default)]
    pub inert: bool,
    /// A modal layer: everything outside it is `behind-modal`.
    #[serde(default)]
    pub modal: bool,
    /// A full-window layer: everything outside it is `behind-overlay`.
    #[serde(default)]
    pub overlay: bool,
    /// Takes touches, so it covers controls drawn before it (buttons,
    /// inputs and switches always do).
    #[serde(default)]
    pub blocking: bool,
    /// Reported as covered whatever the geometry says.
    #[serde(default)]
    pub covered: bool,
    /// Mounted only this long after the screen appeared.
    #[serde(default)]
    pub appear_after_ms: Option<u64>,
    /// Unmounted this long after the screen appeared.
    #[serde(default)]
    pub gone_after_ms: Option<u64>,
    /// For a scroll container: how tall its content is (default: what its
    /// children take).
    #[serde(default)]
    pub content_height: Option<f64>,
    #[serde(default)]
    pub on_press: Vec<Action>,
    /// After text is typed into this input.
    #[serde(default)]
    pub on_change: Vec<Action>,
    /// When the return key is pressed in this input.
    #[serde(default)]
    pub on_submit: Vec<Action>,
    #[serde(default)]
    pub children: Vec<ElementSpec>,
}

fn default_kind() -> ElementKind {
    ElementKind::View
}

/// What a press, a typed text, a link or a command does.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Action {
    /// Push a route (`Name` or `{name, params}`).
    Navigate(NavigateSpec),
    /// Pop the current route.
    Back(#[serde(default)] Option<Value>),
    /// Back to the initial route, as a fresh screen.
    ResetToRoot(#[serde(default)] Option<Value>),
    /// Mount an element of the current screen (by testId).
    Show(String),
    Hide(String),
    Enable(String),
    Disable(String),
    SetText {
        test_id: String,
        text: String,
    },
    SetValue {
        test_id: String,
        value: String,
    },
    /// An HTTP request: in flight for `ms`, then finished.
    Request(RequestSpec),
    /// An analytics event (`qa.event`).
    Event {
        name: String,
        #[serde(default)]
        props: Option<Value>,
    },
    /// A store observed with `qa.observe` changes.
    Store {
        name: String,
        set: serde_json::Map<String, Value>,
    },
    /// Defer the actions after it by this many milliseconds.
    Wait(u64),
    /// Something threw where nothing caught it.
    Crash(String),
    /// Run `then` when the condition holds, `else` otherwise.
    If(Box<Condition>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum NavigateSpec {
    Name(String),
    Full {
        name: String,
        #[serde(default)]
        params: Option<Value>,
    },
}

impl NavigateSpec {
    pub fn name(&self) -> &str {
        match self {
            NavigateSpec::Name(name) | NavigateSpec::Full { name, .. } => name,
        }
    }

    pub fn params(&self) -> Option<Value> {
        match self {
            NavigateSpec::Name(_) => None,
            NavigateSpec::Full { params, .. } => params.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestSpec {
    #[serde(default = "default_method")]
    pub method: String,
    pub url: String,
    #[serde(default = "default_status")]
    pub status: u16,
    #[serde(default = "default_request_ms")]
    pub ms: u64,
    /// A request that failed before it got an answer: status 0 and this error.
    #[serde(default)]
    pub error: Option<String>,
}

fn default_method() -> String {
    "GET".into()
}
fn default_status() -> u16 {
    200
}
fn default_request_ms() -> u64 {
    100
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// The element with this testId, on the current screen…
    pub test_id: String,
    /// …has this value (inputs) or text (others);
    #[serde(default)]
    pub equals: Option<String>,
    /// …is mounted (true) or not (false).
    #[serde(default)]
    pub shown: Option<bool>,
    #[serde(default)]
    pub then: Vec<Action>,
    #[serde(default, rename = "else")]
    pub otherwise: Vec<Action>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandSpec {
    #[serde(default)]
    pub result: Option<Value>,
    /// Fail with this message. As the agent answers a handler that throws:
    /// `{message}` alone, no `code`.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub delay_ms: Option<u64>,
    #[serde(default)]
    pub actions: Vec<Action>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    /// A URL that starts with this opens `navigate`.
    pub prefix: String,
    pub navigate: NavigateSpec,
}

// ---------------------------------------------------------------- compiled

/// One element of a route, flattened in tree order.
#[derive(Debug, Clone)]
pub struct Node {
    pub spec: ElementSpec,
    /// Index of the parent node in the route's arena.
    pub parent: Option<usize>,
    pub depth: u32,
    /// One past the last node of its subtree.
    pub subtree_end: usize,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub path: Vec<String>,
    pub params: Option<Value>,
    pub nodes: Vec<Node>,
    pub by_test_id: HashMap<String, Vec<usize>>,
}

/// A checked model, ready to simulate.
#[derive(Debug, Clone)]
pub struct Model {
    pub file: ModelFile,
    pub routes: HashMap<String, Route>,
}

impl Model {
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ModelError::Read { path: shown.clone(), source })?;
        if bytes.len() > MAX_MODEL_BYTES {
            return Err(ModelError::TooLarge { path: shown, size: bytes.len() });
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| ModelError::Parse { path: shown.clone(), message: format!("not UTF-8: {e}") })?;
        Self::parse(&text, &shown)
    }

    /// Parses and checks a model; `path` only names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, ModelError> {
        // Actions are written `{navigate: Home}` rather than as YAML tags.
        let file: ModelFile =
            serde_norway::with::singleton_map_recursive::deserialize(serde_norway::Deserializer::from_str(text))
                .map_err(|e| ModelError::Parse { path: path.into(), message: e.to_string() })?;
        Self::from_file(file, path)
    }

    pub fn from_file(file: ModelFile, path: &str) -> Result<Self, ModelError> {
        let invalid = |message: String| ModelError::Invalid { path: path.into(), message };
        if !file.routes.contains_key(&file.initial_route) {
            return Err(invalid(format!(
                "initialRoute {:?} is not among the routes ({})",
                file.initial_route,
                file.routes.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let mut routes = HashMap::new();
        for (name, spec) in &file.routes {
            let mut nodes = Vec::new();
            flatten(&spec.elements, None, 0, &mut nodes);
            if nodes.len() > MAX_ELEMENTS_PER_ROUTE {
                return Err(invalid(format!(
                    "route {name} has {} elements; the limit is {MAX_ELEMENTS_PER_ROUTE}",
                    nodes.len()
                )));
            }
            let mut by_test_id: HashMap<String, Vec<usize>> = HashMap::new();
            for (index, node) in nodes.iter().enumerate() {
                if let Some(id) = &node.spec.test_id {
                    by_test_id.entry(id.clone()).or_default().push(index);
                }
            }
            routes.insert(
                name.clone(),
                Route {
                    name: name.clone(),
                    path: spec.path.clone().unwrap_or_else(|| vec![name.clone()]),
                    params: spec.params.clone(),
                    nodes,
                    by_test_id,
                },
            );
        }
        // Every route an action names must exist, or the app would crash mid-run.
        let mut problems = Vec::new();
        for route in routes.values() {
            for node in &route.nodes {
                for actions in [&node.spec.on_press, &node.spec.on_change, &node.spec.on_submit] {
                    check_actions(actions, &routes, &format!("route {}", route.name), &mut problems);
                }
            }
        }
        for (name, command) in &file.commands {
            check_actions(&command.actions, &routes, &format!("command {name}"), &mut problems);
        }
        for link in &file.links {
            if !routes.contains_key(link.navigate.name()) {
                problems.push(format!("link {:?} navigates to unknown route {:?}", link.prefix, link.navigate.name()));
            }
        }
        if let Some(problem) = problems.into_iter().next() {
            return Err(invalid(problem));
        }
        Ok(Self { file, routes })
    }

    pub fn route(&self, name: &str) -> Option<&Route> {
        self.routes.get(name)
    }

    /// The commands `hello` and `ping` list: the built-in ones and the
    /// model's, sorted.
    pub fn commands(&self) -> Vec<String> {
        let mut commands: Vec<String> =
            ["events", "profile", "screenshot", "stores"].iter().map(|s| s.to_string()).collect();
        if self.file.memory.is_some() {
            commands.push("memory".into());
        }
        commands.extend(self.file.commands.keys().cloned());
        commands.sort();
        commands.dedup();
        commands
    }
}

fn flatten(specs: &[ElementSpec], parent: Option<usize>, depth: u32, nodes: &mut Vec<Node>) {
    for spec in specs {
        let index = nodes.len();
        let mut own = spec.clone();
        own.children = Vec::new();
        nodes.push(Node { spec: own, parent, depth, subtree_end: index + 1 });
        flatten(&spec.children, Some(index), depth + 1, nodes);
        nodes[index].subtree_end = nodes.len();
    }
}

fn check_actions(actions: &[Action], routes: &HashMap<String, Route>, place: &str, problems: &mut Vec<String>) {
    for action in actions {
        match action {
            Action::Navigate(to) if !routes.contains_key(to.name()) => {
                problems.push(format!("{place}: navigate to unknown route {:?}", to.name()));
            }
            Action::If(condition) => {
                check_actions(&condition.then, routes, place, problems);
                check_actions(&condition.otherwise, routes, place, problems);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = r#"
app: { name: Shop }
initialRoute: Home
routes:
  Home:
    elements:
      - kind: view
        testId: row
        children:
          - { kind: text, text: Ada }
          - { kind: button, testId: like, onPress: [{ event: { name: Like } }, { wait: 100 }, { navigate: Detail }] }
  Detail:
    path: [Main, Detail]
"#;

    #[test]
    fn a_model_flattens_in_tree_order() {
        let model = Model::parse(MODEL, "shop.yaml").unwrap();
        let home = model.route("Home").unwrap();
        assert_eq!(home.nodes.len(), 3);
        assert_eq!(home.nodes[0].subtree_end, 3);
        assert_eq!(home.nodes[2].parent, Some(0));
        assert_eq!(home.nodes[2].depth, 1);
        assert_eq!(home.by_test_id["like"], vec![2]);
        assert_eq!(model.route("Detail").unwrap().path, vec!["Main", "Detail"]);
        assert_eq!(model.commands(), vec!["events", "profile", "screenshot", "stores"]);
    }

    #[test]
    fn bad_models_are_refused_with_the_reason() {
        let err = Model::parse("initialRoute: Nowhere\nroutes: { Home: {} }\n", "m.yaml").unwrap_err();
        assert!(err.to_string().contains("initialRoute \"Nowhere\" is not among the routes (Home)"), "{err}");
        let err = Model::parse(
            "initialRoute: Home\nroutes: { Home: { elements: [{ kind: button, onPress: [{ navigate: Gone }] }] } }\n",
            "m.yaml",
        )
        .unwrap_err();
        assert!(err.to_string().contains("navigate to unknown route \"Gone\""), "{err}");
        let err = Model::parse("initialRoute: Home\nroutes: { Home: { elements: [{ kind: lever }] } }\n", "m.yaml")
            .unwrap_err();
        assert!(err.to_string().starts_with("m.yaml: "), "{err}");
        assert!(err.to_string().contains("lever"), "{err}");
    }
}
