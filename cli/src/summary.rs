//! The summary `argus run` prints when a run ends: its totals as lynkeus
//! counts them, then what a CI reader looks for next: wall time and
//! devices, totals per platform, flaky cases, infrastructure retries and
//! the slowest cases.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use argus_proto::run::{CaseResult, RunCase, RunTotals};

/// `850 ms`, `9.6 s`, `3 m 04 s`.
pub fn seconds(duration: Duration) -> String {
    let ms = duration.as_millis() as u64;
    match ms {
        ..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} m {:02} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// What the run did beyond its cases' lines: the attempts taken back.
#[derive(Debug, Default)]
pub struct Retaken {
    /// Case id and device of each attempt run again for the device's fault.
    pub attempts: Vec<(String, String)>,
}

/// The summary's lines. `lines` holds every attempt's line, in the order
/// they came.
pub fn summary(totals: &RunTotals, lines: &[RunCase], retaken: &Retaken, wall: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let mut first = format!("{}/{} passed", totals.passed, totals.cases);
    if totals.failed > 0 {
        first.push_str(&format!(", {} failed", totals.failed));
    }
    if totals.unsupported > 0 {
        first.push_str(&format!(", {} cannot run on this host", totals.unsupported));
    }
    if totals.retried > 0 {
        first.push_str(&format!(", {} retried", totals.retried));
    }
    out.push(first);

    // Each case's last attempt, by platform.
    let mut last: BTreeMap<&str, &RunCase> = BTreeMap::new();
    for line in lines {
        if last.get(line.id.as_str()).is_none_or(|l| line.attempt >= l.attempt) {
            last.insert(&line.id, line);
        }
    }
    let devices: BTreeSet<&str> = lines.iter().filter_map(|l| device(l, "id")).collect();
    let mut platforms: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for line in last.values() {
        let counts = platforms.entry(device(line, "platform").unwrap_or("unknown")).or_default();
        counts[match line.result {
            CaseResult::Passed => 0,
            CaseResult::Failed => 1,
            CaseResult::Unsupported => 2,
        }] += 1;
    }
    let mut second = format!("in {} on {} device{}", seconds(wall), devices.len(), plural(devices.len()));
    for (platform, [passed, failed, unsupported]) in &platforms {
        let cases = passed + failed + unsupported;
        second.push_str(&format!(" · {platform}: {cases} case{}, {passed} passed", plural(cases)));
        if *failed > 0 {
            second.push_str(&format!(", {failed} failed"));
        }
        if *unsupported > 0 {
            second.push_str(&format!(", {unsupported} unsupported"));
        }
    }
    out.push(second);

    let flaky: Vec<String> = last
        .values()
        .filter(|l| l.result == CaseResult::Passed && l.attempt > 1)
        .filter(|l| lines.iter().any(|o| o.id == l.id && o.result == CaseResult::Failed))
        .map(|l| format!("{} (passed on attempt {})", l.id, l.attempt))
        .collect();
    if !flaky.is_empty() {
        out.push(format!("flaky: {}", flaky.join(", ")));
    }
    if !retaken.attempts.is_empty() {
        let which: Vec<String> = retaken.attempts.iter().map(|(case, on)| format!("{case} on {on}")).collect();
        out.push(format!(
            "infrastructure retr{}: {} ({})",
            if which.len() == 1 { "y" } else { "ies" },
            which.len(),
            which.join(", ")
        ));
    }
    let mut slowest: Vec<&RunCase> = lines.iter().collect();
    slowest.sort_by_key(|l| std::cmp::Reverse(l.ms));
    let slowest: Vec<String> = slowest
        .iter()
        .take(3)
        .map(|l| {
            let attempt = if l.attempt > 1 { format!(" (attempt {})", l.attempt) } else { String::new() };
            format!("{} {}{attempt}", l.id, seconds(Duration::from_millis(l.ms)))
        })
        .collect();
    if !slowest.is_empty() {
        out.push(format!("slowest: {}", slowest.join(", ")));
    }
    out
}

fn device<'a>(line: &'a RunCase, field: &str) -> Option<&'a str> {
    let device = line.device.as_ref()?;
    match field {
        "id" => Some(&device.id),
        "platform" => Some(&device.platform),
        _ => Some(&device.worker),
    }
    .map(String::as_str)
}

/// Why each failed case failed, one line each (`✗ case [cause] first
/// differs at step …`), then the causes that several share.
pub fn why(explained: &argus_proto::grpc::ExplainResponse) -> Vec<String> {
    let owned = |owner: &str| if owner.is_empty() { String::new() } else { format!(" ({owner})") };
    let mut lines: Vec<String> = explained
        .cases
        .iter()
        .map(|case| format!("✗ {} [{}] {}{}", case.case_id, case.cause, case.line, owned(&case.owner)))
        .collect();
    for group in explained.groups.iter().filter(|g| g.case_ids.len() > 1) {
        let n = group.case_ids.len();
        let owners = if group.owners.is_empty() { String::new() } else { format!(" · {}", group.owners.join(" ")) };
        lines.push(format!("{} · {} · {n} case{}{owners}", group.cause, group.signature, plural(n)));
    }
    lines
}

/// The muted cases (case id → why) whose last attempt failed, in the
/// order they finished.
pub fn muted_failed<'a>(
    lines: &[RunCase],
    muted: &'a std::collections::BTreeMap<String, String>,
) -> Vec<(String, &'a str)> {
    let mut last: Vec<(&str, &RunCase)> = Vec::new();
    for line in lines {
        match last.iter_mut().find(|(id, _)| *id == line.id) {
            Some(seen) => seen.1 = line,
            None => last.push((&line.id, line)),
        }
    }
    last.into_iter()
        .filter(|(_, line)| line.result == argus_proto::run::CaseResult::Failed)
        .filter_map(|(id, _)| muted.get_key_value(id).map(|(id, why)| (id.clone(), why.as_str())))
        .collect()
}

/// `s` after a count other than one.
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, attempt: u32, result: &str, ms: u64, device: &str, platform: &str) -> RunCase {
        serde_json::from_value(serde_json::json!({
            "id": id, "file": "c.md", "attempt": attempt, "result": result, "startedAt": "2026-01-01T00:00:00.000Z",
            "ms": ms, "steps": [], "device": {"id": device, "platform": platform}
        }))
        .unwrap()
    }

    #[test]
    fn a_summary_says_what_ci_readers_look_for() {
        let lines = [
            line("a", 1, "passed", 900, "w/1", "ios"),
            line("promo", 1, "failed", 3_100, "w/2", "android"),
            line("promo", 2, "passed", 500, "w/1", "ios"),
            line("clock", 1, "unsupported", 200, "w/2", "android"),
            line("red", 1, "failed", 1_000, "w/2", "android"),
            line("red", 2, "failed", 1_200, "w/1", "ios"),
        ];
        let totals = argus_proto::run::totals(&lines);
        let retaken = Retaken { attempts: vec![("relaunch".into(), "w/3".into())] };
        let text = summary(&totals, &lines, &retaken, Duration::from_millis(9_600));
        assert_eq!(
            text,
            [
                "2/4 passed, 1 failed, 1 cannot run on this host, 2 retried",
                "in 9.6 s on 2 devices · android: 1 case, 0 passed, 1 unsupported · ios: 3 cases, 2 passed, 1 failed",
                "flaky: promo (passed on attempt 2)",
                "infrastructure retry: 1 (relaunch on w/3)",
                "slowest: promo 3.1 s, red 1.2 s (attempt 2), red 1.0 s",
            ]
        );
    }
}
