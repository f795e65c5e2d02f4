//! What a failed case leaves behind (spec §1.12): the screen as text, the
//! requests since the mark, and why (`why.rs`).

use serde_json::{Value, json};

use super::why::{Evidence, Sought, describe_why, explain};
use super::{Attempt, CALL_TIMEOUT, Device};
use argus_proto::run::RunEvidence;
use argus_proto::wire::Target;

/// How many screen lines evidence keeps.
pub const SCREEN_LINES: usize = 40;
/// How many requests evidence keeps.
pub const REQUESTS: usize = 8;
/// How many of the newest trace events `why` reads.
const TRACE_EVENTS: usize = 40;

fn text_of<'a>(element: &'a Value, key: &str) -> Option<&'a str> {
    element.get(key).and_then(Value::as_str)
}

fn hidden(element: &Value) -> Option<&str> {
    text_of(element, "hidden").filter(|h| !h.is_empty())
}

fn label_of(element: &Value) -> Option<&str> {
    text_of(element, "text").or_else(|| text_of(element, "accessibilityLabel"))
}

/// A screen as lynkeus' `describeScreen` lists it: a header (`route (a > b)
/// +modal#id busy · N hidden: 2 behind-modal`), then one line per element
/// that names itself (`[i ]kind[ #id][ "label"][ value="…"[ placeholder="…"]
/// [ *focused]][ !disabled][ ~covered][ ~reason]`), the index only where the
/// name is missing or shared, and `… N more` past `limit`. Strings are
/// quoted as JSON, as JavaScript's `JSON.stringify` does.
pub fn describe_screen(screen: &Value, limit: usize) -> String {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let present = |e: &Value, key: &str| e.get(key).is_some_and(|v| !v.is_null());
    let truthy = |e: &Value, key: &str| match e.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    };
    let elements: &[Value] = screen.get("elements").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let kind = |e: &'_ Value| text_of(e, "kind").unwrap_or("view").to_owned();
    // Plain views are layout; one that names itself is content.
    let named: Vec<&Value> = elements
        .iter()
        .filter(|e| kind(e) != "view" || present(e, "accessibilityLabel") || present(e, "testId"))
        .collect();
    // What sits inside a button is the button.
    let inside_button = |e: &Value| {
        let mut parent = e.get("parent").and_then(Value::as_u64);
        let mut hops = 0;
        while let Some(p) = parent.and_then(|p| usize::try_from(p).ok()).filter(|_| hops < elements.len()) {
            let Some(up) = elements.get(p) else { break };
            if text_of(up, "kind") == Some("button") {
                return true;
            }
            parent = up.get("parent").and_then(Value::as_u64);
            hops += 1;
        }
        false
    };
    let listed: Vec<&Value> = named
        .iter()
        .copied()
        .filter(|e| matches!(hidden(e), None | Some("inert")) && !(kind(e) == "view" && inside_button(e)))
        .collect();
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for reason in named.iter().filter_map(|e| hidden(e)).filter(|h| *h != "inert") {
        match counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => counts.push((reason, 1)),
        }
    }
    let route = text_of(screen, "route");
    let trail: Vec<&str> = screen
        .get("path")
        .and_then(Value::as_array)
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let trail = trail.join(" > ");
    let mut header = route.unwrap_or("?").to_owned();
    if Some(trail.as_str()) != route {
        header.push_str(&format!(" ({trail})"));
    }
    if let Some(layer) = screen.get("presenting").filter(|p| !p.is_null()) {
        header.push_str(if truthy(layer, "modal") { " +modal" } else { " +overlay" });
        if let Some(id) = text_of(layer, "testId").filter(|id| !id.is_empty()) {
            header.push_str(&format!("#{id}"));
        }
    }
    if truthy(screen, "busy") {
        header.push_str(" busy");
    }
    let hidden_total: usize = counts.iter().map(|(_, n)| n).sum();
    if hidden_total > 0 {
        let each: Vec<String> = counts.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
        header.push_str(&format!(" · {hidden_total} hidden: {}", each.join(", ")));
    }
    let name_of = |e: &Value| {
        text_of(e, "testId")
            .filter(|id| !id.is_empty())
            .map(|id| format!("#{id}"))
            .or_else(|| label_of(e).map(str::to_owned))
    };
    let mut uses: Vec<(String, usize)> = Vec::new();
    for name in listed.iter().filter_map(|e| name_of(e)) {
        match uses.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => uses.push((name, 1)),
        }
    }
    let mut lines = vec![header];
    for e in listed.iter().take(limit) {
        let mut line = String::new();
        let unique = name_of(e).is_some_and(|name| uses.iter().any(|(n, count)| *n == name && *count == 1));
        if !unique {
            line.push_str(&format!("{} ", e.get("i").map_or("undefined".to_owned(), |i| i.to_string())));
        }
        line.push_str(&kind(e));
        if let Some(id) = text_of(e, "testId").filter(|id| !id.is_empty()) {
            line.push_str(&format!(" #{id}"));
        }
        // A label that only repeats the testId says nothing new.
        if let Some(label) = label_of(e).filter(|l| !l.is_empty() && Some(*l) != text_of(e, "testId")) {
            line.push_str(&format!(" {}", quote(label)));
        }
        if kind(e) == "input" {
            line.push_str(&format!(" value={}", quote(text_of(e, "value").unwrap_or(""))));
            if let Some(placeholder) = text_of(e, "placeholder").filter(|p| !p.is_empty()) {
                line.push_str(&format!(" placeholder={}", quote(placeholder)));
            }
            if truthy(e, "focused") {
                line.push_str(" *focused");
            }
        } else if let Some(value) = text_of(e, "value") {
            line.push_str(&format!(" value={}", quote(value)));
        }
        if !truthy(e, "enabled") {
            line.push_str(" !disabled");
        }
        if truthy(e, "covered") {
            line.push_str(" ~covered");
        }
        if let Some(reason) = hidden(e) {
            line.push_str(&format!(" ~{reason}"));
        }
        lines.push(line);
    }
    if listed.len() > limit {
        lines.push(format!("… {} more", listed.len() - limit));
    }
    lines.join("\n")
}

impl<D: Device> Attempt<'_, D> {
    /// Evidence for a failed attempt, read from the app while it is still
    /// there; what cannot be read is left out (the requests list is always
    /// written, as lynkeus writes it).
    pub(super) async fn evidence(&mut self) -> RunEvidence {
        let screen = self.call("screen", None, CALL_TIMEOUT).await.ok();
        let since = self.mark.map(|since| json!({"since": since}));
        let marked = match since {
            Some(since) => self.call("trace", Some(since), CALL_TIMEOUT).await.ok(),
            None => None,
        };
        let requests: Vec<String> = marked
            .as_ref()
            .map(|trace| {
                let lines: Vec<String> = events_of(trace)
                    .iter()
                    .filter(|e| text_of(e, "kind") == Some("request"))
                    .map(|e| {
                        let status =
                            e.get("status").and_then(Value::as_u64).map_or("…".to_owned(), |s| s.to_string());
                        format!("{status} {} {}", text_of(e, "method").unwrap_or("?"), text_of(e, "url").unwrap_or("?"))
                    })
                    .collect();
                lines[lines.len().saturating_sub(REQUESTS)..].to_vec()
            })
            .unwrap_or_default();
        let why = match &screen {
            Some(screen) => Some(self.why(screen).await),
            None => None,
        };
        RunEvidence { screen: screen.as_ref().map(|s| describe_screen(s, SCREEN_LINES)), requests: Some(requests), why }
    }

    /// `why` as lynkeus reads it: the screen, the app's recent requests and
    /// the newest trace events, against what the failing step looked for.
    /// Only what this attempt made counts: the trace since it began, the
    /// requests it started (nothing when no `app.*` step ran).
    async fn why(&self, screen: &Value) -> String {
        let (requests, in_flight, events) = match self.begun {
            None => (Vec::new(), 0, Vec::new()),
            Some(begun) => {
                let answer = self.call("requests", None, CALL_TIMEOUT).await.ok();
                let listed = answer.as_ref().and_then(|a| a.get("requests")).and_then(Value::as_array);
                let requests: Vec<Value> = listed
                    .into_iter()
                    .flatten()
                    .filter(|r| {
                        let started = r.get("startedAt").and_then(Value::as_u64);
                        begun.app_ms.is_none_or(|begun| started.is_none_or(|at| at >= begun))
                    })
                    .cloned()
                    .collect();
                // In flight, of those this attempt started: no answer yet.
                let unanswered = |r: &&Value| ["status", "error"].iter().all(|k| r.get(*k).is_none_or(Value::is_null));
                let pending = requests.iter().filter(unanswered).count() as u64;
                let in_flight = answer.as_ref().and_then(|a| a.get("inFlight")).and_then(Value::as_u64).unwrap_or(0);
                let in_flight = in_flight.min(pending);
                let since = json!({"since": begun.trace_seq});
                let trace = self.call("trace", Some(since), CALL_TIMEOUT).await.ok();
                (requests, in_flight, trace.as_ref().map(events_of).unwrap_or_default())
            }
        };
        let newest = &events[events.len().saturating_sub(TRACE_EVENTS)..];
        let sought = self.sought();
        let evidence = Evidence { screen, requests: &requests, in_flight, trace: newest, sought: sought.as_ref() };
        describe_why(&explain(&evidence))
    }

    /// What the failing step was looking for: its element, or its route.
    fn sought(&self) -> Option<Sought> {
        let mut sought = Sought { route: self.last_route.clone(), ..Sought::default() };
        match &self.last_target {
            Some(Target::TestId { test_id, .. }) => sought.test_id = Some(test_id.clone()),
            Some(Target::Text { text, .. }) => sought.text = Some(text.clone()),
            _ => {}
        }
        (sought != Sought::default()).then_some(sought)
    }
}

fn events_of(trace: &Value) -> Vec<Value> {
    trace.get("events").and_then(Value::as_array).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_tests_fake_screen() {
        let screen = json!({
            "route": "Profile.Main", "path": ["Profile.Main"], "busy": false,
            "elements": [
                {"i": 0, "kind": "button", "testId": "refresh", "enabled": true},
                {"i": 1, "kind": "text", "text": "Hello", "enabled": true}
            ]
        });
        assert_eq!(describe_screen(&screen, 40), "Profile.Main\nbutton #refresh\ntext \"Hello\"");
    }

    #[test]
    fn header_layers_hidden_and_repeated_names() {
        let screen = json!({
            "route": "Settings", "path": ["Main", "Settings"], "busy": true,
            "presenting": {"i": 3, "modal": true, "testId": "confirm"},
            "elements": [
                {"i": 0, "kind": "switch", "testId": "dark", "hidden": "behind-modal"},
                {"i": 1, "kind": "button", "text": "Like", "covered": true, "enabled": false},
                {"i": 2, "kind": "button", "text": "Like"},
                {"i": 3, "kind": "view", "testId": "confirm"},
                {"i": 4, "kind": "input", "testId": "pw", "value": "•••"}
            ]
        });
        let text = describe_screen(&screen, 4);
        assert_eq!(
            text,
            "Settings (Main > Settings) +modal#confirm busy · 1 hidden: 1 behind-modal\n\
             1 button \"Like\" !disabled ~covered\n\
             2 button \"Like\" !disabled\n\
             view #confirm !disabled\n\
             input #pw value=\"•••\" !disabled"
        );
    }

    #[test]
    fn inputs_show_their_value_and_placeholder_and_names_are_json() {
        let screen = json!({
            "route": "Login", "path": [],
            "elements": [
                {"i": 0, "kind": "input", "testId": "email", "placeholder": "you@mail.com", "focused": true, "enabled": true},
                {"i": 1, "kind": "text", "text": "Say \"hi\"", "enabled": true},
                {"i": 2, "kind": "view", "enabled": true},
                {"i": 3, "kind": "button", "testId": "go", "text": "go", "enabled": true},
                {"i": 4, "kind": "view", "testId": "icon", "parent": 3, "enabled": true},
                {"i": 5, "kind": "image", "enabled": true, "hidden": "a11y"}
            ]
        });
        assert_eq!(
            describe_screen(&screen, 40),
            "Login () · 1 hidden: 1 a11y\n\
             input #email value=\"\" placeholder=\"you@mail.com\" *focused\n\
             text \"Say \\\"hi\\\"\"\n\
             button #go"
        );
    }
}
