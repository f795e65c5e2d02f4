//! The store: the truth the coordinator rebuilds itself from. Postgres for
//! teams, SQLite as the embedded default, chosen by the database URL; the
//! same runtime queries serve both (sqlx's Any driver), so a build needs no
//! database.

macro_rules! run_select {
    () => {
        "SELECT id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, priority, \
         started_at, finished_at, manifest_json, platform, result, cases, passed, failed, retried, detached, \
         waiting_reason FROM runs"
    };
}

pub mod artifacts;
mod case_days;
mod dashboard;
mod import;
pub mod prune;
mod retention;
mod rows;
mod sessions;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use retention::Pruned;
pub use sessions::{CommandRow, SessionRow};

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

pub use import::{ImportedRun, PUSHED};
pub use rows::*;

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
}

/// The one conversion of a store error to a gRPC status: what a client
/// can act on keeps its words; a database that could not answer is
/// `UNAVAILABLE` (try again), never `NOT_FOUND`, and its own words (which
/// may quote what was sent) stay in the log.
impl From<StoreError> for tonic::Status {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NoRun(_) | StoreError::NoDevice(_) => tonic::Status::not_found(error.to_string()),
            StoreError::StaleLease(_) | StoreError::NotPending(_) | StoreError::StandbyNeedsPostgres => {
                tonic::Status::failed_precondition(error.to_string())
            }
            StoreError::Connect { .. }
            | StoreError::UnknownScheme(_)
            | StoreError::Migrate(_)
            | StoreError::Query(_) => {
                tracing::warn!(%error, "the store could not answer a request");
                tonic::Status::unavailable("the coordinator's database could not answer; try again")
            }
        }
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
/// parameters (SQLite's 32,766, Postgres' 65,535) at nine columns.
const ROWS_PER_INSERT: usize = 500;
/// SQLite finds each `$N` of a statement by name, one scan per bind: a
/// statement of thousands of parameters costs the square of that. Smaller
/// statements there (found by profiling the grid benchmark).
const ROWS_PER_INSERT_SQLITE: usize = 50;
/// Cases per transaction when a run is written (`create_run`).
const CASES_PER_PART: usize = 500;

/// `($1, $2), ($3, $4)`: the VALUES of a multi-row INSERT.
fn placeholders(rows: usize, columns: usize) -> String {
    let row = |r: usize| {
        let params: Vec<String> = (1..=columns).map(|c| format!("${}", r * columns + c)).collect();
        format!("({})", params.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
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
    /// Opens (and for SQLite creates) the database, and applies the
    /// migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            return Err(StoreError::UnknownScheme(redact_url(url)));
        };
        let url_with_mode = match backend {
            Backend::Sqlite if !url.contains("mode=") && !url.contains(":memory:") => {
                format!("{url}{}mode=rwc", if url.contains('?') { "&" } else { "?" })
            }
            _ => url.to_owned(),
        };
        // One connection first: an unreachable database fails at once, with
        // its own error, rather than after the pool's acquire timeout.
        {
            use sqlx::Connection;
            let probe = sqlx::AnyConnection::connect(&url_with_mode)
                .await
                .map_err(|source| StoreError::Connect { url: redact_url(url), source })?;
            probe.close().await?;
        }
        let options = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 1 } else { 16 })
            .acquire_timeout(Duration::from_secs(10));
        let pool = options
            .connect(&url_with_mode)
            .await
            .map_err(|source| StoreError::Connect { url: redact_url(url), source })?;
        if backend == Backend::Sqlite {
            // One writer at a time, and the journal that lets readers read meanwhile.
            for pragma in ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON"] {
                sqlx::query(pragma).execute(&pool).await?;
            }
        }
        let store = Self { pool, backend };
        store.migrate().await?;
        store.count_ended_runs().await?;
        Ok(store)
    }

    /// Creates database `name` on the Postgres server `admin_url` reaches,
    /// and answers its URL (for test suites and first installs).
    pub async fn create_database(admin_url: &str, name: &str) -> Result<String, StoreError> {
        use backon::BackoffBuilder;
        use sqlx::Connection;
        install_default_drivers();
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(StoreError::UnknownScheme(format!("database name {name:?}")));
        }
        let mut conn = sqlx::AnyConnection::connect(admin_url)
            .await
            .map_err(|source| StoreError::Connect { url: redact_url(admin_url), source })?;
        // CREATE DATABASE copies template1 and refuses while any other
        // session is on it (55006): autovacuum visits it, and so do
        // concurrent creates. That passes within moments.
        let mut waits =
            backon::ConstantBuilder::default().with_delay(Duration::from_millis(200)).with_max_times(25).build();
        loop {
            match sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await {
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55006") => match waits.next() {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(sqlx::Error::Database(e).into()),
                },
                other => break other.map(drop)?,
            }
        }
        conn.close().await?;
        let (base, query) = admin_url.split_once('?').unwrap_or((admin_url, ""));
        let base = base.rfind('/').map_or(base, |i| &base[..i]);
        Ok(if query.is_empty() { format!("{base}/{name}") } else { format!("{base}/{name}?{query}") })
    }

    /// The lock that makes this coordinator the active one, if no other
    /// holds it.
    pub async fn try_lead(&self) -> Result<Option<Leadership>, StoreError> {
        if self.backend != Backend::Postgres {
            return Err(StoreError::StandbyNeedsPostgres);
        }
        let mut conn = sqlx::ConnectOptions::connect(&*self.pool.connect_options()).await?;
        let got: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(LEADER_LOCK).fetch_one(&mut conn).await?;
        if !got {
            return Ok(None);
        }
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut conn).await?;
        Ok(Some(Leadership { conn, pid }))
    }

    /// The database processes holding the active coordinator's lock: one
    /// while a coordinator is active, none between two.
    pub async fn lock_holders(&self) -> Result<Vec<i32>, StoreError> {
        if self.backend != Backend::Postgres {
            return Err(StoreError::StandbyNeedsPostgres);
        }
        // A bigint advisory key is kept as its high half in `classid` and
        // its low half in `objid`, with `objsubid` 1.
        let pids = sqlx::query_scalar(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND classid::bigint = $1 AND objid::bigint = $2 ORDER BY pid",
        )
        .bind(LEADER_LOCK >> 32)
        .bind(LEADER_LOCK & 0xffff_ffff)
        .fetch_all(&self.pool)
        .await?;
        Ok(pids)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Rows per multi-row statement on this database.
    fn rows(&self) -> usize {
        match self.backend {
            Backend::Postgres => ROWS_PER_INSERT,
            Backend::Sqlite => ROWS_PER_INSERT_SQLITE,
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        match self.backend {
            Backend::Postgres => sqlx::migrate!("../migrations/postgres").run(&self.pool).await?,
            Backend::Sqlite => sqlx::migrate!("../migrations/sqlite").run(&self.pool).await?,
        }
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A run, its files, its cases, and one pending attempt per case, in one
    /// transaction.
    pub async fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        // The run and its files first, marked unwritten; then its cases in
        // parts, each its own transaction, so that other writers (the owner
        // task's results) go between two parts; then the mark comes off.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO runs (id, project, branch, commit_sha, trigger_by, selector_json, config_json, retries, \
             priority, started_at, manifest_json, detached, written) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0)",
        )
        .bind(&run.id)
        .bind(&run.project)
        .bind(&run.branch)
        .bind(&run.commit)
        .bind(&run.trigger)
        .bind(&run.selector_json)
        .bind(&run.config_json)
        .bind(i64::from(run.retries))
        .bind(i64::from(run.priority))
        .bind(run.started_at)
        .bind(&run.manifest_json)
        .bind(i64::from(run.detached))
        .execute(&mut *tx)
        .await?;
        // A few statements per 500 cases, whatever the suite's size.
        for chunk in run.files.chunks(self.rows()) {
            let sql = format!("INSERT INTO run_files (run_id, path, source) VALUES {}", placeholders(chunk.len(), 3));
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (path, source) in chunk {
                query = query.bind(&run.id).bind(path).bind(source);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        if let Err(error) = self.write_run_cases(run).await {
            // Nothing half-written stays. Should this fail too, the next
            // coordinator to start removes the run (`written` is still 0).
            let removed =
                sqlx::query("DELETE FROM runs WHERE id = $1 AND written = 0").bind(&run.id).execute(&self.pool).await;
            if let Err(cleanup) = removed {
                tracing::warn!(run = %run.id, error = %cleanup, "cannot remove a run whose writing failed; the next start removes it");
            }
            return Err(error);
        }
        Ok(())
    }

    /// The run's cases, [`CASES_PER_PART`] to a transaction, then their
    /// first attempts and the mark that the run is whole.
    async fn write_run_cases(&self, run: &NewRun) -> Result<(), StoreError> {
        for part in run.cases.chunks(CASES_PER_PART) {
            let mut tx = self.pool.begin().await?;
            for chunk in part.chunks(self.rows()) {
                let sql = format!(
                    "INSERT INTO cases (run_id, case_id, file, title, ordinal, expected_ms, estimate_source) VALUES {}",
                    placeholders(chunk.len(), 7)
                );
                // Built from constants and numbered placeholders only.
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for case in chunk {
                    query = query
                        .bind(&run.id)
                        .bind(&case.case_id)
                        .bind(&case.file)
                        .bind(&case.title)
                        .bind(case.ordinal)
                        .bind(case.expected_ms)
                        .bind(&case.estimate_source);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
        // Every case's first attempt, made from the cases by the database
        // (one statement, not a bound row per case), with the mark.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, created_at) \
             SELECT run_id, case_id, 1, 1, 'pending', $2 FROM cases WHERE run_id = $1",
        )
        .bind(&run.id)
        .bind(run.started_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE runs SET written = 1 WHERE id = $1").bind(&run.id).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the runs a coordinator stopped while writing (see
    /// `create_run`): their clients were never told of them. Called before
    /// the open runs are read back.
    pub async fn remove_unwritten_runs(&self) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM runs WHERE written = 0").execute(&self.pool).await?.rows_affected())
    }

    /// Every attempt not yet finished: what the scheduler rebuilds from.
    pub async fn open_attempts(&self) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query_as::<_, AttemptRow>(
            "SELECT a.run_id, a.case_id, a.attempt, a.try_no, a.state, a.lease_id, a.device_id, c.expected_ms, \
             c.ordinal, r.priority, r.selector_json \
             FROM attempts a JOIN cases c ON c.run_id = a.run_id AND c.case_id = a.case_id \
             JOIN runs r ON r.id = a.run_id \
             WHERE a.state IN ('pending', 'leased') ORDER BY a.created_at, c.ordinal",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Commits one lease before it is sent.
    pub async fn grant_lease(&self, lease: &NewLease) -> Result<(), StoreError> {
        match self.grant_leases(std::slice::from_ref(lease)).await?[..] {
            [true] => Ok(()),
            _ => Err(StoreError::NotPending(format!("{}/{}#{}", lease.run_id, lease.case_id, lease.attempt))),
        }
    }

    /// Commits many leases in one transaction (one dispatch hands every idle
    /// device its attempt), before any is sent. Per lease: granted, or not
    /// because its attempt is no longer pending (cancelled meanwhile).
    pub async fn grant_leases(&self, leases: &[NewLease]) -> Result<Vec<bool>, StoreError> {
        let mut tx = self.pool.begin().await?;
        // One statement per chunk: every lease whose attempt is still pending.
        let mut taken: HashSet<String> = HashSet::new();
        for chunk in leases.chunks(self.rows()) {
            let sql = format!(
                "UPDATE attempts SET state = 'leased', lease_id = v.column1, device_id = v.column2, \
                 worker_id = v.column3, platform = v.column4, started_at = v.column5 FROM (VALUES {}) AS v \
                 WHERE attempts.run_id = v.column6 AND attempts.case_id = v.column7 AND attempts.attempt = v.column8 \
                 AND attempts.try_no = v.column9 AND attempts.state = 'pending' RETURNING attempts.lease_id",
                placeholders(chunk.len(), 9)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
            for lease in chunk {
                query = query
                    .bind(&lease.id)
                    .bind(&lease.device_id)
                    .bind(&lease.worker_id)
                    .bind(&lease.platform)
                    .bind(lease.granted_at)
                    .bind(&lease.run_id)
                    .bind(&lease.case_id)
                    .bind(i64::from(lease.attempt))
                    .bind(i64::from(lease.try_no));
            }
            taken.extend(query.fetch_all(&mut *tx).await?);
        }
        let granted: Vec<bool> = leases.iter().map(|l| taken.contains(&l.id)).collect();
        let rows: Vec<&NewLease> = leases.iter().zip(&granted).filter(|(_, g)| **g).map(|(l, _)| l).collect();
        for chunk in rows.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO leases (id, run_id, case_id, attempt, try_no, device_id, worker_id, granted_at, deadline) \
                 VALUES {}",
                placeholders(chunk.len(), 9)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for lease in chunk {
                query = query
                    .bind(&lease.id)
                    .bind(&lease.run_id)
                    .bind(&lease.case_id)
                    .bind(i64::from(lease.attempt))
                    .bind(i64::from(lease.try_no))
                    .bind(&lease.device_id)
                    .bind(&lease.worker_id)
                    .bind(lease.granted_at)
                    .bind(lease.deadline);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(granted)
    }

    /// Moves the deadline of open leases (heartbeats): one statement per
    /// chunk of leases.
    pub async fn extend_leases(&self, lease_ids: &[String], deadline: i64) -> Result<(), StoreError> {
        for chunk in lease_ids.chunks(self.rows()) {
            let ids: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 2)).collect();
            let sql = format!("UPDATE leases SET deadline = $1 WHERE ended_at IS NULL AND id IN ({})", ids.join(", "));
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(deadline);
            for id in chunk {
                query = query.bind(id);
            }
            query.execute(&self.pool).await?;
        }
        Ok(())
    }

    /// Cancels a run in one transaction: its open leases end, their attempts
    /// are done (as infrastructure, with `reason`), its waiting attempts are
    /// dropped, and the run gets `manifest_json` (cut short: no totals).
    pub async fn cancel_run(&self, run_id: &str, reason: &str, at: i64, manifest_json: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE leases SET ended_at = $1, end_reason = $2 WHERE run_id = $3 AND ended_at IS NULL")
            .bind(at)
            .bind(reason)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE attempts SET state = 'done', infrastructure = 1, error = $1, finished_at = $2 \
             WHERE run_id = $3 AND state = 'leased'",
        )
        .bind(reason)
        .bind(at)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE attempts SET state = 'cancelled', error = $1, finished_at = $2 WHERE run_id = $3 AND state = 'pending'")
            .bind(reason)
            .bind(at)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        let updated = sqlx::query(
            "UPDATE runs SET finished_at = $1, manifest_json = $2, result = 'cancelled', waiting_reason = NULL \
             WHERE id = $3 AND finished_at IS NULL",
        )
        .bind(at)
        .bind(manifest_json)
        .bind(run_id)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            // Finished or cancelled already; nothing of it changes.
            tx.rollback().await?;
            return Ok(());
        }
        case_days::count_ended(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records how a leased attempt ended; refuses a lease that is no longer
    /// current (fencing).
    pub async fn finish_attempt(&self, lease_id: &str, outcome: &AttemptOutcome) -> Result<AttemptKey, StoreError> {
        let finished = self.finish_attempts(&[(lease_id.to_owned(), outcome.clone())]).await?;
        finished.into_iter().next().unwrap_or_else(|| Err(StoreError::StaleLease(lease_id.to_owned())))
    }

    /// Records many results in one transaction. Per result: its attempt, or
    /// `StaleLease` when its lease is no longer current (fencing), which
    /// leaves the others to commit.
    pub async fn finish_attempts(
        &self,
        results: &[(String, AttemptOutcome)],
    ) -> Result<Vec<Result<AttemptKey, StoreError>>, StoreError> {
        let mut tx = self.pool.begin().await?;
        // Two statements per chunk, whatever its size: end the leases that
        // are still current, then finish their attempts.
        let mut finished: HashMap<String, AttemptKey> = HashMap::new();
        for chunk in results.chunks(self.rows()) {
            let sql = format!(
                "UPDATE leases SET ended_at = v.column2, end_reason = v.column3 FROM (VALUES {}) AS v \
                 WHERE leases.id = v.column1 AND leases.ended_at IS NULL RETURNING leases.id",
                placeholders(chunk.len(), 3)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
            for (lease_id, outcome) in chunk {
                query = query.bind(lease_id).bind(outcome.finished_at).bind(if outcome.infrastructure {
                    "infrastructure"
                } else {
                    "finished"
                });
            }
            let ended: HashSet<String> = query.fetch_all(&mut *tx).await?.into_iter().collect();
            let current: Vec<&(String, AttemptOutcome)> = chunk.iter().filter(|(id, _)| ended.contains(id)).collect();
            if current.is_empty() {
                continue;
            }
            let sql = format!(
                "UPDATE attempts SET state = 'done', result = v.column2, infrastructure = v.column3, error = v.column4, \
                 finished_at = v.column5, ms = v.column6, run_case_json = v.column7, seq = v.column8 \
                 FROM (VALUES {}) AS v \
                 WHERE attempts.lease_id = v.column1 AND attempts.state = 'leased' \
                 RETURNING attempts.lease_id, attempts.run_id, attempts.case_id, attempts.attempt, attempts.try_no",
                placeholders(current.len(), 8)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_as::<_, (String, String, String, i64, i64)>(sqlx::AssertSqlSafe(sql));
            for (lease_id, outcome) in current {
                query = query
                    .bind(lease_id)
                    .bind(&outcome.result)
                    .bind(i64::from(outcome.infrastructure))
                    .bind(&outcome.error)
                    .bind(outcome.finished_at)
                    .bind(outcome.ms)
                    .bind(&outcome.run_case_json)
                    .bind(outcome.seq);
            }
            for (lease_id, run_id, case_id, attempt, try_no) in query.fetch_all(&mut *tx).await? {
                finished.insert(lease_id, AttemptKey { run_id, case_id, attempt, try_no });
            }
        }
        let mut keys = Vec::with_capacity(results.len());
        let mut steps = Vec::new();
        let (mut tries, mut finals) = (Vec::new(), Vec::new());
        for (lease_id, outcome) in results {
            match finished.get(lease_id) {
                Some(key) => {
                    steps.extend(outcome.steps.iter().enumerate().map(|(idx, step)| (key.clone(), idx as i64, step)));
                    if let Some((attempt, try_no)) = outcome.next_try {
                        tries.push(PendingTry {
                            run_id: key.run_id.clone(),
                            case_id: key.case_id.clone(),
                            attempt,
                            try_no,
                        });
                    }
                    if let Some(result) = &outcome.final_result {
                        finals.push((key.run_id.clone(), key.case_id.clone(), result.clone()));
                    }
                    keys.push(Ok(key.clone()));
                }
                None => keys.push(Err(StoreError::StaleLease(lease_id.clone()))),
            }
        }
        // What follows each result, with it: nothing of a refused one.
        insert_pending(&mut tx, &tries, results.first().map_or(0, |(_, o)| o.finished_at), self.rows()).await?;
        update_case_results(&mut tx, &finals, self.rows()).await?;
        for chunk in steps.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO steps (run_id, case_id, attempt, try_no, idx, step, status, ms, error) VALUES {}",
                placeholders(chunk.len(), 9)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (key, idx, step) in chunk {
                query = query
                    .bind(&key.run_id)
                    .bind(&key.case_id)
                    .bind(key.attempt)
                    .bind(key.try_no)
                    .bind(*idx)
                    .bind(&step.step)
                    .bind(&step.status)
                    .bind(step.ms)
                    .bind(&step.error);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(keys)
    }

    /// Ends a lease the coordinator takes back (worker or device lost,
    /// deadline passed): the attempt is marked an infrastructure failure,
    /// at `seq` in its run's updates. `Ok(None)` when the lease had already
    /// ended.
    pub async fn revoke_lease(
        &self,
        lease_id: &str,
        reason: &str,
        at: i64,
        seq: i64,
    ) -> Result<Option<AttemptKey>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let ended = sqlx::query("UPDATE leases SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL")
            .bind(at)
            .bind(reason)
            .bind(lease_id)
            .execute(&mut *tx)
            .await?;
        if ended.rows_affected() != 1 {
            return Ok(None);
        }
        let key = sqlx::query_as::<_, AttemptKey>(
            "SELECT run_id, case_id, attempt, try_no FROM attempts WHERE lease_id = $1 AND state = 'leased'",
        )
        .bind(lease_id)
        .fetch_optional(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE attempts SET state = 'done', infrastructure = 1, error = $1, finished_at = $2, seq = $3 \
             WHERE lease_id = $4 AND state = 'leased'",
        )
        .bind(reason)
        .bind(at)
        .bind(seq)
        .bind(lease_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(key)
    }

    /// Queues another try: a retry (`attempt + 1`) or a rerun after an
    /// infrastructure failure (same attempt, `try_no + 1`).
    pub async fn queue(
        &self,
        run_id: &str,
        case_id: &str,
        attempt: u32,
        try_no: u32,
        at: i64,
    ) -> Result<(), StoreError> {
        let one = PendingTry { run_id: run_id.into(), case_id: case_id.into(), attempt, try_no };
        self.queue_many(&[one], at).await
    }

    /// Queues many tries in one transaction, one statement per chunk.
    pub async fn queue_many(&self, tries: &[PendingTry], at: i64) -> Result<(), StoreError> {
        if tries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        insert_pending(&mut tx, tries, at, self.rows()).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn set_case_result(&self, run_id: &str, case_id: &str, result: &str) -> Result<(), StoreError> {
        self.set_case_results(&[(run_id.to_owned(), case_id.to_owned(), result.to_owned())]).await
    }

    /// Cases' final results (run, case, result), one statement per chunk.
    pub async fn set_case_results(&self, results: &[(String, String, String)]) -> Result<(), StoreError> {
        if results.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        update_case_results(&mut tx, results, self.rows()).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn finish_run(&self, run_id: &str, finished_at: i64, manifest_json: &str) -> Result<(), StoreError> {
        // The run's end and what it adds to the flaky-and-slow summary
        // commit together.
        let mut tx = self.pool.begin().await?;
        finish_run_in(&mut tx, run_id, finished_at, manifest_json).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The `RunCase` lines of a run's finished attempts (infrastructure
    /// failures left out), in the order they finished.
    pub async fn run_lines(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_case_json FROM attempts WHERE run_id = $1 AND state = 'done' AND infrastructure = 0 \
             AND run_case_json IS NOT NULL ORDER BY finished_at, case_id, attempt",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }

    /// A run's finished attempts (infrastructure failures included), in the
    /// order of their updates: what a restarted coordinator replays to a
    /// client that watches again.
    pub async fn run_log(&self, run_id: &str) -> Result<Vec<LogRow>, StoreError> {
        Ok(sqlx::query_as::<_, LogRow>(
            "SELECT seq, case_id, attempt, infrastructure, error, run_case_json, device_id, worker_id, platform, finished_at \
             FROM attempts WHERE run_id = $1 AND state = 'done' \
             ORDER BY COALESCE(seq, 0), finished_at, case_id, attempt, try_no",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Why a run waits (`None`: it does not), for the dashboard.
    pub async fn set_waiting(&self, run_id: &str, reason: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET waiting_reason = $1 WHERE id = $2")
            .bind(reason)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A worker as the fleet last saw it.
    pub async fn upsert_worker(&self, worker: &WorkerRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO workers (id, hostname, connected, draining, last_seen) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, connected = excluded.connected, \
             draining = excluded.draining, last_seen = excluded.last_seen",
        )
        .bind(&worker.id)
        .bind(&worker.hostname)
        .bind(i64::from(worker.connected))
        .bind(i64::from(worker.draining))
        .bind(worker.last_seen)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Devices as the fleet last saw them, one statement per chunk; their
    /// quarantine is left as it is (see [`Store::set_quarantine`]).
    pub async fn upsert_devices(&self, devices: &[DeviceRecord]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for chunk in devices.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO devices (id, worker_id, slot, platform, state, device_json, updated_at) VALUES {} \
                 ON CONFLICT (id) DO UPDATE SET worker_id = excluded.worker_id, slot = excluded.slot, \
                 platform = excluded.platform, state = excluded.state, device_json = excluded.device_json, \
                 updated_at = excluded.updated_at",
                placeholders(chunk.len(), 7)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for device in chunk {
                query = query
                    .bind(&device.id)
                    .bind(&device.worker_id)
                    .bind(&device.slot)
                    .bind(&device.platform)
                    .bind(&device.state)
                    .bind(&device.device_json)
                    .bind(device.updated_at);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A worker's stream ended: it and its devices show as disconnected.
    pub async fn worker_disconnected(&self, worker_id: &str, at: i64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE workers SET connected = 0, last_seen = $1 WHERE id = $2")
            .bind(at)
            .bind(worker_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE devices SET state = 'disconnected', updated_at = $1 WHERE worker_id = $2")
            .bind(at)
            .bind(worker_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Quarantines a device (with why) or lets it back (`None`).
    pub async fn set_quarantine(&self, device_id: &str, reason: Option<&str>, at: i64) -> Result<(), StoreError> {
        let updated =
            sqlx::query("UPDATE devices SET quarantined = $1, quarantine_reason = $2, updated_at = $3 WHERE id = $4")
                .bind(i64::from(reason.is_some()))
                .bind(reason)
                .bind(at)
                .bind(device_id)
                .execute(&self.pool)
                .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NoDevice(device_id.to_owned()));
        }
        Ok(())
    }

    /// What the fleet remembers of a worker that joins: whether it was
    /// drained, and its devices' quarantines.
    pub async fn fleet_memory(&self, worker_id: &str) -> Result<FleetMemory, StoreError> {
        let draining = sqlx::query_scalar::<_, i64>("SELECT draining FROM workers WHERE id = $1")
            .bind(worker_id)
            .fetch_optional(&self.pool)
            .await?
            .unwrap_or(0);
        let quarantined = sqlx::query_as::<_, (String, Option<String>)>(
            "SELECT id, quarantine_reason FROM devices WHERE worker_id = $1 AND quarantined = 1",
        )
        .bind(worker_id)
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(|(id, reason)| (id, reason.unwrap_or_else(|| "quarantined".into())))
        .collect();
        Ok(FleetMemory { draining: draining != 0, quarantined })
    }

    /// The median of each case's last `window` passing attempts on a
    /// platform, for a whole suite: one statement per chunk of cases.
    pub async fn expected_ms_many(
        &self,
        case_ids: &[String],
        platform: &str,
        window: u32,
    ) -> Result<HashMap<String, i64>, StoreError> {
        let mut medians = HashMap::new();
        for chunk in case_ids.chunks(self.rows()) {
            let ids: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
            let sql = format!(
                "SELECT case_id, ms FROM (SELECT case_id, ms, ROW_NUMBER() OVER \
                 (PARTITION BY case_id ORDER BY finished_at DESC) AS n FROM attempts \
                 WHERE platform = $1 AND result = 'passed' AND ms IS NOT NULL AND case_id IN ({})) AS recent \
                 WHERE n <= $2",
                ids.join(", ")
            );
            // Built from constants and numbered placeholders only.
            let mut query =
                sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(sql)).bind(platform).bind(i64::from(window));
            for id in chunk {
                query = query.bind(id);
            }
            let mut per_case: HashMap<String, Vec<i64>> = HashMap::new();
            for (case_id, ms) in query.fetch_all(&self.pool).await? {
                per_case.entry(case_id).or_default().push(ms);
            }
            for (case_id, mut ms) in per_case {
                ms.sort_unstable();
                medians.insert(case_id, ms[ms.len() / 2]);
            }
        }
        Ok(medians)
    }

    /// The median of a case's last `window` passing attempts on a platform.
    pub async fn expected_ms(&self, case_id: &str, platform: &str, window: u32) -> Result<Option<i64>, StoreError> {
        let rows = sqlx::query(
            "SELECT ms FROM attempts WHERE case_id = $1 AND platform = $2 AND result = 'passed' AND ms IS NOT NULL \
             ORDER BY finished_at DESC LIMIT $3",
        )
        .bind(case_id)
        .bind(platform)
        .bind(i64::from(window))
        .fetch_all(&self.pool)
        .await?;
        let mut ms: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>(0)).collect();
        if ms.is_empty() {
            return Ok(None);
        }
        ms.sort_unstable();
        Ok(Some(ms[ms.len() / 2]))
    }

    /// Runs that have not finished: what a restarted coordinator takes up again.
    pub async fn open_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        Ok(sqlx::query_as::<_, RunRow>(RUN_COLUMNS_OPEN).fetch_all(&self.pool).await?)
    }

    /// A run's case files: path and text.
    pub async fn run_files(&self, run_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT path, source FROM run_files WHERE run_id = $1 ORDER BY path")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1))).collect())
    }

    /// A run's cases, in suite order.
    pub async fn run_cases(&self, run_id: &str) -> Result<Vec<CaseRow>, StoreError> {
        Ok(sqlx::query_as::<_, CaseRow>(
            "SELECT case_id, file, ordinal, expected_ms, final_result FROM cases WHERE run_id = $1 ORDER BY ordinal",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn get_run(&self, run_id: &str) -> Result<RunRow, StoreError> {
        sqlx::query_as::<_, RunRow>(RUN_COLUMNS_BY_ID)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NoRun(run_id.to_owned()))
    }

    /// The newest runs first.
    pub async fn list_runs(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        Ok(sqlx::query_as::<_, RunRow>(RUN_COLUMNS_NEWEST).bind(i64::from(limit)).fetch_all(&self.pool).await?)
    }
}

const RUN_COLUMNS_BY_ID: &str = concat!(run_select!(), " WHERE id = $1");
const RUN_COLUMNS_NEWEST: &str = concat!(run_select!(), " WHERE written = 1 ORDER BY started_at DESC LIMIT $1");
const RUN_COLUMNS_OPEN: &str = concat!(run_select!(), " WHERE finished_at IS NULL ORDER BY started_at");

/// Pending attempts, one statement per chunk. Idempotent: a try whose
/// commit's answer was lost is queued again without a duplicate.
async fn insert_pending(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    tries: &[PendingTry],
    at: i64,
    rows: usize,
) -> Result<(), StoreError> {
    for chunk in tries.chunks(rows) {
        let sql = format!(
            "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, created_at) VALUES {} ON CONFLICT DO NOTHING",
            pending_placeholders(chunk.len())
        );
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for one in chunk {
            query = query
                .bind(&one.run_id)
                .bind(&one.case_id)
                .bind(i64::from(one.attempt))
                .bind(i64::from(one.try_no))
                .bind(at);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Cases' final results (run, case, result), one statement per chunk.
/// Ends a run inside `tx`: its end, the columns the runs list filters on
/// (from the manifest; a run cut short has no totals), and what it adds to
/// the flaky-and-slow summary.
async fn finish_run_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    run_id: &str,
    finished_at: i64,
    manifest_json: &str,
) -> Result<(), StoreError> {
    let manifest: Option<argus_proto::run::RunManifest> = serde_json::from_str(manifest_json).ok();
    // One platform, or those of a run that spanned several: `android,ios`.
    let platform = manifest.as_ref().and_then(|m| {
        m.platform.clone().or_else(|| {
            let listed = m.extra.get("platforms")?.as_array()?;
            Some(listed.iter().filter_map(|p| p.as_str()).collect::<Vec<_>>().join(","))
        })
    });
    let totals = manifest.and_then(|m| m.totals);
    let result = match &totals {
        Some(t) if t.failed > 0 => "failed",
        Some(_) => "passed",
        None => "cancelled",
    };
    let count = |pick: fn(&argus_proto::run::RunTotals) -> u64| totals.as_ref().map(|t| pick(t) as i64);
    let updated = sqlx::query(
        "UPDATE runs SET finished_at = $1, manifest_json = $2, platform = $3, result = $4, cases = $5, \
         passed = $6, failed = $7, retried = $8, waiting_reason = NULL WHERE id = $9",
    )
    .bind(finished_at)
    .bind(manifest_json)
    .bind(platform)
    .bind(result)
    .bind(count(|t| t.cases))
    .bind(count(|t| t.passed))
    .bind(count(|t| t.failed))
    .bind(count(|t| t.retried))
    .bind(run_id)
    .execute(&mut **tx)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(StoreError::NoRun(run_id.to_owned()));
    }
    case_days::count_ended(tx).await
}

async fn update_case_results(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    results: &[(String, String, String)],
    rows: usize,
) -> Result<(), StoreError> {
    for chunk in results.chunks(rows) {
        let sql = format!(
            "UPDATE cases SET final_result = v.column3 FROM (VALUES {}) AS v \
             WHERE cases.run_id = v.column1 AND cases.case_id = v.column2",
            placeholders(chunk.len(), 3)
        );
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (run_id, case_id, result) in chunk {
            query = query.bind(run_id).bind(case_id).bind(result);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// `($1, $2, $3, $4, 'pending', $5), …`.
fn pending_placeholders(rows: usize) -> String {
    let row = |r: usize| {
        let n = |c: usize| format!("${}", r * 5 + c);
        format!("({}, {}, {}, {}, 'pending', {})", n(1), n(2), n(3), n(4), n(5))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_becomes_the_status_a_client_can_act_on() {
        let status = |error: StoreError| tonic::Status::from(error).code();
        assert_eq!(status(StoreError::NoRun("r".into())), tonic::Code::NotFound);
        assert_eq!(status(StoreError::StaleLease("l".into())), tonic::Code::FailedPrecondition);
        // A database that could not answer is never "not found".
        let outage = tonic::Status::from(StoreError::Query(sqlx::Error::PoolTimedOut));
        assert_eq!(outage.code(), tonic::Code::Unavailable);
        assert_eq!(outage.message(), "the coordinator's database could not answer; try again");
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
