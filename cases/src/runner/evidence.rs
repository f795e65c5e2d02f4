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

/// A screen as lynkeus lists it: a header (`route (a > b) +modal#id busy ·
/// N hidden: …`), then one line per element (`[i ]kind[ #id][ "label"]
/// [ value="…"][ !disabled][ ~covered][ ~inert]`), the index only where the
/// name is not unique, and `… N more` past `limit`.
pub fn describe_screen(screen: &Value, limit: usize) -> String {
    let route = text_of(screen, "route").unwrap_or("(no route)");
    let mut header = route.to_owned();
    let path: Vec<&str> = screen
        .get("path")
        .and_then(Value::as_array)
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let joined = path.join(" > ");
    if !path.is_empty() && joined != route {
        header.push_str(&format!(" ({joined})"));
    }
    if let Some(layer) = screen.get("presenting").filter(|p| !p.is_null()) {
        let kind = if layer.get("modal") == Some(&Value::Bool(true)) { "modal" } else { "overlay" };
        header.push_str(&format!(" +{kind}"));
        if let Some(id) = text_of(layer, "testId") {
            header.push_str(&format!("#{id}"));
        }
    }
    if screen.get("busy") == Some(&Value::Bool(true)) {
        header.push_str(" busy");
    }
    let elements = screen.get("elements").and_then(Value::as_array).cloned().unwrap_or_default();
    let name = |e: &Value| -> Option<String> {
        text_of(e, "testId")
            .map(|id| format!("#{id}"))
            .or_else(|| text_of(e, "text").or_else(|| text_of(e, "accessibilityLabel")).map(|l| format!("{l:?}")))
    };
    let hidden: Vec<String> = elements
        .iter()
        .filter_map(|e| {
            let reason = text_of(e, "hidden").filter(|r| *r != "inert")?;
            Some(format!("{} {reason}", name(e).unwrap_or_else(|| text_of(e, "kind").unwrap_or("view").to_owned())))
        })
        .collect();
    if !hidden.is_empty() {
        header.push_str(&format!(" · {} hidden: {}", hidden.len(), hidden.join(", ")));
    }
    let listed: Vec<&Value> = elements
        .iter()
        .filter(|e| matches!(text_of(e, "hidden"), None | Some("inert")))
        .filter(|e| name(e).is_some() || e.get("value").is_some())
        .collect();
    let mut lines = vec![header];
    for element in listed.iter().take(limit) {
        let own = name(element);
        let unique = listed.iter().filter(|e| name(e) == own).count() == 1;
        let mut line = String::new();
        if !unique {
            line.push_str(&format!("{} ", element.get("i").and_then(Value::as_u64).unwrap_or(0)));
        }
        line.push_str(text_of(element, "kind").unwrap_or("view"));
        if let Some(id) = text_of(element, "testId") {
            line.push_str(&format!(" #{id}"));
        }
        if let Some(label) = text_of(element, "text").or_else(|| text_of(element, "accessibilityLabel")) {
            line.push_str(&format!(" {label:?}"));
        }
        if let Some(value) = text_of(element, "value") {
            line.push_str(&format!(" value={value:?}"));
        }
        if element.get("enabled") == Some(&Value::Bool(false)) {
            line.push_str(" !disabled");
        }
        if element.get("covered") == Some(&Value::Bool(true)) {
            line.push_str(" ~covered");
        }
        if let Some(reason) = text_of(element, "hidden") {
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
    async fn why(&self, screen: &Value) -> String {
        let answer = self.call("requests", None, CALL_TIMEOUT).await.ok();
        let requests =
            answer.as_ref().and_then(|a| a.get("requests")).and_then(Value::as_array).cloned().unwrap_or_default();
        let in_flight = answer.as_ref().and_then(|a| a.get("inFlight")).and_then(Value::as_u64).unwrap_or(0);
        let trace = self.call("trace", None, CALL_TIMEOUT).await.ok();
        let events = trace.as_ref().map(events_of).unwrap_or_default();
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
        let text = describe_screen(&screen, 3);
        assert_eq!(
            text,
            "Settings (Main > Settings) +modal#confirm busy · 1 hidden: #dark behind-modal\n\
             1 button \"Like\" !disabled ~covered\n\
             2 button \"Like\"\n\
             view #confirm\n\
             … 1 more"
        );
    }
}
