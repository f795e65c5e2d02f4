-- The flaky page over a window of days of a long history (issue 30): a
-- nightly suite adds a row per case and day to case_days, so 14 days of
-- 10,000 cases are 140,000 rows. The cases that cost retries and those
-- whose result flipped are a few of them: each list reads its own from a
-- partial index. The slowest cases read every passing row of the window,
-- from an index that carries what they sum (no table rows).
CREATE INDEX case_days_retried ON case_days (project, day) WHERE retries > 0;
CREATE INDEX case_days_flipped ON case_days (project, day) WHERE flips > 0;
CREATE INDEX case_days_passes ON case_days (project, day, case_id, passes, passed_ms, max_passed_ms) WHERE passes > 0;
