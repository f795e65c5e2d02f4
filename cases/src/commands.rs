//! lynkeus' command table: the CLI commands an `app.<name>` step names, with
//! their positionals and flags as lynkeus' own registry declares them (its
//! `drive` and `os` commands), and its runner's rule (`argvFor`) for turning
//! a step's value into them. `argus cases check` refuses what that rule
//! refuses, in lynkeus' words; the runner reads the same arguments to make
//! the protocol call each command makes.

use serde_json::Value;

/// What a flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    Boolean,
    String,
    Number,
}

use FlagKind::{Boolean, Number, String as Text};

/// One CLI command: `press`, or `os clock`.
#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    /// What a step may call it besides its name (`clock` for `os clock`).
    pub alias: Option<&'static str>,
    pub positionals: &'static [&'static str],
    pub flags: &'static [(&'static str, FlagKind)],
}

impl Command {
    fn flag(&self, name: &str) -> Option<FlagKind> {
        self.flags.iter().find(|(n, _)| *n == name).map(|(_, kind)| *kind)
    }

    fn takes(&self) -> String {
        let flags: Vec<&str> = self.flags.iter().map(|(name, _)| *name).collect();
        match (self.positionals.is_empty(), flags.is_empty()) {
            (true, true) => "it takes nothing".to_owned(),
            (false, true) => format!("it takes {}", self.positionals.join(", ")),
            (true, false) => format!("its flags: {}", flags.join(", ")),
            (false, false) => format!("it takes {}; its flags: {}", self.positionals.join(", "), flags.join(", ")),
        }
    }
}

const fn command(
    name: &'static str,
    positionals: &'static [&'static str],
    flags: &'static [(&'static str, FlagKind)],
) -> Command {
    Command { name, alias: None, positionals, flags }
}

/// An `os` command a step may name without `os `.
const fn os(
    name: &'static str,
    alias: &'static str,
    positionals: &'static [&'static str],
    flags: &'static [(&'static str, FlagKind)],
) -> Command {
    Command { name, alias: Some(alias), positionals, flags }
}

/// lynkeus' `drive` and `os` commands.
pub const COMMANDS: &[Command] = &[
    command(
        "screen",
        &[],
        &[("tree", Boolean), ("record", Boolean), ("all", Boolean), ("frames", Boolean), ("verbose", Boolean)],
    ),
    command(
        "press",
        &["target"],
        &[("in", Text), ("nth", Number), ("hold", Number), ("js", Boolean), ("settle", Boolean)],
    ),
    command(
        "type",
        &["text", "target"],
        &[("in", Text), ("nth", Number), ("paste", Boolean), ("submit", Boolean), ("clear", Boolean)],
    ),
    command(
        "swipe",
        &["direction", "target"],
        &[("distance", Number), ("from", Text), ("to", Text), ("duration", Number)],
    ),
    command("back", &[], &[]),
    command("nav", &["route", "params"], &[]),
    command(
        "wait",
        &["what"],
        &[("in", Text), ("nth", Number), ("gone", Boolean), ("scroll", Boolean), ("timeout", Number)],
    ),
    command("screenshot", &["file"], &[]),
    command("see", &["what"], &[("absent", Boolean), ("within", Number)]),
    command("idle", &[], &[("quiet", Number), ("timeout", Number), ("after", Number)]),
    command("requests", &[], &[("last", Number)]),
    command("trace", &[], &[("since", Number), ("last", Number)]),
    command("call", &["command", "params"], &[]),
    command("hello", &[], &[]),
    command("launch", &["bundleId"], &[("clean", Boolean)]),
    command("why", &["target"], &[("route", Text)]),
    command("lint", &[], &[("strict", Boolean), ("save", Text), ("baseline", Text)]),
    command("perf", &[], &[("since", Number), ("last", Number)]),
    command("profile", &["action"], &[]),
    os("os deeplink", "deeplink", &["url"], &[]),
    os("os appstate", "appstate", &["state"], &[]),
    os("os network", "network", &["state"], &[]),
    os("os clock", "clock", &[], &[("now", Text), ("advance", Number), ("reset", Boolean)]),
    os("os biometrics", "biometrics", &[], &[("available", Text), ("next", Text), ("fallback", Text)]),
    os("os scan", "scan", &["value"], &[("type", Text)]),
    os("os gallery", "gallery", &["uri"], &[("cancel", Boolean), ("name", Text), ("mime", Text)]),
    command(
        "mock",
        &["route"],
        &[
            ("status", Number),
            ("body", Text),
            ("delay", Number),
            ("times", Number),
            ("sticky", Boolean),
            ("lost", Boolean),
            ("clear", Boolean),
            ("list", Boolean),
        ],
    ),
    command("os permissions", &["action", "service"], &[]),
    command("os push", &["payload"], &[]),
    command("os appearance", &["mode"], &[]),
    command("os location", &["where"], &[]),
    command("os language", &["tag"], &[]),
];

/// The `app.*` verbs lynkeus' runner does itself rather than through a
/// command's argv (`press`, `type`, `swipe`, `wait` and `nav` still build
/// one; see [`problem`]).
pub const BUILT_IN: [&str; 11] =
    ["press", "type", "swipe", "see", "requests", "wait", "nav", "call", "run", "events", "event"];

/// The keys a step may spell differently from the flag they become.
const FLAG_NAMES: [(&str, &str); 6] = [
    ("within", "in"),
    ("advanceMs", "advance"),
    ("timeoutMs", "timeout"),
    ("delayMs", "delay"),
    ("durationMs", "duration"),
    ("holdMs", "hold"),
];

/// Keys that stand for a command's first positional when it is not given.
const FIRST_ALIASES: [&str; 6] = ["target", "request", "route", "url", "state", "text"];

/// The command `app.<name>` runs: `name` itself, or `os <name>`.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name).or_else(|| {
        let os_name = format!("os {name}");
        COMMANDS.iter().find(|c| c.name == os_name || c.alias == Some(name))
    })
}

/// A step's value as a command's arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Argv {
    pub positionals: Vec<Value>,
    /// Each flag once, with the value last given (`true` for a bare flag).
    pub flags: Vec<(&'static str, Value)>,
}

impl Argv {
    pub fn positional(&self, index: usize) -> Option<&Value> {
        self.positionals.get(index)
    }

    pub fn flag(&self, name: &str) -> Option<&Value> {
        self.flags.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// A flag's number (a number, or a string of one), if given.
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.flag(name)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A flag's text as lynkeus' argv carries it (an object as its JSON).
    pub fn text(&self, name: &str) -> Option<String> {
        self.flag(name).map(|v| match v {
            Value::Object(_) => v.to_string(),
            other => crate::js::js_string(other),
        })
    }

    pub fn is_set(&self, name: &str) -> bool {
        self.flag(name) == Some(&Value::Bool(true))
    }
}

/// What lynkeus' `argvFor` refuses, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    #[error("{command} needs {name}")]
    Needs { command: &'static str, name: &'static str },
    #[error("{command} has no {key} ({takes})")]
    HasNo { command: &'static str, key: String, takes: String },
}

/// lynkeus' `argvFor`: what matches a positional by name goes in place, the
/// rest are flags (after its renames); a key that is neither is refused as
/// lynkeus refuses it, `<command> has no <key>`.
pub fn argv_for(command: &Command, value: &Value) -> Result<Argv, ArgvError> {
    let mut argv = Argv::default();
    match value {
        Value::Null => {}
        Value::String(s) if command.flag(s) == Some(Boolean) => {
            let name = command.flags.iter().find(|(n, _)| n == s).map(|(n, _)| *n).unwrap_or_default();
            argv.flags.push((name, Value::Bool(true)));
        }
        Value::Array(items) => argv.positionals.extend(items.iter().cloned()),
        Value::Object(map) => {
            let mut given = map.clone();
            if let Some(first) = command.positionals.first()
                && !given.contains_key(*first)
            {
                let stands_in = FIRST_ALIASES.iter().find(|alias| {
                    given.contains_key(**alias) && !command.positionals.contains(alias) && command.flag(alias).is_none()
                });
                if let Some(alias) = stands_in
                    && let Some(v) = given.remove(*alias)
                {
                    given.insert((*first).to_owned(), v);
                }
            }
            for (index, name) in command.positionals.iter().enumerate() {
                match given.remove(*name) {
                    Some(v) => argv.positionals.push(v),
                    None => {
                        if command.positionals[index + 1..].iter().any(|later| given.contains_key(*later)) {
                            return Err(ArgvError::Needs { command: command.name, name });
                        }
                        break;
                    }
                }
            }
            for (key, v) in given {
                let renamed = FLAG_NAMES.iter().find(|(from, _)| *from == key).map_or(key.as_str(), |(_, to)| to);
                let Some((flag, _)) = command.flags.iter().find(|(n, _)| *n == renamed) else {
                    return Err(ArgvError::HasNo { command: command.name, key, takes: command.takes() });
                };
                match v {
                    Value::Bool(false) | Value::Null => {}
                    Value::Array(items) => argv.flags.extend(items.into_iter().map(|item| (*flag, item))),
                    other => argv.flags.push((flag, other)),
                }
            }
        }
        scalar => argv.positionals.push(scalar.clone()),
    }
    Ok(argv)
}

/// What lynkeus' runner refuses of `app.<name>: value` before or as it runs
/// it, in its words; `None` for a step it takes. Only a command's own
/// arguments are judged here: macros and Argus' own `app.reset` and
/// `testId` forms are the caller's.
pub fn problem(name: &str, value: &Value) -> Option<String> {
    let argv_of =
        |command: &str, value: &Value| find(command).and_then(|c| argv_for(c, value).err().map(|e| e.to_string()));
    match name {
        // The runner reads these itself and lets other keys be.
        "see" | "requests" | "call" | "run" | "events" | "event" => None,
        // It takes `optional` and `timeoutMs` itself, then presses with the rest.
        "press" => argv_of("press", &without(value, &["optional", "timeoutMs", "testId"])),
        "wait" => match value {
            Value::Number(_) => None,
            Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => None,
            Value::Object(map) if map.contains_key("request") => None,
            _ => argv_of("wait", &without(value, &["testId"])),
        },
        "type" | "swipe" => argv_of(name, &without(value, &["testId"])),
        _ => find(name).and_then(|command| {
            argv_for(command, value).err().map(|e| e.to_string()).or_else(|| kind_problem(command, value))
        }),
    }
}

/// Whether `app.<name>` is a step lynkeus has: one its runner does itself,
/// or a command of its table.
pub fn known(name: &str) -> bool {
    BUILT_IN.contains(&name) || find(name).is_some()
}

/// The keys lynkeus' runner reads of the steps it does itself without a
/// command's argv; it lets any other key be.
pub fn read_keys(name: &str) -> Option<Vec<&'static str>> {
    const SEE: [&str; 14] = [
        "testId",
        "target",
        "text",
        "route",
        "request",
        "status",
        "event",
        "props",
        "properties",
        "layer",
        "absent",
        "within",
        "nth",
        "timeoutMs",
    ];
    Some(match name {
        "see" => SEE.to_vec(),
        // `event` is `see` of the event its `name` names.
        "event" => std::iter::once("name").chain(SEE).collect(),
        "call" => vec!["command", "params", "expect", "as", "timeoutMs"],
        "run" => vec!["flow", "vars"],
        _ => return None,
    })
}

/// A flag given a value of the wrong kind (`timeout: ten`); a `{{…}}`
/// reference is only known when the step runs.
fn kind_problem(command: &Command, value: &Value) -> Option<String> {
    let argv = argv_for(command, value).ok()?;
    argv.flags.iter().find_map(|(name, v)| {
        if let Value::String(s) = v
            && s.contains("{{")
        {
            return None;
        }
        let kind = command.flag(name)?;
        let (fits, wanted) = match kind {
            Number => (v.is_number() || v.as_str().is_some_and(|s| s.trim().parse::<f64>().is_ok()), "a number"),
            Boolean => (v.is_boolean(), "true or false"),
            // An object goes as its JSON (`mock body: {…}`).
            Text => (true, "a string"),
        };
        (!fits).then(|| format!("{} --{name} takes {wanted}, not {v}", command.name))
    })
}

/// `value` without `keys` (an object; anything else as it is).
fn without(value: &Value, keys: &[&str]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| !keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Per command, spellings lynkeus' runner takes and the ones it refuses
    /// (its `argvFor` over its command registry).
    #[test]
    fn every_command_takes_what_lynkeus_takes_and_refuses_what_it_refuses() {
        let takes: &[(&str, Value)] = &[
            ("idle", json!({"quiet": 200})),
            ("idle", json!({"timeout": 2000})),
            ("idle", json!({"timeoutMs": 2000})),
            ("idle", json!({"after": 3})),
            ("idle", Value::Null),
            ("clock", json!({"advance": 1000})),
            ("clock", json!({"advanceMs": 1000})),
            ("clock", json!({"now": "2027-01-01T00:00:00Z"})),
            ("clock", json!("reset")),
            ("wait", json!({"target": "#title", "timeout": 2000})),
            ("wait", json!({"target": "#title", "timeoutMs": 2000, "within": "#list", "nth": 1})),
            ("wait", json!({"route": "Home", "gone": true})),
            ("wait", json!({"what": "Home", "scroll": true})),
            ("wait", json!(500)),
            ("wait", json!({"request": "GET /x", "status": 200})),
            ("swipe", json!({"direction": "up", "duration": 300})),
            ("swipe", json!({"direction": "up", "durationMs": 300, "target": "#list", "distance": 200})),
            ("swipe", json!({"from": "10,10", "to": "10,200"})),
            ("swipe", json!("up")),
            ("press", json!({"target": "#buy", "js": true})),
            ("press", json!({"target": "#buy", "settle": true})),
            (
                "press",
                json!({"target": "#buy", "hold": 600, "nth": 1, "within": "#row", "optional": true, "timeoutMs": 1}),
            ),
            ("press", json!({"target": "#buy", "holdMs": 600})),
            ("press", json!("#buy")),
            ("type", json!({"text": "hi", "target": "#q", "submit": true, "paste": true, "clear": true})),
            ("type", json!("hi")),
            ("nav", json!({"route": "Settings", "params": {"tab": 2}})),
            ("scan", json!("abc")),
            ("scan", json!({"value": "abc", "type": "ean13"})),
            ("deeplink", json!("shop://cart")),
            ("deeplink", json!({"url": "shop://cart"})),
            ("appstate", json!("background")),
            ("appstate", json!({"state": "background"})),
            ("network", json!("off")),
            ("biometrics", json!({"available": "FaceID", "next": "success,fail"})),
            ("gallery", json!({"uri": "file:///x.png", "name": "x.png", "mime": "image/png"})),
            ("gallery", json!("cancel")),
            ("mock", json!({"route": "GET /api/cart", "status": 503, "body": "{}", "times": 1})),
            ("mock", json!({"request": "GET /api/cart", "delayMs": 400})),
            ("mock", json!("clear")),
            ("screenshot", json!("shot.png")),
            ("launch", json!({"clean": true})),
            ("back", Value::Null),
            ("see", json!({"text": "Hi", "whatever": 1})),
            ("call", json!({"command": "reset", "timeoutMs": 10})),
            ("permissions", json!({"action": "grant", "service": "camera"})),
        ];
        for (name, value) in takes {
            assert_eq!(problem(name, value), None, "lynkeus takes app.{name}: {value}");
        }
        let refuses: &[(&str, Value, &str)] = &[
            ("idle", json!({"quietMs": 200}), "idle has no quietMs"),
            ("idle", json!({"settle": true}), "idle has no settle"),
            ("clock", json!({"freeze": true}), "os clock has no freeze"),
            ("clock", json!({"set": "2027-01-01"}), "os clock has no set"),
            ("press", json!({"target": "#buy", "mode": "js"}), "press has no mode"),
            ("press", json!({"target": "#buy", "timeout": 10}), "press has no timeout"),
            ("wait", json!({"target": "#title", "quiet": 1}), "wait has no quiet"),
            ("swipe", json!({"direction": "up", "speed": 3}), "swipe has no speed"),
            ("type", json!({"text": "hi", "enter": true}), "type has no enter"),
            ("type", json!({"target": "#q"}), "type needs text"),
            ("nav", json!({"route": "Home", "replace": true}), "nav has no replace"),
            ("scan", json!({"value": "abc", "format": "qr"}), "os scan has no format"),
            ("mock", json!({"route": "GET /x", "method": "GET"}), "mock has no method"),
            ("back", json!({"times": 2}), "back has no times"),
            ("idle", json!({"quiet": "soon"}), "idle --quiet takes a number, not \"soon\""),
        ];
        for (name, value, message) in refuses {
            let got = problem(name, value).unwrap_or_else(|| panic!("lynkeus refuses app.{name}: {value}"));
            assert!(got.starts_with(message), "app.{name}: {value}: {got}");
        }
    }

    #[test]
    fn a_value_becomes_positionals_and_flags_as_argv_for_makes_them() {
        let idle = argv_for(find("idle").unwrap(), &json!({"quiet": 200, "timeoutMs": 900})).unwrap();
        assert_eq!((idle.number("quiet"), idle.number("timeout")), (Some(200.0), Some(900.0)));
        let mock =
            argv_for(find("mock").unwrap(), &json!({"request": "GET /x", "sticky": true, "lost": false})).unwrap();
        assert_eq!(mock.positionals, [json!("GET /x")]);
        assert!(mock.is_set("sticky") && !mock.is_set("lost"));
        let clear = argv_for(find("mock").unwrap(), &json!("clear")).unwrap();
        assert!(clear.is_set("clear") && clear.positionals.is_empty());
        let scan = argv_for(find("scan").unwrap(), &json!("abc")).unwrap();
        assert_eq!(scan.positional(0), Some(&json!("abc")));
        assert_eq!(find("clock").unwrap().name, "os clock");
        assert_eq!(find("permissions").unwrap().name, "os permissions");
        assert!(find("teleport").is_none() && !known("teleport") && known("see") && known("scan"));
    }
}
