//! Locator strategies over a `screen` snapshot: which elements a WebDriver
//! `find` names. Pure, so that every strategy is tested without a device.
//!
//! | `using` | matches |
//! |---|---|
//! | `accessibility id` | `testId`, else the accessibility label |
//! | `id` | `testId` |
//! | `name` | `testId` or the accessibility label |
//! | `class name` | the kind, by tag or platform class (see [`super::page::kind_of_class`]) |
//! | `xpath` | XPath 1.0 over the page source |
//! | `css selector` | what plain selenium sends for the above: `[id="x"]` (or `*[id="x"]`), `#x`, `[name="x"]`, `.Class`, `Class` |
//! | `-ios predicate string` | `attr == 'v'`, `CONTAINS`, `BEGINSWITH`, `ENDSWITH`, joined by `AND` |
//! | `-android uiautomator` | `new UiSelector()` with `text`, `textContains`, `textStartsWith`, `description`, `descriptionContains`, `resourceId`, `className`, `enabled` |

use std::sync::LazyLock;

use argus_proto::wire::{Element, Screen};
use regex::Regex;

use super::error::{WdError, WdResult};
use super::page::{self, Page};

/// Whether an element is one a locator selects.
type Test = Box<dyn Fn(&Element) -> bool>;

/// The `i` of every element `using`/`value` selects, in tree order; only
/// descendants of the element `within` when given.
pub fn locate(screen: &Screen, using: &str, value: &str, within: Option<usize>) -> WdResult<Vec<usize>> {
    if using == "xpath" {
        return Page::new(screen).select(value, within);
    }
    let test: Test = match using {
        "accessibility id" => {
            let by_id =
                screen.elements.iter().any(|e| e.test_id.as_deref() == Some(value) && inside(screen, e, within));
            let value = value.to_owned();
            if by_id {
                Box::new(move |e| e.test_id.as_deref() == Some(&value))
            } else {
                Box::new(move |e| e.accessibility_label.as_deref() == Some(&value))
            }
        }
        "id" => by_id(value),
        "name" => by_name(value),
        "class name" => by_class(value),
        "css selector" => css(value)?,
        "-ios predicate string" => predicate(value)?,
        "-android uiautomator" => ui_selector(value)?,
        other => return Err(WdError::strategy_not_supported(other)),
    };
    Ok(screen.elements.iter().filter(|e| inside(screen, e, within) && test(e)).map(|e| e.i).collect())
}

fn by_id(value: &str) -> Test {
    let value = value.to_owned();
    Box::new(move |e| e.test_id.as_deref() == Some(&value))
}

fn by_name(value: &str) -> Test {
    let value = value.to_owned();
    Box::new(move |e| e.test_id.as_deref() == Some(&value) || e.accessibility_label.as_deref() == Some(&value))
}

fn by_class(value: &str) -> Test {
    let kind = page::kind_of_class(value);
    Box::new(move |e| Some(e.kind) == kind)
}

/// Whether `element` is a descendant of the element `within`.
fn inside(screen: &Screen, element: &Element, within: Option<usize>) -> bool {
    let Some(ancestor) = within else { return true };
    let mut parent = element.parent;
    // Bounded: a cycle in a hostile snapshot must not spin.
    for _ in 0..=screen.elements.len() {
        match parent {
            Some(p) if p == ancestor => return true,
            Some(p) => parent = screen.elements.iter().find(|e| e.i == p).and_then(|e| e.parent),
            None => return false,
        }
    }
    false
}

/// The css shapes plain selenium and fantoccini generate for id, name and
/// class; anything richer is refused rather than guessed.
fn css(selector: &str) -> WdResult<Test> {
    static ATTRIBUTE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"^\*?\[(id|name)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\]$"#).unwrap()
    });
    static IDENT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([#.]?)([A-Za-z_][\w.\-]*)$").unwrap());
    let selector = selector.trim();
    if let Some(caps) = ATTRIBUTE.captures(selector) {
        let value = caps.get(2).or(caps.get(3)).map_or("", |m| m.as_str()).replace("\\\"", "\"").replace("\\'", "'");
        return Ok(if &caps[1] == "id" { by_id(&value) } else { by_name(&value) });
    }
    if let Some(caps) = IDENT.captures(selector) {
        return Ok(match &caps[1] {
            "#" => by_id(&caps[2]),
            _ => by_class(&caps[2]),
        });
    }
    Err(WdError::new(
        super::error::Code::InvalidSelector,
        format!(
            "css selector {selector:?} is not supported: a native app has no CSS; use [id=\"x\"], #x, [name=\"x\"], .Class, accessibility id or xpath"
        ),
    ))
}

/// What a predicate or UiSelector attribute reads of an element.
fn read<'e>(element: &'e Element, attribute: &str) -> Option<std::borrow::Cow<'e, str>> {
    use std::borrow::Cow;
    match attribute {
        "label" => element.accessibility_label.as_deref().or(element.text.as_deref()).map(Cow::Borrowed),
        "name" | "identifier" => {
            element.test_id.as_deref().or(element.accessibility_label.as_deref()).map(Cow::Borrowed)
        }
        "text" => element.text.as_deref().map(Cow::Borrowed),
        "value" => element.value.as_deref().or(element.text.as_deref()).map(Cow::Borrowed),
        "type" | "className" => Some(Cow::Borrowed(page::tag(element.kind))),
        other => page::attribute(element, other).map(Cow::Owned),
    }
}

/// A subset of NSPredicate: `attr OP 'literal'` clauses joined by `AND`.
fn predicate(text: &str) -> WdResult<Test> {
    static CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?i)^\s*(\w+)\s*(==|!=|CONTAINS|BEGINSWITH|ENDSWITH)(\[c\])?\s*(?:'([^']*)'|"([^"]*)"|(\w+))\s*$"#,
        )
        .unwrap()
    });
    static AND: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)\s+AND\s+|\s*&&\s*").unwrap());
    let mut clauses = Vec::new();
    for clause in AND.split(text) {
        let caps = CLAUSE.captures(clause).ok_or_else(|| {
            WdError::new(
                super::error::Code::InvalidSelector,
                format!(
                    "predicate clause {clause:?} is not supported: use attr == 'value' (or CONTAINS, BEGINSWITH, ENDSWITH), joined by AND"
                ),
            )
        })?;
        let attribute = caps[1].to_owned();
        let op = caps[2].to_ascii_uppercase();
        let fold = caps.get(3).is_some();
        let mut literal = caps.get(4).or(caps.get(5)).or(caps.get(6)).map_or("", |m| m.as_str()).to_owned();
        if attribute == "type" {
            // `type == 'XCUIElementTypeButton'` names a class.
            if let Some(kind) = page::kind_of_class(&literal) {
                literal = page::tag(kind).to_owned();
            }
        }
        if matches!(attribute.as_str(), "enabled" | "visible" | "displayed") {
            literal = (matches!(literal.as_str(), "1" | "true" | "TRUE" | "YES")).to_string();
        }
        clauses.push((attribute, op, fold, literal));
    }
    Ok(Box::new(move |element| {
        clauses.iter().all(|(attribute, op, fold, literal)| {
            let Some(have) = read(element, attribute) else { return op == "!=" };
            let (have, literal) = if *fold {
                (have.to_lowercase(), literal.to_lowercase())
            } else {
                (have.into_owned(), literal.clone())
            };
            match op.as_str() {
                "==" => have == literal,
                "!=" => have != literal,
                "CONTAINS" => have.contains(&literal),
                "BEGINSWITH" => have.starts_with(&literal),
                _ => have.ends_with(&literal),
            }
        })
    }))
}

/// A subset of UiSelector: `new UiSelector().text("x").className("y")`.
fn ui_selector(text: &str) -> WdResult<Test> {
    static WHOLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"^\s*new\s+UiSelector\(\)((?:\s*\.\s*\w+\((?:"[^"]*"|true|false)\))+)\s*;?\s*$"#).unwrap()
    });
    static CALL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"\.\s*(\w+)\((?:"([^"]*)"|(true|false))\)"#).unwrap());
    let unsupported = |why: String| WdError::new(super::error::Code::InvalidSelector, why);
    let calls = WHOLE.captures(text).ok_or_else(|| {
        unsupported(format!("UiSelector {text:?} is not supported: use new UiSelector().text(\"x\") and the like"))
    })?;
    let mut tests: Vec<Test> = Vec::new();
    for call in CALL.captures_iter(&calls[1]) {
        let value = call.get(2).or(call.get(3)).map_or("", |m| m.as_str()).to_owned();
        let test: Test = match &call[1] {
            "text" => Box::new(move |e| {
                read(e, "label").as_deref() == Some(value.as_str()) || e.text.as_deref() == Some(&value)
            }),
            "textContains" => Box::new(move |e| e.text.as_deref().is_some_and(|t| t.contains(&value))),
            "textStartsWith" => Box::new(move |e| e.text.as_deref().is_some_and(|t| t.starts_with(&value))),
            "description" => Box::new(move |e| e.accessibility_label.as_deref() == Some(&value)),
            "descriptionContains" => {
                Box::new(move |e| e.accessibility_label.as_deref().is_some_and(|t| t.contains(&value)))
            }
            "resourceId" => {
                // `com.app:id/login` names the id after `id/`.
                let id = value.rsplit_once(":id/").map_or(value.clone(), |(_, id)| id.to_owned());
                Box::new(move |e| e.test_id.as_deref() == Some(&id))
            }
            "className" => by_class(&value),
            "enabled" => {
                let want = value == "true";
                Box::new(move |e| e.enabled == want)
            }
            other => return Err(unsupported(format!("UiSelector method {other} is not supported"))),
        };
        tests.push(test);
    }
    Ok(Box::new(move |e| tests.iter().all(|t| t(e))))
}

#[cfg(test)]
mod tests {
    use super::super::page::tests::login_screen;
    use super::*;

    fn find(using: &str, value: &str) -> Vec<usize> {
        locate(&login_screen(), using, value, None).unwrap()
    }

    #[test]
    fn each_strategy_finds_its_elements() {
        assert_eq!(find("accessibility id", "login"), [3, 5]);
        assert_eq!(find("accessibility id", "Email"), [2], "the label when no testId is so");
        assert_eq!(find("id", "email"), [2]);
        assert_eq!(find("name", "Email"), [2]);
        assert_eq!(find("class name", "XCUIElementTypeButton"), [3, 5]);
        assert_eq!(find("class name", "Marquee"), Vec::<usize>::new());
        assert_eq!(find("xpath", "//TextField"), [2]);
        assert_eq!(find("css selector", r#"[id="email"]"#), [2]);
        assert_eq!(find("css selector", r#"[name="Email"]"#), [2]);
        assert_eq!(find("css selector", r#"*[id="email"]"#), [2], "selenium-webdriver's By.id");
        assert_eq!(find("css selector", ".Button"), [3, 5]);
        assert_eq!(find("css selector", "#login"), [3, 5]);
        assert_eq!(find("-ios predicate string", "label == 'Log in'"), [3]);
        assert_eq!(find("-ios predicate string", "type == 'XCUIElementTypeButton' AND label CONTAINS 'again'"), [5]);
        assert_eq!(find("-ios predicate string", "name BEGINSWITH[c] 'LOG' AND enabled == 1"), [5]);
        assert_eq!(find("-android uiautomator", r#"new UiSelector().text("Log in")"#), [3]);
        assert_eq!(find("-android uiautomator", r#"new UiSelector().resourceId("com.shop:id/email")"#), [2]);
        assert_eq!(
            find("-android uiautomator", r#"new UiSelector().className("android.widget.Button").enabled(true)"#),
            [5]
        );
    }

    #[test]
    fn from_an_element_only_its_descendants() {
        assert_eq!(locate(&login_screen(), "class name", "TextField", Some(1)).unwrap(), [2]);
        assert!(locate(&login_screen(), "class name", "TextField", Some(3)).unwrap().is_empty());
    }

    #[test]
    fn unknown_strategies_and_bad_selectors_are_invalid_selectors() {
        let screen = login_screen();
        let error = locate(&screen, "-flutter key", "x", None).unwrap_err();
        assert_eq!(error.message, "Locator Strategy '-flutter key' is not supported for this session");
        assert_eq!(locate(&screen, "css selector", "div > p", None).unwrap_err().code.as_str(), "invalid selector");
        assert_eq!(
            locate(&screen, "-ios predicate string", "label LIKE 'x*'", None).unwrap_err().code.as_str(),
            "invalid selector"
        );
        assert_eq!(
            locate(&screen, "-android uiautomator", "new UiScrollable()", None).unwrap_err().code.as_str(),
            "invalid selector"
        );
    }
}
