//! History: how long a case took when it passed, for the scheduler's
//! estimates (longest first).

use super::*;

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
    /// (a case that never passed there has none): one statement per chunk
    /// of cases.
    pub async fn recent_passed_ms(
        &self,
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
        for chunk in case_ids.chunks(self.rows()) {
            let sql = match self.backend {
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
            for (case_id, ms) in query.fetch_all(&self.pool).await? {
                per_case.entry(case_id).or_default().push(ms);
            }
        }
        for ms in per_case.values_mut() {
            ms.sort_unstable();
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
