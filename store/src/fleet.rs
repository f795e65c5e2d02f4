//! The fleet as the store remembers it: workers, devices and quarantines,
//! for the dashboard and for a worker that joins again.

use super::*;

impl Store {
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

    /// Quarantines a device (with why) or lets it back (`None`); a
    /// quarantine's `event` (what webhooks are told) is kept with it.
    pub async fn set_quarantine(
        &self,
        device_id: &str,
        reason: Option<&str>,
        at: i64,
        event: Option<&NewEvent>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let updated =
            sqlx::query("UPDATE devices SET quarantined = $1, quarantine_reason = $2, updated_at = $3 WHERE id = $4")
                .bind(i64::from(reason.is_some()))
                .bind(reason)
                .bind(at)
                .bind(device_id)
                .execute(&mut *tx)
                .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NoDevice(device_id.to_owned()));
        }
        if let Some(event) = event {
            super::events::add_event_in(&mut tx, event).await?;
        }
        tx.commit().await?;
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
}
