//! YAML 1.2 (the core schema lynkeus reads with the npm `yaml` package) into
//! JSON values, keeping the line each node starts on.

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};
use serde_json::{Map, Number, Value};

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
            let mut map = Map::new();
            let mut children = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let key = match convert(key)?.value {
                    Value::String(s) => s,
                    Value::Null => "null".to_owned(),
                    other @ (Value::Bool(_) | Value::Number(_)) => other.to_string(),
                    other => return Err(bad(format!("a mapping key must be a scalar, not {other}"))),
                };
                let value = convert(value)?;
                map.insert(key, value.value.clone());
                children.push(value);
            }
            Ok(Node { line, value: Value::Object(map), children })
        }
        YamlData::Tagged(_, inner) => convert(inner),
        YamlData::Alias(_) => Err(bad("YAML aliases are not supported in case files".to_owned())),
        YamlData::BadValue => Err(bad("a value that does not fit its tag".to_owned())),
    }
}

fn leaf(line: usize, value: Value) -> Node {
    Node { line, value, children: Vec::new() }
}

fn scalar_to_json(scalar: &Scalar<'_>) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => Number::from_f64(f.into_inner()).map_or(Value::Null, Value::Number),
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
    fn syntax_errors_carry_their_line() {
        let err = parse("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        assert_eq!(parse("").unwrap().value, Value::Null);
    }
}
