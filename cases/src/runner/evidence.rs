//! What a failed case leaves behind (spec §1.12): the screen as text, the
//! requests since the mark, and why the step's element could not be used.

use serde_json::{Value, json};

use super::{Attempt, CALL_TIMEOUT, Device};
use argus_proto::run::RunEvidence;

/// How many screen lines evidence keeps.
pub const SCREEN_LINES: usize = 40;
/// How many requests evidence keeps.
pub const REQUESTS: usize = 8;

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
    /// there; what cannot be read is left out.
    pub(super) async fn evidence(&mut self) -> RunEvidence {
        let screen = self.call("screen", None, CALL_TIMEOUT).await.ok();
        let requests = match self.mark {
            Some(since) => self.call("trace", Some(json!({"since": since})), CALL_TIMEOUT).await.ok().map(|trace| {
                let events = trace.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
                let lines: Vec<String> = events
                    .iter()
                    .filter(|e| text_of(e, "kind") == Some("request"))
                    .map(|e| {
                        let status =
                            e.get("status").and_then(Value::as_u64).map_or("…".to_owned(), |s| s.to_string());
                        format!("{status} {} {}", text_of(e, "method").unwrap_or("?"), text_of(e, "url").unwrap_or("?"))
                    })
                    .collect();
                lines[lines.len().saturating_sub(REQUESTS)..].to_vec()
            }),
            None => None,
        };
        let why = self.why(screen.as_ref()).await;
        RunEvidence {
            screen: screen.as_ref().map(|s| describe_screen(s, SCREEN_LINES)),
            requests: requests.filter(|r| !r.is_empty()),
            why,
        }
    }

    /// Why the failing step's element could not be used: gone, hidden
    /// behind a layer, covered, disabled, outside the window, or a busy app.
    async fn why(&self, screen: Option<&Value>) -> Option<String> {
        let mut reasons = Vec::new();
        if let Some(target) = &self.last_target {
            let shown = target.describe();
            let found = self.call("find", Some(serde_json::to_value(target).ok()?), CALL_TIMEOUT).await.ok();
            match found {
                Some(Value::Null) | None => {
                    let route = screen.and_then(|s| text_of(s, "route")).unwrap_or("this screen");
                    reasons.push(format!("nothing on {route} matches {shown}"));
                }
                Some(element) => {
                    if let Some(hidden) = text_of(&element, "hidden") {
                        let layer = screen.and_then(|s| s.get("presenting")).filter(|p| !p.is_null());
                        let behind = layer
                            .and_then(|l| text_of(l, "testId"))
                            .map(|id| format!(", behind #{id}"))
                            .unwrap_or_default();
                        reasons.push(format!("{shown} is hidden ({hidden}{behind})"));
                    }
                    if element.get("covered") == Some(&Value::Bool(true)) {
                        reasons.push(format!("{shown} is covered: something lies over its centre"));
                    }
                    if element.get("enabled") == Some(&Value::Bool(false)) {
                        reasons.push(format!("{shown} is disabled"));
                    }
                    if element.get("offscreen") == Some(&Value::Bool(true)) {
                        reasons.push(format!("{shown} is outside the window"));
                    }
                }
            }
        }
        if screen.is_some_and(|s| s.get("busy") == Some(&Value::Bool(true))) {
            reasons.push("the app is still busy (requests in flight)".to_owned());
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
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
