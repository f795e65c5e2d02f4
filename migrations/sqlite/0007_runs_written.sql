-- A run is written in parts of a few hundred cases, each its own
-- transaction, so that a suite of 10,000 cases does not hold SQLite's one
-- writer (and every other run's results) for the whole of its write.
-- `written` is 0 until the last part is in; a run left at 0 by a
-- coordinator that stopped while writing it, whose client was never told
-- of it, is removed when the next coordinator starts.
ALTER TABLE runs ADD COLUMN written BIGINT NOT NULL DEFAULT 1;
