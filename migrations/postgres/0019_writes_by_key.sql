-- The writes of every attempt find their rows by key: a result its attempt
-- by lease and its lease by id, a grant its attempt by the primary key. An
-- index on what is still open gave the planner another way, which it took
-- whenever its statistics said few attempts or leases were open: each
-- write then read every open attempt (or lease) and the index entries their
-- earlier versions left, 20 to 40 ms for a burst of eight results at 1,000
-- devices, more with the fleet and the run's size.
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
-- the whole table for each batch of cases). With no index on the columns a
-- heartbeat or a lease's end changes, those updates write no index entry
-- (HOT), given room on the row's page.
DROP INDEX leases_open;
DROP INDEX leases_worker;
CREATE INDEX leases_run ON leases (run_id, case_id);
ALTER TABLE leases SET (fillfactor = 80);
