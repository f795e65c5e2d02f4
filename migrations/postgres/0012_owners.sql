-- Who owns each case of a run (its project's TESTOWNERS, read when the run
-- was submitted; owners separated by spaces), and the TESTOWNERS text
-- itself, which a rerun of the run keeps.
ALTER TABLE cases ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN testowners TEXT;
