//! History: how long a case took when it passed, for the scheduler's
//! estimates (longest first) and a comparison's spreads.
//!
//! A case's last [`KEPT_PASSES`] passing durations on a platform are kept
//! in `case_windows` as runs are counted (migration 0016): a comparison of
//! two nightly runs needs them for thousands of cases, and reading 30
//! passes of each from the attempts cost most of its time on a year of
//! history. A kept window is exact while no run that is not counted yet
//! holds a pass of its case there; such cases, and cases with no kept
//! window (passed before the table existed), are read from the attempts.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::AnyConnection;

use super::*;

/// How many of a case's latest passes on a platform `case_windows` keeps:
/// a comparison's spread window.
pub const KEPT_PASSES: u32 = 30;

impl Store {
    /// The median of each case's last `window` passing attempts on a
    /// platform, for a whole suite: one statement per chunk of cases.
    pub async fn expected_ms_many(
        &self,
        case_ids: &[String],
        platform: &str,
        window: u32,
    ) -> Result<HashMap<String, i64>, StoreError> {
        let recent = self.recent_passed_ms(case_ids, platform, window).await?;
        Ok(recent.into_iter().map(|(case_id, ms)| (case_id, ms[ms.len() / 2])).collect())
    }

    /// Each case's last `window` passing durations on a platform, sorted
    /// (a case that never passed there has none), read from the attempts:
    /// one statement per chunk of cases.
    pub async fn recent_passed_ms(
        &self,
        case_ids: &[String],
        platform: &str,
        window: u32,
    ) -> Result<HashMap<String, Vec<i64>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        read_passes(&mut conn, self.backend, case_ids, platform, window).await
    }

    /// Each case's last [`KEPT_PASSES`] passing durations on a platform,
    /// sorted, as [`Store::recent_passed_ms`] reads them: from
    /// `case_windows` where the kept window is current, from the attempts
    /// for the rest.
    pub async fn kept_passed_ms(
        &self,
        case_ids: &[String],
        platform: &str,
    ) -> Result<HashMap<String, Vec<i64>>, StoreError> {
        // Passes no window holds yet: those of runs not counted (going, or
        // ended within the follow-up's second).
        let fresh: HashSet<String> = sqlx::query_scalar::<_, String>(
            "SELECT DISTINCT a.case_id FROM runs r JOIN attempts a ON a.run_id = r.id \
             WHERE r.counted = 0 AND a.platform = $1 AND a.result = 'passed'",
        )
        .bind(platform)
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .collect();
        let mut per_case = HashMap::new();
        // One row per case, in few statements on Postgres (a nightly
        // comparison asks for thousands); SQLite's binds cost the square of
        // their number, so its statements stay small.
        let per_statement = match self.backend {
            Backend::Postgres => 5_000,
            Backend::Sqlite => self.rows(),
        };
        for chunk in case_ids.chunks(per_statement) {
            let sql = format!(
                "SELECT case_id, recent_ms FROM case_windows WHERE platform = $1 AND case_id IN ({})",
                (0..chunk.len()).map(|i| format!("${}", i + 2)).collect::<Vec<_>>().join(", ")
            );
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(sql)).bind(platform);
            for id in chunk {
                query = query.bind(id);
            }
            for (case_id, recent) in query.fetch_all(&self.pool).await? {
                if fresh.contains(&case_id) {
                    continue;
                }
                match parse_window(&recent) {
                    Some(ms) => {
                        per_case.insert(case_id, ms);
                    }
                    // Read again from the attempts below; the next count
                    // writes it whole.
                    None => tracing::warn!(%case_id, %platform, "a kept window of passes does not parse"),
                }
            }
        }
        let rest: Vec<String> = case_ids.iter().filter(|id| !per_case.contains_key(*id)).cloned().collect();
        if !rest.is_empty() {
            per_case.extend(self.recent_passed_ms(&rest, platform, KEPT_PASSES).await?);
        }
        Ok(per_case)
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
}

/// Writes the window of every case and platform that passed in a run about
/// to be counted (in the counting transaction, before the runs are marked).
pub(super) async fn keep_windows(conn: &mut AnyConnection, backend: Backend) -> Result<(), StoreError> {
    let passed = sqlx::query_as::<_, (String, String)>(
        "SELECT DISTINCT a.platform, a.case_id FROM runs r JOIN attempts a ON a.run_id = r.id \
         WHERE r.counted = 0 AND r.result IS NOT NULL AND a.result = 'passed' AND a.platform IS NOT NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_platform: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (platform, case_id) in passed {
        by_platform.entry(platform).or_default().push(case_id);
    }
    // Every window read before the first is written: on SQLite the first
    // write takes the database's lock, which the grid's writers wait on.
    let mut windows: Vec<(String, String, String)> = Vec::new();
    for (platform, case_ids) in by_platform {
        for (case_id, ms) in read_passes(&mut *conn, backend, &case_ids, &platform, KEPT_PASSES).await? {
            windows.push((case_id, platform.clone(), ms.iter().map(i64::to_string).collect::<Vec<_>>().join(",")));
        }
    }
    for chunk in windows.chunks(rows_per_statement(backend)) {
        let sql = format!(
            "INSERT INTO case_windows (case_id, platform, recent_ms) VALUES {} \
             ON CONFLICT (platform, case_id) DO UPDATE SET recent_ms = excluded.recent_ms",
            placeholders(chunk.len(), 3)
        );
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (case_id, platform, recent) in chunk {
            query = query.bind(case_id).bind(platform).bind(recent);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// A kept window: durations in milliseconds, comma-separated, ascending.
fn parse_window(text: &str) -> Option<Vec<i64>> {
    let ms: Vec<i64> = text.split(',').map(str::parse).collect::<Result<_, _>>().ok()?;
    (!ms.is_empty() && ms.is_sorted()).then_some(ms)
}

/// Each case's last `window` passing durations on a platform, sorted.
async fn read_passes(
    conn: &mut AnyConnection,
    backend: Backend,
    case_ids: &[String],
    platform: &str,
    window: u32,
) -> Result<HashMap<String, Vec<i64>>, StoreError> {
    let mut per_case: HashMap<String, Vec<i64>> = HashMap::new();
    // Each case reads its last `window` passes from `attempts_history`
    // and no more: a year of nightly runs holds hundreds per case, and
    // a window function over all of them read millions of rows for a
    // nightly suite. Postgres joins each case to its own limited scan
    // (LATERAL); SQLite, which has no LATERAL, unites one limited
    // scan per case (at most 50 a statement, under its 500 limit).
    for chunk in case_ids.chunks(rows_per_statement(backend)) {
        let sql = match backend {
            Backend::Postgres => format!(
                "SELECT v.column1, recent.ms FROM (VALUES {}) AS v CROSS JOIN LATERAL \
                 (SELECT ms FROM attempts WHERE case_id = v.column1 AND platform = $1 AND result = 'passed' \
                 AND ms IS NOT NULL ORDER BY finished_at DESC LIMIT $2) AS recent",
                (0..chunk.len()).map(|i| format!("(CAST(${} AS TEXT))", i + 3)).collect::<Vec<_>>().join(", ")
            ),
            Backend::Sqlite => (0..chunk.len())
                .map(|i| {
                    format!(
                        "SELECT * FROM (SELECT case_id, ms FROM attempts WHERE case_id = ${} AND platform = $1 \
                         AND result = 'passed' AND ms IS NOT NULL ORDER BY finished_at DESC LIMIT $2)",
                        i + 3
                    )
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL "),
        };
        // Built from constants and numbered placeholders only.
        let mut query =
            sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(sql)).bind(platform).bind(i64::from(window));
        for id in chunk {
            query = query.bind(id);
        }
        for (case_id, ms) in query.fetch_all(&mut *conn).await? {
            per_case.entry(case_id).or_default().push(ms);
        }
    }
    for ms in per_case.values_mut() {
        ms.sort_unstable();
    }
    Ok(per_case)
}

#[cfg(test)]
mod tests {
    use super::parse_window;

    #[test]
    fn a_kept_window_parses_only_whole_and_in_order() {
        assert_eq!(parse_window("80,95,120"), Some(vec![80, 95, 120]));
        assert_eq!(parse_window("7"), Some(vec![7]));
        for broken in ["", "80,,95", "95,80", "80,x", "80;95"] {
            assert_eq!(parse_window(broken), None, "{broken:?}");
        }
    }
}
