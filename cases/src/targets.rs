//! From the strings a case writes to protocol targets (spec §1.3).

use argus_proto::wire::{Scope, Target};

/// `#id`, `text`, `12` (an index in the last screen), `100,200` (a point),
/// and `[n]` after an id or a text to pick the n-th match.
pub fn parse_target(raw: &str) -> Target {
    if let Some((base, nth)) = split_nth(raw)
        && !base.bytes().all(|b| b.is_ascii_digit())
    {
        match parse_target(base) {
            Target::TestId { test_id, .. } => return Target::TestId { test_id, nth: Some(nth), within: None },
            Target::Text { text, .. } => return Target::Text { text, nth: Some(nth), within: None },
            _ => {}
        }
    }
    if let Some(id) = raw.strip_prefix('#') {
        return Target::test_id(id);
    }
    if let Some((x, y)) = raw.split_once(',')
        && is_digits(x)
        && is_digits(y)
        && let (Ok(x), Ok(y)) = (x.parse::<f64>(), y.parse::<f64>())
    {
        return Target::Point { x, y };
    }
    if is_digits(raw)
        && let Ok(i) = raw.parse()
    {
        return Target::Index { i };
    }
    Target::text(raw)
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `base[n]` → (base, n).
fn split_nth(raw: &str) -> Option<(&str, usize)> {
    let inner = raw.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let (base, digits) = (&inner[..open], &inner[open + 1..]);
    if base.is_empty() || !is_digits(digits) {
        return None;
    }
    Some((base, digits.parse().ok()?))
}

/// An `in` scope that is neither a testId nor a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("--in takes a #testId or a text")]
pub struct BadScope;

/// Narrows a testId or text target to a scope (`in`) and picks the `nth`
/// match; points and indexes are returned unchanged.
pub fn scoped_target(raw: &str, within: Option<&str>, nth: Option<usize>) -> Result<Target, BadScope> {
    let target = parse_target(raw);
    let scope = match within {
        None => None,
        Some(scope) => Some(match parse_target(scope) {
            Target::TestId { test_id, .. } => Scope::TestId { test_id },
            Target::Text { text, .. } => Scope::Text { text },
            _ => return Err(BadScope),
        }),
    };
    Ok(match target {
        Target::TestId { test_id, nth: own, within: _ } => Target::TestId { test_id, nth: nth.or(own), within: scope },
        Target::Text { text, nth: own, within: _ } => Target::Text { text, nth: nth.or(own), within: scope },
        other => other,
    })
}

/// A capitalised dotted name such as `Settings.Main` is a route, not text.
pub fn is_route(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_of(target: &Target) -> serde_json::Value {
        serde_json::to_value(target).unwrap()
    }

    #[test]
    fn the_target_vectors() {
        let cases = [
            ("#next-button", json!({"testId": "next-button"})),
            ("100,200", json!({"x": 100, "y": 200})),
            ("12", json!({"i": 12})),
            ("Some label", json!({"text": "Some label"})),
            ("#a,b", json!({"testId": "a,b"})),
            ("#field[2]", json!({"testId": "field", "nth": 2})),
            ("Ciudad[0]", json!({"text": "Ciudad", "nth": 0})),
            ("12[3]", json!({"text": "12[3]"})),
            ("-5,10", json!({"text": "-5,10"})),
            ("\"Continue\"", json!({"text": "\"Continue\""})),
        ];
        for (raw, expected) in cases {
            assert_eq!(json_of(&parse_target(raw)), expected, "{raw}");
        }
    }

    #[test]
    fn scoped_targets() {
        let t = scoped_target("#like-message-button", Some("hi from Ana"), None).unwrap();
        assert_eq!(json_of(&t), json!({"testId": "like-message-button", "within": {"text": "hi from Ana"}}));
        let t = scoped_target("#like-message-button", Some("#feed"), Some(2)).unwrap();
        assert_eq!(json_of(&t), json!({"testId": "like-message-button", "nth": 2, "within": {"testId": "feed"}}));
        let t = scoped_target("100,200", Some("#feed"), None).unwrap();
        assert_eq!(json_of(&t), json!({"x": 100, "y": 200}));
        assert_eq!(scoped_target("#x", Some("3"), None).unwrap_err().to_string(), "--in takes a #testId or a text");
    }

    #[test]
    fn routes_are_capitalised_dotted_names() {
        for yes in ["Settings.Main", "Hello", "A_b.C1"] {
            assert!(is_route(yes), "{yes}");
        }
        for no in ["#x", "settings.main", "hello world", "Settings.", ""] {
            assert!(!is_route(no), "{no}");
        }
    }
}
