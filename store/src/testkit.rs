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

/// The URL of a fresh SQLite database in a temporary file, in a folder of
/// the tests' own where the files of test processes that have ended are
/// removed (once per process).
pub fn sqlite_url(prefix: &str) -> String {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let dir = std::env::temp_dir().join("argus-tests");
    SWEPT.call_once(|| sweep(&dir));
    let _ = std::fs::create_dir_all(&dir);
    format!("sqlite:{}", dir.join(format!("{}.db", unique(prefix))).display())
}

/// Removes the databases (and their `-wal`, `-shm`) of test processes that
/// no longer run: named `prefix_pid_nanos_n.db…` by [`unique`]. Where there
/// is no `/proc` to ask, nothing is removed.
fn sweep(dir: &std::path::Path) {
    let proc = std::path::Path::new("/proc");
    let (true, Ok(entries)) = (proc.is_dir(), std::fs::read_dir(dir)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.rsplit('_').nth(2).and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != std::process::id()
            && !proc.join(pid.to_string()).exists()
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
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
