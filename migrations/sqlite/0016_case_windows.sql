-- A comparison of two nightly runs (issue 30) judges each case's duration
-- against its last 30 passes on its platform: reading them from the
-- attempts for 10,000 cases cost half a second on a year of history. They
-- are kept per case and platform as runs are counted (`recent_ms`:
-- milliseconds, comma-separated, ascending); a case that passed in a run
-- not counted yet is read from the attempts.
CREATE TABLE case_windows (
    case_id TEXT NOT NULL,
    platform TEXT NOT NULL,
    recent_ms TEXT NOT NULL,
    PRIMARY KEY (platform, case_id)
);
