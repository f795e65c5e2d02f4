//! Where an attempt's fixtures and `exec` commands run: the project's side.
//! On one machine (`argus cases run`) that is the project's own fixtures
//! process and a shell in its directory ([`LocalProject`]); on the grid it is
//! the client that submitted the run, reached through the coordinator (the
//! worker's relay), because backend credentials live in CI, not on device
//! hosts.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Map, Value};

use super::fixtures::{Fixtures, FixturesError};
use super::shell::project_command;
use crate::config::CasesConfig;

/// A future a project side answers with.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The longest an `exec` command may run.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(120);

/// What an `exec` command left.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExecOutput {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Why an `exec` step's command did not run to an end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("`{run}` did not finish within {seconds} s")]
    TimedOut { run: String, seconds: u64 },
    #[error("cannot run `{run}`: {error}")]
    NotStarted { run: String, error: String },
    /// Run through the grid: the run's client did not answer, or answered
    /// something else.
    #[error("{0}")]
    Client(String),
}

/// What a case asks of the project.
pub trait ProjectSide: Send + Sync {
    /// One fixture request (spec §1.11); an answer with `ok: false` is an error.
    fn fixture<'a>(
        &'a self,
        command: &'a str,
        params: &'a Map<String, Value>,
    ) -> Answer<'a, Result<Value, FixturesError>>;
    /// One `exec` command line, run with `sh -c` in the project; the error
    /// says why it did not run to an end.
    fn exec<'a>(&'a self, run: &'a str) -> Answer<'a, Result<ExecOutput, ExecError>>;
}

/// The project on this machine.
pub struct LocalProject {
    /// Started when a case first needs it; `None` without `cases.fixtures`.
    pub fixtures: Option<Fixtures>,
    base: PathBuf,
}

impl LocalProject {
    /// The project `config` describes: its fixtures command, its base.
    pub fn of(config: &CasesConfig) -> Self {
        Self::new(config.fixtures.clone().map(Fixtures::new), config.base.clone())
    }

    pub fn new(fixtures: Option<Fixtures>, base: PathBuf) -> Self {
        Self { fixtures, base }
    }

    /// Ends the fixtures process, if it started.
    pub async fn close(&self) {
        if let Some(fixtures) = &self.fixtures {
            fixtures.close().await;
        }
    }
}

/// The error of a fixture step when the project has no fixtures command.
pub fn no_fixtures_command(command: &str) -> FixturesError {
    FixturesError {
        command: command.to_owned(),
        message: "no fixtures command is configured (cases.fixtures in lynkeus.config.json)".into(),
    }
}

impl ProjectSide for LocalProject {
    fn fixture<'a>(
        &'a self,
        command: &'a str,
        params: &'a Map<String, Value>,
    ) -> Answer<'a, Result<Value, FixturesError>> {
        Box::pin(async move {
            match &self.fixtures {
                Some(fixtures) => fixtures.request(command, params).await,
                None => Err(no_fixtures_command(command)),
            }
        })
    }

    fn exec<'a>(&'a self, run: &'a str) -> Answer<'a, Result<ExecOutput, ExecError>> {
        Box::pin(async move {
            let child = project_command(run).current_dir(&self.base).kill_on_drop(true).output();
            match tokio::time::timeout(EXEC_TIMEOUT, child).await {
                Err(_) => Err(ExecError::TimedOut { run: run.to_owned(), seconds: EXEC_TIMEOUT.as_secs() }),
                Ok(Err(e)) => Err(ExecError::NotStarted { run: run.to_owned(), error: e.to_string() }),
                Ok(Ok(output)) => Ok(ExecOutput {
                    code: output.status.code(),
                    stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                }),
            }
        })
    }
}
