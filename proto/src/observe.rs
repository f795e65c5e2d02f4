//! What a worker records of each step (`AttemptObserved`), and its bounds:
//! a step's screen (its named elements and their frames), the requests that finished during it,
//! the app's events, crashes and stalls. Bounded so that a huge screen or a
//! chatty app costs the store a known number of bytes.

use prost::Message;

use crate::grpc::{AttemptObserved, ObservedElement, ObservedProblem, ObservedRequest};
use crate::wire::{Screen, TraceEvent, TraceKind};

/// Elements kept per step (those that name themselves, in tree order).
pub const STEP_ELEMENTS: usize = 200;
/// Requests kept per step.
pub const STEP_REQUESTS: usize = 50;
/// Analytics events kept per step.
pub const STEP_EVENTS: usize = 50;
/// Crashes and stalls kept per step.
pub const STEP_PROBLEMS: usize = 10;
/// Characters kept of any one string (a text, a URL, an error).
pub const TEXT_CHARS: usize = 200;
/// Encoded bytes per attempt: past it, the elements of passed steps go
/// first (the failing step's screen is what a diff needs most).
pub const ATTEMPT_BYTES: usize = 256 * 1024;

/// The most of a crash's stack kept.
pub const STACK_CHARS: usize = 4_000;

/// A stack cut to [`STACK_CHARS`].
pub fn clip_stack(text: &str) -> String {
    match text.char_indices().nth(STACK_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `text` cut to [`TEXT_CHARS`] characters, with `…` where it was cut.
pub fn clip(text: &str) -> String {
    match text.char_indices().nth(TEXT_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// The elements of a screen a person would name: any that is not a plain
/// view, or that has a testId or a label; offscreen ones are left out.
/// `true` when there were more than [`STEP_ELEMENTS`].
pub fn elements(screen: &Screen) -> (Vec<ObservedElement>, bool) {
    let named = screen
        .elements
        .iter()
        .filter(|e| e.kind != crate::wire::ElementKind::View || e.test_id.is_some() || e.accessibility_label.is_some());
    let mut kept = Vec::new();
    let mut more = false;
    for element in named.filter(|e| !e.is_offscreen()) {
        if kept.len() == STEP_ELEMENTS {
            more = true;
            break;
        }
        kept.push(ObservedElement {
            kind: element.kind.as_str().to_owned(),
            test_id: element.test_id.as_deref().map(clip).unwrap_or_default(),
            text: element.text.as_deref().or(element.accessibility_label.as_deref()).map(clip).unwrap_or_default(),
            value: element.value.as_deref().map(clip).unwrap_or_default(),
            disabled: !element.enabled,
            hidden: element.hidden.map(|h| h.as_str().to_owned()).unwrap_or_default(),
            covered: element.is_covered(),
            frame: Some(crate::grpc::ElementFrame {
                x: element.frame.x as f32,
                y: element.frame.y as f32,
                w: element.frame.w as f32,
                h: element.frame.h as f32,
            }),
        });
    }
    (kept, more)
}

/// What a step's share of the app's trace says: finished requests, analytics
/// events, crashes and stalls. `true` when some were past the bounds.
pub fn from_trace(events: &[TraceEvent]) -> (Vec<ObservedRequest>, Vec<String>, Vec<ObservedProblem>, bool) {
    let (mut requests, mut names, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    let mut more = false;
    for event in events {
        match &event.kind {
            TraceKind::Request { method, url, status, ms, error } => {
                if requests.len() == STEP_REQUESTS {
                    more = true;
                    continue;
                }
                requests.push(ObservedRequest {
                    method: clip(method),
                    url: clip(url),
                    status: status.map_or(0, u32::from),
                    ms: ms.unwrap_or(0),
                    error: error.as_deref().map(clip).unwrap_or_default(),
                });
            }
            TraceKind::Event { name, .. } => {
                if names.len() == STEP_EVENTS {
                    more = true;
                    continue;
                }
                names.push(clip(name));
            }
            TraceKind::Crash { message, route, stack } => {
                if problems.len() == STEP_PROBLEMS {
                    more = true;
                    continue;
                }
                problems.push(ObservedProblem {
                    kind: "crash".into(),
                    message: clip(message),
                    route: route.as_deref().map(clip).unwrap_or_default(),
                    stack: stack.as_deref().map(clip_stack).unwrap_or_default(),
                });
            }
            TraceKind::Stall { renders, window_ms, component } => {
                if problems.len() == STEP_PROBLEMS {
                    more = true;
                    continue;
                }
                let component = component.as_deref().unwrap_or("the app");
                problems.push(ObservedProblem {
                    kind: "stall".into(),
                    message: clip(&format!("{component}: {renders} renders in {window_ms} ms")),
                    route: String::new(),
                    stack: String::new(),
                });
            }
            _ => {}
        }
    }
    (requests, names, problems, more)
}

/// Trace lines kept per live screen.
pub const LIVE_TRACE_LINES: usize = 50;

/// What a person watching a device would follow of its trace, one line per
/// entry: where it went, what it asked the network, the events it sent,
/// what it touched and its crashes (at most [`LIVE_TRACE_LINES`], newest).
pub fn trace_lines(events: &[TraceEvent]) -> Vec<String> {
    let mut lines: Vec<String> = events
        .iter()
        .filter_map(|event| match &event.kind {
            TraceKind::Route { route, .. } => Some(format!("→ {}", route.as_deref().unwrap_or("?"))),
            TraceKind::Request { method, url, status, ms, error } => Some(match (status, error) {
                (Some(status), _) => format!("{method} {url} {status} · {} ms", ms.unwrap_or(0)),
                (None, Some(error)) => format!("{method} {url} failed: {error}"),
                (None, None) => format!("{method} {url} …"),
            }),
            TraceKind::Event { name, .. } => Some(format!("event {name}")),
            TraceKind::Touch { test_id, text, x, y, .. } => Some(format!(
                "touch {}",
                test_id.as_deref().or(text.as_deref()).map_or(format!("{x},{y}"), str::to_owned)
            )),
            TraceKind::Crash { message, .. } => Some(format!("crash: {message}")),
            TraceKind::Stall { renders, window_ms, component } => Some(format!(
                "stall: {} {renders} renders in {window_ms} ms",
                component.as_deref().unwrap_or("the app")
            )),
            _ => None,
        })
        .map(|line| clip(&line))
        .collect();
    if lines.len() > LIVE_TRACE_LINES {
        lines.drain(..lines.len() - LIVE_TRACE_LINES);
    }
    lines
}

/// Holds an attempt to [`ATTEMPT_BYTES`]: the elements of passed steps go
/// first, from the first step on, then the other steps' elements, then
/// requests and events in the same order.
pub fn bound(observed: &mut AttemptObserved) {
    let order: Vec<usize> = (0..observed.steps.len())
        .filter(|&i| observed.steps[i].status == "passed")
        .chain((0..observed.steps.len()).filter(|&i| observed.steps[i].status != "passed"))
        .collect();
    let shed: [fn(&mut crate::grpc::StepObservation) -> bool; 2] = [
        |step| !std::mem::take(&mut step.elements).is_empty(),
        |step| {
            let requests = std::mem::take(&mut step.requests);
            let events = std::mem::take(&mut step.events);
            !requests.is_empty() || !events.is_empty()
        },
    ];
    for shed in shed {
        for &i in &order {
            if observed.encoded_len() <= ATTEMPT_BYTES {
                return;
            }
            if shed(&mut observed.steps[i]) {
                observed.steps[i].truncated = true;
                observed.truncated = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::StepObservation;

    #[test]
    fn long_texts_are_clipped_on_a_character() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(TEXT_CHARS + 5);
        let clipped = clip(&long);
        assert_eq!(clipped.chars().count(), TEXT_CHARS + 1);
        assert!(clipped.ends_with('…'));
    }

    #[test]
    fn an_attempt_over_its_bound_loses_passed_steps_elements_first() {
        let element = ObservedElement { kind: "text".into(), text: "x".repeat(TEXT_CHARS), ..Default::default() };
        let step = |status: &str| StepObservation {
            status: status.into(),
            elements: vec![element.clone(); STEP_ELEMENTS],
            ..Default::default()
        };
        let mut observed = AttemptObserved {
            steps: (0..9).map(|_| step("passed")).chain([step("failed")]).collect(),
            ..Default::default()
        };
        assert!(observed.encoded_len() > ATTEMPT_BYTES);
        bound(&mut observed);
        assert!(observed.encoded_len() <= ATTEMPT_BYTES, "{}", observed.encoded_len());
        assert!(observed.truncated);
        assert_eq!(observed.steps[9].elements.len(), STEP_ELEMENTS, "the failed step keeps its screen");
        assert!(observed.steps[0].elements.is_empty() && observed.steps[0].truncated);
    }
}
