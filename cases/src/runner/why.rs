//! `evidence.why`: the screen, the app's recent requests and its trace after
//! a failure, read by lynkeus' `why` rules (a dead navigator, a gone session,
//! a server error, a hidden, covered or disabled target, a wording
//! difference, a screen still loading …), in lynkeus' words, so a
//! `cases.jsonl` line reads the same whichever runner wrote it.
//!
//! A pure function of what was read from the app: [`explain`] gives the
//! findings, [`describe_why`] the text.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::js::js_number;

/// What the failed step was looking for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sought {
    pub test_id: Option<String>,
    pub text: Option<String>,
    pub route: Option<String>,
}

/// What was read from the app once the step had failed.
pub struct Evidence<'a> {
    /// A `screen` answer.
    pub screen: &'a Value,
    /// The `requests` answer's records.
    pub requests: &'a [Value],
    /// The `requests` answer's `inFlight`.
    pub in_flight: u64,
    /// The newest trace events, oldest first.
    pub trace: &'a [Value],
    pub sought: Option<&'a Sought>,
}

fn str_of<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// A field JavaScript would call truthy (a non-empty string, `true`, a
/// non-zero number).
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(_) => true,
    }
}

fn status_of(request: &Value) -> Option<i64> {
    request.get("status").and_then(Value::as_i64)
}

/// A URL without its origin and query: what the rules name a request by.
fn path_of(url: &str) -> &str {
    let url = url.split('?').next().unwrap_or(url);
    match url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) {
        Some(rest) => rest.find('/').map_or("", |i| &rest[i..]),
        None => url,
    }
}

/// The host a URL names (`api.test` of `https://api.test/v1`).
fn host_of(url: &str) -> &str {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")).unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// Up to three distinct values, in first-seen order, joined with `, `.
fn first_three<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen.truncate(3);
    seen.join(", ")
}

/// Case, accents and surrounding space folded away.
fn fold(text: &str) -> String {
    let bare: String = text.nfkd().filter(|c| !('\u{300}'..='\u{36f}').contains(c)).collect();
    bare.to_lowercase().trim().to_owned()
}

/// Levenshtein distance over UTF-16 units, as JavaScript strings count.
fn distance(a: &[u16], b: &[u16]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push((previous[j + 1] + 1).min(current[j] + 1).min(substitution));
        }
        previous = current;
    }
    previous[b.len()]
}

fn similar(a: &str, b: &str) -> bool {
    if a.contains(b) || b.contains(a) {
        return true;
    }
    let (a, b): (Vec<u16>, Vec<u16>) = (a.encode_utf16().collect(), b.encode_utf16().collect());
    if a.len() > 200 || b.len() > 200 {
        return false;
    }
    distance(&a, &b) <= 2.max(a.len().max(b.len()) / 4)
}

/// A number in a message, as JavaScript writes it.
fn number(value: Option<&Value>) -> String {
    match value {
        Some(Value::Number(n)) => js_number(n),
        Some(Value::String(s)) => s.clone(),
        _ => "undefined".to_owned(),
    }
}

/// The findings, most telling first; empty when nothing stands out.
pub fn explain(e: &Evidence<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let elements: &[Value] = e.screen.get("elements").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let route = str_of(e.screen, "route").filter(|r| !r.is_empty());
    let done: Vec<&Value> = e.requests.iter().filter(|r| r.get("status").is_some() || truthy(r.get("error"))).collect();
    let with_status = |n: i64| done.iter().filter(move |r| status_of(r) == Some(n));
    let newest = |kind: &str| e.trace.iter().rev().find(|t| str_of(t, "kind") == Some(kind));

    if route.is_none() && elements.is_empty() {
        out.push(match newest("crash") {
            Some(crash) => {
                let mut message = format!(
                    "the screen is empty and has no route: a component threw and took the tree with it — {}",
                    str_of(crash, "message").unwrap_or("undefined")
                );
                if let Some(stack) = str_of(crash, "stack").filter(|s| !s.is_empty()) {
                    let lines: Vec<&str> = stack.split('\n').skip(1).take(3).collect();
                    message.push_str(&format!("\n    {}", lines.join("\n    ")));
                }
                message
            }
            None => "the screen is empty and has no route: a component threw while rendering. Reset the app and look for the render error in the host log.".to_owned(),
        });
    }
    if !done.is_empty() && done.iter().all(|r| status_of(r) == Some(401)) {
        out.push("every request answered 401: the session is gone (a logout, a reset, or a key revoked elsewhere). Log in again.".to_owned());
    }
    if with_status(403).count() >= 2 {
        let paths = first_three(with_status(403).map(|r| path_of(str_of(r, "url").unwrap_or(""))));
        out.push(format!(
            "the backend refuses {paths} with 403: an account state or a permission, not the screen. Check what the case expects of this user."
        ));
    }
    if let Some(five) = done.iter().find(|r| status_of(r).unwrap_or(0) >= 500) {
        out.push(format!(
            "the backend answered {} on {} {}: a server error, not the app. Reproduce it with curl before touching the case.",
            number(five.get("status")),
            str_of(five, "method").unwrap_or("undefined"),
            path_of(str_of(five, "url").unwrap_or(""))
        ));
    }
    if with_status(429).next().is_some() {
        out.push("a request answered 429: the backend is rate limiting this client. Space the runs out or raise the limit locally.".to_owned());
    }
    if let Some(stall) = newest("stall") {
        let within =
            str_of(stall, "component").filter(|c| !c.is_empty()).map(|c| format!(" in {c}")).unwrap_or_default();
        out.push(format!(
            "the host broke a render loop{within} ({} updates in {}ms): the screen is dead until a reset. A component whose effect and store feed each other.",
            number(stall.get("renders")),
            number(stall.get("windowMs"))
        ));
    }
    if let Some(sought) = e.sought {
        sought_findings(e, sought, elements, route, &mut out);
    }
    if e.in_flight > 0 {
        out.push(format!(
            "{} request(s) still in flight when the command gave up: the screen had not finished loading. A longer timeout, or wait for the request it needs.",
            e.in_flight
        ));
    }
    if done.is_empty()
        && e.in_flight == 0
        && e.sought.is_some_and(|s| s.route.as_deref().is_some_and(|r| !r.is_empty()))
    {
        out.push("no request left the app while this ran: nothing was fetched. Is the user logged in, and is the app talking to the backend it should?".to_owned());
    }
    // Hosts the app's sandbox refuses are usually third parties nobody
    // needs: named only when nothing else explains the failure.
    let refused: Vec<&&Value> = done
        .iter()
        .filter(|r| {
            status_of(r) == Some(0)
                && str_of(r, "error").is_some_and(|err| err.contains("networkHosts") || err.contains("is off"))
        })
        .collect();
    if !refused.is_empty() && e.sought.is_some() && out.is_empty() {
        let hosts = first_three(refused.iter().map(|r| host_of(str_of(r, "url").unwrap_or(""))));
        out.push(format!(
            "{} request(s) were refused by the host ({hosts}): if the screen needs one of them, allow the host in networkHosts or mock it.",
            refused.len()
        ));
    }
    if out.is_empty()
        && let Some(command) =
            e.trace.iter().rev().find(|t| str_of(t, "kind") == Some("command") && truthy(t.get("error")))
    {
        out.push(format!(
            "the last command that failed was {}: {}",
            str_of(command, "method").unwrap_or("undefined"),
            str_of(command, "error").unwrap_or("")
        ));
    }
    out
}

/// What is wrong with the element or route the step was looking for.
fn sought_findings(e: &Evidence<'_>, sought: &Sought, elements: &[Value], route: Option<&str>, out: &mut Vec<String>) {
    let test_id = sought.test_id.as_deref().filter(|s| !s.is_empty());
    let text = sought.text.as_deref().filter(|s| !s.is_empty());
    let matches = |element: &&Value| {
        test_id.is_some_and(|id| str_of(element, "testId") == Some(id))
            || text
                .is_some_and(|t| str_of(element, "text") == Some(t) || str_of(element, "accessibilityLabel") == Some(t))
    };
    let named = || match test_id {
        Some(id) => format!("#{id}"),
        None => Value::String(text.unwrap_or_default().to_owned()).to_string(),
    };
    let found = elements.iter().find(matches);
    if let Some(found) = found {
        if truthy(found.get("hidden")) {
            out.push(format!(
                "{} is in the tree but not presented ({}): it belongs to a screen the app is not showing. Close what is open, or target something inside it.",
                named(),
                str_of(found, "hidden").unwrap_or_default()
            ));
        }
        if truthy(found.get("covered")) {
            out.push(format!(
                "{} is on the screen but covered: a sheet or overlay is over it. Close it, or press what covers it.",
                named()
            ));
        }
        if !truthy(found.get("enabled")) {
            out.push(format!(
                "{} is on the screen but disabled: a form is not valid yet, or a request it depends on is in flight.",
                named()
            ));
        }
    }
    if found.is_none()
        && let Some(text) = text
    {
        let want = fold(text);
        let near = elements
            .iter()
            .filter_map(|el| str_of(el, "text").or_else(|| str_of(el, "accessibilityLabel")))
            .filter(|t| !t.is_empty())
            .find(|t| similar(&fold(t), &want));
        if let Some(near) = near.filter(|near| *near != text) {
            out.push(format!(
                "the text is not there, but {} is: a wording, accent or case difference?",
                Value::String(near.to_owned())
            ));
        }
        let listed: Vec<&Value> = elements.iter().filter(|el| str_of(el, "testId").is_some_and(is_list_item)).collect();
        let prefix = String::from_utf16_lossy(&want.encode_utf16().take(4).collect::<Vec<u16>>());
        let alike = listed.iter().filter(|el| fold(str_of(el, "text").unwrap_or("")).contains(&prefix)).count();
        if listed.len() >= 10 && !prefix.is_empty() && alike as f64 >= listed.len() as f64 / 2.0 {
            out.push(format!(
                "the list shows {} near matches and yours is not among them: the data has accumulated look-alikes and the list is capped. Search by something unique, or reset the data.",
                listed.len()
            ));
        }
    }
    if let (Some(want), Some(now)) = (sought.route.as_deref().filter(|r| !r.is_empty()), route)
        && now != want
    {
        // The routes of the last three route changes.
        let recent = e
            .trace
            .iter()
            .rev()
            .filter(|t| str_of(t, "kind") == Some("route"))
            .take(3)
            .filter_map(|t| str_of(t, "route"));
        if recent.into_iter().any(|r| r == want) {
            out.push(format!(
                "the app was on {want} and moved to {now}: something navigated after the step (a redirect, a gate, a modal). The trace shows the order."
            ));
        }
    }
}

/// A row of a list, by the testId convention `<list>-<n>-item`.
fn is_list_item(test_id: &str) -> bool {
    let Some(rest) = test_id.strip_suffix("-item") else { return false };
    let digits = rest.len() - rest.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    digits > 0 && rest[..rest.len() - digits].ends_with('-')
}

/// The findings as `evidence.why` holds them: one `  • ` line each, or the
/// line that says nothing stands out.
pub fn describe_why(findings: &[String]) -> String {
    if findings.is_empty() {
        return "  (nothing in the evidence explains it: the screen, requests and trace look ordinary)".to_owned();
    }
    findings.iter().map(|f| format!("  • {f}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// Every distinct finding, sorted.
    fn set(findings: &[String]) -> BTreeSet<&str> {
        findings.iter().map(String::as_str).collect()
    }

    fn explain_with(
        screen: Value,
        requests: Value,
        in_flight: u64,
        trace: Value,
        sought: Option<Sought>,
    ) -> Vec<String> {
        let requests = requests.as_array().cloned().unwrap_or_default();
        let trace = trace.as_array().cloned().unwrap_or_default();
        explain(&Evidence { screen: &screen, requests: &requests, in_flight, trace: &trace, sought: sought.as_ref() })
    }

    fn by_id(id: &str) -> Option<Sought> {
        Some(Sought { test_id: Some(id.into()), ..Sought::default() })
    }

    fn by_text(text: &str) -> Option<Sought> {
        Some(Sought { text: Some(text.into()), ..Sought::default() })
    }

    #[test]
    fn nothing_stands_out_and_the_last_failed_command_is_named() {
        let screen = json!({"route": "Home", "elements": [{"i": 0, "kind": "text", "text": "Hi", "enabled": true}]});
        assert_eq!(
            describe_why(&explain_with(screen.clone(), json!([]), 0, json!([]), by_id("nowhere"))),
            "  (nothing in the evidence explains it: the screen, requests and trace look ordinary)"
        );
        let trace = json!([
            {"seq": 1, "t": 1, "kind": "command", "method": "press", "ms": 3},
            {"seq": 2, "t": 2, "kind": "command", "method": "waitFor", "ms": 3000, "error": "Timed out waiting for  {\"testId\":\"nowhere\"} (on Home)"}
        ]);
        assert_eq!(
            describe_why(&explain_with(screen, json!([]), 0, trace, by_id("nowhere"))),
            "  • the last command that failed was waitFor: Timed out waiting for  {\"testId\":\"nowhere\"} (on Home)"
        );
    }

    #[test]
    fn a_sought_element_hidden_covered_or_disabled() {
        let screen = json!({"route": "Pay", "elements": [
            {"i": 0, "kind": "button", "testId": "pay", "enabled": false, "covered": true},
            {"i": 1, "kind": "switch", "text": "Dark mode", "enabled": true, "hidden": "behind-modal"}
        ]});
        assert_eq!(
            explain_with(screen.clone(), json!([]), 0, json!([]), by_id("pay")),
            [
                "#pay is on the screen but covered: a sheet or overlay is over it. Close it, or press what covers it.",
                "#pay is on the screen but disabled: a form is not valid yet, or a request it depends on is in flight."
            ]
        );
        assert_eq!(
            explain_with(screen, json!([]), 0, json!([]), by_text("Dark mode")),
            [
                "\"Dark mode\" is in the tree but not presented (behind-modal): it belongs to a screen the app is not showing. Close what is open, or target something inside it."
            ]
        );
    }

    #[test]
    fn near_texts_and_capped_lists() {
        let mut elements = vec![json!({"i": 0, "kind": "text", "text": "Café au lait", "enabled": true})];
        for n in 0..12 {
            elements.push(json!({"i": n + 1, "kind": "text", "testId": format!("feed-{n}-item"), "text": format!("Order {n}"), "enabled": true}));
        }
        let screen = json!({"route": "Feed", "elements": elements});
        assert_eq!(
            explain_with(screen.clone(), json!([]), 0, json!([]), by_text("cafe au lait")),
            ["the text is not there, but \"Café au lait\" is: a wording, accent or case difference?"]
        );
        assert_eq!(
            explain_with(screen, json!([]), 0, json!([]), by_text("Order 99")),
            [
                "the text is not there, but \"Order 0\" is: a wording, accent or case difference?",
                "the list shows 12 near matches and yours is not among them: the data has accumulated look-alikes and the list is capped. Search by something unique, or reset the data."
            ]
        );
        assert!(is_list_item("feed-12-item") && !is_list_item("feed-item") && !is_list_item("feed12-item"));
    }

    #[test]
    fn requests_tell_of_the_backend() {
        let screen = json!({"route": "Home", "elements": [{"i": 0, "kind": "text", "text": "Hi", "enabled": true}]});
        let gone = json!([{"id": 1, "method": "GET", "url": "https://api.test/me", "status": 401, "startedAt": 1}]);
        assert_eq!(
            explain_with(screen.clone(), gone, 0, json!([]), None),
            [
                "every request answered 401: the session is gone (a logout, a reset, or a key revoked elsewhere). Log in again."
            ]
        );
        let mixed = json!([
            {"id": 1, "method": "GET", "url": "https://api.test/v1/a?x=1", "status": 403, "startedAt": 1},
            {"id": 2, "method": "GET", "url": "https://api.test/v1/b", "status": 403, "startedAt": 2},
            {"id": 3, "method": "POST", "url": "https://api.test/v1/pay", "status": 502, "startedAt": 3},
            {"id": 4, "method": "GET", "url": "https://api.test/v1/c", "status": 429, "startedAt": 4},
            {"id": 5, "method": "GET", "url": "https://api.test/v1/slow", "startedAt": 5}
        ]);
        assert_eq!(set(&explain_with(screen.clone(), mixed, 1, json!([]), None)), set(&[
            "the backend refuses /v1/a, /v1/b with 403: an account state or a permission, not the screen. Check what the case expects of this user.".to_owned(),
            "the backend answered 502 on POST /v1/pay: a server error, not the app. Reproduce it with curl before touching the case.".to_owned(),
            "a request answered 429: the backend is rate limiting this client. Space the runs out or raise the limit locally.".to_owned(),
            "1 request(s) still in flight when the command gave up: the screen had not finished loading. A longer timeout, or wait for the request it needs.".to_owned(),
        ]));
        let refused = json!([{"id": 1, "method": "GET", "url": "https://ads.example/px", "status": 0, "error": "ads.example is not in networkHosts", "startedAt": 1}]);
        assert_eq!(
            explain_with(screen.clone(), refused, 0, json!([]), by_id("nowhere")),
            [
                "1 request(s) were refused by the host (ads.example): if the screen needs one of them, allow the host in networkHosts or mock it."
            ]
        );
        let route = Some(Sought { route: Some("Feed".into()), ..Sought::default() });
        assert_eq!(
            explain_with(screen, json!([]), 0, json!([]), route),
            [
                "no request left the app while this ran: nothing was fetched. Is the user logged in, and is the app talking to the backend it should?"
            ]
        );
    }

    #[test]
    fn a_dead_screen_a_render_loop_and_a_route_left() {
        let empty = json!({"elements": []});
        let crash = json!([{"seq": 1, "t": 1, "kind": "crash", "message": "undefined is not an object", "stack": "TypeError\n  at Feed\n  at List\n  at App\n  at Root"}]);
        assert_eq!(
            explain_with(empty.clone(), json!([]), 0, crash, None),
            [
                "the screen is empty and has no route: a component threw and took the tree with it — undefined is not an object\n      at Feed\n      at List\n      at App"
            ]
        );
        let stall = json!([{"seq": 1, "t": 1, "kind": "stall", "renders": 50, "windowMs": 1000, "component": "Cart"}]);
        assert_eq!(
            explain_with(
                json!({"route": "Cart", "elements": [{"i": 0, "kind": "view", "enabled": true}]}),
                json!([]),
                0,
                stall,
                None
            ),
            [
                "the host broke a render loop in Cart (50 updates in 1000ms): the screen is dead until a reset. A component whose effect and store feed each other."
            ]
        );
        let moved = json!([{"seq": 1, "t": 1, "kind": "route", "route": "Feed", "path": ["Feed"]}, {"seq": 2, "t": 2, "kind": "route", "route": "Login", "path": ["Login"]}]);
        let sought = Some(Sought { route: Some("Feed".into()), ..Sought::default() });
        let requests = json!([{"id": 1, "method": "GET", "url": "/feed", "status": 200, "startedAt": 1}]);
        assert_eq!(
            explain_with(
                json!({"route": "Login", "elements": [{"i": 0, "kind": "view", "enabled": true}]}),
                requests,
                0,
                moved,
                sought
            ),
            [
                "the app was on Feed and moved to Login: something navigated after the step (a redirect, a gate, a modal). The trace shows the order."
            ]
        );
    }
}
