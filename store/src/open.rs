//! Opening the store: the database chosen by its URL, created when asked
//! (tests, `argus migrate`), its schema migrated, and the advisory lock
//! that makes one coordinator the active one.

use super::*;

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
        Ok(Self::database_url_on(admin_url, name))
    }

    /// The URL of database `name` on the server `admin_url` reaches, with
    /// the same options.
    pub fn database_url_on(admin_url: &str, name: &str) -> String {
        let (base, query) = admin_url.split_once('?').unwrap_or((admin_url, ""));
        let base = base.rfind('/').map_or(base, |i| &base[..i]);
        if query.is_empty() { format!("{base}/{name}") } else { format!("{base}/{name}?{query}") }
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

    async fn migrate(&self) -> Result<(), StoreError> {
        match self.backend {
            Backend::Postgres => sqlx::migrate!("../migrations/postgres").run(&self.pool).await?,
            Backend::Sqlite => sqlx::migrate!("../migrations/sqlite").run(&self.pool).await?,
        }
        Ok(())
    }
}
