-- Muted cases: a muted case still runs and is recorded, but its failure
-- does not fail its run. One row per project and case while muted.
CREATE TABLE mutes (
    project  TEXT NOT NULL,
    case_id  TEXT NOT NULL,
    reason   TEXT NOT NULL,
    owner    TEXT,
    -- Unmuted by itself at this time (epoch ms), when set.
    until_ms BIGINT,
    muted_by TEXT NOT NULL,
    muted_at BIGINT NOT NULL,
    PRIMARY KEY (project, case_id)
);

-- Every mute and unmute, with who, why and when: kept for the flaky page.
CREATE TABLE mute_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    project  TEXT NOT NULL,
    case_id  TEXT NOT NULL,
    action   TEXT NOT NULL,
    by_who   TEXT NOT NULL,
    reason   TEXT NOT NULL,
    at       BIGINT NOT NULL
);
CREATE INDEX mute_events_project_at ON mute_events (project, at DESC);

-- Why a case of a run was muted when the run was submitted (NULL: it was
-- not): its failure does not fail the run.
ALTER TABLE cases ADD COLUMN muted TEXT;
-- How many of a run's failed cases were muted.
ALTER TABLE runs ADD COLUMN muted_failed BIGINT;
-- The run whose failed cases this run runs again (`--rerun-failed`).
ALTER TABLE runs ADD COLUMN rerun_of TEXT;
-- Whether what follows a run's end was done (mutes lifted by passes,
-- webhooks queued): a coordinator that stopped between the two does it
-- when it starts again. Runs that ended before this column are done.
ALTER TABLE runs ADD COLUMN followed_up BIGINT NOT NULL DEFAULT 0;
UPDATE runs SET followed_up = 1 WHERE finished_at IS NOT NULL;
CREATE INDEX runs_to_follow_up ON runs (finished_at) WHERE followed_up = 0 AND finished_at IS NOT NULL;
