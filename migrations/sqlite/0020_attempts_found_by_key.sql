-- An attempt is found by its primary key everywhere now: a result's lease,
-- once ended, returns its attempt's key, and the attempt is finished by it
-- (as a grant, a take-back and a cancel already found theirs). Nothing looks
-- an attempt up by its lease, and the index cost two entries per attempt:
-- one when it was leased, one when it finished.
DROP INDEX attempts_lease;
