-- What the flaky-and-slow page reads, kept up to date as runs end rather
-- than aggregated from every attempt per request: one row per project,
-- case and day (of the run's start).
CREATE TABLE case_days (
    project         TEXT NOT NULL,
    case_id         TEXT NOT NULL,
    day             BIGINT NOT NULL,
    -- Attempts after the first (infrastructure failures are not attempts),
    -- those of them that passed, and the runs they were in.
    retries         BIGINT NOT NULL DEFAULT 0,
    passed_on_retry BIGINT NOT NULL DEFAULT 0,
    retried_runs    BIGINT NOT NULL DEFAULT 0,
    -- Passing attempts and their time.
    passes          BIGINT NOT NULL DEFAULT 0,
    passed_ms       BIGINT NOT NULL DEFAULT 0,
    max_passed_ms   BIGINT NOT NULL DEFAULT 0,
    -- Final results that differ from the case's previous run's.
    flips           BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (project, day, case_id)
);
-- Each case's last final result (passed or failed) in a project, for the
-- next run's flips.
CREATE TABLE case_last (
    project      TEXT NOT NULL,
    case_id      TEXT NOT NULL,
    final_result TEXT NOT NULL,
    PRIMARY KEY (project, case_id)
);
-- Whether a run's attempts are in case_days: runs that ended before this
-- migration are counted when the coordinator next opens the store.
ALTER TABLE runs ADD COLUMN counted BIGINT NOT NULL DEFAULT 0;
CREATE INDEX runs_uncounted ON runs (id) WHERE counted = 0;
