-- What the worker saw at each step of an attempt (an AttemptObserved,
-- encoded as protobuf): kept for every failed attempt, for each case's
-- baselines, and for the passing attempt a failure was compared with; the
-- other passing attempts' only for a window (`prune_observations`).
CREATE TABLE observations (
    run_id           TEXT NOT NULL,
    case_id          TEXT NOT NULL,
    attempt          BIGINT NOT NULL,
    try_no           BIGINT NOT NULL,
    project          TEXT NOT NULL,
    -- '' when the run named none.
    branch           TEXT NOT NULL,
    commit_sha       TEXT NOT NULL,
    platform         TEXT NOT NULL,
    device_id        TEXT NOT NULL,
    worker_id        TEXT NOT NULL,
    result           TEXT NOT NULL,
    finished_at      BIGINT NOT NULL,
    body             BYTEA NOT NULL,
    -- For a failed attempt: the passing attempt it is compared with, chosen
    -- when it was recorded (the case's baseline then).
    baseline_run_id  TEXT,
    baseline_attempt BIGINT,
    baseline_try_no  BIGINT,
    PRIMARY KEY (run_id, case_id, attempt, try_no)
);
CREATE INDEX observations_age ON observations (finished_at);
CREATE INDEX observations_baseline ON observations (baseline_run_id, case_id, baseline_attempt, baseline_try_no);
-- The latest passing attempt of each case per platform and branch: what
-- the next failure there is compared with. Its observation outlives its run.
CREATE TABLE baselines (
    project     TEXT NOT NULL,
    case_id     TEXT NOT NULL,
    platform    TEXT NOT NULL,
    branch      TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    try_no      BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    PRIMARY KEY (project, case_id, platform, branch)
);
-- A case's results across runs ("when it started").
CREATE INDEX cases_case ON cases (case_id);
