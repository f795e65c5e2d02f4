//! JavaScript's string and number forms, as lynkeus (a JavaScript program)
//! writes them into labels, messages and JSON: `String(value)`,
//! `JSON.stringify`, `Number.prototype.toString` and `String.prototype.slice`
//! in UTF-16 units. A leaf: the case format, its YAML and its values use it.

use serde_json::Value;

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

/// The first `units` UTF-16 code units, as `String.prototype.slice` cuts
/// (a surrogate pair split in half loses its half).
pub fn cut_utf16(text: &str, units: usize) -> String {
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
