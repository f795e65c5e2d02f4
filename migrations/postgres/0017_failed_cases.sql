-- A run's failed cases, which its page and a comparison explain, found
-- without reading the run's other cases (a nightly run has 10,000).
CREATE INDEX cases_failed ON cases (run_id, ordinal) WHERE final_result = 'failed';
