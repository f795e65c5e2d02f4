-- A run's own app builds (issue 49), by content: the file lives in the
-- coordinator's builds folder under its sha256; this row says what it is,
-- as the build's own Info.plist or manifest says (read by the coordinator
-- when it was received), and when it was last used.
CREATE TABLE builds (
    sha256 TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    bundle_id TEXT NOT NULL,
    version TEXT NOT NULL,
    build_number TEXT NOT NULL,
    min_os TEXT,
    launch TEXT,
    -- Native ABIs, comma-separated; '' for none.
    abis TEXT NOT NULL,
    size BIGINT NOT NULL,
    file_name TEXT NOT NULL,
    uploaded_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL
);
