-- A year of history (issue 30: 10 M attempts, 100,000 runs).
--
-- A case's last passes on a platform (the scheduler's estimates, a
-- comparison's spreads) are read from this index alone: it carries their
-- duration, so a nightly suite's 10,000 cases read 30 index entries each
-- and no table rows.
DROP INDEX attempts_history;
CREATE INDEX attempts_history ON attempts (case_id, platform, result, finished_at DESC, ms);
-- Each case's owner as the last counted run of its project named it
-- (TESTOWNERS), kept with its last result: the flaky page's owner filter
-- reads one row per case instead of every case row of its window. Filled
-- as runs are counted from now on.
ALTER TABLE case_last ADD COLUMN owner TEXT;
