//! Target matching, as the agent does it (seed "Targets"): pure functions of
//! a screen's elements.
//!
//! - `{testId}` and `{i}` match exactly.
//! - `{text}` matches a control (button, input) by exact label first, then by
//!   substring; any other element only by its exact text. Case and
//!   surrounding spaces are ignored; text and accessibility label both count.
//! - Hidden elements never match, except inert ones (a label inside a
//!   pressable is still readable).
//! - Reachable beats covered, presented beats inert, a better score beats a
//!   worse one, and ties go to the later element, which draws on top.
//! - `nth` counts among all matches in tree order.
//! - `within` looks in the scope element, then each container up from it;
//!   in the first that has matches, the one nearest the scope in tree order wins.

use argus_proto::wire::{Element, HiddenReason, Scope, Target};

/// How well `element` answers `target`: 0 for not at all.
fn score(element: &Element, target: &Target) -> u32 {
    match target {
        Target::TestId { test_id, .. } => u32::from(element.test_id.as_deref() == Some(test_id.as_str())) * 4,
        Target::Index { i } => u32::from(element.i == *i) * 4,
        Target::Text { text, .. } => {
            let needle = text.trim().to_lowercase();
            let labels = [element.text.as_deref(), element.accessibility_label.as_deref()];
            let mut labels = labels.into_iter().flatten().map(|l| l.trim().to_lowercase());
            let control = element.kind.is_control();
            let labels: Vec<String> = labels.by_ref().collect();
            if labels.contains(&needle) {
                if control { 4 } else { 3 }
            } else if control && labels.iter().any(|l| l.contains(&needle)) {
                2
            } else {
                0
            }
        }
        Target::Point { .. } => 0,
    }
}

fn matchable(element: &Element) -> bool {
    matches!(element.hidden, None | Some(HiddenReason::Inert))
}

/// What the target would name if hidden elements counted: used to say why
/// nothing matched ("… is not presented (behind-modal)") rather than that
/// nothing exists.
pub fn pick_hidden<'a>(elements: &'a [Element], target: &Target) -> Option<&'a Element> {
    let hidden: Vec<Element> =
        elements.iter().map(|e| Element { hidden: e.hidden.map(|_| HiddenReason::Inert), ..e.clone() }).collect();
    pick(&hidden, target).map(|e| &elements[e.i])
}

fn is_inside(elements: &[Element], element: &Element, ancestor: usize) -> bool {
    let mut parent = element.parent;
    while let Some(p) = parent {
        if p == ancestor {
            return true;
        }
        parent = elements.get(p).and_then(|e| e.parent);
    }
    false
}

/// The best element for `target`, or `None`. A point names no element.
pub fn pick<'a>(elements: &'a [Element], target: &Target) -> Option<&'a Element> {
    let (nth, within) = match target {
        Target::TestId { nth, within, .. } | Target::Text { nth, within, .. } => (*nth, within.as_ref()),
        Target::Index { .. } => (None, None),
        Target::Point { .. } => return None,
    };
    if let Some(scope) = within {
        return pick_within(elements, target, nth, scope);
    }
    if let Some(nth) = nth {
        return elements.iter().filter(|e| matchable(e) && score(e, target) > 0).nth(nth);
    }
    let mut best: Option<(&Element, u32)> = None;
    for element in elements.iter().filter(|e| matchable(e)) {
        let s = score(element, target);
        if s == 0 {
            continue;
        }
        let rank = s + if element.is_covered() { 0 } else { 10 } + if element.hidden.is_some() { 0 } else { 20 };
        if best.is_none_or(|(_, r)| rank >= r) {
            best = Some((element, rank));
        }
    }
    best.map(|(e, _)| e)
}

fn pick_within<'a>(elements: &'a [Element], target: &Target, nth: Option<usize>, scope: &Scope) -> Option<&'a Element> {
    let scope = pick(elements, &Target::from(scope.clone()))?;
    let matches: Vec<&Element> = elements.iter().filter(|e| matchable(e) && score(e, target) > 0).collect();
    let mut container = Some(scope);
    loop {
        let here: Vec<&Element> = match container {
            Some(c) => matches.iter().copied().filter(|e| e.i == c.i || is_inside(elements, e, c.i)).collect(),
            None => matches.clone(),
        };
        if !here.is_empty() {
            if let Some(nth) = nth {
                return here.get(nth).copied();
            }
            // Nearest to the scope in tree order; the later one on a tie.
            return here.into_iter().reduce(|best, e| {
                let (d, b) = (e.i.abs_diff(scope.i), best.i.abs_diff(scope.i));
                if d < b || (d == b && e.i > best.i) { e } else { best }
            });
        }
        let level = container?;
        container = level.parent.and_then(|p| elements.get(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argus_proto::wire::{ElementKind, Frame};

    fn el(i: usize, kind: ElementKind, text: Option<&str>, test_id: Option<&str>, parent: Option<usize>) -> Element {
        Element {
            i,
            kind,
            frame: Frame { x: 0.0, y: i as f64 * 50.0, w: 100.0, h: 40.0 },
            enabled: true,
            depth: 0,
            test_id: test_id.map(str::to_owned),
            text: text.map(str::to_owned),
            accessibility_label: None,
            value: None,
            placeholder: None,
            focused: None,
            parent,
            tag: None,
            covered: None,
            hidden: None,
            offscreen: None,
        }
    }

    use ElementKind::{Button, Text, View};

    #[test]
    fn controls_match_by_substring_paragraphs_only_exactly() {
        let screen = vec![
            el(0, Text, Some("Log in to continue shopping"), None, None),
            el(1, Button, Some("Log in with email"), Some("email"), None),
        ];
        assert_eq!(pick(&screen, &Target::text("log in")).map(|e| e.i), Some(1));
        assert_eq!(pick(&screen, &Target::text("  LOG IN TO CONTINUE SHOPPING ")).map(|e| e.i), Some(0));
        assert_eq!(pick(&screen, &Target::text("continue")), None);
    }

    #[test]
    fn an_exact_control_beats_an_exact_paragraph_and_later_wins_ties() {
        let screen = vec![
            el(0, Button, Some("Next"), Some("a"), None),
            el(1, Text, Some("Next"), None, None),
            el(2, Button, Some("Next"), Some("b"), None),
        ];
        assert_eq!(pick(&screen, &Target::text("next")).map(|e| e.i), Some(2));
        let mut only_text_exact =
            vec![el(0, Button, Some("Next step"), None, None), el(1, Text, Some("Next"), None, None)];
        assert_eq!(pick(&only_text_exact, &Target::text("next")).map(|e| e.i), Some(1));
        only_text_exact[1].accessibility_label = Some("Continue".into());
        only_text_exact[1].text = None;
        assert_eq!(pick(&only_text_exact, &Target::text("continue")).map(|e| e.i), Some(1));
    }

    #[test]
    fn reachable_beats_covered_and_presented_beats_inert() {
        let mut screen = vec![el(0, Button, Some("Pay"), None, None), el(1, Button, Some("Pay"), None, None)];
        screen[1].covered = Some(true);
        assert_eq!(pick(&screen, &Target::text("pay")).map(|e| e.i), Some(0));
        screen[0].hidden = Some(HiddenReason::Inert);
        assert_eq!(pick(&screen, &Target::text("pay")).map(|e| e.i), Some(1));
        screen[1].hidden = Some(HiddenReason::BehindModal);
        assert_eq!(pick(&screen, &Target::text("pay")).map(|e| e.i), Some(0), "inert still matches");
        screen[0].hidden = Some(HiddenReason::A11y);
        assert_eq!(pick(&screen, &Target::text("pay")), None, "hidden never matches");
    }

    #[test]
    fn nth_counts_matches_in_tree_order() {
        let screen = vec![
            el(0, Button, Some("Like"), Some("like"), None),
            el(1, Button, Some("Like"), Some("like"), None),
            el(2, Button, Some("Like"), Some("like"), None),
        ];
        let nth = |n| Target::TestId { test_id: "like".into(), nth: Some(n), within: None };
        assert_eq!(pick(&screen, &nth(0)).map(|e| e.i), Some(0));
        assert_eq!(pick(&screen, &nth(2)).map(|e| e.i), Some(2));
        assert_eq!(pick(&screen, &nth(3)), None);
    }

    #[test]
    fn within_finds_the_like_button_of_a_row() {
        // feed > row(Ada: text, like) row(Bo: text, like)
        let screen = vec![
            el(0, View, None, Some("feed"), None),
            el(1, View, None, Some("row"), Some(0)),
            el(2, Text, Some("Ada"), None, Some(1)),
            el(3, Button, None, Some("like"), Some(1)),
            el(4, View, None, Some("row"), Some(0)),
            el(5, Text, Some("Bo"), None, Some(4)),
            el(6, Button, None, Some("like"), Some(4)),
        ];
        let like_near = |name: &str| Target::TestId {
            test_id: "like".into(),
            nth: None,
            within: Some(Scope::Text { text: name.into() }),
        };
        assert_eq!(pick(&screen, &like_near("Ada")).map(|e| e.i), Some(3));
        assert_eq!(pick(&screen, &like_near("bo")).map(|e| e.i), Some(6));
        assert_eq!(pick(&screen, &like_near("Cy")), None, "no scope, no match");
    }

    #[test]
    fn index_and_point_targets() {
        let screen = vec![el(0, Button, Some("A"), None, None), el(1, Text, Some("B"), None, None)];
        assert_eq!(pick(&screen, &Target::Index { i: 1 }).map(|e| e.i), Some(1));
        assert_eq!(pick(&screen, &Target::Index { i: 9 }), None);
        assert_eq!(pick(&screen, &Target::Point { x: 1.0, y: 1.0 }), None);
    }
}
