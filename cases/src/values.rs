//! Step values: labels (§1.9), `{{alias.path}}` interpolation (§1.5), `dig`
//! and the `assert` matchers (§1.8, §6.4), with JavaScript's string forms
//! where lynkeus relies on them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::format::Step;

/// The longest label, in UTF-16 code units as JavaScript counts them.
pub const MAX_LABEL_UNITS: usize = 140;

/// `String(value)` as JavaScript writes it.
pub fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        Value::Number(n) => js_number(n),
        Value::Array(items) => {
            items.iter().map(|v| if v.is_null() { String::new() } else { js_string(v) }).collect::<Vec<_>>().join(",")
        }
        Value::Object(_) => "[object Object]".to_owned(),
        Value::Bool(b) => b.to_string(),
    }
}

/// `JSON.stringify(value)`: JSON with numbers as JavaScript writes them
/// (`1000`, not `1000.0`; `1e+21`, not `1e21`).
pub fn js_json(value: &Value) -> String {
    let mut out = String::new();
    write_js_json(value, &mut out);
    out
}

fn write_js_json(value: &Value, out: &mut String) {
    match value {
        Value::Number(n) => out.push_str(&js_number(n)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_js_json(item, out);
            }
            out.push('}');
        }
        // Strings, booleans and null are written as serde_json writes them,
        // which escapes the same characters JSON.stringify does.
        other => out.push_str(&other.to_string()),
    }
}

/// `Number.prototype.toString()` (ECMA-262 Number::toString, radix 10): the
/// shortest digits that read back as the same double, without a fraction
/// for an integer, in exponent form below 1e-6 and from 1e21.
pub fn js_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // `{:e}` gives the shortest round-trip digits: `d.ddde±x`.
    let formatted = format!("{:e}", x.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    // The value is 0.digits × 10^n.
    let n = exponent.parse::<i32>().unwrap_or(0) + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e < 0 { format!("-{}", -e) } else { format!("+{e}") };
        if k == 1 { format!("{digits}e{e}") } else { format!("{}.{}e{e}", &digits[..1], &digits[1..]) }
    };
    format!("{sign}{body}")
}

/// `RunStep.step`: the verb, then the value before interpolation, as the
/// lynkeus runner's `label()` writes it: an object or a list (its indexes as
/// keys) as `k: v` pairs, nested values as JSON, anything else as `String()`.
/// An empty object or list leaves the space after the verb, as lynkeus does.
pub fn label(step: &Step) -> String {
    fn pair(key: &str, value: &Value) -> String {
        match value {
            Value::Object(_) | Value::Array(_) | Value::Null => format!("{key}: {}", js_json(value)),
            other => format!("{key}: {}", js_string(other)),
        }
    }
    let text = match &step.value {
        Value::Null => step.verb.clone(),
        Value::Object(map) => {
            let parts: Vec<String> = map.iter().map(|(k, v)| pair(k, v)).collect();
            format!("{} {}", step.verb, parts.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().enumerate().map(|(i, v)| pair(&i.to_string(), v)).collect();
            format!("{} {}", step.verb, parts.join(", "))
        }
        other => format!("{} {}", step.verb, js_string(other)),
    };
    cut_utf16(&text, MAX_LABEL_UNITS)
}

/// The first `units` UTF-16 code units, as `String.prototype.slice` cuts
/// (a surrogate pair split in half loses its half).
fn cut_utf16(text: &str, units: usize) -> String {
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        used += c.len_utf16();
        if used > units {
            break;
        }
        out.push(c);
    }
    out
}

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

/// Replaces every `{{alias.path}}`. A string that is only a reference keeps
/// the value's type; inside other text the value is stringified.
pub fn interpolate(value: &Value, scope: &dyn Scope) -> Result<Value, String> {
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

fn resolve(name: &str, path: &str, scope: &dyn Scope) -> Result<Value, String> {
    let value = match (name, path) {
        ("random", "letters") => Some(Value::String(random_from(b"abcdefghijklmnopqrstuvwxyz"))),
        ("random", "digits") => Some(Value::String(random_from(b"0123456789"))),
        ("env", var) => scope.env(var).map(Value::String),
        _ => {
            let alias = scope
                .alias(name)
                .ok_or_else(|| format!("no alias '{name}' (add `as: {name}` to the step that creates it)"))?;
            dig(alias, path)
        }
    };
    match value {
        None | Some(Value::Null) => Err(format!("{{{{{name}.{path}}}}} is empty")),
        Some(value) => Ok(value),
    }
}

fn interpolate_text(text: &str, scope: &dyn Scope) -> Result<Value, String> {
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
pub fn matches(actual: Option<&Value>, matcher: &str, expected: &Value) -> Result<bool, String> {
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
            let regex = regex::Regex::new(&pattern).map_err(|e| format!("matches: {pattern:?} is not a regex: {e}"))?;
            actual.is_some() && regex.is_match(&js_string(actual_or_null))
        }
        other => return Err(format!("{other} is not a matcher (one of {})", MATCHERS.join(", "))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(verb: &str, value: Value) -> Step {
        Step { verb: verb.into(), value, on: None, line: 1 }
    }

    #[test]
    fn the_label_vectors() {
        let cases = [
            (step("app.back", Value::Null), "app.back"),
            (step("app.press", json!("#send")), "app.press #send"),
            (step("app.see", json!("Sent")), "app.see Sent"),
            (step("create_user", json!({"as": "a"})), "create_user as: a"),
            (step("create_user", json!({"as": "u", "name": "Ana"})), "create_user as: u, name: Ana"),
            (
                step("app.see", json!({"text": "25 points", "timeoutMs": 10000})),
                "app.see text: 25 points, timeoutMs: 10000",
            ),
            (
                step("app.nav", json!({"route": "Checkout.Confirm", "params": {"id": "abc"}})),
                "app.nav route: Checkout.Confirm, params: {\"id\":\"abc\"}",
            ),
            (step("give_points", json!({"user": "u", "points": "{{u.x}}"})), "give_points user: u, points: {{u.x}}"),
            (step("app.wait", json!(500)), "app.wait 500"),
        ];
        for (step, expected) in cases {
            assert_eq!(label(&step), expected);
        }
    }

    #[test]
    fn labels_follow_javascripts_object_and_string_rules() {
        let cases = [
            (step("app.screen", json!({})), "app.screen "),
            (step("pick", json!(["a", "b"])), "pick 0: a, 1: b"),
            (step("pick", json!([])), "pick "),
            (
                step("seed", json!({"n": 2.5, "big": 1e21, "tiny": 1e-7, "list": [1.5, null]})),
                "seed n: 2.5, big: 1e+21, tiny: 1e-7, list: [1.5,null]",
            ),
            (step("seed", json!({"none": null, "on": true})), "seed none: null, on: true"),
            (step("app.wait", json!(1e3)), "app.wait 1000"),
            (step("app.wait", json!(0.000001)), "app.wait 0.000001"),
            (step("app.wait", json!(-0.5)), "app.wait -0.5"),
        ];
        for (step, expected) in cases {
            assert_eq!(label(&step), expected);
        }
    }

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        let n = |x: f64| js_number(&serde_json::Number::from_f64(x).unwrap());
        assert_eq!(n(1.0), "1");
        assert_eq!(n(1e3), "1000");
        assert_eq!(n(123456789012345680000.0), "123456789012345680000");
        assert_eq!(n(1e21), "1e+21");
        assert_eq!(n(1.5e22), "1.5e+22");
        assert_eq!(n(0.1), "0.1");
        assert_eq!(n(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(n(1e-6), "0.000001");
        assert_eq!(n(1.25e-7), "1.25e-7");
        assert_eq!(n(-0.0), "0");
        assert_eq!(n(-2.5), "-2.5");
        assert_eq!(js_json(&json!({"a": [1.0, "x\"y"], "b": 1e300})), "{\"a\":[1,\"x\\\"y\"],\"b\":1e+300}");
    }

    #[test]
    fn labels_are_cut_at_140_utf16_units() {
        let long = step("exec", json!("😀".repeat(100)));
        let cut = label(&long);
        assert_eq!(cut.encode_utf16().count(), 139, "a pair is not split: 5 for `exec ` + 67 pairs");
        assert!(cut.starts_with("exec 😀"));
    }

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
            interpolate(&json!("{{v.user_id}}"), &scope).unwrap_err(),
            "no alias 'v' (add `as: v` to the step that creates it)"
        );
        assert_eq!(interpolate(&json!("{{u.phone}}"), &scope).unwrap_err(), "{{u.phone}} is empty");
        assert_eq!(
            interpolate(&json!("{{env.ARGUS_TEST_NEVER_SET_X}}"), &scope).unwrap_err(),
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
