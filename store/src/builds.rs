//! App builds (migration 0021): what each build the coordinator holds is,
//! by its sha256. The file itself is the coordinator's, in its builds
//! folder.

use super::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BuildRow {
    pub sha256: String,
    pub platform: String,
    pub bundle_id: String,
    pub version: String,
    pub build_number: String,
    pub min_os: Option<String>,
    pub launch: Option<String>,
    /// Comma-separated; `''` for none.
    pub abis: String,
    pub size: i64,
    pub file_name: String,
    pub uploaded_at: i64,
    pub last_used_at: i64,
}

const BUILD_COLUMNS: &str = "sha256, platform, bundle_id, version, build_number, min_os, launch, abis, size, \
     file_name, uploaded_at, last_used_at";

impl Store {
    /// Records a build once its file is kept; a build recorded already is
    /// left as it was (its content is the same). Whether it was new.
    pub async fn put_build(&self, build: &BuildRow) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO builds (sha256, platform, bundle_id, version, build_number, min_os, launch, abis, size, \
             file_name, uploaded_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(&build.sha256)
        .bind(&build.platform)
        .bind(&build.bundle_id)
        .bind(&build.version)
        .bind(&build.build_number)
        .bind(&build.min_os)
        .bind(&build.launch)
        .bind(&build.abis)
        .bind(build.size)
        .bind(&build.file_name)
        .bind(build.uploaded_at)
        .bind(build.last_used_at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The build with this sha256, if held.
    pub async fn build(&self, sha256: &str) -> Result<Option<BuildRow>, StoreError> {
        let sql = format!("SELECT {BUILD_COLUMNS} FROM builds WHERE sha256 = $1");
        // Built from constants only.
        Ok(sqlx::query_as::<_, BuildRow>(sqlx::AssertSqlSafe(sql)).bind(sha256).fetch_optional(&self.pool).await?)
    }

    /// Every build held, most recently used first.
    pub async fn builds(&self) -> Result<Vec<BuildRow>, StoreError> {
        let sql = format!("SELECT {BUILD_COLUMNS} FROM builds ORDER BY last_used_at DESC, sha256");
        // Built from constants only.
        Ok(sqlx::query_as::<_, BuildRow>(sqlx::AssertSqlSafe(sql)).fetch_all(&self.pool).await?)
    }
}
