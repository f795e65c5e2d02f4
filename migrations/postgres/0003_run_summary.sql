-- What the runs list filters and shows, without reading every manifest:
-- set when a run finishes; backfilled from the manifests of finished runs.
ALTER TABLE runs ADD COLUMN platform TEXT;
ALTER TABLE runs ADD COLUMN result TEXT;
ALTER TABLE runs ADD COLUMN cases BIGINT;
ALTER TABLE runs ADD COLUMN passed BIGINT;
ALTER TABLE runs ADD COLUMN failed BIGINT;
ALTER TABLE runs ADD COLUMN retried BIGINT;

UPDATE runs SET
    platform = manifest_json::json->>'platform',
    cases    = (manifest_json::json->'totals'->>'cases')::BIGINT,
    passed   = (manifest_json::json->'totals'->>'passed')::BIGINT,
    failed   = (manifest_json::json->'totals'->>'failed')::BIGINT,
    retried  = (manifest_json::json->'totals'->>'retried')::BIGINT
WHERE finished_at IS NOT NULL AND manifest_json::json->'totals' IS NOT NULL;
UPDATE runs SET result = CASE WHEN failed > 0 THEN 'failed' ELSE 'passed' END WHERE cases IS NOT NULL;
UPDATE runs SET result = 'cancelled' WHERE finished_at IS NOT NULL AND result IS NULL;

CREATE INDEX runs_branch_started ON runs (branch, started_at DESC);
CREATE INDEX runs_result_started ON runs (result, started_at DESC);
CREATE INDEX runs_platform_started ON runs (platform, started_at DESC);
-- A case's history across runs, newest first.
CREATE INDEX attempts_case_finished ON attempts (case_id, finished_at DESC);
