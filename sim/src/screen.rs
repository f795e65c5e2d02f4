//! From a route's model and its live state to the elements the agent would
//! list: mounting, layout, scrolling, hidden reasons, layers and cover.
//! Pure: the caller says what time it is.

use std::collections::HashMap;

use argus_proto::wire::{Element, ElementKind, Frame, HiddenReason, Presenting, Size};
use serde_json::Value;
use tokio::time::Instant;

use crate::model::Route;

/// Where the first auto-laid element starts, under a status bar.
const TOP: f64 = 60.0;
const GAP: f64 = 8.0;
const MARGIN: f64 = 16.0;

/// The live state of one screen on the navigation stack.
#[derive(Debug, Clone)]
pub struct ScreenState {
    pub route: String,
    pub params: Option<Value>,
    pub entered: Instant,
    /// Nodes shown or hidden by actions, overriding `visible`.
    pub mounted: HashMap<usize, bool>,
    pub enabled: HashMap<usize, bool>,
    pub text: HashMap<usize, String>,
    pub value: HashMap<usize, String>,
    /// Scroll offset of scroll containers, by node.
    pub scroll: HashMap<usize, f64>,
    /// The input with focus, by node.
    pub focused: Option<usize>,
}

impl ScreenState {
    pub fn new(route: &Route, params: Option<Value>, now: Instant) -> Self {
        Self {
            route: route.name.clone(),
            params: params.or_else(|| route.params.clone()),
            entered: now,
            mounted: HashMap::new(),
            enabled: HashMap::new(),
            text: HashMap::new(),
            value: HashMap::new(),
            scroll: HashMap::new(),
            focused: None,
        }
    }

    /// The text an input holds or another element shows, as the app has it
    /// (unmasked).
    pub fn current_value(&self, route: &Route, node: usize) -> Option<String> {
        let spec = &route.nodes[node].spec;
        if spec.kind == ElementKind::Input {
            self.value.get(&node).cloned().or_else(|| spec.value.clone())
        } else {
            self.text.get(&node).cloned().or_else(|| spec.text.clone())
        }
    }
}

/// What a snapshot found.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub elements: Vec<Element>,
    /// The model node behind each element, by element index.
    pub nodes: Vec<usize>,
    pub presenting: Option<Presenting>,
    /// Content height of each listed scroll container, by node.
    pub content: HashMap<usize, f64>,
}

impl Snapshot {
    pub fn element_of(&self, node: usize) -> Option<&Element> {
        self.nodes.iter().position(|n| *n == node).map(|i| &self.elements[i])
    }
}

/// Whether `node` is mounted `elapsed_ms` after its screen appeared,
/// ignoring its ancestors.
pub fn mounted_alone(route: &Route, state: &ScreenState, node: usize, elapsed_ms: u64) -> bool {
    let spec = &route.nodes[node].spec;
    let shown = state.mounted.get(&node).copied().unwrap_or(spec.visible);
    shown && spec.appear_after_ms.is_none_or(|t| elapsed_ms >= t) && spec.gone_after_ms.is_none_or(|t| elapsed_ms < t)
}

pub fn snapshot(route: &Route, state: &ScreenState, now: Instant, window: Size) -> Snapshot {
    let elapsed_ms = now.saturating_duration_since(state.entered).as_millis() as u64;
    let nodes = &route.nodes;
    let mut element_of_node: Vec<Option<usize>> = vec![None; nodes.len()];
    // Per node: the vertical shift its scroll ancestors apply, and the
    // frame of the nearest scroll ancestor (for clipping).
    let mut shift = vec![0.0f64; nodes.len()];
    let mut clip: Vec<Option<Frame>> = vec![None; nodes.len()];
    let mut inherited: Vec<Option<HiddenReason>> = vec![None; nodes.len()];
    let mut unshifted: Vec<Frame> = vec![Frame::default(); nodes.len()];
    let mut out = Snapshot::default();
    let mut cursor = TOP;
    let mut layer: Option<usize> = None;

    for (index, node) in nodes.iter().enumerate() {
        let parent_listed = node.parent.map(|p| element_of_node[p]);
        if parent_listed == Some(None) || !mounted_alone(route, state, index, elapsed_ms) {
            continue;
        }
        let spec = &node.spec;
        let parent = node.parent;
        let parent_kind = parent.map(|p| nodes[p].spec.kind);

        // Layout, in content coordinates.
        let frame = if let Some(frame) = spec.frame {
            frame
        } else if let (Some(p), Some(ElementKind::Button | ElementKind::Input)) = (parent, parent_kind) {
            unshifted[p]
        } else {
            let h = match spec.kind {
                ElementKind::Text => 24.0,
                ElementKind::Scroll => (window.h - cursor).max(44.0),
                _ => 44.0,
            };
            let frame = Frame { x: MARGIN, y: cursor, w: window.w - 2.0 * MARGIN, h };
            if spec.kind != ElementKind::Scroll {
                cursor += h + GAP;
            }
            frame
        };
        unshifted[index] = frame;
        if spec.kind == ElementKind::Scroll {
            // Its content stacks from its own top.
            cursor = frame.y + GAP;
        }
        if let Some(p) = parent {
            let p_spec = &nodes[p].spec;
            let own_scroll =
                if p_spec.kind == ElementKind::Scroll { state.scroll.get(&p).copied().unwrap_or(0.0) } else { 0.0 };
            shift[index] = shift[p] + own_scroll;
            clip[index] = if p_spec.kind == ElementKind::Scroll {
                out.elements.get(element_of_node[p].unwrap_or(usize::MAX)).map(|e| e.frame)
            } else {
                clip[p]
            };
        }
        let frame = Frame { y: frame.y - shift[index], ..frame };

        let hidden = parent.and_then(|p| inherited[p]).or(if spec.a11y_hidden {
            Some(HiddenReason::A11y)
        } else if spec.inert {
            Some(HiddenReason::Inert)
        } else {
            None
        });
        inherited[index] = hidden;
        if spec.modal || spec.overlay {
            layer = Some(index);
        }

        let offscreen = !intersects(&frame, &Frame { x: 0.0, y: 0.0, w: window.w, h: window.h })
            || clip[index].is_some_and(|c| !intersects(&frame, &c));
        let i = out.elements.len();
        element_of_node[index] = Some(i);
        let (text, value, placeholder, focused) = if spec.kind == ElementKind::Input {
            let value = state.current_value(route, index).filter(|v| !v.is_empty());
            let value = if spec.secure { value.map(|v| "•".repeat(v.chars().count())) } else { value };
            let focused = (state.focused == Some(index)).then_some(true);
            (spec.text.clone(), value, spec.placeholder.clone(), focused)
        } else {
            (state.current_value(route, index), None, None, None)
        };
        out.elements.push(Element {
            i,
            kind: spec.kind,
            frame,
            enabled: state.enabled.get(&index).copied().unwrap_or(spec.enabled),
            depth: node.depth,
            test_id: spec.test_id.clone(),
            text,
            accessibility_label: spec.accessibility_label.clone(),
            value,
            placeholder,
            focused,
            parent: parent.and_then(|p| element_of_node[p]),
            tag: Some(100 + index as u64),
            covered: None,
            hidden,
            offscreen: offscreen.then_some(true),
        });
        out.nodes.push(index);
    }

    measure_scrolls(&mut out, route, &unshifted, &element_of_node);
    if let Some(layer_node) = layer.filter(|n| element_of_node[*n].is_some()) {
        present_layer(&mut out, route, layer_node, &element_of_node);
    }
    mark_covered(&mut out, route);
    out
}

/// Each scroll's content height, for clamping swipes: what its mounted
/// content spans, unless the model says.
fn measure_scrolls(out: &mut Snapshot, route: &Route, unshifted: &[Frame], element_of_node: &[Option<usize>]) {
    let nodes = &route.nodes;
    for &index in &out.nodes {
        let spec = &nodes[index].spec;
        if spec.kind != ElementKind::Scroll {
            continue;
        }
        let top = unshifted[index].y;
        let bottom = (index + 1..nodes[index].subtree_end)
            .filter(|n| element_of_node[*n].is_some())
            .map(|n| unshifted[n].y + unshifted[n].h)
            .fold(top, f64::max);
        out.content.insert(index, spec.content_height.unwrap_or(bottom - top + GAP));
    }
}

/// The last layer mounted presents; what lies outside it is behind it.
fn present_layer(out: &mut Snapshot, route: &Route, layer_node: usize, element_of_node: &[Option<usize>]) {
    let nodes = &route.nodes;
    let spec = &nodes[layer_node].spec;
    let reason = if spec.modal { HiddenReason::BehindModal } else { HiddenReason::BehindOverlay };
    let range = layer_node..nodes[layer_node].subtree_end;
    for (element, node) in out.elements.iter_mut().zip(&out.nodes) {
        if !range.contains(node) && element.hidden.is_none() {
            element.hidden = Some(reason);
        }
    }
    out.presenting = Some(Presenting {
        i: element_of_node[layer_node].unwrap_or_default(),
        modal: spec.modal,
        test_id: spec.test_id.clone(),
    });
}

/// A control is covered when a later element that takes touches, and is not
/// inside it, stands over its centre.
fn mark_covered(out: &mut Snapshot, route: &Route) {
    let covered: Vec<bool> = out
        .elements
        .iter()
        .zip(&out.nodes)
        .map(|(element, &node)| {
            if !element.kind.is_control() || element.hidden.is_some() {
                return false;
            }
            if route.nodes[node].spec.covered {
                return true;
            }
            let centre = element.frame.centre();
            let subtree = node..route.nodes[node].subtree_end;
            out.elements.iter().zip(&out.nodes).skip(element.i + 1).any(|(other, other_node)| {
                let spec = &route.nodes[*other_node].spec;
                let takes_touches = spec.blocking
                    || matches!(other.kind, ElementKind::Button | ElementKind::Input | ElementKind::Switch);
                other.hidden.is_none()
                    && !other.is_offscreen()
                    && takes_touches
                    && !subtree.contains(other_node)
                    && other.frame.contains(centre)
            })
        })
        .collect();
    for (element, covered) in out.elements.iter_mut().zip(covered) {
        if covered {
            element.covered = Some(true);
        }
    }
}

fn intersects(a: &Frame, b: &Frame) -> bool {
    a.w > 0.0 && a.h > 0.0 && a.x < b.x + b.w && a.y < b.y + b.h && a.x + a.w > b.x && a.y + a.h > b.y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    fn shot(model: &str, setup: impl FnOnce(&mut ScreenState)) -> Snapshot {
        let model = Model::parse(model, "test.yaml").unwrap();
        let route = model.route(&model.file.initial_route).unwrap();
        let now = Instant::now();
        let mut state = ScreenState::new(route, None, now);
        setup(&mut state);
        snapshot(route, &state, now, model.file.window)
    }

    #[test]
    fn auto_layout_stacks_and_labels_share_their_button() {
        let s = shot(
            "initialRoute: A\nroutes: { A: { elements: [ {kind: text, text: Hi}, {kind: button, testId: go, children: [{kind: text, text: Go, inert: true}]} ] } }",
            |_| {},
        );
        assert_eq!(s.elements.len(), 3);
        assert_eq!(s.elements[0].frame.y, TOP);
        assert_eq!(s.elements[1].frame.y, TOP + 24.0 + GAP);
        assert_eq!(s.elements[2].frame, s.elements[1].frame);
        assert_eq!(s.elements[2].parent, Some(1));
        assert_eq!(s.elements[2].hidden, Some(HiddenReason::Inert));
        assert_eq!(s.elements[1].covered, None, "its own label does not cover a button");
    }

    #[test]
    fn a_modal_hides_what_lies_outside_it() {
        let s = shot(
            "initialRoute: A\nroutes: { A: { elements: [ {kind: button, testId: under}, {kind: view, testId: sheet, modal: true, children: [{kind: button, testId: ok}]} ] } }",
            |_| {},
        );
        assert_eq!(s.elements[0].hidden, Some(HiddenReason::BehindModal));
        assert_eq!(s.elements[2].hidden, None);
        assert_eq!(s.presenting, Some(Presenting { i: 1, modal: true, test_id: Some("sheet".into()) }));
    }

    #[test]
    fn a_blocking_view_covers_a_control_under_it() {
        let s = shot(
            "initialRoute: A\nroutes: { A: { elements: [ {kind: button, testId: pay, frame: {x: 0, y: 100, w: 100, h: 40}}, {kind: view, blocking: true, frame: {x: 0, y: 90, w: 390, h: 60}} ] } }",
            |_| {},
        );
        assert_eq!(s.elements[0].covered, Some(true));
    }

    #[test]
    fn secure_values_are_masked_and_focus_shows() {
        let s =
            shot("initialRoute: A\nroutes: { A: { elements: [ {kind: input, testId: pw, secure: true} ] } }", |st| {
                st.value.insert(0, "hunter2".into());
                st.focused = Some(0);
            });
        assert_eq!(s.elements[0].value.as_deref(), Some("•••••••"));
        assert_eq!(s.elements[0].focused, Some(true));
    }

    #[test]
    fn scrolling_moves_children_and_marks_offscreen() {
        let model = "initialRoute: A\nroutes: { A: { elements: [ {kind: scroll, testId: list, frame: {x: 0, y: 0, w: 390, h: 844}, children: [ {kind: button, testId: top, frame: {x: 0, y: 10, w: 100, h: 40}}, {kind: button, testId: far, frame: {x: 0, y: 2000, w: 100, h: 40}} ]} ] } }";
        let s = shot(model, |_| {});
        assert_eq!(s.elements[2].offscreen, Some(true));
        assert_eq!(s.content[&0], 2048.0);
        let s = shot(model, |st| {
            st.scroll.insert(0, 1500.0);
        });
        assert_eq!(s.elements[2].frame.y, 500.0);
        assert_eq!(s.elements[2].offscreen, None);
        assert_eq!(s.elements[1].offscreen, Some(true));
    }

    #[test]
    fn elements_appear_and_go_with_time() {
        let model = Model::parse(
            "initialRoute: A\nroutes: { A: { elements: [ {kind: text, text: Soon, appearAfterMs: 300}, {kind: text, text: Toast, goneAfterMs: 300} ] } }",
            "t.yaml",
        )
        .unwrap();
        let route = model.route("A").unwrap();
        let t0 = Instant::now();
        let state = ScreenState::new(route, None, t0);
        let texts = |at| {
            snapshot(route, &state, at, model.file.window)
                .elements
                .iter()
                .filter_map(|e| e.text.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(t0), vec!["Toast"]);
        assert_eq!(texts(t0 + std::time::Duration::from_millis(300)), vec!["Soon"]);
    }
}
