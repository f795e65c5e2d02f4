-- WebDriver sessions of the facade: which device each held, what its
-- client asked for, and how it ended; the dashboard's session pages.
CREATE TABLE webdriver_sessions (
    id                TEXT PRIMARY KEY,
    device_id         TEXT NOT NULL,
    worker_id         TEXT NOT NULL,
    platform          TEXT NOT NULL,
    capabilities_json TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    ended_at          BIGINT,
    end_reason        TEXT
);
CREATE INDEX webdriver_sessions_by_start ON webdriver_sessions (created_at);
-- Each command of a session: what it was, how long it took, its outcome
-- (`ok` or the W3C error) and, for a failure, the screen the session last
-- saw, as its page source.
CREATE TABLE webdriver_commands (
    session_id  TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    at          BIGINT NOT NULL,
    command     TEXT NOT NULL,
    ms          BIGINT NOT NULL,
    outcome     TEXT NOT NULL,
    message     TEXT,
    screen_xml  TEXT,
    PRIMARY KEY (session_id, seq)
);
