//! A suite: every case file named or found, parsed and checked together.
//! One bad file refuses the whole suite, with every problem listed.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use crate::commands;
use crate::config::CasesConfig;
use crate::error::CaseError;
use crate::format::{Case, parse_case};

/// The most cases one suite may hold.
pub const MAX_SUITE_CASES: usize = 100_000;

/// Files lynkeus never takes for cases.
fn is_case_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let upper = name.to_ascii_uppercase();
    name.ends_with(".md")
        && !name.starts_with('.')
        && !matches!(upper.as_str(), "README.MD" | "FORMAT.MD" | "CATALOG.MD")
}

/// How a path is shown in a problem: relative to `cwd` when it lies under it.
fn shown(path: &Path, cwd: &Path) -> String {
    normal(path).strip_prefix(cwd).map(Path::to_path_buf).unwrap_or_else(|_| normal(path)).display().to_string()
}

/// `path` with `.` and `..` resolved by their names alone, not through the
/// file system: a symlinked folder keeps the name it was given.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(part);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// A suite read from disk: its cases, named relative to `root`.
#[derive(Debug)]
pub struct Suite {
    /// The folder every case's `file` is relative to: where the run started
    /// when every file lies under it, else the folder that holds what was
    /// named (the parent of a named folder, so `/ci/app/cases` gives
    /// `cases/a.md`, as lynkeus names a project's cases).
    pub root: PathBuf,
    pub cases: Vec<Case>,
}

impl Suite {
    /// Where the file a case came from is on disk.
    pub fn path_of(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }
}

/// The folder a suite's names are relative to (see [`Suite::root`]).
fn suite_root(named: &[PathBuf], cwd: &Path) -> PathBuf {
    let cwd = normal(cwd);
    let named: Vec<PathBuf> = named.iter().map(|p| normal(p)).collect();
    if named.iter().all(|p| p.starts_with(&cwd)) {
        return cwd;
    }
    let holders = named.iter().map(|p| p.parent().map(Path::to_path_buf).unwrap_or_else(|| p.clone()));
    holders
        .reduce(|common, next| {
            let mut shared = PathBuf::new();
            for (a, b) in common.components().zip(next.components()) {
                if a != b {
                    break;
                }
                shared.push(a);
            }
            shared
        })
        .unwrap_or(cwd)
}

/// The case files `paths` name (a directory stands for its `*.md` files,
/// sorted by name); with no paths, the configured cases directory. Each is
/// absolute, or relative to `cwd` (`./x`, `../sibling/cases`).
pub fn discover(paths: &[PathBuf], config: &CasesConfig, cwd: &Path) -> Result<Vec<PathBuf>, Vec<CaseError>> {
    let roots = named_roots(paths, config, cwd);
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for root in roots {
        if root.is_dir() {
            let mut found: Vec<PathBuf> = match std::fs::read_dir(&root) {
                Ok(entries) => entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && is_case_file(p))
                    .collect(),
                Err(e) => {
                    errors.push(CaseError::new(shown(&root, cwd), None, e.to_string()));
                    continue;
                }
            };
            found.sort();
            files.extend(found);
        } else if root.is_file() {
            files.push(root);
        } else {
            errors.push(CaseError::new(shown(&root, cwd), None, "no such file or directory"));
        }
    }
    if errors.is_empty() && files.is_empty() {
        errors.push(CaseError::new(shown(&config.dir, cwd), None, "no case files (*.md) here"));
    }
    if errors.is_empty() { Ok(files) } else { Err(errors) }
}

fn named_roots(paths: &[PathBuf], config: &CasesConfig, cwd: &Path) -> Vec<PathBuf> {
    if paths.is_empty() { vec![cwd.join(&config.dir)] } else { paths.iter().map(|p| cwd.join(p)).collect() }
}

/// Parses and checks every file: all problems, or the suite. Each case's
/// `file` is relative to the suite's root, so it never climbs out of it,
/// wherever the files lie.
pub fn load(paths: &[PathBuf], config: &CasesConfig, cwd: &Path) -> Result<Suite, Vec<CaseError>> {
    let files = discover(paths, config, cwd)?;
    let root = suite_root(&named_roots(paths, config, cwd), cwd);
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for path in &files {
        let file =
            normal(path).strip_prefix(&root).map(|p| p.display().to_string()).unwrap_or_else(|_| shown(path, cwd));
        match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => sources.push((file, text)),
                Err(e) => errors.push(CaseError::new(&file, None, format!("not UTF-8: {e}"))),
            },
            Err(e) => errors.push(CaseError::new(&file, None, e.to_string())),
        }
    }
    // What the user named (the configured folder when nothing): what a
    // problem of the whole suite is said of.
    let named = if paths.is_empty() {
        shown(&config.dir, cwd)
    } else {
        paths.iter().map(|p| shown(&cwd.join(p), cwd)).collect::<Vec<_>>().join(", ")
    };
    match check_sources(&sources, config, &named) {
        Ok(cases) if errors.is_empty() => Ok(Suite { root, cases }),
        Ok(_) => Err(errors),
        Err(more) => {
            errors.extend(more);
            Err(errors)
        }
    }
}

/// The largest case file a suite may carry.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// The most bytes of case files (paths and texts) one suite may carry: what
/// one Submit message holds (the coordinator reads no larger one).
pub const MAX_SUITE_BYTES: usize = 64 << 20;

/// Parses and checks a suite given as `(path, text)` pairs, the way it
/// travels to the grid: every problem, or every case in order. `suite` names
/// the suite in problems that belong to no one file. The coordinator checks
/// what it is sent with this, so a client that skipped the check (or is not
/// `argus run`) is refused the same way.
pub fn check_sources(
    files: &[(String, String)],
    config: &CasesConfig,
    suite: &str,
) -> Result<Vec<Case>, Vec<CaseError>> {
    // Too much to send in one Submit: said before anything is parsed.
    let bytes: usize = files.iter().map(|(path, text)| path.len() + text.len()).sum();
    if bytes > MAX_SUITE_BYTES {
        let problem =
            format!("{bytes} bytes of case files; a suite may have {MAX_SUITE_BYTES} (split it into several runs)");
        return Err(vec![CaseError::new(suite, None, problem)]);
    }
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for (file, text) in files {
        if let Some(problem) = path_problem(file) {
            errors.push(CaseError::new(file.escape_debug().to_string(), None, problem));
            continue;
        }
        if text.len() > MAX_FILE_BYTES {
            errors.push(CaseError::new(
                file,
                None,
                format!("{} bytes; a case file may have {MAX_FILE_BYTES}", text.len()),
            ));
            continue;
        }
        match parse_case(text, file) {
            Ok(parsed) => cases.extend(parsed),
            Err(e) => errors.push(e),
        }
    }
    for case in &cases {
        check(case, config, &mut errors);
    }
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for case in &cases {
        if let Some(first) = seen.insert(&case.id, &case.file) {
            errors.push(CaseError::new(
                &case.file,
                None,
                format!("case id {:?} is also the id of a case in {first}", case.id),
            ));
        }
    }
    if cases.len() > MAX_SUITE_CASES {
        errors.push(CaseError::new(
            suite,
            None,
            format!("{} cases; a suite may have {MAX_SUITE_CASES} (split it into several runs)", cases.len()),
        ));
    }
    if errors.is_empty() { Ok(cases) } else { Err(errors) }
}

/// What is wrong with a case file's path as a suite names it: it must stay
/// inside the suite (relative, no `..`), since the run directory and the
/// dashboard show it and a worker may resolve flows against it.
pub fn path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("a case file needs a path".into());
    }
    if path.chars().any(char::is_control) {
        return Some("a case file's path may not hold control characters".into());
    }
    let as_path = Path::new(path);
    if as_path.is_absolute() || path.starts_with('/') || path.starts_with('\\') {
        return Some("a case file's path must be relative to the suite's folder".into());
    }
    if as_path.components().any(|c| matches!(c, std::path::Component::ParentDir))
        || path.split(['/', '\\']).any(|part| part == "..")
    {
        return Some("a case file's path may not climb out of the suite with `..`".into());
    }
    None
}

fn check(case: &Case, config: &CasesConfig, errors: &mut Vec<CaseError>) {
    for step in case.all_steps() {
        let command = step.verb.strip_prefix("app.").filter(|_| !config.macros.contains_key(&step.verb));
        if let Some(command) = command
            && !commands::known(command)
            && command != "reset"
        {
            errors.push(CaseError::new(
                &case.file,
                Some(step.line),
                format!(
                    "{} is not a step: lynkeus has no command {command}, and the project declares no macro for it{}",
                    step.verb,
                    config.not_found_hint()
                ),
            ));
        }
        let lynkeus_refuses =
            command.and_then(|command| commands::problem(command, &step.value)).map(|p| format!("{}: {p}", step.verb));
        if let Some(problem) = target_problem(&step.verb, &step.value)
            .or(lynkeus_refuses)
            .or_else(|| type_problem(&step.verb, &step.value))
        {
            errors.push(CaseError::new(&case.file, Some(step.line), problem));
        }
        if let Some(on) = &step.on {
            let test = on.strip_prefix('!').unwrap_or(on);
            if test.is_empty() || test == "has:" {
                errors.push(CaseError::new(&case.file, Some(step.line), format!("`on: {on}` names nothing to test")));
            }
        }
    }
}

/// What Argus accepts that lynkeus refuses: a suite that uses it runs only
/// under Argus. `argus cases check` reports each as a warning, or as an error
/// under `--strict-lynkeus`.
pub fn lynkeus_extensions(cases: &[Case]) -> Vec<CaseError> {
    let mut found: Vec<CaseError> = Vec::new();
    for case in cases {
        for step in case.all_steps() {
            let problem = match step.verb.as_str() {
                "app.reset" => Some(
                    "app.reset is an Argus extension: lynkeus has no command reset (each lynkeus attempt starts on a fresh app)".to_owned(),
                ),
                verb @ ("app.press" | "app.type" | "app.swipe" | "app.wait")
                    if step.value.get("testId").is_some() =>
                {
                    let command = &verb[4..];
                    Some(format!(
                        "{verb} testId is an Argus extension: lynkeus' {command} has no testId; write `target: \"#id\"`"
                    ))
                }
                _ => None,
            };
            if let Some(problem) = problem {
                let error = CaseError::new(&case.file, Some(step.line), problem);
                if !found.contains(&error) {
                    found.push(error);
                }
            }
        }
    }
    found
}

/// Keys of `see`, `event`, `call` and `run` steps that lynkeus' runner
/// never reads: it runs the step as if they were not there, so they are
/// warnings (a typo of `timeoutMs` waits 3 s, not the time written).
pub fn ignored_arguments(cases: &[Case]) -> Vec<CaseError> {
    let mut found: Vec<CaseError> = Vec::new();
    for case in cases {
        for step in case.all_steps() {
            let Some(command) = step.verb.strip_prefix("app.") else { continue };
            let (Some(read), Some(map)) = (commands::read_keys(command), step.value.as_object()) else { continue };
            for key in map.keys().filter(|k| !read.contains(&k.as_str())) {
                let error = CaseError::new(
                    &case.file,
                    Some(step.line),
                    format!("{} ignores {key}: lynkeus' runner reads {}", step.verb, read.join(", ")),
                );
                if !found.contains(&error) {
                    found.push(error);
                }
            }
        }
    }
    found
}

/// What an `app.*` argument must hold for the runner to read it.
#[derive(Clone, Copy)]
enum Kind {
    /// A duration: a number, or a string of one, ≥ 0.
    Ms,
    /// A whole number ≥ 0.
    Count,
    Number,
    Flag,
    /// A string (an element, a route, a name).
    Name,
    /// What `app.type` types: a string, or a number or boolean as `String()` writes it.
    Text,
}

fn kind_of(key: &str) -> Option<Kind> {
    Some(match key {
        "timeoutMs" | "quietMs" | "holdMs" | "hold" | "durationMs" | "advanceMs" => Kind::Ms,
        "nth" | "status" => Kind::Count,
        "distance" => Kind::Number,
        "optional" | "submit" | "clear" | "paste" | "scroll" | "gone" | "absent" | "reset" => Kind::Flag,
        "target" | "testId" | "within" | "route" | "url" | "flow" | "direction" | "from" | "to" | "what" => Kind::Name,
        "text" => Kind::Text,
        _ => return None,
    })
}

/// An argument of the wrong type (`timeoutMs: "ten"`), or `app.type` with
/// nothing to type: refused here rather than ignored or failed on a device.
/// A `{{…}}` reference is only known when the step runs.
fn type_problem(verb: &str, value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let no_text = match value {
        Value::Null => true,
        Value::Object(map) => !map.contains_key("text"),
        _ => false,
    };
    if verb == "app.type" && no_text {
        return Some(format!("{verb} needs a text: `{verb}: \"words\"` or `{verb}: {{text: \"words\", testId: …}}`"));
    }
    let map = value.as_object()?;
    map.iter().find_map(|(key, arg)| {
        let kind = kind_of(key)?;
        if let Value::String(s) = arg
            && s.contains("{{")
        {
            return None;
        }
        let fits = match (kind, arg) {
            (Kind::Ms, Value::Number(n)) => n.as_f64().is_some_and(|f| f >= 0.0),
            (Kind::Ms, Value::String(s)) => s.trim().parse::<u64>().is_ok(),
            (Kind::Count, Value::Number(n)) => n.is_u64(),
            (Kind::Number, Value::Number(_)) => true,
            (Kind::Flag, Value::Bool(_)) => true,
            (Kind::Name, Value::String(_)) => true,
            (Kind::Text, Value::String(_) | Value::Number(_) | Value::Bool(_)) => true,
            _ => false,
        };
        let wanted = match kind {
            Kind::Ms => "a number of milliseconds",
            Kind::Count => "a whole number",
            Kind::Number => "a number",
            Kind::Flag => "true or false",
            Kind::Name => "a string",
            Kind::Text => "a string",
        };
        (!fits).then(|| format!("{verb} {key} must be {wanted}, not {arg}"))
    })
}

/// Steps that name an element must name it as a string or a mapping with
/// a `target` (or `testId`); a YAML number is not a target.
fn target_problem(verb: &str, value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let takes_target = matches!(verb, "app.press" | "app.see");
    if !takes_target {
        return None;
    }
    match value {
        Value::String(s) if !s.is_empty() => None,
        Value::Object(map) if verb == "app.see" || map.contains_key("target") || map.contains_key("testId") => None,
        Value::Number(n) => Some(format!(
            "{verb} needs a target: {n} is a number; write \"{n}\" for the element at index {n}, or \"#id\" or a text"
        )),
        Value::Object(map) => Some(format!(
            "{verb} needs a target: {{target: \"#id\" | \"text\"}} or {{testId: …}}, not {{{}}}",
            map.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
        other => Some(format!("{verb} needs a target, such as \"#id\" or \"Log in\", not {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> PathBuf {
        let root = std::env::temp_dir().join(format!("argus-suite-{}-{}", std::process::id(), rand::random::<u32>()));
        for (name, text) in files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn a_suite_sent_as_text_is_checked_like_one_on_disk() {
        let config = CasesConfig::defaults(Path::new("/project"));
        let files = |path: &str, text: &str| vec![(path.to_owned(), text.to_owned())];
        let ok = check_sources(&files("cases/a.md", "---\nid: a\n---\nsteps:\n  - app.back\n"), &config, "cases");
        assert_eq!(ok.unwrap()[0].id, "a");
        let errors = |path: &str, text: &str| -> Vec<String> {
            check_sources(&files(path, text), &config, "cases").unwrap_err().iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            errors("cases/x.md", "---\nid: x\n---\nsteps:\n  - app.teleport: on\n"),
            [
                "cases/x.md:5: app.teleport is not a step: lynkeus has no command teleport, and the project declares no macro for it"
            ]
        );
        assert_eq!(
            errors("../../../../etc/x.md", "---\nid: x\n---\nsteps: []\n"),
            ["../../../../etc/x.md: a case file's path may not climb out of the suite with `..`"]
        );
        assert_eq!(
            errors("/etc/x.md", "---\nid: x\n---\nsteps: []\n"),
            ["/etc/x.md: a case file's path must be relative to the suite's folder"]
        );
        assert_eq!(
            errors("cases/a\u{0}.md", ""),
            ["cases/a\\0.md: a case file's path may not hold control characters"]
        );
        let big = "#".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(
            errors("cases/big.md", &big),
            [format!("cases/big.md: {} bytes; a case file may have {MAX_FILE_BYTES}", big.len())]
        );
        // More than one Submit carries, though each file is within bounds.
        let config = CasesConfig::defaults(Path::new("."));
        let files: Vec<(String, String)> =
            (0..65).map(|n| (format!("cases/c{n}.md"), "#".repeat(MAX_FILE_BYTES - 20))).collect();
        let total: usize = files.iter().map(|(p, t)| p.len() + t.len()).sum();
        let refused = check_sources(&files, &config, "cases").unwrap_err();
        assert_eq!(
            refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "cases: {total} bytes of case files; a suite may have {MAX_SUITE_BYTES} (split it into several runs)"
            )]
        );
    }

    #[test]
    fn wrongly_typed_arguments_are_refused_at_check_time() {
        let config = CasesConfig::defaults(Path::new("."));
        let errors = |steps: &str| -> Vec<String> {
            let text = format!("---\nid: x\n---\nsteps:\n{steps}");
            match check_sources(&[("cases/x.md".into(), text)], &config, "cases") {
                Ok(_) => Vec::new(),
                Err(errors) => errors.iter().map(ToString::to_string).collect(),
            }
        };
        assert_eq!(
            errors("  - app.type: {}\n"),
            ["cases/x.md:5: app.type needs a text: `app.type: \"words\"` or `app.type: {text: \"words\", testId: …}`"]
        );
        assert_eq!(
            errors("  - app.see: { text: Hi, timeoutMs: ten }\n"),
            ["cases/x.md:5: app.see timeoutMs must be a number of milliseconds, not \"ten\""]
        );
        assert_eq!(
            errors("  - app.press: { testId: like, optional: yes }\n"),
            ["cases/x.md:5: app.press optional must be true or false, not \"yes\""]
        );
        assert_eq!(
            errors("  - app.press: { testId: [a] }\n"),
            ["cases/x.md:5: app.press testId must be a string, not [\"a\"]"]
        );
        assert_eq!(
            errors("  - app.see: { text: Hi, nth: 1.5 }\n"),
            ["cases/x.md:5: app.see nth must be a whole number, not 1.5"]
        );
        assert!(
            errors("  - app.type: { text: 42, testId: q }\n  - app.see: { text: Hi, timeoutMs: \"{{cfg.ms}}\" }\n  - app.idle: { quiet: \"300\" }\n")
                .is_empty()
        );
    }

    #[test]
    fn argus_only_forms_are_named() {
        let config = CasesConfig::defaults(Path::new("."));
        let text = "---\nid: x\nmatrix: { n: [1, 2] }\n---\nsteps:\n  - app.reset\n  - app.press: { testId: like }\n  - app.see: { testId: like }\n  - app.press: { target: \"#like\" }\n";
        let cases = check_sources(&[("cases/x.md".into(), text.into())], &config, "cases").unwrap();
        let found: Vec<String> = lynkeus_extensions(&cases).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "cases/x.md:6: app.reset is an Argus extension: lynkeus has no command reset (each lynkeus attempt starts on a fresh app)",
                "cases/x.md:7: app.press testId is an Argus extension: lynkeus' press has no testId; write `target: \"#id\"`",
            ],
            "once per file and line, whatever the matrix"
        );
    }

    #[test]
    fn discovery_sorts_and_skips_docs_and_dotfiles() {
        let root = project(&[
            ("cases/b.md", "---\nid: b\n---\nsteps: []\n"),
            ("cases/a.md", "---\nid: a\n---\nsteps: []\n"),
            ("cases/README.md", "# docs"),
            ("cases/format.md", "# docs"),
            ("cases/.draft.md", "nope"),
            ("cases/notes.txt", "nope"),
        ]);
        let config = CasesConfig::defaults(&root);
        let cases = load(&[], &config, &root).unwrap().cases;
        let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(cases[0].file, "cases/a.md");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn one_bad_file_refuses_the_suite_with_every_problem() {
        let root = project(&[
            ("cases/good.md", "---\nid: good\n---\nsteps:\n  - app.back\n"),
            ("cases/bad.md", "steps: []\n"),
            ("cases/teleport.md", "---\nid: t\n---\nsteps:\n  - app.teleport: somewhere\n"),
            ("cases/twin.md", "---\nid: good\n---\nsteps: []\n"),
            ("cases/twelve.md", "---\nid: twelve\n---\nsteps:\n  - app.press: 12\n  - app.press: { hold: 600 }\n"),
        ]);
        let errors = load(&[], &CasesConfig::defaults(&root), &root).unwrap_err();
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "cases/bad.md:1: no frontmatter (a case starts with --- and its id)",
                "cases/teleport.md:5: app.teleport is not a step: lynkeus has no command teleport, and the project declares no macro for it",
                "cases/twelve.md:5: app.press needs a target: 12 is a number; write \"12\" for the element at index 12, or \"#id\" or a text",
                "cases/twelve.md:6: app.press needs a target: {target: \"#id\" | \"text\"} or {testId: …}, not {hold}",
                "cases/twin.md: case id \"good\" is also the id of a case in cases/good.md",
            ]
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_dry_run_vector_is_refused_at_check_time() {
        let root = project(&[(
            "cases/j.md",
            "---\nid: j\n---\nsteps:\n  - app.teleport: somewhere\n  - app.clock: { sideways: 1 }\n  - app.clock: { advanceMs: 1000 }\n",
        )]);
        let errors = load(&[], &CasesConfig::defaults(&root), &root).unwrap_err();
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("cases/j.md:5: app.teleport is not a step"), "{errors:?}");
        assert_eq!(errors[1], "cases/j.md:6: app.clock: os clock has no sideways (its flags: now, advance, reset)");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn missing_paths_and_empty_dirs_are_named() {
        let root = project(&[("cases/.keep", "")]);
        let errors = load(&[PathBuf::from("nowhere")], &CasesConfig::defaults(&root), &root).unwrap_err();
        assert_eq!(errors[0].to_string(), "nowhere: no such file or directory");
        let errors = load(&[], &CasesConfig::defaults(&root), &root).unwrap_err();
        assert_eq!(errors[0].to_string(), "cases: no case files (*.md) here");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_suite_too_big_is_said_of_the_folders_given() {
        let padding = "#".repeat(MAX_FILE_BYTES - 100);
        let files: Vec<(String, String)> = (0..65)
            .map(|n| (format!("nightly/c{n}.md"), format!("---\nid: c{n}\n---\nsteps: []\n{padding}")))
            .collect();
        let named: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        let root = project(&named);
        let errors = load(&[PathBuf::from("nightly")], &CasesConfig::defaults(&root), &root).unwrap_err();
        assert_eq!(errors.len(), 1, "refused before parsing: {errors:?}");
        let said = errors[0].to_string();
        assert!(
            said.starts_with("nightly: ") && said.contains(&format!("a suite may have {MAX_SUITE_BYTES}")),
            "{said}"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_suite_anywhere_is_named_from_its_own_folder() {
        let root = project(&[
            ("e2e/cases/a.md", "---\nid: a\n---\nsteps: []\n"),
            ("e2e/cases/b c\u{e9}.md", "---\nid: b\n---\nsteps: []\n"),
            ("ios/build/.keep", ""),
        ]);
        let config = CasesConfig::defaults(&root);
        let files = |suite: Suite| -> (PathBuf, Vec<String>) {
            (suite.root, suite.cases.into_iter().map(|c| c.file).collect())
        };
        let names = vec!["cases/a.md".to_owned(), "cases/b c\u{e9}.md".to_owned()];
        // From the project: relative to where the run started, as before.
        let (_, found) = files(load(&[PathBuf::from("e2e/cases")], &config, &root).unwrap());
        assert_eq!(found, ["e2e/cases/a.md", "e2e/cases/b c\u{e9}.md"]);
        // From another folder: `../`, absolute, `.` inside, odd names.
        let elsewhere = root.join("ios/build");
        let (at, found) = files(load(&[PathBuf::from("../../e2e/cases")], &config, &elsewhere).unwrap());
        assert_eq!((at, found), (root.join("e2e"), names.clone()));
        let (_, found) = files(load(&[root.join("e2e/cases")], &config, &elsewhere).unwrap());
        assert_eq!(found, names);
        let (at, found) = files(load(&[root.join("e2e/./cases/a.md")], &config, &elsewhere).unwrap());
        assert_eq!((at, found), (root.join("e2e/cases"), vec!["a.md".to_owned()]));
        // A symlinked folder keeps the name it was given.
        std::os::unix::fs::symlink(root.join("e2e/cases"), root.join("ios/linked")).unwrap();
        let (_, found) = files(load(&[PathBuf::from("linked")], &config, &root.join("ios")).unwrap());
        assert_eq!(found, ["linked/a.md", "linked/b c\u{e9}.md"]);
        for name in found {
            assert_eq!(path_problem(&name), None);
        }
        std::fs::remove_dir_all(root).unwrap();
    }
}
