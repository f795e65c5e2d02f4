//! WebDriver sessions and their commands (migration 0006): written in
//! batches by the facade's log ([`crate::webdriver::log`]), read by the
//! dashboard's session pages.

use serde::Serialize;

use super::{Store, StoreError, placeholders};

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    pub device_id: String,
    pub worker_id: String,
    pub platform: String,
    pub capabilities_json: String,
    pub created_at: i64,
    pub ended_at: Option<i64>,
    pub end_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct CommandRow {
    pub session_id: String,
    pub seq: i64,
    pub at: i64,
    pub command: String,
    pub ms: i64,
    pub outcome: String,
    pub message: Option<String>,
    pub screen_xml: Option<String>,
}

impl Store {
    /// Sessions that started, sessions that ended and commands, in one
    /// transaction.
    pub async fn record_sessions(
        &self,
        started: &[SessionRow],
        commands: &[CommandRow],
        ended: &[(String, i64, String)],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for chunk in started.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO webdriver_sessions (id, device_id, worker_id, platform, capabilities_json, created_at) \
                 VALUES {} ON CONFLICT (id) DO NOTHING",
                placeholders(chunk.len(), 6)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for s in chunk {
                query = query
                    .bind(&s.id)
                    .bind(&s.device_id)
                    .bind(&s.worker_id)
                    .bind(&s.platform)
                    .bind(&s.capabilities_json)
                    .bind(s.created_at);
            }
            query.execute(&mut *tx).await?;
        }
        for chunk in commands.chunks(self.rows()) {
            let sql = format!(
                "INSERT INTO webdriver_commands (session_id, seq, at, command, ms, outcome, message, screen_xml) \
                 VALUES {} ON CONFLICT (session_id, seq) DO NOTHING",
                placeholders(chunk.len(), 8)
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for c in chunk {
                query = query
                    .bind(&c.session_id)
                    .bind(c.seq)
                    .bind(c.at)
                    .bind(&c.command)
                    .bind(c.ms)
                    .bind(&c.outcome)
                    .bind(&c.message)
                    .bind(&c.screen_xml);
            }
            query.execute(&mut *tx).await?;
        }
        for (id, at, reason) in ended {
            sqlx::query(
                "UPDATE webdriver_sessions SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL",
            )
            .bind(at)
            .bind(reason)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Sessions a coordinator that stopped still held: they ended with it
    /// (a WebDriver session does not outlive the process that relays it).
    pub async fn end_open_sessions(&self, at: i64, reason: &str) -> Result<u64, StoreError> {
        let ended = sqlx::query("UPDATE webdriver_sessions SET ended_at = $1, end_reason = $2 WHERE ended_at IS NULL")
            .bind(at)
            .bind(reason)
            .execute(&self.pool)
            .await?;
        Ok(ended.rows_affected())
    }

    /// The latest sessions, newest first.
    pub async fn list_sessions(&self, limit: u32) -> Result<Vec<SessionRow>, StoreError> {
        Ok(sqlx::query_as::<_, SessionRow>(
            "SELECT id, device_id, worker_id, platform, capabilities_json, created_at, ended_at, end_reason \
             FROM webdriver_sessions ORDER BY created_at DESC, id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn get_session(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        Ok(sqlx::query_as::<_, SessionRow>(
            "SELECT id, device_id, worker_id, platform, capabilities_json, created_at, ended_at, end_reason \
             FROM webdriver_sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn session_commands(&self, id: &str) -> Result<Vec<CommandRow>, StoreError> {
        Ok(sqlx::query_as::<_, CommandRow>(
            "SELECT session_id, seq, at, command, ms, outcome, message, screen_xml \
             FROM webdriver_commands WHERE session_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?)
    }
}
