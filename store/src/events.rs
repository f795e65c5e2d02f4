//! Events and their webhook deliveries (migration 0011): an outbox. An
//! event is written in the transaction of what raised it, so none is lost
//! or told of something that did not happen; the coordinator's webhooks
//! task turns each into deliveries and tries those until they are taken.

use super::*;

/// An event to keep: its kind (`run.finished`, …) and itself as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub event_json: String,
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EventRow {
    pub id: i64,
    pub kind: String,
    pub event_json: String,
    pub at: i64,
}

/// One event sent to one webhook.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct DeliveryRow {
    pub id: i64,
    pub event_id: i64,
    pub webhook: String,
    pub kind: String,
    /// `pending`, `delivered`, `refused` or `abandoned`.
    pub state: String,
    pub attempts: i64,
    pub next_at: i64,
    /// The last try's HTTP status, or its error when there was no answer.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// A due delivery and its event.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct DueDelivery {
    #[sqlx(flatten)]
    pub delivery: DeliveryRow,
    pub event_json: String,
}

/// What one try of a delivery came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Tried {
    pub id: i64,
    /// `pending`, `delivered`, `refused` or `abandoned`.
    pub state: String,
    pub status: Option<i64>,
    pub error: Option<String>,
    /// When it is tried again, if pending.
    pub next_at: i64,
}

const DELIVERY_COLUMNS: &str = "d.id, d.event_id, d.webhook, d.kind, d.state, d.attempts, d.next_at, d.last_status, \
                                d.last_error, d.created_at, d.finished_at";

/// Writes `event` inside `tx`.
pub(super) async fn add_event_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    event: &NewEvent,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO events (kind, event_json, at) VALUES ($1, $2, $3)")
        .bind(&event.kind)
        .bind(&event.event_json)
        .bind(event.at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl Store {
    pub async fn add_event(&self, event: &NewEvent) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        add_event_in(&mut tx, event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Events not yet turned into deliveries, oldest first.
    pub async fn events_to_dispatch(&self, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        Ok(sqlx::query_as::<_, EventRow>(
            "SELECT id, kind, event_json, at FROM events WHERE dispatched = 0 ORDER BY id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// The deliveries of `events` (event id, webhook, kind), and the
    /// events marked dispatched, in one transaction: each event is turned
    /// into its deliveries once.
    pub async fn dispatch(
        &self,
        events: &[i64],
        deliveries: &[(i64, String, String)],
        at: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for (event_id, webhook, kind) in deliveries {
            sqlx::query(
                "INSERT INTO webhook_deliveries (event_id, webhook, kind, state, next_at, created_at) \
                 VALUES ($1, $2, $3, 'pending', $4, $4) ON CONFLICT (event_id, webhook) DO NOTHING",
            )
            .bind(event_id)
            .bind(webhook)
            .bind(kind)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        }
        for event_id in events {
            sqlx::query("UPDATE events SET dispatched = 1 WHERE id = $1").bind(event_id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Pending deliveries whose time has come, oldest first, with their events.
    pub async fn due_deliveries(&self, now: i64, limit: u32) -> Result<Vec<DueDelivery>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS}, e.event_json FROM webhook_deliveries d JOIN events e ON e.id = d.event_id \
             WHERE d.state = 'pending' AND d.next_at <= $1 ORDER BY d.next_at, d.id LIMIT $2"
        );
        // Built from constants only.
        Ok(sqlx::query_as::<_, DueDelivery>(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Tries' outcomes, in one transaction (one commit for a pass of
    /// deliveries, not one each): each delivery's new state (`pending` with
    /// its next time, or done), and its answer.
    pub async fn deliveries_tried(&self, tried: &[Tried], at: i64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for t in tried {
            sqlx::query(
                "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, last_status = $2, \
                 last_error = $3, next_at = $4, finished_at = CASE WHEN $1 = 'pending' THEN NULL ELSE $5 END \
                 WHERE id = $6",
            )
            .bind(&t.state)
            .bind(t.status)
            .bind(&t.error)
            .bind(t.next_at)
            .bind(at)
            .bind(t.id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The newest deliveries first.
    pub async fn deliveries(&self, limit: u32) -> Result<Vec<DeliveryRow>, StoreError> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d ORDER BY d.created_at DESC, d.id DESC LIMIT $1"
        );
        // Built from constants only.
        Ok(sqlx::query_as::<_, DeliveryRow>(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }
}
