//! A Slack incoming-webhook message in Block Kit: a section that says what
//! happened, with a link to it, and a context line; `text` is the fallback
//! notifications show. Everything users wrote is escaped as Slack's
//! mrkdwn asks (`&`, `<`, `>`), so a case id cannot become a link or a
//! mention.

use serde_json::{Value, json};

use super::events::{Event, Happened};

/// Slack's limit on a section's text.
const SECTION_CHARS: usize = 3000;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn clip(text: String) -> String {
    if text.chars().count() <= SECTION_CHARS {
        text
    } else {
        text.chars().take(SECTION_CHARS - 1).collect::<String>() + "…"
    }
}

pub fn message(event: &Event, dashboard: Option<&str>) -> Value {
    let link = |label: &str| match dashboard {
        Some(dashboard) => format!("<{}|{}>", event.link(dashboard), escape(label)),
        None => escape(label),
    };
    let (text, detail) = match &event.happened {
        Happened::RunFinished { run } => {
            let branch = run.branch.as_deref().map(|b| format!(" on `{}`", escape(b))).unwrap_or_default();
            let muted =
                if run.muted_failed > 0 { format!(", {} muted-failed", run.muted_failed) } else { String::new() };
            (
                format!(
                    "*{}* {} *{}*{branch}: {}/{} passed, {} failed{muted}",
                    escape(&run.project),
                    link(&format!("run {}", run.id)),
                    run.result,
                    run.passed,
                    run.cases,
                    run.failed - run.muted_failed
                ),
                run.commit.as_deref().map(|c| format!("commit `{}`", escape(&c[..c.len().min(12)]))),
            )
        }
        Happened::CaseFailing { run, case } => {
            let branch = run.branch.as_deref().map(|b| format!(" on `{}`", escape(b))).unwrap_or_default();
            (
                format!(
                    "*{}* case {} started failing{branch} ({}): {}",
                    escape(&run.project),
                    link(&case.id),
                    escape(&case.cause),
                    escape(&case.line)
                ),
                case.owner.as_deref().map(|o| format!("owner {}", escape(o))),
            )
        }
        Happened::DeviceQuarantined { device } => (
            format!(
                "device {} ({}) quarantined: {}",
                link(&device.id),
                escape(&device.platform),
                escape(&device.reason)
            ),
            None,
        ),
        Happened::CaseMuted { mute } => (
            format!(
                "*{}* case {} muted by {}: {}",
                escape(&mute.project),
                link(&mute.case_id),
                escape(&mute.by),
                escape(&mute.reason)
            ),
            mute.until.as_deref().map(|u| format!("until {}", escape(u))),
        ),
    };
    let text = clip(text);
    let mut blocks = vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": text } })];
    if let Some(detail) = detail {
        blocks.push(json!({ "type": "context", "elements": [{ "type": "mrkdwn", "text": clip(detail) }] }));
    }
    json!({ "text": text, "blocks": blocks })
}
