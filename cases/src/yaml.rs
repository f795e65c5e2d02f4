//! YAML 1.2 (the core schema lynkeus reads with the npm `yaml` package) into
//! JSON values, keeping the line each node starts on.

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};
use serde_json::{Map, Number, Value};

use crate::js::js_string;

/// A YAML node converted to JSON, with the 1-based line it starts on and,
/// for sequences and mappings, its children's positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub value: Value,
    /// Sequence items, or mapping values in key order.
    pub children: Vec<Node>,
}

/// A syntax error: the message and the 1-based line within the text parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub line: usize,
    pub message: String,
}

/// Parses one YAML document; an empty text is `null`.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let documents = MarkedYaml::load_from_str(text)
        .map_err(|e| SyntaxError { line: e.marker().line(), message: e.info().to_owned() })?;
    match documents.first() {
        None => Ok(Node { line: 1, value: Value::Null, children: Vec::new() }),
        Some(document) => convert(document),
    }
}

fn convert(node: &MarkedYaml<'_>) -> Result<Node, SyntaxError> {
    let line = node.span.start.line().max(1);
    let bad = |message: String| SyntaxError { line, message };
    match &node.data {
        YamlData::Value(scalar) => Ok(leaf(line, scalar_to_json(scalar))),
        YamlData::Representation(text, style, tag) => {
            match Scalar::parse_from_cow_and_metadata(text.clone(), *style, tag.as_ref()) {
                Some(scalar) => Ok(leaf(line, scalar_to_json(&scalar))),
                None => Err(bad(format!("{text:?} does not fit its tag"))),
            }
        }
        YamlData::Sequence(items) => {
            let children = items.iter().map(convert).collect::<Result<Vec<_>, _>>()?;
            let value = Value::Array(children.iter().map(|c| c.value.clone()).collect());
            Ok(Node { line, value, children })
        }
        YamlData::Mapping(entries) => {
            let mut pairs: Vec<(String, Node)> = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let key_node = convert(key)?;
                let key = match key_node.value {
                    Value::String(s) => s,
                    other @ (Value::Null | Value::Bool(_) | Value::Number(_)) => js_string(&other),
                    other => return Err(bad(format!("a mapping key must be a scalar, not {other}"))),
                };
                if pairs.iter().any(|(k, _)| *k == key) {
                    let message = format!("the key {key:?} appears twice in one mapping");
                    return Err(SyntaxError { line: key_node.line, message });
                }
                pairs.push((key, convert(value)?));
            }
            // A JavaScript object lists integer-like keys first, in numeric
            // order, then the others as written; lynkeus reads the file into
            // one, so labels, ids and matrix order follow that order.
            let index_of = |key: &str| array_index(key);
            pairs.sort_by_key(|(key, _)| index_of(key).map_or((1, 0), |i| (0, i)));
            let map: Map<String, Value> = pairs.iter().map(|(k, node)| (k.clone(), node.value.clone())).collect();
            let children = pairs.into_iter().map(|(_, node)| node).collect();
            Ok(Node { line, value: Value::Object(map), children })
        }
        YamlData::Tagged(_, inner) => convert(inner),
        YamlData::Alias(_) => Err(bad("YAML aliases are not supported in case files".to_owned())),
        YamlData::BadValue => Err(bad("a value that does not fit its tag".to_owned())),
    }
}

/// 2^53: the integers a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The array index a key names, as JavaScript decides: digits without a
/// leading zero, below 2^32 − 1.
fn array_index(key: &str) -> Option<u32> {
    let canonical = !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()) && (key == "0" || !key.starts_with('0'));
    key.parse::<u32>().ok().filter(|i| canonical && *i < u32::MAX)
}

fn leaf(line: usize, value: Value) -> Node {
    Node { line, value, children: Vec::new() }
}

fn scalar_to_json(scalar: &Scalar<'_>) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        // JavaScript has one number type: `1.0` is the integer 1 there, and
        // lynkeus labels, ids and sends it as `1`.
        Scalar::FloatingPoint(f) => {
            let f = f.into_inner();
            if f.fract() == 0.0 && f.abs() < MAX_SAFE_INTEGER {
                Value::Number((f as i64).into())
            } else {
                Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        }
        Scalar::String(s) => Value::String(s.to_string()),
    }
}

impl Node {
    /// Adds `by` to every line, for a text cut out of a larger file.
    pub fn shift_lines(&mut self, by: usize) {
        self.line += by;
        for child in &mut self.children {
            child.shift_lines(by);
        }
    }

    /// The child under `key`, for a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        let Value::Object(map) = &self.value else { return None };
        map.keys().position(|k| k == key).map(|i| &self.children[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn core_schema_types_and_lines() {
        let node = parse("on: device\nyes: no\nn: 12\nf: 2.5\ns: \"12\"\nlist:\n  - a\n  - { b: 1 }\n").unwrap();
        assert_eq!(
            node.value,
            json!({"on": "device", "yes": "no", "n": 12, "f": 2.5, "s": "12", "list": ["a", {"b": 1}]})
        );
        let list = node.get("list").unwrap();
        assert_eq!(list.children[0].line, 7);
        assert_eq!(list.children[1].line, 8);
    }

    #[test]
    fn numbers_and_keys_as_javascript_holds_them() {
        let node = parse("b: 1.0\n2: x\n1e3: y\n10: z\n\"01\": w\na: [2.50, 1e3, -0.0]\ntrue: t\n").unwrap();
        let keys: Vec<&String> = node.value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["2", "10", "1000", "b", "01", "a", "true"]);
        assert_eq!(node.value["b"], json!(1));
        assert_eq!(node.value["a"], json!([2.5, 1000, 0]));
        assert_eq!(node.get("10").unwrap().line, 4, "children follow their keys");
        // Two keys YAML tells apart that are one key to JavaScript.
        let err = parse("a: 1\n1: 2\n\"1\": 3\n").unwrap_err();
        assert_eq!((err.line, err.message.as_str()), (3, "the key \"1\" appears twice in one mapping"));
    }

    #[test]
    fn syntax_errors_carry_their_line() {
        let err = parse("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        assert_eq!(parse("").unwrap().value, Value::Null);
    }
}
