//! The store: the truth the coordinator rebuilds itself from. Postgres for
//! teams, SQLite as the embedded default, chosen by the database URL; the
//! same runtime queries serve both (sqlx's Any driver), so a build needs no
//! database.

macro_rules! run_select {
    () => {
        "SELECT id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, priority, \
         started_at, finished_at, manifest_json, platform, result, cases, passed, failed, retried, detached, \
         waiting_reason, muted_failed, rerun_of, testowners FROM runs"
    };
}

pub mod artifacts;
mod attempts;
mod builds;
mod case_days;
mod dashboard;
mod events;
mod fleet;
mod history;
mod import;
mod mutes;
mod observations;
mod open;
pub mod prune;
mod retention;
mod rows;
mod runs;
mod sessions;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use builds::BuildRow;
pub use events::{DeliveryRow, DueDelivery, EventRow, NewEvent, Tried as DeliveryTried};
pub use mutes::{MuteEvent, MuteRow};
pub use observations::{CaseRun, FailureCause, ObservationRow, Observed, ObservedAttempt};
pub use retention::Pruned;
pub use sessions::{CommandRow, SessionRow};

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

pub use history::KEPT_PASSES;
pub use import::{ImportedRun, PUSHED};
pub use rows::*;
use runs::{finish_run_in, update_case_results};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("the database URL {0:?} is neither postgres:// nor sqlite:")]
    UnknownScheme(String),
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database: {0}")]
    Query(#[from] sqlx::Error),
    /// A result from a lease that is no longer current: fencing.
    #[error("lease {0} is not current (revoked, expired or already finished)")]
    StaleLease(String),
    /// The attempt was leased or finished by someone else meanwhile.
    #[error("attempt {0} is no longer pending")]
    NotPending(String),
    #[error("no run {0}")]
    NoRun(String),
    #[error("no device {0}")]
    NoDevice(String),
    #[error("a standby coordinator needs Postgres: SQLite is one process's database")]
    StandbyNeedsPostgres,
    /// A stored record that does not read back (written by another version,
    /// or changed by hand): named, never left out.
    #[error("a stored record does not read back: {0}")]
    Corrupt(String),
}

/// A store error's code: what a client can act on keeps its words; a
/// database that could not answer is `Unavailable` (try again), never
/// "not found", and its own words (which may quote what was sent) stay in
/// the log.
impl argus_proto::errors::Coded for StoreError {
    fn code(&self) -> argus_proto::errors::ErrorCode {
        use argus_proto::errors::ErrorCode;
        match self {
            StoreError::NoRun(_) | StoreError::NoDevice(_) => ErrorCode::NotFound,
            StoreError::StaleLease(_) | StoreError::NotPending(_) | StoreError::StandbyNeedsPostgres => {
                ErrorCode::FailedPrecondition
            }
            StoreError::Corrupt(_) => ErrorCode::DataLoss,
            StoreError::Connect { .. }
            | StoreError::UnknownScheme(_)
            | StoreError::Migrate(_)
            | StoreError::Query(_) => ErrorCode::Unavailable,
        }
    }

    fn public_message(&self) -> String {
        match self.code() {
            argus_proto::errors::ErrorCode::Unavailable => {
                "the coordinator's database could not answer; try again".into()
            }
            _ => self.to_string(),
        }
    }
}

impl From<StoreError> for tonic::Status {
    fn from(error: StoreError) -> Self {
        argus_proto::errors::grpc_status(&error)
    }
}

/// The advisory lock of the active coordinator among several on one
/// database (the key spells `argus`).
const LEADER_LOCK: i64 = 0x61_72_67_75_73;

/// Held by the active coordinator: a connection of its own that holds the
/// lock; Postgres lets go of it when the connection ends (the process died,
/// or the database restarted).
pub struct Leadership {
    conn: sqlx::AnyConnection,
    /// The server process of `conn`: the lock's holder in `pg_locks`.
    pid: i32,
}

impl Leadership {
    /// Lets go of the lock: its connection ends (at once if it still works).
    pub async fn close(self) {
        let _ = sqlx::Connection::close(self.conn).await;
    }

    /// The database's process that holds the lock for this coordinator.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the lock is still held: its connection still answers.
    pub async fn check(&mut self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&mut self.conn).await?;
        Ok(())
    }
}

/// Rows per multi-row INSERT: well under both databases' limits on
/// parameters (SQLite's 32,766, Postgres' 65,535) at up to 18 columns (a result's).
const ROWS_PER_INSERT: usize = 500;
/// SQLite finds each `$N` of a statement by name, one scan per bind: a
/// statement of thousands of parameters costs the square of that. Smaller
/// statements there (found by profiling the grid benchmark).
const ROWS_PER_INSERT_SQLITE: usize = 50;
/// Cases per transaction when a run is written (`create_run`). SQLite's
/// one connection is the owner task's too, so a part there is small: the
/// owner's results go between two. Postgres' other connections write on
/// meanwhile, and each part costs a commit (a 100,000-case suite of
/// 500-case parts waited for 200 fsyncs in a row).
fn cases_per_part(backend: Backend) -> usize {
    match backend {
        Backend::Postgres => 10_000,
        Backend::Sqlite => 500,
    }
}

/// `($1, $2), ($3, $4)`: the VALUES of a multi-row INSERT.
fn placeholders(rows: usize, columns: usize) -> String {
    use std::fmt::Write as _;
    // Written into one string: a burst's statement numbers thousands of
    // parameters, and a string per parameter showed in the owner's profile.
    let mut sql = String::with_capacity(rows * columns * 8);
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 1..=columns {
            if c > 1 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "${}", r * columns + c);
        }
        sql.push(')');
    }
    sql
}

/// Rows per multi-row statement on a database.
fn rows_per_statement(backend: Backend) -> usize {
    match backend {
        Backend::Postgres => ROWS_PER_INSERT,
        Backend::Sqlite => ROWS_PER_INSERT_SQLITE,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

/// Hides the password of a database URL, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:…{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl Store {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Rows per multi-row statement on this database.
    fn rows(&self) -> usize {
        rows_per_statement(self.backend)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

const RUN_COLUMNS_BY_ID: &str = concat!(run_select!(), " WHERE id = $1");
const RUN_COLUMNS_NEWEST: &str = concat!(run_select!(), " WHERE written = 1 ORDER BY started_at DESC LIMIT $1");
const RUN_COLUMNS_OPEN: &str = concat!(run_select!(), " WHERE finished_at IS NULL ORDER BY started_at");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_becomes_the_answer_a_client_can_act_on() {
        let status = |error: StoreError| tonic::Status::from(error).code();
        assert_eq!(status(StoreError::NoRun("r".into())), tonic::Code::NotFound);
        assert_eq!(status(StoreError::StaleLease("l".into())), tonic::Code::FailedPrecondition);
        // A database that could not answer is never "not found".
        let outage = tonic::Status::from(StoreError::Query(sqlx::Error::PoolTimedOut));
        assert_eq!(outage.code(), tonic::Code::Unavailable);
        assert_eq!(outage.message(), "the coordinator's database could not answer; try again");
        let http = argus_proto::errors::http_answer(&StoreError::NoRun("r-1".into()));
        assert_eq!(http, (404, "no run r-1".into()), "the dashboard's API answers alike");
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(redact_url("postgres://argus:s3cret@db:5432/argus"), "postgres://argus:…@db:5432/argus");
        assert_eq!(redact_url("postgres://db/argus"), "postgres://db/argus");
        assert_eq!(redact_url("sqlite:argus.db"), "sqlite:argus.db");
    }

    #[test]
    fn placeholders_number_every_row() {
        assert_eq!(placeholders(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(placeholders(1, 1), "($1)");
    }
}
