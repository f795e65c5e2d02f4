//! Step values: `{{alias.path}}` interpolation (§1.5), `dig` and the
//! `assert` matchers (§1.8, §6.4), with JavaScript's string forms (`js`)
//! where lynkeus relies on them. Labels are the case format's (`format`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::js::{js_json, js_string};

/// Reads a dotted path: keys, list indexes, and `*` to collect from every
/// element of a list.
pub fn dig(value: &Value, path: &str) -> Option<Value> {
    let mut parts = path.split('.');
    let Some(head) = parts.next() else { return Some(value.clone()) };
    let rest: Vec<&str> = parts.collect();
    let rest = rest.join(".");
    let next = match (head, value) {
        ("*", Value::Array(items)) => {
            let collected: Vec<Value> = items
                .iter()
                .filter_map(|item| if rest.is_empty() { Some(item.clone()) } else { dig(item, &rest) })
                .collect();
            return Some(Value::Array(collected));
        }
        (key, Value::Object(map)) => map.get(key)?,
        (index, Value::Array(items)) => items.get(index.parse::<usize>().ok()?)?,
        _ => return None,
    };
    if rest.is_empty() { Some(next.clone()) } else { dig(next, &rest) }
}

/// What `{{name.path}}` can read.
pub trait Scope {
    fn alias(&self, name: &str) -> Option<&Value>;
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Scope for HashMap<String, Value> {
    fn alias(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

/// Why a reference or a matcher cannot be used, in lynkeus' words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("no alias '{0}' (add `as: {0}` to the step that creates it)")]
    NoAlias(String),
    #[error("{{{{{name}.{path}}}}} is empty")]
    Empty { name: String, path: String },
    #[error("matches: {pattern:?} is not a regex: {error}")]
    NotARegex { pattern: String, error: String },
    #[error("{0} is not a matcher (one of {list})", list = MATCHERS.join(", "))]
    NotAMatcher(String),
}

/// Replaces every `{{alias.path}}`. A string that is only a reference keeps
/// the value's type; inside other text the value is stringified.
pub fn interpolate(value: &Value, scope: &dyn Scope) -> Result<Value, ValueError> {
    match value {
        Value::String(text) => interpolate_text(text, scope),
        Value::Array(items) => items.iter().map(|v| interpolate(v, scope)).collect::<Result<_, _>>().map(Value::Array),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| interpolate(v, scope).map(|v| (k.clone(), v)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

/// `(start, end, name, path)` of each `{{name.path}}` in `text`.
fn references(text: &str) -> Vec<(usize, usize, &str, &str)> {
    let mut refs = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find("{{").map(|i| i + from) {
        let Some(end) = text[start..].find("}}").map(|i| i + start + 2) else { break };
        let inner = text[start + 2..end - 2].trim();
        if let Some((name, path)) = inner.split_once('.')
            && !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            && !path.is_empty()
            && path.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '*' | '-'))
        {
            refs.push((start, end, name, path));
            from = end;
        } else {
            from = start + 2;
        }
    }
    refs
}

fn resolve(name: &str, path: &str, scope: &dyn Scope) -> Result<Value, ValueError> {
    let value = match (name, path) {
        ("random", "letters") => Some(Value::String(random_from(b"abcdefghijklmnopqrstuvwxyz"))),
        ("random", "digits") => Some(Value::String(random_from(b"0123456789"))),
        ("env", var) => scope.env(var).map(Value::String),
        _ => {
            let alias = scope.alias(name).ok_or_else(|| ValueError::NoAlias(name.to_owned()))?;
            dig(alias, path)
        }
    };
    match value {
        None | Some(Value::Null) => Err(ValueError::Empty { name: name.to_owned(), path: path.to_owned() }),
        Some(value) => Ok(value),
    }
}

fn interpolate_text(text: &str, scope: &dyn Scope) -> Result<Value, ValueError> {
    let refs = references(text);
    if let [(0, end, name, path)] = refs[..]
        && end == text.len()
    {
        return resolve(name, path, scope);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end, name, path) in refs {
        out.push_str(&text[last..start]);
        match resolve(name, path, scope)? {
            Value::String(s) => out.push_str(&s),
            other @ (Value::Object(_) | Value::Array(_)) => out.push_str(&js_json(&other)),
            other => out.push_str(&js_string(&other)),
        }
        last = end;
    }
    out.push_str(&text[last..]);
    Ok(Value::String(out))
}

fn random_from(alphabet: &[u8]) -> String {
    (0..6).map(|_| alphabet[rand::random_range(0..alphabet.len())] as char).collect()
}

/// The matchers `assert` knows, in the order lynkeus looks for them.
pub const MATCHERS: [&str; 8] = ["equals", "near", "gte", "lte", "present", "absent", "includes", "matches"];

/// The first matcher named in `params`, with its expected value.
pub fn matcher_of(params: &Map<String, Value>) -> Option<(&'static str, Value)> {
    MATCHERS.iter().find_map(|m| params.get(*m).map(|v| (*m, v.clone())))
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
        _ => None,
    }
}

/// Whether `actual` (absent: `None`) satisfies the matcher.
pub fn matches(actual: Option<&Value>, matcher: &str, expected: &Value) -> Result<bool, ValueError> {
    let actual_or_null = actual.unwrap_or(&Value::Null);
    Ok(match matcher {
        "equals" => match (number(actual_or_null), number(expected)) {
            (Some(a), Some(b)) => a == b,
            _ => actual.is_some() && js_string(actual_or_null) == js_string(expected),
        },
        "near" => matches!((number(actual_or_null), number(expected)), (Some(a), Some(b)) if (a - b).abs() <= 0.01),
        "gte" => matches!((number(actual_or_null), number(expected)), (Some(a), Some(b)) if a >= b),
        "lte" => matches!((number(actual_or_null), number(expected)), (Some(a), Some(b)) if a <= b),
        "present" => !actual_or_null.is_null(),
        "absent" => actual_or_null.is_null(),
        "includes" => {
            let needle = js_string(expected);
            match actual_or_null {
                Value::Array(items) => items.iter().any(|item| js_string(item).contains(&needle)),
                Value::Null => false,
                other => js_string(other).contains(&needle),
            }
        }
        "matches" => {
            let pattern = js_string(expected);
            let regex = regex::Regex::new(&pattern)
                .map_err(|e| ValueError::NotARegex { pattern: pattern.clone(), error: e.to_string() })?;
            actual.is_some() && regex.is_match(&js_string(actual_or_null))
        }
        other => return Err(ValueError::NotAMatcher(other.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dig_reads_paths_indexes_and_stars() {
        let v = json!({"accounts": [{"code": "usd"}, {"code": "eur"}], "user": {"id": 7}});
        assert_eq!(dig(&v, "accounts.1.code"), Some(json!("eur")));
        assert_eq!(dig(&v, "accounts.*.code"), Some(json!(["usd", "eur"])));
        assert_eq!(dig(&v, "user.name.first"), None);
        assert_eq!(dig(&v, "user.id"), Some(json!(7)));
    }

    #[test]
    fn interpolation_keeps_types_and_names_what_is_missing() {
        let scope: HashMap<String, Value> = [("u".to_owned(), json!({"user_id": 7, "name": "Ana"}))].into();
        let out = interpolate(&json!({"id": "{{u.user_id}}", "hi": "hi {{ u.name }}", "n": 3}), &scope).unwrap();
        assert_eq!(out, json!({"id": 7, "hi": "hi Ana", "n": 3}));
        let random = interpolate(&json!("x{{random.letters}}"), &scope).unwrap();
        let random = random.as_str().unwrap();
        assert!(random.len() == 7 && random[1..].bytes().all(|b| b.is_ascii_lowercase()), "{random}");
        assert_eq!(
            interpolate(&json!("{{v.user_id}}"), &scope).unwrap_err().to_string(),
            "no alias 'v' (add `as: v` to the step that creates it)"
        );
        assert_eq!(interpolate(&json!("{{u.phone}}"), &scope).unwrap_err().to_string(), "{{u.phone}} is empty");
        assert_eq!(
            interpolate(&json!("{{env.ARGUS_TEST_NEVER_SET_X}}"), &scope).unwrap_err().to_string(),
            "{{env.ARGUS_TEST_NEVER_SET_X}} is empty"
        );
        assert_eq!(interpolate(&json!("{{ not a ref }}"), &scope).unwrap(), json!("{{ not a ref }}"));
    }

    #[test]
    fn the_matcher_vectors() {
        assert!(matches(Some(&json!("25.0")), "equals", &json!(25)).unwrap());
        assert!(matches(Some(&json!("abc")), "equals", &json!("abc")).unwrap());
        assert!(matches(Some(&json!(["usd", "bridge_usd"])), "includes", &json!("bridge")).unwrap());
        assert!(!matches(Some(&json!(9)), "gte", &json!(10)).unwrap());
        assert!(matches(Some(&Value::Null), "absent", &json!(true)).unwrap());
        assert!(matches(None, "absent", &json!(true)).unwrap());
        assert!(matches(Some(&json!("AUTORIZADO")), "matches", &json!("^AUT")).unwrap());
        assert!(matches(Some(&json!(1.005)), "near", &json!(1)).unwrap());
        assert!(matches(Some(&json!(3)), "lte", &json!("3")).unwrap());
        assert!(!matches(None, "present", &json!(true)).unwrap());
        assert!(matches(Some(&json!("x")), "matches", &json!("(")).is_err());
    }

    #[test]
    fn matcher_of_picks_the_first_matcher() {
        let params = json!({"path": "a", "equals": 1, "user": "u"});
        assert_eq!(matcher_of(params.as_object().unwrap()), Some(("equals", json!(1))));
        assert_eq!(matcher_of(json!({"path": "a"}).as_object().unwrap()), None);
    }
}
