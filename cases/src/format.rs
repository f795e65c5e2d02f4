//! The case file (spec §1.1, §1.4): YAML frontmatter between `---` lines,
//! then a YAML body with `setup` and `steps`. Matrices expand here, before
//! anything runs, so each combination is its own case.
//!
//! Unlike lynkeus, a UTF-8 byte-order mark and CRLF line endings are
//! accepted: files edited on Windows run unchanged.

use serde_json::{Map, Value};

use crate::error::CaseError;
use crate::js::{cut_utf16, js_json, js_string};
use crate::yaml::{self, Node};

/// The largest case file accepted.
pub const MAX_CASE_BYTES: usize = 1 << 20;
/// The most cases one matrix may expand to.
pub const MAX_MATRIX_CASES: usize = 256;

/// One step: `verb: value`, perhaps guarded by `on`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub verb: String,
    pub value: Value,
    pub on: Option<String>,
    /// The line of the file the step stands on.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The path as given, as errors and `cases.jsonl` name it.
    pub file: String,
    /// With a matrix, the base id plus `[k=v,…]`.
    pub id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Frontmatter keys lynkeus does not read.
    pub meta: Map<String, Value>,
    pub setup: Vec<Step>,
    pub steps: Vec<Step>,
    pub expected: Option<String>,
}

impl Case {
    /// Setup first, then steps.
    pub fn all_steps(&self) -> impl Iterator<Item = &Step> {
        self.setup.iter().chain(&self.steps)
    }
}

/// Parses one case file into its cases: one, or one per matrix combination.
pub fn parse_case(text: &str, file: &str) -> Result<Vec<Case>, CaseError> {
    CaseFile::parse(text, file)?.cases()
}

/// A case file read and checked up to its matrix: its cases' ids are known,
/// and each case is built when asked for, so a worker that runs one
/// combination of a 200-case matrix builds that one, not all 200.
pub struct CaseFile {
    file: String,
    /// Normalised ([`normalise`]).
    text: String,
    /// Each case's id and its matrix values (none without a matrix).
    combinations: Vec<(String, Vec<(String, Value)>)>,
    parsed: std::sync::Mutex<Parsed>,
}

impl CaseFile {
    pub fn parse(text: &str, file: &str) -> Result<Self, CaseError> {
        if text.len() > MAX_CASE_BYTES {
            return Err(CaseError::new(
                file,
                None,
                format!("{} bytes; a case file may have {MAX_CASE_BYTES}", text.len()),
            ));
        }
        let text = normalise(text);
        let (front, _) = split(&text, file)?;
        let frontmatter = parse_yaml(front, file, 2)?;
        let base_id = match frontmatter.value.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => stem(file),
        };
        let matrix = match frontmatter.value.get("matrix") {
            Some(Value::Object(m)) if !m.is_empty() => Some(m.clone()),
            _ => None,
        };
        let combinations = match matrix {
            None => {
                check_no_matrix_refs(&text, file, &Map::new())?;
                vec![(base_id, Vec::new())]
            }
            Some(matrix) => {
                // lynkeus would expand an empty list to no case at all: the
                // file would vanish from the run without a word.
                if let Some((key, _)) = matrix.iter().find(|(_, v)| v.as_array().is_some_and(Vec::is_empty)) {
                    let line = frontmatter.get("matrix").and_then(|m| m.get(key)).map(|n| n.line);
                    return Err(CaseError::new(
                        file,
                        line,
                        format!(
                            "matrix.{key} is an empty list: the file would expand to no case; give it a value or drop the key"
                        ),
                    ));
                }
                let combinations = combinations(&matrix);
                if combinations.len() > MAX_MATRIX_CASES {
                    let line = frontmatter.get("matrix").map(|n| n.line);
                    return Err(CaseError::new(
                        file,
                        line,
                        format!("its matrix expands to {} cases; the limit is {MAX_MATRIX_CASES}", combinations.len()),
                    ));
                }
                check_no_matrix_refs(&text, file, &matrix)?;
                combinations
                    .into_iter()
                    .map(|combination| {
                        let suffix: Vec<String> =
                            combination.iter().map(|(k, v)| format!("{k}={}", js_string(v))).collect();
                        (format!("{base_id}[{}]", suffix.join(",")), combination)
                    })
                    .collect()
            }
        };
        Ok(Self { file: file.to_owned(), text, combinations, parsed: Default::default() })
    }

    /// Its cases' ids, in the file's order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.combinations.iter().map(|(id, _)| id.as_str())
    }

    /// Every case of the file.
    pub fn cases(&self) -> Result<Vec<Case>, CaseError> {
        (0..self.combinations.len()).map(|i| self.build(i)).collect()
    }

    /// The case `id`, or `None` when the file has no such case.
    pub fn case(&self, id: &str) -> Option<Result<Case, CaseError>> {
        let index = self.combinations.iter().position(|(own, _)| own == id)?;
        Some(self.build(index))
    }

    fn build(&self, index: usize) -> Result<Case, CaseError> {
        let (id, combination) = &self.combinations[index];
        // The frontmatter, or the body, that no `{{matrix.…}}` touches is
        // the same text in every combination: parsed once, not once per case.
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        let text = if combination.is_empty() {
            std::borrow::Cow::Borrowed(self.text.as_str())
        } else {
            std::borrow::Cow::Owned(substitute(&self.text, combination))
        };
        build_with(&text, &self.file, id.clone(), &mut parsed)
    }
}

/// Parts of one file already parsed: per first line, the last text parsed
/// there. A part no `{{matrix.…}}` touches is the same text in every
/// combination and is found again by one comparison, without copying or
/// hashing it; a part that differs is parsed anew.
/// Shared, not copied: a matrix of 200 values is a frontmatter of 200
/// nodes, and each of its 200 cases would copy them all.
#[derive(Default)]
struct Parsed(std::collections::HashMap<usize, (String, std::sync::Arc<Node>)>);

impl Parsed {
    fn get(&mut self, text: &str, file: &str, first_line: usize) -> Result<std::sync::Arc<Node>, CaseError> {
        if let Some((seen, node)) = self.0.get(&first_line)
            && seen == text
        {
            return Ok(node.clone());
        }
        let node = std::sync::Arc::new(parse_yaml(text, file, first_line)?);
        self.0.insert(first_line, (text.to_owned(), node.clone()));
        Ok(node)
    }
}

/// Strips a byte-order mark and turns CRLF (and lone CR) into LF.
fn normalise(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\r') { text.replace("\r\n", "\n").replace('\r', "\n") } else { text.to_owned() }
}

/// `---\n<frontmatter>\n---\n<body>`.
fn split<'a>(text: &'a str, file: &str) -> Result<(&'a str, &'a str), CaseError> {
    let no_frontmatter = || CaseError::new(file, Some(1), "no frontmatter (a case starts with --- and its id)");
    let rest = text.strip_prefix("---\n").ok_or_else(no_frontmatter)?;
    // The frontmatter ends at the first line that is exactly `---`.
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line == "---\n" || (line == "---" && offset + line.len() == rest.len()) {
            let front = rest[..offset].strip_suffix('\n').unwrap_or(&rest[..offset]);
            return Ok((front, &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(no_frontmatter())
}

/// Parses a part of the file that starts on `first_line`; lines in the
/// result and in errors are the file's.
fn parse_yaml(text: &str, file: &str, first_line: usize) -> Result<Node, CaseError> {
    let mut node = yaml::parse(text).map_err(|e| CaseError::new(file, Some(e.line + first_line - 1), e.message))?;
    node.shift_lines(first_line - 1);
    Ok(node)
}

fn stem(file: &str) -> String {
    let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
    name.strip_suffix(".md").unwrap_or(name).to_owned()
}

fn build_with(text: &str, file: &str, id: String, parsed: &mut Parsed) -> Result<Case, CaseError> {
    let (front, body) = split(text, file)?;
    let frontmatter = parsed.get(front, file, 2)?;
    let body_line = front.lines().count() + 3;
    let body = parsed.get(body, file, body_line)?;
    let empty = Map::new();
    let front = match &frontmatter.value {
        Value::Object(map) => map,
        Value::Null => &empty,
        other => return Err(CaseError::new(file, Some(2), format!("the frontmatter must be a mapping, not {other}"))),
    };
    let text_field = |key: &str| front.get(key).and_then(Value::as_str).map(str::to_owned);
    let (title, description) = (text_field("title"), text_field("description"));
    // What the case is, not what it says about itself (the matrix it came
    // from is not copied into each of its cases).
    let meta: Map<String, Value> = front
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "id" | "title" | "description" | "matrix"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if !matches!(body.value, Value::Object(_) | Value::Null) {
        return Err(CaseError::new(file, Some(body.line), "the body must be a mapping with setup and steps"));
    }
    let list = |key: &str| -> Result<Vec<Step>, CaseError> {
        match body.get(key) {
            None => Ok(Vec::new()),
            Some(node) if node.value.is_null() => Ok(Vec::new()),
            Some(node) if node.value.is_array() => steps_of(node, key, file),
            Some(node) => Err(CaseError::new(file, Some(node.line), format!("{key} is not a list"))),
        }
    };
    Ok(Case {
        file: file.to_owned(),
        id,
        title,
        description,
        meta,
        setup: list("setup")?,
        steps: list("steps")?,
        expected: body.value.get("expected").and_then(Value::as_str).map(|s| s.trim().to_owned()),
    })
}

fn steps_of(list: &Node, key: &str, file: &str) -> Result<Vec<Step>, CaseError> {
    let mut steps = Vec::new();
    for (index, item) in list.children.iter().enumerate() {
        flatten(item, &format!("{key}[{index}]"), None, file, &mut steps)?;
    }
    Ok(steps)
}

fn flatten(item: &Node, place: &str, on: Option<&str>, file: &str, out: &mut Vec<Step>) -> Result<(), CaseError> {
    let line = item.line;
    let one_step =
        || CaseError::new(file, Some(line), format!("{place} must be one step, as `verb: value`, not {}", item.value));
    match &item.value {
        Value::String(verb) => {
            out.push(Step { verb: verb.clone(), value: Value::Null, on: on.map(str::to_owned), line });
            Ok(())
        }
        Value::Object(map) if map.contains_key("do") => {
            let Some(Value::String(guard)) = map.get("on") else {
                return Err(CaseError::new(file, Some(line), format!("{place} has `do` without `on`")));
            };
            let inner = item.get("do").expect("checked above");
            match &inner.value {
                Value::Array(_) => {
                    for (i, child) in inner.children.iter().enumerate() {
                        flatten(child, &format!("{place}.do[{i}]"), Some(guard), file, out)?;
                    }
                    Ok(())
                }
                _ => flatten(inner, &format!("{place}.do"), Some(guard), file, out),
            }
        }
        Value::Object(map) if map.len() == 1 => {
            let (verb, value) = map.iter().next().expect("one entry");
            out.push(Step { verb: verb.clone(), value: value.clone(), on: on.map(str::to_owned), line });
            Ok(())
        }
        _ => Err(one_step()),
    }
}

/// Every combination, first key varying slowest; a scalar counts as a
/// one-element list.
fn combinations(matrix: &Map<String, Value>) -> Vec<Vec<(String, Value)>> {
    let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (key, values) in matrix {
        let values = match values {
            Value::Array(items) => items.clone(),
            single => vec![single.clone()],
        };
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push((key.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    out
}

fn matrix_refs(text: &str) -> Vec<(usize, usize, String)> {
    // `{{ matrix.key }}`: (start, end, key)
    let mut refs = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find("{{").map(|i| i + from) {
        let Some(end) = text[start..].find("}}").map(|i| i + start + 2) else { break };
        let inner = text[start + 2..end - 2].trim();
        if let Some(key) = inner.strip_prefix("matrix.")
            && !key.is_empty()
            && key.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            refs.push((start, end, key.to_owned()));
        }
        from = start + 2;
    }
    refs
}

fn check_no_matrix_refs(text: &str, file: &str, matrix: &Map<String, Value>) -> Result<(), CaseError> {
    for (start, _, key) in matrix_refs(text) {
        if !matrix.contains_key(&key) {
            let line = text[..start].matches('\n').count() + 1;
            return Err(CaseError::new(file, Some(line), format!("{{{{matrix.{key}}}}} is not in its matrix")));
        }
    }
    Ok(())
}

fn substitute(text: &str, combination: &[(String, Value)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end, key) in matrix_refs(text) {
        if let Some((_, value)) = combination.iter().find(|(k, _)| *k == key) {
            out.push_str(&text[last..start]);
            out.push_str(&js_string(value));
            last = end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The longest label, in UTF-16 code units as JavaScript counts them.
pub const MAX_LABEL_UNITS: usize = 140;

/// `RunStep.step`: the verb, then the value before interpolation, as the
/// lynkeus runner's `label()` writes it: an object or a list (its indexes as
/// keys) as `k: v` pairs, nested values as JSON, anything else as `String()`.
/// An empty object or list leaves the space after the verb, as lynkeus does.
pub fn label(step: &Step) -> String {
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

/// One `k: v` of a label: nested values as JSON, anything else as `String()`.
fn pair(key: &str, value: &Value) -> String {
    match value {
        Value::Object(_) | Value::Array(_) | Value::Null => format!("{key}: {}", js_json(value)),
        other => format!("{key}: {}", js_string(other)),
    }
}

/// What `app.see {absent: true}` says is still there, as lynkeus words it:
/// the label of the step's parameters with `absent` set to `undefined` in
/// its place (`still there: absent: undefined, target: #title`). `params`
/// are the step's parameters as lynkeus' `see` holds them, `None` standing
/// for a key whose value is `undefined`.
pub fn still_there(params: &[(&str, Option<&Value>)]) -> String {
    let parts: Vec<String> = params
        .iter()
        .map(|(key, value)| match (*key, value) {
            ("absent", _) | (_, None) => format!("{key}: undefined"),
            (_, Some(value)) => pair(key, value),
        })
        .collect();
    // lynkeus labels it as a step with an empty verb (` text`, cut at 140
    // units), then trims.
    let text = cut_utf16(&format!(" {}", parts.join(", ")), MAX_LABEL_UNITS);
    format!("still there: {}", text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::js::js_number;

    fn step(verb: &str, value: serde_json::Value) -> Step {
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
    fn still_there_labels_absent_as_undefined_in_its_place() {
        let target = json!("#title");
        let timeout = json!(300);
        assert_eq!(
            still_there(&[("absent", Some(&json!(true))), ("target", Some(&target)), ("timeoutMs", Some(&timeout))]),
            "still there: absent: undefined, target: #title, timeoutMs: 300"
        );
        assert_eq!(
            still_there(&[("name", None), ("absent", Some(&json!(true))), ("event", Some(&json!("Tap")))]),
            "still there: name: undefined, absent: undefined, event: Tap"
        );
        let long = json!("x".repeat(200));
        assert_eq!(still_there(&[("text", Some(&long)), ("absent", None)]).len(), "still there: ".len() + 139);
    }

    #[test]
    fn labels_are_cut_at_140_utf16_units() {
        let long = step("exec", json!("😀".repeat(100)));
        let cut = label(&long);
        assert_eq!(cut.encode_utf16().count(), 139, "a pair is not split: 5 for `exec ` + 67 pairs");
        assert!(cut.starts_with("exec 😀"));
    }

    use serde_json::json;

    const GIFT: &str = "---\nid: gift\ntitle: \"A gift shows up\"\n---\nsetup:\n  - create_user: { as: u, name: \"Ana\" }\nsteps:\n  - app.press: \"#open\"\n  - app.back\n  - assert: { user: u, path: score, equals: 25 }\nexpected: |\n  The score is 25.\n";

    #[test]
    fn one_case_of_a_matrix_is_built_alone_and_equals_the_expanded_one() {
        let text =
            "---\nid: m\nmatrix: { n: [1, 2, 3] }\n---\nsteps:\n  - app.type: { testId: q, text: \"{{matrix.n}}\" }\n";
        let file = CaseFile::parse(text, "m.md").unwrap();
        assert_eq!(file.ids().collect::<Vec<_>>(), ["m[n=1]", "m[n=2]", "m[n=3]"]);
        let all = parse_case(text, "m.md").unwrap();
        assert_eq!(file.case("m[n=2]").unwrap().unwrap(), all[1]);
        assert_eq!(all[1].steps[0].value["text"], "2");
        assert!(file.case("m[n=4]").is_none());
        let plain = CaseFile::parse("---\nid: p\n---\nsteps: []\n", "p.md").unwrap();
        assert_eq!(plain.case("p").unwrap().unwrap().id, "p");
    }

    #[test]
    fn the_format_parse_vector() {
        let cases = parse_case(GIFT, "cases/gift.md").unwrap();
        let case = &cases[0];
        assert_eq!(case.id, "gift");
        assert_eq!(case.title.as_deref(), Some("A gift shows up"));
        assert_eq!(case.setup[0].verb, "create_user");
        assert_eq!(case.setup[0].value, json!({"as": "u", "name": "Ana"}));
        assert_eq!(case.setup[0].line, 6);
        let verbs: Vec<&str> = case.steps.iter().map(|s| s.verb.as_str()).collect();
        assert_eq!(verbs, ["app.press", "app.back", "assert"]);
        assert_eq!(case.steps[1].value, Value::Null);
        assert_eq!(case.steps[2].line, 10);
        assert_eq!(case.expected.as_deref(), Some("The score is 25."));
    }

    #[test]
    fn crlf_and_a_byte_order_mark_are_accepted() {
        let windows = format!("\u{feff}{}", GIFT.replace('\n', "\r\n"));
        assert_eq!(parse_case(&windows, "cases/gift.md").unwrap(), parse_case(GIFT, "cases/gift.md").unwrap());
    }

    #[test]
    fn the_id_defaults_to_the_file_name() {
        let cases = parse_case("---\ntitle: t\n---\nsteps: []\n", "cases/checkout.md").unwrap();
        assert_eq!(cases[0].id, "checkout");
        assert!(cases[0].steps.is_empty());
    }

    #[test]
    fn errors_name_the_file_the_line_and_what_is_wrong() {
        let err = |text: &str| parse_case(text, "x.md").unwrap_err().to_string();
        assert_eq!(err("steps: []"), "x.md:1: no frontmatter (a case starts with --- and its id)");
        assert_eq!(err("---\nid: x\nsteps: []\n"), "x.md:1: no frontmatter (a case starts with --- and its id)");
        assert_eq!(
            err("---\nid: x\n---\nsteps:\n  - { a: 1, b: 2 }\n"),
            r#"x.md:5: steps[0] must be one step, as `verb: value`, not {"a":1,"b":2}"#
        );
        assert_eq!(
            err("---\nid: x\n---\nsteps:\n  - app.back\n  - do: app.back\n"),
            "x.md:6: steps[1] has `do` without `on`"
        );
        assert_eq!(err("---\nid: x\n---\nsetup: nope\n"), "x.md:4: setup is not a list");
        assert_eq!(
            err("---\nid: x\n---\nsteps:\n  - 12\n"),
            "x.md:5: steps[0] must be one step, as `verb: value`, not 12"
        );
        assert!(err("---\nid: x\n---\nsteps: [\n").starts_with("x.md:"), "{}", err("---\nid: x\n---\nsteps: [\n"));
    }

    #[test]
    fn guarded_blocks_flatten_with_their_guard() {
        let text = "---\nid: t\n---\nsteps:\n  - on: device\n    do:\n      - app.press: \"#nowhere\"\n  - on: headless\n    do: { app.press: \"#refresh\" }\n  - app.see: { text: \"25 points\" }\n";
        let case = &parse_case(text, "t.md").unwrap()[0];
        let on: Vec<Option<&str>> = case.steps.iter().map(|s| s.on.as_deref()).collect();
        assert_eq!(on, [Some("device"), Some("headless"), None]);
        assert_eq!(case.steps[0].line, 7);
    }

    #[test]
    fn matrices_expand_first_key_slowest() {
        let text = "---\nid: m\nmatrix: { locale: [en, fr], login: [phone] }\n---\nsteps:\n  - create_user: { locale: \"{{matrix.locale}}\" }\n";
        let cases = parse_case(text, "m.md").unwrap();
        let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["m[locale=en,login=phone]", "m[locale=fr,login=phone]"]);
        assert!(cases[1].setup.is_empty());
        assert_eq!(cases[1].steps[0].value, json!({"locale": "fr"}));

        let two_by_two = "---\nid: m\nmatrix: { locale: [en, fr], login: [phone, email] }\n---\nsteps: []\n";
        let ids: Vec<String> = parse_case(two_by_two, "m.md").unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(
            ids,
            [
                "m[locale=en,login=phone]",
                "m[locale=en,login=email]",
                "m[locale=fr,login=phone]",
                "m[locale=fr,login=email]"
            ]
        );
    }

    #[test]
    fn matrix_errors() {
        let err =
            parse_case("---\nid: m\nmatrix: { a: [1] }\n---\nsteps:\n  - x: \"{{matrix.b}}\"\n", "m.md").unwrap_err();
        assert_eq!(err.to_string(), "m.md:6: {{matrix.b}} is not in its matrix");
        let err = parse_case("---\nid: m\nmatrix:\n  a: [1]\n  user: []\n---\nsteps: []\n", "m.md").unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.md:5: matrix.user is an empty list: the file would expand to no case; give it a value or drop the key"
        );
        let ids = |text: &str| parse_case(text, "m.md").unwrap().into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            ids("---\nid: m\nmatrix: { flag: [1.0, 1e3, 0.5], on: [true] }\n---\nsteps: []\n"),
            ["m[flag=1,on=true]", "m[flag=1000,on=true]", "m[flag=0.5,on=true]"]
        );
        assert_eq!(ids("---\nid: m\nmatrix: { b: [x], 2: [y], 1: [z] }\n---\nsteps: []\n"), ["m[1=z,2=y,b=x]"]);
        let err = parse_case("---\nid: m\n---\nsteps:\n  - x: \"{{matrix.b}}\"\n", "m.md").unwrap_err();
        assert_eq!(err.to_string(), "m.md:5: {{matrix.b}} is not in its matrix");
        let values: Vec<String> = (0..20).map(|n| n.to_string()).collect();
        let big =
            format!("---\nid: m\nmatrix:\n  a: [{}]\n  b: [{}]\n---\nsteps: []\n", values.join(","), values.join(","));
        let err = parse_case(&big, "m.md").unwrap_err();
        assert_eq!(err.to_string(), "m.md:4: its matrix expands to 400 cases; the limit is 256");
    }

    #[test]
    fn oversized_files_are_refused() {
        let text = format!("---\nid: big\n---\n#{}\n", "x".repeat(MAX_CASE_BYTES));
        assert!(parse_case(&text, "big.md").unwrap_err().to_string().starts_with("big.md: "));
    }
}
