-- The app's health around each attempt, when its hello listed `memory` or
-- `profile` (issue 29): the heap and resident memory in KiB before the
-- first step and after the last, and React's commits and render time (µs)
-- over the attempt. NULL where the app did not say. Whole numbers: sqlx's
-- Any driver binds a NULL double as a float4 on Postgres, which breaks a
-- prepared statement that later gets a value.
ALTER TABLE attempts ADD COLUMN heap_start_kb INTEGER;
ALTER TABLE attempts ADD COLUMN heap_end_kb INTEGER;
ALTER TABLE attempts ADD COLUMN rss_start_kb INTEGER;
ALTER TABLE attempts ADD COLUMN rss_end_kb INTEGER;
ALTER TABLE attempts ADD COLUMN render_commits INTEGER;
ALTER TABLE attempts ADD COLUMN render_us INTEGER;
