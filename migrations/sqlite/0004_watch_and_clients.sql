-- A run's record is resumable: each finished attempt (and each one taken
-- back from the infrastructure) has its place in the run's updates, so a
-- client that lost its stream watches again from the last one it has.
ALTER TABLE attempts ADD COLUMN seq BIGINT;
CREATE INDEX attempts_run_seq ON attempts (run_id, seq);
-- A run submitted detached goes on without a client; any other is
-- cancelled when no client has watched it for the coordinator's grace.
ALTER TABLE runs ADD COLUMN detached BIGINT NOT NULL DEFAULT 0;
-- Why a run waits, while nothing can run its attempts (the dashboard
-- shows it); NULL when it does not wait.
ALTER TABLE runs ADD COLUMN waiting_reason TEXT;
