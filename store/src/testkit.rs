//! For tests and benchmarks of any crate (feature `testkit`): a fresh
//! database on either store, named so that parallel tests never share one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Store;

/// The variable that names the test Postgres server (`.ci/run` starts one).
pub const POSTGRES_URL: &str = "ARGUS_TEST_POSTGRES_URL";

/// A name no other test of this machine uses now: `prefix_pid_nanos_n`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    format!("{prefix}_{}_{nanos}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// The URL of a fresh SQLite database in a temporary file.
pub fn sqlite_url(prefix: &str) -> String {
    format!("sqlite:{}", std::env::temp_dir().join(format!("{}.db", unique(prefix))).display())
}

/// The URL of a fresh database on the test Postgres server, or on `admin`.
///
/// # Panics
/// When no server is named or it does not answer: a test that needs
/// Postgres fails rather than passing without it.
pub async fn postgres_url(admin: Option<&str>, prefix: &str) -> String {
    let admin = admin.map(str::to_owned).unwrap_or_else(|| {
        std::env::var(POSTGRES_URL).unwrap_or_else(|_| panic!("{POSTGRES_URL} names the test Postgres server"))
    });
    Store::create_database(&admin, &unique(prefix)).await.expect("the test Postgres answers")
}

/// A fresh database's URL: on Postgres when `postgres`, else SQLite.
pub async fn database_url(postgres: bool, prefix: &str) -> String {
    if postgres { postgres_url(None, prefix).await } else { sqlite_url(prefix) }
}

/// A fresh store: on Postgres when `postgres`, else SQLite.
pub async fn fresh(postgres: bool) -> Store {
    Store::open(&database_url(postgres, "argus_test").await).await.expect("a fresh database opens")
}
