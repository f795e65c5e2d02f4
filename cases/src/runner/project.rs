//! The steps that are the project's own: `on:` guards, macros, fixtures
//! with refs, `assert` through the inspect fixture, and `exec`.

use argus_proto::wire::Hello;
use serde_json::{Map, Value};

use super::{Attempt, Device, Done, StepError, StepResult};
use crate::config::CasesConfig;
use crate::format::{Case, Step};
use crate::js::js_string;
use crate::values::{self, matcher_of};

/// Whether a step guarded by `on` runs on the device that said `hello`.
pub fn runs_here(on: Option<&str>, hello: Option<&Hello>) -> bool {
    let Some(on) = on else { return true };
    let (negate, test) = match on.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, on),
    };
    let native = hello.is_some_and(|h| h.native);
    let has = |command: &str| hello.is_some_and(|h| h.has_command(command));
    // A device runs on the wall clock: touches are real and no clock is mocked.
    let device = native && !has("clock");
    let holds = match test {
        "device" => device,
        "headless" => !device,
        _ => match test.strip_prefix("has:") {
            Some(command) => has(command),
            None => hello.is_some_and(|h| h.platform == test),
        },
    };
    holds != negate
}

/// The fixtures a case names that the fixtures server does not list.
/// Whether a step runs on the project's side (a fixture, `assert` through
/// the inspect fixture, or `exec`), not on the device.
pub fn needs_project(step: &Step, config: &CasesConfig) -> bool {
    !(step.verb.starts_with("app.") || config.macros.contains_key(&step.verb))
}

pub fn missing_fixtures(case: &Case, served: &[String], config: &CasesConfig) -> Vec<String> {
    let mut missing = Vec::new();
    for step in case.all_steps() {
        let name = match step.verb.as_str() {
            verb if verb.starts_with("app.") || verb == "exec" || config.macros.contains_key(verb) => continue,
            "assert" => config.inspect.as_str(),
            verb => verb,
        };
        if !served.iter().any(|s| s == name) && !missing.iter().any(|m| m == name) {
            missing.push(name.to_owned());
        }
    }
    missing
}

impl<D: Device> Attempt<'_, D> {
    /// Replaces refs params (`user: u` → `user_id: <u.user_id>`), and adds
    /// the latest value of each refs field a step does not name.
    fn with_refs(&self, params: &Map<String, Value>) -> Result<Map<String, Value>, StepError> {
        let refs = &self.run.config.refs;
        let mut out = Map::new();
        let mut resolved = Vec::new();
        for (key, value) in params {
            match (refs.get(key), value) {
                (Some(field), Value::String(alias)) => {
                    let scope = self.scope.get(alias).ok_or_else(|| format!("no alias '{alias}'"))?;
                    let id = scope.get(field).ok_or_else(|| format!("alias '{alias}' has no {field}"))?;
                    resolved.push((field.clone(), id.clone()));
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
        // Like lynkeus: the ref param goes, its field comes last.
        out.extend(resolved);
        for (param, field) in refs {
            if !params.contains_key(param)
                && !out.contains_key(field)
                && let Some(latest) = self.latest.get(field)
            {
                out.insert(field.clone(), latest.clone());
            }
        }
        Ok(out)
    }

    async fn request(&self, command: &str, params: &Map<String, Value>) -> Result<Value, StepError> {
        self.run.project.fixture(command, params).await.map_err(|e| StepError::Failed(e.to_string()))
    }

    pub(super) async fn fixture(&mut self, verb: &str, value: &Value) -> StepResult {
        let mut params = match value {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            other => return Err(StepError::Failed(format!("{verb} takes a mapping of params, not {other}"))),
        };
        let alias = params.remove("as").and_then(|a| a.as_str().map(str::to_owned));
        let params = self.with_refs(&params)?;
        let answer = self.request(verb, &params).await?;
        for field in self.run.config.refs.values() {
            if let Some(id) = answer.get(field) {
                self.latest.insert(field.clone(), id.clone());
            }
        }
        if let Some(alias) = alias {
            self.scope.insert(alias, answer);
        }
        Ok(Done::Passed)
    }

    pub(super) async fn assert(&mut self, value: &Value) -> StepResult {
        let Value::Object(params) = value else {
            return Err(StepError::Failed(format!("assert takes {{path, <matcher>, …}}, not {value}")));
        };
        let Some(path) = params.get("path").and_then(Value::as_str).map(str::to_owned) else {
            return Err(StepError::Failed("assert needs a path".into()));
        };
        let Some((matcher, expected)) = matcher_of(params) else {
            return Err(StepError::Failed(format!("assert needs a matcher: one of {}", values::MATCHERS.join(", "))));
        };
        let mut query = Map::new();
        query.insert("section".into(), Value::String(path.split('.').next().unwrap_or(&path).to_owned()));
        for (key, value) in params {
            if key != "path" && !values::MATCHERS.contains(&key.as_str()) {
                query.insert(key.clone(), value.clone());
            }
        }
        let query = self.with_refs(&query)?;
        let key = Value::Object(query.clone()).to_string();
        let answer = match self.inspect_cache.get(&key) {
            Some(answer) => answer.clone(),
            None => {
                let inspect = self.run.config.inspect.clone();
                let answer = self.request(&inspect, &query).await?;
                self.inspect_cache.insert(key, answer.clone());
                answer
            }
        };
        let actual = values::dig(&answer, &path);
        if values::matches(actual.as_ref(), matcher, &expected)? {
            Ok(Done::Passed)
        } else {
            let shown = actual.as_ref().map_or("undefined".to_owned(), js_string);
            Err(StepError::Failed(format!("{path} is {shown}")))
        }
    }

    pub(super) async fn exec(&mut self, value: &Value) -> StepResult {
        let (run, alias) = match value {
            Value::String(run) => (run.clone(), None),
            Value::Object(map) => match map.get("run").and_then(Value::as_str) {
                Some(run) => (run.to_owned(), map.get("as").and_then(Value::as_str).map(str::to_owned)),
                None => return Err(StepError::Failed("exec takes a command, or {run, as?}".into())),
            },
            other => return Err(StepError::Failed(format!("exec takes a command, not {other}"))),
        };
        let output = self.run.project.exec(&run).await.map_err(|e| StepError::Failed(format!("exec: {e}")))?;
        if output.code != Some(0) {
            let last = output.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            let code = output.code.map_or("a signal".to_owned(), |c| c.to_string());
            return Err(StepError::Failed(
                format!("exec: `{run}` exited with {code}: {last}").trim_end_matches(": ").to_owned(),
            ));
        }
        if let Some(alias) = alias {
            let stdout = output.stdout;
            let kept = first_json_object(&stdout).unwrap_or_else(|| serde_json::json!({ "out": stdout }));
            self.scope.insert(alias, kept);
        }
        Ok(Done::Passed)
    }

    /// A project macro: its entries run with `param` bound to what the case
    /// passed; `when`, `unless` and `on` decide which entries run.
    pub(super) async fn macro_step(&mut self, verb: &str, body: &Value, param: Value) -> StepResult {
        let Value::Array(entries) = body else {
            return Err(StepError::Failed(format!("macro {verb} must be a list of steps")));
        };
        // A param that names an alias stands for the alias' object.
        let param = match param {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| match v.as_str().and_then(|alias| self.scope.get(alias)) {
                        Some(object) => (k, object.clone()),
                        None => (k, v),
                    })
                    .collect(),
            ),
            other => other,
        };
        let saved = self.scope.insert("param".into(), param.clone());
        let outcome = self.macro_entries(verb, entries, &param).await;
        match saved {
            Some(saved) => self.scope.insert("param".into(), saved),
            None => self.scope.remove("param"),
        };
        outcome
    }

    async fn macro_entries(&mut self, verb: &str, entries: &[Value], param: &Value) -> StepResult {
        for (index, entry) in entries.iter().enumerate() {
            let (steps, runs) = match entry.as_object() {
                Some(map) if map.contains_key("do") => {
                    let list = |key: &str| -> Vec<String> {
                        match map.get(key) {
                            Some(Value::String(s)) => vec![s.clone()],
                            Some(Value::Array(items)) => {
                                items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
                            }
                            _ => Vec::new(),
                        }
                    };
                    let when = list("when");
                    let unless = list("unless");
                    let hello = self.device.hello();
                    let runs = when.iter().all(|c| self.holds(c, param))
                        && !unless.iter().any(|c| self.holds(c, param))
                        && super::project::runs_here(map.get("on").and_then(Value::as_str), hello.as_deref());
                    let steps = match &map["do"] {
                        Value::Array(items) => items.clone(),
                        one => vec![one.clone()],
                    };
                    (steps, runs)
                }
                _ => (vec![entry.clone()], true),
            };
            if !runs {
                continue;
            }
            for step in steps {
                let step = macro_step_of(&step).ok_or_else(|| {
                    StepError::Failed(format!("macro {verb}[{index}] must be one step, as `verb: value`"))
                })?;
                Box::pin(self.step(&step)).await?;
                self.ran.insert(step.verb.clone());
            }
        }
        Ok(Done::Passed)
    }

    /// A macro condition: `ran:<verb>`, `name=value`, or `name` (given and
    /// not null, false or "none").
    fn holds(&self, condition: &str, param: &Value) -> bool {
        if let Some(verb) = condition.strip_prefix("ran:") {
            return self.ran.contains(verb);
        }
        if let Some((name, expected)) = condition.split_once('=') {
            return param.get(name).is_some_and(|v| js_string(v) == expected);
        }
        !matches!(param.get(condition), None | Some(Value::Null) | Some(Value::Bool(false)))
            && param.get(condition) != Some(&Value::String("none".into()))
    }
}

fn macro_step_of(value: &Value) -> Option<Step> {
    match value {
        Value::String(verb) => Some(Step { verb: verb.clone(), value: Value::Null, on: None, line: 0 }),
        Value::Object(map) if map.len() == 1 => {
            let (verb, value) = map.iter().next()?;
            Some(Step { verb: verb.clone(), value: value.clone(), on: None, line: 0 })
        }
        _ => None,
    }
}

fn first_json_object(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    stream.next()?.ok().filter(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hello(native: bool, commands: &[&str], platform: &str) -> Hello {
        serde_json::from_value(
            json!({"protocolVersion": 1, "platform": platform, "native": native, "commands": commands}),
        )
        .unwrap()
    }

    #[test]
    fn on_guards() {
        let headless = hello(false, &["session"], "ios");
        assert!(!runs_here(Some("device"), Some(&headless)));
        assert!(runs_here(Some("headless"), Some(&headless)));
        assert!(runs_here(Some("has:session"), Some(&headless)));
        assert!(!runs_here(Some("!has:session"), Some(&headless)));
        assert!(runs_here(Some("ios"), Some(&headless)));
        assert!(!runs_here(Some("android"), Some(&headless)));
        assert!(runs_here(Some("!android"), Some(&headless)));
        let device = hello(true, &[], "android");
        assert!(runs_here(Some("device"), Some(&device)));
        let mocked_clock = hello(true, &["clock"], "android");
        assert!(runs_here(Some("headless"), Some(&mocked_clock)), "a mocked clock is not a device");
        assert!(runs_here(None, None));
    }

    #[test]
    fn the_fixture_check_vector() {
        let case = &crate::parse_case(
            "---\nid: k\n---\nsetup:\n  - create_user: { as: u }\n  - grant_badge: { user: u }\nsteps:\n  - app.back\n  - assert: { user: u, path: points, equals: 1 }\n",
            "k.md",
        )
        .unwrap()[0];
        let served: Vec<String> = ["create_user", "give_points", "inspect"].iter().map(|s| s.to_string()).collect();
        let mut config = CasesConfig::defaults(std::path::Path::new("."));
        assert_eq!(missing_fixtures(case, &served, &config), ["grant_badge"]);
        config.inspect = "look".into();
        assert_eq!(missing_fixtures(case, &served, &config), ["grant_badge", "look"]);
    }

    #[test]
    fn exec_keeps_the_first_json_object() {
        assert_eq!(first_json_object("log line\n{\"id\": 7}\nmore {\"x\":1}"), Some(json!({"id": 7})));
        assert_eq!(first_json_object("no json"), None);
    }
}
