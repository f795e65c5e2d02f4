//! Telling a team where it works: what happened (a run ended, a case
//! started failing on a branch, a device was quarantined, a case was
//! muted) as events, and each webhook's request for an event, in its
//! format: Argus' own JSON, signed as GitHub signs its webhooks; a Slack
//! incoming-webhook message; a GitHub commit status. Pure: the events are
//! kept in the store by whoever raised them (in the same transaction), and
//! the coordinator's `webhooks` task sends the requests and retries them.

mod github;
mod slack;

use std::time::Duration;

use hmac::{KeyInit, Mac};
use serde::Deserialize;

pub use argus_grid::events::{self, Event, EventKind};

/// The header that carries the body's HMAC-SHA256, as `sha256=HEX`.
pub const SIGNATURE_HEADER: &str = "X-Argus-Signature-256";
/// The header that names the event.
pub const EVENT_HEADER: &str = "X-Argus-Event";
/// The header that names the delivery (the same on every retry of it).
pub const DELIVERY_HEADER: &str = "X-Argus-Delivery";
/// The GitHub REST API unless a webhook names another (GitHub Enterprise).
pub const GITHUB_API: &str = "https://api.github.com";

/// What a webhook's requests look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Argus' JSON payload (docs/teams.md, "Be told").
    #[default]
    Json,
    /// A Slack incoming-webhook message in Block Kit.
    Slack,
    /// A commit status on GitHub for the run's commit (`run.finished` only).
    GithubStatus,
}

/// A configured webhook, its secrets read from their files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// How deliveries and the dashboard name it.
    pub name: String,
    /// Where it is sent; for `github-status`, the API's base.
    pub url: String,
    /// The events it wants (all when empty).
    pub events: Vec<EventKind>,
    pub format: Format,
    /// Signs the body (`X-Argus-Signature-256`), when set.
    pub secret: Option<String>,
    /// `github-status`: the token and the repository (`owner/repo`).
    pub token: Option<String>,
    pub repository: Option<String>,
    /// Only events of these projects (all when empty).
    pub projects: Vec<String>,
    /// Only case events of cases these own (all when empty).
    pub owners: Vec<String>,
}

impl Webhook {
    /// Whether it wants `event`.
    pub fn wants(&self, event: &Event) -> bool {
        let kind = event.kind();
        let kind_ok = if self.events.is_empty() { true } else { self.events.contains(&kind) };
        let format_ok = self.format != Format::GithubStatus || kind == EventKind::RunFinished;
        let project_ok =
            self.projects.is_empty() || event.project().is_some_and(|p| self.projects.iter().any(|w| w == p));
        let owner_ok = self.owners.is_empty() || event.owner().is_some_and(|o| self.owners.iter().any(|w| w == o));
        kind_ok && format_ok && project_ok && owner_ok
    }

    /// The URL as the dashboard shows it: scheme, host and port only (a
    /// Slack webhook's path is its secret).
    pub fn shown_url(&self) -> String {
        match self.url.split_once("://") {
            Some((scheme, rest)) => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or("");
                let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
                format!("{scheme}://{host}/…")
            }
            None => "…".into(),
        }
    }
}

/// One HTTP request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The request `webhook` sends for `event` (delivery `delivery`); `None`
/// when there is nothing to send (a commit status for a run without a
/// commit). `dashboard` is the dashboard's public address, for links.
pub fn request(webhook: &Webhook, event: &Event, delivery: &str, dashboard: Option<&str>) -> Option<Request> {
    let (url, mut headers, body) = match webhook.format {
        Format::Json => (webhook.url.clone(), Vec::new(), events::payload(event, dashboard)),
        Format::Slack => (webhook.url.clone(), Vec::new(), slack::message(event, dashboard)),
        Format::GithubStatus => {
            let (path, body) = github::status(event, webhook.repository.as_deref()?, dashboard)?;
            let mut headers = vec![
                ("Accept".to_owned(), "application/vnd.github+json".to_owned()),
                ("X-GitHub-Api-Version".to_owned(), "2022-11-28".to_owned()),
            ];
            if let Some(token) = &webhook.token {
                headers.push(("Authorization".to_owned(), format!("Bearer {token}")));
            }
            (format!("{}{path}", webhook.url.trim_end_matches('/')), headers, body)
        }
    };
    let body = serde_json::to_vec(&body).expect("a payload is plain data");
    headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
    headers.push(("User-Agent".to_owned(), concat!("argus/", env!("CARGO_PKG_VERSION")).to_owned()));
    headers.push((EVENT_HEADER.to_owned(), event.kind().as_str().to_owned()));
    headers.push((DELIVERY_HEADER.to_owned(), delivery.to_owned()));
    if let Some(secret) = &webhook.secret {
        headers.push((SIGNATURE_HEADER.to_owned(), sign(secret, &body)));
    }
    Some(Request { url, headers, body })
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any size");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// How long after its `attempts`-th failed try a delivery is tried again:
/// 1 s, doubling, at most 5 minutes.
pub fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(1u64 << attempts.saturating_sub(1).min(9)).min(Duration::from_secs(300))
}

/// Whether an answer means the receiver took it (2xx), will never take it
/// (4xx but 408 and 429: retrying changes nothing), or may later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Taken,
    Refused,
    TryAgain,
}

pub fn answer(status: u16) -> Answer {
    match status {
        200..=299 => Answer::Taken,
        408 | 429 => Answer::TryAgain,
        400..=499 => Answer::Refused,
        _ => Answer::TryAgain,
    }
}

/// What a try of a delivery came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tried {
    /// The receiver answered with this status.
    Answered(u16),
    /// No answer (refused connection, timeout, TLS).
    NoAnswer,
    /// Nothing could be sent (no such webhook any more, nothing to say).
    Nothing,
}

/// Where a delivery stands after a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// To be tried again at this time (epoch ms).
    Pending(i64),
    Delivered,
    /// A 4xx: retrying changes nothing.
    Refused,
    /// Out of time, or nothing to send.
    Abandoned,
}

impl Delivery {
    pub fn state(self) -> &'static str {
        match self {
            Delivery::Pending(_) => "pending",
            Delivery::Delivered => "delivered",
            Delivery::Refused => "refused",
            Delivery::Abandoned => "abandoned",
        }
    }
}

/// The policy: a delivery is tried until it is taken or refused, with
/// [`backoff`] between tries, while its event is younger than `retry_for`.
/// `attempts` counts this try.
pub fn after_try(tried: Tried, attempts: u32, now_ms: i64, created_ms: i64, retry_for: Duration) -> Delivery {
    let again = || {
        if now_ms - created_ms >= retry_for.as_millis() as i64 {
            Delivery::Abandoned
        } else {
            Delivery::Pending(now_ms + backoff(attempts).as_millis() as i64)
        }
    };
    match tried {
        Tried::Answered(status) => match answer(status) {
            Answer::Taken => Delivery::Delivered,
            Answer::Refused => Delivery::Refused,
            Answer::TryAgain => again(),
        },
        Tried::NoAnswer => again(),
        Tried::Nothing => Delivery::Abandoned,
    }
}

#[cfg(test)]
mod tests;
