//! The coordinator's settings, once the CLI has merged its layers (flags,
//! `ARGUS_*` variables, `[coordinator]` in argus.toml, secret files), and
//! the checks no type makes.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::serve::{TlsFileError, TlsIdentity};

/// Where workers and clients reach gRPC unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7171";
/// The HTTP port's address unless told otherwise.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7172";
/// The embedded store unless told otherwise.
pub const DEFAULT_DATABASE: &str = "sqlite:argus.db";

/// What the coordinator runs with, once the layers are merged.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorSettings {
    pub database_url: String,
    pub artifacts: PathBuf,
    /// Where the runs' app builds are kept.
    pub builds: PathBuf,
    pub worker_token: Option<String>,
    pub client_token: Option<String>,
    pub read_token: Option<String>,
    pub database_url_file: Option<PathBuf>,
    pub worker_token_file: Option<PathBuf>,
    pub client_token_file: Option<PathBuf>,
    pub read_token_file: Option<PathBuf>,
    pub listen: SocketAddr,
    pub http: SocketAddr,
    pub public_url: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub client_grace: u64,
    pub keep_days: Option<u64>,
    /// Days the step records of passing attempts are kept.
    pub step_records_days: u64,
    /// The branch whose passes unmute a muted case.
    pub default_branch: String,
    /// Attempts in a row that passed there to unmute it; 0: never by passes.
    pub unmute_after: u32,
    /// Auto-mute after this many passes on retry (0: off), in this window.
    pub auto_mute_after: u32,
    pub auto_mute_days: u32,
    pub standby: bool,
    /// `[[coordinator.webhooks]]`: who is told what (only in argus.toml).
    pub webhooks: Vec<WebhookSettings>,
    /// How long a delivery is retried before it is abandoned, in seconds.
    pub webhook_retry_for: u64,
}

/// One `[[coordinator.webhooks]]` table.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// How deliveries and the dashboard name it [default: `webhook N`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where it is sent (for `github-status`, the API's base:
    /// https://api.github.com unless GitHub Enterprise's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The URL read from a file, in place of `url` (a Slack webhook's URL
    /// is its secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_file: Option<PathBuf>,
    /// `run.finished`, `case.failing`, `device.quarantined`, `case.muted`
    /// [default: all].
    #[serde(default)]
    pub events: Vec<String>,
    /// `json`, `slack` or `github-status` [default: json].
    #[serde(default)]
    pub format: argus_history::notify::Format,
    /// The HMAC-SHA256 secret the body is signed with (`X-Argus-Signature-256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// `github-status`: the token, and the repository as `owner/repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Only these projects' events [default: every project's].
    #[serde(default)]
    pub projects: Vec<String>,
    /// Only case events of cases these own (TESTOWNERS) [default: all].
    #[serde(default)]
    pub owners: Vec<String>,
}

impl WebhookSettings {
    /// The webhook, its secrets read with `read` (file key, path); the first
    /// problem named with the webhook's place.
    pub fn webhook(
        &self,
        index: usize,
        read: &dyn Fn(&str, &std::path::Path) -> Result<String, String>,
    ) -> Result<argus_history::notify::Webhook, String> {
        use argus_history::notify::{EventKind, Format, GITHUB_API};
        let name = self.name.clone().unwrap_or_else(|| format!("webhook {}", index + 1));
        let here = |problem: String| format!("[[coordinator.webhooks]] {name:?}: {problem}");
        let url = match (&self.url, &self.url_file) {
            (Some(_), Some(_)) => return Err(here("url and url_file are both given: give it one way".into())),
            (Some(url), None) => Some(url.clone()),
            (None, Some(file)) => Some(read("url_file", file).map_err(here)?),
            (None, None) if self.format == Format::GithubStatus => Some(GITHUB_API.to_owned()),
            (None, None) => None,
        };
        let Some(url) = url else { return Err(here("url: required (where the webhook is sent)".into())) };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(here("url: give an http:// or https:// address".into()));
        }
        let events = self
            .events
            .iter()
            .map(|e| {
                EventKind::parse(e).ok_or_else(|| {
                    here(format!(
                        "events: {e:?} is not an event; they are {}",
                        EventKind::ALL.map(|k| k.as_str()).join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let secret = self.secret_file.as_deref().map(|f| read("secret_file", f)).transpose().map_err(here)?;
        let token = self.token_file.as_deref().map(|f| read("token_file", f)).transpose().map_err(here)?;
        if self.format == Format::GithubStatus {
            let repository = self.repository.as_deref().unwrap_or("");
            let parts: Vec<&str> = repository.split('/').collect();
            let plain = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if parts.len() != 2 || !parts.iter().all(|p| plain(p)) || parts.contains(&"..") {
                return Err(here(format!("repository: {repository:?}; github-status needs owner/repo")));
            }
            if token.is_none() {
                return Err(here("token_file: github-status needs a token that may write commit statuses".into()));
            }
        }
        Ok(argus_history::notify::Webhook {
            name,
            url,
            events,
            format: self.format,
            secret,
            token,
            repository: self.repository.clone(),
            projects: self.projects.clone(),
            owners: self.owners.clone(),
        })
    }
}

/// Every webhook, its secrets read; names must differ (deliveries are
/// kept by name).
pub fn webhooks(
    settings: &[WebhookSettings],
    read: &dyn Fn(&str, &std::path::Path) -> Result<String, String>,
) -> Result<Vec<argus_history::notify::Webhook>, String> {
    let hooks = settings.iter().enumerate().map(|(i, s)| s.webhook(i, read)).collect::<Result<Vec<_>, _>>()?;
    for (i, hook) in hooks.iter().enumerate() {
        if hooks[..i].iter().any(|h| h.name == hook.name) {
            return Err(format!("[[coordinator.webhooks]]: two are named {:?}; give each its own name", hook.name));
        }
    }
    Ok(hooks)
}

impl Default for CoordinatorSettings {
    fn default() -> Self {
        Self {
            database_url: DEFAULT_DATABASE.into(),
            artifacts: "argus-artifacts".into(),
            builds: "argus-builds".into(),
            worker_token: None,
            client_token: None,
            read_token: None,
            database_url_file: None,
            worker_token_file: None,
            client_token_file: None,
            read_token_file: None,
            listen: DEFAULT_LISTEN.parse().expect("a socket address"),
            http: DEFAULT_HTTP.parse().expect("a socket address"),
            public_url: None,
            tls_cert: None,
            tls_key: None,
            client_grace: 60,
            keep_days: None,
            step_records_days: argus_store::prune::STEP_RECORDS_DAYS,
            default_branch: "main".into(),
            unmute_after: argus_history::mutes::UNMUTE_AFTER,
            auto_mute_after: 0,
            auto_mute_days: 7,
            standby: false,
            webhooks: Vec::new(),
            webhook_retry_for: 3_600,
        }
    }
}

/// A setting the coordinator cannot start with, named.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("keep_days 0 would remove every finished run: give 1 or more days, or leave it out to keep everything")]
    KeepNothing,
    #[error("public_url {0:?}: give the dashboard's address as http://HOST:PORT")]
    PublicUrl(String),
    #[error("auto_mute_days 0 is a window of nothing: give 1 or more days")]
    AutoMuteDays,
    #[error("default_branch is empty: name the branch whose passes unmute a case (main, say)")]
    DefaultBranch,
    #[error("tls_cert and tls_key go together: give both, or neither")]
    TlsHalf,
    #[error(transparent)]
    TlsFile(#[from] TlsFileError),
}

impl CoordinatorSettings {
    /// Checks what no type says, and reads the TLS identity when there is
    /// one: the first problem, named, before anything starts.
    pub fn validate(&self) -> Result<Option<TlsIdentity>, SettingsError> {
        if self.keep_days == Some(0) {
            return Err(SettingsError::KeepNothing);
        }
        if self.auto_mute_after > 0 && self.auto_mute_days == 0 {
            return Err(SettingsError::AutoMuteDays);
        }
        if self.default_branch.trim().is_empty() {
            return Err(SettingsError::DefaultBranch);
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(SettingsError::PublicUrl(url.clone()));
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsIdentity::load(cert, key)?)),
            (None, None) => Ok(None),
            _ => Err(SettingsError::TlsHalf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_no_type_says_is_checked_and_named() {
        assert!(matches!(CoordinatorSettings::default().validate(), Ok(None)));
        let keep_nothing = CoordinatorSettings { keep_days: Some(0), ..CoordinatorSettings::default() };
        assert!(matches!(keep_nothing.validate(), Err(SettingsError::KeepNothing)));
        let bare = CoordinatorSettings { public_url: Some("argus.example".into()), ..CoordinatorSettings::default() };
        assert!(bare.validate().err().unwrap().to_string().contains("http://HOST:PORT"));
        let half = CoordinatorSettings { tls_cert: Some("cert.pem".into()), ..CoordinatorSettings::default() };
        assert!(matches!(half.validate(), Err(SettingsError::TlsHalf)));
        let missing = CoordinatorSettings {
            tls_cert: Some("/nonexistent/cert.pem".into()),
            tls_key: Some("/nonexistent/key.pem".into()),
            ..CoordinatorSettings::default()
        };
        assert!(missing.validate().err().unwrap().to_string().contains("/nonexistent/cert.pem"));
    }
}
