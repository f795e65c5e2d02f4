-- An attempt's row is written three times (pending, leased, done), and a
-- Postgres update that changes an indexed column writes a new entry in
-- every index whose condition the row meets: each index holds only the
-- rows its readers ask for. A 100,000-case submit wrote seven index
-- entries per first attempt, two now.
-- Open attempts, read back when a coordinator starts.
DROP INDEX attempts_state;
CREATE INDEX attempts_state ON attempts (state) WHERE state IN ('pending', 'leased');
-- Results, read by the scheduler's estimates and the flaky page (`result = …`).
DROP INDEX attempts_history;
CREATE INDEX attempts_history ON attempts (case_id, platform, result, finished_at DESC, ms) WHERE result IS NOT NULL;
-- Finished attempts by device and by case (`finished_at` compared or
-- required by every reader).
DROP INDEX attempts_device;
CREATE INDEX attempts_device ON attempts (device_id, finished_at DESC) WHERE finished_at IS NOT NULL;
DROP INDEX attempts_case_finished;
CREATE INDEX attempts_case_finished ON attempts (case_id, finished_at DESC) WHERE finished_at IS NOT NULL;
-- A run's attempts are found by the primary key's first column.
DROP INDEX attempts_run_seq;
-- Foreign keys cost a trigger query per row: a 100,000-case submit spent
-- about a second checking that each case's run and each first attempt's
-- case exist, which the store has just written itself. It is the only
-- writer; it makes attempts only from its cases and removes a run's rows
-- itself, the rows that refer to others first (`remove_runs`, retention).
-- SQLite keeps them: it cannot drop a constraint without rebuilding the
-- table, and its checks are in process.
ALTER TABLE attempts DROP CONSTRAINT attempts_run_id_case_id_fkey;
ALTER TABLE cases DROP CONSTRAINT cases_run_id_fkey;
ALTER TABLE run_files DROP CONSTRAINT run_files_run_id_fkey;
