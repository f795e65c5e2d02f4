-- Each failed attempt's cause and signature (`argus_grid::explain`),
-- written once its run has ended: what the flaky page ranks across runs.
ALTER TABLE observations ADD COLUMN cause TEXT;
ALTER TABLE observations ADD COLUMN signature TEXT;
CREATE INDEX observations_failures ON observations (project, finished_at) WHERE result = 'failed';
CREATE INDEX observations_unexplained ON observations (finished_at) WHERE result = 'failed' AND cause IS NULL;
