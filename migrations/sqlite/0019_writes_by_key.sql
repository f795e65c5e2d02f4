-- The writes of every attempt find their rows by key: a result its attempt
-- by lease and its lease by id, a grant its attempt by the primary key. An
-- index on what is still open gave the planner another way, which reads
-- every open attempt (or lease) for each write.
--
-- Open attempts are read only when a coordinator starts: through the runs
-- still going and their attempts' primary key.
DROP INDEX attempts_state;
CREATE INDEX runs_going ON runs (id) WHERE finished_at IS NULL;
-- A pending attempt has no lease yet, and no one looks one up by a lease
-- it has not got: a submit wrote an entry per first attempt for nothing.
DROP INDEX attempts_lease;
CREATE INDEX attempts_lease ON attempts (lease_id) WHERE lease_id IS NOT NULL;
-- Nothing reads leases by their end or their worker. A run's leases are
-- found to end them (a cancel) and to remove them (retention, which read
-- the whole table for each batch of cases).
DROP INDEX leases_open;
DROP INDEX leases_worker;
CREATE INDEX leases_run ON leases (run_id, case_id);
