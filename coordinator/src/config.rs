//! The coordinator's settings, once the CLI has merged its layers (flags,
//! `ARGUS_*` variables, `[coordinator]` in argus.toml, secret files), and
//! the checks no type makes.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::service::{TlsFileError, TlsIdentity};

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
    pub standby: bool,
}

impl Default for CoordinatorSettings {
    fn default() -> Self {
        Self {
            database_url: DEFAULT_DATABASE.into(),
            artifacts: "argus-artifacts".into(),
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
            unmute_after: argus_grid::mutes::UNMUTE_AFTER,
            standby: false,
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
