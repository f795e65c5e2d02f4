//! JUnit XML reports from other runners (pytest, jest-junit, Gradle and
//! Maven Surefire, XCTest through xcresult converters, Maestro), read into
//! lynkeus' `RunCase` lines so they join the same history as grid runs.
//!
//! One line per attempt: a test case is one attempt, or, with Surefire's
//! `flakyFailure`/`rerunFailure` (and what `argus run --junit` writes),
//! one per failed try before its last. `failure` and `error` are a failure,
//! `skipped` is unsupported (counted apart, never a failure). A case's id is
//! `classname.name` (its `name` alone when the class is empty or the same).
//!
//! A report is refused whole, with where and what, if it is not a JUnit
//! report: not UTF-8, a NUL byte, a DOCTYPE (entities are never expanded:
//! no billion laughs), XML that does not close, too many cases.

use argus_proto::run::{CaseResult, RunCase};
use quick_xml::events::{BytesStart, Event};
use serde_json::json;

/// The most test cases one report may hold.
pub const MAX_CASES: usize = 100_000;
/// The longest case id, title or error kept (longer ones are cut).
const MAX_TEXT: usize = 4_000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct JunitError(pub String);

/// A report, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The runner that wrote it, as far as the report says: `pytest`,
    /// `jest`, `surefire`, `maestro`, `xctest`, else `junit`.
    pub tool: String,
    /// The earliest suite `timestamp`, in epoch ms, when one is given.
    pub started_ms: Option<i64>,
    /// Each attempt, in the report's order.
    pub lines: Vec<RunCase>,
}

/// A case being read: its attributes, and what its children said.
#[derive(Default)]
struct Reading {
    classname: String,
    name: String,
    file: Option<String>,
    ms: u64,
    /// `failure`, `error` or `skipped`, with its message and text.
    outcome: Option<(&'static str, String)>,
    /// Earlier tries that failed (Surefire's reruns).
    reruns: Vec<String>,
    status_attr: Option<String>,
}

/// Reads a JUnit report (`now_ms`: when attempts start whose suite gives
/// no time).
pub fn read(bytes: &[u8], now_ms: i64) -> Result<Report, JunitError> {
    let err = |message: String| JunitError(message);
    let text =
        std::str::from_utf8(bytes).map_err(|e| err(format!("the report is not UTF-8 (byte {})", e.valid_up_to())))?;
    if let Some(at) = text.find('\0') {
        return Err(err(format!("the report holds a NUL byte at byte {at}: it is not XML")));
    }
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut scan = Scan { now_ms, ..Scan::default() };
    loop {
        let at = reader.buffer_position();
        let event =
            reader.read_event().map_err(|e| err(format!("the report is not well-formed XML at byte {at}: {e}")))?;
        match event {
            Event::DocType(_) => {
                return Err(err(
                    "the report has a DOCTYPE: a JUnit report needs none, and entities are never expanded".into(),
                ));
            }
            Event::Start(ref e) => scan.start(e, false, at)?,
            Event::Empty(ref e) => scan.start(e, true, at)?,
            Event::End(ref e) => scan.end(e.local_name().as_ref())?,
            Event::Text(t) if scan.text_of.is_some() => {
                scan.text(&t.xml10_content().map_err(|e| err(format!("text at byte {at}: {e}")))?);
            }
            Event::CData(t) if scan.text_of.is_some() => {
                scan.text(&t.decode().map_err(|e| err(format!("CDATA at byte {at}: {e}")))?);
            }
            Event::GeneralRef(r) => {
                if let Some(text) = resolved(&r, at)? {
                    scan.text(&text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    scan.report()
}

/// What a report's reading has found so far.
#[derive(Default)]
struct Scan {
    now_ms: i64,
    cases: Vec<RunCase>,
    /// The `<testcase>` being read.
    case: Option<Reading>,
    /// The element whose text is being read: inside a case's failure, error or skipped.
    text_of: Option<&'static str>,
    texts: String,
    suites_names: Vec<String>,
    hints: Vec<&'static str>,
    started_ms: Option<i64>,
    suite_ms: Option<i64>,
    depth: usize,
    saw_root: bool,
}

impl Scan {
    /// An element opens (`empty`: and closes at once).
    fn start(&mut self, e: &BytesStart, empty: bool, at: u64) -> Result<(), JunitError> {
        let err = |message: String| JunitError(message);
        let name = e.local_name();
        let name = std::str::from_utf8(name.as_ref()).unwrap_or("");
        if !self.saw_root {
            self.saw_root = true;
            if name != "testsuites" && name != "testsuite" {
                return Err(err(format!(
                    "the report's root is <{name}>, not <testsuites> or <testsuite>: not a JUnit report"
                )));
            }
        }
        if !empty {
            self.depth += 1;
        }
        match name {
            "testsuites" | "testsuite" => self.suite(e)?,
            "testcase" => {
                if self.case.is_some() {
                    return Err(err(format!("a <testcase> inside a <testcase> at byte {at}")));
                }
                let seconds = attr(e, "time")?.unwrap_or_default();
                let reading = Reading {
                    classname: attr(e, "classname")?.unwrap_or_default(),
                    name: attr(e, "name")?.unwrap_or_default(),
                    file: attr(e, "file")?,
                    ms: parse_seconds(&seconds).map_err(|_| {
                        err(format!("<testcase time={seconds:?}> at byte {at} is not a number of seconds"))
                    })?,
                    status_attr: attr(e, "status")?,
                    ..Reading::default()
                };
                if reading.name.is_empty() {
                    return Err(err(format!("a <testcase> at byte {at} has no name")));
                }
                if empty {
                    push(&mut self.cases, reading, self.started_ms.or(self.suite_ms).unwrap_or(self.now_ms))?;
                } else {
                    self.case = Some(reading);
                }
            }
            "failure" | "error" | "skipped" | "flakyFailure" | "flakyError" | "rerunFailure" | "rerunError" => {
                self.outcome(e, name, empty)?;
            }
            "property" if attr(e, "name")?.is_some_and(|n| n.starts_with("java.")) => self.hints.push("surefire"),
            _ => {}
        }
        Ok(())
    }

    /// A `<testsuites>` or `<testsuite>`: its name, its device (Maestro),
    /// its time.
    fn suite(&mut self, e: &BytesStart) -> Result<(), JunitError> {
        if let Some(suite) = attr(e, "name")? {
            self.suites_names.push(suite);
        }
        if attr(e, "device")?.is_some() {
            self.hints.push("maestro");
        }
        if let Some(stamp) = attr(e, "timestamp")? {
            let ms = parse_time(&stamp);
            self.suite_ms = ms.or(self.suite_ms);
            self.started_ms = match (self.started_ms, ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(())
    }

    /// A case's failure, error, skip or rerun.
    fn outcome(&mut self, e: &BytesStart, name: &str, empty: bool) -> Result<(), JunitError> {
        let Some(reading) = self.case.as_mut() else { return Ok(()) };
        let kind = match name {
            "failure" => "failure",
            "error" => "error",
            "skipped" => "skipped",
            _ => "rerun",
        };
        let message = attr(e, "message")?.unwrap_or_default();
        if kind == "rerun" {
            reading.reruns.push(message);
        } else {
            reading.outcome = Some((kind, message));
        }
        if !empty {
            self.text_of = Some(kind);
            self.texts.clear();
        }
        Ok(())
    }

    /// An element closes.
    fn end(&mut self, name: &[u8]) -> Result<(), JunitError> {
        self.depth = self.depth.saturating_sub(1);
        match name {
            b"testcase" => {
                if let Some(reading) = self.case.take() {
                    push(&mut self.cases, reading, self.started_ms.or(self.suite_ms).unwrap_or(self.now_ms))?;
                }
            }
            b"failure" | b"error" | b"skipped" => {
                if let (Some(kind), Some(reading)) = (self.text_of.take(), self.case.as_mut())
                    && kind != "rerun"
                    && let Some((_, message)) = reading.outcome.as_mut()
                {
                    let body = self.texts.trim();
                    if message.is_empty() {
                        *message = body.to_owned();
                    } else if !body.is_empty() {
                        message.push('\n');
                        message.push_str(body);
                    }
                }
            }
            b"flakyFailure" | b"flakyError" | b"rerunFailure" | b"rerunError" => self.text_of = None,
            _ => {}
        }
        if self.cases.len() > MAX_CASES {
            return Err(JunitError(format!("the report holds more than {MAX_CASES} test cases")));
        }
        Ok(())
    }

    /// Text inside the element being read, kept up to [`MAX_TEXT`].
    fn text(&mut self, piece: &str) {
        if self.text_of.is_some() && self.texts.len() < MAX_TEXT {
            self.texts.push_str(piece);
        }
    }

    /// The report, once the document has ended.
    fn report(self) -> Result<Report, JunitError> {
        let err = |message: &str| JunitError(message.to_owned());
        if !self.saw_root {
            return Err(err("the report is empty: no <testsuites> or <testsuite>"));
        }
        if self.depth != 0 || self.case.is_some() {
            return Err(err("the report ends before its elements close"));
        }
        if self.cases.is_empty() {
            return Err(err("the report holds no <testcase>"));
        }
        let tool = detect(&self.suites_names, &self.hints, &self.cases);
        Ok(Report { tool, started_ms: self.started_ms, lines: self.cases })
    }
}

/// A character or entity reference: its text, or an error for an entity
/// that is not one of XML's five (none other is ever expanded).
fn resolved(r: &quick_xml::events::BytesRef, at: u64) -> Result<Option<String>, JunitError> {
    let err = |message: String| JunitError(message);
    if r.is_char_ref() {
        return Ok(r
            .resolve_char_ref()
            .map_err(|e| err(format!("a character reference at byte {at}: {e}")))?
            .map(String::from));
    }
    let name = r.decode().map_err(|e| err(format!("a reference at byte {at}: {e}")))?;
    match quick_xml::escape::resolve_predefined_entity(&name) {
        Some(text) => Ok(Some(text.to_owned())),
        None => Err(err(format!("&{name}; at byte {at} is not one of XML's five entities; none other is expanded"))),
    }
}

/// An attribute's value, unescaped (only XML's own entities).
fn attr(e: &BytesStart, name: &str) -> Result<Option<String>, JunitError> {
    for attribute in e.attributes() {
        let attribute = attribute.map_err(|error| {
            JunitError(format!("an attribute of <{}>: {error}", String::from_utf8_lossy(e.local_name().as_ref())))
        })?;
        if attribute.key.local_name().as_ref() == name.as_bytes() {
            let value = attribute
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|error| JunitError(format!("the attribute {name}: {error}")))?;
            return Ok(Some(clean(&value)));
        }
    }
    Ok(None)
}

/// Text as kept: control characters (but newlines and tabs) dropped, cut
/// to a bound.
fn clean(text: &str) -> String {
    let kept: String = text.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
    if kept.len() <= MAX_TEXT { kept } else { kept.chars().take(MAX_TEXT).collect::<String>() + "…" }
}

fn parse_seconds(text: &str) -> Result<u64, ()> {
    if text.trim().is_empty() {
        return Ok(0);
    }
    // Surefire writes `1,234.5` in some locales.
    let seconds: f64 = text.trim().replace(',', "").parse().map_err(|_| ())?;
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(());
    }
    Ok((seconds * 1000.0).round() as u64)
}

/// A suite's `timestamp`: RFC 3339, or without a zone (read as UTC).
fn parse_time(text: &str) -> Option<i64> {
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(time.timestamp_millis());
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|t| t.and_utc().timestamp_millis())
}

/// The case's lines: a failed one per earlier try, then its last.
fn push(cases: &mut Vec<RunCase>, reading: Reading, started_ms: i64) -> Result<(), JunitError> {
    let Reading { classname, name, file, ms, outcome, reruns, status_attr } = reading;
    let id = if classname.is_empty() || classname == name { name.clone() } else { format!("{classname}.{name}") };
    let file = file.unwrap_or_else(|| if classname.is_empty() { name.clone() } else { classname.clone() });
    // Maestro writes `status="ERROR"` on a case it also marks with <failure>.
    let (result, message) = match (outcome, status_attr.as_deref()) {
        (Some(("skipped", message)), _) => (CaseResult::Unsupported, message),
        (Some((_, message)), _) => (CaseResult::Failed, message),
        (None, Some("ERROR" | "FAILURE" | "FAILED")) => (CaseResult::Failed, "failed".to_owned()),
        (None, _) => (CaseResult::Passed, String::new()),
    };
    let mut attempt = cases.iter().filter(|c| c.id == id).map(|c| c.attempt).max().unwrap_or(0);
    let started_at = argus_proto_time(started_ms);
    let mut line = |result: CaseResult, message: &str, ms: u64| -> Result<RunCase, JunitError> {
        attempt += 1;
        let status = match result {
            CaseResult::Passed => "passed",
            CaseResult::Failed => "failed",
            CaseResult::Unsupported => "unsupported",
        };
        let error = (!message.is_empty()).then(|| clean(message));
        let value = json!({
            "id": id, "title": name, "file": file, "attempt": attempt, "result": status,
            "startedAt": started_at, "ms": ms,
            "steps": [{ "step": "junit", "status": status, "ms": ms, "error": error }],
        });
        serde_json::from_value(value).map_err(|e| JunitError(format!("case {id}: {e}")))
    };
    let mut lines = Vec::new();
    for rerun in &reruns {
        lines.push(line(CaseResult::Failed, if rerun.is_empty() { "failed" } else { rerun }, 0)?);
    }
    lines.push(line(result, &message, ms)?);
    cases.extend(lines);
    Ok(())
}

fn argus_proto_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn detect(suites: &[String], hints: &[&str], cases: &[RunCase]) -> String {
    let tool = if hints.contains(&"maestro") {
        "maestro"
    } else if suites.iter().any(|s| s == "pytest") {
        "pytest"
    } else if suites.iter().any(|s| s.starts_with("jest")) {
        "jest"
    } else if hints.contains(&"surefire") {
        "surefire"
    } else if cases.iter().any(|c| c.title.as_deref().is_some_and(|t| t.starts_with("test")) && c.id.contains("Tests."))
    {
        "xctest"
    } else {
        "junit"
    };
    tool.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUREFIRE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.acme.CartTest" time="1.5" tests="3" failures="1" errors="0" skipped="1" timestamp="2026-12-01T10:00:00">
  <properties><property name="java.version" value="17"/></properties>
  <testcase name="addsItem" classname="com.acme.CartTest" time="0.25"/>
  <testcase name="paysCard" classname="com.acme.CartTest" time="1,000.5">
    <failure message="expected &lt;200&gt; but was &lt;503&gt;" type="AssertionError"><![CDATA[at Cart.pay(Cart.java:12)]]></failure>
  </testcase>
  <testcase name="refunds" classname="com.acme.CartTest" time="0.1"><skipped message="not on CI"/></testcase>
  <testcase name="retries" classname="com.acme.CartTest" time="0.2">
    <flakyFailure message="timed out"/>
  </testcase>
</testsuite>"#;

    #[test]
    fn a_surefire_report_becomes_attempts_with_reruns_and_reasons() {
        let report = read(SUREFIRE.as_bytes(), 0).unwrap();
        assert_eq!(report.tool, "surefire");
        assert_eq!(report.started_ms, Some(1_796_119_200_000));
        let seen: Vec<(&str, u32, CaseResult, u64)> =
            report.lines.iter().map(|l| (l.id.as_str(), l.attempt, l.result, l.ms)).collect();
        assert_eq!(
            seen,
            [
                ("com.acme.CartTest.addsItem", 1, CaseResult::Passed, 250),
                ("com.acme.CartTest.paysCard", 1, CaseResult::Failed, 1_000_500),
                ("com.acme.CartTest.refunds", 1, CaseResult::Unsupported, 100),
                ("com.acme.CartTest.retries", 1, CaseResult::Failed, 0),
                ("com.acme.CartTest.retries", 2, CaseResult::Passed, 200),
            ]
        );
        let error = report.lines[1].steps[0].error.as_deref().unwrap();
        assert_eq!(error, "expected <200> but was <503>\nat Cart.pay(Cart.java:12)");
        assert_eq!(report.lines[1].started_at, "2026-12-01T10:00:00.000Z");
        assert_eq!(report.lines[2].steps[0].error.as_deref(), Some("not on CI"));
    }

    #[test]
    fn what_is_not_a_junit_report_is_refused_with_where_and_what() {
        let refused = |text: &str| read(text.as_bytes(), 0).unwrap_err().0;
        let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><testsuite><testcase name="a"><failure message="&lol2;"/></testcase></testsuite>"#;
        assert_eq!(
            refused(laughs),
            "the report has a DOCTYPE: a JUnit report needs none, and entities are never expanded"
        );
        assert_eq!(
            refused("<testsuite><testcase name=\"a\">\0</testcase></testsuite>"),
            "the report holds a NUL byte at byte 30: it is not XML"
        );
        assert!(
            refused("<testsuite><testcase name=\"a\"></testsuite>")
                .starts_with("the report is not well-formed XML at byte")
        );
        assert_eq!(
            refused("<html><body/></html>"),
            "the report's root is <html>, not <testsuites> or <testsuite>: not a JUnit report"
        );
        assert_eq!(refused("<testsuite></testsuite>"), "the report holds no <testcase>");
        assert_eq!(
            refused("<testsuite><testcase name=\"a\" time=\"soon\"/></testsuite>"),
            "<testcase time=\"soon\"> at byte 11 is not a number of seconds"
        );
        let entity = refused("<testsuite><testcase name=\"a\"><failure message=\"&nope;\"/></testcase></testsuite>");
        assert!(entity.contains("nope"), "{entity}");
        assert!(read(&[0xff, 0xfe], 0).unwrap_err().0.starts_with("the report is not UTF-8"));
    }

    #[test]
    fn an_id_is_the_class_and_the_name_and_control_characters_are_dropped() {
        let report = read(b"<testsuites name=\"jest tests\"><testsuite name=\"cart\"><testcase classname=\"cart adds\" name=\"adds&#x1b;[31m\"/><testcase classname=\"flow\" name=\"flow\"/></testsuite></testsuites>", 7).unwrap();
        assert_eq!(report.tool, "jest");
        assert_eq!(report.lines[0].id, "cart adds.adds[31m");
        assert_eq!(report.lines[1].id, "flow");
    }
}
