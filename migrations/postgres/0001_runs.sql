-- Runs, their cases and every attempt; the fleet; leases. Times are epoch
-- milliseconds, JSON is text (the same columns on SQLite).

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    project       TEXT NOT NULL,
    branch        TEXT,
    commit_sha    TEXT,
    trigger_by    TEXT,
    selector_json TEXT NOT NULL,
    config_json   TEXT NOT NULL,
    retries       BIGINT NOT NULL,
    priority      BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT,
    manifest_json TEXT NOT NULL
);
CREATE INDEX runs_started ON runs (started_at DESC);
CREATE INDEX runs_project_started ON runs (project, started_at DESC);

CREATE TABLE run_files (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path   TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (run_id, path)
);

CREATE TABLE cases (
    run_id          TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    case_id         TEXT NOT NULL,
    file            TEXT NOT NULL,
    title           TEXT,
    ordinal         BIGINT NOT NULL,
    expected_ms     BIGINT NOT NULL,
    estimate_source TEXT NOT NULL,
    final_result    TEXT,
    PRIMARY KEY (run_id, case_id)
);

-- One row per attempt; infrastructure failures are rows of their own
-- (attempt numbers count only real attempts).
CREATE TABLE attempts (
    run_id         TEXT NOT NULL,
    case_id        TEXT NOT NULL,
    attempt        BIGINT NOT NULL,
    try_no         BIGINT NOT NULL,
    state          TEXT NOT NULL,
    lease_id       TEXT,
    device_id      TEXT,
    worker_id      TEXT,
    platform       TEXT,
    result         TEXT,
    infrastructure BIGINT NOT NULL DEFAULT 0,
    error          TEXT,
    created_at     BIGINT NOT NULL,
    started_at     BIGINT,
    finished_at    BIGINT,
    ms             BIGINT,
    run_case_json  TEXT,
    PRIMARY KEY (run_id, case_id, attempt, try_no),
    FOREIGN KEY (run_id, case_id) REFERENCES cases (run_id, case_id) ON DELETE CASCADE
);
CREATE INDEX attempts_state ON attempts (state);
CREATE INDEX attempts_history ON attempts (case_id, platform, result, finished_at DESC);
CREATE INDEX attempts_device ON attempts (device_id, finished_at DESC);

CREATE TABLE steps (
    run_id  TEXT NOT NULL,
    case_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    try_no  BIGINT NOT NULL,
    idx     BIGINT NOT NULL,
    step    TEXT NOT NULL,
    status  TEXT NOT NULL,
    ms      BIGINT NOT NULL,
    error   TEXT,
    PRIMARY KEY (run_id, case_id, attempt, try_no, idx)
);

CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    hostname   TEXT NOT NULL,
    connected  BIGINT NOT NULL,
    draining   BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL
);

CREATE TABLE devices (
    id                TEXT PRIMARY KEY,
    worker_id         TEXT NOT NULL,
    slot              TEXT NOT NULL,
    platform          TEXT NOT NULL,
    state             TEXT NOT NULL,
    device_json       TEXT NOT NULL,
    quarantined       BIGINT NOT NULL DEFAULT 0,
    quarantine_reason TEXT,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX devices_worker ON devices (worker_id);

CREATE TABLE leases (
    id         TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    case_id    TEXT NOT NULL,
    attempt    BIGINT NOT NULL,
    try_no     BIGINT NOT NULL,
    device_id  TEXT NOT NULL,
    worker_id  TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    deadline   BIGINT NOT NULL,
    ended_at   BIGINT,
    end_reason TEXT
);
CREATE INDEX leases_open ON leases (ended_at, deadline);
CREATE INDEX leases_worker ON leases (worker_id, ended_at);
