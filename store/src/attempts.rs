//! Attempts: leases granted, extended and taken back, results recorded a
//! burst at a time (each fenced by its lease), and tries queued again.

use super::*;

impl Store {
    /// Every attempt not yet finished: what the scheduler rebuilds from.
    /// Found through the runs still going (a finished run has none), by the
    /// attempts' primary key: no index on `state` tempts the planner to read
    /// every open attempt for each write of one (migration 0019).
    pub async fn open_attempts(&self) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query_as::<_, AttemptRow>(
            "SELECT a.run_id, a.case_id, a.attempt, a.try_no, a.state, a.lease_id, a.device_id, c.expected_ms, \
             c.ordinal, r.priority, r.selector_json \
             FROM runs r JOIN attempts a ON a.run_id = r.id \
             JOIN cases c ON c.run_id = a.run_id AND c.case_id = a.case_id \
             WHERE r.finished_at IS NULL AND a.state IN ('pending', 'leased') ORDER BY a.created_at, c.ordinal",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// A transaction whose writes find each of their rows by its key (a
    /// burst's bound rows joined to `leases`, `attempts` or `cases` by a
    /// unique index). On Postgres an index probe is priced as what it is on
    /// these tables, which stay in memory while runs flow: at the default
    /// price of a read from disk, the planner read and hashed the whole
    /// table for a burst of a few hundred rows (15-25 ms a statement, where
    /// a probe a row takes 2-5 ms) once a table held some tens of thousands.
    async fn begin_by_key(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            // One round trip: BEGIN and the setting, which ends with it.
            Backend::Postgres => self.pool.begin_with("BEGIN; SET LOCAL random_page_cost = 1.1").await?,
            Backend::Sqlite => self.pool.begin().await?,
        })
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
        let mut tx = self.begin_by_key().await?;
        let granted = grant_in(&mut tx, &leases.iter().collect::<Vec<_>>(), self.rows()).await?;
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
        Ok(self.finish_and_grant(results, &[]).await?.finished)
    }

    /// Records many results and, in the same transaction, grants the leases
    /// that follow them on their devices: each `(lease, next)` grants `next`
    /// only when `lease` has ended (by its result here, or by an earlier try
    /// of this same write whose answer was lost: the caller lets nothing
    /// else end a lease whose result it is writing), and only when `next`'s
    /// attempt is still pending or already holds `next` (that earlier try).
    /// One commit where a result and the lease it frees its device for
    /// would take two, one after the other.
    pub async fn finish_and_grant(
        &self,
        results: &[(String, AttemptOutcome)],
        next: &[(String, NewLease)],
    ) -> Result<FinishedAndGranted, StoreError> {
        let mut tx = self.begin_by_key().await?;
        // Two statements per chunk, whatever its size: end the leases that
        // are still current, then finish their attempts.
        let mut finished: HashMap<String, AttemptKey> = HashMap::new();
        for chunk in results.chunks(self.rows()) {
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_as::<_, (String, String, String, i64, i64)>(sqlx::AssertSqlSafe(
                end_leases_sql(chunk.len()),
            ));
            for (lease_id, outcome) in chunk {
                query = query.bind(lease_id).bind(outcome.finished_at).bind(if outcome.infrastructure {
                    "infrastructure"
                } else {
                    "finished"
                });
            }
            // Each current lease, with the attempt it is for.
            let ended: HashMap<String, AttemptKey> = query
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|(lease_id, run_id, case_id, attempt, try_no)| {
                    (lease_id, AttemptKey { run_id, case_id, attempt, try_no })
                })
                .collect();
            let current: Vec<(&AttemptKey, &(String, AttemptOutcome))> =
                chunk.iter().filter_map(|result| Some((ended.get(&result.0)?, result))).collect();
            if current.is_empty() {
                continue;
            }
            // Built from constants and numbered placeholders only.
            let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(finish_attempts_sql(current.len())));
            for (key, (lease_id, outcome)) in current {
                query = query
                    .bind(lease_id)
                    .bind(&key.run_id)
                    .bind(&key.case_id)
                    .bind(key.attempt)
                    .bind(key.try_no)
                    .bind(&outcome.result)
                    .bind(i64::from(outcome.infrastructure))
                    .bind(&outcome.error)
                    .bind(outcome.finished_at)
                    .bind(outcome.ms)
                    .bind(&outcome.run_case_json)
                    .bind(outcome.seq)
                    .bind(outcome.health.heap_start_kb)
                    .bind(outcome.health.heap_end_kb)
                    .bind(outcome.health.rss_start_kb)
                    .bind(outcome.health.rss_end_kb)
                    .bind(outcome.health.render_commits)
                    .bind(outcome.health.render_us);
            }
            for lease_id in query.fetch_all(&mut *tx).await? {
                if let Some(key) = ended.get(&lease_id) {
                    finished.insert(lease_id, key.clone());
                }
            }
        }
        let mut keys = Vec::with_capacity(results.len());
        let mut taken = Vec::new();
        let mut steps = Vec::new();
        let (mut tries, mut finals) = (Vec::new(), Vec::new());
        for (lease_id, outcome) in results {
            match finished.get(lease_id) {
                Some(key) => {
                    taken.push((key, outcome));
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
        insert_steps(&mut tx, &steps, self.rows()).await?;
        let observed: Vec<crate::observations::Recorded> = taken
            .iter()
            .filter_map(|(key, outcome)| {
                let seen = outcome.observed.as_ref()?;
                Some((*key, outcome.result.as_deref().unwrap_or("infrastructure"), outcome.finished_at, seen))
            })
            .collect();
        crate::observations::record(&mut tx, &observed).await?;
        // A lease follows a result that ended its device's lease: in this
        // transaction, or (a try again whose first answer was lost) before.
        let mut ended: HashSet<&str> = finished.keys().map(String::as_str).collect();
        let earlier: Vec<&str> = next.iter().map(|(after, _)| after.as_str()).filter(|a| !ended.contains(a)).collect();
        let were = ended_leases(&mut tx, &earlier, self.rows()).await?;
        ended.extend(earlier.iter().filter(|id| were.contains(**id)));
        let following: Vec<&NewLease> =
            next.iter().filter(|(after, _)| ended.contains(after.as_str())).map(|(_, lease)| lease).collect();
        let mut granted = grant_in(&mut tx, &following, self.rows()).await?.into_iter();
        let granted =
            next.iter().map(|(after, _)| if ended.contains(after.as_str()) { granted.next() } else { None }).collect();
        tx.commit().await?;
        Ok(FinishedAndGranted { finished: keys, granted })
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
        // The lease names its attempt: found by the primary key, which no
        // statistics (or their absence) can make a scan of the table.
        let ended = sqlx::query_as::<_, AttemptKey>(
            "UPDATE leases SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL \
             RETURNING run_id, case_id, attempt, try_no",
        )
        .bind(at)
        .bind(reason)
        .bind(lease_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(lease) = ended else { return Ok(None) };
        let key = sqlx::query_as::<_, AttemptKey>(
            "UPDATE attempts SET state = 'done', infrastructure = 1, error = $1, finished_at = $2, seq = $3 \
             WHERE run_id = $4 AND case_id = $5 AND attempt = $6 AND try_no = $7 AND lease_id = $8 \
             AND state = 'leased' RETURNING run_id, case_id, attempt, try_no",
        )
        .bind(reason)
        .bind(at)
        .bind(seq)
        .bind(&lease.run_id)
        .bind(&lease.case_id)
        .bind(lease.attempt)
        .bind(lease.try_no)
        .bind(lease_id)
        .fetch_optional(&mut *tx)
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
}

/// A burst's steps, each with the attempt it belongs to.
async fn insert_steps(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    steps: &[(AttemptKey, i64, &StepRow)],
    rows: usize,
) -> Result<(), StoreError> {
    for chunk in steps.chunks(rows) {
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
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Which of `ids` are leases already ended.
async fn ended_leases(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    ids: &[&str],
    rows: usize,
) -> Result<HashSet<String>, StoreError> {
    let mut ended = HashSet::new();
    for chunk in ids.chunks(rows) {
        let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql = format!("SELECT id FROM leases WHERE ended_at IS NOT NULL AND id IN ({})", marks.join(", "));
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
        for id in chunk {
            query = query.bind(*id);
        }
        ended.extend(query.fetch_all(&mut **tx).await?);
    }
    Ok(ended)
}

/// Grants every lease whose attempt is still pending, in `tx`: one statement
/// per chunk to take the attempts, one to write the leases. Per lease:
/// granted, or not because its attempt is no longer pending. Granting a
/// lease again (a try whose first answer was lost) grants it, once.
async fn grant_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    leases: &[&NewLease],
    rows: usize,
) -> Result<Vec<bool>, StoreError> {
    let mut taken: HashSet<String> = HashSet::new();
    for chunk in leases.chunks(rows) {
        // Built from constants and numbered placeholders only.
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(grant_attempts_sql(chunk.len())));
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
        taken.extend(query.fetch_all(&mut **tx).await?);
    }
    let granted: Vec<bool> = leases.iter().map(|l| taken.contains(&l.id)).collect();
    let written: Vec<&NewLease> = leases.iter().zip(&granted).filter(|(_, g)| **g).map(|(l, _)| *l).collect();
    for chunk in written.chunks(rows) {
        let sql = format!(
            "INSERT INTO leases (id, run_id, case_id, attempt, try_no, device_id, worker_id, granted_at, deadline) \
             VALUES {} ON CONFLICT (id) DO NOTHING",
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
        query.execute(&mut **tx).await?;
    }
    Ok(granted)
}

/// Pending attempts, one statement per chunk. Idempotent: a try whose
/// commit's answer was lost is queued again without a duplicate.
pub(super) async fn insert_pending(
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

/// `($1, $2, $3, $4, 'pending', $5), …`.
fn pending_placeholders(rows: usize) -> String {
    let row = |r: usize| {
        let n = |c: usize| format!("${}", r * 5 + c);
        format!("({}, {}, {}, {}, 'pending', {})", n(1), n(2), n(3), n(4), n(5))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

// The three statements below find each row of a burst by its table's
// unique key, and nothing else narrows the table: each fence (the lease
// still open, the attempt leased by it or pending) is written about the
// bound row as well (`v.column1`, a lease id, is never empty), so that
// Postgres checks it on the row the key found. Written about the table
// alone, Postgres took it for a filter and priced it from statistics of
// another moment (few leases open, no attempt pending, or none yet): it
// read the whole table and joined every row it believed few to every
// bound one, seconds a statement once 10,000 were open or pending.

/// Ends a burst's leases that are still current, by id.
fn end_leases_sql(rows: usize) -> String {
    format!(
        "UPDATE leases SET ended_at = v.column2, end_reason = v.column3 FROM (VALUES {}) AS v \
         WHERE leases.id = v.column1 AND (leases.ended_at IS NULL OR v.column1 IS NULL) \
         RETURNING leases.id, leases.run_id, leases.case_id, leases.attempt, leases.try_no",
        placeholders(rows, 3)
    )
}

/// Finishes the attempts of a burst's current leases, each found by its
/// primary key (the lease's end returned it) and leased by that lease.
fn finish_attempts_sql(rows: usize) -> String {
    format!(
        "UPDATE attempts SET state = 'done', result = v.column6, infrastructure = v.column7, error = v.column8, \
         finished_at = v.column9, ms = v.column10, run_case_json = v.column11, seq = v.column12, \
         heap_start_kb = v.column13, heap_end_kb = v.column14, rss_start_kb = v.column15, \
         rss_end_kb = v.column16, render_commits = v.column17, render_us = v.column18 \
         FROM (VALUES {}) AS v \
         WHERE attempts.run_id = v.column2 AND attempts.case_id = v.column3 AND attempts.attempt = v.column4 \
         AND attempts.try_no = v.column5 \
         AND CASE attempts.state WHEN 'leased' THEN attempts.lease_id = v.column1 ELSE false END \
         RETURNING attempts.lease_id",
        placeholders(rows, 18)
    )
}

/// Leases attempts still pending (or already held by the same lease: a try
/// again whose first answer was lost), found by their primary key.
fn grant_attempts_sql(rows: usize) -> String {
    format!(
        "UPDATE attempts SET state = 'leased', lease_id = v.column1, device_id = v.column2, \
         worker_id = v.column3, platform = v.column4, started_at = v.column5 FROM (VALUES {}) AS v \
         WHERE attempts.run_id = v.column6 AND attempts.case_id = v.column7 AND attempts.attempt = v.column8 \
         AND attempts.try_no = v.column9 \
         AND CASE attempts.state WHEN 'pending' THEN true WHEN 'leased' THEN attempts.lease_id = v.column1 \
         ELSE false END \
         RETURNING attempts.lease_id",
        placeholders(rows, 9)
    )
}

#[cfg(test)]
mod plans {
    //! The writes of every attempt read their rows by key whatever the
    //! planner's statistics say and however many rows a burst binds. With
    //! an index of the open attempts (or leases), Postgres read it whole
    //! for each burst whenever its statistics, taken while few were open,
    //! said it was small; finding an attempt by its lease alone, it read
    //! the whole table for each burst while it had no statistics yet; with
    //! a burst of hundreds, it read and hashed the whole table (below some
    //! tens of thousands of rows it still may, and that is cheap).
    use super::*;

    /// The statement's plan on Postgres, in a transaction of writes by key,
    /// with a burst of `rows` rows bound.
    async fn plan(store: &Store, sql: String, rows: usize, row: impl Fn(usize) -> Vec<Bound>) -> String {
        let explain = format!("EXPLAIN {sql}");
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(explain));
        for n in 0..rows {
            for value in row(n) {
                query = match value {
                    Bound::Text(text) => query.bind(text),
                    Bound::Number(number) => query.bind(number),
                    Bound::Nothing => query.bind(None::<i64>),
                    Bound::NoText => query.bind(None::<String>),
                };
            }
        }
        let mut tx = store.begin_by_key().await.unwrap();
        let plan = query.fetch_all(&mut *tx).await.unwrap().join("\n");
        tx.rollback().await.unwrap();
        plan
    }

    enum Bound {
        Text(String),
        Number(i64),
        /// A number column left empty.
        Nothing,
        /// A text column left empty (a result's error).
        NoText,
    }

    /// Each read of a table in `plan`: how.
    fn reads(plan: &str) -> Vec<String> {
        plan.lines()
            .filter(|l| l.contains("Scan") && !l.contains("Values Scan"))
            .map(|l| l.trim().trim_start_matches("->").trim().split("  (").next().unwrap_or_default().to_owned())
            .collect()
    }

    #[tokio::test]
    #[cfg_attr(not(argus_postgres), ignore = "needs ARGUS_TEST_POSTGRES_URL (.ci/run starts a server)")]
    async fn the_writes_of_an_attempt_find_their_rows_by_key_whatever_the_statistics_say() {
        let store = crate::testkit::fresh(true).await;
        // 100,000 finished attempts, their leases and cases.
        for sql in [
            "INSERT INTO attempts (run_id, case_id, attempt, try_no, state, created_at, lease_id, finished_at, result) \
             SELECT 'r', 'c' || g, 1, 1, 'done', 0, 'l' || g, 1, 'passed' FROM generate_series(1, 100000) g",
            "INSERT INTO leases (id, run_id, case_id, attempt, try_no, device_id, worker_id, granted_at, deadline, \
             ended_at) SELECT 'l' || g, 'r', 'c' || g, 1, 1, 'd', 'w', 0, 0, 1 FROM generate_series(1, 100000) g",
            // The same cases in an earlier run too, as a suite's are.
            "INSERT INTO cases (run_id, case_id, file, title, ordinal, expected_ms, estimate_source, final_result) \
             SELECT r, 'c' || g, 'f.md', 't', g, 1, 'default', 'passed' \
             FROM generate_series(1, 100000) g, (VALUES ('r'), ('earlier')) AS runs (r)",
        ] {
            sqlx::query(sql).execute(&store.pool).await.unwrap();
        }
        // As a new coordinator's tables are before Postgres first analyses
        // them, and once it has (with none open or pending: statistics of
        // another moment); a burst of 8, and one of a whole statement's rows.
        for analysed in [false, true] {
            if analysed {
                for sql in ["ANALYZE attempts", "ANALYZE leases", "ANALYZE cases"] {
                    sqlx::query(sql).execute(&store.pool).await.unwrap();
                }
            }
            for rows in [8, ROWS_PER_INSERT] {
                let text = |s: String| Bound::Text(s);
                let ended = plan(&store, end_leases_sql(rows), rows, |n| {
                    vec![text(format!("l{n}")), Bound::Number(2), text("finished".into())]
                })
                .await;
                let finished = plan(&store, finish_attempts_sql(rows), rows, |n| {
                    let mut row = vec![text(format!("l{n}")), text("r".into()), text(format!("c{n}"))];
                    row.extend([Bound::Number(1), Bound::Number(1), text("passed".into()), Bound::Number(0)]);
                    row.extend([Bound::NoText, Bound::Number(2), Bound::Number(5), text("{}".into())]);
                    row.push(Bound::Number(1));
                    row.extend((0..6).map(|_| Bound::Nothing));
                    row
                })
                .await;
                let granted = plan(&store, grant_attempts_sql(rows), rows, |n| {
                    let mut row = vec![text(format!("new{n}")), text("d".into()), text("w".into())];
                    row.extend([text("ios".into()), Bound::Number(2), text("r".into()), text(format!("c{n}"))]);
                    row.extend([Bound::Number(1), Bound::Number(1)]);
                    row
                })
                .await;
                let cases = plan(&store, crate::runs::case_results_sql(rows), rows, |n| {
                    vec![text("r".into()), text(format!("c{n}")), text("failed".into())]
                })
                .await;
                let at = format!("analysed {analysed}, {rows} rows");
                assert_eq!(reads(&ended), ["Index Scan using leases_pkey on leases"], "{at}: {ended}");
                assert_eq!(reads(&finished), ["Index Scan using attempts_pkey on attempts"], "{at}: {finished}");
                assert_eq!(reads(&granted), ["Index Scan using attempts_pkey on attempts"], "{at}: {granted}");
                assert_eq!(reads(&cases), ["Index Scan using cases_pkey on cases"], "{at}: {cases}");
            }
        }
    }
}
